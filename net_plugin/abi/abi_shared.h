/* Per-version adapters defined in abi.c and shared with collnet_abi.c (CollNet devices are the
 * net devices: the same properties and the same makeVDevice). */
#ifndef BRAID_ABI_SHARED_H
#define BRAID_ABI_SHARED_H

#include "nccl_plugin/net.h"

ncclResult_t props_v7(int dev, ncclNetProperties_v7_t *d);
ncclResult_t props_v8(int dev, ncclNetProperties_v8_t *d);
ncclResult_t props_v9(int dev, ncclNetProperties_v9_t *d);
ncclResult_t props_v10(int dev, ncclNetProperties_v10_t *d);
ncclResult_t props_v11(int dev, ncclNetProperties_v11_t *d);
ncclResult_t props_v12(int dev, ncclNetProperties_v12_t *d);

ncclResult_t vdev_v9(int *d, ncclNetVDeviceProps_v9_t *p);
ncclResult_t vdev_v10(int *d, ncclNetVDeviceProps_v10_t *p);
ncclResult_t vdev_v11(int *d, ncclNetVDeviceProps_v11_t *p);
ncclResult_t vdev_v12(int *d, ncclNetVDeviceProps_v12_t *p);

#endif
