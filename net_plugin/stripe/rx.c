/* The receive side: frames from every stream placed into posted receives.
 *
 * Messages are matched to receives in sequence order; tags pick the buffer inside a grouped
 * receive.  A message is buffered (copied once) when receives are posted but all wait for other
 * tags (so an early send never blocks another's), or when, with several streams, its frames
 * arrive before an earlier message was seen or completed (so no stream ever waits behind
 * another).  With
 * several streams every complete frame is acknowledged per stream, a chunk that arrives twice (a
 * re-send after a rail failed, possibly cut into other pieces) counts each byte once, and a copy
 * still arriving when its message has completed is read into a sink, never into a buffer NCCL may
 * already reuse. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "stripe/ack_out.h"
#include "comm/comm.h"
#include "log.h"
#include "transport/ofi/ofi.h"
#include "comm/rejoin.h"

#define RX_DIRECT_MIN 1024   /* payload remainders at least this big are read straight in */
#define RX_SINK_BYTES 65536

static struct braid_rxmsg *rx_msg(struct braid_comm *c, uint64_t seq) {
  return &c->msgs[seq & (BRAID_MSG_WINDOW - 1)];
}

static void rx_msg_release(struct braid_rxmsg *m) {
  free(m->own);
  free(m->ranges);
  memset(m, 0, sizeof *m);
  m->seq = -1;
}

static void rx_posted_remove(struct braid_comm *c, int i) {
  memmove(&c->posted[i], &c->posted[i + 1], (size_t)(c->nposted - i - 1) * sizeof c->posted[0]);
  c->nposted--;
}

static bool rx_all_matched(const struct braid_req *r) {
  for (int i = 0; i < r->n; i++)
    if (r->slot[i].msg < 0) return false;
  return true;
}

/* ---------- byte ranges held (with acks) ---------- */

static bool rx_range_held(const struct braid_rxmsg *m, uint64_t off, uint64_t len) {
  for (int i = 0; i < m->nranges; i++)
    if (m->ranges[i][0] <= off && off + len <= m->ranges[i][1]) return true;
  return false;
}

/* Bytes of [off, off+len) not yet held.  A chunk re-sent after its rail failed may be cut into
 * other pieces than the copy that still arrives from the failed rail (a probe piece, a split for
 * a slower rail), so a frame can overlap what is held without lying inside it: only its new bytes
 * count towards the message (ranges are disjoint: add merges overlapping and touching ones). */
static uint64_t rx_range_fresh(const struct braid_rxmsg *m, uint64_t off, uint64_t len) {
  uint64_t fresh = len, end = off + len;
  for (int i = 0; i < m->nranges; i++) {
    uint64_t lo = m->ranges[i][0] > off ? m->ranges[i][0] : off;
    uint64_t hi = m->ranges[i][1] < end ? m->ranges[i][1] : end;
    if (lo < hi) fresh -= hi - lo;
  }
  return fresh;
}

/* Adds [off, off+len), merging neighbours; -1 when out of memory. */
static int rx_range_add(struct braid_rxmsg *m, uint64_t off, uint64_t len) {
  uint64_t lo = off, hi = off + len;
  int w = 0;
  for (int i = 0; i < m->nranges; i++) {
    if (m->ranges[i][1] < lo || m->ranges[i][0] > hi) {
      m->ranges[w][0] = m->ranges[i][0], m->ranges[w][1] = m->ranges[i][1], w++;
      continue;
    }
    if (m->ranges[i][0] < lo) lo = m->ranges[i][0];
    if (m->ranges[i][1] > hi) hi = m->ranges[i][1];
  }
  if (w == m->cap_ranges) {
    int cap = m->cap_ranges ? 2 * m->cap_ranges : 4;
    void *p = realloc(m->ranges, (size_t)cap * sizeof m->ranges[0]);
    if (!p) return -1;
    m->ranges = p, m->cap_ranges = cap;
  }
  m->ranges[w][0] = lo, m->ranges[w][1] = hi;
  m->nranges = w + 1;
  return 0;
}

/* ---------- matching ---------- */

/* A message has all its bytes: into its slot (copying a buffered one), or kept for irecv.  Other
 * streams still reading a copy of one of its chunks finish into the sink. */
