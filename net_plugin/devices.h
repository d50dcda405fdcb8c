/* NCCL devices as groups of rails (NICs).
 *
 * NCCL must see each NIC's bandwidth exactly once, so every selected interface belongs to exactly
 * one device.  BRAID_RAILS lists the groups explicitly ("eth0,eth1;eth2,eth3": two devices of two
 * rails); otherwise every NIC with a PCI device is a device of its own, and the NICs with none
 * (veth, virtual NICs, loopback) form one device together. */
#ifndef BRAID_DEVICES_H
#define BRAID_DEVICES_H

#include "ifaces.h"

#define BRAID_MAX_RAILS 16
#define BRAID_MAX_DEVS 32

struct braid_device {
  char name[160]; /* rail names joined by '+': unique and stable, NCCL's topology key */
  int nrails;
  const struct braid_iface *rail[BRAID_MAX_RAILS];
  const char *pci_path; /* first rail's PCI path, NULL when it has none */
  int speed_mbps;       /* sum over rails (a backup rail's bandwidth is its own device's) */
  const struct braid_iface *backup; /* BRAID_BACKUP_RAIL: a neighbouring device's NIC, or NULL */
  int nchildren;      /* a virtual device fused by makeVDevice: its physical devices */
  int children[8];
};

/* Fuses physical devices children[0..n) of devs (ndevs physical ones) into out: every rail of
 * each, in order.  0, or -1 with a reason in err (fewer than 2, too many, a bad or repeated
 * index, too many rails). */
int braid_devices_fuse(const struct braid_device *devs, int ndevs, const int *children, int n,
                       struct braid_device *out, char *err, size_t errlen);

/* Groups the n interfaces into devices; returns the count, or -1 (with a WARN) when spec names
 * an interface that is not selected, names one twice, or has an empty or oversized group. */
int braid_devices_group(const struct braid_iface *ifc, int n, const char *spec,
                        struct braid_device *out, int max);

#endif
