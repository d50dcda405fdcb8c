/* braid-perf: the size sweep. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "collnet.h"
#include "dtype.h"
#include "plan.h"
#include "rdv.h"
#include "report.h"

#define BENCH_POISON 0x7B /* never an expected value in any type */

struct bench {
  const struct perf_opts *o;
  struct perf_net *pn;
  struct plan_args a;
  size_t in_bytes, out_bytes;
  size_t op_bytes; /* the table's size of this step (bench_op_bytes) */
  /* The next operation's data seed: every filled operation of the run gets its own (it also
   * goes into every element's value with the sending rank and the element's position, so
   * which peer and which channel's part a byte came from is checked too). */
  uint32_t seq;
  uint64_t checked; /* outputs this rank checked */
  struct perf_buf in_mem, out_mem; /* sendrecv with --mem other than host (plan_args) */
};

struct bench_result {
  double time_us;
  uint64_t wrong;
  /* The timed iterations' CPU time of this rank's process, all its threads (the plugin's
   * included), and the payload bytes it sent in them (busbw's convention: the op's bytes times
   * nccl-tests' bus factor, per iteration, on a rank that has an input to send). */
  double cpu_user_s, cpu_sys_s, sent_bytes;
  /* Of that CPU time, this rank's thread's: the one that calls the plugin as NCCL's proxy thread
   * does (the rest: threads the plugin started, such as braid's socket helpers). */
  double cpu_proxy_s;
};

static double bench_tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

/* User and system CPU seconds of this process so far, every thread included, and (*self) the
 * calling thread's user + system seconds. */
static void bench_cpu(double *user, double *sys, double *self) {
  struct rusage ru, me;
  if (getrusage(RUSAGE_SELF, &ru) || getrusage(RUSAGE_THREAD, &me)) {
    perror("braid-perf: getrusage");
    _exit(2);
  }
  *user = bench_tv(ru.ru_utime);
  *sys = bench_tv(ru.ru_stime);
  *self = bench_tv(me.ru_utime) + bench_tv(me.ru_stime);
}

/* a.count (see plan_args) for sweep size `bytes`. */
static size_t bench_count(const struct perf_opts *o, int nranks, size_t es, size_t bytes) {
  switch (o->op) {
    case PERF_SENDRECV: return bytes;
    case PERF_ALLREDUCE: return bytes / es;
    default: return bytes / es / (size_t)nranks;
  }
}

size_t bench_op_bytes(const struct perf_opts *o, int nranks, size_t bytes) {
  size_t es = dt_size(o->dtype), n = bench_count(o, nranks, es, bytes);
  switch (o->op) {
    case PERF_SENDRECV: return n;
    case PERF_ALLREDUCE: return n * es;
    default: return n * (size_t)nranks * es;
  }
}

/* Sizes of this step: a.count, input and output bytes, the table's count; returns the op's
 * bytes. */
static size_t bench_size(struct bench *b, size_t bytes, size_t *shown) {
  const struct perf_opts *o = b->o;
  struct plan_args *a = &b->a;
  size_t n = (size_t)a->nranks, es = a->esize;
  a->count = bench_count(o, a->nranks, es, bytes);
  switch (o->op) {
    case PERF_SENDRECV:
      b->in_bytes = b->out_bytes = bytes;
      *shown = bytes / es;
      break;
    case PERF_ALLREDUCE:
      b->in_bytes = b->out_bytes = a->count * es;
      *shown = a->count;
      break;
    default:
      b->in_bytes = a->count * es * (o->op == PERF_ALLGATHER ? 1 : n);
      b->out_bytes = a->count * es * (o->op == PERF_ALLGATHER ? n : 1);
      *shown = a->count * n;
      break;
  }
  return bench_op_bytes(o, a->nranks, bytes);
}

static void bench_fill(struct bench *b, uint32_t seed) {
  struct plan_args *a = &b->a;
  size_t n = b->in_bytes / a->esize;
  if (b->o->op == PERF_SENDRECV)
    dt_fill_bytes((void *)a->in, b->in_bytes, a->rank, seed, 0);
  else
    dt_fill(a->dt, a->redop, (void *)a->in, n, a->rank, seed, 0);
}

