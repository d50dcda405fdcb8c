/* braid-trace: memory registration and the data path (isend, irecv, iflush, test), forwarded and
 * logged.  A post that returns no request (the caller retries) writes no line: it is counted and
 * reported as busy= on the next post of that comm.  test() writes a line only when it completes
 * or fails, with the number of polls before. */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "api/net.h"
#include "trace.h"

/* The inner memory handle behind ours (NULL stays NULL); -1 when mh is not one of ours. */
static int data_mr_inner(void *mh, void **inner, const char *what) {
  struct trace_mr *m = mh;
  *inner = NULL;
  if (!m) return 0;
  if (m->magic != TRACE_MAGIC_MR) {
    BRAID_WARN("braid-trace: %s() with an invalid memory handle %p", what, mh);
    return -1;
  }
  *inner = m->inner;
  return 0;
}

static void data_add_mr(struct trace_line *l, const void *mh) {
  const struct trace_mr *m = mh;
  if (m) trace_line_add(l, "mr=m%d", m->id);
  else trace_line_add(l, "mr=-");
}

/* Appends " key=a,b,c" from n values of a size_t, int or int-size array. */
static void data_add_list(struct trace_line *l, const char *key, int n, const size_t *zs,
                          const int *is) {
  char buf[2048];
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && o + 24 < sizeof buf; i++) {
    int w = zs ? snprintf(buf + o, sizeof buf - o, "%s%zu", i ? "," : "", zs[i])
               : snprintf(buf + o, sizeof buf - o, "%s%d", i ? "," : "", is[i]);
    if (w > 0) o += (size_t)w;
  }
  trace_line_add(l, "%s=%s", key, n > 0 ? buf : "-");
}

/* After the wrapped plugin's regMr or regMrDmaBuf: the handle NCCL gets back, and the trace line
 * ("regmr" for both: braid-trace-shape counts them together; `what` adds the call's own fields). */
static ncclResult_t mr_done(struct trace_comm *c, ncclResult_t rc, void *inner, void **mhandle, uint64_t t0,
                            const char *what) {
  uint64_t t1 = braid_now_ns();
  struct trace_mr *m = NULL;
  if (rc == ncclSuccess && inner) {
    if ((m = malloc(sizeof *m))) {
      *m = (struct trace_mr){TRACE_MAGIC_MR, trace_next_id(TRACE_ID_MR), inner};
    } else {
      netload_dereg_mr(&trace_nl, c->inner, inner);
      rc = ncclSystemError;
    }
  }
  *mhandle = m;
  struct trace_line l;
  trace_line_begin(&l, "regmr", t0);
  trace_line_add(&l, "comm=c%d %s", c->id, what);
  data_add_mr(&l, m);
  trace_emit(&l, rc, t0, t1, NULL, 0, 0);
  return rc;
}

ncclResult_t braid_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  uint64_t t0 = braid_now_ns();
  *mhandle = NULL;
  struct trace_comm *c = trace_comm_get(comm, 0, "regMr");
  if (!c) return ncclInvalidArgument;
  void *inner = NULL;
  ncclResult_t rc = netload_reg_mr(&trace_nl, c->inner, data, size, type, &inner);
  char what[96];
  snprintf(what, sizeof what, "size=%zu type=%d", size, type);
  return mr_done(c, rc, inner, mhandle, t0, what);
}

ncclResult_t braid_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                     void **mhandle) {
  uint64_t t0 = braid_now_ns();
  *mhandle = NULL;
  struct trace_comm *c = trace_comm_get(comm, 0, "regMrDmaBuf");
  if (!c) return ncclInvalidArgument;
  void *inner = NULL;
  ncclResult_t rc = netload_reg_mr_dmabuf(&trace_nl, c->inner, data, size, type, offset, fd, &inner);
  char what[128];
  snprintf(what, sizeof what, "size=%zu type=%d offset=%llu fd=%d", size, type, (unsigned long long)offset, fd);
  return mr_done(c, rc, inner, mhandle, t0, what);
}

