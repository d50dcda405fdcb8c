/* The data path's entry points: isend / irecv / test, and the request pool.
 *
 * Progress is made inside the calls themselves, or, over sockets with BRAID_SOCKET_THREADS, by
 * the socket transport's helper threads (sock_helper.h) as well: then each call holds the comm's
 * lock, and test() looks at a request's done flag without it, taking the lock only when the
 * request completed or every XFER_PROXY_EVERY_NS (timers, diagnostics, a failed comm), so that
 * NCCL's spinning proxy does not contend with the helpers for the lock.  The comm's path
 * (path.h) does the work. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/diag.h"
#include "log.h"
#include "comm/path.h"
#include "comm/stage.h"

#define XFER_PROXY_EVERY_NS 20000ull

struct braid_req *braid_req_alloc(struct braid_comm *c, enum braid_req_kind kind) {
  if (c->nfree == 0) return NULL;
  struct braid_req *r = &c->reqs[c->free_reqs[--c->nfree]];
  int index = r->index;
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->comm = c;
  r->index = index;
  r->posted_ns = braid_now_ns();
  return r;
}

void braid_req_release(struct braid_req *r) {
  struct braid_comm *c = r->comm;
  r->kind = BRAID_REQ_FREE;
  c->free_reqs[c->nfree++] = r->index;
}

/* r posted by the path, or refused: released when the path had no room (NCCL retries) or
 * failed. */
static ncclResult_t xfer_posted(struct braid_req *r, ncclResult_t rc, bool again, void **request) {
  if (rc != ncclSuccess || again) {
    braid_req_release(r);
    return rc;
  }
  *request = r;
  return ncclSuccess;
}

static ncclResult_t xfer_isend_locked(struct braid_comm *c, void *data, size_t size, int tag, void *mem,
                              void **request) {
  *request = NULL;
  if (c->err) return c->err;
  if (size > BRAID_MSG_MAX_BYTES) {
    BRAID_WARN("isend of %zu bytes exceeds maxP2pBytes (%llu)", size,
               (unsigned long long)BRAID_MSG_MAX_BYTES);
    return ncclInvalidArgument;
  }
  if (size > 0 && !data) {
    BRAID_WARN("isend of %zu bytes from a NULL buffer", size);
    return ncclInvalidArgument;
  }
  int ready = c->path->ready(c);
  if (ready <= 0) return ready < 0 ? c->err : ncclSuccess;
  struct braid_req *r = braid_req_alloc(c, BRAID_REQ_SEND);
  if (!r) return ncclSuccess; /* all requests in flight: NCCL retries */
  r->data = data;
  r->size = size;
  r->tag = tag;
  bool again = false;
  ncclResult_t rc = c->path->isend(c, r, mem, &again);
  return xfer_posted(r, rc, again, request);
}

/* NCCL's optional-completion hint (NCCL 2.24+, LL/LL128, single receives): test() may report
 * the receive done before its data is in, the kernel seeing the data land through the protocol's
 * flags.  NCCL may then stop calling into the comm after a collective's last step, so a receive
 * completes early only where its data reaches the buffer without this proxy calling again: the
 * path decides (r->hinted in, r->early out; see each path's irecv). */
static ncclResult_t xfer_irecv_locked(struct braid_comm *c, int n, void **data, const size_t *sizes,
                              const int *tags, void *mem, bool hint, struct braid_stage *const *stages,
                              void *const *gpu, void **request) {
  *request = NULL;
  if (c->err) return c->err;
  if (n < 1 || n > c->path->max_recvs) {
    BRAID_WARN("irecv of %d buffers (supported over %s: 1 to %d)", n, c->path->name, c->path->max_recvs);
    return ncclInvalidArgument;
  }
  int ready = c->path->ready(c);
  if (ready <= 0) return ready < 0 ? c->err : ncclSuccess;
  struct braid_req *r = braid_req_alloc(c, BRAID_REQ_RECV);
  if (!r) return ncclSuccess;
  r->n = n;
  r->hinted = hint && !stages; /* a staged receive is done only once copied to GPU memory */
  for (int i = 0; i < n; i++)
    r->slot[i] = (struct braid_recv_slot){.buf = data[i], .cap = sizes[i], .tag = tags[i], .msg = -1,
                                          .stage = stages ? stages[i] : NULL, .gpu = gpu ? gpu[i] : NULL};
  bool again = false;
  ncclResult_t rc = c->path->irecv(c, r, mem, &again);
  return xfer_posted(r, rc, again, request);
}

