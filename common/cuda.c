/* The CUDA driver, opened at run time (see cuda.h). */
#include "cuda.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dynlib.h"

/* The driver API's types and constants, as its ABI has them (cuda.h 11.7 to 13.0). */
typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_deviceptr;
typedef void *cu_stream;

#define CU_SUCCESS 0
#define CU_ERROR_INVALID_VALUE 1
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 124
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CU_DRIVER_DMABUF_MIN 11070 /* cuMemGetHandleForAddressRange appeared in 11.7 */

#define CUDA_SONAME "libcuda.so.1"

static struct {
  cu_result (*init)(unsigned int flags);
  cu_result (*driver_get_version)(int *version);
  cu_result (*device_get_count)(int *count);
  cu_result (*device_get)(cu_device *dev, int ordinal);
  cu_result (*device_get_name)(char *name, int len, cu_device dev);
  cu_result (*device_get_attribute)(int *value, int attr, cu_device dev);
  cu_result (*primary_ctx_retain)(cu_context *ctx, cu_device dev);
  cu_result (*primary_ctx_release)(cu_device dev);
  cu_result (*ctx_set_current)(cu_context ctx);
  cu_result (*mem_alloc)(cu_deviceptr *dptr, size_t size);
  cu_result (*mem_free)(cu_deviceptr dptr);
  cu_result (*memcpy_htod)(cu_deviceptr dst, const void *src, size_t size);
  cu_result (*memcpy_dtoh)(void *dst, cu_deviceptr src, size_t size);
  cu_result (*pointer_get_attribute)(void *data, int attr, cu_deviceptr ptr);
  cu_result (*ctx_get_current)(cu_context *ctx);
  cu_result (*ctx_push)(cu_context ctx);
  cu_result (*ctx_pop)(cu_context *ctx);
  cu_result (*stream_create)(cu_stream *stream, unsigned int flags);
  cu_result (*stream_destroy)(cu_stream stream);
  cu_result (*stream_sync)(cu_stream stream);
  cu_result (*memcpy_htod_async)(cu_deviceptr dst, const void *src, size_t size, cu_stream s);
  cu_result (*memcpy_dtoh_async)(void *dst, cu_deviceptr src, size_t size, cu_stream s);
  cu_result (*get_error_string)(cu_result err, const char **str);
  cu_result (*get_error_name)(cu_result err, const char **str);
  /* optional: drivers before 11.7 lack it, and only dma-buf export is lost */
  cu_result (*get_handle_for_address_range)(void *handle, cu_deviceptr dptr, size_t size,
                                            int type, unsigned long long flags);
} cu;

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_state = -1;        /* 0 once cuInit succeeded */
static char cuda_init_why[320];    /* why it did not */
static _Thread_local char cuda_why_buf[320];

const char *braid_cuda_why(void) { return cuda_why_buf; }

/* "CALL failed: CUDA_ERROR_X (the driver's words)"; returns -1. */
static int cuda_fail(const char *call, cu_result r) {
  const char *name = NULL, *str = NULL;
  if (cu.get_error_name && cu.get_error_name(r, &name) != CU_SUCCESS) name = NULL;
  if (cu.get_error_string && cu.get_error_string(r, &str) != CU_SUCCESS) str = NULL;
  if (name)
    snprintf(cuda_why_buf, sizeof cuda_why_buf, "%s failed: %s (%s)", call, name,
             str ? str : "no description");
  else
    snprintf(cuda_why_buf, sizeof cuda_why_buf, "%s failed: CUDA error %d", call, r);
  return -1;
}

static int cuda_fail_text(const char *text) {
  snprintf(cuda_why_buf, sizeof cuda_why_buf, "%s", text);
  return -1;
}

#define CUDA_SYM(field, name) \
  (*(void **)&cu.field = braid_dynlib_sym(lib, CUDA_SONAME, name, &missing, why, sizeof why))

