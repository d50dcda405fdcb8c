/* braid-perf: buffers of each --mem kind, and their registration as NCCL does it (mem.h). */
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda.h"
#include "udmabuf_dev.h"

static size_t membuf_page(void) {
  long pg = sysconf(_SC_PAGESIZE);
  return pg > 0 ? (size_t)pg : 4096;
}

static size_t membuf_round(size_t n, size_t pg) { return (n + pg - 1) / pg * pg; }

static int membuf_cuda_why(const char *what, size_t size) {
  fprintf(stderr, "braid-perf: %s of %zu bytes failed: %s\n", what, size, braid_cuda_why());
  return -1;
}

/* A sealed memfd of `alloc` bytes, mapped, and its dma-buf from /dev/udmabuf. */
static int membuf_udmabuf(struct perf_buf *b, size_t alloc) {
  int memfd = memfd_create("braid-perf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) return fprintf(stderr, "braid-perf: memfd_create: %s\n", strerror(errno)), -1;
  const char *step = "ftruncate";
  if (ftruncate(memfd, (off_t)alloc) == 0) {
    step = "fcntl(F_ADD_SEALS, F_SEAL_SHRINK)";
    if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) == 0) {
      step = "open /dev/udmabuf";
      int dev = open(UDMABUF_DEV_PATH, O_RDWR | O_CLOEXEC);
      if (dev >= 0) {
        struct udmabuf_dev_create req = {(uint32_t)memfd, UDMABUF_DEV_FLAGS_CLOEXEC, 0, alloc};
        step = "ioctl(UDMABUF_CREATE)";
        b->fd = ioctl(dev, UDMABUF_DEV_CREATE, &req);
        close(dev);
      }
    }
  }
  if (b->fd < 0) {
    fprintf(stderr, "braid-perf: --mem udmabuf: %s for %zu bytes: %s\n", step, alloc,
            strerror(errno));
    close(memfd);
    return -1;
  }
  void *p = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  close(memfd); /* the mapping and the dma-buf keep the pages */
  if (p == MAP_FAILED) {
    fprintf(stderr, "braid-perf: --mem udmabuf: mmap of %zu bytes: %s\n", alloc, strerror(errno));
    close(b->fd);
    b->fd = -1;
    return -1;
  }
  b->base = b->ptr = p;
  return 0;
}

/* A memfd of `alloc` bytes, mapped; the memfd itself is the fd registrations pass. */
static int membuf_memfd(struct perf_buf *b, size_t alloc) {
  int memfd = memfd_create("braid-perf", MFD_CLOEXEC);
  if (memfd < 0) return fprintf(stderr, "braid-perf: --mem memfd: memfd_create: %s\n", strerror(errno)), -1;
  void *p = MAP_FAILED;
  if (ftruncate(memfd, (off_t)alloc) == 0) p = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (p == MAP_FAILED) {
    fprintf(stderr, "braid-perf: --mem memfd: %zu bytes: %s\n", alloc, strerror(errno));
    close(memfd);
    return -1;
  }
  b->fd = memfd;
  b->base = b->ptr = p;
  return 0;
}

int perf_buf_alloc(struct perf_buf *b, enum perf_mem m, size_t size) {
  size_t pg = membuf_page();
  memset(b, 0, sizeof *b);
  b->kind = m;
  b->fd = -1;
  b->size = size ? size : 1;
  b->alloc = membuf_round(b->size, pg);
  switch (m) {
    case PERF_MEM_HOST:
      if (posix_memalign(&b->base, pg, b->alloc)) {
        fprintf(stderr, "braid-perf: out of memory for a %zu-byte buffer\n", b->alloc);
        return -1;
      }
      b->ptr = b->base;
      return 0;
    case PERF_MEM_UDMABUF:
      return membuf_udmabuf(b, b->alloc);
    case PERF_MEM_MEMFD:
      return membuf_memfd(b, b->alloc);
    case PERF_MEM_CUDA:
    case PERF_MEM_DMABUF:
      /* page-aligned inside the allocation, so a dma-buf of whole pages stays inside it */
      b->alloc += pg;
      if (braid_cuda_alloc(&b->base, b->alloc)) return membuf_cuda_why("cuMemAlloc", b->alloc);
      b->ptr = (char *)(uintptr_t)membuf_round((uintptr_t)b->base, pg);
      return 0;
  }
  return -1;
}