static void rx_msg_complete(struct braid_comm *c, struct braid_rxmsg *m) {
  for (int s = 0; s < c->nstreams; s++) {
    struct braid_stream *st = &c->streams[s];
    if (st->in_frame && st->frame_msg == m) {
      st->frame_discard = true;
      st->frame_msg = NULL;
    }
    for (int k = 0; k < st->ofi_rx_count; k++) {
      struct braid_ofi_rx *o = &st->ofi_rx[(st->ofi_rx_head + k) % BRAID_OFI_RX_DEPTH];
      if (o->msg == m) o->discard = true, o->msg = NULL, o->dest = NULL;
    }
  }
  struct braid_req *r = m->req;
  if (!r) return;
  if (m->own) {
    if (m->size) memcpy(r->slot[m->slot].buf, m->own, m->size);
    c->unexpected_bytes -= m->size;
  }
  r->slot[m->slot].done = true;
  if (++r->ndone == r->n) r->done = true;
  if (m->own) braid_ofi_link_forget(c, m->own, m->size ? m->size : 1);
  rx_msg_release(m);
}

static ncclResult_t rx_bind(struct braid_comm *c, struct braid_req *r, int i,
                            struct braid_rxmsg *m) {
  struct braid_recv_slot *sl = &r->slot[i];
  if (m->size > sl->cap)
    return braid_comm_fail(c, ncclInvalidUsage,
                           "peer sent %zu bytes (tag %d) to a receive of %zu bytes: "
                           "send/receive size mismatch", m->size, m->tag, sl->cap);
  sl->msg = m->seq;
  sl->size = m->size;
  m->req = r;
  m->slot = i;
  if (!m->own) m->dest = sl->buf;
  return ncclSuccess;
}

/* Binds m to the oldest posted receive with an unmatched slot for its tag; false if none. */
static bool rx_try_bind(struct braid_comm *c, struct braid_rxmsg *m) {
  for (int g = 0; g < c->nposted; g++) {
    struct braid_req *r = c->posted[g];
    for (int i = 0; i < r->n; i++) {
      if (r->slot[i].msg >= 0 || r->slot[i].tag != m->tag) continue;
      if (rx_bind(c, r, i, m) != ncclSuccess) return true; /* c failed: stop matching */
      if (rx_all_matched(r)) rx_posted_remove(c, g);
      return true;
    }
  }
  return false;
}

/* Gives m (seen, not yet matched) its own buffer. */
static ncclResult_t rx_buffer(struct braid_comm *c, struct braid_rxmsg *m) {
  if (c->unexpected_bytes + m->size > c->unexpected_max)
    return braid_comm_fail(c, ncclRemoteError,
                           "%zu bytes would be buffered ahead of their receives "
                           "(BRAID_MAX_UNEXPECTED_BYTES is %zu)",
                           c->unexpected_bytes + m->size, c->unexpected_max);
  m->own = malloc(m->size ? m->size : 1);
  if (!m->own) return braid_comm_fail(c, ncclSystemError, "out of memory buffering %zu bytes", m->size);
  m->dest = m->own;
  c->unexpected_bytes += m->size;
  return ncclSuccess;
}

/* Matches next_match onward while their first frame has been seen and a receive (or a reason to
 * buffer) exists. */
static ncclResult_t rx_advance(struct braid_comm *c) {
  for (;;) {
    struct braid_rxmsg *m = rx_msg(c, c->next_match);
    if (m->seq != (int64_t)c->next_match || c->err) return c->err;
    if (!rx_try_bind(c, m)) {
      if (c->nposted == 0) return ncclSuccess; /* wait for irecv */
      c->nunexpected++;                      /* receives wait for other tags: stays buffered */
    }
    if (c->err) return c->err;
    m->early = false;
    c->next_match++;
    if (m->req && m->got == m->size) rx_msg_complete(c, m);
  }
}

/* Whether a message before next_match still waits for bytes.  With several streams those can
 * sit behind the frame at hand (a chunk re-sent on a surviving rail after the next message's
 * first frame), so that frame must not hold its stream. */
static bool rx_earlier_incomplete(struct braid_comm *c) {
  for (uint64_t q = c->held_below; q < c->next_match; q++) {
    const struct braid_rxmsg *m = rx_msg(c, q);
    if (m->seq == (int64_t)q && m->got != m->size) return true;
  }
  return false;
}

