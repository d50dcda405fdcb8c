/* The ofi stream transport's receive side: headers from the endpoint's queue, each frame's
 * payload received where rx.c put it (ofi.h), up to BRAID_OFI_RX_DEPTH frames at once, ended in
 * the order their headers came; acknowledgements go back as headers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "transport/ofi/ofi_stream.h"

/* The stream broke: the data path decides (the connection fails, or the stream is dropped); then
 * the endpoint is closed either way.  Without acks no receive stays posted into NCCL's buffer;
 * with acks its receives only ever land in its own bounce buffers.  -1 when the connection
 * failed. */
static int rx_broken(struct braid_comm *c, struct braid_stream *s, const char *why) {
  struct braid_ofi_stream *st = s->tp;
  int rc = braid_rx_broken(c, s, why, st->rx_count > 0);
  braid_ofi_link_close(c, s);
  return rc;
}

/* Whether payloads land in the slots' own buffers and are copied into place at retire: with
 * acks (a receive a failed rail leaves stuck in the provider must never write into a buffer NCCL
 * has reused), and over ofi_rxm, whose receives braid posts ahead of the data (rx_prepost). */
static bool rx_bounced(const struct braid_comm *c) { return c->acks || braid_ofi_rxm(); }

/* A frame's payload receive finished (d).  0, or -1 after the stream broke. */
static int rx_settled(struct braid_comm *c, struct braid_stream *s, struct braid_ofi_rx *o,
                      const struct braid_ofi_done *d) {
  char why[160];
  if (d->status == BRAID_OFI_CANCELED && o->preposted && !o->fr.frame.len) {
    o->state = BRAID_OFI_RX_DONE; /* an empty frame's receive posted ahead, cancelled */
    return 0;
  }
  if (d->status == BRAID_OFI_TRUNCATED && o->preposted) {
    snprintf(why, sizeof why, "a frame of %u bytes, larger than the receives posted ahead "
             "(%u): the peer runs another braid version", o->fr.frame.len, BRAID_OFI_RXM_FRAME_MAX);
    rx_broken(c, s, why);
    return -1;
  }
  if (d->status != BRAID_OFI_OK && !(d->status == BRAID_OFI_TRUNCATED && o->fr.discard)) {
    rx_broken(c, s, d->status == BRAID_OFI_TRUNCATED ? "a payload longer than its frame header says"
                                                    : "a payload receive failed");
    return -1;
  }
  if (o->preposted && d->len != o->fr.frame.len) {
    snprintf(why, sizeof why, "a payload of %zu bytes for a frame header of %u", d->len, o->fr.frame.len);
    rx_broken(c, s, why);
    return -1;
  }
  o->state = BRAID_OFI_RX_DONE;
  return 0;
}

/* Ends finished frames in the order their headers came (acknowledgements count frames in stream
 * order).  With acks a payload landed in its slot's bounce buffer and is copied into place only
 * now, if its message still wants it: a receive that a failed rail leaves stuck in the provider
 * can never write into a buffer NCCL has reused, and nothing needs cancelling (the provider's
 * cancel and close of a receive already under way are not safe everywhere). */
static void rx_retire(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  while (st->rx_count > 0 && !c->err && !s->dead) {
    struct braid_ofi_rx *o = &st->rx[st->rx_head];
    if (o->state != BRAID_OFI_RX_DONE) return;
    if (rx_bounced(c) && !o->fr.discard && o->fr.msg && o->fr.frame.len)
      memcpy(o->fr.dest, o->bounce, o->fr.frame.len);
    st->rx_head = (st->rx_head + 1) % BRAID_OFI_RX_DEPTH;
    st->rx_count--;
    struct braid_rx_frame fr = o->fr;
    o->fr.msg = NULL;
    braid_rx_end(c, s, &fr);
  }
}

