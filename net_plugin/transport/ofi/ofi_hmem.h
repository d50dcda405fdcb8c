/* What memory libfabric's provider takes (NCCL's ptrSupport bits beyond NCCL_PTR_HOST). */
#ifndef BRAID_OFI_HMEM_H
#define BRAID_OFI_HMEM_H

#include <stddef.h>

/* NCCL_PTR_* bits beyond NCCL_PTR_HOST the provider registers, with the reason in why.  For now
 * host memory only (0, "libfabric: host memory only"): FI_HMEM is not asked for. */
int braid_ofi_ptr_support(char *why, size_t whylen);

#endif