/* First frame seen of message f->seq.  *out: its entry, or NULL to hold the stream. */
static ncclResult_t rx_new_msg(struct braid_comm *c, const struct braid_frame *f,
                               struct braid_rxmsg **out) {
  *out = NULL;
  struct braid_rxmsg *m = rx_msg(c, f->seq);
  if (m->seq >= 0 || f->seq >= c->next_match + BRAID_MSG_WINDOW) return ncclSuccess; /* hold */
  bool now = f->seq == c->next_match;
  /* Nobody waits: hold the stream (TCP back-pressure), unless an earlier message still waits for
   * bytes that may be behind this frame: then this message is buffered (within
   * BRAID_MAX_UNEXPECTED_BYTES), since NCCL may post its receive only once that one completes. */
  if (c->nposted == 0 && !(c->acks && rx_earlier_incomplete(c))) return ncclSuccess;
  if (c->nunexpected >= BRAID_MSG_WINDOW / 2)
    return braid_comm_fail(c, ncclRemoteError, "more than %d messages arrived ahead of their "
                           "receives", BRAID_MSG_WINDOW / 2);
  *m = (struct braid_rxmsg){.seq = (int64_t)f->seq, .size = f->size, .tag = f->tag};
  if (now && rx_try_bind(c, m)) {
    if (c->err) return m->seq = -1, c->err;
    c->next_match++;
  } else {
    ncclResult_t rc = rx_buffer(c, m);
    if (rc) return m->seq = -1, rc;
    if (now) c->nunexpected++, c->next_match++;
    else m->early = true;
  }
  *out = m;
  return rx_advance(c);
}

/* ---------- frames ---------- */

/* Starts frame f on stream s.  Returns 1 when started, 0 to hold it, <0 after failing c. */
static int rx_begin(struct braid_comm *c, struct braid_stream *s, const struct braid_frame *f) {
  struct braid_rxmsg *m = rx_msg(c, f->seq);
  bool known = m->seq == (int64_t)f->seq;
  if (f->type != BRAID_FRAME_DATA) {
    braid_comm_fail(c, ncclRemoteError, "garbled stream: frame type %u on a receive connection", f->type);
    return -1;
  }
  if (!known && f->seq < c->next_match) {
    /* Its message has completed: a late copy, however old (a rail that was cut for seconds
     * delivers what it held when it comes back), or, without acks, garbage. */
    if (!c->acks) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: frame for message %llu does not fit it",
                      (unsigned long long)f->seq);
      return -1;
    }
    m = NULL;
  } else if (!known) {
    if (!c->acks && f->seq > c->next_match) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: message %llu arrived before %llu",
                      (unsigned long long)f->seq, (unsigned long long)c->next_match);
      return -1;
    }
    if (rx_new_msg(c, f, &m) != ncclSuccess) return -1;
    if (!m) return 0;
  }
  if (m && (f->size != m->size || f->tag != m->tag || f->offset + f->len > m->size)) {
    braid_comm_fail(c, ncclRemoteError, "garbled stream: frame (offset %llu, %u bytes, size %llu, "
                    "tag %d) does not fit message %llu (%zu bytes, tag %d)",
                    (unsigned long long)f->offset, f->len, (unsigned long long)f->size, f->tag,
                    (unsigned long long)f->seq, m->size, m->tag);
    return -1;
  }
  /* One stream: a message's frames come in order, each where the last ended; a repeated or
   * skipped one would complete the receive with bytes missing. */
  if (m && !c->acks) {
    if (f->offset != m->next_off) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: frame of message %llu at offset %llu, "
                      "expected %llu", (unsigned long long)f->seq, (unsigned long long)f->offset,
                      (unsigned long long)m->next_off);
      return -1;
    }
    m->next_off += f->len;
  }
  s->in_frame = true;
  s->frame = *f;
  s->frame_left = f->len;
  s->frame_discard = !m || (c->acks && rx_range_held(m, f->offset, f->len));
  s->frame_msg = s->frame_discard ? NULL : m;
  s->frame_dest = s->frame_discard ? NULL : m->dest + f->offset;
  return 1;
}

static void rx_end(struct braid_comm *c, struct braid_stream *s) {
  struct braid_rxmsg *m = s->frame_msg;
  s->in_frame = false;
  s->frames_recvd++;
  if (s->frame_discard || !m) return;
  uint64_t fresh = s->frame.len;
  if (c->acks) {
    /* Count only bytes not already held: a frame overlapping held ranges (an original copy
     * arriving after part of its re-send) would otherwise push got past size, and the message
     * would never complete while the sender, fully acknowledged, moves on. */
    fresh = rx_range_fresh(m, s->frame.offset, s->frame.len);
    if (s->frame.len && !fresh) return; /* (an empty message's one frame must still complete it) */
    if (s->frame.len && rx_range_add(m, s->frame.offset, s->frame.len)) {
      braid_comm_fail(c, ncclSystemError, "out of memory tracking received chunks");
      return;
    }
  }
  m->got += fresh;
  if (m->got == m->size && m->req) rx_msg_complete(c, m);
}

