#include "topo/devices.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "topo/topo.h"

static void dev_add_rail(struct braid_device *d, const struct braid_iface *ifc) {
  size_t len = strlen(d->name);
  snprintf(d->name + len, sizeof d->name - len, "%s%s", d->nrails ? "+" : "", ifc->name);
  /* The first rail with a PCI device: a NIC endpoint, as NCCL needs (see devices.h). */
  if (!d->pci_path && ifc->pci_path[0]) d->pci_path = ifc->pci_path;
  d->rail[d->nrails++] = ifc;
  d->speed_mbps += ifc->speed_mbps > 0 ? ifc->speed_mbps : 10000;
}

static int dev_find(const struct braid_iface *ifc, int n, const char *name, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(ifc[i].name) == len && !strncmp(ifc[i].name, name, len)) return i;
  return -1;
}

/* "a,b;c" -> groups; every name must be a selected interface, used once. */
static int dev_group_spec(const struct braid_iface *ifc, int n, const char *spec,
                          struct braid_device *out, int max) {
  int ndev = 0, used[BRAID_MAX_IFACES] = {0};
  const char *p = spec;
  while (*p) {
    if (ndev == max) return BRAID_WARN("BRAID_RAILS: more than %d devices", max), -1;
    struct braid_device *d = &out[ndev++];
    memset(d, 0, sizeof *d);
    for (;;) {
      size_t len = strcspn(p, ",;");
      int i = dev_find(ifc, n, p, len);
      if (i < 0 || used[i]) {
        BRAID_WARN("BRAID_RAILS=\"%s\": \"%.*s\" is %s", spec, (int)len, p,
                   i < 0 ? "not a selected interface (see BRAID_SOCKET_IFNAME)" : "listed twice");
        return -1;
      }
      if (d->nrails == BRAID_MAX_RAILS)
        return BRAID_WARN("BRAID_RAILS: more than %d rails in a device", BRAID_MAX_RAILS), -1;
      used[i] = 1;
      dev_add_rail(d, &ifc[i]);
      p += len;
      if (*p != ',') break;
      p++;
    }
    if (*p == ';') p++;
  }
  return ndev;
}

int braid_devices_group(const struct braid_iface *ifc, int n, const char *spec,
                        struct braid_device *out, int max) {
  if (spec && *spec) return dev_group_spec(ifc, n, spec, out, max);
  int ndev = 0;
  struct braid_device *virt = NULL;
  for (int i = 0; i < n && ndev <= max; i++) {
    if (!ifc[i].pci_path[0] && virt && virt->nrails < BRAID_MAX_RAILS) {
      dev_add_rail(virt, &ifc[i]);
      continue;
    }
    if (ndev == max) break;
    struct braid_device *d = &out[ndev++];
    memset(d, 0, sizeof *d);
    dev_add_rail(d, &ifc[i]);
    if (!ifc[i].pci_path[0]) virt = d;
  }
  return ndev;
}

/* PCI order: bus id (-1, no bus id in the path, after every other), then name. */
static int dev_pci_before(const struct braid_iface *ifc, const int64_t *bus, int a, int b) {
  if (bus[a] != bus[b]) return bus[b] < 0 || (bus[a] >= 0 && bus[a] < bus[b]);
  return strcmp(ifc[a].name, ifc[b].name) < 0;
}

/* The PCI NICs in PCI order, grouped by nearest GPU (near[i], -1: a device of its own); the NICs
 * without PCI device last, as one device. */
static int dev_group_near(const struct braid_iface *ifc, int n, const int64_t *near,
                          struct braid_device *out, int max) {
  int64_t bus[BRAID_MAX_IFACES], key[BRAID_MAX_DEVS];
  int order[BRAID_MAX_IFACES], npci = 0, ndev = 0;
  for (int i = 0; i < n; i++) {
    if (!ifc[i].pci_path[0]) continue;
    bus[i] = braid_topo_busid(ifc[i].pci_path);
    int j = npci++;
    while (j > 0 && dev_pci_before(ifc, bus, i, order[j - 1])) order[j] = order[j - 1], j--;
    order[j] = i;
  }
  for (int k = 0; k < npci; k++) {
    int i = order[k], d = ndev;
    if (near[i] >= 0)
      for (d = 0; d < ndev; d++)
        if (key[d] == near[i] && out[d].nrails < BRAID_MAX_RAILS) break;
    if (d == ndev) {
      if (ndev == max) continue;
      memset(&out[ndev], 0, sizeof out[ndev]);
      key[ndev++] = near[i];
    }
    dev_add_rail(&out[d], &ifc[i]);
  }
  struct braid_device *virt = NULL;
  for (int i = 0; i < n; i++) {
    if (ifc[i].pci_path[0]) continue;
    if (!virt || virt->nrails == BRAID_MAX_RAILS) {
      if (ndev == max) break;
      virt = &out[ndev++];
      memset(virt, 0, sizeof *virt);
    }
    dev_add_rail(virt, &ifc[i]);
  }
  return ndev;
}