static ncclResult_t xfer_iflush_locked(struct braid_comm *c, void *data, void *mem, void **request) {
  *request = NULL;
  if (c->err) return c->err;
  if (!c->path->flush) return ncclSuccess; /* the path never needs one */
  struct braid_req *r = braid_req_alloc(c, BRAID_REQ_FLUSH);
  if (!r) { /* NCCL cannot retry an iflush (a NULL request means done): say so */
    BRAID_WARN("iflush with every request of the comm in flight (%d)", c->nreqs);
    return ncclInternalError;
  }
  bool none = false;
  ncclResult_t rc = c->path->flush(c, r, data, mem, &none);
  return xfer_posted(r, rc, none, request);
}

static ncclResult_t xfer_test_locked(struct braid_req *r, int *done, int *sizes) {
  struct braid_comm *c = r->comm;
  ncclResult_t rc = c->path->test(c, r);
  if (rc) return rc;
  if (!r->done) {
    braid_diag_check(c, r);
    return c->err;
  }
  for (int i = 0; r->kind == BRAID_REQ_RECV && i < r->n; i++)
    if (r->slot[i].stage && r->slot[i].size && braid_stage_out(r->slot[i].stage, r->slot[i].gpu, r->slot[i].size))
      return braid_comm_fail(c, ncclUnhandledCudaError, "a receive's %zu bytes could not be copied to GPU memory",
                             r->slot[i].size);
  *done = 1;
  if (sizes) {
    if (r->kind == BRAID_REQ_SEND) sizes[0] = (int)r->size;
    else
      for (int i = 0; i < r->n; i++) sizes[i] = (int)r->slot[i].size;
  }
  braid_req_release(r);
  return ncclSuccess;
}

ncclResult_t braid_xfer_isend(struct braid_comm *c, void *data, size_t size, int tag, void *mem,
                              void **request) {
  braid_comm_lock(c);
  ncclResult_t rc = xfer_isend_locked(c, data, size, tag, mem, request);
  braid_comm_unlock(c);
  return rc;
}

ncclResult_t braid_xfer_irecv(struct braid_comm *c, int n, void **data, const size_t *sizes,
                              const int *tags, void *mem, bool hint, struct braid_stage *const *stages,
                              void *const *gpu, void **request) {
  braid_comm_lock(c);
  ncclResult_t rc = xfer_irecv_locked(c, n, data, sizes, tags, mem, hint, stages, gpu, request);
  braid_comm_unlock(c);
  return rc;
}

ncclResult_t braid_xfer_iflush(struct braid_comm *c, void *data, void *mem, void **request) {
  braid_comm_lock(c);
  ncclResult_t rc = xfer_iflush_locked(c, data, mem, request);
  braid_comm_unlock(c);
  return rc;
}

ncclResult_t braid_xfer_test(void *request, int *done, int *sizes) {
  struct braid_req *r = request;
  *done = 0;
  if (!r || r->kind == BRAID_REQ_FREE) {
    BRAID_WARN("test() on an invalid or already completed request %p", request);
    return ncclInvalidArgument;
  }
  struct braid_comm *c = r->comm;
  if (c->threaded && !r->done) { /* the helpers move the data: the lock only now and then */
    uint64_t now = braid_now_ns();
    if (now < c->proxy_next_ns) return ncclSuccess;
    c->proxy_next_ns = now + XFER_PROXY_EVERY_NS;
  }
  braid_comm_lock(c);
  ncclResult_t rc = xfer_test_locked(r, done, sizes);
  braid_comm_unlock(c);
  return rc;
}
