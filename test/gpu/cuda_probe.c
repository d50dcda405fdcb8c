/* test/gpu/check.sh's probe of common/cuda.h on a machine with an NVIDIA GPU: the driver, each
 * GPU, device memory, pointer queries (device and host memory), a copy there and back, and a
 * dma-buf export (its fd checked for the size it covers).  One "PASS step" or "FAIL step: why"
 * line per step; exit 0 when all pass, 1 otherwise, 77 with "no GPU" when the driver or the GPU
 * is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda.h"

#define PROBE_BYTES (4u << 20)

static int probe_fails;

static void probe_step(const char *step, int ok, const char *why) {
  if (ok) printf("PASS %s\n", step);
  else printf("FAIL %s: %s\n", step, why);
  probe_fails += !ok;
}

static void probe_gpu(int dev) {
  char name[128] = "?", step[160];
  int major = 0, minor = 0, dmabuf = 0;
  int ok = !braid_cuda_device_name(dev, name, sizeof name) &&
           !braid_cuda_device_cc(dev, &major, &minor) &&
           !braid_cuda_dmabuf_supported(dev, &dmabuf);
  printf("GPU %d: %s, sm_%d%d, dma-buf export %s\n", dev, name, major, minor, dmabuf ? "yes" : "no");
  snprintf(step, sizeof step, "GPU %d: name, compute capability, dma-buf attribute", dev);
  probe_step(step, ok, braid_cuda_why());
  snprintf(step, sizeof step, "GPU %d: primary context current", dev);
  probe_step(step, !braid_cuda_use_device(dev), braid_cuda_why());
  void *d = NULL;
  snprintf(step, sizeof step, "GPU %d: cuMemAlloc %u bytes", dev, PROBE_BYTES);
  probe_step(step, !braid_cuda_alloc(&d, PROBE_BYTES), braid_cuda_why());
  if (!d) return;
  int is_dev = -1;
  snprintf(step, sizeof step, "GPU %d: cuPointerGetAttribute(MEMORY_TYPE) says device", dev);
  probe_step(step, !braid_cuda_is_device_ptr(d, &is_dev) && is_dev == 1,
             is_dev == 0 ? "reported host memory" : braid_cuda_why());
  char *h = malloc(PROBE_BYTES), *back = malloc(PROBE_BYTES);
  is_dev = -1;
  snprintf(step, sizeof step, "GPU %d: cuPointerGetAttribute says malloc'ed memory is not device", dev);
  probe_step(step, !braid_cuda_is_device_ptr(h, &is_dev) && is_dev == 0,
             is_dev == 1 ? "reported device memory" : braid_cuda_why());
  for (unsigned i = 0; i < PROBE_BYTES; i++) h[i] = (char)(i * 7 + (unsigned)dev);
  memset(back, 0, PROBE_BYTES);
  snprintf(step, sizeof step, "GPU %d: cuMemcpyHtoD then DtoH gives the bytes back", dev);
  ok = !braid_cuda_htod(d, h, PROBE_BYTES) && !braid_cuda_dtoh(back, d, PROBE_BYTES);
  probe_step(step, ok && !memcmp(h, back, PROBE_BYTES), ok ? "different bytes" : braid_cuda_why());
  int fd = -1;
  snprintf(step, sizeof step, "GPU %d: dma-buf export of %u bytes", dev, PROBE_BYTES);
  if (!dmabuf) {
    printf("SKIP %s (the driver or GPU cannot: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0)\n", step);
  } else if (braid_cuda_dmabuf_export(d, PROBE_BYTES, &fd)) {
    probe_step(step, 0, braid_cuda_why());
  } else {
    off_t end = lseek(fd, 0, SEEK_END); /* a dma-buf reports its size this way */
    char why[96];
    snprintf(why, sizeof why, "fd %d covers %lld bytes", fd, (long long)end);
    probe_step(step, end >= (off_t)PROBE_BYTES, why);
    close(fd);
  }
  free(h);
  free(back);
  snprintf(step, sizeof step, "GPU %d: cuMemFree and context release", dev);
  probe_step(step, !braid_cuda_free(d) && !braid_cuda_release_device(dev), braid_cuda_why());
}

int main(void) {
  int version = 0, count = 0;
  if (braid_cuda_init() || braid_cuda_driver_version(&version) || braid_cuda_device_count(&count)) {
    printf("no GPU: %s\n", braid_cuda_why());
    return 77;
  }
  printf("CUDA driver API %d.%d, %d GPU(s)\n", version / 1000, version % 1000 / 10, count);
  if (count < 1) {
    printf("no GPU: the driver reports none\n");
    return 77;
  }
  for (int dev = 0; dev < count && dev < 2; dev++) probe_gpu(dev);
  return probe_fails ? 1 : 0;
}
