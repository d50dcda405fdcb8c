/* A stand-in for the CUDA driver (libcuda.so.1) for the staging tests: the calls braid makes
 * (common/cuda.c), with device memory the host cannot touch.
 *
 * cuMemAlloc_v2 maps a memfd twice: the address it returns (the "device pointer") is PROT_NONE,
 * so a plugin that reads or writes GPU memory with the CPU instead of staging it faults at once;
 * the copies use a second, writable mapping of the same pages.  Every copy checks what the real
 * driver would refuse: a context must be current, the device range must be allocated, and the
 * asynchronous copies must run on a stream created CU_STREAM_NON_BLOCKING (a copy on the legacy
 * default stream, or on a blocking stream, would wait for the NCCL kernel that waits for the
 * copy).  fake_cuda_stats() counts what was done, for the tests. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum {
  OK = 0,
  INVALID_VALUE = 1,
  OUT_OF_MEMORY = 2,
  NOT_INITIALIZED = 3,
  INVALID_CONTEXT = 201,
  INVALID_HANDLE = 400,
};

struct alloc {
  uintptr_t dev;  /* PROT_NONE: what the plugin sees */
  char *shadow;   /* the same pages, writable: what a copy touches */
  size_t size;
  int fd;
};

#define MAX_ALLOCS 64
#define MAX_STREAMS 64
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc allocs[MAX_ALLOCS];
static int inited;
static struct {
  int used;
  unsigned flags;
} streams[MAX_STREAMS];
static int ctx_token; /* the one device's primary context is &ctx_token */
static __thread void *ctx_stack[8];
static __thread int ctx_depth;
static __thread void *ctx_current;

struct fake_cuda_stats {
  long copies_dtoh, copies_htod, bytes_dtoh, bytes_htod, streams_created, streams_destroyed;
};
static struct fake_cuda_stats stats;

EXPORT struct fake_cuda_stats fake_cuda_stats(void) {
  pthread_mutex_lock(&mu);
  struct fake_cuda_stats s = stats;
  pthread_mutex_unlock(&mu);
  return s;
}

/* The writable view of [dev, dev + size), or NULL when it is not allocated device memory. */
static char *shadow_of(uintptr_t dev, size_t size) {
  for (int i = 0; i < MAX_ALLOCS; i++) {
    struct alloc *a = &allocs[i];
    if (a->size && dev >= a->dev && dev - a->dev <= a->size && size <= a->size - (dev - a->dev))
      return a->shadow + (dev - a->dev);
  }
  return NULL;
}

EXPORT int cuInit(unsigned flags) {
  (void)flags;
  inited = 1;
  return OK;
}
EXPORT int cuDriverGetVersion(int *v) {
  *v = 12040;
  return OK;
}
EXPORT int cuDeviceGetCount(int *n) {
  *n = 1;
  return inited ? OK : NOT_INITIALIZED;
}
EXPORT int cuDeviceGet(int *dev, int ordinal) {
  if (ordinal != 0) return INVALID_VALUE;
  *dev = 0;
  return OK;
}
EXPORT int cuDeviceGetName(char *name, int len, int dev) {
  (void)dev;
  strncpy(name, "braid fake GPU", (size_t)len);
  name[len - 1] = 0;
  return OK;
}
EXPORT int cuDeviceGetAttribute(int *value, int attr, int dev) {
  (void)dev;
  *value = attr == 75 ? 9 : attr == 76 ? 0 : attr == 124 ? 1 : 0;
  return OK;
}
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  if (dev != 0) return INVALID_VALUE;
  *ctx = &ctx_token;
  return OK;
}
EXPORT int cuDevicePrimaryCtxRelease_v2(int dev) { return dev == 0 ? OK : INVALID_VALUE; }
EXPORT int cuCtxSetCurrent(void *ctx) {
  ctx_current = ctx;
  return OK;
}
EXPORT int cuCtxGetCurrent(void **ctx) {
  *ctx = ctx_current;
  return OK;
}
EXPORT int cuCtxPushCurrent_v2(void *ctx) {
  if (ctx != &ctx_token || ctx_depth == 8) return INVALID_CONTEXT;
  ctx_stack[ctx_depth++] = ctx_current;
  ctx_current = ctx;
  return OK;
}
EXPORT int cuCtxPopCurrent_v2(void **ctx) {
  if (!ctx_depth) return INVALID_CONTEXT;
  if (ctx) *ctx = ctx_current;
  ctx_current = ctx_stack[--ctx_depth];
  return OK;
}

