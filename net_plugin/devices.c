#include "devices.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

static void dev_add_rail(struct braid_device *d, const struct braid_iface *ifc) {
  size_t len = strlen(d->name);
  snprintf(d->name + len, sizeof d->name - len, "%s%s", d->nrails ? "+" : "", ifc->name);
  if (d->nrails == 0) d->pci_path = ifc->pci_path[0] ? ifc->pci_path : NULL;
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

int braid_devices_fuse(const struct braid_device *devs, int ndevs, const int *children, int n,
                       struct braid_device *out, char *err, size_t errlen) {
  if (n < 2 || n > 8) return snprintf(err, errlen, "%d devices (2 to 8 can be fused)", n), -1;
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