int perf_buf_free(struct perf_buf *b) {
  int rc = 0;
  if (!b->base) return 0;
  switch (b->kind) {
    case PERF_MEM_HOST: free(b->base); break;
    case PERF_MEM_UDMABUF:
    case PERF_MEM_MEMFD:
      munmap(b->base, b->alloc);
      close(b->fd);
      break;
    case PERF_MEM_CUDA:
    case PERF_MEM_DMABUF:
      if (braid_cuda_free(b->base)) rc = membuf_cuda_why("cuMemFree", b->alloc);
      break;
  }
  memset(b, 0, sizeof *b);
  b->fd = -1;
  return rc;
}

int perf_buf_write(const struct perf_buf *b, size_t off, const void *src, size_t n) {
  if (!perf_mem_is_gpu(b->kind)) {
    memcpy(b->ptr + off, src, n);
    return 0;
  }
  return n == 0 || !braid_cuda_htod(b->ptr + off, src, n) ? 0 : membuf_cuda_why("cuMemcpyHtoD", n);
}

int perf_buf_read(const struct perf_buf *b, size_t off, void *dst, size_t n) {
  if (!perf_mem_is_gpu(b->kind)) {
    memcpy(dst, b->ptr + off, n);
    return 0;
  }
  return n == 0 || !braid_cuda_dtoh(dst, b->ptr + off, n) ? 0 : membuf_cuda_why("cuMemcpyDtoH", n);
}

ncclResult_t perf_buf_reg(struct netload *nl, void *comm, const struct perf_buf *b, void *data,
                          size_t size, void **mh, const char **call) {
  *call = "regMr";
  if (b->kind == PERF_MEM_HOST) return netload_reg_mr(nl, comm, data, size, NCCL_PTR_HOST, mh);
  if (b->kind == PERF_MEM_CUDA) return netload_reg_mr(nl, comm, data, size, NCCL_PTR_CUDA, mh);
  *call = "regMrDmaBuf";
  int fd = -1, type = NCCL_PTR_HOST;
  uint64_t offset;
  if (b->kind == PERF_MEM_UDMABUF || b->kind == PERF_MEM_MEMFD) { /* one fd for the whole buffer: a copy */
    offset = (uint64_t)((char *)data - (char *)b->base);
    fd = dup(b->fd);
    if (fd < 0) {
      fprintf(stderr, "braid-perf: dup of the %s fd: %s\n", perf_mem_name(b->kind), strerror(errno));
      return ncclSystemError;
    }
  } else { /* NCCL exports the range it registers, each time */
    size_t pg = membuf_page();
    uintptr_t lo = (uintptr_t)data / pg * pg, hi = membuf_round((uintptr_t)data + size, pg);
    offset = (uint64_t)((uintptr_t)data - lo);
    type = NCCL_PTR_CUDA;
    if (braid_cuda_dmabuf_export((void *)lo, hi - lo, &fd)) {
      fprintf(stderr, "braid-perf: --mem dmabuf: exporting %zu bytes: %s\n", (size_t)(hi - lo),
              braid_cuda_why());
      *call = "cuMemGetHandleForAddressRange";
      return ncclSystemError;
    }
  }
  ncclResult_t r = netload_reg_mr_dmabuf(nl, comm, data, size, type, offset, fd, mh);
  close(fd); /* as NCCL does, right after the call: the plugin must not keep it */
  return r;
}