/* A stream broke.  Without acks the connection fails; with acks the sender re-sends the stream's
 * chunks elsewhere and this stream is dropped (a frame it was reading is not counted). */
static ssize_t rx_stream_broken(struct braid_comm *c, struct braid_stream *s, const char *why) {
  bool mid = s->in_frame || s->stage_len > s->stage_off || s->ofi_rx_count > 0;
  if (!c->acks) {
    braid_comm_fail(c, ncclRemoteError, "%s%s", why, mid ? " in the middle of a message" : "");
    braid_ofi_link_close(c, s); /* no receive stays posted into NCCL's buffer */
    return -1;
  }
  BRAID_WARN("receive stream %d (rail %d) from %s: %s; the sender re-sends its data on the other "
             "rails", (int)(s - c->streams), s->rail, c->peer, why);
  s->dead = true;
  s->in_frame = false;
  if (s->ofi) {
    braid_ofi_link_close(c, s); /* its receives only ever land in its own bounce buffers */
    s->frame_msg = NULL;
  }
  return 0;
}

/* Reads into dst and then into tail (the next frame's header, so one syscall per large frame);
 * returns bytes, 0 for "nothing now", -1 after failing c. */
static ssize_t rx_readv(struct braid_comm *c, struct braid_stream *s, void *dst, size_t len,
                        void *tail, size_t tail_len) {
  struct iovec iov[2] = {{dst, len}, {tail, tail_len}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = tail_len ? 2 : 1};
  for (;;) {
    ssize_t n = recvmsg(s->fd, &mh, MSG_DONTWAIT);
    if (n > 0) {
      s->stall_since_ns = 0;
      return n;
    }
    if (n == 0) {
      s->eof = true;
      if (s->in_frame || s->stage_len > s->stage_off)
        return rx_stream_broken(c, s, "peer closed the connection");
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      char why[96];
      snprintf(why, sizeof why, "receive failed: %s", strerror(errno));
      return rx_stream_broken(c, s, why);
    }
    bool mid = s->in_frame || s->stage_len > s->stage_off;
    if (!mid || c->acks) return s->stall_since_ns = 0, 0; /* with acks the sender decides */
    uint64_t now = braid_now_ns();
    if (!s->stall_since_ns) s->stall_since_ns = now;
    if (now - s->stall_since_ns > c->timeout_ns) {
      braid_comm_fail(c, ncclRemoteError,
                      "no bytes for %llu ms in the middle of a message: the peer stopped "
                      "answering (BRAID_TIMEOUT_MS)",
                      (unsigned long long)(c->timeout_ns / 1000000));
      return -1;
    }
    return 0;
  }
}

/* Payload of the current frame: from the stage, straight into place, or into the sink. */
static int rx_payload(struct braid_comm *c, struct braid_stream *s, bool read) {
  size_t avail = s->stage_len - s->stage_off;
  char *dst = s->frame_discard ? c->sink : s->frame_dest;
  size_t want = s->frame_discard && s->frame_left > RX_SINK_BYTES ? RX_SINK_BYTES : s->frame_left;
  if (avail) {
    size_t k = avail < want ? avail : want;
    if (!s->frame_discard) memcpy(dst, s->stage + s->stage_off, k), s->frame_dest += k;
    s->stage_off += k, s->frame_left -= k;
    return 1;
  }
  s->stage_off = s->stage_len = 0;
  if (!read || want < RX_DIRECT_MIN) return 0; /* small remainder: through the stage */
  ssize_t n = rx_readv(c, s, dst, want, s->stage, BRAID_FRAME_HDR_BYTES);
  if (n <= 0) return -1;
  size_t k = (size_t)n < want ? (size_t)n : want;
  if (!s->frame_discard) s->frame_dest += k;
  s->frame_left -= k;
  s->stage_len = (size_t)n - k;
  return 1;
}

/* ofi: whether payloads land in the slots' own buffers and are copied into place at retire: with
 * acks (a receive a failed rail leaves stuck in the provider must never write into a buffer NCCL
 * has reused), and over ofi_rxm, whose receives braid posts ahead of the data (rx_ofi_prepost). */
static bool rx_ofi_bounced(const struct braid_comm *c) { return c->acks || braid_ofi_rxm(); }

