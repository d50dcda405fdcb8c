/* The ofi stream transport's send side: frames posted as header + tagged payload (ofi.h);
 * acknowledgements are headers coming back on the endpoint.  The provider's connections are out of
 * sight, so a suspect rail's path is judged by pokes on the stream's set-up socket. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "transport/ofi/ofi_stream.h"
#include "transport/socket/sock.h"

/* A poke still unacknowledged this long after it went, with TCP retransmitting it, shows a dead
 * path.  Linux retransmits first after at least 200 ms; a live path (even one whose queue drops a
 * packet now and then) has acknowledged the retransmission well before 300 ms. */
#define TX_POKE_DEAD_NS 300000000ull
#define TX_POKE_STALE_NS 1500000000ull

/* tx_done 1 marks a frame whose header went and whose payload waits for room.  Without acks a
 * frame counts as written when its payload send completes (then NCCL may reuse the buffer).  Over
 * ofi_rxm a frame starts only within the receiver's grant (st->credit: its payload receive is
 * posted).  0, or an errno after an endpoint error. */
int braid_ofi_tx_write(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  if (!st->link.linked || st->closed_ns) return 0; /* (nothing goes to a peer that closed) */
  while (s->tx_count > 0) {
    struct braid_txframe *f = &s->tx[s->tx_head];
    if (!s->tx_done) {
      if (braid_ofi_rxm() && st->tag >= st->credit) return 0; /* until the receiver grants more */
      int rc = braid_ofi_send_hdr(st->ep, f->hdr);
      if (rc == -EAGAIN) return 0;
      if (rc) return EIO;
      s->tx_done = 1;
      s->frames_started++;
    }
    if (f->len) {
      int rc = braid_ofi_send_payload(st->ep, f->payload, f->len, st->tag,
                                      c->acks ? NULL : f->req);
      if (rc == -EAGAIN) return 0;
      if (rc) return EIO;
    } else {
      braid_tx_written(c, f->req, f->len);
    }
    st->tag++;
    s->tx_done = 0;
    s->tx_head = (s->tx_head + 1) % BRAID_SEND_BATCH;
    s->tx_count--;
  }
  return 0;
}

/* Whether the peer is still there, looked at after s's completions were collected.  A receiver
 * closes its end once its receives completed, possibly before this end has seen its last sends'
 * completions or (with acks) their acknowledgements, which come on the provider's connection, not
 * on the socket that shows the closing: one that closed is waited for until nothing has come for
 * BRAID_OFI_CLOSE_DRAIN_NS, and s is broken then only if something was still to go or to be
 * acknowledged (with acks the rail fails then, its unacknowledged chunks go to the others). */
static int tx_watch(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                    size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  int lk = braid_ofi_link_watch(c, s, now, why, whylen);
  if (lk == 1) return 1;
  if (lk != BRAID_LINK_CLOSED) return -1;
  bool idle = !s->tx_count && !c->tx.pend_count && !braid_ofi_outstanding(st->ep) &&
              !(c->acks && s->unacked.count);
  if (idle || !braid_ofi_link_drained(st, now)) return 1;
  snprintf(why, whylen, "%s with sends still to complete", st->closed_why);
  return -1;
}

/* The headers that came back: credits (ofi_rxm) are taken in, up to the first acknowledgement,
 * which is copied into ack (with acks; without them none may come).  1 an acknowledgement, 0 none
 * now, -1 garbled (why). */
static int tx_headers(struct braid_comm *c, struct braid_stream *s,
                      uint8_t ack[BRAID_FRAME_HDR_BYTES], char *why, size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  const uint8_t *h;
  while ((h = braid_ofi_hdr_peek(st->ep))) {
    struct braid_frame f;
    char err[128];
    if (braid_frame_decode(h, &f, err, sizeof err) != 0)
      return snprintf(why, whylen, "a garbled header from the receiver: %s", err), -1;
    if (f.type == BRAID_FRAME_ACK && c->acks) {
      memcpy(ack, h, BRAID_FRAME_HDR_BYTES);
      braid_ofi_hdr_consume(st->ep);
      return 1;
    }
    /* A grant covers frames not yet taken in by the receiver, at most BRAID_OFI_RX_DEPTH past
     * those sent, and never shrinks (headers arrive in order). */
    if (f.type != BRAID_FRAME_CREDIT || !braid_ofi_rxm() || f.seq < st->credit ||
        f.seq > st->tag + BRAID_OFI_RX_DEPTH)
      return snprintf(why, whylen, "a garbled header from the receiver (type %u, %llu)", f.type,
                      (unsigned long long)f.seq), -1;
    st->credit = f.seq;
    braid_ofi_hdr_consume(st->ep);
  }
  return 0;
}

