// Grouping NICs into NCCL devices by PCI locality (hwloc), on a topology read from XML.
//
// test/data/topo-8gpu.xml (hand-made, checked with lstopo): two packages, eight NVIDIA GPUs.
//   host bridge 0000:00  root port 00:01.0, switch A: GPU0 03:00.0, GPU1 04:00.0, nic0 05:00.0, nic1 06:00.0
//                        root port 00:02.0, switch B over two sub-switches: GPU2 14:00.0 + nic2 15:00.0,
//                                                                             GPU3 1a:00.0 + nic3 1b:00.0
//                        root port 00:03.0: eno1 20:00.0 (shares only the host bridge with GPUs)
//   host bridge 0000:80  root port 80:01.0, switch C: GPU4 83:00.0, GPU5 84:00.0, nic4 85:00.0, nic5 86:00.0
//                        root port 80:02.0, switch D: GPU6 92:00.0, GPU7 93:00.0 (class 0300), no NIC
//                        root port 80:03.0, switch E: an ASPEED VGA a2:00.0 (not a GPU), nic6 a3:00.0
#include <gtest/gtest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "topo/devices.h"
#include "topo/topo.h"
}

namespace {

std::string TopoXml() {
  std::string f = __FILE__;  // test/unit/devices_hwloc_test.cc, relative to the repository root
  return f.substr(0, f.rfind("/unit/")) + "/data/topo-8gpu.xml";
}

int64_t Bus(unsigned bus) { return (int64_t)bus << 16; }  // 0000:bus:00.0

braid_iface Nic(const char *name, const char *pci, int speed) {
  braid_iface i;
  memset(&i, 0, sizeof i);
  strcpy(i.name, name);
  strcpy(i.pci_path, pci);
  i.speed_mbps = speed;
  return i;
}

// The machine's NICs, deliberately not in PCI order (getifaddrs' order is no PCI order).
std::vector<braid_iface> Nics() {
  return {
      Nic("veth0", "", 0),
      Nic("nic5", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:03.0/0000:86:00.0", 200000),
      Nic("eno1", "/sys/devices/pci0000:00/0000:00:03.0/0000:20:00.0", 1000),
      Nic("nic1", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:03.0/0000:06:00.0", 200000),
      Nic("ghost0", "/sys/devices/pci0000:f0/0000:f0:00.0", 25000),  // not in the topology
      Nic("nic3", "/sys/devices/pci0000:00/0000:00:02.0/0000:10:00.0/0000:11:01.0/0000:18:00.0/"
                  "0000:19:01.0/0000:1b:00.0/virtio3", 100000),  // a driver's node below the PCI one
      Nic("nic0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0", 200000),
      Nic("veth1", "", 0),
      Nic("nic4", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:02.0/0000:85:00.0", 200000),
      Nic("nic2", "/sys/devices/pci0000:00/0000:00:02.0/0000:10:00.0/0000:11:00.0/0000:12:00.0/"
                  "0000:13:01.0/0000:15:00.0", 100000),
      Nic("nic6", "/sys/devices/pci0000:80/0000:80:03.0/0000:a0:00.0/0000:a1:01.0/0000:a3:00.0", 100000),
  };
}

const braid_iface *Find(const std::vector<braid_iface> &v, const char *name) {
  for (const braid_iface &i : v)
    if (!strcmp(i.name, name)) return &i;
  return nullptr;
}

std::vector<std::string> Names(const braid_device *d, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; i++) v.push_back(d[i].name);
  return v;
}

// A copy of the topology with every NVIDIA vendor id changed: the same tree without a GPU.
std::string NoGpuXml() {
  std::ifstream in(TopoXml());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  for (size_t p; (p = s.find("[10de:")) != std::string::npos;) s.replace(p, 6, "[10df:");
  char path[] = "/tmp/braid-topo-nogpu-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, s.data(), s.size()), (ssize_t)s.size());
  close(fd);
  return path;
}

TEST(DevicesHwloc, BusIdsFromSysfsPaths) {
  EXPECT_EQ(braid_topo_busid("/sys/devices/pci0000:00/0000:00:01.0/0000:05:00.0"), Bus(5));
  EXPECT_EQ(braid_topo_busid("/sys/devices/pci0000:00/0000:00:03.0/virtio0"), (int64_t)3 << 8)
      << "the last PCI component, below which a driver may hang its own node";
  EXPECT_EQ(braid_topo_busid("/sys/devices/pci0001:00/0001:AB:1f.7"),
            (int64_t)1 << 24 | (int64_t)0xab << 16 | 0x1f << 8 | 7);
  EXPECT_EQ(braid_topo_busid("/sys/devices/virtual/net/veth0"), -1);
  EXPECT_EQ(braid_topo_busid("/sys/devices/pci0000:00/0000:00:20.0"), -1) << "device > 0x1f";
  EXPECT_EQ(braid_topo_busid(""), -1);
  char buf[16];
  EXPECT_STREQ(braid_topo_busid_str(braid_topo_busid("/x/0000:1b:00.0"), buf, sizeof buf), "0000:1b:00.0");
}

TEST(DevicesHwloc, NearestGpuByPciSwitch) {
  std::vector<braid_iface> nics = Nics();
  std::vector<int64_t> near(nics.size());
  ASSERT_EQ(braid_topo_nearest_gpus(TopoXml().c_str(), nics.data(), (int)nics.size(), near.data()), 8)
      << "8 NVIDIA GPUs of class 0302 or 0300; the ASPEED VGA is no GPU";
  std::vector<std::pair<std::string, int64_t>> want = {
      {"veth0", -1},      {"nic5", Bus(0x83)},  // GPU4 and GPU5 tie: the first in PCI order
      {"eno1", -1},                             // a root port of its own: only the host bridge
      {"nic1", Bus(0x03)}, {"ghost0", -1},      {"nic3", Bus(0x1a)},  // its sub-switch's GPU3
      {"nic0", Bus(0x03)}, {"veth1", -1},       {"nic4", Bus(0x83)},
      {"nic2", Bus(0x14)},                      // GPU2, not GPU3 across the upper switch
      {"nic6", -1},                             // its switch holds no NVIDIA GPU
  };
  for (size_t i = 0; i < nics.size(); i++) {
    EXPECT_EQ(want[i].first, nics[i].name);
    EXPECT_EQ(near[i], want[i].second) << nics[i].name;
  }
}

TEST(DevicesHwloc, NicsNearOneGpuFormOneDeviceInPciOrder) {
  std::vector<braid_iface> nics = Nics();
  braid_device d[BRAID_MAX_DEVS];
  int n = braid_devices_group_topo(nics.data(), (int)nics.size(), "", "auto", TopoXml().c_str(), d,
                                   BRAID_MAX_DEVS);
  ASSERT_EQ(n, 8);
  EXPECT_EQ(Names(d, n), (std::vector<std::string>{"nic0+nic1", "nic2", "nic3", "eno1", "nic4+nic5",
                                                   "nic6", "ghost0", "veth0+veth1"}));
  EXPECT_EQ(d[0].rail[0], Find(nics, "nic0")) << "rails in PCI order too";
  EXPECT_EQ(d[0].rail[1], Find(nics, "nic1"));
  EXPECT_STREQ(d[0].pci_path, Find(nics, "nic0")->pci_path) << "the first rail's path: NCCL reads a NIC's bus id from it";
  EXPECT_EQ(d[0].speed_mbps, 400000);
  EXPECT_STREQ(d[2].pci_path, Find(nics, "nic3")->pci_path);
  EXPECT_EQ(d[2].speed_mbps, 100000);
  EXPECT_EQ(d[3].speed_mbps, 1000);
  EXPECT_STREQ(d[4].pci_path, Find(nics, "nic4")->pci_path);
  EXPECT_EQ(d[4].speed_mbps, 400000);
  EXPECT_EQ(d[7].pci_path, nullptr);
  EXPECT_EQ(d[7].speed_mbps, 20000);
  int rails = 0;
  for (int i = 0; i < n; i++) rails += d[i].nrails;
  EXPECT_EQ(rails, (int)nics.size()) << "every NIC in exactly one device";

  braid_device g[BRAID_MAX_DEVS];
  ASSERT_EQ(braid_devices_group_topo(nics.data(), (int)nics.size(), nullptr, "gpu", TopoXml().c_str(), g,
                                     BRAID_MAX_DEVS), 8);
  EXPECT_EQ(Names(g, 8), Names(d, n)) << "gpu is auto when there are GPUs";
}

TEST(DevicesHwloc, SameTopologySameDevicesWhateverTheInterfaceOrder) {
  std::vector<braid_iface> a = Nics(), b(a.rbegin(), a.rend());
  std::swap(b[0], b[5]);
  braid_device da[BRAID_MAX_DEVS], db[BRAID_MAX_DEVS];
  int na = braid_devices_group_topo(a.data(), (int)a.size(), "", "auto", TopoXml().c_str(), da, BRAID_MAX_DEVS);
  int nb = braid_devices_group_topo(b.data(), (int)b.size(), "", "auto", TopoXml().c_str(), db, BRAID_MAX_DEVS);
  ASSERT_EQ(na, nb);
  for (int i = 0; i < na; i++) {
    if (da[i].pci_path) {
      EXPECT_STREQ(da[i].name, db[i].name) << i;  // PCI devices: names and order
    }
    EXPECT_EQ(da[i].speed_mbps, db[i].speed_mbps) << i;
  }
  EXPECT_STREQ(db[na - 1].name, "veth1+veth0") << "the NICs without PCI keep interface order";
}

TEST(DevicesHwloc, WithoutGpusOrWithNicGroupingADevicePerPciNic) {
  std::vector<braid_iface> nics = Nics();
  int n = (int)nics.size();
  braid_device want[BRAID_MAX_DEVS], d[BRAID_MAX_DEVS];
  int nwant = braid_devices_group(nics.data(), n, "", want, BRAID_MAX_DEVS);
  ASSERT_EQ(nwant, 10);
  EXPECT_EQ(Names(want, 3), (std::vector<std::string>{"veth0+veth1", "nic5", "eno1"})) << "today's rule";

  ASSERT_EQ(braid_devices_group_topo(nics.data(), n, "", "nic", TopoXml().c_str(), d, BRAID_MAX_DEVS), nwant);
  EXPECT_EQ(Names(d, nwant), Names(want, nwant)) << "nic: hwloc is not asked";

  std::string nogpu = NoGpuXml();
  std::vector<int64_t> near(nics.size());
  EXPECT_EQ(braid_topo_nearest_gpus(nogpu.c_str(), nics.data(), n, near.data()), 0);
  for (int64_t v : near) EXPECT_EQ(v, -1);
  for (const char *mode : {"auto", "gpu", ""}) {
    ASSERT_EQ(braid_devices_group_topo(nics.data(), n, "", mode, nogpu.c_str(), d, BRAID_MAX_DEVS), nwant) << mode;
    EXPECT_EQ(Names(d, nwant), Names(want, nwant)) << mode;
  }
  unlink(nogpu.c_str());
}

TEST(DevicesHwloc, UnreadableTopologyFallsBackNeverFails) {
  std::vector<braid_iface> nics = Nics();
  int n = (int)nics.size();
  braid_device want[BRAID_MAX_DEVS], d[BRAID_MAX_DEVS];
  int nwant = braid_devices_group(nics.data(), n, "", want, BRAID_MAX_DEVS);
  std::vector<int64_t> near(nics.size(), 7);
  EXPECT_EQ(braid_topo_nearest_gpus("/nonexistent/topo.xml", nics.data(), n, near.data()), -1);
  for (int64_t v : near) EXPECT_EQ(v, -1);
  char bad[] = "/tmp/braid-topo-bad-XXXXXX";
  int fd = mkstemp(bad);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "<topology", 9), 9);
  close(fd);
  for (const char *xml : {"/nonexistent/topo.xml", (const char *)bad})
    for (const char *mode : {"auto", "gpu"}) {
      ASSERT_EQ(braid_devices_group_topo(nics.data(), n, "", mode, xml, d, BRAID_MAX_DEVS), nwant) << xml << mode;
      EXPECT_EQ(Names(d, nwant), Names(want, nwant));
    }
  unlink(bad);
  EXPECT_EQ(braid_devices_group_topo(nics.data(), n, "", "numa", TopoXml().c_str(), d, BRAID_MAX_DEVS), -1)
      << "an unknown grouping is a configuration error";
}

TEST(DevicesHwloc, ExplicitRailsOverrideTheTopology) {
  std::vector<braid_iface> nics = Nics();
  braid_device d[BRAID_MAX_DEVS];
  ASSERT_EQ(braid_devices_group_topo(nics.data(), (int)nics.size(), "nic0,nic4;nic1", "gpu", TopoXml().c_str(),
                                     d, BRAID_MAX_DEVS), 2);
  EXPECT_STREQ(d[0].name, "nic0+nic4");
  EXPECT_STREQ(d[1].name, "nic1");
  EXPECT_EQ(braid_devices_group_topo(nics.data(), (int)nics.size(), "nic0;nic0", "auto", TopoXml().c_str(), d,
                                     BRAID_MAX_DEVS), -1);
}

TEST(DevicesHwloc, AGroupLargerThanTheRailLimitSplits) {
  // 20 netdevs on nic0's PCI function (a multi-port NIC or many VFs'd be alike): all near GPU0.
  std::vector<braid_iface> nics;
  for (int i = 0; i < 20; i++) {
    char name[16];
    snprintf(name, sizeof name, "p%02d", i);
    nics.push_back(Nic(name, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0", 0));
  }
  braid_device d[BRAID_MAX_DEVS];
  ASSERT_EQ(braid_devices_group_topo(nics.data(), (int)nics.size(), "", "auto", TopoXml().c_str(), d,
                                     BRAID_MAX_DEVS), 2);
  EXPECT_EQ(d[0].nrails, BRAID_MAX_RAILS);
  EXPECT_EQ(d[1].nrails, 20 - BRAID_MAX_RAILS);
  EXPECT_EQ(d[0].rail[0], &nics[0]) << "same bus id: by name";
  EXPECT_EQ(d[0].speed_mbps, BRAID_MAX_RAILS * 10000);
}

}  // namespace
