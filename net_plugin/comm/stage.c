/* Staging of GPU memory through host memory (see stage.h). */
#include "comm/stage.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "log.h"

struct braid_stage {
  char *gpu;
  size_t size;
  char *host;
  pthread_mutex_t lock; /* one copy at a time on the copier's stream */
  struct braid_cuda_copier copier;
};

struct braid_stage *braid_stage_new(void *gpu, size_t size, char *why, size_t whylen) {
  struct braid_stage *s = calloc(1, sizeof *s);
  void *host = NULL;
  if (!s || posix_memalign(&host, 4096, size ? size : 1) != 0) {
    free(s);
    snprintf(why, whylen, "no host memory for a %zu-byte staging buffer", size);
    return NULL;
  }
  if (braid_cuda_copier_open(&s->copier, gpu) != 0) {
    snprintf(why, whylen, "%s", braid_cuda_why());
    free(host);
    free(s);
    return NULL;
  }
  s->gpu = gpu;
  s->size = size;
  s->host = host;
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

void braid_stage_free(struct braid_stage *s) {
  if (!s) return;
  braid_cuda_copier_close(&s->copier);
  pthread_mutex_destroy(&s->lock);
  free(s->host);
  free(s);
}

/* p's offset in the registration, or SIZE_MAX when [p, p + len) is outside it. */
static size_t stage_off(const struct braid_stage *s, const void *p, size_t len) {
  uintptr_t a = (uintptr_t)p, lo = (uintptr_t)s->gpu;
  if (a < lo || a - lo > s->size || len > s->size - (a - lo)) return SIZE_MAX;
  return a - lo;
}

void *braid_stage_host(const struct braid_stage *s, const void *p, size_t len) {
  size_t off = stage_off(s, p, len);
  return off == SIZE_MAX ? NULL : s->host + off;
}

static int stage_copy(struct braid_stage *s, void *p, size_t len, int out) {
  size_t off = stage_off(s, p, len);
  if (off == SIZE_MAX) {
    BRAID_WARN("staging copy of %zu bytes at %p: outside the registration (%zu bytes at %p)", len, p,
               s->size, (void *)s->gpu);
    return -1;
  }
  pthread_mutex_lock(&s->lock);
  int rc = out ? braid_cuda_copy_htod(&s->copier, p, s->host + off, len)
               : braid_cuda_copy_dtoh(&s->copier, s->host + off, p, len);
  pthread_mutex_unlock(&s->lock);
  if (rc)
    BRAID_WARN("staging copy of %zu bytes %s GPU memory at %p failed: %s", len, out ? "into" : "out of", p,
               braid_cuda_why());
  return rc;
}

int braid_stage_in(struct braid_stage *s, const void *p, size_t len) { return stage_copy(s, (void *)p, len, 0); }

int braid_stage_out(struct braid_stage *s, void *p, size_t len) { return stage_copy(s, p, len, 1); }