/* Whether this rank has an output to check (with --oneway only rank 1 receives). */
static int bench_has_output(const struct bench *b) {
  return !(b->o->op == PERF_SENDRECV && b->o->oneway && b->a.rank != 1);
}

/* sendrecv's user buffers of --mem's kind, when the direct path uses them this step. */
static int bench_mem_used(const struct bench *b) {
  return b->a.in_mem && p2p_direct_used(&b->a);
}

/* Copies between the host buffers and those of --mem's kind (the GPU's side of the check). */
static void bench_mem_copy(struct bench *b, int to_mem, int in) {
  const struct perf_buf *m = in ? b->a.in_mem : b->a.out_mem;
  char *host = in ? (char *)b->a.in : b->a.out;
  size_t n = in ? b->in_bytes : b->out_bytes;
  int rc = to_mem ? perf_buf_write(m, 0, host, n) : perf_buf_read(m, 0, host, n);
  if (!rc) return;
  fprintf(stderr, "braid-perf: rank %d: copying the %s buffer %s --mem %s memory failed\n",
          b->a.rank, in ? "input" : "output", to_mem ? "into" : "out of", perf_mem_name(m->kind));
  _exit(2);
}

/* Wrong elements (bytes for sendrecv) of this rank's output for inputs made with seed. */
static uint64_t bench_check(struct bench *b, uint32_t seed) {
  const struct plan_args *a = &b->a;
  int n = a->nranks, r = a->rank;
  if (bench_has_output(b) && bench_mem_used(b)) bench_mem_copy(b, 0, 0);
  if (bench_has_output(b)) b->checked++;
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
  else if (o->op == PERF_ALLREDUCE && b->a.algo == PERF_ALGO_TREE) rc = tree_run(e, &b->a);
  else if (o->op == PERF_ALLREDUCE && b->a.algo == PERF_ALGO_COLLNET) rc = collnet_run(b->pn, &b->a);
  else rc = ring_run(e, &b->a);
  if (rc) {
    fprintf(stderr, "braid-perf: rank %d: %s of %zu bytes failed\n", b->a.rank,
            perf_op_name(o->op), b->in_bytes);
    fflush(stdout);
    _exit(2); /* promptly: no plugin destructors that might wait on a dead peer */
  }
}

/* Whether this rank's input is sent (with --oneway only rank 0 sends). */
static int bench_has_input(const struct bench *b) {
  return !(b->o->op == PERF_SENDRECV && b->o->oneway && b->a.rank != 0);
}

/* Fills the input with the next seed and poisons the output (where this rank has them: the
 * time between iterations stays short); returns the seed. */
static uint32_t bench_prepare(struct bench *b) {
  uint32_t seed = b->seq++;
  if (bench_has_input(b)) bench_fill(b, seed);
  if (bench_has_output(b)) memset(b->a.out, BENCH_POISON, b->out_bytes);
  if (bench_mem_used(b)) {
    if (bench_has_input(b)) bench_mem_copy(b, 1, 1);
    if (bench_has_output(b)) bench_mem_copy(b, 1, 0); /* poisoned too */
  }
  return seed;
}

/* Its own data, a poisoned output, run, count wrong elements. */
static uint64_t bench_verified(struct bench *b) {
  uint32_t seed = bench_prepare(b);
  bench_once(b);
  return bench_check(b, seed);
}

/* Warm-ups and the verify pass are checked one by one. The timed loop: with --check-all every
 * iteration gets its own data and a poisoned output and is checked (none of that is timed), so
 * a write lost, left over from an earlier iteration or landing late is caught in the iteration
 * it hit; without it the iterations run back to back on the same data and only the last one's
 * output is checked (a benchmark's loop: a lost write in an earlier one can go unseen). */
