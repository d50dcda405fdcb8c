/* The rail simulator (see railsim.h). */
#include "railsim.h"

#include <stdlib.h>
#include <string.h>

enum kind { K_TXDONE, K_ARRIVE, K_ACK, K_ACTION, K_TICK, K_FAILNOTICE };
enum mode { M_UP, M_DOWN, M_BLACKHOLE };
enum cstate { C_IDLE, C_QUEUED, C_ONRAIL, C_DONE };

struct pkt {
  uint32_t chunk, tgen; /* tgen: the transport's rail generation when sent */
  uint64_t sent_ns;
};

struct ev {
  uint64_t t, seq;
  enum kind kind;
  int rail;
  struct pkt pkt;
  uint64_t tag; /* version (TXDONE), epoch (ARRIVE/ACK), action index */
};

struct chunk {
  uint32_t msg, len;
  enum cstate state; /* ONRAIL: not queued, not done, on `live` rails */
  uint32_t live, on; /* current-generation copies on rails; bit r: rail r holds one */
  uint32_t accepted;
  int accepted_rail;
};

struct msg {
  size_t size;
  uint32_t first, n, acked;
};

/* A double-ended queue of packets (a rail's FIFO, held data and acks) or of chunk numbers. */
struct pq {
  struct pkt *v;
  size_t cap, head, n;
};
struct uq {
  uint32_t *v;
  size_t cap, head, n;
};

struct rail {
  double rate;
  enum mode mode;
  uint64_t epoch, version;
  struct pq fifo;
  bool tx;
  double head_left; /* bytes left of the head chunk, -1 when not started */
  uint64_t head_mark;
  struct pq held_data, held_acks;
};

struct out { /* chunk -> sent_ns, sorted by chunk: the transport's current-generation copies */
  uint32_t chunk;
  uint64_t sent_ns;
};
struct trail {
  uint32_t gen;
  struct out *out;
  size_t nout, cap;
  size_t inflight;
};

struct sim {
  const struct rs_config *c;
  int n;
  bool oom;
  struct braid_sched s;
  struct ev *heap;
  size_t nheap, capheap;
  uint64_t seq, now;
  struct rail rails[BRAID_SCHED_MAX_RAILS];
  struct trail tr[BRAID_SCHED_MAX_RAILS];
  struct chunk *chunks;
  size_t nchunks;
  struct msg *msgs;
  struct uq queue;
  size_t queued_bytes, posted, head_msg;
  int rr;
  struct rs_result *res;
  size_t capbins, capevents;
};

/* ---- containers */

static bool grow(struct sim *S, void **v, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap : 16;
  while (nc < need) nc *= 2;
  void *nv = realloc(*v, nc * elem);
  if (!nv) {
    S->oom = true;
    return false;
  }
  *v = nv;
  *cap = nc;
  return true;
}

/* Ring buffers: grow by unrolling into a fresh array. */
#define RING_GROW(S, q, T)                                                                          \
  do {                                                                                              \
    if ((q)->n == (q)->cap) {                                                                       \
      size_t nc = (q)->cap ? 2 * (q)->cap : 16;                                                    \
      T *nv = malloc(nc * sizeof *nv);                                                             \
      if (!nv) {                                                                                    \
        (S)->oom = true;                                                                           \
        break;                                                                                      \
      }                                                                                             \
      for (size_t i_ = 0; i_ < (q)->n; i_++) nv[i_] = (q)->v[((q)->head + i_) % (q)->cap];        \
      free((q)->v);                                                                                 \
      (q)->v = nv, (q)->cap = nc, (q)->head = 0;                                                   \
    }                                                                                               \
  } while (0)

static void pq_push_back(struct sim *S, struct pq *q, struct pkt p) {
  RING_GROW(S, q, struct pkt);
  if (q->n == q->cap) return;
  q->v[(q->head + q->n++) % q->cap] = p;
}
static struct pkt *pq_at(struct pq *q, size_t k) { return &q->v[(q->head + k) % q->cap]; }
static void pq_pop_front(struct pq *q) {
  q->head = (q->head + 1) % q->cap;
  q->n--;
}
static void pq_erase(struct pq *q, size_t k) {
  for (size_t i = k; i + 1 < q->n; i++) *pq_at(q, i) = *pq_at(q, i + 1);
  q->n--;
}
static void pq_clear(struct pq *q) { q->head = q->n = 0; }

