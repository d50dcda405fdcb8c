/* The stream path (comm/path.h): messages cut into framed chunks on the comm's streams, over TCP
 * sockets or libfabric endpoints.  tx.c is the send side, rx.c the receive side. */
#include "comm/comm.h"
#include "stripe/stripe.h"
#include "comm/diag.h"
#include "comm/path.h"
#include "transport/ofi/ofi_stream.h"
#include "transport/socket/sock_stream.h"
#include "transport/stream.h"

/* The streams' transport (transport/stream.h): set-up chose libfabric or TCP sockets (c->ofi). */
static ncclResult_t stream_start(struct braid_comm *c) {
  c->sops = c->ofi ? &braid_ofi_stream_ops : &braid_sock_stream_ops;
  ncclResult_t rc = c->sops->start(c);
  if (rc) return rc;
  rc = c->kind == BRAID_COMM_SEND ? braid_tx_init(c) : braid_rx_init(c);
  if (rc || !c->sops->started) return rc;
  return c->sops->started(c);
}

static int stream_ready(struct braid_comm *c) {
  (void)c; /* each stream's link is checked where it is used (tx.c, rx.c) */
  return 1;
}

static void stream_dereg(struct braid_comm *c, void *data, size_t size, void *mem) {
  (void)mem;
  c->sops->forget(c, data, size); /* e.g. the ofi endpoints' cached registrations */
}

static ncclResult_t stream_isend(struct braid_comm *c, struct braid_req *r, void *mem, bool *again) {
  (void)mem, (void)again;
  r->seq = c->tx.next_seq++;
  ncclResult_t rc = braid_tx_send(c, r);
  if (rc == ncclSystemError && !c->err) { /* nothing queued: refuse the call itself */
    c->tx.next_seq--;
    return rc;
  }
  return ncclSuccess;
}

/* NCCL's optional-completion hint is kept in r but the receive completes as usual: the bytes
 * move only when this proxy reads the stream or the provider (rx.c, inside irecv and test), and
 * over ofi each payload's receive is posted once its header is read; a receive reported done
 * early would leave the rest unread and the LL kernel waiting for ever. */
static ncclResult_t stream_irecv(struct braid_comm *c, struct braid_req *r, void *mem, bool *again) {
  (void)mem, (void)again;
  braid_rx_post(c, r);
  return ncclSuccess;
}

static ncclResult_t stream_test(struct braid_comm *c, struct braid_req *r) {
  if (r->kind == BRAID_REQ_SEND) braid_tx_progress(c); /* also moves other sends' data */
  else if (!r->done) braid_rx_progress(c, true);
  return ncclSuccess;
}

static void stream_quiesce(struct braid_comm *c) {
  for (int i = 0; c->sops && c->streams && i < c->nstreams; i++) c->sops->close(c, &c->streams[i]);
}

static void stream_free(struct braid_comm *c) {
  braid_tx_free(c);
  braid_rx_free(c);
}

static bool stream_describe(struct braid_comm *c, uint64_t now) {
  braid_diag_streams(c, now);
  return false;
}

const struct braid_path_ops braid_stream_path = {
    .name = "streams",
    .max_recvs = BRAID_MAX_RECVS,
    .start = stream_start,
    .ready = stream_ready,
    .dereg = stream_dereg,
    .isend = stream_isend,
    .irecv = stream_irecv,
    .test = stream_test,
    .quiesce = stream_quiesce,
    .free = stream_free,
    .describe = stream_describe,
};
