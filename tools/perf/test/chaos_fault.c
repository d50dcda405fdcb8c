/* chaos-net's data faults (test only): see chaos_fault.h. */
#include "chaos_fault.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CF_MAX_SUBS 8     /* NCCL's most receives in one irecv */
#define CF_MAX_POSTED 1024 /* receives in flight that are tracked */
#define CF_MAX_SEEN 8192  /* buffers whose last data the stale fault keeps */

struct cf_posted {
  void *req; /* NULL: free slot */
  int n;
  void *data[CF_MAX_SUBS];
  size_t size[CF_MAX_SUBS];
  unsigned char *before[CF_MAX_SUBS]; /* the buffer as it was when posted (drop fault) */
};

struct cf_seen {
  void *data;
  size_t len;
  unsigned char *bytes; /* what the last receive into data brought */
};

static pthread_mutex_t cf_mu = PTHREAD_MUTEX_INITIALIZER;
static long cf_drop_at, cf_stale_at; /* 0: off */
static long cf_done;                 /* receives completed with data */
static int cf_fired, cf_inited;
static struct cf_posted cf_posted[CF_MAX_POSTED];
static struct cf_seen cf_seen[CF_MAX_SEEN];
static int cf_nseen;

static long cf_env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? atol(v) : 0;
}

void chaos_fault_init(void) {
  pthread_mutex_lock(&cf_mu);
  if (!cf_inited) {
    cf_drop_at = cf_env("CHAOS_DROP_RECV");
    cf_stale_at = cf_env("CHAOS_STALE_RECV");
    cf_inited = 1;
  }
  pthread_mutex_unlock(&cf_mu);
}

static int cf_armed(void) { return !cf_fired && (cf_drop_at > 0 || cf_stale_at > 0); }

static void cf_release(struct cf_posted *p) {
  for (int i = 0; i < p->n; i++) free(p->before[i]);
  memset(p, 0, sizeof *p);
}

void *chaos_fault_posting(int n, void **data, const size_t *sizes) {
  if (n < 1 || n > CF_MAX_SUBS) return NULL;
  pthread_mutex_lock(&cf_mu);
  struct cf_posted *p = NULL;
  for (int k = 0; cf_armed() && k < CF_MAX_POSTED && !p; k++)
    if (!cf_posted[k].req && !cf_posted[k].n) p = &cf_posted[k];
  if (p) {
    p->n = n;
    for (int i = 0; i < n; i++) {
      p->data[i] = data[i];
      p->size[i] = sizes[i];
      if (cf_drop_at > 0 && sizes[i] && (p->before[i] = malloc(sizes[i])))
        memcpy(p->before[i], data[i], sizes[i]);
    }
  }
  pthread_mutex_unlock(&cf_mu);
  return p;
}

void chaos_fault_posted(void *token, void *req) {
  if (!token) return;
  pthread_mutex_lock(&cf_mu);
  struct cf_posted *p = token;
  if (req) p->req = req;
  else cf_release(p);
  pthread_mutex_unlock(&cf_mu);
}

static struct cf_seen *cf_find_seen(void *data) {
  for (int k = 0; k < cf_nseen; k++)
    if (cf_seen[k].data == data) return &cf_seen[k];
  return NULL;
}

/* Remembers what this receive brought into data (stale fault). */
static void cf_remember(void *data, size_t len) {
  struct cf_seen *s = cf_find_seen(data);
  if (!s && cf_nseen < CF_MAX_SEEN) s = &cf_seen[cf_nseen++], s->data = data;
  if (!s) return;
  unsigned char *b = realloc(s->bytes, len);
  if (!b) return;
  memcpy(b, data, len);
  s->bytes = b, s->len = len;
}

static void cf_forget_all(void) {
  for (int k = 0; k < cf_nseen; k++) free(cf_seen[k].bytes);
  cf_nseen = 0;
}

/* Applies a fault to the first sub-receive with data; 1 when one fired. */
static int cf_apply(struct cf_posted *p, const int *sizes) {
  for (int i = 0; i < p->n; i++) {
    size_t len = sizes ? (size_t)(sizes[i] > 0 ? sizes[i] : 0) : p->size[i];
    if (!len) continue;
    cf_done++;
    if (cf_drop_at > 0 && cf_done == cf_drop_at && p->before[i]) {
      memcpy(p->data[i], p->before[i], len);
      fprintf(stderr, "chaos-net: CHAOS_DROP_RECV=%ld: receive %ld's %zu bytes at %p dropped "
              "(the buffer holds what it held when posted)\n", cf_drop_at, cf_done, len, p->data[i]);
      return 1;
    }
    struct cf_seen *s = cf_stale_at > 0 ? cf_find_seen(p->data[i]) : NULL;
    if (s && cf_done >= cf_stale_at && s->len >= len) {
      memcpy(p->data[i], s->bytes, len);
      fprintf(stderr, "chaos-net: CHAOS_STALE_RECV=%ld: receive %ld's %zu bytes at %p replaced "
              "by the earlier receive's there\n", cf_stale_at, cf_done, len, p->data[i]);
      return 1;
    }
    if (cf_stale_at > 0) cf_remember(p->data[i], len);
    return 0;
  }
  return 0;
}

void chaos_fault_done(void *req, const int *sizes) {
  pthread_mutex_lock(&cf_mu);
  for (int k = 0; req && k < CF_MAX_POSTED; k++) {
    struct cf_posted *p = &cf_posted[k];
    if (p->req != req) continue;
    if (cf_armed() && cf_apply(p, sizes)) {
      cf_fired = 1;
      cf_forget_all();
    }
    cf_release(p);
    break;
  }
  pthread_mutex_unlock(&cf_mu);
}
