/* The process's network devices and each plugin's view of them (see devtable.h). */
#include "topo/devtable.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "param.h"
#include "transport/transport.h"

static const char *const view_name[BRAID_NVIEWS] = {"net", "CollNet"};

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_iface net_ifaces[BRAID_MAX_IFACES];
static struct braid_device net_phys[BRAID_MAX_DEVS];
static _Atomic int net_nphys = -1; /* -1: not discovered yet */

/* A view's virtual devices, indices nphys, nphys + 1, ...: an entry is written before the count
 * that publishes it (readers take the count without the lock). */
static struct {
  struct braid_device dev[BRAID_MAX_VDEVS];
  _Atomic int n;
} views[BRAID_NVIEWS];

/* One WARN for a device whose rails sit below different PCI root ports (devices.h). */
static void net_warn_spread(const struct braid_device *d) {
  const struct braid_iface *far, *at = NULL;
  if (!braid_device_pci_spread(d, &far)) return;
  for (int r = 0; r < d->nrails && !at; r++)
    if (d->rail[r]->pci_path == d->pci_path) at = d->rail[r];
  BRAID_WARN("device %s spans PCI root ports: NCCL places the whole device at %s (%s), but rail "
             "%s is at %s, so NCCL's topology misjudges the path of that rail's traffic; group "
             "rails under one PCI switch (BRAID_RAILS), or on NCCL 2.24 or later use "
             "BRAID_RAILS_GROUPING=nic and let NCCL fuse them (NCCL_NET_FORCE_MERGE), which "
             "places a fused device at its NICs' common parent",
             d->name, at ? at->name : "?", d->pci_path, far->name, far->pci_path);
}

ncclResult_t braid_devtable_load(enum braid_devview view, int *ndev) {
  *ndev = 0;
  ncclResult_t rc = braid_params_load();
  if (rc) return rc;
  const char *striping = braid_param_str(BRAID_P_STRIPING);
  if (strcmp(striping, "adaptive") && strcmp(striping, "equal")) {
    BRAID_WARN("invalid configuration: BRAID_STRIPING=\"%s\" (use adaptive or equal)", striping);
    return ncclInvalidArgument;
  }
  enum braid_transport t;
  if ((rc = braid_transport_get(&t))) return rc;
  pthread_mutex_lock(&net_lock);
  if (net_nphys < 0) {
    int n = braid_ifaces_select(braid_param_str(BRAID_P_SOCKET_IFNAME),
                                braid_param_str(BRAID_P_SOCKET_FAMILY), net_ifaces,
                                BRAID_MAX_IFACES);
    if (n > 0)
      n = braid_devices_group_topo(net_ifaces, n, braid_param_str(BRAID_P_RAILS),
                                   braid_param_str(BRAID_P_RAILS_GROUPING), NULL, net_phys,
                                   BRAID_MAX_DEVS);
    if (n <= 0) rc = n < 0 ? ncclInvalidArgument : ncclSystemError;
    for (int d = 0; n > 1 && braid_param_int(BRAID_P_BACKUP_RAIL) && d < n; d++)
      if (net_phys[d].nrails == 1) net_phys[d].backup = net_phys[(d + 1) % n].rail[0];
    for (int d = 0; d < n; d++) net_warn_spread(&net_phys[d]);
    if (n > 0) net_nphys = n;
  }
  if (!rc) *ndev = net_nphys + views[view].n;
  pthread_mutex_unlock(&net_lock);
  if (rc == ncclSystemError) BRAID_WARN("no usable network interface found");
  return rc;
}

int braid_devtable_nphys(void) { return net_nphys < 0 ? 0 : net_nphys; }

const struct braid_device *braid_devtable_get(enum braid_devview view, int dev) {
  int nphys = net_nphys, nvirt = views[view].n;
  if (nphys < 0 || dev < 0 || dev >= nphys + nvirt) {
    BRAID_WARN("invalid %s device index %d (%d devices)", view_name[view], dev,
               nphys < 0 ? 0 : nphys + nvirt);
    return NULL;
  }
  return dev < nphys ? &net_phys[dev] : &views[view].dev[dev - nphys];
}

int braid_devtable_rails(enum braid_devview view, int dev, const struct braid_iface **out, int max) {
  const struct braid_device *d = braid_devtable_get(view, dev);
  if (!d) return -1;
  int n = d->nrails < max ? d->nrails : max;
  for (int i = 0; i < n; i++) out[i] = d->rail[i];
  return n;
}

/* The view's virtual device fusing exactly devs[0..ndevs) in that order, or -1. */
static int fuse_find(enum braid_devview view, int ndevs, const int *devs) {
  for (int v = 0; v < views[view].n; v++) {
    const struct braid_device *d = &views[view].dev[v];
    if (d->nchildren == ndevs && !memcmp(d->children, devs, (size_t)ndevs * sizeof *devs)) return v;
  }
  return -1;
}

ncclResult_t braid_devtable_fuse(enum braid_devview view, int *d, int ndevs, const int *devs, int max) {
  if (ndevs > max) {
    BRAID_WARN("%s makeVDevice of %d devices (this ABI version allows %d)", view_name[view], ndevs, max);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&net_lock);
  char why[128];
  ncclResult_t rc = ncclSuccess;
  int nvirt = views[view].n, again = net_nphys < 0 || ndevs < 1 ? -1 : fuse_find(view, ndevs, devs);
  if (net_nphys < 0) {
    snprintf(why, sizeof why, "no device discovered yet (devices() was not called)");
    rc = ncclInternalError;
  } else if (again >= 0) {
    *d = net_nphys + again;
  } else if (nvirt == BRAID_MAX_VDEVS) {
    snprintf(why, sizeof why, "%d virtual devices made already, none of them of these devices", nvirt);
    rc = ncclInternalError;
  } else if (braid_devices_fuse(net_phys, net_nphys, devs, ndevs, &views[view].dev[nvirt], why,
                                sizeof why) != 0) {
    rc = ncclInvalidArgument;
  } else {
    *d = net_nphys + nvirt;
    views[view].n = nvirt + 1;
    BRAID_INFO(NCCL_INIT | NCCL_NET, "%s virtual device %d = %s (%d rails, %d Mbps)", view_name[view], *d,
               views[view].dev[nvirt].name, views[view].dev[nvirt].nrails, views[view].dev[nvirt].speed_mbps);
  }
  pthread_mutex_unlock(&net_lock);
  if (rc) BRAID_WARN("%s makeVDevice failed: %s", view_name[view], why);
  return rc;
}
