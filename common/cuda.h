/* The CUDA driver, opened at run time.
 *
 * libcuda.so.1 is dlopen()ed on first use (common/dynlib.h), never linked, and cuInit(0) is
 * called once per process, thread-safely; without an NVIDIA driver every call below fails with
 * the reason and everything else runs unchanged.  The driver's functions are declared here by
 * hand (no cuda.h: braid builds without the toolkit) and resolved by their versioned names
 * where the driver has several (cuMemAlloc_v2, cuMemFree_v2, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2,
 * cuDevicePrimaryCtxRelease_v2).
 *
 * Every function returns 0 on success and -1 on failure; braid_cuda_why() then says why, in
 * words a user can act on ("libcuda.so.1 cannot be loaded (...): no NVIDIA driver",
 * "cuInit failed: CUDA_ERROR_NO_DEVICE (...)", "dma-buf export unsupported by this driver").
 * Device pointers travel as void *, as NCCL hands them to a net plugin. */
#ifndef BRAID_CUDA_H
#define BRAID_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Loads the driver and calls cuInit(0), once per process (later calls return the first
 * call's answer).  Every other function calls it first. */
int braid_cuda_init(void);

/* Why the calling thread's last failed braid_cuda_* call failed ("" if none has). */
const char *braid_cuda_why(void);

/* cuDriverGetVersion: 1000 * major + 10 * minor (12040 is 12.4). */
int braid_cuda_driver_version(int *version);
int braid_cuda_device_count(int *count);
/* The device's name (cuDeviceGetName) and compute capability. */
int braid_cuda_device_name(int dev, char *name, size_t len);
int braid_cuda_device_cc(int dev, int *major, int *minor);
/* Whether the driver and device can export device memory as a dma-buf: driver 11.7 or later,
 * cuMemGetHandleForAddressRange present and CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED set. */
int braid_cuda_dmabuf_supported(int dev, int *supported);

/* Retains dev's primary context and makes it current on the calling thread (what the CUDA
 * runtime does); braid_cuda_release(dev) gives it back. */
int braid_cuda_use_device(int dev);
int braid_cuda_release_device(int dev);

/* Device memory in the current context. */
int braid_cuda_alloc(void **dptr, size_t size);
int braid_cuda_free(void *dptr);
int braid_cuda_htod(void *dst, const void *src, size_t size);
int braid_cuda_dtoh(void *dst, const void *src, size_t size);

/* *is_device = 1 when ptr is device memory (CU_POINTER_ATTRIBUTE_MEMORY_TYPE is
 * CU_MEMORYTYPE_DEVICE), 0 for memory CUDA does not know (plain host memory).  Fails only when
 * the driver cannot answer (not loaded, or another error). */
int braid_cuda_is_device_ptr(const void *ptr, int *is_device);

/* Exports [ptr, ptr + size) of device memory as a dma-buf file descriptor
 * (cuMemGetHandleForAddressRange, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD): the caller closes it.
 * ptr and size must be multiples of the host page size. */
int braid_cuda_dmabuf_export(void *ptr, size_t size, int *fd);

/* Copies between device memory and host memory for staging (a connection that carries host
 * memory only, holding GPU memory NCCL registered).  Each copier has a stream of its own created
 * CU_STREAM_NON_BLOCKING: a copy never waits, as the legacy default stream's would, for the work
 * of other streams, among them the NCCL kernel that waits for this very copy's data.  The copier
 * remembers its context (the opening thread's current one, else the primary context of dptr's
 * device, retained) and makes it current around each copy, so any thread may copy. */
struct braid_cuda_copier {
  void *ctx, *stream;
  int dev; /* the device whose primary context the copier retained, or -1 */
};
int braid_cuda_copier_open(struct braid_cuda_copier *c, const void *dptr);
void braid_cuda_copier_close(struct braid_cuda_copier *c);
/* A copy of size bytes, finished when the call returns. */
int braid_cuda_copy_dtoh(struct braid_cuda_copier *c, void *dst, const void *src, size_t size);
int braid_cuda_copy_htod(struct braid_cuda_copier *c, void *dst, const void *src, size_t size);

#ifdef __cplusplus
}
#endif

#endif
