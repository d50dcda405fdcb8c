/* braid-perf: --mem kinds, the GPU a rank uses, and whether the plugin takes the memory. */
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cuda.h"
#include "udmabuf_dev.h"

static const char *const mem_names[] = {"host", "cuda", "dmabuf", "udmabuf", "memfd"};

const char *perf_mem_name(enum perf_mem m) { return mem_names[m]; }

int perf_mem_parse(const char *s, enum perf_mem *m) {
  for (int i = 0; i < (int)(sizeof mem_names / sizeof mem_names[0]); i++)
    if (!strcasecmp(s, mem_names[i])) {
      *m = (enum perf_mem)i;
      return 0;
    }
  return -1;
}

int perf_mem_is_gpu(enum perf_mem m) { return m == PERF_MEM_CUDA || m == PERF_MEM_DMABUF; }
int perf_mem_is_fd(enum perf_mem m) {
  return m == PERF_MEM_DMABUF || m == PERF_MEM_UDMABUF || m == PERF_MEM_MEMFD;
}

static int mem_no_gpu(enum perf_mem m, int rank, const char *why) {
  if (rank == 0) fprintf(stderr, "braid-perf: --mem %s: no CUDA GPU here (%s)\n", perf_mem_name(m), why);
  else fprintf(stderr, "braid-perf: rank %d: --mem %s: no CUDA GPU here (%s)\n", rank, perf_mem_name(m), why);
  return PERF_EXIT_NO_MEM;
}

static int mem_start_gpu(enum perf_mem m, int rank, char *describe, size_t len) {
  int count = 0, version = 0, major = 0, minor = 0, dmabuf = 0;
  char name[128] = "?";
  if (braid_cuda_init() || braid_cuda_driver_version(&version) || braid_cuda_device_count(&count))
    return mem_no_gpu(m, rank, braid_cuda_why());
  if (count < 1) return mem_no_gpu(m, rank, "the driver reports no device");
  int gpu = rank % count;
  if (braid_cuda_device_name(gpu, name, sizeof name) || braid_cuda_device_cc(gpu, &major, &minor) ||
      braid_cuda_dmabuf_supported(gpu, &dmabuf) || braid_cuda_use_device(gpu))
    return mem_no_gpu(m, rank, braid_cuda_why());
  if (m == PERF_MEM_DMABUF && !dmabuf) {
    fprintf(stderr, "braid-perf: rank %d: --mem dmabuf: GPU %d (%s) cannot export dma-bufs: "
            "CUDA driver %d.%d, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0 or no "
            "cuMemGetHandleForAddressRange (needs driver 11.7+ and a kernel with dma-buf)\n",
            rank, gpu, name, version / 1000, version % 1000 / 10);
    return PERF_EXIT_NO_MEM;
  }
  size_t used = strlen(describe);
  if (used < len)
    snprintf(describe + used, len - used, "; memory: %s on GPU %d of %d (%s, sm_%d%d), CUDA "
             "driver %d.%d, dma-buf export %s", perf_mem_name(m), gpu, count, name, major, minor,
             version / 1000, version % 1000 / 10, dmabuf ? "yes" : "no");
  return 0;
}

int perf_mem_start(enum perf_mem m, int rank, char *describe, size_t len) {
  if (perf_mem_is_gpu(m)) return mem_start_gpu(m, rank, describe, len);
  if (m == PERF_MEM_UDMABUF) {
    int fd = open(UDMABUF_DEV_PATH, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      fprintf(stderr, "braid-perf: rank %d: --mem udmabuf: no %s here (%s; as root: modprobe "
              "udmabuf, a kernel with CONFIG_UDMABUF)\n", rank, UDMABUF_DEV_PATH, strerror(errno));
      return PERF_EXIT_NO_MEM;
    }
    close(fd);
  }
  size_t used = strlen(describe);
  if (used < len)
    snprintf(describe + used, len - used, "; memory: %s%s", perf_mem_name(m),
             m == PERF_MEM_UDMABUF ? " (test only: host memory as dma-bufs from /dev/udmabuf)"
             : m == PERF_MEM_MEMFD ? " (test only: a memfd's fd passed to regMrDmaBuf as a dma-buf's)"
                                   : "");
  return 0;
}

int perf_mem_check_plugin(enum perf_mem m, const struct netload *nl, const netload_props_t *p,
                          int rank, int dev) {
  const char *bad = NULL;
  if (m == PERF_MEM_CUDA && !(p->ptrSupport & NCCL_PTR_CUDA))
    bad = "does not advertise NCCL_PTR_CUDA in ptrSupport (no GPUDirect RDMA registration)";
  else if (perf_mem_is_fd(m) && !(p->ptrSupport & NCCL_PTR_DMABUF))
    bad = "does not advertise NCCL_PTR_DMABUF in ptrSupport (no dma-buf registration)";
  else if (perf_mem_is_fd(m) &&
           !netload_has(nl, NETLOAD_FN_REG_MR_DMABUF))
    bad = "advertises NCCL_PTR_DMABUF but its regMrDmaBuf is NULL";
  if (!bad) return 0;
  fprintf(stderr, "braid-perf: rank %d: --mem %s refused: plugin \"%s\" (ncclNetPlugin_v%d) "
          "device %d (%s, ptrSupport 0x%x) %s\n", rank, perf_mem_name(m), nl->name ? nl->name : "?",
          nl->version, dev, p->name ? p->name : "?", p->ptrSupport, bad);
  return PERF_EXIT_MEM_REFUSED;
}
