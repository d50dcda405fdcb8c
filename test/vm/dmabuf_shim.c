/* TEST ONLY: a libibverbs wrapper for the soft-RoCE test guest (tools/vm), whose rxe devices
 * cannot register dma-bufs (rxe has no reg_dmabuf_mr: libibverbs answers EOPNOTSUPP).  It
 * defines ibv_reg_dmabuf_mr and nothing else; every other libibverbs function comes from its
 * dependency, the real libibverbs.so.1.  braid opens it through BRAID_IBVERBS_LIB (the verbs
 * transport resolves libibverbs functions on the handle it dlopens, so LD_PRELOAD would not
 * reach it).
 *
 *   ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access)
 *     fd < 0 (NCCL's probe, ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)): fails with EBADF, the answer
 *     of a device that takes dma-bufs, so braid advertises NCCL_PTR_DMABUF;
 *     else maps [offset, offset + length) of the fd (MAP_SHARED) and registers that mapping with
 *     ibv_reg_mr_iova2(pd, mapping, length, iova, access): the MR covers the fd's pages at the
 *     addresses (iova) the caller asked for, as a real dma-buf registration would.
 *
 * What this proves and what not: the fd, offset, length and iova braid passes, and the data
 * landing in the fd's pages at those addresses.  The pages are host memory and rxe copies them
 * with the CPU: nothing here is GPUDirect, and the kernel's dma-buf import is not exercised.
 * The mapping is never unmapped (its MR, deregistered by the real ibv_dereg_mr, cannot be seen
 * here): a leak of address space, not of memory (the pages belong to the fd's file), for the
 * life of a test process.  Each registration is logged on stderr ("dmabuf-shim: ..."). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

__attribute__((visibility("default"))) struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
                                                                        size_t length, uint64_t iova, int fd,
                                                                        int access) {
  if (fd < 0) {
    errno = EBADF;
    return NULL;
  }
  long pg = sysconf(_SC_PAGESIZE);
  uint64_t lo = offset / (uint64_t)(pg > 0 ? pg : 4096) * (uint64_t)(pg > 0 ? pg : 4096);
  size_t span = (size_t)(offset - lo) + length;
  void *map = length ? mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)lo) : MAP_FAILED;
  if (map == MAP_FAILED) {
    int e = length ? errno : EINVAL;
    fprintf(stderr, "dmabuf-shim: mmap of fd %d [%" PRIu64 ", +%zu) failed: %s\n", fd, offset, length, strerror(e));
    errno = e;
    return NULL;
  }
  struct ibv_mr *mr = ibv_reg_mr_iova2(pd, (char *)map + (offset - lo), length, iova, (unsigned)access);
  int e = errno;
  fprintf(stderr, "dmabuf-shim: fd %d offset %" PRIu64 " length %zu iova 0x%" PRIx64 ": %s\n", fd, offset, length,
          iova, mr ? "registered" : strerror(e));
  if (!mr) {
    munmap(map, span);
    errno = e;
  }
  return mr;
}