/* ofi: a frame's payload receive finished (d).  0, or -1 after the stream broke. */
static int rx_ofi_settled(struct braid_comm *c, struct braid_stream *s, struct braid_ofi_rx *o,
                          const struct braid_ofi_done *d) {
  char why[160];
  if (d->status == BRAID_OFI_CANCELED && o->preposted && !o->frame.len) {
    o->state = BRAID_OFI_RX_DONE; /* an empty frame's receive posted ahead, cancelled */
    return 0;
  }
  if (d->status == BRAID_OFI_TRUNCATED && o->preposted) {
    snprintf(why, sizeof why, "a frame of %u bytes, larger than the receives posted ahead "
             "(%u): the peer runs another braid version", o->frame.len, BRAID_OFI_RXM_FRAME_MAX);
    rx_stream_broken(c, s, why);
    return -1;
  }
  if (d->status != BRAID_OFI_OK && !(d->status == BRAID_OFI_TRUNCATED && o->discard)) {
    rx_stream_broken(c, s, d->status == BRAID_OFI_TRUNCATED ? "a payload longer than its frame header says"
                                                           : "a payload receive failed");
    return -1;
  }
  if (o->preposted && d->len != o->frame.len) {
    snprintf(why, sizeof why, "a payload of %zu bytes for a frame header of %u", d->len, o->frame.len);
    rx_stream_broken(c, s, why);
    return -1;
  }
  o->state = BRAID_OFI_RX_DONE;
  return 0;
}

/* ofi: ends finished frames in the order their headers came (acknowledgements count frames in
 * stream order).  With acks a payload landed in its slot's bounce buffer and is copied into place
 * only now, if its message still wants it: a receive that a failed rail leaves stuck in the
 * provider can never write into a buffer NCCL has reused, and nothing needs cancelling (the
 * provider's cancel and close of a receive already under way are not safe everywhere). */
static void rx_ofi_retire(struct braid_comm *c, struct braid_stream *s) {
  while (s->ofi_rx_count > 0 && !c->err && !s->dead) {
    struct braid_ofi_rx *o = &s->ofi_rx[s->ofi_rx_head];
    if (o->state != BRAID_OFI_RX_DONE) return;
    if (rx_ofi_bounced(c) && !o->discard && o->msg && o->frame.len) memcpy(o->dest, o->bounce, o->frame.len);
    s->ofi_rx_head = (s->ofi_rx_head + 1) % BRAID_OFI_RX_DEPTH;
    s->ofi_rx_count--;
    s->frame = o->frame;
    s->frame_msg = o->msg;
    s->frame_discard = o->discard;
    s->frame_left = 0;
    o->msg = NULL;
    rx_end(c, s);
  }
}

/* ofi: o's bounce buffer with room for len bytes; false when out of memory (c failed). */
static bool rx_ofi_room(struct braid_comm *c, struct braid_stream *s, struct braid_ofi_rx *o, size_t len) {
  if (o->bounce_cap >= len) return true;
  char *b = realloc(o->bounce, len);
  if (!b) {
    braid_comm_fail(c, ncclSystemError, "out of memory for a %zu-byte receive buffer", len);
    return false;
  }
  if (s->ofi) braid_ofi_ep_forget(s->ofi, o->bounce, o->bounce_cap);
  o->bounce = b, o->bounce_cap = len;
  return true;
}

/* ofi: where o's payload is received: bounced, its bounce buffer (grown to the frame), else
 * straight into place (or the sink for a duplicate).  NULL when out of memory (c failed). */
static char *rx_ofi_dest(struct braid_comm *c, struct braid_stream *s, struct braid_ofi_rx *o,
                         size_t *len) {
  *len = o->frame.len;
  if (rx_ofi_bounced(c)) return rx_ofi_room(c, s, o, o->frame.len) ? o->bounce : NULL;
  if (!o->discard) return o->dest;
  *len = o->frame.len > RX_SINK_BYTES ? RX_SINK_BYTES : o->frame.len;
  return c->sink;
}

/* ofi: posts the payload receives of taken frames (in order).  0, 1 when the provider has no
 * room now, -1 after the stream broke or c failed. */
static int rx_ofi_post(struct braid_comm *c, struct braid_stream *s) {
  for (int k = 0; k < s->ofi_rx_count; k++) {
    struct braid_ofi_rx *o = &s->ofi_rx[(s->ofi_rx_head + k) % BRAID_OFI_RX_DEPTH];
    if (o->state != BRAID_OFI_RX_TAKEN) continue;
    if (o->frame.len == 0) {
      o->state = BRAID_OFI_RX_DONE;
      continue;
    }
    size_t len;
    char *dst = rx_ofi_dest(c, s, o, &len);
    if (!dst) return -1;
    /* (only o->dest is NCCL's memory: a bounce buffer and the sink are braid's) */
    int rc = braid_ofi_recv_payload(s->ofi, dst, len, o->tag, o, dst == o->dest);
    if (rc == -EAGAIN) return 1;
    if (rc) return rx_stream_broken(c, s, braid_ofi_error(s->ofi)), -1;
    o->state = BRAID_OFI_RX_POSTED;
  }
  return 0;
}

