/* The process's network devices (see devtable.h). */
#include "topo/devtable.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "param.h"
#include "transport/transport.h"

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_iface net_ifaces[BRAID_MAX_IFACES];
static struct braid_device net_devs[BRAID_MAX_DEVS];
static int net_ndevs = -1; /* -1: not discovered yet; physical devices, then virtual ones */
static int net_nphys;

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

ncclResult_t braid_devtable_load(int *ndev) {
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
  if (net_ndevs < 0) {
    int n = braid_ifaces_select(braid_param_str(BRAID_P_SOCKET_IFNAME),
                                braid_param_str(BRAID_P_SOCKET_FAMILY), net_ifaces,
                                BRAID_MAX_IFACES);
    if (n > 0)
      n = braid_devices_group_topo(net_ifaces, n, braid_param_str(BRAID_P_RAILS),
                                   braid_param_str(BRAID_P_RAILS_GROUPING), NULL, net_devs,
                                   BRAID_MAX_DEVS);
    if (n > 0) net_ndevs = net_nphys = n;
    else rc = n < 0 ? ncclInvalidArgument : ncclSystemError;
    for (int d = 0; n > 1 && braid_param_int(BRAID_P_BACKUP_RAIL) && d < n; d++)
      if (net_devs[d].nrails == 1) net_devs[d].backup = net_devs[(d + 1) % n].rail[0];
    for (int d = 0; d < n; d++) net_warn_spread(&net_devs[d]);
  }
  if (!rc) *ndev = net_ndevs;
  pthread_mutex_unlock(&net_lock);
  if (rc == ncclSystemError) BRAID_WARN("no usable network interface found");
  return rc;
}

const struct braid_device *braid_devtable_get(int dev) {
  if (net_ndevs < 0 || dev < 0 || dev >= net_ndevs) {
    BRAID_WARN("invalid device index %d (%d devices)", dev, net_ndevs < 0 ? 0 : net_ndevs);
    return NULL;
  }
  return &net_devs[dev];
}

int braid_devtable_rails(int dev, const struct braid_iface **out, int max) {
  const struct braid_device *d = braid_devtable_get(dev);
  if (!d) return -1;
  int n = d->nrails < max ? d->nrails : max;
  for (int i = 0; i < n; i++) out[i] = d->rail[i];
  return n;
}

ncclResult_t braid_devtable_fuse(int *d, int ndevs, const int *devs, int max) {
  if (ndevs > max) {
    BRAID_WARN("makeVDevice of %d devices (this ABI version allows %d)", ndevs, max);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&net_lock);
  char why[128];
  ncclResult_t rc = ncclSuccess;
  if (net_ndevs < 0 || net_ndevs == BRAID_MAX_DEVS) {
    snprintf(why, sizeof why, "no room for another device");
    rc = ncclInternalError;
  } else if (braid_devices_fuse(net_devs, net_nphys, devs, ndevs, &net_devs[net_ndevs], why,
                                sizeof why) != 0) {
    rc = ncclInvalidArgument;
  } else {
    *d = net_ndevs++;
    BRAID_INFO(NCCL_INIT | NCCL_NET, "virtual device %d = %s (%d rails, %d Mbps)", *d,
               net_devs[*d].name, net_devs[*d].nrails, net_devs[*d].speed_mbps);
  }
  pthread_mutex_unlock(&net_lock);
  if (rc) BRAID_WARN("makeVDevice failed: %s", why);
  return rc;
}

