/* NCCL devices as groups of rails (NICs).
 *
 * NCCL must see each NIC's bandwidth exactly once, so every selected interface belongs to exactly
 * one device.  BRAID_RAILS lists the groups explicitly ("eth0,eth1;eth2,eth3": two devices of two
 * rails) and overrides everything else.  Otherwise, with BRAID_RAILS_GROUPING=auto (the default)
 * or gpu, NICs are grouped by PCI locality (topo.h, hwloc): the NICs whose nearest GPU, by
 * closest common PCI switch, is the same GPU form one device; a PCI NIC with no GPU near it is a
 * device of its own; devices and their rails come in PCI order (bus id of the first rail).  Its
 * PCI path is its first PCI rail's: NCCL places a device by one NIC endpoint (it keeps the path's
 * last component as the NIC's bus id and re-derives the ancestors from sysfs; a switch's or
 * bridge's path would become a NIC leaf there and hide the GPUs below it), as its own net_ib does
 * for a multi-NIC device; its speed is the sum of its rails'.  Without GPUs, when hwloc cannot load the
 * topology, or with BRAID_RAILS_GROUPING=nic, every NIC with a PCI device is a device of its own,
 * in interface order.  Always, the NICs with no PCI device (veth, virtual NICs, loopback) form one
 * device together. */
#ifndef BRAID_DEVICES_H
#define BRAID_DEVICES_H

#include "topo/ifaces.h"

#define BRAID_MAX_RAILS 16
#define BRAID_MAX_DEVS 32

struct braid_device {
  char name[160]; /* rail names joined by '+': unique and stable, NCCL's topology key */
  int nrails;
  const struct braid_iface *rail[BRAID_MAX_RAILS];
  const char *pci_path; /* first PCI rail's path (a NIC endpoint), NULL when no rail has one */
  int speed_mbps;       /* sum over rails (a backup rail's bandwidth is its own device's) */
  const struct braid_iface *backup; /* BRAID_BACKUP_RAIL: a neighbouring device's NIC, or NULL */
  int nchildren;      /* a virtual device fused by makeVDevice: its physical devices */
  int children[8];
};

/* Fuses physical devices children[0..n) of devs (ndevs physical ones) into out: every rail of
 * each, in order; one device gives an alias of it (same name, rails, speed, PCI path and backup
 * rail: NCCL 2.26 makes a virtual device of each NIC it does not merge, and loops forever when
 * that fails).  0, or -1 with a reason in err (none, too many, a bad or repeated index, too
 * many rails). */
int braid_devices_fuse(const struct braid_device *devs, int ndevs, const int *children, int n,
                       struct braid_device *out, char *err, size_t errlen);

/* Groups the n interfaces into devices without looking at the topology: spec's groups, else a
 * device per PCI NIC and one for the rest.  Returns the count, or -1 (with a WARN) when spec names
 * an interface that is not selected, names one twice, or has an empty or oversized group. */
int braid_devices_group(const struct braid_iface *ifc, int n, const char *spec,
                        struct braid_device *out, int max);

/* As braid_devices_group, but without spec the PCI NICs are grouped as grouping says: "auto" (or
 * "" or NULL) and "gpu" by GPU locality, "nic" a device each.  xml: an hwloc XML topology file
 * (tests), NULL for this machine's.  A topology that cannot be loaded or has no GPU never fails:
 * one INFO line (a WARN under "gpu") and a device per PCI NIC.  -1 also for an unknown grouping. */
int braid_devices_group_topo(const struct braid_iface *ifc, int n, const char *spec,
                             const char *grouping, const char *xml, struct braid_device *out,
                             int max);

/* Whether d's PCI rails sit below different PCI root ports (or root complexes) than the one
 * whose path d reports: NCCL then places the whole device at that NIC, and the others' traffic
 * crosses the CPU where NCCL's topology assumes it does not.  *other: such a rail. */
int braid_device_pci_spread(const struct braid_device *d, const struct braid_iface **other);

#endif
