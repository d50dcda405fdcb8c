/* braid-perf: --mem, the memory the plugin moves data in, and how NCCL registers it.
 *
 *   host     malloc'ed host memory, regMr(NCCL_PTR_HOST)
 *   cuda     device memory (cuMemAlloc through common/cuda.h), regMr(NCCL_PTR_CUDA): the
 *            plugin must advertise NCCL_PTR_CUDA (nv_peermem GPUDirect)
 *   dmabuf   device memory exported per registration as a dma-buf fd
 *            (cuMemGetHandleForAddressRange), regMrDmaBuf(NCCL_PTR_CUDA, offset, fd), the fd
 *            closed right after the call as NCCL does: needs NCCL_PTR_DMABUF and regMrDmaBuf
 *   udmabuf  TEST ONLY: host memory (a sealed memfd) exported as a dma-buf through
 *            /dev/udmabuf, regMrDmaBuf(NCCL_PTR_HOST, ...): real dma-buf fds without a GPU
 *   memfd    TEST ONLY: host memory (a memfd) whose own fd is passed to regMrDmaBuf as if it
 *            were a dma-buf's (NCCL_PTR_HOST): for kernels without udmabuf (the soft-RoCE
 *            guest's), only a libibverbs that maps the fd can register it
 *            (test/vm/dmabuf_shim.c through BRAID_IBVERBS_LIB); no dma-buf is involved
 *
 * The memory kind covers what NCCL's proxy hands the NIC for GPU data: the Simple protocol's
 * staging buffers (engine.c) and sendrecv's registered user buffers (p2p.c, via bench.c).
 * LL and LL128 staging stays in host memory (NCCL keeps LL there; LL128 over GPUDirect is not
 * modelled), and so does CollNet. Device memory is filled and read through cuMemcpyHtoD/DtoH
 * (the GPU's copies), never by the CPU. */
#ifndef PERF_MEM_H
#define PERF_MEM_H

#include <stddef.h>

#include "../netload/netload.h"
#include "opts.h"

/* Exit status when this machine cannot provide the memory (no GPU, no /dev/udmabuf): 77, what
 * test scripts count as a skip. */
#define PERF_EXIT_NO_MEM 77
/* Exit status when the plugin does not take the memory (ptrSupport, regMrDmaBuf NULL). */
#define PERF_EXIT_MEM_REFUSED 3

const char *perf_mem_name(enum perf_mem m);
/* 0 and *m set, or -1 for an unknown name. */
int perf_mem_parse(const char *s, enum perf_mem *m);
/* Device memory (cuda, dmabuf): CUDA is needed, the CPU cannot touch it, receives are flushed. */
int perf_mem_is_gpu(enum perf_mem m);
/* Registered with regMrDmaBuf and an fd (dmabuf, udmabuf, memfd): needs NCCL_PTR_DMABUF. */
int perf_mem_is_fd(enum perf_mem m);

/* CUDA for this rank when m is device memory (before the plugin is loaded, as NCCL sets up the
 * GPU first): GPU rank % count, its primary context current on this thread. 0, or
 * PERF_EXIT_NO_MEM after printing "braid-perf: --mem cuda: no CUDA GPU here (why)". Appends
 * what it uses to describe ("; memory: ..."). For udmabuf: whether /dev/udmabuf opens. */
int perf_mem_start(enum perf_mem m, int rank, char *describe, size_t len);

/* Whether the plugin takes m on its device (NCCL's checks: ptrSupport, regMrDmaBuf). 0, or
 * PERF_EXIT_MEM_REFUSED after printing which property is missing. */
int perf_mem_check_plugin(enum perf_mem m, const struct netload *nl, const netload_props_t *p,
                          int rank, int dev);

/* One buffer of kind `kind`. ptr is a host address (host, udmabuf) or a device address. */
struct perf_buf {
  enum perf_mem kind;
  char *ptr;
  size_t size;
  void *base;    /* what was allocated (ptr is page-aligned inside it) */
  size_t alloc;  /* bytes mapped or allocated at base */
  int fd;        /* udmabuf: its dma-buf fd, memfd: the memfd (each registration passes a dup); else -1 */
};

/* Allocates size bytes (at least 1) of kind m, page-aligned. 0, or -1 after printing why. */
int perf_buf_alloc(struct perf_buf *b, enum perf_mem m, size_t size);
/* Frees b (nothing when it holds nothing); 0, or -1 after printing why. */
int perf_buf_free(struct perf_buf *b);
/* Copies into / out of b at off (memcpy or cuMemcpyHtoD/DtoH); 0, or -1 after printing why. */
int perf_buf_write(const struct perf_buf *b, size_t off, const void *src, size_t n);
int perf_buf_read(const struct perf_buf *b, size_t off, void *dst, size_t n);

/* Registers [data, data + size) (inside b) with comm as NCCL would: regMr with NCCL_PTR_HOST or
 * NCCL_PTR_CUDA, or for dmabuf/udmabuf regMrDmaBuf with a fresh dma-buf fd for that range and
 * its offset, closed right after the call. *call names the call for an error message; a
 * dma-buf export failure prints its reason and returns ncclSystemError. */
ncclResult_t perf_buf_reg(struct netload *nl, void *comm, const struct perf_buf *b, void *data,
                          size_t size, void **mh, const char **call);

#endif