EXPORT int cuMemAlloc_v2(unsigned long long *dptr, size_t size) {
  if (!ctx_current) return INVALID_CONTEXT;
  size_t len = (size + 4095) & ~(size_t)4095;
  int fd = memfd_create("fake-gpu", 0);
  if (fd < 0 || ftruncate(fd, (off_t)len) != 0) return OUT_OF_MEMORY;
  void *dev = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
  void *shadow = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (dev == MAP_FAILED || shadow == MAP_FAILED) return OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (!allocs[i].size) {
      allocs[i] = (struct alloc){(uintptr_t)dev, shadow, len, fd};
      pthread_mutex_unlock(&mu);
      *dptr = (uintptr_t)dev;
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return OUT_OF_MEMORY;
}

EXPORT int cuMemFree_v2(unsigned long long dptr) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].size && allocs[i].dev == dptr) {
      munmap((void *)allocs[i].dev, allocs[i].size);
      munmap(allocs[i].shadow, allocs[i].size);
      close(allocs[i].fd);
      memset(&allocs[i], 0, sizeof allocs[i]);
      pthread_mutex_unlock(&mu);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return INVALID_VALUE;
}

static int copy(unsigned long long dev, void *host, size_t size, int to_device) {
  if (!ctx_current) return INVALID_CONTEXT;
  pthread_mutex_lock(&mu);
  char *sh = shadow_of((uintptr_t)dev, size);
  if (sh) {
    if (to_device) memcpy(sh, host, size), stats.copies_htod++, stats.bytes_htod += (long)size;
    else memcpy(host, sh, size), stats.copies_dtoh++, stats.bytes_dtoh += (long)size;
  }
  pthread_mutex_unlock(&mu);
  return sh ? OK : INVALID_VALUE;
}

EXPORT int cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t size) {
  return copy(dst, (void *)src, size, 1);
}
EXPORT int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t size) { return copy(src, dst, size, 0); }

static int stream_ok(void *s) {
  uintptr_t i = (uintptr_t)s;
  return i >= 1 && i <= MAX_STREAMS && streams[i - 1].used && (streams[i - 1].flags & 1);
}

EXPORT int cuStreamCreate(void **s, unsigned flags) {
  if (!ctx_current) return INVALID_CONTEXT;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < MAX_STREAMS; i++)
    if (!streams[i].used) {
      streams[i].used = 1;
      streams[i].flags = flags;
      stats.streams_created++;
      pthread_mutex_unlock(&mu);
      *s = (void *)(uintptr_t)(i + 1);
      return OK;
    }
  pthread_mutex_unlock(&mu);
  return OUT_OF_MEMORY;
}
EXPORT int cuStreamDestroy_v2(void *s) {
  uintptr_t i = (uintptr_t)s;
  if (i < 1 || i > MAX_STREAMS || !streams[i - 1].used) return INVALID_HANDLE;
  pthread_mutex_lock(&mu);
  streams[i - 1].used = 0;
  stats.streams_destroyed++;
  pthread_mutex_unlock(&mu);
  return OK;
}
EXPORT int cuStreamSynchronize(void *s) { return stream_ok(s) ? OK : INVALID_HANDLE; }
EXPORT int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t size, void *s) {
  return stream_ok(s) ? copy(dst, (void *)src, size, 1) : INVALID_HANDLE;
}
EXPORT int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t size, void *s) {
  return stream_ok(s) ? copy(src, dst, size, 0) : INVALID_HANDLE;
}

EXPORT int cuPointerGetAttribute(void *data, int attr, unsigned long long ptr) {
  pthread_mutex_lock(&mu);
  char *sh = shadow_of((uintptr_t)ptr, 1);
  pthread_mutex_unlock(&mu);
  if (!sh) return INVALID_VALUE;
  if (attr == 2) *(unsigned *)data = 2; /* CU_MEMORYTYPE_DEVICE */
  else if (attr == 9) *(int *)data = 0; /* the device ordinal */
  else return INVALID_VALUE;
  return OK;
}

EXPORT int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size, int type,
                                         unsigned long long flags) {
  (void)flags;
  if (type != 1) return INVALID_VALUE;
  pthread_mutex_lock(&mu);
  int fd = -1;
  for (int i = 0; i < MAX_ALLOCS && fd < 0; i++)
    if (allocs[i].size && dptr >= allocs[i].dev && dptr + size <= allocs[i].dev + allocs[i].size)
      fd = dup(allocs[i].fd);
  pthread_mutex_unlock(&mu);
  if (fd < 0) return INVALID_VALUE;
  *(int *)handle = fd;
  return OK;
}

EXPORT int cuGetErrorName(int err, const char **s) {
  *s = err == INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : err == INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT"
     : err == INVALID_HANDLE ? "CUDA_ERROR_INVALID_HANDLE" : "CUDA_ERROR_FAKE";
  return OK;
}
EXPORT int cuGetErrorString(int err, const char **s) {
  (void)err;
  *s = "the fake driver refused it";
  return OK;
}