/* ofi_rxm: receives for the next frames' payloads, posted before their headers come, each with
 * room for the largest frame (a frame's tag is its number on the stream, so it is known ahead).  A
 * payload that finds its receive posted is received straight into it; one that comes first is
 * held by rxm, and libfabric 1.17's rxm crashes when a held rendezvous message's connection is
 * reset before the receive is posted (see ofi.c: braid's payloads are eager there), and pays a
 * buffer allocation for every held eager one.  0, 1 when the provider has no room now, -1 after
 * the stream broke or c failed. */
static int rx_ofi_prepost(struct braid_comm *c, struct braid_stream *s) {
  if (!braid_ofi_rxm()) return 0;
  while (s->ofi_rx_count + s->ofi_rx_pre < BRAID_OFI_RX_DEPTH) {
    struct braid_ofi_rx *o =
        &s->ofi_rx[(s->ofi_rx_head + s->ofi_rx_count + s->ofi_rx_pre) % BRAID_OFI_RX_DEPTH];
    if (!rx_ofi_room(c, s, o, BRAID_OFI_RXM_FRAME_MAX)) return -1;
    int rc = braid_ofi_recv_payload(s->ofi, o->bounce, BRAID_OFI_RXM_FRAME_MAX,
                                    s->ofi_tag + (uint64_t)s->ofi_rx_pre, o, false);
    if (rc == -EAGAIN) return 1;
    if (rc) return rx_stream_broken(c, s, braid_ofi_error(s->ofi)), -1;
    o->state = BRAID_OFI_RX_PRE;
    o->preposted = true;
    o->msg = NULL;
    s->ofi_rx_pre++;
  }
  return 0;
}

/* ofi: headers from the endpoint's queue, payloads received as rx_ofi_dest says (ofi.h), up to
 * BRAID_OFI_RX_DEPTH frames at once.  read: whether to drive the endpoint (read its completion
 * queue), else only what has already arrived. */
static void rx_stream_ofi(struct braid_comm *c, struct braid_stream *s, bool read) {
  char why[300];
  int lk = braid_ofi_link_ready(c, s, braid_now_ns(), why, sizeof why);
  if (lk <= 0) {
    if (lk < 0) rx_stream_broken(c, s, why);
    return;
  }
  if (read) {
    struct braid_ofi_done d[BRAID_OFI_RX_DEPTH];
    int n;
    do {
      n = braid_ofi_progress(s->ofi, d, BRAID_OFI_RX_DEPTH);
      if (n < 0) {
        rx_stream_broken(c, s, braid_ofi_error(s->ofi));
        return;
      }
      for (int i = 0; i < n && !s->dead && !c->err; i++) {
        struct braid_ofi_rx *o = d[i].ctx;
        bool early = o >= s->ofi_rx && o < s->ofi_rx + BRAID_OFI_RX_DEPTH && o->state == BRAID_OFI_RX_PRE;
        if (early) { /* its header is still to be taken: settled then */
          o->early = d[i];
          o->state = BRAID_OFI_RX_EARLY;
          continue;
        }
        if (o < s->ofi_rx || o >= s->ofi_rx + BRAID_OFI_RX_DEPTH || o->state != BRAID_OFI_RX_POSTED) {
          rx_stream_broken(c, s, "a completion for no posted receive");
          return;
        }
        if (rx_ofi_settled(c, s, o, &d[i])) return;
      }
    } while (n == BRAID_OFI_RX_DEPTH && !s->dead && !c->err);
  }
  while (!c->err && !s->dead) {
    rx_ofi_retire(c, s);
    int rc = rx_ofi_post(c, s);
    if (rc == 0 && rx_ofi_prepost(c, s) < 0) rc = -1; /* no room to post ahead: posted later */
    if (c->err || s->dead || rc) return;
    if (s->ofi_rx_count == BRAID_OFI_RX_DEPTH) return;
    const uint8_t *h = braid_ofi_hdr_peek(s->ofi);
    if (!h) return;
    struct braid_frame f;
    if (braid_frame_decode(h, &f, why, sizeof why) != 0) {
      braid_comm_fail(c, ncclRemoteError, "garbled frame from peer: %s", why);
      return;
    }
    if (rx_begin(c, s, &f) <= 0) return;
    braid_ofi_hdr_consume(s->ofi);
    struct braid_ofi_rx *o = &s->ofi_rx[(s->ofi_rx_head + s->ofi_rx_count++) % BRAID_OFI_RX_DEPTH];
    o->frame = s->frame;
    o->msg = s->frame_msg;
    o->dest = s->frame_dest;
    o->discard = s->frame_discard;
    o->tag = s->ofi_tag++; /* the payload's tag: the frame's number on the stream */
    s->in_frame = false;
    s->frame_msg = NULL;
    if (s->ofi_rx_pre == 0) {
      o->state = BRAID_OFI_RX_TAKEN;
      o->preposted = false;
      continue;
    }
    s->ofi_rx_pre--; /* its receive is posted already, and may even be done */
    if (o->state == BRAID_OFI_RX_PRE) {
      o->state = BRAID_OFI_RX_POSTED;
      if (!o->frame.len) braid_ofi_cancel(s->ofi, o); /* no payload comes: done once cancelled */
    } else if (rx_ofi_settled(c, s, o, &o->early)) {
      return;
    }
  }
}

