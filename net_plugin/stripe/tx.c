/* The send side: messages cut into frames and written to the connection's streams.
 *
 * One stream (the usual single-rail connection): frames are written in order and a send
 * completes when its bytes are in the socket, as NCCL's own socket transport does; nothing else
 * could carry them if the stream broke.
 *
 * Several streams (rails): a send completes only when the receiver holds all of its data.
 * Messages are cut into chunks; the rail scheduler (sched.h) picks the rail expected to finish
 * each chunk earliest; every chunk stays on its stream's FIFO until the receiver acknowledges it
 * (per-stream cumulative frame counts).  When a rail fails (a socket error, or the scheduler's
 * stall verdict: bytes in flight and no acknowledgement) its unacknowledged chunks are re-sent on
 * the others; when acknowledgements flow again on it, the rail is re-admitted as a probe.  No
 * send completes before its acknowledgement, small ones included: NCCL calls test() only on
 * sends it has not seen complete, and those calls are what place and re-send chunks, so a send
 * reported done with a chunk still queued could leave the receiver waiting for ever. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "stripe/stripe.h"
#include "log.h"
#include "param.h"
#include "comm/rejoin.h"
#include "stripe/sched.h"
#include "stripe/telemetry.h"
#include "transport/stream.h"

#define TX_PROBE_LEN (16u << 10) /* a slow rail is offered pieces this small */
#define TX_TICK_NS 1000000ull

/* ---------- frame batches (both modes) ---------- */

static size_t tx_batch_bytes(const struct braid_stream *s) {
  size_t b = 0;
  for (int i = 0; i < s->tx_count; i++) b += s->tx[(s->tx_head + i) % BRAID_SEND_BATCH].len;
  return b;
}

static struct braid_txframe *tx_append(struct braid_stream *s) {
  struct braid_txframe *f = &s->tx[(s->tx_head + s->tx_count++) % BRAID_SEND_BATCH];
  memset(f, 0, sizeof *f);
  return f;
}

static void tx_encode(struct braid_txframe *f, uint64_t seq, uint64_t off, size_t len,
                      uint64_t size, int tag, const char *payload) {
  struct braid_frame h = {.type = BRAID_FRAME_DATA, .len = (uint32_t)len, .seq = seq,
                          .offset = off, .size = size, .tag = tag};
  braid_frame_encode(&h, f->hdr);
  f->payload = payload;
  f->len = len;
}

/* A frame of r (len payload bytes) is out: whole in the socket, or its payload's send completed
 * (the transport calls this). */
void braid_tx_written(struct braid_comm *c, struct braid_req *r, size_t len) {
  if (c->acks) return; /* completion comes with the acknowledgement */
  if (c->stats[0]) {
    atomic_fetch_add_explicit(&c->stats[0]->bytes, len, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->stats[0]->chunks, 1, memory_order_relaxed);
  }
  if (--r->frames_out == 0 && r->all_queued) r->done = true;
}

/* ---------- one stream: frames cut in order, complete when written ---------- */

static bool tx_pull(struct braid_comm *c, struct braid_stream *s) {
  if (!c->tx.pend_count) return false;
  struct braid_req *r = c->tx.pending[c->tx.pend_head];
  size_t len = r->size - r->queued;
  if (len > c->chunk) len = c->chunk;
  struct braid_txframe *f = tx_append(s);
  f->req = r;
  tx_encode(f, r->seq, r->queued, len, r->size, r->tag, r->data + r->queued);
  r->queued += len;
  r->frames_out++;
  if (r->queued == r->size) {
    r->all_queued = true;
    c->tx.pend_head = (c->tx.pend_head + 1) % BRAID_SEND_REQS;
    c->tx.pend_count--;
  }
  return true;
}

