/* braid-trace: listen, connect, accept and the closes, forwarded and logged.  connect and accept
 * are polled by the caller: a line is written when they finish (or fail), with the number of
 * calls it took. */
#include <stdlib.h>

#include "log.h"
#include "api/net.h"
#include "trace.h"

/* The context whose inner one a call uses: the caller's, or the process one (v7..v10). */
static int conn_ctx(void *ctx, const char *what, struct trace_ctx **out) {
  *out = ctx ? trace_ctx_get(ctx, what) : trace_default_ctx();
  return ctx && !*out ? -1 : 0;
}

static struct trace_comm *conn_wrap(enum trace_comm_kind kind, void *inner, uint64_t hash) {
  struct trace_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->magic = TRACE_MAGIC_COMM;
  c->kind = kind;
  c->id = trace_next_id(kind == TRACE_LISTEN ? TRACE_ID_LISTEN : TRACE_ID_COMM);
  c->inner = inner;
  c->hash = hash;
  return c;
}

static void conn_add_ctx(struct trace_line *l, const struct trace_ctx *x, int dev) {
  if (x) trace_line_add(l, "ctx=x%d dev=%d", x->id, dev);
  else trace_line_add(l, "ctx=- dev=%d", dev);
}

static void conn_add_comm(struct trace_line *l, const char *key, const struct trace_comm *c) {
  if (c) trace_line_add(l, "%s=%c%d", key, c->kind == TRACE_LISTEN ? 'l' : 'c', c->id);
  else trace_line_add(l, "%s=-", key);
}

ncclResult_t braid_net_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  uint64_t t0 = braid_now_ns();
  struct trace_ctx *x;
  *listen_comm = NULL;
  if (conn_ctx(ctx, "listen", &x)) return ncclInvalidArgument;
  void *inner = NULL;
  ncclResult_t rc = netload_listen(&trace_nl, x ? x->inner : NULL, dev, handle, &inner);
  uint64_t t1 = braid_now_ns();
  struct trace_comm *c = NULL;
  if (rc == ncclSuccess && inner) {
    if (!(c = conn_wrap(TRACE_LISTEN, inner, handle ? trace_handle_hash(handle) : 0))) {
      netload_close_listen(&trace_nl, inner);
      rc = ncclSystemError;
    }
  }
  *listen_comm = c;
  struct trace_line l;
  trace_line_begin(&l, "listen", t0);
  conn_add_ctx(&l, x, dev);
  conn_add_comm(&l, "comm", c);
  trace_line_add(&l, "handle=%016llx", c ? (unsigned long long)c->hash : 0ull);
  trace_emit(&l, rc, t0, t1, NULL, 0, 0);
  return rc;
}

/* traffic_class (v10's connect config) is logged, not forwarded: v7..v10 callers share one process
 * context, made at the first init, whose inner connects carry the class given there (none). */
ncclResult_t braid_net_connect(void *ctx, int dev, int traffic_class, void *handle, void **send_comm) {
  uint64_t t0 = braid_now_ns();
  struct trace_ctx *x;
  *send_comm = NULL;
  if (conn_ctx(ctx, "connect", &x)) return ncclInvalidArgument;
  int tries = 1;
  uint64_t hash = handle ? trace_connect_begin(handle, x, &tries) : 0;
  void *inner = NULL;
  ncclResult_t rc =
      netload_connect(&trace_nl, x ? x->inner : NULL, dev, handle, &inner, NULL);
  uint64_t t1 = braid_now_ns();
  if (rc == ncclSuccess && !inner) return ncclSuccess; /* in progress: called again */
  if (handle) trace_connect_end(handle);
  struct trace_comm *c = NULL;
  if (inner && !(c = conn_wrap(TRACE_SEND, inner, hash))) {
    netload_close_send(&trace_nl, inner);
    rc = ncclSystemError;
  }
  *send_comm = c;
  struct trace_line l;
  trace_line_begin(&l, "connect", t0);
  conn_add_ctx(&l, x, dev);
  conn_add_comm(&l, "comm", c);
  trace_line_add(&l, "handle=%016llx tries=%d", (unsigned long long)hash, tries);
  if (!ctx) trace_line_add(&l, "tc=%d", traffic_class);
  trace_emit(&l, rc, t0, t1, NULL, 0, 0);
  return rc;
}

ncclResult_t braid_net_accept(void *listen_comm, void **recv_comm) {
  uint64_t t0 = braid_now_ns();
  *recv_comm = NULL;
  struct trace_comm *lc = trace_comm_get(listen_comm, TRACE_LISTEN, "accept");
  if (!lc) return ncclInvalidArgument;
  void *inner = NULL;
  ncclResult_t rc = netload_accept(&trace_nl, lc->inner, &inner, NULL);
  uint64_t t1 = braid_now_ns();
  if (rc == ncclSuccess && !inner) {
    atomic_fetch_add(&lc->accept_tries, 1);
    return ncclSuccess;
  }
  int tries = atomic_exchange(&lc->accept_tries, 0) + 1;
  struct trace_comm *c = NULL;
  if (inner && !(c = conn_wrap(TRACE_RECV, inner, lc->hash))) {
    netload_close_recv(&trace_nl, inner);
    rc = ncclSystemError;
  }
  *recv_comm = c;
  struct trace_line l;
  trace_line_begin(&l, "accept", t0);
  conn_add_comm(&l, "listen", lc);
  conn_add_comm(&l, "comm", c);
  trace_line_add(&l, "handle=%016llx tries=%d", (unsigned long long)lc->hash, tries);
  trace_emit(&l, rc, t0, t1, NULL, 0, 0);
  return rc;
}

/* The three closes: forward (NULL too, as the inner plugin defines it), log, free ours. */
static ncclResult_t conn_close(void *comm, enum trace_comm_kind kind, const char *call,
                               const char *what) {
  uint64_t t0 = braid_now_ns();
  struct trace_comm *c = NULL;
  if (comm && !(c = trace_comm_get(comm, kind, what))) return ncclInvalidArgument;
  void *inner = c ? c->inner : NULL;
  ncclResult_t rc = kind == TRACE_SEND   ? netload_close_send(&trace_nl, inner)
                    : kind == TRACE_RECV ? netload_close_recv(&trace_nl, inner)
                                         : netload_close_listen(&trace_nl, inner);
  struct trace_line l;
  trace_line_begin(&l, call, t0);
  conn_add_comm(&l, "comm", c);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 1);
  if (c) {
    c->magic = 0;
    free(c);
  }
  return rc;
}

ncclResult_t braid_net_close_send(void *send_comm) {
  return conn_close(send_comm, TRACE_SEND, "close_send", "closeSend");
}
ncclResult_t braid_net_close_recv(void *recv_comm) {
  return conn_close(recv_comm, TRACE_RECV, "close_recv", "closeRecv");
}
ncclResult_t braid_net_close_listen(void *listen_comm) {
  return conn_close(listen_comm, TRACE_LISTEN, "close_listen", "closeListen");
}