/* read: whether to call recv() (irecv only places what is already staged: the syscall would
 * delay the send NCCL posts next, and the following test() reads anyway). */
static void rx_stream(struct braid_comm *c, struct braid_stream *s, bool read) {
  if (c->ofi) {
    if (s->ofi) rx_stream_ofi(c, s, read);
    return;
  }
  while (!c->err && !s->eof && !s->dead) {
    if (s->in_frame) {
      if (s->frame_left == 0) {
        rx_end(c, s);
        continue;
      }
      int rc = rx_payload(c, s, read);
      if (rc > 0) continue;
      if (rc < 0) break;
    } else if (s->stage_len - s->stage_off >= BRAID_FRAME_HDR_BYTES) {
      struct braid_frame f;
      char why[160];
      if (braid_frame_decode(s->stage + s->stage_off, &f, why, sizeof why) != 0) {
        braid_comm_fail(c, ncclRemoteError, "garbled frame from peer: %s", why);
        break;
      }
      if (rx_begin(c, s, &f) <= 0) break;
      s->stage_off += BRAID_FRAME_HDR_BYTES;
      continue;
    }
    /* Need more bytes in the stage: compact, then read. */
    if (!read) break;
    size_t avail = s->stage_len - s->stage_off;
    if (s->stage_off) {
      memmove(s->stage, s->stage + s->stage_off, avail);
      s->stage_off = 0, s->stage_len = avail;
    }
    ssize_t n = rx_readv(c, s, s->stage + s->stage_len, BRAID_STAGE_BYTES - s->stage_len, NULL, 0);
    if (n <= 0) break;
    s->stage_len += (size_t)n;
  }
}

/* With acks: tells the sender how many frames each stream has delivered (cumulative).  Every
 * send waits for its acknowledgement, so that NCCL keeps calling test() on the send comm (which
 * drives re-sends) until the receiver holds the data.  While a receive is pending acks are
 * batched: a stream's go out once it has RX_ACK_BATCH new frames, or RX_ACK_DELAY_NS after the
 * last ones, so a stream of small messages costs an ack per batch, not one per message.  When no
 * receive is pending NCCL may not call again for a while: every frame is acknowledged at once. */
#define RX_ACK_BATCH 8
#define RX_ACK_DELAY_NS 100000ull
/* Idle, an acknowledgement goes out whole before the call returns (the sender waits for it and
 * NCCL may not call this comm again): the longest one call waits for room in the socket. */
#define RX_ACK_IDLE_WAIT_NS 20000000ull

/* Batching is only safe while a posted receive is still incomplete (NCCL will call test again);
 * otherwise no further call may come, and the sender must not wait on us. */
static bool rx_waiting(const struct braid_comm *c) {
  for (int i = 0; i < c->nreqs; i++)
    if (c->reqs[i].kind == BRAID_REQ_RECV && !c->reqs[i].done) return true;
  return false;
}

/* Advances held_below past the messages all of whose bytes are held (matched and complete,
 * or buffered whole). */
static void rx_update_held(struct braid_comm *c) {
  uint64_t q = c->held_below;
  while (q < c->next_match) {
    const struct braid_rxmsg *m = rx_msg(c, q);
    if (m->seq == (int64_t)q && m->got != m->size) break; /* (released: completed) */
    q++;
  }
  c->held_below = q;
}

