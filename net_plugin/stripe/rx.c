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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "stripe/stripe.h"
#include "log.h"
#include "comm/rejoin.h"
#include "transport/stream.h"

static struct braid_rxmsg *rx_msg(struct braid_comm *c, uint64_t seq) {
  return &c->rx.msgs[seq & (BRAID_MSG_WINDOW - 1)];
}

static void rx_msg_release(struct braid_rxmsg *m) {
  free(m->own);
  free(m->ranges);
  memset(m, 0, sizeof *m);
  m->seq = -1;
}

static void rx_posted_remove(struct braid_comm *c, int i) {
  memmove(&c->rx.posted[i], &c->rx.posted[i + 1], (size_t)(c->rx.nposted - i - 1) * sizeof c->rx.posted[0]);
  c->rx.nposted--;
}

static bool rx_all_matched(const struct braid_req *r) {
  for (int i = 0; i < r->n; i++)
    if (r->slot[i].msg < 0) return false;
  return true;
}

/* ---------- byte ranges held (with acks) ----------
 *
 * Disjoint, non-touching [start, end) ranges sorted by start: a frame's lookup is a binary
 * search and touches only the ranges it overlaps.  A message holds at most
 * BRAID_RX_MAX_RANGES of them: an honest sender's chunks leave gaps only where chunks are still
 * on their way (a few per stream), while a faulty or hostile one that sends tiny frames at every
 * other offset would otherwise make every frame cost more than the last. */

