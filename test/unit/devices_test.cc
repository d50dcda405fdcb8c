// Grouping NICs into NCCL devices: each NIC's bandwidth is seen exactly once.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <string.h>

extern "C" {
#include "topo/devices.h"
#include "wire/wire.h"
}

namespace {

braid_iface Nic(const char *name, const char *pci, int speed) {
  braid_iface i;
  memset(&i, 0, sizeof i);
  strcpy(i.name, name);
  strcpy(i.pci_path, pci);
  i.speed_mbps = speed;
  return i;
}

TEST(Devices, VirtualNicsFormOneDevicePciNicsOneEach) {
  braid_iface nics[] = {Nic("veth0", "", 10000), Nic("ib0", "/sys/devices/pci0000:00/0000:00:01.0", 200000),
                        Nic("veth1", "", 10000), Nic("ib1", "/sys/devices/pci0000:00/0000:00:02.0", 200000)};
  braid_device d[8];
  ASSERT_EQ(braid_devices_group(nics, 4, "", d, 8), 3);
  EXPECT_STREQ(d[0].name, "veth0+veth1");
  EXPECT_EQ(d[0].nrails, 2);
  EXPECT_EQ(d[0].pci_path, nullptr);
  EXPECT_EQ(d[0].speed_mbps, 20000) << "a device's speed is the sum of its rails'";
  EXPECT_STREQ(d[1].name, "ib0");
  EXPECT_STREQ(d[1].pci_path, nics[1].pci_path);
  EXPECT_STREQ(d[2].name, "ib1");
  int rails = 0;
  for (int i = 0; i < 3; i++) rails += d[i].nrails;
  EXPECT_EQ(rails, 4) << "every NIC in exactly one device";
}

TEST(Devices, ExplicitGroups) {
  braid_iface nics[] = {Nic("eth0", "", 0), Nic("eth1", "", 0), Nic("eth2", "", 0), Nic("eth3", "", 0)};
  braid_device d[8];
  ASSERT_EQ(braid_devices_group(nics, 4, "eth0,eth2;eth1;eth3", d, 8), 3);
  EXPECT_STREQ(d[0].name, "eth0+eth2");
  EXPECT_EQ(d[0].rail[1], &nics[2]) << "rail order follows the spec";
  EXPECT_STREQ(d[1].name, "eth1");
  EXPECT_STREQ(d[2].name, "eth3");
  EXPECT_EQ(d[0].speed_mbps, 20000) << "unknown speeds count as NCCL's default 10 Gb/s";
}

// NCCL places a device by one NIC endpoint path (the last component is the bus id; a bridge's
// path would become a NIC leaf and hide the GPUs below it), so a grouped device reports the path
// of its first rail that has one, never a common prefix.
TEST(Devices, GroupedDeviceReportsAMemberNicEndpoint) {
  braid_iface nics[] = {Nic("veth0", "", 0),
                        Nic("ib0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0", 0),
                        Nic("ib1", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0", 0)};
  braid_device d[4];
  ASSERT_EQ(braid_devices_group(nics, 3, "veth0,ib0,ib1", d, 4), 1);
  EXPECT_EQ(d[0].pci_path, nics[1].pci_path) << "the first rail with a PCI device, not rail 0's none";
  const braid_iface* far = nullptr;
  EXPECT_EQ(braid_device_pci_spread(&d[0], &far), 0) << "both NICs below one root port";
  EXPECT_EQ(far, nullptr);
}

TEST(Devices, RailsBelowDifferentRootPortsAreFlagged) {
  braid_iface nics[] = {Nic("ib0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0),
                        Nic("ib1", "/sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0", 0),
                        Nic("ib2", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 0),
                        Nic("ib3", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.1", 0)};
  braid_device d[4];
  ASSERT_EQ(braid_devices_group(nics, 4, "ib0,ib1;ib3,ib2;ib0x", d, 4), -1) << "unknown rail";
  ASSERT_EQ(braid_devices_group(nics, 4, "ib0,ib1;ib3,ib2", d, 4), 2);
  const braid_iface* far = nullptr;
  EXPECT_EQ(braid_device_pci_spread(&d[0], &far), 1) << "another root port of the same CPU";
  EXPECT_EQ(far, &nics[1]);
  EXPECT_EQ(braid_device_pci_spread(&d[1], &far), 1) << "another root complex";
  EXPECT_EQ(far, &nics[2]);
  ASSERT_EQ(braid_devices_group(nics, 4, "ib0,ib3;ib1;ib2", d, 4), 3);
  EXPECT_EQ(braid_device_pci_spread(&d[0], &far), 0) << "two functions of one NIC";
  EXPECT_EQ(braid_device_pci_spread(&d[1], &far), 0) << "one rail";
  // NICs on the root bus itself (VMs, clouds; virtio below its function): NCCL attaches both at
  // the CPU, so they are together unless their root complexes differ.
  braid_iface vm[] = {Nic("ens5", "/sys/devices/pci0000:00/0000:00:05.0", 0),
                      Nic("ens6", "/sys/devices/pci0000:00/0000:00:06.0", 0),
                      Nic("eth0", "/sys/devices/pci0000:00/0000:00:03.0/virtio0", 0),
                      Nic("ens7", "/sys/devices/pci0000:80/0000:80:07.0", 0)};
  ASSERT_EQ(braid_devices_group(vm, 4, "ens5,ens6,eth0;ens7", d, 4), 2);
  EXPECT_EQ(braid_device_pci_spread(&d[0], &far), 0) << "root-bus NICs of one root complex";
  ASSERT_EQ(braid_devices_group(vm, 4, "ens5,ens7;ens6;eth0", d, 4), 3);
  EXPECT_EQ(braid_device_pci_spread(&d[0], &far), 1) << "root-bus NICs of two root complexes";
}

TEST(Devices, BadSpecsAreRejected) {
  braid_iface nics[] = {Nic("eth0", "", 0), Nic("eth1", "", 0)};
  braid_device d[8];
  EXPECT_EQ(braid_devices_group(nics, 2, "eth0,eth9", d, 8), -1) << "not a selected NIC";
  EXPECT_EQ(braid_devices_group(nics, 2, "eth0;eth0", d, 8), -1) << "listed twice";
  EXPECT_EQ(braid_devices_group(nics, 2, "eth0,,eth1", d, 8), -1) << "empty name";
  EXPECT_EQ(braid_devices_group(nics, 2, "eth", d, 8), -1) << "names are exact, not prefixes";
}

TEST(WireRailList, RoundTripAndRejects) {
  braid_raillist in;
  memset(&in, 0, sizeof in);
  in.nrails = 4;
  for (int r = 0; r < 4; r++) {
    sockaddr_in *a = (sockaddr_in *)&in.addr[r];
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)(1000 + r));
    a->sin_addr.s_addr = htonl(0x0a4d0001u + (uint32_t)(r << 8));
  }
  uint8_t buf[BRAID_RAILLIST_BYTES(BRAID_RAILLIST_MAX)];
  size_t len = braid_raillist_encode(&in, buf);
  EXPECT_EQ(len, (size_t)BRAID_RAILLIST_BYTES(4));
  char err[128];
  EXPECT_EQ(braid_raillist_len(buf, err, sizeof err), (int)len);
  braid_raillist out;
  ASSERT_EQ(braid_raillist_decode(buf, len, &out, err, sizeof err), 0) << err;
  ASSERT_EQ(out.nrails, 4);
  for (int r = 0; r < 4; r++)
    EXPECT_EQ(0, memcmp(&in.addr[r], &out.addr[r], sizeof(sockaddr_in))) << r;
  EXPECT_EQ(braid_raillist_decode(buf, len - 1, &out, err, sizeof err), -1) << "truncated";
  buf[6] = 0;
  EXPECT_EQ(braid_raillist_len(buf, err, sizeof err), -1) << "zero rails";
  buf[6] = 17;
  EXPECT_EQ(braid_raillist_len(buf, err, sizeof err), -1) << "too many rails";
  buf[6] = 4;
  buf[0] ^= 1;
  EXPECT_EQ(braid_raillist_len(buf, err, sizeof err), -1) << "bad magic";
}

}  // namespace

namespace {

TEST(Devices, FuseMakesOneVirtualDeviceOfTheChildrensRails) {
  braid_iface nics[] = {Nic("ib0", "/p/0", 200000), Nic("ib1", "/p/1", 200000), Nic("ib2", "/p/2", 100000)};
  braid_device d[8];
  ASSERT_EQ(braid_devices_group(nics, 3, "", d, 8), 3);
  braid_device v;
  char err[128];
  int kids[] = {2, 0};
  ASSERT_EQ(braid_devices_fuse(d, 3, kids, 2, &v, err, sizeof err), 0) << err;
  EXPECT_STREQ(v.name, "ib2+ib0");
  EXPECT_EQ(v.nrails, 2);
  EXPECT_EQ(v.speed_mbps, 300000);
  EXPECT_EQ(v.nchildren, 2);
  EXPECT_EQ(v.children[0], 2);
  EXPECT_EQ(v.children[1], 0);
  int none[] = {0};
  EXPECT_EQ(braid_devices_fuse(d, 3, none, 0, &v, err, sizeof err), -1) << "a vNIC of no device";
  int dup[] = {1, 1};
  EXPECT_EQ(braid_devices_fuse(d, 3, dup, 2, &v, err, sizeof err), -1);
  int bad[] = {0, 3};
  EXPECT_EQ(braid_devices_fuse(d, 3, bad, 2, &v, err, sizeof err), -1) << "only physical devices";
}

// NCCL 2.26 calls makeVDevice with one device for every NIC it does not merge, and on failure
// marks it unplaced and restarts its placement loop, forever: one device must give an alias.
TEST(Devices, FuseOfOneDeviceIsAnAliasOfIt) {
  braid_iface nics[] = {Nic("ib0", "/p/0", 200000), Nic("ib1", "/p/1", 100000)};
  braid_device d[8];
  ASSERT_EQ(braid_devices_group(nics, 2, "", d, 8), 2);
  braid_device v;
  char err[128];
  int one[] = {1};
  ASSERT_EQ(braid_devices_fuse(d, 2, one, 1, &v, err, sizeof err), 0) << err;
  EXPECT_STREQ(v.name, d[1].name) << "NCCL finds the vNIC's topology node by this name";
  EXPECT_EQ(v.nrails, d[1].nrails);
  EXPECT_EQ(v.rail[0], d[1].rail[0]);
  EXPECT_EQ(v.speed_mbps, d[1].speed_mbps);
  EXPECT_EQ(v.pci_path, d[1].pci_path);
  EXPECT_EQ(v.nchildren, 1);
  EXPECT_EQ(v.children[0], 1);
  int bad[] = {2};
  EXPECT_EQ(braid_devices_fuse(d, 2, bad, 1, &v, err, sizeof err), -1) << "only physical devices";
}

}  // namespace