/* o's bounce buffer with room for len bytes; false when out of memory (c failed). */
static bool rx_room(struct braid_comm *c, struct braid_stream *s, struct braid_ofi_rx *o, size_t len) {
  struct braid_ofi_stream *st = s->tp;
  if (o->bounce_cap >= len) return true;
  char *b = realloc(o->bounce, len);
  if (!b) {
    braid_comm_fail(c, ncclSystemError, "out of memory for a %zu-byte receive buffer", len);
    return false;
  }
  if (st->ep) braid_ofi_ep_forget(st->ep, o->bounce, o->bounce_cap);
  o->bounce = b, o->bounce_cap = len;
  return true;
}

/* Where o's payload is received: bounced, its bounce buffer (grown to the frame), else straight
 * into place (or the sink for a duplicate).  NULL when out of memory (c failed). */
static char *rx_dest(struct braid_comm *c, struct braid_stream *s, struct braid_ofi_rx *o,
                     size_t *len) {
  *len = o->fr.frame.len;
  if (rx_bounced(c)) return rx_room(c, s, o, o->fr.frame.len) ? o->bounce : NULL;
  if (!o->fr.discard) return o->fr.dest;
  *len = o->fr.frame.len > BRAID_RX_SINK_BYTES ? BRAID_RX_SINK_BYTES : o->fr.frame.len;
  return c->rx.sink;
}

/* Posts the payload receives of taken frames (in order).  0, 1 when the provider has no room
 * now, -1 after the stream broke or c failed. */
static int rx_post(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  for (int k = 0; k < st->rx_count; k++) {
    struct braid_ofi_rx *o = &st->rx[(st->rx_head + k) % BRAID_OFI_RX_DEPTH];
    if (o->state != BRAID_OFI_RX_TAKEN) continue;
    if (o->fr.frame.len == 0) {
      o->state = BRAID_OFI_RX_DONE;
      continue;
    }
    size_t len;
    char *dst = rx_dest(c, s, o, &len);
    if (!dst) return -1;
    /* (only o->fr.dest is NCCL's memory: a bounce buffer and the sink are braid's) */
    int rc = braid_ofi_recv_payload(st->ep, dst, len, o->tag, o, dst == o->fr.dest);
    if (rc == -EAGAIN) return 1;
    if (rc) return rx_broken(c, s, braid_ofi_error(st->ep)), -1;
    o->state = BRAID_OFI_RX_POSTED;
  }
  return 0;
}

/* ofi_rxm: receives for the next frames' payloads, posted before their headers come, each with
 * room for the largest frame (a frame's tag is its number on the stream, so it is known ahead),
 * and granted to the sender (rx_grant), which starts a frame only within its grant: every payload
 * finds its receive posted.  rxm never holds one unexpected, so none costs it an allocation, and
 * a rendezvous payload (above rxm's eager limit, FI_OFI_RXM_EAGER_LIMIT, whatever it is) is never
 * held unmatched: libfabric 1.17's rxm crashes when a receive is posted for a rendezvous message
 * that arrived unexpected and whose connection was reset meanwhile (rxm_handle_rndv).  0, 1 when
 * the provider has no room now, -1 after the stream broke or c failed. */
static int rx_prepost(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  if (!braid_ofi_rxm()) return 0;
  while (st->rx_count + st->rx_pre < BRAID_OFI_RX_DEPTH) {
    struct braid_ofi_rx *o = &st->rx[(st->rx_head + st->rx_count + st->rx_pre) % BRAID_OFI_RX_DEPTH];
    if (!rx_room(c, s, o, BRAID_OFI_RXM_FRAME_MAX)) return -1;
    int rc = braid_ofi_recv_payload(st->ep, o->bounce, BRAID_OFI_RXM_FRAME_MAX,
                                    st->tag + (uint64_t)st->rx_pre, o, false);
    if (rc == -EAGAIN) return 1;
    if (rc) return rx_broken(c, s, braid_ofi_error(st->ep)), -1;
    o->state = BRAID_OFI_RX_PRE;
    o->preposted = true;
    o->fr.msg = NULL;
    st->rx_pre++;
  }
  return 0;
}

