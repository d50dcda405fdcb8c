/* braid-perf --algo auto|nccl: the per-size plan and the ranks' agreement on it. */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib.h"
#include "inputs.h"
#include "param.h"
#include "rdv.h"
#include "rules.h"
#include "tunerload.h"

#define NALGO NCCL_NUM_ALGORITHMS
#define NPROTO NCCL_NUM_PROTOCOLS

_Static_assert(PERF_PROTO_LL == NCCL_PROTO_LL && PERF_PROTO_LL128 == NCCL_PROTO_LL128 &&
                   PERF_PROTO_SIMPLE == NCCL_PROTO_SIMPLE,
               "braid-perf's protocols are NCCL's indices");

void tune_env_defaults(const struct perf_opts *o) {
  if (o->algo == PERF_ALGO_AUTO) setenv("NCCL_TUNER_PLUGIN", "braid", 0);
}

void tune_fabric(struct braid_fabric *f, const struct perf_opts *o, int nranks, double link_gbs,
                 int nch, int collnet) {
  braid_fabric_default(f, nranks, 1, link_gbs, nch);
  f->collnet = collnet;
  if (o->proto != PERF_PROTO_AUTO) f->proto_enable = 1u << o->proto; /* as NCCL_PROTO */
}

int tune_perf_algo(int nccl_algo) {
  switch (nccl_algo) {
    case NCCL_ALGO_TREE: return PERF_ALGO_TREE;
    case NCCL_ALGO_RING: return PERF_ALGO_RING;
    case NCCL_ALGO_COLLNET_CHAIN:
    case NCCL_ALGO_COLLNET_DIRECT: return PERF_ALGO_COLLNET; /* one rank per node: the same */
    default: return -1;
  }
}

void tune_mask(float *table, int collnet) {
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++) {
      int perf = tune_perf_algo(a);
      if (perf < 0 || (perf == PERF_ALGO_COLLNET && (!collnet || p != NCCL_PROTO_SIMPLE)))
        table[a * NPROTO + p] = (float)NCCL_ALGO_PROTO_IGNORE;
    }
}

const char *tune_name(char *buf, size_t len, int nccl_algo, int nccl_proto) {
  if (nccl_algo < 0 || nccl_proto < 0) snprintf(buf, len, "none");
  else snprintf(buf, len, "%s/%s", braid_rule_algo_name(nccl_algo), braid_rule_proto_name(nccl_proto));
  return buf;
}

static void tune_quiet(void *arg, const char *source, int line, const char *msg) {
  (void)arg, (void)source, (void)line, (void)msg; /* the tuner warns about the file itself */
}

/* The fabric NCCL's model is evaluated with: BRAID_TUNER_CALIB's model_link_gbs and
 * model_nchannels when it records them (what its model_us were computed with), else
 * --link-gbs and --channels. src describes where they came from. */
static void tune_model_link(const struct perf_opts *o, double *gbs, int *nch, char *src,
                            size_t len) {
  const char *path = braid_param_env(BRAID_P_TUNER_CALIB);
  struct braid_calib c;
  char err[200];
  *gbs = o->link_gbs;
  *nch = o->nchannels;
  snprintf(src, len, "--link-gbs/--channels");
  if (!path || !*path || braid_calib_load(path, &c, tune_quiet, NULL, err, sizeof err) < 0) return;
  if (c.model_link_gbs > 0) *gbs = c.model_link_gbs;
  if (c.model_nchannels > 0) *nch = c.model_nchannels;
  if (c.model_link_gbs > 0 || c.model_nchannels > 0) snprintf(src, len, "from %s", path);
  braid_calib_free(&c);
}

/* One size: NCCL's table, its own pick, the tuner's edit, the pick. 0, or -1 (printed). */
static int tune_one(struct tune_plan *tp, int i, const struct braid_model *m,
                    struct tunerload *tl, int rank) {
  const struct perf_opts *o = tp->o;
  size_t bytes = tp->bytes[i];
  struct tune_choice *c = &tp->v[i];
  float table[NALGO * NPROTO];
  char name[64];
  braid_model_fill(m, ncclFuncAllReduce, bytes, 1, table, NALGO);
  tune_mask(table, tp->collnet);
  int a = -1, p = -1, nch = 0;
  braid_model_pick(table, NALGO, NPROTO, &a, &p); /* a, p stay -1 when nothing is selectable */
  c->nccl_algo = a, c->nccl_proto = p;
  /* NCCL asks nothing for an empty collective: it returns before choosing. */
  if (tl && bytes > 0 && tunerload_coll_info(tl, ncclFuncAllReduce, bytes, table, &nch)) return -1;
  if (braid_model_pick(table, NALGO, NPROTO, &a, &p)) {
    fprintf(stderr, "braid-perf: rank %d: no algorithm is selectable for %zu bytes (every "
            "entry IGNORE): NCCL would fail this allreduce\n", rank, bytes);
    return -1;
  }
  int perf = tune_perf_algo(a);
  if (perf < 0 || (perf == PERF_ALGO_COLLNET && (!tp->collnet || p != NCCL_PROTO_SIMPLE))) {
    fprintf(stderr, "braid-perf: rank %d: the tuner chose %s for %zu bytes, an entry NCCL's "
            "table left IGNORE here (braid-perf cannot run it)\n", rank,
            tune_name(name, sizeof name, a, p), bytes);
    return -1;
  }
  c->algo = a;
  c->proto = p;
  c->nch = nch > 0 ? (nch < PERF_MAX_CHANNELS ? nch : PERF_MAX_CHANNELS) : o->nchannels;
  if (perf != PERF_ALGO_COLLNET && c->nch > tp->max_nch) tp->max_nch = c->nch;
  return 0;
}