static void uq_push_back(struct sim *S, struct uq *q, uint32_t x) {
  RING_GROW(S, q, uint32_t);
  if (q->n == q->cap) return;
  q->v[(q->head + q->n++) % q->cap] = x;
}
static void uq_push_front(struct sim *S, struct uq *q, uint32_t x) {
  RING_GROW(S, q, uint32_t);
  if (q->n == q->cap) return;
  q->head = (q->head + q->cap - 1) % q->cap;
  q->v[q->head] = x;
  q->n++;
}
static uint32_t uq_front(const struct uq *q) { return q->v[q->head]; }
static void uq_pop_front(struct uq *q) {
  q->head = (q->head + 1) % q->cap;
  q->n--;
}

/* The transport's out map: lower bound of a chunk. */
static size_t out_find(const struct trail *T, uint32_t c) {
  size_t lo = 0, hi = T->nout;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (T->out[mid].chunk < c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
static bool out_has(const struct trail *T, uint32_t c) {
  size_t i = out_find(T, c);
  return i < T->nout && T->out[i].chunk == c;
}
static bool out_erase(struct trail *T, uint32_t c) {
  size_t i = out_find(T, c);
  if (i == T->nout || T->out[i].chunk != c) return false;
  memmove(&T->out[i], &T->out[i + 1], (T->nout - i - 1) * sizeof *T->out);
  T->nout--;
  return true;
}
static void out_set(struct sim *S, struct trail *T, uint32_t c, uint64_t sent) {
  size_t i = out_find(T, c);
  if (i < T->nout && T->out[i].chunk == c) {
    T->out[i].sent_ns = sent;
    return;
  }
  if (!grow(S, (void **)&T->out, &T->cap, T->nout + 1, sizeof *T->out)) return;
  memmove(&T->out[i + 1], &T->out[i], (T->nout - i) * sizeof *T->out);
  T->out[i] = (struct out){c, sent};
  T->nout++;
}

/* Event queue: a binary min-heap on (t, seq). */
static bool ev_less(const struct ev *a, const struct ev *b) {
  return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static void push(struct sim *S, uint64_t t, enum kind k, int rail, struct pkt p, uint64_t tag) {
  if (!grow(S, (void **)&S->heap, &S->capheap, S->nheap + 1, sizeof *S->heap)) return;
  struct ev e = {t, S->seq++, k, rail, p, tag};
  size_t i = S->nheap++;
  while (i > 0 && ev_less(&e, &S->heap[(i - 1) / 2])) {
    S->heap[i] = S->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  S->heap[i] = e;
}

static struct ev pop(struct sim *S) {
  struct ev top = S->heap[0], last = S->heap[--S->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l >= S->nheap) break;
    m = l + 1 < S->nheap && ev_less(&S->heap[l + 1], &S->heap[l]) ? l + 1 : l;
    if (!ev_less(&S->heap[m], &last)) break;
    S->heap[i] = S->heap[m];
    i = m;
  }
  if (S->nheap) S->heap[i] = last;
  return top;
}

static const struct pkt NOPKT = {0, 0, 0};

/* ---- rails */

static void start_tx(struct sim *S, int r) {
  struct rail *R = &S->rails[r];
  if (R->mode != M_UP || R->tx || R->fifo.n == 0) return;
  if (R->head_left < 0) R->head_left = S->chunks[pq_at(&R->fifo, 0)->chunk].len;
  R->tx = true;
  R->head_mark = S->now;
  R->version++;
  push(S, S->now + (uint64_t)(R->head_left * 1e9 / R->rate + 0.999), K_TXDONE, r, NOPKT, R->version);
}

static void pause_tx(struct sim *S, int r) {
  struct rail *R = &S->rails[r];
  if (!R->tx) return;
  R->head_left -= (double)(S->now - R->head_mark) * R->rate / 1e9;
  if (R->head_left < 0) R->head_left = 0;
  R->tx = false;
  R->version++; /* cancels the pending TXDONE */
}

static void tx_done(struct sim *S, int r, uint64_t version) {
  struct rail *R = &S->rails[r];
  if (version != R->version || !R->tx) return;
  struct pkt p = *pq_at(&R->fifo, 0);
  pq_pop_front(&R->fifo);
  R->tx = false;
  R->head_left = -1;
  push(S, S->now + S->c->prop_ns, K_ARRIVE, r, p, R->epoch);
  start_tx(S, r);
}

static void recover(struct sim *S, int r) {
  struct rail *R = &S->rails[r];
  R->mode = M_UP;
  for (size_t i = 0; i < R->held_data.n; i++)
    push(S, S->now + S->c->prop_ns, K_ARRIVE, r, *pq_at(&R->held_data, i), R->epoch);
  for (size_t i = 0; i < R->held_acks.n; i++)
    push(S, S->now + S->c->prop_ns, K_ACK, r, *pq_at(&R->held_acks, i), R->epoch);
  pq_clear(&R->held_data);
  pq_clear(&R->held_acks);
  start_tx(S, r);
}

static void do_action(struct sim *S, const struct rs_action *a) {
  struct rail *R = &S->rails[a->rail];
  switch (a->kind) {
  case RS_RATE:
    pause_tx(S, a->rail);
    R->rate = a->rate_Bps;
    start_tx(S, a->rail);
    break;
  case RS_FAIL:
    R->mode = M_DOWN;
    R->epoch++;
    R->version++;
    pq_clear(&R->fifo);
    R->tx = false;
    R->head_left = -1;
    R->head_mark = 0;
    pq_clear(&R->held_data);
    pq_clear(&R->held_acks);
    push(S, S->now + S->c->fail_detect_ns, K_FAILNOTICE, a->rail, NOPKT, 0);
    break;
  case RS_BLACKHOLE:
    pause_tx(S, a->rail);
    R->mode = M_BLACKHOLE;
    break;
  case RS_RECOVER: recover(S, a->rail); break;
  }
}

/* ---- receiver */

static void arrive(struct sim *S, int r, struct pkt p, uint64_t epoch) {
  struct rail *R = &S->rails[r];
  if (epoch != R->epoch) return; /* dropped with the rail */
  if (R->mode == M_BLACKHOLE) {
    pq_push_back(S, &R->held_data, p);
    return;
  }
  struct chunk *ch = &S->chunks[p.chunk];
  if (ch->accepted == 0) {
    ch->accepted = 1;
    ch->accepted_rail = r;
    size_t b = (size_t)(S->now / S->c->bin_ns);
    struct rs_result *res = S->res;
    if (res->nbins <= b) {
      size_t need = (b + 1) * (size_t)S->n;
      if (!grow(S, (void **)&res->bins, &S->capbins, need, sizeof *res->bins)) return;
      memset(res->bins + res->nbins * (size_t)S->n, 0, (need - res->nbins * (size_t)S->n) * sizeof *res->bins);
      res->nbins = b + 1;
    }
    res->bins[b * (size_t)S->n + (size_t)r] += ch->len;
  } else {
    S->res->dup_chunks++; /* discarded: the receiver already holds this data */
  }
  push(S, S->now + S->c->prop_ns, K_ACK, r, p, R->epoch);
}

/* ---- transport */

static void post_more(struct sim *S);

static void drop(struct sim *S, uint32_t c, int r) { /* rail r no longer holds a live copy of c */
  S->chunks[c].live--;
  S->chunks[c].on &= ~(1u << r);
}

/* Takes back rail r's current copy of chunk c if it has not started to go out. */
static void withdraw(struct sim *S, int r, uint32_t c) {
  struct trail *T = &S->tr[r];
  struct rail *R = &S->rails[r];
  if (!out_has(T, c)) return;
  for (size_t k = 0; k < R->fifo.n; k++) {
    struct pkt *p = pq_at(&R->fifo, k);
    if (p->chunk != c || p->tgen != T->gen) continue;
    if (k == 0 && R->head_left >= 0) return; /* partly transmitted */
    pq_erase(&R->fifo, k);
    out_erase(T, c);
    T->inflight -= S->chunks[c].len;
    drop(S, c, r);
    S->res->withdrawn_chunks++;
    braid_sched_withdrawn(&S->s, r, S->chunks[c].len, S->now);
    return;
  }
}

static void chunk_done(struct sim *S, uint32_t c) {
  struct chunk *ch = &S->chunks[c];
  if (ch->state == C_DONE) return;
  if (ch->state == C_QUEUED) S->queued_bytes -= ch->len; /* a late copy beat the resend */
  ch->state = C_DONE;
  if (S->c->withdraw_unsent)
    for (int r = 0; r < S->n; r++) withdraw(S, r, c);
  struct msg *m = &S->msgs[ch->msg];
  if (++m->acked == m->n) post_more(S);
}

static void ack_arrives(struct sim *S, int r, struct pkt p, uint64_t epoch) {
  struct rail *R = &S->rails[r];
  if (epoch != R->epoch) return;
  if (R->mode == M_BLACKHOLE) {
    pq_push_back(S, &R->held_acks, p);
    return;
  }
  struct trail *T = &S->tr[r];
  if (p.tgen == T->gen && out_erase(T, p.chunk)) {
    T->inflight -= S->chunks[p.chunk].len;
    drop(S, p.chunk, r);
    braid_sched_acked(&S->s, r, S->chunks[p.chunk].len, p.sent_ns, S->now);
  }
  chunk_done(S, p.chunk);
}

/* In-order completion frees slots; post while fewer than `slots` are outstanding. */
static void post_more(struct sim *S) {
  size_t nmsgs = S->c->nmsgs;
  while (S->head_msg < S->posted && S->msgs[S->head_msg].acked == S->msgs[S->head_msg].n) S->head_msg++;
  while (S->posted < nmsgs && S->posted - S->head_msg < (size_t)S->c->slots) {
    const struct msg *m = &S->msgs[S->posted++];
    for (uint32_t k = m->first; k < m->first + m->n; k++) {
      S->chunks[k].state = C_QUEUED;
      uq_push_back(S, &S->queue, k);
      S->queued_bytes += S->chunks[k].len;
    }
  }
}

/* Queues another copy of every unacked chunk of a rail that has no other live copy (after a
 * failure), or only this one (LATE: a hedge, the original stays).  Oldest ends up first. */
static void requeue(struct sim *S, const struct trail *T, bool hedge) {
  for (size_t i = T->nout; i-- > 0;) {
    struct chunk *ch = &S->chunks[T->out[i].chunk];
    if (ch->state != C_ONRAIL || ch->live != (hedge ? 1u : 0u)) continue;
    ch->state = C_QUEUED;
    uq_push_front(S, &S->queue, T->out[i].chunk);
    S->queued_bytes += ch->len;
    if (hedge) S->res->hedged_chunks++;
    else S->res->resent_chunks++;
  }
}

static void fail(struct sim *S, int r) {
  if (S->s.rail[r].state == BRAID_RAIL_DOWN) return;
  braid_sched_failed(&S->s, r, S->now);
  struct trail *T = &S->tr[r];
  T->gen++;
  for (size_t i = 0; i < T->nout; i++) drop(S, T->out[i].chunk, r);
  requeue(S, T, false);
  T->nout = 0;
  T->inflight = 0;
}

static bool done(const struct sim *S) { return S->head_msg == S->c->nmsgs; }

static void tick(struct sim *S) {
  struct braid_sched_event ev[BRAID_SCHED_MAX_EVENTS];
  int n = braid_sched_tick(&S->s, S->now, ev, BRAID_SCHED_MAX_EVENTS);
  struct rs_result *res = S->res;
  for (int i = 0; i < n; i++) {
    if (grow(S, (void **)&res->events, &S->capevents, res->nevents + 1, sizeof *res->events))
      res->events[res->nevents++] = ev[i];
    if (S->c->equal_striping) continue; /* the baseline has no feedback */
    if (ev[i].reason == BRAID_SCHED_STALLED) fail(S, ev[i].rail);
    if (ev[i].reason == BRAID_SCHED_LATE && S->c->hedge) requeue(S, &S->tr[ev[i].rail], true);
  }
  for (int r = 0; r < S->n; r++)
    if (S->s.rail[r].state == BRAID_RAIL_DOWN && S->now >= braid_sched_retry_at(&S->s, r) &&
        S->rails[r].mode == M_UP)
      braid_sched_restored(&S->s, r, S->now);
  if (!done(S)) push(S, S->now + S->c->tick_ns, K_TICK, -1, NOPKT, 0);
}

static int choose(struct sim *S, uint32_t c) {
  size_t len = S->chunks[c].len;
  if (!S->c->equal_striping)
    return braid_sched_pick_avoid(&S->s, len, S->queued_bytes, S->chunks[c].on, S->now);
  int r = S->rr;
  if (S->tr[r].inflight > 0 && S->tr[r].inflight + len > S->c->rr_cap) return BRAID_SCHED_WAIT;
  S->rr = (S->rr + 1) % S->n;
  return r;
}

static void hash(struct rs_result *res, uint64_t v) {
  for (int i = 0; i < 8; i++) res->pick_hash = (res->pick_hash ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
}

static void send(struct sim *S, uint32_t c, int r) {
  struct chunk *ch = &S->chunks[c];
  braid_sched_sent(&S->s, r, ch->len, S->now);
  struct trail *T = &S->tr[r];
  out_set(S, T, c, S->now);
  T->inflight += ch->len;
  ch->state = C_ONRAIL;
  ch->live++;
  ch->on |= 1u << r;
  S->res->sent_bytes[r] += ch->len;
  pq_push_back(S, &S->rails[r].fifo, (struct pkt){c, T->gen, S->now});
  start_tx(S, r);
}

static void pump(struct sim *S) {
  while (S->queue.n > 0 && !S->oom) {
    uint32_t c = uq_front(&S->queue);
    if (S->chunks[c].state != C_QUEUED) {
      uq_pop_front(&S->queue);
      continue;
    }
    int r = choose(S, c);
    S->res->picks++;
    hash(S->res, S->now), hash(S->res, c), hash(S->res, (uint64_t)(int64_t)r);
    if (r < 0) {
      S->res->all_down_seen |= r == BRAID_SCHED_ALL_DOWN;
      return;
    }
    if (S->rails[r].mode == M_DOWN) { /* the send is refused: an error on that rail */
      fail(S, r);
      continue;
    }
    uq_pop_front(&S->queue);
    S->queued_bytes -= S->chunks[c].len;
    send(S, c, r);
  }
}

static void dispatch(struct sim *S, const struct ev *e) {
  switch (e->kind) {
  case K_TXDONE: tx_done(S, e->rail, e->tag); break;
  case K_ARRIVE: arrive(S, e->rail, e->pkt, e->tag); break;
  case K_ACK: ack_arrives(S, e->rail, e->pkt, e->tag); break;
  case K_ACTION: do_action(S, &S->c->actions[e->tag]); break;
  case K_TICK: tick(S); break;
  case K_FAILNOTICE:
    if (S->rails[e->rail].mode == M_DOWN) fail(S, e->rail);
    break;
  }
}

/* ---- set-up and results */

void rs_config_default(struct rs_config *c) {
  memset(c, 0, sizeof *c);
  c->prop_ns = 50 * RS_US;
  c->chunk = 128 << 10;
  c->slots = 8;
  c->tick_ns = RS_MS;
  c->fail_detect_ns = RS_MS;
  c->end_ns = 60 * RS_SEC;
  c->bin_ns = 10 * RS_MS;
  c->rr_cap = 4 << 20;
  c->hedge = true;
  braid_sched_params_default(&c->params);
}

static int setup(struct sim *S) {
  const struct rs_config *c = S->c;
  if (braid_sched_init(&S->s, S->n, &c->params, c->nominal_Bps, 0) != 0) return -1;
  for (int r = 0; r < S->n; r++) {
    if (!(c->rate_Bps[r] > 0)) return -1;
    S->rails[r].rate = c->rate_Bps[r];
    S->rails[r].head_left = -1;
  }
  S->res->bin_ns = c->bin_ns;
  S->msgs = calloc(c->nmsgs ? c->nmsgs : 1, sizeof *S->msgs);
  if (!S->msgs) return -1;
  size_t capchunks = 0;
  for (size_t m = 0; m < c->nmsgs; m++) {
    struct msg msg = {c->msgs[m], (uint32_t)S->nchunks, 0, 0};
    for (size_t off = 0; off < msg.size || (msg.size == 0 && off == 0); off += c->chunk) {
      size_t len = msg.size - off < c->chunk ? msg.size - off : c->chunk;
      if (!grow(S, (void **)&S->chunks, &capchunks, S->nchunks + 1, sizeof *S->chunks)) return -1;
      S->chunks[S->nchunks++] = (struct chunk){(uint32_t)m, (uint32_t)len, C_IDLE, 0, 0, 0, -1};
      msg.n++;
      if (msg.size == 0) break;
    }
    S->res->total_bytes += msg.size;
    S->msgs[m] = msg;
  }
  for (size_t i = 0; i < c->nactions; i++) {
    if (c->actions[i].rail < 0 || c->actions[i].rail >= S->n) return -1;
    push(S, c->actions[i].at_ns, K_ACTION, -1, NOPKT, i);
  }
  push(S, 0, K_TICK, -1, NOPKT, 0);
  post_more(S);
  pump(S);
  return S->oom ? -1 : 0;
}

static void finish(struct sim *S) {
  struct rs_result *res = S->res;
  res->complete = done(S);
  res->finish_ns = S->now;
  for (size_t m = 0; m < S->c->nmsgs; m++) {
    const struct msg *M = &S->msgs[m];
    int rail = -2;
    for (uint32_t k = M->first; k < M->first + M->n; k++) {
      const struct chunk *ch = &S->chunks[k];
      if (ch->accepted == 0) res->lost_chunks++;
      res->accepted_bytes += ch->accepted ? ch->len : 0;
      if (M->size <= S->c->chunk && rail != -2 && rail != ch->accepted_rail) res->split_small++;
      rail = ch->accepted_rail;
    }
  }
  for (int r = 0; r < S->n; r++) {
    res->final_rails[r] = S->s.rail[r];
    size_t a = S->s.rail[r].inflight, b = S->tr[r].inflight;
    res->inflight_mismatch += a > b ? a - b : b - a;
  }
}

int rs_simulate(const struct rs_config *c, struct rs_result *res) {
  memset(res, 0, sizeof *res);
  res->pick_hash = 1469598103934665603ull;
  if (c->nrails < 1 || c->nrails > BRAID_SCHED_MAX_RAILS || c->chunk == 0 || c->slots < 1 ||
      c->bin_ns == 0 || c->tick_ns == 0)
    return -1;
  res->nrails = c->nrails;
  struct sim *S = calloc(1, sizeof *S);
  if (!S) return -1;
  S->c = c;
  S->n = c->nrails;
  S->res = res;
  int rc = setup(S);
  while (rc == 0 && S->nheap > 0 && !done(S) && !S->oom) {
    struct ev e = pop(S);
    if (e.t > c->end_ns) break;
    S->now = e.t;
    dispatch(S, &e);
    pump(S);
  }
  if (S->oom) rc = -1;
  if (rc == 0) finish(S);
  for (int r = 0; r < S->n; r++) {
    free(S->rails[r].fifo.v);
    free(S->rails[r].held_data.v);
    free(S->rails[r].held_acks.v);
    free(S->tr[r].out);
  }
  free(S->queue.v);
  free(S->heap);
  free(S->chunks);
  free(S->msgs);
  free(S);
  if (rc != 0) rs_result_free(res);
  return rc;
}

void rs_result_free(struct rs_result *r) {
  free(r->bins);
  free(r->events);
  r->bins = NULL;
  r->events = NULL;
  r->nbins = r->nevents = 0;
}

double rs_Bps(const struct rs_result *r, uint64_t t0, uint64_t t1, int rail) {
  uint64_t sum = 0;
  for (uint64_t b = t0 / r->bin_ns; b < t1 / r->bin_ns && b < r->nbins; b++)
    for (int k = 0; k < r->nrails; k++)
      if (rail < 0 || k == rail) sum += r->bins[b * (uint64_t)r->nrails + (uint64_t)k];
  return (double)sum * 1e9 / (double)(t1 - t0);
}

double rs_share(const struct rs_result *r, int rail, uint64_t t0, uint64_t t1) {
  return rs_Bps(r, t0, t1, rail) / rs_Bps(r, t0, t1, -1);
}

uint64_t rs_first(const struct rs_result *r, enum braid_sched_reason reason, int rail, uint64_t after) {
  for (size_t i = 0; i < r->nevents; i++)
    if (r->events[i].reason == reason && r->events[i].rail == rail && r->events[i].at_ns >= after)
      return r->events[i].at_ns;
  return UINT64_MAX;
}

int rs_count(const struct rs_result *r, enum braid_sched_reason reason, int rail) {
  int n = 0;
  for (size_t i = 0; i < r->nevents; i++)
    n += r->events[i].reason == reason && (rail < 0 || r->events[i].rail == rail);
  return n;
}

uint64_t rs_steady_end(const struct rs_result *r) { return (r->finish_ns / r->bin_ns - 3) * r->bin_ns; }