/* The provider's completions: payloads settled, or kept for frames whose headers are still to
 * come.  How many came, or -1 after the stream broke. */
static int rx_reap(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  struct braid_ofi_done d[BRAID_OFI_RX_DEPTH];
  int n, total = 0;
  do {
    n = braid_ofi_progress(st->ep, d, BRAID_OFI_RX_DEPTH);
    if (n < 0) return rx_broken(c, s, braid_ofi_error(st->ep)), -1;
    total += n;
    for (int i = 0; i < n && !s->dead && !c->err; i++) {
      struct braid_ofi_rx *o = d[i].ctx;
      bool early = o >= st->rx && o < st->rx + BRAID_OFI_RX_DEPTH && o->state == BRAID_OFI_RX_PRE;
      if (early) { /* its header is still to be taken: settled then */
        o->early = d[i];
        o->state = BRAID_OFI_RX_EARLY;
        continue;
      }
      if (o < st->rx || o >= st->rx + BRAID_OFI_RX_DEPTH || o->state != BRAID_OFI_RX_POSTED)
        return rx_broken(c, s, "a completion for no posted receive"), -1;
      if (rx_settled(c, s, o, &d[i])) return -1;
    }
  } while (n == BRAID_OFI_RX_DEPTH && !s->dead && !c->err);
  return s->dead || c->err ? -1 : total;
}

/* ofi_rxm: tells the sender how far it may go (a CREDIT header, wire/frame.h) when the receives
 * posted ahead reach further than the last grant said.  One that finds no room now goes with the
 * next call's (the sender waits, and NCCL keeps calling this receiver while a receive is
 * pending); none goes to a peer that closed. */
static void rx_grant(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  uint64_t limit = st->tag + (uint64_t)st->rx_pre;
  if (!braid_ofi_rxm() || limit <= st->credit || st->closed_ns) return;
  struct braid_frame f = {.type = BRAID_FRAME_CREDIT, .seq = limit};
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, hdr);
  int rc = braid_ofi_send_hdr(st->ep, hdr);
  if (rc == 0) st->credit = limit;
  else if (rc != -EAGAIN) rx_broken(c, s, braid_ofi_error(st->ep));
}

/* Frames whose headers arrived: ended once their payloads are in place, taken while there is
 * room (and rx.c wants them), their payload receives posted, and the receives posted ahead for the
 * next ones granted. */
static void rx_take(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  while (!c->err && !s->dead) {
    rx_retire(c, s);
    int rc = rx_post(c, s);
    if (rc == 0 && rx_prepost(c, s) < 0) rc = -1; /* no room to post ahead: posted later */
    if (c->err || s->dead || rc) break;
    if (st->rx_count == BRAID_OFI_RX_DEPTH) break;
    const uint8_t *h = braid_ofi_hdr_peek(st->ep);
    if (!h) break;
    struct braid_ofi_rx *o = &st->rx[(st->rx_head + st->rx_count) % BRAID_OFI_RX_DEPTH];
    if (braid_rx_begin(c, h, &o->fr) <= 0) break;
    braid_ofi_hdr_consume(st->ep);
    st->rx_count++;
    o->tag = st->tag++; /* the payload's tag: the frame's number on the stream */
    if (st->rx_pre == 0 && braid_ofi_rxm()) {
      rx_broken(c, s, "a frame beyond the receives granted (the peer ignores credits: another "
                      "braid version?)");
      return;
    }
    if (st->rx_pre == 0) {
      o->state = BRAID_OFI_RX_TAKEN;
      o->preposted = false;
      continue;
    }
    st->rx_pre--; /* its receive is posted already, and may even be done */
    if (o->state == BRAID_OFI_RX_PRE) {
      o->state = BRAID_OFI_RX_POSTED;
      if (!o->fr.frame.len) braid_ofi_cancel(st->ep, o); /* no payload comes: done once cancelled */
    } else if (rx_settled(c, s, o, &o->early)) {
      return;
    }
  }
  if (!c->err && !s->dead) rx_grant(c, s);
}

