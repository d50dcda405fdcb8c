/* The memory each NCCL device takes (ptrSupport), probed once per device and logged once with
 * the reason (transport/ptr_support.h decides; verbs_gpu.h and ofi.h (braid_ofi_hmem) probe). */
#ifndef BRAID_MEMTYPES_H
#define BRAID_MEMTYPES_H

/* NCCL_PTR_* bits of device dev (NCCL_PTR_HOST alone for an unknown device). */
int braid_dev_ptr_support(int dev);

#endif