static struct bench_result bench_step(struct bench *b, struct rdv *r) {
  struct bench_result res = {0};
  const int all = b->o->check_all;
  for (int w = 0; w < b->o->warmup; w++) res.wrong += bench_verified(b);
  uint32_t seed = all ? 0 : bench_prepare(b);
  if (rdv_barrier(r)) _exit(2);
  double u0, s0, p0, u1, s1, p1; /* CPU around the timed loop, or (--check-all) each operation */
  bench_cpu(&u0, &s0, &p0);
  double busy = 0, t0 = braid_now_s();
  for (int it = 0; it < b->o->iters; it++) {
    if (all) seed = bench_prepare(b);
    if (all) bench_cpu(&u0, &s0, &p0);
    double s = braid_now_s();
    bench_once(b);
    busy += braid_now_s() - s;
    if (all) {
      bench_cpu(&u1, &s1, &p1);
      res.cpu_user_s += u1 - u0;
      res.cpu_sys_s += s1 - s0;
      res.cpu_proxy_s += p1 - p0;
      res.wrong += bench_check(b, seed);
    }
  }
  double elapsed = all ? busy : braid_now_s() - t0;
  if (!all) {
    bench_cpu(&u1, &s1, &p1);
    res.cpu_user_s = u1 - u0;
    res.cpu_sys_s = s1 - s0;
    res.cpu_proxy_s = p1 - p0;
  }
  if (bench_has_input(b))
    res.sent_bytes = (double)b->op_bytes * report_bus_factor(b->o->op, b->a.nranks) * b->o->iters;
  res.time_us = elapsed * 1e6 / b->o->iters;
  if (!all) res.wrong += bench_check(b, seed);
  res.wrong += bench_verified(b);
  return res;
}

size_t bench_next(const struct perf_opts *o, size_t s) {
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
  if (b->o->op != PERF_SENDRECV || b->o->mem == PERF_MEM_HOST) return 0;
  if (perf_buf_alloc(&b->in_mem, b->o->mem, cap) || perf_buf_alloc(&b->out_mem, b->o->mem, cap))
    return -1;
  b->a.in_mem = &b->in_mem;
  b->a.out_mem = &b->out_mem;
  return 0;
}

/* The plain run's one variant: --algo, the protocol proto.c picks for the size, --channels. */
static int bench_plain_variant(void *ctx, int step, size_t bytes, struct bench_variant *v) {
  const struct perf_opts *o = ctx;
  struct proto_cfg cfg;
  (void)step;
  proto_pick(o, bytes, &cfg);
  memset(v, 0, sizeof *v);
  v->algo = o->algo;
  v->proto = cfg.proto;
  v->nch = o->nchannels;
  return 1;
}

static int bench_cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

/* Row of variant k from every rank's results ([rank][repeat][variant]): per repeat the
 * slowest rank's time, then the median over repeats; wrong elements, CPU time and bytes sent
 * of all of them (rank_cpu[q], when not NULL: rank q's CPU seconds added). */
static void bench_row(const struct bench_result *all, int nranks, int reps, int nv, int k,
                      double *scratch, double *rank_cpu, struct report_row *row) {
  for (int rep = 0; rep < reps; rep++) {
    scratch[rep] = 0;
    for (int q = 0; q < nranks; q++) {
      const struct bench_result *x = &all[((size_t)q * reps + rep) * nv + k];
      scratch[rep] = x->time_us > scratch[rep] ? x->time_us : scratch[rep];
      row->wrong += x->wrong;
      row->cpu_user_s += x->cpu_user_s;
      row->cpu_sys_s += x->cpu_sys_s;
      row->cpu_proxy_s += x->cpu_proxy_s;
      row->cpu_bytes += x->sent_bytes;
      if (rank_cpu) rank_cpu[q] += x->cpu_user_s + x->cpu_sys_s;
    }
  }
  qsort(scratch, (size_t)reps, sizeof *scratch, bench_cmp_double);
  row->time_us = reps % 2 ? scratch[reps / 2] : (scratch[reps / 2 - 1] + scratch[reps / 2]) / 2;
}

/* Rank 0 prints the NULL-request counters of every rank (CollNet prints its own); *checked:
 * the outputs all ranks checked. */
