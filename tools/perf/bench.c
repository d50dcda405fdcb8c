/* braid-perf: the size sweep. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collnet.h"
#include "dtype.h"
#include "plan.h"
#include "rdv.h"
#include "report.h"

#define BENCH_POISON 0x7B /* never an expected value in any type */
#define BENCH_SEED_TIMED 1000u
#define BENCH_SEED_VERIFY 2000u

struct bench {
  const struct perf_opts *o;
  struct perf_net *pn;
  struct plan_args a;
  size_t in_bytes, out_bytes;
};

struct bench_result {
  double time_us;
  uint64_t wrong;
  uint64_t null_sends, null_recvs, hint_posts; /* engine counters, whole run so far */
};

static double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sizes of this step: a.count (see plan_args), input and output bytes, the table's count. */
static size_t bench_size(struct bench *b, size_t bytes, size_t *shown) {
  const struct perf_opts *o = b->o;
  struct plan_args *a = &b->a;
  size_t n = (size_t)a->nranks, es = a->esize;
  switch (o->op) {
    case PERF_SENDRECV:
      a->count = bytes;
      b->in_bytes = b->out_bytes = bytes;
      *shown = bytes / es;
      return bytes;
    case PERF_ALLREDUCE:
      a->count = bytes / es;
      b->in_bytes = b->out_bytes = a->count * es;
      *shown = a->count;
      return a->count * es;
    default:
      a->count = bytes / es / n;
      b->in_bytes = a->count * es * (o->op == PERF_ALLGATHER ? 1 : n);
      b->out_bytes = a->count * es * (o->op == PERF_ALLGATHER ? n : 1);
      *shown = a->count * n;
      return a->count * n * es;
  }
}

static void bench_fill(struct bench *b, uint32_t seed) {
  struct plan_args *a = &b->a;
  size_t n = b->in_bytes / a->esize;
  if (b->o->op == PERF_SENDRECV)
    dt_fill_bytes((void *)a->in, b->in_bytes, a->rank, seed, 0);
  else
    dt_fill(a->dt, a->redop, (void *)a->in, n, a->rank, seed, 0);
}

/* Wrong elements (bytes for sendrecv) of this rank's output for inputs made with seed. */
static uint64_t bench_check(struct bench *b, uint32_t seed) {
  const struct plan_args *a = &b->a;
  int n = a->nranks, r = a->rank;
  switch (b->o->op) {
    case PERF_SENDRECV:
      if (b->o->oneway)
        return r == 1 ? dt_check_bytes(a->out, a->count, 0, seed, 0) : 0;
      return dt_check_bytes(a->out, a->count, (r + n - 1) % n, seed, 0);
    case PERF_ALLREDUCE:
      return dt_check_reduce(a->dt, a->redop, a->out, a->count, n, seed, 0);
    case PERF_ALLGATHER: {
      uint64_t bad = 0;
      for (int k = 0; k < n; k++)
        bad += dt_check_copy(a->dt, a->redop, a->out + (size_t)k * a->count * a->esize, a->count,
                             k, seed, 0);
      return bad;
    }
    default:
      return dt_check_reduce(a->dt, a->redop, a->out, a->count, n, seed, (size_t)r * a->count);
  }
}

/* One operation; a failure ends the process (the other ranks see it on the rendezvous). */
static void bench_once(struct bench *b) {
  struct engine *e = &b->pn->eng;
  const struct perf_opts *o = b->o;
  int rc;
  if (o->op == PERF_SENDRECV) rc = p2p_run(e, &b->a);
  else if (o->op == PERF_ALLREDUCE && o->algo == PERF_ALGO_TREE) rc = tree_run(e, &b->a);
  else if (o->algo == PERF_ALGO_COLLNET) rc = collnet_run(b->pn, &b->a);
  else rc = ring_run(e, &b->a);
  if (rc) {
    fprintf(stderr, "braid-perf: rank %d: %s of %zu bytes failed\n", b->a.rank,
            perf_op_name(o->op), b->in_bytes);
    fflush(stdout);
    _exit(2); /* promptly: no plugin destructors that might wait on a dead peer */
  }
}

/* Fill with seed, poison the output, run, count wrong elements. */
static uint64_t bench_verified(struct bench *b, uint32_t seed) {
  bench_fill(b, seed);
  memset(b->a.out, BENCH_POISON, b->out_bytes);
  bench_once(b);
  return bench_check(b, seed);
}