static ncclResult_t tx_progress_single(struct braid_comm *c) {
  struct braid_stream *s = &c->streams[0];
  if (c->metrics) braid_telemetry_tick(braid_now_ns());
  if (c->sops->tx_poll) { /* the link's state and earlier writes' completions */
    char why[300];
    int rc = c->sops->tx_poll(c, s, braid_now_ns(), why, sizeof why);
    if (rc < 0) return braid_comm_fail(c, ncclRemoteError, "send failed: %s", why);
    if (rc == 0) return ncclSuccess;
  }
  for (;;) {
    size_t queued = tx_batch_bytes(s);
    while (s->tx_count < BRAID_SEND_BATCH && queued < c->chunk && tx_pull(c, s))
      queued = tx_batch_bytes(s);
    if (s->tx_count == 0) return ncclSuccess;
    int before = s->tx_count;
    size_t done_before = s->tx_done;
    int err = c->sops->tx_write(c, s);
    if (err) return braid_comm_fail(c, ncclRemoteError, "send failed: %s", strerror(err));
    if (s->tx_count == before && s->tx_done == done_before) return ncclSuccess; /* full */
    if (s->tx_count > 0) return ncclSuccess; /* partly written: socket full */
  }
}

/* ---------- several streams: chunks, scheduling, acknowledgements ---------- */

static struct braid_chunk *ck_new(struct braid_comm *c) {
  struct braid_chunk *ck = c->tx.chunk_free;
  if (ck) c->tx.chunk_free = ck->next;
  else if (!(ck = malloc(sizeof *ck))) return NULL;
  memset(ck, 0, sizeof *ck);
  return ck;
}

static void ck_free(struct braid_comm *c, struct braid_chunk *ck) {
  ck->next = c->tx.chunk_free;
  c->tx.chunk_free = ck;
}

static void fifo_push(struct braid_chunk_fifo *q, struct braid_chunk *ck) {
  ck->next = NULL;
  if (q->tail) q->tail->next = ck;
  else q->head = ck;
  q->tail = ck;
  q->count++;
}

static struct braid_chunk *fifo_pop(struct braid_chunk_fifo *q) {
  struct braid_chunk *ck = q->head;
  if (!ck) return NULL;
  q->head = ck->next;
  if (!q->head) q->tail = NULL;
  q->count--;
  return ck;
}

/* Puts all of src in front of dst (re-sends go before newer data). */
static void fifo_prepend(struct braid_chunk_fifo *dst, struct braid_chunk_fifo *src) {
  if (!src->head) return;
  src->tail->next = dst->head;
  if (!dst->tail) dst->tail = src->tail;
  dst->head = src->head;
  dst->count += src->count;
  *src = (struct braid_chunk_fifo){0};
}

/* Cuts a send into chunks on the ready queue; it completes when every chunk is acknowledged. */
ncclResult_t braid_tx_send(struct braid_comm *c, struct braid_req *r) {
  if (!c->acks) {
    c->tx.pending[(c->tx.pend_head + c->tx.pend_count++) % BRAID_SEND_REQS] = r;
    return braid_tx_progress(c);
  }
  size_t off = 0;
  do {
    struct braid_chunk *ck = ck_new(c);
    if (!ck) return braid_comm_fail(c, ncclSystemError, "out of memory for chunk records");
    size_t len = r->size - off;
    if (len > c->chunk) len = c->chunk;
    *ck = (struct braid_chunk){.req = r, .data = r->data + off, .seq = r->seq, .size = r->size,
                               .offset = off, .len = (uint32_t)len, .tag = r->tag, .rail = -1};
    r->frames_out++;
    fifo_push(&c->tx.requeue, ck);
    c->tx.pending_bytes += len;
    off += len;
  } while (off < r->size);
  r->queued = r->size;
  r->all_queued = true;
  return braid_tx_progress(c);
}

static void ck_acked(struct braid_comm *c, struct braid_chunk *ck) {
  struct braid_req *r = ck->req;
  if (r && --r->frames_out == 0) r->done = true;
  ck_free(c, ck);
}

/* The least loaded live stream of a rail. */
static struct braid_stream *tx_stream_of(struct braid_comm *c, int rail) {
  struct braid_stream *best = NULL;
  for (int i = rail; i < c->nstreams; i += c->nrails) {
    struct braid_stream *s = &c->streams[i];
    if (s->dead || s->tx_count == BRAID_SEND_BATCH) continue;
    if (!best || s->tx_count < best->tx_count) best = s;
  }
  return best;
}

