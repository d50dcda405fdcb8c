/* braid-perf: ring allreduce, allgather and reducescatter, as NCCL's ring algorithm.
 *
 * Each channel takes a contiguous part of the buffer and walks it in loops; a loop moves one
 * chunk per rank around the ring in phases (allreduce: n-1 reduce-scatter then n-1 all-gather
 * phases; allgather and reducescatter: n-1). In phase p rank r sends chunk (r-p+shift) and
 * receives chunk (r-p-1+shift) mod n; the chunk a rank receives in phase p is the one it sends in
 * phase p+1, so send message i waits for receive message i-S (S: messages per chunk, each at most
 * one step). SIMPLE chunks are NCCL's 4 steps (ALLREDUCE_CHUNKSTEPS), LL/LL128 chunks one step. */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "plan.h"

struct ring_loop {
  uint64_t first;   /* index of the loop's first message on the channel */
  uint64_t S;       /* messages per chunk */
  size_t off;       /* allreduce: loop start; allgather/reducescatter: offset in each block */
  size_t chunk;     /* elements per chunk */
  size_t end;       /* allreduce: loop end (chunks are clipped to it) */
};

struct ring_ctx {
  const struct plan_args *a;
  int nphases, shift;
  size_t slice;     /* elements per message */
  struct ring_loop *loops[PERF_MAX_CHANNELS];
  int nloops[PERF_MAX_CHANNELS];
  struct eng_conn *recv[PERF_MAX_CHANNELS];
};

/* Where message i of channel ch goes: phase, and the element range of its slice. */
struct ring_msg {
  int phase;
  uint64_t S;
  size_t start, len;
};

static int ring_mod(int v, int n) { return ((v % n) + n) % n; }

static const struct ring_loop *ring_find(const struct ring_ctx *x, int ch, uint64_t i) {
  int lo = 0, hi = x->nloops[ch] - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (x->loops[ch][mid].first <= i) lo = mid; else hi = mid - 1;
  }
  return &x->loops[ch][lo];
}

static void ring_locate(const struct ring_ctx *x, int ch, uint64_t i, int is_send,
                        struct ring_msg *m) {
  const struct plan_args *a = x->a;
  const struct ring_loop *l = ring_find(x, ch, i);
  uint64_t j = i - l->first, s = j % l->S;
  m->phase = (int)(j / l->S);
  m->S = l->S;
  int k = ring_mod(a->rank - m->phase - (is_send ? 0 : 1) + x->shift, a->nranks);
  size_t cstart, clen;
  if (a->o->op == PERF_ALLREDUCE) {
    cstart = l->off + (size_t)k * l->chunk;
    size_t cend = cstart + l->chunk < l->end ? cstart + l->chunk : l->end;
    clen = cstart < cend ? cend - cstart : 0;
  } else {
    cstart = (size_t)k * a->count + l->off;
    clen = l->chunk;
  }
  size_t sof = (size_t)s * x->slice;
  m->start = cstart + sof;
  m->len = sof >= clen ? 0 : (clen - sof < x->slice ? clen - sof : x->slice);
}

static int ring_fill(void *ctx, struct eng_conn *c, uint64_t i, void *dst, size_t *len) {
  struct ring_ctx *x = ctx;
  const struct plan_args *a = x->a;
  struct ring_msg m;
  ring_locate(x, c->chan, i, 1, &m);
  if (m.phase > 0 && x->recv[c->chan]->consumed < i - m.S + 1) return 1; /* not reduced yet */
  const char *src = a->in + m.start * a->esize;
  if (a->o->op == PERF_ALLGATHER && m.phase == 0)
    src = a->in + (m.start - (size_t)a->rank * a->count) * a->esize;
  else if (m.phase > 0)
    src = (a->o->op == PERF_REDUCESCATTER ? a->tmp : a->out) + m.start * a->esize;
  *len = m.len * a->esize;
  memcpy(dst, src, *len);
  return 0;
}

static size_t ring_expect(void *ctx, struct eng_conn *c, uint64_t i) {
  struct ring_ctx *x = ctx;
  struct ring_msg m;
  ring_locate(x, c->chan, i, 0, &m);
  return m.len * x->a->esize;
}