int braid_devices_group_topo(const struct braid_iface *ifc, int n, const char *spec,
                             const char *grouping, const char *xml, struct braid_device *out,
                             int max) {
  if (spec && *spec) return dev_group_spec(ifc, n, spec, out, max);
  bool forced = grouping && !strcmp(grouping, "gpu");
  if (grouping && !strcmp(grouping, "nic")) return braid_devices_group(ifc, n, NULL, out, max);
  if (grouping && *grouping && strcmp(grouping, "auto") && !forced) {
    BRAID_WARN("invalid configuration: BRAID_RAILS_GROUPING=\"%s\" (use auto, gpu or nic)", grouping);
    return -1;
  }
  if (n > BRAID_MAX_IFACES) n = BRAID_MAX_IFACES;
  int64_t near[BRAID_MAX_IFACES];
  int ngpu = braid_topo_nearest_gpus(xml, ifc, n, near);
  if (ngpu <= 0) {
    if (forced)
      BRAID_WARN("BRAID_RAILS_GROUPING=gpu: %s; a device per PCI NIC",
                 ngpu < 0 ? "no PCI topology (hwloc)" : "no GPU in the PCI topology");
    else if (ngpu == 0)
      BRAID_INFO(NCCL_INIT | NCCL_NET, "no GPU in the PCI topology: a device per PCI NIC");
    return braid_devices_group(ifc, n, NULL, out, max);
  }
  int ndev = dev_group_near(ifc, n, near, out, max);
  char list[512] = "";
  size_t len = 0;
  for (int d = 0; d < ndev && len < sizeof list; d++) {
    int i = (int)(out[d].rail[0] - ifc);
    if (near[i] < 0) continue;
    char gpu[16];
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s near GPU %s", len ? ", " : "",
                            out[d].name, braid_topo_busid_str(near[i], gpu, sizeof gpu));
  }
  BRAID_INFO(NCCL_INIT | NCCL_NET, "NICs grouped by PCI locality (%d GPU%s): %s", ngpu,
             ngpu > 1 ? "s" : "", len ? list : "no NIC near a GPU");
  return ndev;
}

int braid_devices_fuse(const struct braid_device *devs, int ndevs, const int *children, int n,
                       struct braid_device *out, char *err, size_t errlen) {
  if (n < 1 || n > 8) return snprintf(err, errlen, "%d devices (1 to 8 can be fused)", n), -1;
  if (n == 1) { /* NCCL 2.26 asks for one per NIC it does not merge: an alias, same in all */
    int d = children[0];
    if (d < 0 || d >= ndevs) return snprintf(err, errlen, "device %d is not a physical device", d), -1;
    *out = devs[d];
    out->nchildren = 1;
    out->children[0] = d;
    return 0;
  }
  memset(out, 0, sizeof *out);
  for (int i = 0; i < n; i++) {
    int d = children[i];
    if (d < 0 || d >= ndevs) return snprintf(err, errlen, "device %d is not a physical device", d), -1;
    for (int j = 0; j < i; j++)
      if (children[j] == d) return snprintf(err, errlen, "device %d is listed twice", d), -1;
    if (out->nrails + devs[d].nrails > BRAID_MAX_RAILS)
      return snprintf(err, errlen, "more than %d rails", BRAID_MAX_RAILS), -1;
    for (int r = 0; r < devs[d].nrails; r++) dev_add_rail(out, devs[d].rail[r]);
    out->children[out->nchildren++] = d;
  }
  return 0;
}

/* Length of the prefix of a sysfs PCI path up to its root port: "/sys/devices/pci0000:00/
 * 0000:00:01.0" of ".../0000:00:01.0/0000:01:00.0/0000:02:00.0".  A NIC on the root bus itself
 * (".../pci0000:00/0000:00:05.0", common in VMs; also a virtio device below it) has no root
 * port: then the root complex, "/sys/devices/pci0000:00".  0 when it is not a PCI path. */
static size_t root_port_len(const char *path) {
  const char *root = strstr(path, "/pci");
  if (!root) return 0;
  const char *port = strchr(root + 1, '/');
  if (!port || !port[1]) return 0;
  const char *end = strchr(port + 1, '/');
  /* Below the port there must be another PCI function ("DDDD:BB:DD.F") for it to be a port. */
  if (!end || strlen(end + 1) < 12 || end[5] != ':' || end[8] != ':' || end[11] != '.')
    return (size_t)(port - path);
  return (size_t)(end - path);
}

int braid_device_pci_spread(const struct braid_device *d, const struct braid_iface **other) {
  *other = NULL;
  if (!d->pci_path) return 0;
  size_t n = root_port_len(d->pci_path);
  for (int r = 0; r < d->nrails; r++) {
    const char *p = d->rail[r]->pci_path;
    if (!p[0] || p == d->pci_path) continue;
    if (!n || root_port_len(p) != n || strncmp(p, d->pci_path, n)) {
      *other = d->rail[r];
      return 1;
    }
  }
  return 0;
}