/* The first range whose end is past off (nranges when none). */
static int rx_range_first(const struct braid_rxmsg *m, uint64_t off) {
  int lo = 0, hi = m->nranges;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (m->ranges[mid][1] <= off) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static bool rx_range_held(const struct braid_rxmsg *m, uint64_t off, uint64_t len) {
  int i = rx_range_first(m, off);
  return i < m->nranges && m->ranges[i][0] <= off && off + len <= m->ranges[i][1];
}

/* Bytes of [off, off+len) not yet held.  A chunk re-sent after its rail failed may be cut into
 * other pieces than the copy that still arrives from the failed rail (a probe piece, a split for
 * a slower rail), so a frame can overlap what is held without lying inside it: only its new bytes
 * count towards the message. */
static uint64_t rx_range_fresh(const struct braid_rxmsg *m, uint64_t off, uint64_t len) {
  uint64_t fresh = len, end = off + len;
  for (int i = rx_range_first(m, off); i < m->nranges && m->ranges[i][0] < end; i++) {
    uint64_t lo = m->ranges[i][0] > off ? m->ranges[i][0] : off;
    uint64_t hi = m->ranges[i][1] < end ? m->ranges[i][1] : end;
    if (lo < hi) fresh -= hi - lo;
  }
  return fresh;
}

/* Adds [off, off+len), merging the ranges it overlaps or touches; -1 when out of memory, -2
 * when the message would hold more than BRAID_RX_MAX_RANGES disjoint ranges. */
static int rx_range_add(struct braid_rxmsg *m, uint64_t off, uint64_t len) {
  uint64_t lo = off, hi = off + len;
  int i = rx_range_first(m, lo > 0 ? lo - 1 : 0), j = i; /* [i, j): the ranges merged (ending at lo or later) */
  while (j < m->nranges && m->ranges[j][0] <= hi) {
    if (m->ranges[j][0] < lo) lo = m->ranges[j][0];
    if (m->ranges[j][1] > hi) hi = m->ranges[j][1];
    j++;
  }
  if (i == j) { /* a new range at i */
    if (m->nranges == BRAID_RX_MAX_RANGES) return -2;
    if (m->nranges == m->cap_ranges) {
      int cap = m->cap_ranges ? 2 * m->cap_ranges : 4;
      void *p = realloc(m->ranges, (size_t)cap * sizeof m->ranges[0]);
      if (!p) return -1;
      m->ranges = p, m->cap_ranges = cap;
    }
    memmove(m->ranges + i + 1, m->ranges + i, (size_t)(m->nranges - i) * sizeof m->ranges[0]);
    m->nranges++;
  } else if (j - i > 1) { /* several merged into the one at i */
    memmove(m->ranges + i + 1, m->ranges + j, (size_t)(m->nranges - j) * sizeof m->ranges[0]);
    m->nranges -= j - i - 1;
  }
  m->ranges[i][0] = lo, m->ranges[i][1] = hi;
  return 0;
}

/* ---------- matching ---------- */

/* A message has all its bytes: into its slot (copying a buffered one), or kept for irecv.  Other
 * streams still receiving a copy of one of its chunks finish into the sink. */
static void rx_msg_complete(struct braid_comm *c, struct braid_rxmsg *m) {
  for (int s = 0; s < c->nstreams; s++) {
    struct braid_rx_frame *fr;
    for (int k = 0; (fr = c->sops->rx_frame(&c->streams[s], k)); k++)
      if (fr->msg == m) fr->discard = true, fr->msg = NULL, fr->dest = NULL;
  }
  struct braid_req *r = m->req;
  if (!r) return;
  if (m->own) {
    if (m->size) memcpy(r->slot[m->slot].buf, m->own, m->size);
    c->rx.unexpected_bytes -= m->size;
  }
  r->slot[m->slot].done = true;
  if (++r->ndone == r->n) r->done = true;
  if (m->own) c->sops->forget(c, m->own, m->size ? m->size : 1);
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
  for (int g = 0; g < c->rx.nposted; g++) {
    struct braid_req *r = c->rx.posted[g];
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
  if (c->rx.unexpected_bytes + m->size > c->rx.unexpected_max)
    return braid_comm_fail(c, ncclRemoteError,
                           "%zu bytes would be buffered ahead of their receives "
                           "(BRAID_MAX_UNEXPECTED_BYTES is %zu)",
                           c->rx.unexpected_bytes + m->size, c->rx.unexpected_max);
  m->own = malloc(m->size ? m->size : 1);
  if (!m->own) return braid_comm_fail(c, ncclSystemError, "out of memory buffering %zu bytes", m->size);
  m->dest = m->own;
  c->rx.unexpected_bytes += m->size;
  return ncclSuccess;
}

/* Matches next_match onward while their first frame has been seen and a receive (or a reason to
 * buffer) exists. */
static ncclResult_t rx_advance(struct braid_comm *c) {
  for (;;) {
    struct braid_rxmsg *m = rx_msg(c, c->rx.next_match);
    if (m->seq != (int64_t)c->rx.next_match || c->err) return c->err;
    if (!rx_try_bind(c, m)) {
      if (c->rx.nposted == 0) return ncclSuccess; /* wait for irecv */
      c->rx.nunexpected++;                      /* receives wait for other tags: stays buffered */
    }
    if (c->err) return c->err;
    m->early = false;
    c->rx.next_match++;
    if (m->req && m->got == m->size) rx_msg_complete(c, m);
  }
}

/* Whether a message before next_match still waits for bytes.  With several streams those can
 * sit behind the frame at hand (a chunk re-sent on a surviving rail after the next message's
 * first frame), so that frame must not hold its stream. */
static bool rx_earlier_incomplete(struct braid_comm *c) {
  for (uint64_t q = c->rx.held_below; q < c->rx.next_match; q++) {
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
  if (m->seq >= 0 || f->seq >= c->rx.next_match + BRAID_MSG_WINDOW) return ncclSuccess; /* hold */
  bool now = f->seq == c->rx.next_match;
  /* Nobody waits: hold the stream (TCP back-pressure), unless an earlier message still waits for
   * bytes that may be behind this frame: then this message is buffered (within
   * BRAID_MAX_UNEXPECTED_BYTES), since NCCL may post its receive only once that one completes. */
  if (c->rx.nposted == 0 && !(c->acks && rx_earlier_incomplete(c))) return ncclSuccess;
  if (c->rx.nunexpected >= BRAID_MSG_WINDOW / 2)
    return braid_comm_fail(c, ncclRemoteError, "more than %d messages arrived ahead of their "
                           "receives", BRAID_MSG_WINDOW / 2);
  *m = (struct braid_rxmsg){.seq = (int64_t)f->seq, .size = f->size, .tag = f->tag};
  if (now && rx_try_bind(c, m)) {
    if (c->err) return m->seq = -1, c->err;
    c->rx.next_match++;
  } else {
    ncclResult_t rc = rx_buffer(c, m);
    if (rc) return m->seq = -1, rc;
    if (now) c->rx.nunexpected++, c->rx.next_match++;
    else m->early = true;
  }
  *out = m;
  return rx_advance(c);
}

/* ---------- frames ---------- */

/* Starts frame f.  Returns 1 when started (*fr filled), 0 to hold it, <0 after failing c. */
static int rx_begin(struct braid_comm *c, const struct braid_frame *f, struct braid_rx_frame *fr) {
  struct braid_rxmsg *m = rx_msg(c, f->seq);
  bool known = m->seq == (int64_t)f->seq;
  if (f->type != BRAID_FRAME_DATA) {
    braid_comm_fail(c, ncclRemoteError, "garbled stream: frame type %u on a receive connection", f->type);
    return -1;
  }
  if (!known && f->seq < c->rx.next_match) {
    /* Its message has completed: a late copy, however old (a rail that was cut for seconds
     * delivers what it held when it comes back), or, without acks, garbage. */
    if (!c->acks) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: frame for message %llu does not fit it",
                      (unsigned long long)f->seq);
      return -1;
    }
    m = NULL;
  } else if (!known) {
    if (!c->acks && f->seq > c->rx.next_match) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: message %llu arrived before %llu",
                      (unsigned long long)f->seq, (unsigned long long)c->rx.next_match);
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
  fr->frame = *f;
  fr->discard = !m || (c->acks && rx_range_held(m, f->offset, f->len));
  fr->msg = fr->discard ? NULL : m;
  fr->dest = fr->discard ? NULL : m->dest + f->offset;
  return 1;
}

/* A frame header from the transport: decoded, then started (rx_begin). */
int braid_rx_begin(struct braid_comm *c, const uint8_t hdr[BRAID_FRAME_HDR_BYTES],
                   struct braid_rx_frame *fr) {
  struct braid_frame f;
  char why[160];
  if (braid_frame_decode(hdr, &f, why, sizeof why) != 0) {
    braid_comm_fail(c, ncclRemoteError, "garbled frame from peer: %s", why);
    return -1;
  }
  return rx_begin(c, &f, fr);
}

void braid_rx_end(struct braid_comm *c, struct braid_stream *s, const struct braid_rx_frame *fr) {
  struct braid_rxmsg *m = fr->msg;
  s->frames_recvd++;
  if (fr->discard || !m) return;
  uint64_t fresh = fr->frame.len;
  if (c->acks) {
    /* Count only bytes not already held: a frame overlapping held ranges (an original copy
     * arriving after part of its re-send) would otherwise push got past size, and the message
     * would never complete while the sender, fully acknowledged, moves on. */
    fresh = rx_range_fresh(m, fr->frame.offset, fr->frame.len);
    if (fr->frame.len && !fresh) return; /* (an empty message's one frame must still complete it) */
    int added = fr->frame.len ? rx_range_add(m, fr->frame.offset, fr->frame.len) : 0;
    if (added == -1) {
      braid_comm_fail(c, ncclSystemError, "out of memory tracking received chunks");
      return;
    }
    if (added == -2) {
      braid_comm_fail(c, ncclRemoteError, "the peer sent message %llu in more than %d disjoint pieces (no honest "
                      "sender does: a faulty or hostile peer)", (unsigned long long)fr->frame.seq, BRAID_RX_MAX_RANGES);
      return;
    }
  }
  m->got += fresh;
  if (m->got == m->size && m->req) rx_msg_complete(c, m);
}

/* A stream broke (the transport says).  Without acks the connection fails; with acks the sender
 * re-sends the stream's chunks elsewhere and this stream is dropped (a frame it was receiving is
 * not counted). */
int braid_rx_broken(struct braid_comm *c, struct braid_stream *s, const char *why, bool mid) {
  if (!c->acks) {
    braid_comm_fail(c, ncclRemoteError, "%s%s", why, mid ? " in the middle of a message" : "");
    return -1;
  }
  BRAID_WARN("receive stream %d (rail %d) from %s: %s; the sender re-sends its data on the other "
             "rails", (int)(s - c->streams), s->rail, c->peer, why);
  s->dead = true;
  return 0;
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
  uint64_t q = c->rx.held_below;
  while (q < c->rx.next_match) {
    const struct braid_rxmsg *m = rx_msg(c, q);
    if (m->seq == (int64_t)q && m->got != m->size) break; /* (released: completed) */
    q++;
  }
  c->rx.held_below = q;
}

static void rx_send_acks(struct braid_comm *c) {
  uint64_t now = braid_now_ns();
  bool late = now - c->rx.last_ack_ns >= RX_ACK_DELAY_NS, idle = !rx_waiting(c);
  uint64_t idle_deadline = now + RX_ACK_IDLE_WAIT_NS; /* for the whole call, not per stream */
  rx_update_held(c);
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    if (s->dead) continue;
    /* An acknowledgement the transport took only part of goes out whole before any other. */
    if (!c->sops->ack_ready(c, s, idle, idle_deadline)) continue;
    /* When NCCL may stop calling (idle), every stream tells the sender which messages are held:
     * a chunk re-sent after its rail failed can wait on another stream for a read that never
     * comes, when its first copy did arrive and only that copy's acknowledgement was lost with
     * the rail; the sender then completes the send without it. */
    bool tell = idle && c->rx.held_below > s->held_sent;
    if (s->frames_recvd == s->frames_ack_sent && !tell) continue;
    bool due = late || idle; /* (tell implies idle) */
    if (!due && s->frames_recvd - s->frames_ack_sent < RX_ACK_BATCH) continue;
    struct braid_frame f = {.type = BRAID_FRAME_ACK, .seq = s->frames_recvd, .offset = c->rx.held_below};
    uint8_t hdr[BRAID_FRAME_HDR_BYTES];
    braid_frame_encode(&f, hdr);
    if (!c->sops->ack_send(c, s, hdr, idle, idle_deadline)) continue;
    s->frames_ack_sent = s->frames_recvd;
    s->held_sent = f.offset;
    c->rx.last_ack_ns = now;
  }
}