/* One WARN per rail state change (down, degraded, recovered); the rest at INFO. */
static void tx_log_event(struct braid_comm *c, const struct braid_sched_event *e) {
  struct braid_rail_stats *st = e->rail < 16 ? c->stats[e->rail] : NULL;
  if (st) {
    atomic_store(&st->state, (int)e->to);
    if (e->to == BRAID_RAIL_DEGRADED && e->from != BRAID_RAIL_DEGRADED) atomic_fetch_add(&st->demotions, 1);
    if (e->to == BRAID_RAIL_DOWN && e->from != BRAID_RAIL_DOWN) atomic_fetch_add(&st->failovers, 1);
    if (e->reason == BRAID_SCHED_RESTORED) braid_telemetry_rejoined(st, e->at_ns);
  }
  bool quiet = e->from == e->to || e->reason == BRAID_SCHED_PROBE_OK;
  braid_log(quiet ? NCCL_LOG_INFO : NCCL_LOG_WARN, quiet ? NCCL_NET : NCCL_ALL, __FILE__, __LINE__,
            "rail %d (%s) to %s: %s -> %s (%s; %.0f Mbit/s measured, best other %.0f Mbit/s; "
            "at %.3f s)", e->rail, c->streams[e->rail].rail_name, c->peer, braid_sched_state_name(e->from),
            braid_sched_state_name(e->to), braid_sched_reason_name(e->reason),
            e->est_Bps * 8e-6, e->ref_Bps * 8e-6, (double)(e->at_ns - c->tx.start_ns) * 1e-9);
}

/* A rail broke: its unacknowledged chunks go back to the front of the ready queue.  A frame
 * partly out stays at the head of its stream's batch if the transport must finish it (the
 * receiver then drops it as a duplicate), so the stream's framing survives. */
static void tx_fail_rail(struct braid_comm *c, int rail, uint64_t now) {
  braid_sched_failed(c->tx.sched, rail, now);
  for (int i = rail; i < c->nstreams; i += c->nrails) {
    struct braid_stream *s = &c->streams[i];
    s->tx_count = c->sops->tx_failed(c, s);
    for (struct braid_chunk *ck = s->unacked.head; ck; ck = ck->next) c->tx.pending_bytes += ck->len;
    if (rail < 16 && c->stats[rail]) atomic_fetch_add(&c->stats[rail]->resent, s->unacked.count);
    fifo_prepend(&c->tx.requeue, &s->unacked);
    s->ignore_until = s->frames_started;
  }
}

/* A stream failed for good: logged once, its rail's chunks go to the others. */
static void tx_stream_broken(struct braid_comm *c, struct braid_stream *s, const char *why,
                             uint64_t now) {
  if (!s->dead)
    BRAID_WARN("send stream %d (rail %d, %s) to %s: %s", (int)(s - c->streams), s->rail,
               s->rail_name, c->peer, why);
  s->dead = true;
  tx_fail_rail(c, s->rail, now);
}

/* Keeps evidence of a suspect rail's path coming, where the transport needs it (late_suspect:
 * one poke in flight at a time on each stream). */
static void tx_poke(struct braid_comm *c, int rail, uint64_t now) {
  for (int i = rail; i < c->nstreams; i += c->nrails) {
    struct braid_stream *s = &c->streams[i];
    if (s->dead) continue;
    char why[128];
    if (c->sops->poke(c, s, now, why, sizeof why) < 0) tx_stream_broken(c, s, why, now);
  }
}

/* Whether rail's path shows dead (the transport's view of its streams' paths: stream.h). */
static bool tx_path_dead(struct braid_comm *c, int rail, uint64_t now) {
  for (int i = rail; i < c->nstreams; i += c->nrails) {
    struct braid_stream *s = &c->streams[i];
    if (s->dead) continue;
    if (c->sops->path_dead(c, s, now)) return true;
  }
  return false;
}

