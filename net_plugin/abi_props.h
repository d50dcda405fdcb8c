/* The per-version property converters defined in abi.c, shared with collnet_abi.c. */
#ifndef BRAID_ABI_PROPS_H
#define BRAID_ABI_PROPS_H

#include "nccl_plugin/net.h"

ncclResult_t props_v7(int dev, ncclNetProperties_v7_t *d);
ncclResult_t props_v8(int dev, ncclNetProperties_v8_t *d);
ncclResult_t props_v9(int dev, ncclNetProperties_v9_t *d);
ncclResult_t props_v10(int dev, ncclNetProperties_v10_t *d);
ncclResult_t props_v11(int dev, ncclNetProperties_v11_t *d);
ncclResult_t props_v12(int dev, ncclNetProperties_v12_t *d);

#endif