/* What every rank must have in common besides the choices. */
struct tune_head {
  uint64_t fingerprint; /* the tuner's inputs (auto), else 0 */
  double link_gbs;      /* the model's fabric */
  int32_t ok, nsteps, collnet, model_nch, algo;
  int32_t pad;
};

static int tune_head_same(const struct tune_head *x, const struct tune_head *y) {
  return x->fingerprint == y->fingerprint && x->link_gbs == y->link_gbs &&
         x->nsteps == y->nsteps && x->collnet == y->collnet && x->model_nch == y->model_nch &&
         x->algo == y->algo;
}

static int tune_choice_same(const struct tune_choice *x, const struct tune_choice *y) {
  return x->algo == y->algo && x->proto == y->proto && x->nch == y->nch;
}

/* Rank 0: which ranks' heads differ from its own, and how. */
static void tune_head_report(const struct tune_head *all, int n) {
  fprintf(stderr, "braid-perf: the ranks' tuning inputs differ; the run stops before any "
          "collective:\n");
  for (int k = 0; k < n; k++) {
    const struct tune_head *h = &all[k];
    if (k && tune_head_same(h, &all[0])) continue;
    fprintf(stderr, "  rank %d: --algo %s, tuner inputs fingerprint %016llx, model %g GB/s x %d "
            "channels, CollNet %s, %d sizes\n", k, perf_algo_name((enum perf_algo)h->algo),
            (unsigned long long)h->fingerprint, h->link_gbs, h->model_nch,
            h->collnet ? "on" : "off", h->nsteps);
  }
  fprintf(stderr, "  (BRAID_TUNER_MODE, NCCL_TUNER_CONFIG_FILE, BRAID_TUNER_CALIB and "
          "BRAID_TUNER_HEALTH must have the same contents on every rank, and the flags must "
          "match)\n");
}

/* Rank 0: the first size the ranks choose differently at, every rank's choice there. */
static void tune_choice_report(const struct tune_plan *tp, const struct tune_choice *all, int n) {
  int ns = tp->nsteps, bad = 0, first = -1;
  for (int i = 0; i < ns; i++)
    for (int k = 1; k < n; k++)
      if (!tune_choice_same(&all[(size_t)k * ns + i], &all[i])) {
        if (first < 0) first = i;
        bad++;
        break;
      }
  fprintf(stderr, "braid-perf: the ranks choose differently at %d of %d sizes; the run stops "
          "before any collective. At %zu bytes:\n", bad, ns, tp->bytes[first]);
  for (int k = 0; k < n; k++) {
    const struct tune_choice *c = &all[(size_t)k * ns + first];
    char name[64];
    if (k && tune_choice_same(c, &all[first])) continue;
    fprintf(stderr, "  rank %d: %s on %d channels\n", k, tune_name(name, sizeof name, c->algo,
            c->proto), c->nch);
  }
}

/* All-gathers the heads, then the plans; -1 on every rank when a rank failed (it said why)
 * or anything differs (rank 0 says how). */
static int tune_agree(struct tune_plan *tp, struct rdv *r, const struct tune_head *mine) {
  int n = r->nranks, failed = 0, differ = 0;
  struct tune_head *heads = calloc((size_t)n, sizeof *heads);
  struct tune_choice *all = calloc((size_t)n * (size_t)tp->nsteps, sizeof *all);
  if (!heads || !all || rdv_allgather(r, mine, heads, sizeof *mine)) failed = 1;
  for (int k = 0; !failed && k < n; k++)
    if (!heads[k].ok) failed = 1;
  for (int k = 1; !failed && !differ && k < n; k++)
    if (!tune_head_same(&heads[k], &heads[0])) {
      if (r->rank == 0) tune_head_report(heads, n);
      differ = 1;
    }
  if (!failed && !differ && rdv_allgather(r, tp->v, all, (size_t)tp->nsteps * sizeof *all))
    failed = 1;
  for (int i = 0; !failed && !differ && i < tp->nsteps; i++)
    for (int k = 1; !differ && k < n; k++)
      if (!tune_choice_same(&all[(size_t)k * tp->nsteps + i], &all[i])) {
        if (r->rank == 0) tune_choice_report(tp, all, n);
        differ = 1;
      }
  if (differ && r->rank != 0)
    fprintf(stderr, "braid-perf: rank %d: the ranks do not agree on the tuning (rank 0 says "
            "how)\n", r->rank);
  free(heads);
  free(all);
  return failed || differ ? -1 : 0;
}

