/* The data path's entry points: isend / irecv / test, and the request pool.
 *
 * Progress is made inside the calls themselves (no progress thread): on a busy node a thread
 * beside NCCL's polling proxy turns microseconds into milliseconds.  tx.c and rx.c do the work. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/diag.h"
#include "log.h"
#include "transport/verbs/verbs_conn.h"

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

/* verbs: the connection ready to carry data?  1 yes, 0 not yet (NCCL retries), -1 (c failed). */
static int xfer_verbs_ready(struct braid_comm *c) {
  char why[300];
  int rc = braid_verbs_link_ready(c, why, sizeof why);
  if (rc < 0) braid_comm_fail(c, ncclRemoteError, "verbs: %s", why);
  return rc;
}

/* verbs: the connection failed; the application's misuse (a size mismatch, told to both sides)
 * is ncclInvalidUsage, the rest ncclRemoteError. */
static ncclResult_t xfer_verbs_fail(struct braid_comm *c) {
  return braid_comm_fail(c, braid_vc_usage_error(c->vc) ? ncclInvalidUsage : ncclRemoteError, "verbs: %s",
                         braid_vc_error(c->vc));
}

/* verbs: post r through the connection.  ncclSuccess with *request NULL when there is no room
 * now (NCCL retries). */
static ncclResult_t xfer_verbs_post(struct braid_comm *c, struct braid_req *r, int rc, void **request) {
  if (rc == 1) {
    braid_req_release(r);
    return ncclSuccess;
  }
  if (rc < 0) {
    braid_req_release(r);
    return xfer_verbs_fail(c);
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t braid_xfer_isend(struct braid_comm *c, void *data, size_t size, int tag,
                              struct braid_vc_mem *vmem, void **request) {
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
  if (c->verbs) {
    int ready = xfer_verbs_ready(c);
    if (ready <= 0) return ready < 0 ? c->err : ncclSuccess;
  }
  struct braid_req *r = braid_req_alloc(c, BRAID_REQ_SEND);
  if (!r) return ncclSuccess; /* all requests in flight: NCCL retries */
  if (c->verbs) {
    r->size = size;
    return xfer_verbs_post(c, r, braid_vc_isend(c->vc, data, size, vmem, &r->vreq), request);
  }
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->seq = c->next_seq++;
  ncclResult_t rc = braid_tx_send(c, r);
  if (rc == ncclSystemError && !c->err) { /* nothing queued: refuse the call itself */
    c->next_seq--;
    braid_req_release(r);
    return rc;
  }
  *request = r;
  return ncclSuccess;
}

/* NCCL's optional-completion hint (NCCL 2.24+, LL/LL128, single receives): test() may report
 * the receive done before its data is in, the kernel seeing the data land through the protocol's
 * flags.  NCCL may then stop calling into the comm after a collective's last step, so a receive
 * completes early only where its data reaches the buffer without this proxy calling again:
 * - verbs: the peer writes straight into the buffer once the CTS (sent here, at irecv) is on the
 *   wire; braid_vc_detach says when nothing else is needed from this side (a one-rail
 *   connection, room in its receive ring), and then the request completes at its first test().
 * - sockets and ofi: the bytes move only when this proxy reads the stream or the provider (rx.c,
 *   inside irecv and test), and over ofi each payload's receive is posted here once its header
 *   is read; a receive reported done early would leave the rest unread and the LL kernel waiting
 *   forever.  The hint is kept in the request and the receive completes as usual. */
ncclResult_t braid_xfer_irecv(struct braid_comm *c, int n, void **data, const size_t *sizes,
                              const int *tags, struct braid_vc_mem *vmem, bool hint, void **request) {
  *request = NULL;
  if (c->err) return c->err;
  if (n < 1 || n > BRAID_MAX_RECVS) {
    BRAID_WARN("irecv of %d buffers (supported: 1 to %d)", n, BRAID_MAX_RECVS);
    return ncclInvalidArgument;
  }
  if (c->verbs) {
    if (n != 1) {
      BRAID_WARN("irecv of %d buffers over verbs (maxRecvs is 1 there)", n);
      return ncclInvalidArgument;
    }
    int ready = xfer_verbs_ready(c);
    if (ready <= 0) return ready < 0 ? c->err : ncclSuccess;
  }
  struct braid_req *r = braid_req_alloc(c, BRAID_REQ_RECV);
  if (!r) return ncclSuccess;
  r->n = n;
  r->hinted = hint;
  for (int i = 0; i < n; i++)
    r->slot[i] = (struct braid_recv_slot){.buf = data[i], .cap = sizes[i], .tag = tags[i], .msg = -1};
  if (c->verbs) {
    int rc = braid_vc_irecv(c->vc, data[0], sizes[0], vmem, &r->vreq);
    if (rc == 0 && hint) r->early = braid_vc_detach(c->vc, r->vreq);
    return xfer_verbs_post(c, r, rc, request);
  }
  braid_rx_post(c, r);
  *request = r;
  return ncclSuccess;
}

ncclResult_t braid_xfer_test(void *request, int *done, int *sizes) {
  struct braid_req *r = request;
  *done = 0;
  if (!r || r->kind == BRAID_REQ_FREE) {
    BRAID_WARN("test() on an invalid or already completed request %p", request);
    return ncclInvalidArgument;
  }
  struct braid_comm *c = r->comm;
  if (c->verbs) {
    size_t size = 0; /* an early receive's size is not known yet: 0 */
    if (c->err) return c->err;
    if (r->early ? braid_vc_progress(c->vc) : braid_vc_test(c->vc, r->vreq, &r->done, &size))
      return xfer_verbs_fail(c);
    r->done |= r->early; /* its slot is the connection's now, maybe reused: never tested */
    if (r->done && r->kind == BRAID_REQ_RECV) r->slot[0].size = size;
  } else if (r->kind == BRAID_REQ_SEND) braid_tx_progress(c); /* also moves other sends' data */
  else if (!r->done) braid_rx_progress(c, true);
  if (!r->done) {
    braid_diag_check(c, r);
    return c->err;
  }
  *done = 1;
  if (sizes) {
    if (r->kind == BRAID_REQ_SEND) sizes[0] = (int)r->size;
    else
      for (int i = 0; i < r->n; i++) sizes[i] = (int)r->slot[i].size;
  }
  braid_req_release(r);
  return ncclSuccess;
}