/* Rails the scheduler called stalled (late_suspect transports: late): failed once their path
 * shows dead, forgiven once acks flow. */
static void tx_check_suspects(struct braid_comm *c, uint64_t now) {
  for (int r = 0; r < c->nrails && c->tx.suspect; r++) {
    if (!(c->tx.suspect >> r & 1u)) continue;
    bool silent = braid_sched_stalled(c->tx.sched, r, now) ||
                  (c->sops->late_suspect && braid_sched_late(c->tx.sched, r, now));
    if (c->tx.sched->rail[r].state == BRAID_RAIL_DOWN || !silent) {
      c->tx.suspect &= ~(1u << r);
    } else if (tx_path_dead(c, r, now) && braid_sched_count(c->tx.sched, BRAID_RAIL_DOWN) < c->nrails - 1) {
      /* The last live rail is never failed on a stall: only a hard error ends a connection. */
      c->tx.suspect &= ~(1u << r);
      tx_fail_rail(c, r, now);
    } else {
      tx_poke(c, r, now); /* keeps one poke in flight while the rail is suspect */
    }
  }
}

static ncclResult_t tx_ack(struct braid_comm *c, struct braid_stream *s,
                           const uint8_t hdr[BRAID_FRAME_HDR_BYTES], uint64_t now);

/* Reads acknowledgements on s (first the link's state and completions, where the transport has
 * them); returns 0 or an error. */
static ncclResult_t tx_read_acks(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  char why[300];
  if (c->sops->tx_poll) {
    int rc = c->sops->tx_poll(c, s, now, why, sizeof why);
    if (rc <= 0) {
      if (rc < 0) tx_stream_broken(c, s, why, now);
      return ncclSuccess;
    }
  }
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  int rc = 0;
  while (!s->dead && (rc = c->sops->read_ack(c, s, hdr, why, sizeof why)) > 0)
    if (tx_ack(c, s, hdr, now)) return c->err;
  if (rc < 0) tx_stream_broken(c, s, why, now);
  return ncclSuccess;
}

/* A chunk whose message the receiver holds: its send is done, this copy only still travels. */
static void tx_detach(struct braid_chunk *ck) {
  if (!ck->req) return;
  ck->req->done = true;
  ck->req->frames_out = 0;
  ck->req = NULL;
}

/* The receiver holds every message below peer_held_below: their sends complete, their queued
 * chunks are not sent, and the copies of their chunks still on a rail complete nothing when
 * acknowledged (every chunk record is either queued or on a stream's unacknowledged list). */
static void tx_release_held(struct braid_comm *c) {
  uint64_t below = c->tx.peer_held_below;
  struct braid_chunk_fifo keep = {0};
  struct braid_chunk *ck;
  while ((ck = fifo_pop(&c->tx.requeue))) {
    if (ck->seq >= below) {
      fifo_push(&keep, ck);
      continue;
    }
    c->tx.pending_bytes -= ck->len;
    tx_detach(ck);
    ck_free(c, ck);
  }
  c->tx.requeue = keep;
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    bool held = false;
    for (ck = s->unacked.head; ck && !held; ck = ck->next) held = ck->seq < below && ck->req;
    if (!held) continue;
    /* The receiver may hold a chunk's bytes while the call that wrote them, on another thread
     * (socket helpers), is still in the system call that reads the buffer: it ends first. */
    if (c->sops->tx_settle) c->sops->tx_settle(c, s);
    for (ck = s->unacked.head; ck; ck = ck->next)
      if (ck->seq < below) tx_detach(ck);
  }
}