/* The sweep's sizes, as bench runs them. */
static int tune_sizes(struct tune_plan *tp, int nranks) {
  const struct perf_opts *o = tp->o;
  int n = 0;
  for (size_t s = o->min_bytes; s <= o->max_bytes; s = bench_next(o, s)) n++;
  tp->bytes = calloc((size_t)n, sizeof *tp->bytes);
  tp->v = calloc((size_t)n, sizeof *tp->v);
  if (!tp->bytes || !tp->v) return -1;
  n = 0;
  for (size_t s = o->min_bytes; s <= o->max_bytes; s = bench_next(o, s))
    tp->bytes[n++] = bench_op_bytes(o, nranks, s);
  tp->nsteps = n;
  return 0;
}

int tune_plan_make(struct tune_plan *tp, const struct perf_opts *o, struct rdv *r,
                   uint64_t comm_id, int collnet) {
  memset(tp, 0, sizeof *tp);
  tp->o = o;
  tp->collnet = collnet;
  tp->max_nch = o->nchannels;
  int rank = r->rank, nranks = r->nranks, use_tuner = o->algo == PERF_ALGO_AUTO;
  struct tune_head head = {.ok = 1, .collnet = collnet, .algo = o->algo};
  char src[600], err[2048];
  tune_model_link(o, &head.link_gbs, &head.model_nch, src, sizeof src);
  if (tune_sizes(tp, nranks)) {
    fprintf(stderr, "braid-perf: rank %d: out of memory for the tuning plan\n", rank);
    head.ok = 0;
  }
  head.nsteps = tp->nsteps;
  ncclTunerConstants_v5_t k;
  braid_model_default_constants(&k);
  struct tunerload *tlp = &tp->tl;
  if (use_tuner && head.ok) {
    head.fingerprint = braid_tuner_fingerprint();
    ncclNvlDomainInfo_v5_t nvl = {nranks, 1, 1}; /* one GPU (rank) per node */
    if (tunerload_open(tlp, err, sizeof err)) {
      fprintf(stderr, "braid-perf: rank %d: --algo auto: cannot load the tuner plugin "
              "(NCCL_TUNER_PLUGIN=%s): %s\n", rank, getenv("NCCL_TUNER_PLUGIN"), err);
      head.ok = 0;
    } else {
      tp->tuner_open = 1;
      if (tunerload_init(tlp, comm_id, nranks, nranks, &nvl, &k)) head.ok = 0;
    }
  }
  struct braid_fabric f;
  struct braid_model *m = malloc(sizeof *m);
  if (!m) head.ok = 0;
  if (head.ok) { /* after the tuner's init: NCCL's model uses the constants it may edit */
    tune_fabric(&f, o, nranks, head.link_gbs, head.model_nch, collnet);
    braid_model_build(m, &k, &f);
  }
  for (int i = 0; head.ok && i < tp->nsteps; i++)
    if (tune_one(tp, i, m, use_tuner ? tlp : NULL, rank)) head.ok = 0;
  free(m);
  if (use_tuner && head.ok)
    snprintf(tp->describe, sizeof tp->describe, "tuner \"%s\" from %s (%s, inputs fingerprint "
             "%016llx); ", tlp->t->name ? tlp->t->name : "?", tlp->path, "ncclTunerPlugin_v5",
             (unsigned long long)head.fingerprint);
  if (!head.ok) tune_plan_close_tuner(tp);
  size_t at = strlen(tp->describe);
  snprintf(tp->describe + at, sizeof tp->describe - at, "NCCL's model: default constants, %d "
           "nodes x %g GB/s over %d channels (%s), CollNet %s", nranks, head.link_gbs,
           head.model_nch, src, collnet ? "offered" : "not offered");
  return tune_agree(tp, r, &head);
}

void tune_plan_close_tuner(struct tune_plan *tp) {
  if (!tp->tuner_open) return;
  tunerload_close(&tp->tl);
  tp->tuner_open = 0;
}

void tune_plan_free(struct tune_plan *tp) {
  tune_plan_close_tuner(tp);
  free(tp->bytes);
  free(tp->v);
  tp->bytes = NULL;
  tp->v = NULL;
}

int tune_variants(void *ctx, int step, size_t bytes, struct bench_variant *v) {
  const struct tune_plan *tp = ctx;
  if (step >= tp->nsteps || tp->bytes[step] != bytes) {
    fprintf(stderr, "braid-perf: internal error: the sweep and the tuning plan differ at step "
            "%d (%zu bytes)\n", step, bytes);
    _exit(2);
  }
  const struct tune_choice *c = &tp->v[step];
  char mine[64], nccl[64], ch[24] = "";
  memset(v, 0, sizeof *v);
  v->algo = (enum perf_algo)tune_perf_algo(c->algo);
  v->proto = (enum perf_proto)c->proto;
  v->nch = c->nch;
  if (c->nch != tp->o->nchannels) snprintf(ch, sizeof ch, " %dch", c->nch);
  snprintf(v->label, sizeof v->label, "%s%s (nccl: %s)", tune_name(mine, sizeof mine, c->algo,
           c->proto), ch, tune_name(nccl, sizeof nccl, c->nccl_algo, c->nccl_proto));
  return 1;
}
