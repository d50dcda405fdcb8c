/* Peer-memory and dma-buf probes for the verbs transport (see verbs_gpu.h). */
#include "transport/verbs/verbs_gpu.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "transport/ptr_support.h"
#include "transport/verbs/verbs_dev.h"

bool braid_verbs_peermem(const char *root) {
  static const char *const files[] = {"/sys/kernel/mm/memory_peers/nv_mem/version",
                                      "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                                      "/sys/module/nvidia_peermem/version"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char p[512];
    int n = snprintf(p, sizeof p, "%s%s", root ? root : "", files[i]);
    if (n > 0 && n < (int)sizeof p && access(p, F_OK) == 0) return true;
  }
  return false;
}

int braid_verbs_dmabuf_probe(const char *dev) {
  struct ibv_mr *(*reg_dmabuf)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *);
  int (*dealloc_pd)(struct ibv_pd *);
  int (*dereg_mr)(struct ibv_mr *);
  *(void **)&reg_dmabuf = braid_verbs_sym("ibv_reg_dmabuf_mr");
  *(void **)&alloc_pd = braid_verbs_sym("ibv_alloc_pd");
  *(void **)&dealloc_pd = braid_verbs_sym("ibv_dealloc_pd");
  *(void **)&dereg_mr = braid_verbs_sym("ibv_dereg_mr");
  if (!reg_dmabuf) return BRAID_DMABUF_NO_SYMBOL;
  if (!alloc_pd || !dealloc_pd || !dereg_mr) return EIO;
  struct ibv_context *c = braid_verbs_open(dev);
  if (!c) return EIO;
  struct ibv_pd *pd = alloc_pd(c);
  int err = EIO;
  if (pd) {
    errno = 0;
    struct ibv_mr *mr = reg_dmabuf(pd, 0, 0, 0, -1, 0);
    err = mr ? 0 : errno;
    if (mr) dereg_mr(mr);
    dealloc_pd(pd);
  }
  braid_verbs_close(c);
  return err;
}