/* One acknowledgement, hdr. */
static ncclResult_t tx_ack(struct braid_comm *c, struct braid_stream *s,
                           const uint8_t hdr[BRAID_FRAME_HDR_BYTES], uint64_t now) {
  struct braid_frame f;
  char why[128];
  if (braid_frame_decode(hdr, &f, why, sizeof why) != 0 || f.type != BRAID_FRAME_ACK ||
      f.seq > s->frames_started || f.seq < s->frames_acked || f.offset > c->tx.next_seq)
    return braid_comm_fail(c, ncclRemoteError, "garbled acknowledgement on rail %d", s->rail);
  uint64_t from = s->frames_acked > s->ignore_until ? s->frames_acked : s->ignore_until;
  bool revived = f.seq > s->frames_acked && !s->dead &&
                 c->tx.sched->rail[s->rail].state == BRAID_RAIL_DOWN;
  for (uint64_t k = from; k < f.seq; k++) {
    struct braid_chunk *ck = fifo_pop(&s->unacked);
    if (!ck) return braid_comm_fail(c, ncclInternalError, "acknowledgement without a chunk");
    braid_sched_acked(c->tx.sched, s->rail, ck->len, ck->sent_ns, now);
    if (s->rail < 16 && c->stats[s->rail]) {
      atomic_fetch_add_explicit(&c->stats[s->rail]->bytes, ck->len, memory_order_relaxed);
      atomic_fetch_add_explicit(&c->stats[s->rail]->chunks, 1, memory_order_relaxed);
    }
    ck_acked(c, ck);
  }
  if (f.seq > s->frames_acked) s->ack_ns = now;
  s->frames_acked = f.seq;
  if (revived) braid_sched_restored(c->tx.sched, s->rail, now);
  if (f.offset > c->tx.peer_held_below) {
    c->tx.peer_held_below = f.offset;
    tx_release_held(c);
  }
  return ncclSuccess;
}

/* Puts the head of the ready queue on rail; 1 when the rail has no stream with room. */
static int tx_place(struct braid_comm *c, struct braid_chunk *ck, int rail, uint64_t now) {
  struct braid_stream *s = tx_stream_of(c, rail);
  if (!s) return 1;
  fifo_pop(&c->tx.requeue);
  c->tx.pending_bytes -= ck->len;
  ck->rail = rail;
  ck->sent_ns = now;
  struct braid_txframe *f = tx_append(s);
  f->chunk = ck;
  tx_encode(f, ck->seq, ck->offset, ck->len, ck->size, ck->tag, ck->data);
  fifo_push(&s->unacked, ck);
  braid_sched_sent(c->tx.sched, rail, ck->len, now);
  int err = c->sops->tx_write(c, s);
  if (err) tx_stream_broken(c, s, strerror(err), now);
  return 0;
}

/* Splits the ready queue's head so its first len bytes are a chunk of their own. */
static ncclResult_t tx_split(struct braid_comm *c, struct braid_chunk *ck, uint32_t len) {
  struct braid_chunk *rest = ck_new(c);
  if (!rest) return braid_comm_fail(c, ncclSystemError, "out of memory for chunk records");
  *rest = *ck;
  rest->offset += len, rest->data += len, rest->len -= len;
  ck->len = len;
  ck->next = rest;
  if (c->tx.requeue.tail == ck) c->tx.requeue.tail = rest;
  c->tx.requeue.count++;
  if (ck->req) ck->req->frames_out++;
  return ncclSuccess;
}

/* Hands ready chunks to the rails the scheduler picks (a slow rail may get a small piece). */
static ncclResult_t tx_schedule(struct braid_comm *c, uint64_t now) {
  while (c->tx.requeue.head && !c->err) {
    struct braid_chunk *ck = c->tx.requeue.head;
    struct braid_sched_place p = braid_sched_place(c->tx.sched, c->tx.equal, &c->tx.rr, BRAID_PROBE_PIECES,
                                                   TX_PROBE_LEN, ck->len, c->tx.pending_bytes, now);
    int rail = p.rail;
    if (rail >= 0 && p.len < ck->len && tx_split(c, ck, (uint32_t)p.len)) return c->err;
    if (rail == BRAID_SCHED_ALL_DOWN)
      return braid_comm_fail(c, ncclRemoteError, "every rail to the peer is down");
    if (rail < 0 || tx_place(c, ck, rail, now)) return ncclSuccess;
  }
  return c->err;
}