ncclResult_t braid_net_dereg_mr(void *comm, void *mhandle) {
  uint64_t t0 = braid_now_ns();
  struct trace_comm *c = trace_comm_get(comm, 0, "deregMr");
  void *inner;
  if (!c || data_mr_inner(mhandle, &inner, "deregMr")) return ncclInvalidArgument;
  ncclResult_t rc = netload_dereg_mr(&trace_nl, c->inner, inner);
  struct trace_line l;
  trace_line_begin(&l, "deregmr", t0);
  trace_line_add(&l, "comm=c%d", c->id);
  data_add_mr(&l, mhandle);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 0);
  if (mhandle && rc == ncclSuccess) {
    ((struct trace_mr *)mhandle)->magic = 0;
    free(mhandle);
  }
  return rc;
}

/* Our request around the inner one; NULL (inner one left to the plugin) when out of memory. */
static struct trace_req *data_req(enum trace_req_op op, struct trace_comm *c, int n, void *inner,
                                  uint64_t t) {
  struct trace_req *r = malloc(sizeof *r);
  if (r) *r = (struct trace_req){TRACE_MAGIC_REQ, op, trace_next_id(TRACE_ID_REQ), n, 0, inner, c, t};
  return r;
}

static void data_add_req(struct trace_line *l, const struct trace_req *r) {
  if (r) trace_line_add(l, "req=r%d", r->id);
  else trace_line_add(l, "req=-");
}

ncclResult_t braid_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request) {
  uint64_t t0 = braid_now_ns();
  void *inner_req = *request; /* the caller's preset passes through, as netload documents */
  *request = NULL;
  struct trace_comm *c = trace_comm_get(send_comm, TRACE_SEND, "isend");
  void *mh;
  if (!c || data_mr_inner(mhandle, &mh, "isend")) return ncclInvalidArgument;
  ncclResult_t rc = netload_isend(&trace_nl, c->inner, data, size, tag, mh, NULL, &inner_req);
  uint64_t t1 = braid_now_ns();
  if (rc == ncclSuccess && !inner_req) { /* not now: the caller retries */
    atomic_fetch_add(&c->post_busy, 1);
    return ncclSuccess;
  }
  struct trace_req *r = NULL;
  if (rc == ncclSuccess && !(r = data_req(TRACE_OP_ISEND, c, 1, inner_req, t0)))
    rc = ncclSystemError;
  *request = r;
  struct trace_line l;
  trace_line_begin(&l, "isend", t0);
  trace_line_add(&l, "comm=c%d", c->id);
  data_add_req(&l, r);
  trace_line_add(&l, "size=%zu tag=%d", size, tag);
  data_add_mr(&l, mhandle);
  trace_line_add(&l, "busy=%d", atomic_exchange(&c->post_busy, 0));
  trace_emit(&l, rc, t0, t1, c, r ? 1 : 0, 0);
  return rc;
}

ncclResult_t braid_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                             const int *tags, void **mhandles, void **request) {
  uint64_t t0 = braid_now_ns();
  void *inner_req = *request; /* NCCL may preset NCCL_NET_OPTIONAL_RECV_COMPLETION */
  int opt = inner_req == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  *request = NULL;
  struct trace_comm *c = trace_comm_get(recv_comm, TRACE_RECV, "irecv");
  if (!c) return ncclInvalidArgument;
  if (n < 1 || n > NETLOAD_MAX_RECVS) {
    BRAID_WARN("braid-trace: irecv() of %d buffers (1..%d)", n, NETLOAD_MAX_RECVS);
    return ncclInvalidArgument;
  }
  size_t sz[NETLOAD_MAX_RECVS];
  int tg[NETLOAD_MAX_RECVS];
  void *mh[NETLOAD_MAX_RECVS];
  for (int i = 0; i < n; i++) {
    sz[i] = sizes[i];
    tg[i] = tags[i];
    if (data_mr_inner(mhandles ? mhandles[i] : NULL, &mh[i], "irecv")) return ncclInvalidArgument;
  }
  ncclResult_t rc = netload_irecv(&trace_nl, c->inner, n, data, sz, tg, mhandles ? mh : NULL,
                                  NULL, &inner_req);
  uint64_t t1 = braid_now_ns();
  if (rc == ncclSuccess && !inner_req) {
    atomic_fetch_add(&c->post_busy, 1);
    return ncclSuccess;
  }
  struct trace_req *r = NULL;
  if (rc == ncclSuccess && !(r = data_req(TRACE_OP_IRECV, c, n, inner_req, t0)))
    rc = ncclSystemError;
  *request = r;
  struct trace_line l;
  trace_line_begin(&l, "irecv", t0);
  trace_line_add(&l, "comm=c%d", c->id);
  data_add_req(&l, r);
  trace_line_add(&l, "n=%d", n);
  data_add_list(&l, "sizes", n, sizes, NULL);
  data_add_list(&l, "tags", n, NULL, tags);
  trace_line_add(&l, "opt=%d busy=%d", opt, atomic_exchange(&c->post_busy, 0));
  trace_emit(&l, rc, t0, t1, c, r ? 1 : 0, 0);
  return rc;
}