static int bench_counters(struct perf_net *pn, const struct perf_opts *o, struct rdv *r,
                          uint64_t checked, uint64_t *all_checked) {
  enum { N = 7 };
  uint64_t mine[N] = {pn->eng.null_sends, pn->eng.null_recvs, pn->eng.hint_posts,
                      pn->eng.early_recvs, checked, pn->eng.flushes, pn->eng.flush_reqs};
  uint64_t *all = calloc((size_t)r->nranks, sizeof mine), sum[N] = {0};
  if (!all || rdv_allgather(r, mine, all, sizeof mine)) return free(all), -1;
  for (int k = 0; k < r->nranks; k++)
    for (int i = 0; i < N; i++) sum[i] += all[N * k + i];
  free(all);
  *all_checked = sum[4];
  if (r->rank == 0 && perf_mem_is_gpu(o->mem))
    printf("# all ranks: iflush called after %llu Simple receives into GPU memory, %llu of them "
           "returned a request (tested until done)\n", (unsigned long long)sum[5],
           (unsigned long long)sum[6]);
  if (r->rank == 0 && o->algo != PERF_ALGO_COLLNET)
    printf("# all ranks: isend returned NULL %llu times, irecv %llu times (retried); %llu irecvs "
           "posted with the optional-completion hint, %llu of them completed early\n",
           (unsigned long long)sum[0], (unsigned long long)sum[1], (unsigned long long)sum[2],
           (unsigned long long)sum[3]);
  return 0;
}

int bench_run(struct perf_net *pn, const struct perf_opts *o, struct rdv *r, const char *describe,
              const struct bench_mode *mode) {
  struct bench b = {.o = o, .pn = pn, .seq = 1};
  struct plan_args *a = &b.a;
  const struct bench_mode plain = {o->repeats, bench_plain_variant, NULL, (void *)o};
  if (!mode) mode = &plain;
  int reps = mode->repeats;
  a->o = o;
  a->rank = r->rank;
  a->nranks = r->nranks;
  a->dt = o->dtype;
  a->redop = o->redop;
  a->esize = dt_size(o->dtype);
  if (bench_alloc(&b)) return 2;
  size_t per_rank = (size_t)reps * BENCH_MAX_VARIANTS;
  struct bench_result *mine = calloc(per_rank, sizeof *mine);
  struct bench_result *all = calloc(per_rank * (size_t)r->nranks, sizeof *all);
  double *scratch = calloc((size_t)reps, sizeof *scratch);
  double *rank_cpu = calloc((size_t)r->nranks, sizeof *rank_cpu); /* CPU seconds per rank */
  if (!mine || !all || !scratch || !rank_cpu) {
    fprintf(stderr, "braid-perf: out of memory for results\n");
    _exit(2);
  }
  struct report rp;
  if (r->rank == 0 && report_open(&rp, o, r->nranks, describe)) _exit(2);
  uint64_t wrong = 0;
  int step = 0;
  for (size_t s = o->min_bytes; s <= o->max_bytes; s = bench_next(o, s), step++) {
    struct bench_variant v[BENCH_MAX_VARIANTS];
    size_t count, bytes = bench_size(&b, s, &count);
    b.op_bytes = bytes;
    int nv = mode->variants(mode->ctx, step, bytes, v);
    if (nv < 1 || nv > BENCH_MAX_VARIANTS) {
      fprintf(stderr, "braid-perf: internal error: %d variants at %zu bytes\n", nv, bytes);
      _exit(2);
    }
    for (int rep = 0; rep < reps; rep++) /* interleaved: every variant once per repeat */
      for (int k = 0; k < nv; k++) {
        a->algo = v[k].algo;
        a->nch = v[k].nch;
        proto_config(o, v[k].proto, &a->proto);
        mine[rep * nv + k] = bench_step(&b, r);
      }
    if (rdv_allgather(r, mine, all, (size_t)reps * (size_t)nv * sizeof *mine)) _exit(2);
    for (int k = 0; k < nv; k++) {
      struct report_row row = {.bytes = bytes, .count = count, .proto = v[k].proto,
                               .algo = v[k].algo, .nch = v[k].nch, .label = v[k].label};
      bench_row(all, r->nranks, reps, nv, k, scratch, rank_cpu, &row);
      wrong += row.wrong;
      if (r->rank != 0) continue;
      report_row(&rp, &row);
      if (mode->result) mode->result(mode->ctx, &v[k], &row);
    }
  }
  uint64_t checked = 0;
  if (bench_counters(pn, o, r, b.checked, &checked)) _exit(2);
  if (r->rank == 0) report_close(&rp, checked, rank_cpu);
  free(rank_cpu);
  free(mine);
  free(all);
  free(scratch);
  free((void *)a->in);
  free(a->out);
  free(a->tmp);
  if (perf_buf_free(&b.in_mem) || perf_buf_free(&b.out_mem)) return 2;
  return wrong ? 1 : 0;
}
