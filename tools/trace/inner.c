/* braid-trace: the wrapped plugin (BRAID_TRACE_INNER, an NCCL_NET_PLUGIN value), and the checks
 * on the objects the caller hands back to us. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "param.h"
#include "trace.h"

struct netload trace_nl;

static pthread_mutex_t inner_lock = PTHREAD_MUTEX_INITIALIZER;
static int inner_state;              /* 0: not tried, 1: open, -1: failed */
static ncclResult_t inner_rc;
static struct trace_ctx *inner_default;

/* BRAID_TRACE_INNER naming this very library would recurse forever. */
static int inner_is_self(const void *table) {
  Dl_info mine, theirs;
  if (!dladdr((const void *)&trace_nl, &mine) || !dladdr(table, &theirs)) return 0;
  return mine.dli_fbase == theirs.dli_fbase;
}

static void inner_open_locked(void) {
  const char *name = braid_param_str(BRAID_P_TRACE_INNER);
  char err[1024];
  uint64_t t0 = braid_now_ns();
  inner_rc = netload_open(&trace_nl, name, 0, err, sizeof err);
  if (inner_rc == ncclSuccess && inner_is_self(trace_nl.net.any)) {
    snprintf(err, sizeof err, "%s is braid-trace itself", trace_nl.path);
    netload_close(&trace_nl);
    inner_rc = ncclInvalidUsage;
  }
  struct trace_line l;
  trace_line_begin(&l, "load", t0);
  if (inner_rc == ncclSuccess) {
    trace_line_add(&l, "path=%s name=%s version=%d", trace_nl.path,
                   trace_nl.name ? trace_nl.name : "-", trace_nl.version);
    BRAID_INFO(NCCL_INIT | NCCL_NET, "braid-trace: tracing net plugin %s (%s, ncclNetPlugin_v%d)",
               trace_nl.name ? trace_nl.name : "?", trace_nl.path, trace_nl.version);
  } else {
    trace_line_add(&l, "path=%s name=- version=0", name);
    BRAID_WARN("braid-trace: cannot load the plugin to trace (BRAID_TRACE_INNER=%s): %s", name,
               err);
  }
  trace_emit(&l, inner_rc, t0, braid_now_ns(), NULL, 0, 0);
  inner_state = inner_rc == ncclSuccess ? 1 : -1;
}

ncclResult_t trace_inner_open(void) {
  pthread_mutex_lock(&inner_lock);
  if (inner_state == 0) inner_open_locked();
  ncclResult_t rc = inner_rc;
  pthread_mutex_unlock(&inner_lock);
  return rc;
}

struct trace_ctx *trace_default_ctx(void) {
  pthread_mutex_lock(&inner_lock);
  struct trace_ctx *c = inner_default;
  pthread_mutex_unlock(&inner_lock);
  return c;
}

void trace_set_default_ctx(struct trace_ctx *ctx) {
  pthread_mutex_lock(&inner_lock);
  inner_default = ctx;
  pthread_mutex_unlock(&inner_lock);
}

struct trace_ctx *trace_ctx_get(void *p, const char *what) {
  struct trace_ctx *c = p;
  if (!c || c->magic != TRACE_MAGIC_CTX) {
    BRAID_WARN("braid-trace: %s() on an invalid context %p", what, p);
    return NULL;
  }
  return c;
}

struct trace_comm *trace_comm_get(void *p, int kind, const char *what) {
  struct trace_comm *c = p;
  if (!c || c->magic != TRACE_MAGIC_COMM ||
      (kind ? (int)c->kind != kind : c->kind == TRACE_LISTEN)) {
    BRAID_WARN("braid-trace: %s() on an invalid comm %p", what, p);
    return NULL;
  }
  return c;
}

/* Unloaded with us (NCCL dlcloses net plugins after the last communicator; at exit, glibc keeps
 * every library mapped until all destructors ran, so this is safe then too). */
__attribute__((destructor)) static void inner_unload(void) {
  if (inner_default) { /* v7..v10 callers never finalize */
    netload_finalize(&trace_nl, inner_default->inner);
    inner_default->magic = 0;
    free(inner_default);
    inner_default = NULL;
  }
  if (inner_state == 1) netload_close(&trace_nl);
  inner_state = 0;
}