ncclResult_t braid_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  uint64_t t0 = braid_now_ns();
  *request = NULL;
  struct trace_comm *c = trace_comm_get(recv_comm, TRACE_RECV, "iflush");
  if (!c || n < 0 || n > NETLOAD_MAX_RECVS) return ncclInvalidArgument;
  void *mh[NETLOAD_MAX_RECVS];
  for (int i = 0; i < n; i++)
    if (data_mr_inner(mhandles ? mhandles[i] : NULL, &mh[i], "iflush")) return ncclInvalidArgument;
  void *inner_req = NULL;
  ncclResult_t rc = netload_iflush(&trace_nl, c->inner, n, data, sizes, mhandles ? mh : NULL,
                                   &inner_req);
  uint64_t t1 = braid_now_ns();
  struct trace_req *r = NULL;
  if (rc == ncclSuccess && inner_req && !(r = data_req(TRACE_OP_IFLUSH, c, n, inner_req, t0)))
    rc = ncclSystemError;
  *request = r;
  struct trace_line l;
  trace_line_begin(&l, "iflush", t0);
  trace_line_add(&l, "comm=c%d", c->id);
  data_add_req(&l, r);
  trace_line_add(&l, "n=%d", n);
  data_add_list(&l, "sizes", sizes ? n : 0, NULL, sizes);
  trace_emit(&l, rc, t0, t1, NULL, 0, 0);
  return rc;
}

static const char *data_op_name(enum trace_req_op op) {
  return op == TRACE_OP_ISEND ? "isend" : op == TRACE_OP_IRECV ? "irecv" : "iflush";
}

ncclResult_t braid_net_test(void *request, int *done, int *sizes) {
  uint64_t t0 = braid_now_ns();
  struct trace_req *r = request;
  *done = 0;
  if (!r || r->magic != TRACE_MAGIC_REQ) {
    BRAID_WARN("braid-trace: test() of an invalid request %p", request);
    return ncclInvalidArgument;
  }
  ncclResult_t rc = netload_test(&trace_nl, r->inner, done, sizes);
  uint64_t t1 = braid_now_ns();
  if (rc == ncclSuccess && !*done) {
    r->polls++; /* a request is tested by one thread at a time */
    return ncclSuccess;
  }
  struct trace_line l;
  trace_line_begin(&l, "test", t0);
  data_add_req(&l, r);
  trace_line_add(&l, "comm=c%d op=%s done=%d", r->comm->id, data_op_name(r->op), *done);
  data_add_list(&l, "sizes", *done && sizes && r->op != TRACE_OP_IFLUSH ? r->n : 0, NULL, sizes);
  uint64_t lat = t1 - r->t_post;
  trace_line_add(&l, "polls=%d lat_us=%llu.%01llu", r->polls, (unsigned long long)(lat / 1000),
                 (unsigned long long)(lat % 1000 / 100));
  int counted = *done && r->op != TRACE_OP_IFLUSH;
  trace_emit(&l, rc, t0, t1, r->op != TRACE_OP_IFLUSH ? r->comm : NULL, counted ? -1 : 0, 0);
  if (*done) {
    r->magic = 0;
    free(r);
  }
  return rc;
}
