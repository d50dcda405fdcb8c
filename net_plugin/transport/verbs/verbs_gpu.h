/* What GPU memory this node's verbs stack can register, probed as NCCL's net_ib does
 * (ptr_support.h turns the answers into NCCL_PTR_* bits). */
#ifndef BRAID_VERBS_GPU_H
#define BRAID_VERBS_GPU_H

#include <stdbool.h>

/* Whether a peer-memory module is loaded (ibv_reg_mr then takes CUDA pointers): any of
 * ROOT/sys/kernel/mm/memory_peers/nv_mem/version, .../nv_mem_nc/version or
 * ROOT/sys/module/nvidia_peermem/version exists.  root: "" for this machine, a directory for tests. */
bool braid_verbs_peermem(const char *root);

/* ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) on device dev: the errno it failed with (0 when it
 * succeeded; the registration is undone), BRAID_DMABUF_NO_SYMBOL (ptr_support.h) when libibverbs
 * lacks it, or EIO when the device cannot be opened or given a protection domain. */
int braid_verbs_dmabuf_probe(const char *dev);

#endif
