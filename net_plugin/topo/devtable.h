/* The process's network devices: discovered once (interfaces selected, grouped into devices of
 * rails, BRAID_BACKUP_RAIL applied), then extended by the virtual devices NCCL fuses.  The net
 * API (api/net.c) and CollNet (collnet/) both read it. */
#ifndef BRAID_DEVTABLE_H
#define BRAID_DEVTABLE_H

#include "nccl_plugin/common.h"
#include "topo/devices.h"
#include "topo/ifaces.h"

/* Loads the parameters, checks the configuration that every device depends on (BRAID_STRIPING,
 * BRAID_TRANSPORT) and discovers the devices on the first call; their count in *ndev (0 on an
 * error, which a WARN explains). */
ncclResult_t braid_devtable_load(int *ndev);
/* Device dev, or NULL with a WARN for an invalid index. */
const struct braid_device *braid_devtable_get(int dev);
/* The NICs of device dev; their count, or -1 (WARN) for an invalid device. */
int braid_devtable_rails(int dev, const struct braid_iface **out, int max);
/* NCCL fuses physical devices devs[0..ndevs) into a virtual one, written to *d (max: the ABI
 * version's NCCL_NET_MAX_DEVS_PER_NIC). */
ncclResult_t braid_devtable_fuse(int *d, int ndevs, const int *devs, int max);

#endif