ncclResult_t braid_rx_progress(struct braid_comm *c, bool read) {
  if (c->rejoin.gate && read) braid_rejoin_accept(c, braid_now_ns());
  int closed = 0;
  for (int i = 0; i < c->nstreams && !c->err; i++) {
    c->sops->rx(c, &c->streams[i], read);
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
  uint64_t lo = c->rx.next_match - (c->rx.next_match < BRAID_MSG_WINDOW ? c->rx.next_match : BRAID_MSG_WINDOW);
  for (uint64_t q = lo; c->rx.nunexpected && q < c->rx.next_match; q++) {
    struct braid_rxmsg *m = rx_msg(c, q);
    if (m->seq != (int64_t)q || m->req) continue;
    for (int i = 0; i < r->n; i++) {
      if (r->slot[i].msg >= 0 || r->slot[i].tag != m->tag) continue;
      if (rx_bind(c, r, i, m)) return c->err;
      c->rx.nunexpected--;
      if (m->got == m->size) rx_msg_complete(c, m);
      break;
    }
  }
  if (!rx_all_matched(r)) c->rx.posted[c->rx.nposted++] = r;
  if (rx_advance(c)) return c->err;
  return braid_rx_progress(c, false);
}

ncclResult_t braid_rx_init(struct braid_comm *c) {
  c->rx.sink = malloc(BRAID_RX_SINK_BYTES);
  return c->rx.sink ? ncclSuccess : ncclSystemError;
}

void braid_rx_free(struct braid_comm *c) {
  if (c->rx.msgs)
    for (int i = 0; i < BRAID_MSG_WINDOW; i++) rx_msg_release(&c->rx.msgs[i]);
  free(c->rx.sink);
}
