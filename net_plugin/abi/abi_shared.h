/* Per-version adapters defined in abi.c and shared with collnet_abi.c: NCCL's net and CollNet
 * plugins are two plugins with their own devices (topo/devtable.h), so each table passes its own
 * properties and makeVDevice to the same conversions. */
#ifndef BRAID_ABI_SHARED_H
#define BRAID_ABI_SHARED_H

#include "api/net.h"
#include "nccl_plugin/net.h"

typedef ncclResult_t (*braid_props_fn)(int dev, struct braid_props *p);
typedef ncclResult_t (*braid_fuse_fn)(int *d, int ndevs, const int *devs, int max);

ncclResult_t props_v7(braid_props_fn get, int dev, ncclNetProperties_v7_t *d);
ncclResult_t props_v8(braid_props_fn get, int dev, ncclNetProperties_v8_t *d);
ncclResult_t props_v9(braid_props_fn get, int dev, ncclNetProperties_v9_t *d);
ncclResult_t props_v10(braid_props_fn get, int dev, ncclNetProperties_v10_t *d);
ncclResult_t props_v11(braid_props_fn get, int dev, ncclNetProperties_v11_t *d);
ncclResult_t props_v12(braid_props_fn get, int dev, ncclNetProperties_v12_t *d);

ncclResult_t vdev_v9(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v9_t *p);
ncclResult_t vdev_v10(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v10_t *p);
ncclResult_t vdev_v11(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v11_t *p);
ncclResult_t vdev_v12(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v12_t *p);

#endif