static ncclResult_t tx_progress_rails(struct braid_comm *c) {
  uint64_t now = braid_now_ns();
  if (c->sops->rejoin) braid_rejoin_connect(c, now);
  /* Acknowledgements are read every call while chunks wait for room, else every 20 us. */
  bool read_acks = c->tx.requeue.head || now - c->tx.last_ack_read_ns >= 20000;
  if (read_acks) c->tx.last_ack_read_ns = now;
  for (int i = 0; i < c->nstreams && !c->err; i++) {
    struct braid_stream *s = &c->streams[i];
    if (s->dead) continue;
    if (read_acks) tx_read_acks(c, s, now);
    int err = s->tx_count ? c->sops->tx_write(c, s) : 0;
    if (err) tx_stream_broken(c, s, strerror(err), now);
  }
  if (c->err) return c->err;
  if (now >= c->tx.next_tick_ns) {
    c->tx.next_tick_ns = now + TX_TICK_NS;
    struct braid_sched_event ev[8];
    int n = braid_sched_tick(c->tx.sched, now, ev, 8);
    for (int i = 0; i < n; i++) {
      tx_log_event(c, &ev[i]);
      /* A stall verdict, then the transport's view of the path (the data sockets' kernel view).
       * late_suspect transports: LATE already (tens of ms into a silence), then a poke's fate:
       * the verdict, which scales with an estimate that can be far off (the first sample
       * includes the provider's connection set-up and the peer's first receive), is not needed
       * where there is evidence. */
      if (ev[i].reason == BRAID_SCHED_STALLED || (c->sops->late_suspect && ev[i].reason == BRAID_SCHED_LATE)) {
        c->tx.suspect |= 1u << ev[i].rail;
        tx_poke(c, ev[i].rail, now);
      }
    }
    tx_check_suspects(c, now);
    for (int r = 0; r < c->nrails && r < 16; r++)
      if (c->stats[r]) atomic_store(&c->stats[r]->est_bps, (uint64_t)(c->tx.sched->rail[r].est_Bps * 8));
    braid_telemetry_tick(now);
  }
  int alive = 0;
  for (int i = 0; i < c->nstreams; i++) alive += !c->streams[i].dead;
  if (!alive && c->tx.pending_bytes)
    return braid_comm_fail(c, ncclRemoteError, "every stream to the peer has failed");
  return tx_schedule(c, now);
}

ncclResult_t braid_tx_progress(struct braid_comm *c) {
  if (c->err) return c->err;
  return c->acks ? tx_progress_rails(c) : tx_progress_single(c);
}

ncclResult_t braid_tx_init(struct braid_comm *c) {
  if (!c->acks) return ncclSuccess;
  c->tx.sched = calloc(1, sizeof *c->tx.sched);
  if (!c->tx.sched) return ncclSystemError;
  double nominal[BRAID_SCHED_MAX_RAILS];
  for (int r = 0; r < c->nrails; r++) nominal[r] = c->streams[r].rail_Bps;
  c->tx.start_ns = braid_now_ns();
  if (braid_sched_init(c->tx.sched, c->nrails, NULL, nominal, c->tx.start_ns) != 0)
    return ncclInternalError;
  for (int r = c->nprimary; r < c->nrails; r++) braid_sched_set_backup(c->tx.sched, r, true);
  for (int r = 0; r < c->nrails; r++) { /* a rail that did not connect starts down */
    bool up = false;
    for (int i = r; i < c->nstreams; i += c->nrails) up |= !c->streams[i].dead;
    if (!up) braid_sched_failed(c->tx.sched, r, braid_now_ns());
  }
  c->tx.equal = !strcmp(braid_param_str(BRAID_P_STRIPING), "equal");
  return ncclSuccess;
}

void braid_tx_free(struct braid_comm *c) {
  for (int i = 0; c->streams && i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    struct braid_chunk *ck;
    while ((ck = fifo_pop(&s->unacked))) ck_free(c, ck);
  }
  struct braid_chunk *ck;
  while ((ck = fifo_pop(&c->tx.requeue))) ck_free(c, ck);
  while ((ck = c->tx.chunk_free)) c->tx.chunk_free = ck->next, free(ck);
  free(c->tx.sched);
}
