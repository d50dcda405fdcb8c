/* The process's network devices, as NCCL sees them through each of braid's two plugins.
 *
 * NCCL treats the net plugin and the CollNet plugin as two plugins: each has its own device list,
 * its own makeVDevice and its own count of physical devices (NCCL reads devices() of each before
 * and after fusing them, and 2.24-2.27 take the count they find as that plugin's physical devices).
 * So each plugin has its own view: the physical devices, discovered once and the same in both
 * (interfaces selected, grouped into devices of rails, BRAID_BACKUP_RAIL applied), then the virtual
 * devices NCCL fused through that plugin alone.  Both views make the same fusions in the same
 * order (NCCL runs the same placement over the same properties), so a fused NIC has the same index
 * in both, which NCCL relies on: it passes CollNet the index its net pass wrote into the shared
 * topology node. */
#ifndef BRAID_DEVTABLE_H
#define BRAID_DEVTABLE_H

#include "nccl_plugin/common.h"
#include "topo/devices.h"
#include "topo/ifaces.h"

enum braid_devview { BRAID_VIEW_NET, BRAID_VIEW_COLLNET, BRAID_NVIEWS };

/* Virtual devices per view: one for every physical device (NCCL 2.24-2.26 make a one-device alias
 * of each NIC they do not merge, and 2.26 retries a failed one forever), and an identical request
 * again returns the device already made, so NCCL's placement can never run out of room. */
#define BRAID_MAX_VDEVS BRAID_MAX_DEVS

/* Loads the parameters, checks the configuration that every device depends on (BRAID_STRIPING,
 * BRAID_TRANSPORT) and discovers the physical devices on the first call; the view's count
 * (physical and its virtual ones) in *ndev (0 on an error, which a WARN explains). */
ncclResult_t braid_devtable_load(enum braid_devview view, int *ndev);
/* The number of physical devices (0 before discovery). */
int braid_devtable_nphys(void);
/* Device dev of the view, or NULL with a WARN for an invalid index. */
const struct braid_device *braid_devtable_get(enum braid_devview view, int dev);
/* The NICs of the view's device dev; their count, or -1 (WARN) for an invalid device. */
int braid_devtable_rails(enum braid_devview view, int dev, const struct braid_iface **out, int max);
/* NCCL fuses physical devices devs[0..ndevs) into a virtual one of the view, written to *d (max:
 * the ABI version's NCCL_NET_MAX_DEVS_PER_NIC).  The same devices in the same order again give the
 * device made the first time. */
ncclResult_t braid_devtable_fuse(enum braid_devview view, int *d, int ndevs, const int *devs, int max);

#endif