static struct bench_result bench_step(struct bench *b, struct rdv *r) {
  struct bench_result res = {0};
  for (int w = 0; w < b->o->warmup; w++) res.wrong += bench_verified(b, (uint32_t)w + 1);
  bench_fill(b, BENCH_SEED_TIMED);
  if (rdv_barrier(r)) _exit(2);
  double busy = 0, t0 = bench_now();
  for (int it = 0; it < b->o->iters; it++) {
    double s = bench_now();
    bench_once(b);
    busy += bench_now() - s;
    if (b->o->check_all) res.wrong += bench_check(b, BENCH_SEED_TIMED);
  }
  double elapsed = b->o->check_all ? busy : bench_now() - t0;
  res.time_us = elapsed * 1e6 / b->o->iters;
  if (!b->o->check_all) res.wrong += bench_check(b, BENCH_SEED_TIMED);
  res.wrong += bench_verified(b, BENCH_SEED_VERIFY);
  return res;
}

static size_t bench_next(const struct perf_opts *o, size_t s) {
  if (o->step_bytes) return s + o->step_bytes;
  if (s == 0) return 1;
  size_t n = (size_t)((double)s * o->factor);
  return n > s ? n : s + 1;
}

/* Buffers for the largest size: -e bounds every op's whole input, output and scratch. */
static int bench_alloc(struct bench *b) {
  size_t cap = b->o->max_bytes + 4096;
  b->a.in = malloc(cap);
  b->a.out = malloc(cap);
  b->a.tmp = b->o->op == PERF_REDUCESCATTER ? malloc(cap) : NULL;
  if (!b->a.in || !b->a.out || (b->o->op == PERF_REDUCESCATTER && !b->a.tmp)) {
    fprintf(stderr, "braid-perf: out of memory for %zu-byte buffers\n", cap);
    return -1;
  }
  return 0;
}

int bench_run(struct perf_net *pn, const struct perf_opts *o, struct rdv *r, const char *describe) {
  struct bench b = {.o = o, .pn = pn};
  struct plan_args *a = &b.a;
  a->o = o;
  a->rank = r->rank;
  a->nranks = r->nranks;
  a->nch = o->nchannels;
  a->dt = o->dtype;
  a->redop = o->redop;
  a->esize = dt_size(o->dtype);
  if (bench_alloc(&b)) return 2;
  struct report rp;
  if (r->rank == 0 && report_open(&rp, o, r->nranks, describe)) _exit(2);
  struct bench_result *all = calloc((size_t)r->nranks, sizeof *all);
  uint64_t wrong = 0;
  for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes = bench_next(o, bytes)) {
    struct report_row row = {0};
    row.bytes = bench_size(&b, bytes, &row.count);
    proto_pick(o, row.bytes, &a->proto);
    struct bench_result mine = bench_step(&b, r);
    mine.null_sends = pn->eng.null_sends;
    mine.null_recvs = pn->eng.null_recvs;
    mine.hint_posts = pn->eng.hint_posts;
    if (rdv_allgather(r, &mine, all, sizeof mine)) _exit(2);
    row.proto = a->proto.proto;
    for (int k = 0; k < r->nranks; k++) {
      row.time_us = all[k].time_us > row.time_us ? all[k].time_us : row.time_us;
      row.wrong += all[k].wrong;
    }
    wrong += row.wrong;
    if (r->rank == 0) report_row(&rp, &row);
  }
  if (r->rank == 0 && o->algo != PERF_ALGO_COLLNET) { /* collnet_close counts its own calls */
    uint64_t ns = 0, nr = 0, hp = 0;
    for (int k = 0; k < r->nranks; k++)
      ns += all[k].null_sends, nr += all[k].null_recvs, hp += all[k].hint_posts;
    printf("# all ranks: isend returned NULL %llu times, irecv %llu times (retried); %llu irecvs "
           "posted with the optional-completion hint\n", (unsigned long long)ns,
           (unsigned long long)nr, (unsigned long long)hp);
  }
  if (r->rank == 0) report_close(&rp);
  free(all);
  free((void *)a->in);
  free(a->out);
  free(a->tmp);
  return wrong ? 1 : 0;
}