static void ring_consume(void *ctx, struct eng_conn *c, uint64_t i, const void *src, size_t len) {
  struct ring_ctx *x = ctx;
  const struct plan_args *a = x->a;
  struct ring_msg m;
  ring_locate(x, c->chan, i, 0, &m);
  size_t off = m.start * a->esize, n = len / a->esize;
  int last_reduce = m.phase == a->nranks - 2;
  switch (a->o->op) {
    case PERF_ALLREDUCE:
      if (m.phase <= a->nranks - 2)
        dt_reduce(a->dt, a->redop, a->out + off, a->in + off, src, n);
      else
        memcpy(a->out + off, src, len);
      break;
    case PERF_ALLGATHER: memcpy(a->out + off, src, len); break;
    default: /* reducescatter: partials in tmp, the last phase lands in this rank's output */
      dt_reduce(a->dt, a->redop,
                last_reduce ? a->out + off - (size_t)a->rank * a->count * a->esize : a->tmp + off,
                a->in + off, src, n);
      break;
  }
}

static uint64_t ring_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* Cuts channel ch's part [cs, cs+clen) into loops; returns the channel's message count. */
static uint64_t ring_loops(struct ring_ctx *x, int ch, size_t cs, size_t clen) {
  const struct plan_args *a = x->a;
  int n = a->nranks, ar = a->o->op == PERF_ALLREDUCE;
  size_t chunk = x->slice * (size_t)a->proto.chunk_steps;
  size_t per_loop = ar ? chunk * (size_t)n : chunk;
  int cap = (int)ring_div_up(clen, per_loop) + 1;
  x->loops[ch] = calloc((size_t)cap, sizeof(struct ring_loop));
  x->nloops[ch] = 0;
  uint64_t first = 0;
  for (size_t off = cs; off < cs + clen; off += per_loop) {
    struct ring_loop *l = &x->loops[ch][x->nloops[ch]++];
    size_t rem = cs + clen - off < per_loop ? cs + clen - off : per_loop;
    l->first = first;
    l->off = off;
    l->end = off + rem;
    l->chunk = ar ? (size_t)ring_div_up(rem, (size_t)n) : rem;
    l->S = ring_div_up(l->chunk, x->slice);
    if (l->S == 0) l->S = 1;
    first += l->S * (uint64_t)x->nphases;
  }
  return first;
}

/* With one rank every collective is a copy of the input. */
static int ring_local(const struct plan_args *a) {
  memcpy(a->out, a->in, a->count * a->esize);
  return 0;
}

int ring_run(struct engine *e, const struct plan_args *a) {
  if (a->count == 0) return 0;
  if (a->nranks == 1) return ring_local(a);
  struct ring_ctx x = {.a = a};
  int ar = a->o->op == PERF_ALLREDUCE;
  x.nphases = ar ? 2 * (a->nranks - 1) : a->nranks - 1;
  x.shift = a->o->op == PERF_REDUCESCATTER ? -1 : 0;
  x.slice = a->proto.step_data / a->esize;
  if (a->o->op == PERF_ALLGATHER) /* own block: NCCL's kernel copies it locally */
    memcpy(a->out + (size_t)a->rank * a->count * a->esize, a->in, a->count * a->esize);
  int next = (a->rank + 1) % a->nranks, prev = (a->rank + a->nranks - 1) % a->nranks;
  for (int ch = 0; ch < a->nch; ch++) {
    size_t cs, clen;
    plan_split(a->count, a->nch, ch, 16, &cs, &clen);
    uint64_t msgs = clen ? ring_loops(&x, ch, cs, clen) : 0;
    x.recv[ch] = plan_conn(e, ch, prev, 0);
    plan_conn(e, ch, next, 1)->total = msgs;
    x.recv[ch]->total = msgs;
  }
  struct eng_op op = {a->proto.proto, a->proto.slot_wire, a->proto.step_data, &x,
                      ring_fill, ring_expect, ring_consume, NULL};
  int rc = eng_run(e, &op);
  for (int ch = 0; ch < a->nch; ch++) free(x.loops[ch]);
  return rc;
}
