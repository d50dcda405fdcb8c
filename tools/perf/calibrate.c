/* braid-perf --calibrate: the variants, the model's times, the summary and the file. */
#include "calibrate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "tune.h"
#include "tmpfile.h"

/* NCCL's predicted time of variant k at bytes (<= 0: NCCL would not run it). */
static float cal_model_us(const struct calibrate *c, int k, size_t bytes) {
  return braid_model_time(&c->model, ncclFuncAllReduce, c->nccl_algo[k], (int)c->v[k].proto,
                          bytes, 1);
}

static void cal_add(struct calibrate *c, enum perf_algo algo, int nccl_algo, enum perf_proto p) {
  struct bench_variant *v = &c->v[c->nv];
  memset(v, 0, sizeof *v);
  v->algo = algo;
  v->proto = p;
  v->nch = c->o->nchannels;
  c->nccl_algo[c->nv++] = nccl_algo;
}

void calibrate_init(struct calibrate *c, const struct perf_opts *o, int nranks, int collnet) {
  memset(c, 0, sizeof *c);
  c->o = o;
  c->nranks = nranks;
  c->collnet = collnet;
  for (int p = PERF_PROTO_LL; p <= PERF_PROTO_SIMPLE; p++)
    cal_add(c, PERF_ALGO_RING, NCCL_ALGO_RING, (enum perf_proto)p);
  for (int p = PERF_PROTO_LL; p <= PERF_PROTO_SIMPLE; p++)
    cal_add(c, PERF_ALGO_TREE, NCCL_ALGO_TREE, (enum perf_proto)p);
  if (collnet) cal_add(c, PERF_ALGO_COLLNET, NCCL_ALGO_COLLNET_CHAIN, PERF_PROTO_SIMPLE);
  ncclTunerConstants_v5_t k;
  struct braid_fabric f;
  braid_model_default_constants(&k);
  tune_fabric(&f, o, nranks, o->link_gbs, o->nchannels, collnet);
  braid_model_build(&c->model, &k, &f);
}

int calibrate_variants(void *ctx, int step, size_t bytes, struct bench_variant *v) {
  struct calibrate *c = ctx;
  (void)step;
  for (int k = 0; k < c->nv; k++) {
    char name[32];
    v[k] = c->v[k];
    float model = cal_model_us(c, k, bytes);
    tune_name(name, sizeof name, c->nccl_algo[k], (int)v[k].proto);
    if (model > 0)
      snprintf(v[k].label, sizeof v[k].label, "%-20s model %10.2f", name, model);
    else
      snprintf(v[k].label, sizeof v[k].label, "%-20s model          -", name);
  }
  return c->nv;
}

/* Variant k of this run, from a row's variant. */
static int cal_index(const struct calibrate *c, const struct bench_variant *v) {
  for (int k = 0; k < c->nv; k++)
    if (c->v[k].algo == v->algo && c->v[k].proto == v->proto) return k;
  return -1;
}

/* NCCL's model pick among this run's variants at `bytes` (-1: none). */
static int cal_pick(const struct calibrate *c, size_t bytes) {
  float table[NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS];
  int a, p;
  braid_model_fill(&c->model, ncclFuncAllReduce, bytes, 1, table, NCCL_NUM_ALGORITHMS);
  tune_mask(table, c->collnet);
  if (braid_model_pick(table, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, &a, &p)) return -1;
  for (int k = 0; k < c->nv; k++)
    if (c->nccl_algo[k] == a && (int)c->v[k].proto == p) return k;
  return -1;
}

/* The summary entry of row's size (a new one for a new size); NULL when out of memory. */
static struct calibrate_size *cal_size(struct calibrate *c, size_t bytes) {
  if (c->nsizes && c->sizes[c->nsizes - 1].bytes == bytes) return &c->sizes[c->nsizes - 1];
  if (c->nsizes == c->sizes_cap) {
    int cap = c->sizes_cap ? 2 * c->sizes_cap : 32;
    void *n = realloc(c->sizes, (size_t)cap * sizeof *c->sizes);
    if (!n) return NULL;
    c->sizes = n;
    c->sizes_cap = cap;
  }
  struct calibrate_size *s = &c->sizes[c->nsizes++];
  memset(s, 0, sizeof *s);
  s->bytes = bytes;
  s->best = -1;
  s->pick = cal_pick(c, bytes);
  return s;
}

/* Adds a point unless the same (algo, proto, bytes) is there already (sizes that round to
 * the same element count); 0, or -1 when out of memory. */
static int cal_point(struct calibrate *c, int k, size_t bytes, double measured, double model) {
  struct braid_calib *out = &c->out;
  struct braid_calib_point pt = {ncclFuncAllReduce, c->nccl_algo[k], (int)c->v[k].proto,
                                 bytes, measured, model};
  for (size_t i = 0; i < out->n; i++)
    if (out->v[i].algo == pt.algo && out->v[i].proto == pt.proto && out->v[i].bytes == pt.bytes)
      return 0;
  if (out->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 64;
    void *n = realloc(out->v, cap * sizeof *out->v);
    if (!n) return -1;
    out->v = n;
    c->cap = cap;
  }
  out->v[out->n++] = pt;
  return 0;
}