static void cuda_load(void) {
  static const char *const sonames[] = {CUDA_SONAME, NULL};
  char why[256] = "";
  void *lib = braid_dynlib_open(sonames, why, sizeof why);
  if (!lib) {
    snprintf(cuda_init_why, sizeof cuda_init_why, "%s: no NVIDIA driver", why);
    return;
  }
  bool missing = false;
  CUDA_SYM(init, "cuInit");
  CUDA_SYM(driver_get_version, "cuDriverGetVersion");
  CUDA_SYM(device_get_count, "cuDeviceGetCount");
  CUDA_SYM(device_get, "cuDeviceGet");
  CUDA_SYM(device_get_name, "cuDeviceGetName");
  CUDA_SYM(device_get_attribute, "cuDeviceGetAttribute");
  CUDA_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  CUDA_SYM(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
  CUDA_SYM(ctx_set_current, "cuCtxSetCurrent");
  CUDA_SYM(mem_alloc, "cuMemAlloc_v2");
  CUDA_SYM(mem_free, "cuMemFree_v2");
  CUDA_SYM(memcpy_htod, "cuMemcpyHtoD_v2");
  CUDA_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2");
  CUDA_SYM(pointer_get_attribute, "cuPointerGetAttribute");
  CUDA_SYM(ctx_get_current, "cuCtxGetCurrent");
  CUDA_SYM(ctx_push, "cuCtxPushCurrent_v2");
  CUDA_SYM(ctx_pop, "cuCtxPopCurrent_v2");
  CUDA_SYM(stream_create, "cuStreamCreate");
  CUDA_SYM(stream_destroy, "cuStreamDestroy_v2");
  CUDA_SYM(stream_sync, "cuStreamSynchronize");
  CUDA_SYM(memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
  CUDA_SYM(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
  CUDA_SYM(get_error_string, "cuGetErrorString");
  CUDA_SYM(get_error_name, "cuGetErrorName");
  if (missing) {
    snprintf(cuda_init_why, sizeof cuda_init_why, "%s", why);
    memset(&cu, 0, sizeof cu);
    return;
  }
  bool optional_missing = false;
  char optional_why[128];
  *(void **)&cu.get_handle_for_address_range =
      braid_dynlib_sym(lib, CUDA_SONAME, "cuMemGetHandleForAddressRange", &optional_missing,
                       optional_why, sizeof optional_why);
  cu_result r = cu.init(0);
  if (r != CU_SUCCESS) {
    cuda_fail("cuInit", r);
    snprintf(cuda_init_why, sizeof cuda_init_why, "%s", cuda_why_buf);
    return;
  }
  cuda_state = 0;
}

int braid_cuda_init(void) {
  pthread_once(&cuda_once, cuda_load);
  if (cuda_state == 0) return 0;
  return cuda_fail_text(cuda_init_why);
}

int braid_cuda_driver_version(int *version) {
  if (braid_cuda_init()) return -1;
  cu_result r = cu.driver_get_version(version);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuDriverGetVersion", r);
}

int braid_cuda_device_count(int *count) {
  if (braid_cuda_init()) return -1;
  cu_result r = cu.device_get_count(count);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuDeviceGetCount", r);
}

static int cuda_device(int ordinal, cu_device *dev) {
  if (braid_cuda_init()) return -1;
  cu_result r = cu.device_get(dev, ordinal);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuDeviceGet", r);
}

static int cuda_attr(int ordinal, int attr, int *value) {
  cu_device dev;
  if (cuda_device(ordinal, &dev)) return -1;
  cu_result r = cu.device_get_attribute(value, attr, dev);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuDeviceGetAttribute", r);
}

int braid_cuda_device_name(int ordinal, char *name, size_t len) {
  cu_device dev;
  if (len == 0 || len > INT32_MAX) return cuda_fail_text("cuDeviceGetName: bad buffer length");
  if (cuda_device(ordinal, &dev)) return -1;
  cu_result r = cu.device_get_name(name, (int)len, dev);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuDeviceGetName", r);
}

int braid_cuda_device_cc(int ordinal, int *major, int *minor) {
  if (cuda_attr(ordinal, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, major)) return -1;
  return cuda_attr(ordinal, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, minor);
}

int braid_cuda_dmabuf_supported(int ordinal, int *supported) {
  int version = 0;
  *supported = 0;
  if (braid_cuda_driver_version(&version)) return -1;
  if (version < CU_DRIVER_DMABUF_MIN || !cu.get_handle_for_address_range) return 0;
  return cuda_attr(ordinal, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, supported);
}

int braid_cuda_use_device(int ordinal) {
  cu_device dev;
  cu_context ctx = NULL;
  if (cuda_device(ordinal, &dev)) return -1;
  cu_result r = cu.primary_ctx_retain(&ctx, dev);
  if (r != CU_SUCCESS) return cuda_fail("cuDevicePrimaryCtxRetain", r);
  r = cu.ctx_set_current(ctx);
  if (r == CU_SUCCESS) return 0;
  cuda_fail("cuCtxSetCurrent", r);
  char keep[sizeof cuda_why_buf];
  memcpy(keep, cuda_why_buf, sizeof keep);
  cu.primary_ctx_release(dev);
  memcpy(cuda_why_buf, keep, sizeof keep);
  return -1;
}

int braid_cuda_release_device(int ordinal) {
  cu_device dev;
  if (cuda_device(ordinal, &dev)) return -1;
  cu_result r = cu.ctx_set_current(NULL);
  if (r != CU_SUCCESS) return cuda_fail("cuCtxSetCurrent", r);
  r = cu.primary_ctx_release(dev);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuDevicePrimaryCtxRelease_v2", r);
}

int braid_cuda_alloc(void **dptr, size_t size) {
  cu_deviceptr p = 0;
  *dptr = NULL;
  if (braid_cuda_init()) return -1;
  cu_result r = cu.mem_alloc(&p, size);
  if (r != CU_SUCCESS) return cuda_fail("cuMemAlloc_v2", r);
  *dptr = (void *)(uintptr_t)p;
  return 0;
}

int braid_cuda_free(void *dptr) {
  if (braid_cuda_init()) return -1;
  cu_result r = cu.mem_free((cu_deviceptr)(uintptr_t)dptr);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuMemFree_v2", r);
}

int braid_cuda_htod(void *dst, const void *src, size_t size) {
  if (braid_cuda_init()) return -1;
  cu_result r = cu.memcpy_htod((cu_deviceptr)(uintptr_t)dst, src, size);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuMemcpyHtoD_v2", r);
}

int braid_cuda_dtoh(void *dst, const void *src, size_t size) {
  if (braid_cuda_init()) return -1;
  cu_result r = cu.memcpy_dtoh(dst, (cu_deviceptr)(uintptr_t)src, size);
  return r == CU_SUCCESS ? 0 : cuda_fail("cuMemcpyDtoH_v2", r);
}

int braid_cuda_is_device_ptr(const void *ptr, int *is_device) {
  unsigned int type = 0;
  *is_device = 0;
  if (braid_cuda_init()) return -1;
  cu_result r = cu.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                         (cu_deviceptr)(uintptr_t)ptr);
  if (r == CU_ERROR_INVALID_VALUE) return 0; /* memory CUDA does not know: plain host memory */
  if (r != CU_SUCCESS) return cuda_fail("cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMORY_TYPE)", r);
  *is_device = type == CU_MEMORYTYPE_DEVICE;
  return 0;
}

int braid_cuda_dmabuf_export(void *ptr, size_t size, int *fd) {
  int version = 0;
  *fd = -1;
  if (braid_cuda_driver_version(&version)) return -1;
  if (version < CU_DRIVER_DMABUF_MIN || !cu.get_handle_for_address_range) {
    snprintf(cuda_why_buf, sizeof cuda_why_buf, "dma-buf export unsupported by this driver "
             "(CUDA %d.%d; cuMemGetHandleForAddressRange needs 11.7 or later)", version / 1000,
             version % 1000 / 10);
    return -1;
  }
  int handle = -1;
  cu_result r = cu.get_handle_for_address_range(&handle, (cu_deviceptr)(uintptr_t)ptr, size,
                                                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CU_SUCCESS) {
    cuda_fail("cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)", r);
    char detail[sizeof cuda_why_buf];
    memcpy(detail, cuda_why_buf, sizeof detail);
    snprintf(cuda_why_buf, sizeof cuda_why_buf, "dma-buf export unsupported by this driver/GPU "
             "or range: %.250s", detail);
    return -1;
  }
  *fd = handle;
  return 0;
}

/* ---------- staging copies ---------- */

int braid_cuda_copier_open(struct braid_cuda_copier *c, const void *dptr) {
  memset(c, 0, sizeof *c);
  c->dev = -1;
  if (braid_cuda_init()) return -1;
  cu_context ctx = NULL;
  cu_result r = cu.ctx_get_current(&ctx);
  if (r != CU_SUCCESS) return cuda_fail("cuCtxGetCurrent", r);
  if (!ctx) { /* no context on this thread: the primary one of the memory's device */
    int ordinal = -1;
    r = cu.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (cu_deviceptr)(uintptr_t)dptr);
    if (r != CU_SUCCESS) return cuda_fail("cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)", r);
    cu_device dev;
    if (cuda_device(ordinal, &dev)) return -1;
    r = cu.primary_ctx_retain(&ctx, dev);
    if (r != CU_SUCCESS) return cuda_fail("cuDevicePrimaryCtxRetain", r);
    c->dev = dev;
  }
  c->ctx = ctx;
  r = cu.ctx_push(ctx);
  if (r == CU_SUCCESS) {
    cu_stream s = NULL;
    r = cu.stream_create(&s, CU_STREAM_NON_BLOCKING);
    cu_context popped;
    cu.ctx_pop(&popped);
    if (r == CU_SUCCESS) {
      c->stream = s;
      return 0;
    }
    cuda_fail("cuStreamCreate(CU_STREAM_NON_BLOCKING)", r);
  } else {
    cuda_fail("cuCtxPushCurrent_v2", r);
  }
  if (c->dev >= 0) cu.primary_ctx_release(c->dev);
  c->ctx = NULL;
  return -1;
}

void braid_cuda_copier_close(struct braid_cuda_copier *c) {
  if (!c->stream) return;
  cu_context popped;
  if (cu.ctx_push(c->ctx) == CU_SUCCESS) {
    cu.stream_destroy(c->stream);
    cu.ctx_pop(&popped);
  }
  if (c->dev >= 0) cu.primary_ctx_release(c->dev);
  memset(c, 0, sizeof *c);
}

/* One copy on c's stream, waited for, in c's context. */
static int copier_copy(struct braid_cuda_copier *c, bool to_device, void *dst, const void *src, size_t size) {
  if (!c->stream) return cuda_fail_text("the staging copier is not open");
  if (size == 0) return 0;
  cu_result r = cu.ctx_push(c->ctx);
  if (r != CU_SUCCESS) return cuda_fail("cuCtxPushCurrent_v2", r);
  const char *what = to_device ? "cuMemcpyHtoDAsync_v2" : "cuMemcpyDtoHAsync_v2";
  r = to_device ? cu.memcpy_htod_async((cu_deviceptr)(uintptr_t)dst, src, size, c->stream)
                : cu.memcpy_dtoh_async(dst, (cu_deviceptr)(uintptr_t)src, size, c->stream);
  if (r == CU_SUCCESS) {
    what = "cuStreamSynchronize";
    r = cu.stream_sync(c->stream);
  }
  cu_context popped;
  cu.ctx_pop(&popped);
  return r == CU_SUCCESS ? 0 : cuda_fail(what, r);
}

int braid_cuda_copy_dtoh(struct braid_cuda_copier *c, void *dst, const void *src, size_t size) {
  return copier_copy(c, false, dst, src, size);
}

int braid_cuda_copy_htod(struct braid_cuda_copier *c, void *dst, const void *src, size_t size) {
  return copier_copy(c, true, dst, src, size);
}