static void rx_send_acks(struct braid_comm *c) {
  uint64_t now = braid_now_ns();
  bool late = now - c->last_ack_ns >= RX_ACK_DELAY_NS, idle = !rx_waiting(c);
  uint64_t idle_deadline = now + RX_ACK_IDLE_WAIT_NS; /* for the whole call, not per stream */
  rx_update_held(c);
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    if (s->dead) continue;
    /* An acknowledgement the socket took only part of goes out whole before any other. */
    if (!s->ofi && !(idle ? braid_ack_out_finish(&s->ack_out, s->fd, idle_deadline)
                          : braid_ack_out_flush(&s->ack_out, s->fd)))
      continue;
    /* When NCCL may stop calling (idle), every stream tells the sender which messages are held:
     * a chunk re-sent after its rail failed can wait on another stream for a read that never
     * comes, when its first copy did arrive and only that copy's acknowledgement was lost with
     * the rail; the sender then completes the send without it. */
    bool tell = idle && c->held_below > s->held_sent;
    if (s->frames_recvd == s->frames_ack_sent && !tell) continue;
    bool due = late || idle; /* (tell implies idle) */
    if (!due && s->frames_recvd - s->frames_ack_sent < RX_ACK_BATCH) continue;
    struct braid_frame f = {.type = BRAID_FRAME_ACK, .seq = s->frames_recvd, .offset = c->held_below};
    uint8_t hdr[BRAID_FRAME_HDR_BYTES];
    braid_frame_encode(&f, hdr);
    bool sent;
    if (s->ofi) {
      if (!s->ofi_linked) continue;
      int rc = braid_ofi_send_hdr(s->ofi, hdr);
      if (rc && rc != -EAGAIN) {
        rx_stream_broken(c, s, braid_ofi_error(s->ofi));
        continue;
      }
      sent = rc == 0;
    } else {
      /* Part of it may go out: the rest is flushed first on the next calls (framing kept). */
      sent = idle ? braid_ack_out_send_now(&s->ack_out, s->fd, hdr, idle_deadline)
                  : braid_ack_out_send(&s->ack_out, s->fd, hdr);
    }
    if (!sent) continue;
    s->frames_ack_sent = s->frames_recvd;
    s->held_sent = f.offset;
    c->last_ack_ns = now;
  }
}

ncclResult_t braid_rx_progress(struct braid_comm *c, bool read) {
  if (c->nlisten && read) braid_rejoin_accept(c, braid_now_ns());
  int closed = 0;
  for (int i = 0; i < c->nstreams && !c->err; i++) {
    rx_stream(c, &c->streams[i], read);
    closed += c->streams[i].eof || c->streams[i].dead;
  }
  if (c->acks && !c->err) rx_send_acks(c);
  if (!c->err && closed == c->nstreams) {
    /* Every stream closed while receives are outstanding: nothing more can arrive. */
    for (int i = 0; i < c->nreqs; i++)
      if (c->reqs[i].kind == BRAID_REQ_RECV && !c->reqs[i].done)
        return braid_comm_fail(c, ncclRemoteError, "peer closed the connection with receives pending");
  }
  return c->err;
}

/* A new receive: messages already buffered for its tags first (oldest first), then progress. */
ncclResult_t braid_rx_post(struct braid_comm *c, struct braid_req *r) {
  uint64_t lo = c->next_match - (c->next_match < BRAID_MSG_WINDOW ? c->next_match : BRAID_MSG_WINDOW);
  for (uint64_t q = lo; c->nunexpected && q < c->next_match; q++) {
    struct braid_rxmsg *m = rx_msg(c, q);
    if (m->seq != (int64_t)q || m->req) continue;
    for (int i = 0; i < r->n; i++) {
      if (r->slot[i].msg >= 0 || r->slot[i].tag != m->tag) continue;
      if (rx_bind(c, r, i, m)) return c->err;
      c->nunexpected--;
      if (m->got == m->size) rx_msg_complete(c, m);
      break;
    }
  }
  if (!rx_all_matched(r)) c->posted[c->nposted++] = r;
  if (rx_advance(c)) return c->err;
  return braid_rx_progress(c, false);
}

ncclResult_t braid_rx_init(struct braid_comm *c) {
  c->sink = malloc(RX_SINK_BYTES);
  return c->sink ? ncclSuccess : ncclSystemError;
}

void braid_rx_free(struct braid_comm *c) {
  if (c->msgs)
    for (int i = 0; i < BRAID_MSG_WINDOW; i++) rx_msg_release(&c->msgs[i]);
  free(c->sink);
}