/* Whether the peer is still there, looked at after what arrived was collected.  One that closed
 * its end (NCCL closes a send comm as soon as its sends completed) may still have data on its way
 * over the provider's connection: it is collected while it keeps coming, and once nothing has
 * come for BRAID_OFI_CLOSE_DRAIN_NS the stream ends: broken if a frame was under way, else closed
 * (s->eof: rx.c fails the receives nothing can fill any more; a frame taken later, from a header
 * that had arrived, reopens it until that frame is in).  With acks the stream is dropped at once
 * (the sender re-sends what it did not see acknowledged). */
static void rx_watch(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  struct braid_ofi_stream *st = s->tp;
  char why[300];
  int lk = braid_ofi_link_watch(c, s, now, why, sizeof why);
  if (lk == 1) return;
  if (lk != BRAID_LINK_CLOSED || c->acks) {
    rx_broken(c, s, why);
    return;
  }
  bool drained = braid_ofi_link_drained(st, now);
  if (drained && st->rx_count) {
    rx_broken(c, s, why); /* (braid_rx_broken says: in the middle of a message) */
    return;
  }
  s->eof = drained;
}

/* Payloads received as rx_dest says.  read: whether to drive the endpoint (read its completion
 * queue), else only what has already arrived.  The provider's completions come first, the peer's
 * closing last: a peer may close right after its last payload went. */
void braid_ofi_rx(struct braid_comm *c, struct braid_stream *s, bool read) {
  struct braid_ofi_stream *st = s->tp;
  if (!st->ep) return;
  uint64_t now = braid_now_ns();
  if (!st->link.linked) { /* start-up: the peer's endpoint address */
    char why[300];
    int lk = braid_ofi_link_ready(c, s, now, why, sizeof why);
    if (lk <= 0) {
      if (lk < 0) rx_broken(c, s, why);
      return;
    }
  }
  uint64_t tag = st->tag, frames = s->frames_recvd;
  int n = read ? rx_reap(c, s) : 0;
  if (n < 0) return;
  rx_take(c, s);
  if (c->err || s->dead) return;
  if (n || st->tag != tag || s->frames_recvd != frames) st->active_ns = now;
  rx_watch(c, s, now);
}

struct braid_rx_frame *braid_ofi_rx_frame(struct braid_stream *s, int k) {
  struct braid_ofi_stream *st = s->tp;
  return k < st->rx_count ? &st->rx[(st->rx_head + k) % BRAID_OFI_RX_DEPTH].fr : NULL;
}

/* An acknowledgement is one header message: posted whole or not at all. */
bool braid_ofi_rx_ack_ready(struct braid_comm *c, struct braid_stream *s, bool idle,
                            uint64_t deadline_ns) {
  (void)c, (void)s, (void)idle, (void)deadline_ns;
  return true;
}

bool braid_ofi_rx_ack_send(struct braid_comm *c, struct braid_stream *s,
                           const uint8_t hdr[BRAID_FRAME_HDR_BYTES], bool idle,
                           uint64_t deadline_ns) {
  (void)idle, (void)deadline_ns;
  struct braid_ofi_stream *st = s->tp;
  if (!st->link.linked) return false;
  int rc = braid_ofi_send_hdr(st->ep, hdr);
  if (rc && rc != -EAGAIN) {
    rx_broken(c, s, braid_ofi_error(st->ep));
    return false;
  }
  return rc == 0;
}

void braid_ofi_rx_describe(const struct braid_stream *s, char *buf, size_t len) {
  const struct braid_ofi_stream *st = s->tp;
  snprintf(buf, len, "between frames, %d ofi receives open (and %d posted ahead)%s%s", st->rx_count,
           st->rx_pre, st->closed_ns ? "; " : "", st->closed_ns ? st->closed_why : "");
}