/* The link's state, then s's completions (payload sends; acknowledgement headers stay queued
 * for braid_ofi_tx_read_ack; without acks the receiver's credits are taken in here), then the
 * peer's presence.  1 ready, 0 not linked yet, -1 broken with the reason in why. */
int braid_ofi_tx_poll(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                      size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  if (!st->link.linked) {
    int lk = braid_ofi_link_ready(c, s, now, why, whylen);
    if (lk <= 0) return lk < 0 ? -1 : 0;
  }
  struct braid_ofi_done d[32];
  int n;
  do {
    n = braid_ofi_progress(st->ep, d, 32);
    if (n < 0) return snprintf(why, whylen, "%s", braid_ofi_error(st->ep)), -1;
    if (n) st->active_ns = now;
    for (int i = 0; i < n; i++) {
      if (d[i].status != BRAID_OFI_OK) return snprintf(why, whylen, "%s", braid_ofi_error(st->ep)), -1;
      if (d[i].ctx) braid_tx_written(c, d[i].ctx, d[i].len);
    }
  } while (n == 32);
  if (!c->acks && tx_headers(c, s, NULL, why, whylen) < 0) return -1;
  return tx_watch(c, s, now, why, whylen);
}

/* The acknowledgements that arrived (after braid_ofi_tx_poll), the credits between them taken in. */
int braid_ofi_tx_read_ack(struct braid_comm *c, struct braid_stream *s,
                          uint8_t hdr[BRAID_FRAME_HDR_BYTES], char *why, size_t whylen) {
  return tx_headers(c, s, hdr, why, whylen);
}

/* A broken stream (a provider error, the peer gone) is fenced for good: nothing posted on it is
 * sent after this.  A stalled one stays open (the peer may only be slow to post receives): it is
 * revived when its acknowledgements flow again; the receiver drops whatever copies then arrive
 * twice. */
int braid_ofi_tx_failed(struct braid_comm *c, struct braid_stream *s) {
  if (s->dead) {
    braid_ofi_link_close(c, s);
    s->tx_done = 0;
  } else if (s->tx_count && s->tx_done) {
    /* Its header went: the payload must follow (the receiver waits for that tag), from the
     * request's buffer, which stays valid until the chunk's re-sent copy is acknowledged. */
    s->tx[s->tx_head].chunk = NULL;
    return 1;
  }
  return 0;
}

/* Pokes s's set-up socket (sock.h), one unacknowledged poke at a time, so that a stall can be
 * told apart from a slow rail: the provider's own connections are out of sight. */
int braid_ofi_tx_poke(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                      size_t whylen) {
  (void)c;
  struct braid_ofi_stream *st = s->tp;
  if (s->fd < 0 || !st->link.linked) return 0;
  int rc = braid_sock_poke(s->fd);
  if (rc == 0) st->poke_ns = now;
  else if (rc < 0) return snprintf(why, whylen, "set-up socket failed: %s", strerror(errno)), -1;
  return 0;
}

/* A poke on the set-up socket unacknowledged TX_POKE_DEAD_NS after it went, TCP retransmitting
 * it.  A peer whose application is merely slow still has its kernel acknowledge the poke, and a
 * slow rail's queue the poke waits behind at most briefly (it does not share the provider's
 * connection). */
bool braid_ofi_tx_path_dead(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  (void)c;
  struct braid_ofi_stream *st = s->tp;
  if (s->fd < 0) return false;
  /* A poke from before the rail's last acknowledgement can still wait for TCP's backed-off
   * retransmission timer long after the path came back: it counts again only once the rail
   * has been silent for TX_POKE_STALE_NS (a path that fails again before that timer fires). */
  bool stale = s->ack_ns > st->poke_ns && now - s->ack_ns < TX_POKE_STALE_NS;
  if (!st->poke_ns || now - st->poke_ns < TX_POKE_DEAD_NS || stale) return false;
  return braid_sock_retransmitting(s->fd);
}