void calibrate_result(void *ctx, const struct bench_variant *v, const struct report_row *row) {
  struct calibrate *c = ctx;
  int k = cal_index(c, v);
  struct calibrate_size *s = cal_size(c, row->bytes);
  if (k < 0 || !s) {
    fprintf(stderr, "braid-perf: out of memory for the calibration\n");
    exit(2);
  }
  if (s->best < 0 || row->time_us < s->best_us) s->best = k, s->best_us = row->time_us;
  if (s->pick == k) s->pick_us = row->time_us;
  double model = cal_model_us(c, k, row->bytes);
  if (row->bytes == 0 || row->time_us <= 0 || model <= 0) {
    c->skipped++;
    return;
  }
  if (cal_point(c, k, row->bytes, row->time_us, model)) {
    fprintf(stderr, "braid-perf: out of memory for the calibration\n");
    exit(2);
  }
  if (v->algo == PERF_ALGO_RING && v->proto == PERF_PROTO_SIMPLE) {
    double bw = report_busbw(PERF_ALLREDUCE, c->nranks, row->bytes, row->time_us);
    if (bw > c->link_gbs) c->link_gbs = bw;
  }
}

static void cal_summary(const struct calibrate *c) {
  char best[64], pick[64];
  printf("# calibration summary: at each size the fastest variant measured, and the one NCCL's "
         "model picks (default constants, %d nodes x %g GB/s, %d channels%s)\n", c->nranks,
         c->o->link_gbs, c->o->nchannels, c->collnet ? ", CollNet" : "");
  printf("#%12s  %-20s %10s  %-20s %10s %8s\n", "size (B)", "fastest", "(us)", "NCCL's pick",
         "(us)", "slower");
  for (int i = 0; i < c->nsizes; i++) {
    const struct calibrate_size *s = &c->sizes[i];
    tune_name(best, sizeof best, c->nccl_algo[s->best], (int)c->v[s->best].proto);
    if (s->pick >= 0)
      tune_name(pick, sizeof pick, c->nccl_algo[s->pick], (int)c->v[s->pick].proto);
    else
      snprintf(pick, sizeof pick, "none");
    if (s->pick >= 0 && s->best_us > 0)
      printf(" %12zu  %-20s %10.2f  %-20s %10.2f %7.2fx\n", s->bytes, best, s->best_us, pick,
             s->pick_us, s->pick_us / s->best_us);
    else
      printf(" %12zu  %-20s %10.2f  %-20s %10s %8s\n", s->bytes, best, s->best_us, pick, "-", "-");
  }
  if (c->link_gbs > 0)
    printf("# node link bandwidth measured (largest ring/simple bus bandwidth): %.4g GB/s\n",
           c->link_gbs);
  if (c->skipped)
    printf("# %zu measurements not calibrated (an empty op, or no model time)\n", c->skipped);
}

static int cal_point_cmp(const void *x, const void *y) {
  const struct braid_calib_point *a = x, *b = y;
  if (a->algo != b->algo) return a->algo < b->algo ? -1 : 1;
  if (a->proto != b->proto) return a->proto < b->proto ? -1 : 1;
  return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}

static int cal_write(struct calibrate *c, const char *net) {
  const struct perf_opts *o = c->o;
  char tmp[4200], comment[1600];
  struct braid_calib *out = &c->out;
  out->nranks = out->nnodes = c->nranks; /* braid-perf runs one rank per node */
  out->link_gbs = c->link_gbs;
  out->model_link_gbs = o->link_gbs;
  out->model_nchannels = o->nchannels;
  qsort(out->v, out->n, sizeof *out->v, cal_point_cmp);
  int nl = (int)strcspn(net, "\n");
  snprintf(comment, sizeof comment, "written by braid-perf --calibrate: %d ranks (one per node), "
           "allreduce %s %s, %zu..%zu bytes, median of %d interleaved repeats of %d iterations "
           "(warm-up %d), %d channels%s\nnet: %.*s", c->nranks, dt_name(o->dtype),
           dt_op_name(o->redop), o->min_bytes, o->max_bytes, o->repeats, o->iters, o->warmup,
           o->nchannels, c->collnet ? ", CollNet measured" : ", no CollNet", nl, net);
  FILE *f = braid_tmpfile_open(o->calibrate, tmp, sizeof tmp);
  if (!f) {
    fprintf(stderr, "braid-perf: --calibrate: cannot write next to %s: %s\n", o->calibrate,
            strerror(errno));
    return -1;
  }
  int rc = braid_calib_write(f, out, comment);
  if (braid_tmpfile_commit(f, tmp, o->calibrate, rc)) {
    fprintf(stderr, "braid-perf: --calibrate: writing %s failed: %s\n", o->calibrate, strerror(errno));
    return -1;
  }
  printf("# wrote %s: %zu points, link_gbs %.4g, model_link_gbs %g, model_nchannels %d\n",
         o->calibrate, out->n, out->link_gbs, out->model_link_gbs, out->model_nchannels);
  return 0;
}

int calibrate_finish(struct calibrate *c, const char *net, int results_ok) {
  cal_summary(c);
  if (!results_ok) {
    fprintf(stderr, "braid-perf: --calibrate: %s not written: some results were wrong\n",
            c->o->calibrate);
    return 0; /* the run already fails with status 1 */
  }
  if (!c->out.n) {
    fprintf(stderr, "braid-perf: --calibrate: %s not written: nothing calibrated (sizes too "
            "small?)\n", c->o->calibrate);
    return -1;
  }
  int rc = cal_write(c, net);
  fflush(stdout);
  return rc;
}

void calibrate_free(struct calibrate *c) {
  braid_calib_free(&c->out);
  free(c->sizes);
  c->sizes = NULL;
}
