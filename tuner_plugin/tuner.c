/* The braid tuner's one implementation behind every exported ABI version (see tuner.h). */
#include "tuner.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advice.h"
#include "agree.h"
#include "calib.h"
#include "log.h"
#include "model.h"

#define TUNER_BINS 64 /* log lines: floor(log2(nBytes)), 0 and 1 share bin 0 */
#define QBINS 256     /* model look-up: quarter octaves of nBytes */
#define NFUNC NCCL_NUM_FUNCTIONS
#define NALGO NCCL_NUM_ALGORITHMS
#define NPROTO NCCL_NUM_PROTOCOLS
/* A node counts as a straggler below this share of the healthy bandwidth. */
#define STRAGGLER_REL_BW 0.8

/* Whether NCCL_<name> is set (NCCL's own algorithm or protocol filter); read once per context. */
static int nccl_env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

struct braid_tuner {
  int version;
  uint64_t comm_id;
  int nranks, nnodes;
  struct braid_tuner_inputs in;
  struct braid_rules rules;
  int model_active;
  int calibrated;
  double hmin;            /* slowest node's relative bandwidth (1: none slow) */
  char hname[64];
  /* The model's look-up tables, filled once at init; all that getCollInfo reads. */
  float ratio[NFUNC][QBINS][NALGO][NPROTO]; /* calibration: measured / NCCL-predicted (1: none) */
  float lat_us[NFUNC][NALGO][NPROTO];  /* latency part of an entry's time */
  float link_us_per_byte[NFUNC][NALGO]; /* straggler: slow node's link time per byte; 0: none */
  float bw_slowdown;                   /* straggler: 1/hmin, the most a time's byte part stretches; 1: none */
  /* Which (coll, size bin) have had their INFO line; only logging reads it. */
  _Atomic uint64_t logged[NFUNC];
  struct braid_advice *advice; /* the process's, shared by its communicators */
  int nccl_filter;             /* NCCL_ALGO or NCCL_PROTO set (v1/v2 answers stay NCCL's) */
};

/* Live telemetry is process-wide, so one advice object serves every communicator of the
 * process: created with the first context, written when the last one is destroyed. */
static pthread_mutex_t advice_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_advice *advice_shared;
static int advice_refs;

static struct braid_advice *advice_get(uint64_t comm_id, int nranks, int nnodes) {
  pthread_mutex_lock(&advice_lock);
  if (!advice_shared) advice_shared = braid_advice_create(comm_id, nranks, nnodes);
  if (advice_shared) advice_refs++;
  struct braid_advice *a = advice_shared;
  pthread_mutex_unlock(&advice_lock);
  return a;
}

static void advice_put(struct braid_advice *a) {
  if (!a) return;
  pthread_mutex_lock(&advice_lock);
  if (--advice_refs == 0) {
    braid_advice_finish(advice_shared);
    advice_shared = NULL;
  }
  pthread_mutex_unlock(&advice_lock);
}

static int clamp_int(size_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

static int qbin(uint64_t n) {
  if (n < 2) return 0;
  int l = 63 - __builtin_clzll(n);
  int frac = l >= 2 ? (int)((n >> (l - 2)) & 3) : (int)((n << (2 - l)) & 3);
  return l * 4 + frac;
}

/* The smallest size of quarter-octave bin b. */
static uint64_t qbin_bytes(int b) {
  int l = b / 4, frac = b % 4;
  if (l >= 63) return UINT64_MAX;
  uint64_t base = 1ull << l;
  return base + (l >= 2 ? (base >> 2) * (uint64_t)frac : 0);
}

/* Bytes a node's link carries per direction, per byte of nBytes, for algo (NCCL's shapes). */
static double link_volume(int coll, int algo, int nranks) {
  double n = nranks;
  if (coll == ncclFuncAllReduce) {
    switch (algo) {
      case NCCL_ALGO_RING: return 2.0 * (n - 1) / n;
      case NCCL_ALGO_TREE: return 2.0; /* an inner node of one of the two trees */
      case NCCL_ALGO_NVLS_TREE: return 2.0;
      default: return 1.0; /* CollNet, NVLS: each node sends and receives its data once */
    }
  }
  if (coll == ncclFuncAllGather || coll == ncclFuncReduceScatter) return (n - 1) / n;
  return 1.0; /* broadcast, reduce: the ring's pipeline carries everything once */
}

static void tuner_warn(void *arg, const char *source, int line, const char *msg) {
  (void)arg;
  if (line > 0)
    BRAID_WARN("tuner: %s:%d: %s", source, line, msg);
  else
    BRAID_WARN("tuner: %s: %s", source, msg);
}

/* Loads calibration and health, fills the model's tables. */
static void model_init(struct braid_tuner *t, const ncclTunerConstants_v5_t *constants) {
  struct braid_calib calib = {0};
  struct braid_health health = {0};
  char err[200] = "";
  int have_calib = 0, have_health = 0;
  if (t->in.calib_path[0]) {
    if (braid_calib_load(t->in.calib_path, &calib, tuner_warn, NULL, err, sizeof err) < 0) {
      BRAID_WARN("tuner: calibration %s not used: %s", t->in.calib_path, err);
    } else if (calib.nranks != t->nranks || calib.nnodes != t->nnodes) {
      BRAID_WARN("tuner: calibration %s was measured with %d ranks on %d nodes; this "
                 "communicator has %d on %d: not used (calibrate at this size with braid-perf "
                 "--calibrate)",
                 t->in.calib_path, calib.nranks, calib.nnodes, t->nranks, t->nnodes);
    } else if (calib.n) {
      have_calib = 1;
    }
  }
  if (t->in.health_path[0]) {
    if (braid_health_load(t->in.health_path, &health, tuner_warn, NULL, err, sizeof err) < 0)
      BRAID_WARN("tuner: health file %s not used: %s", t->in.health_path, err);
    else
      have_health = 1;
  }
  const char *slow = NULL;
  t->hmin = have_health ? braid_health_min(&health, &slow) : 1.0;
  if (slow) snprintf(t->hname, sizeof t->hname, "%s", slow);
  int straggler = t->hmin < STRAGGLER_REL_BW && t->nnodes > 1;
  t->calibrated = have_calib;
  t->model_active = have_calib || straggler;

  /* Latencies: measured where calibrated, else NCCL's model from its constants. */
  ncclTunerConstants_v5_t defc;
  if (!constants) braid_model_default_constants(&defc), constants = &defc;
  struct braid_fabric fab;
  int ppn = t->nnodes > 0 ? t->nranks / t->nnodes : 1;
  braid_fabric_default(&fab, t->nnodes, ppn, 25.0, 8);
  fab.collnet = fab.nvswitch = fab.nvls = 1;
  struct braid_model *m = malloc(sizeof *m);
  if (m) braid_model_build(m, constants, &fab);
  for (int c = 0; c < NFUNC; c++)
    for (int a = 0; a < NALGO; a++)
      for (int p = 0; p < NPROTO; p++) {
        double lat = have_calib ? braid_calib_latency(&calib, c, a, p) : 0;
        if (lat <= 0 && m) lat = braid_model_latency(m, c, a, p, 1, 1);
        t->lat_us[c][a][p] = (float)lat;
      }
  free(m);

  /* Calibration ratios per quarter octave and entry (a protocol without points of its own
   * borrows its algorithm's Simple points); entries of algorithms without points get the
   * geometric mean of the calibrated ones at that size, so the correction favours nothing
   * unmeasured. */
  for (int c = 0; c < NFUNC; c++)
    for (int b = 0; b < QBINS; b++) {
      double sum = 0, r[NALGO][NPROTO];
      int cnt = 0;
      for (int a = 0; a < NALGO; a++)
        for (int p = 0; p < NPROTO; p++) {
          r[a][p] = have_calib ? braid_calib_ratio(&calib, c, a, p, qbin_bytes(b)) : 0;
          if (r[a][p] > 0) sum += log(r[a][p]), cnt++;
        }
      double mean = cnt ? exp(sum / cnt) : 1.0;
      for (int a = 0; a < NALGO; a++)
        for (int p = 0; p < NPROTO; p++)
          t->ratio[c][b][a][p] = (float)(r[a][p] > 0 ? r[a][p] : mean);
    }

  /* The straggler charge. */
  t->bw_slowdown = 1.0f;
  if (straggler) {
    t->bw_slowdown = (float)(1.0 / t->hmin);
    if (have_calib && calib.link_gbs > 0) {
      double bytes_per_us = calib.link_gbs * 1000.0 * t->hmin;
      for (int c = 0; c < NFUNC; c++)
        for (int a = 0; a < NALGO; a++)
          t->link_us_per_byte[c][a] = (float)(link_volume(c, a, t->nranks) / bytes_per_us);
    }
  }
  BRAID_INFO(NCCL_INIT | NCCL_TUNING,
             "tuner: model %s: calibration %s%s, health %s (slowest node %s at %.0f%%%s)",
             t->model_active ? "on" : "off", have_calib ? t->in.calib_path : "none",
             have_calib && calib.link_gbs > 0 ? "" : have_calib ? " (no link_gbs)" : "",
             have_health ? t->in.health_path : "none", slow ? slow : "-", t->hmin * 100,
             straggler ? ", charged" : have_health ? ", not slow enough to matter" : "");
  braid_calib_free(&calib);
  braid_health_free(&health);
}

void braid_tuner_create_from(struct braid_tuner **out, const struct braid_tuner_inputs *in,
                             int version, uint64_t comm_id, size_t nranks, size_t nnodes,
                             const ncclTunerConstants_v5_t *constants) {
  *out = NULL;
  struct braid_tuner *t = calloc(1, sizeof *t);
  if (!t) {
    BRAID_WARN("tuner: out of memory creating the context; NCCL's tuning is left unchanged");
    return;
  }
  t->in = *in;
  t->version = version;
  t->comm_id = comm_id;
  t->nranks = clamp_int(nranks);
  t->nnodes = clamp_int(nnodes);
  t->hmin = 1.0;
  t->nccl_filter = nccl_env_set("NCCL_ALGO") || nccl_env_set("NCCL_PROTO");
  for (int i = 0; i < NFUNC; i++) atomic_init(&t->logged[i], 0);
  if (!in->mode_valid)
    BRAID_WARN("tuner: BRAID_TUNER_MODE is not one of auto, rules, model, off; using auto");
  int nwarn = 0;
  if (t->in.mode == BRAID_TUNER_AUTO || t->in.mode == BRAID_TUNER_RULES) {
    nwarn = braid_rules_load(t->in.rules_path, &t->rules, NULL, NULL);
    if (nwarn < 0) {
      BRAID_WARN("tuner: out of memory reading %s; no rules", t->in.rules_path);
      nwarn = 0;
    }
  }
  /* v1 and v2 pass no cost table, so only rules can decide there. */
  if (version >= 3 && (t->in.mode == BRAID_TUNER_AUTO || t->in.mode == BRAID_TUNER_MODEL))
    model_init(t, constants);
  t->advice = advice_get(comm_id, t->nranks, t->nnodes);
  BRAID_INFO(NCCL_INIT | NCCL_TUNING,
             "tuner: NCCL uses ncclTunerPlugin_v%d; mode %s; rules file %s: %zu rules loaded%s "
             "(commId 0x%llx, nRanks %d, nNodes %d, inputs fingerprint %016llx)",
             version, braid_tuner_mode_name(t->in.mode), t->in.rules_path, t->rules.n,
             nwarn ? ", with warnings" : "", (unsigned long long)comm_id, t->nranks, t->nnodes,
             (unsigned long long)t->in.fingerprint);
  *out = t;
}

int braid_tuner_create(struct braid_tuner **out, int version, uint64_t comm_id, size_t nranks,
                       size_t nnodes, const ncclTunerConstants_v5_t *constants) {
  struct braid_tuner_inputs in;
  char why[1600];
  *out = NULL;
  braid_tuner_inputs_read(&in);
  /* v1 and v2 pass no cost table, so only rules can decide there: the calibration and health
   * files are not this context's inputs (the fingerprint still covers them, as every rank's). */
  if (version < 3) in.calib_path[0] = in.health_path[0] = 0;
  enum braid_agree a = braid_tuner_agree(&in, why, sizeof why);
  if (a == BRAID_AGREE_REFUSE) {
    BRAID_WARN("tuner: %s; refusing this communicator, since ranks that choose differently "
               "hang inside NCCL", why);
    return -1;
  }
  if (a == BRAID_AGREE_USE) {
    BRAID_INFO(NCCL_INIT | NCCL_TUNING, "tuner: %s", why);
  } else { /* no file decides: NCCL's choice */
    if (a == BRAID_AGREE_UNPINNED) BRAID_WARN_ONCE("tuner: %s", why);
    in.mode = BRAID_TUNER_OFF;
  }
  in.fingerprint = braid_tuner_agreed_fingerprint(&in, a);
  braid_tuner_create_from(out, &in, version, comm_id, nranks, nnodes, constants);
  return 0;
}

void braid_tuner_destroy(struct braid_tuner *t) {
  if (!t) return;
  advice_put(t->advice);
  braid_rules_free(&t->rules);
  free(t);
}

size_t braid_tuner_rule_count(const struct braid_tuner *t) { return t ? t->rules.n : 0; }
int braid_tuner_model_active(const struct braid_tuner *t) { return t && t->model_active; }
struct braid_advice *braid_tuner_advice(const struct braid_tuner *t) { return t ? t->advice : NULL; }
uint64_t braid_tuner_inputs_fingerprint(const struct braid_tuner *t) {
  return t ? t->in.fingerprint : 0;
}

const struct braid_rule *braid_tuner_decide(const struct braid_tuner *t, int coll,
                                            size_t nbytes, int pipe_ops, int reg_buff) {
  if (!t || t->rules.n == 0 || t->in.mode == BRAID_TUNER_OFF || t->in.mode == BRAID_TUNER_MODEL)
    return NULL;
  struct braid_rule_query q = {coll, (uint64_t)nbytes, t->nnodes, t->nranks, pipe_ops,
                               reg_buff};
  return braid_rules_match(&t->rules, &q);
}

static int size_bin(size_t nbytes) {
  return nbytes > 1 ? 63 - __builtin_clzll((unsigned long long)nbytes) : 0;
}

/* Whether this (coll, size bin) has not been logged yet in this context (and marks it). */
static int first_in_bin(struct braid_tuner *t, int coll, size_t nbytes) {
  if (coll < 0 || coll >= NFUNC) return 0;
  uint64_t bit = 1ull << size_bin(nbytes);
  return !(atomic_fetch_or(&t->logged[coll], bit) & bit);
}

static void log_rule(struct braid_tuner *t, int coll, size_t nbytes, const struct braid_rule *r,
                     const char *outcome) {
  if (!first_in_bin(t, coll, nbytes)) return;
  BRAID_INFO(NCCL_TUNING,
             "tuner: %s of %zu B (size bin 2^%d): rule %s:%d (%s/%s, channels %d) %s",
             braid_rule_coll_name(coll), nbytes, size_bin(nbytes), t->in.rules_path, r->line,
             braid_rule_algo_name(r->algo), braid_rule_proto_name(r->proto), r->channels,
             outcome);
}

static void why_reset(struct braid_tuner_why *w, const float *table, int num_algo,
                      int num_proto) {
  memset(w, 0, sizeof *w);
  w->rule_line = -1;
  w->algo = w->proto = w->nccl_algo = w->nccl_proto = -1;
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++) w->predicted[a][p] = (float)NCCL_ALGO_PROTO_IGNORE;
  if (table && braid_model_pick(table, num_algo, num_proto, &w->nccl_algo, &w->nccl_proto))
    w->nccl_algo = w->nccl_proto = -1;
  w->algo = w->nccl_algo;
  w->proto = w->nccl_proto;
}

/* The model's prediction for one available entry (µs): NCCL's time corrected by the
 * calibration (*calibrated), then charged for the slowest node's link. */
static float predict(const struct braid_tuner *t, int coll, int a, int p, float ratio,
                     float nccl_us, size_t nbytes, float *calibrated) {
  float v = nccl_us * ratio;
  *calibrated = v;
  float lat = t->lat_us[coll][a][p];
  if (lat > v) lat = v;
  if (t->bw_slowdown <= 1.0f) return v;
  /* The part of the time spent moving bytes (calibrated time above the latency) stretches to
   * what the slow link needs for the bytes this algorithm pushes through it, but never by more
   * than the link slowed down: a size the healthy calibration shows latency-bound stays so. */
  float bw = v - lat, most = bw * t->bw_slowdown;
  float need = (float)nbytes * t->link_us_per_byte[coll][a];
  if (need < bw) need = bw;
  if (t->link_us_per_byte[coll][a] <= 0 || need > most) need = most;
  return lat + need;
}

/* Runs the model over a table; returns 1 when it overrides NCCL's pick (w->algo/proto set). */
static int model_decide(const struct braid_tuner *t, int coll, size_t nbytes, const float *table,
                        int num_algo, int num_proto, struct braid_tuner_why *w) {
  if (coll < 0 || coll >= NFUNC || w->nccl_algo < 0) return 0;
  float best = 3.6e9f, best_plain = 3.6e9f;
  int ba = -1, bp = -1, pa = -1, pp = -1;
  int na = num_algo < NALGO ? num_algo : NALGO, np = num_proto < NPROTO ? num_proto : NPROTO;
  const float(*ratio)[NPROTO] = t->ratio[coll][qbin(nbytes)];
  for (int a = 0; a < na; a++)
    for (int p = 0; p < np; p++) {
      float v = table[a * num_proto + p];
      if (v == (float)NCCL_ALGO_PROTO_IGNORE || v < 0) continue;
      float plain;
      float pred = predict(t, coll, a, p, ratio[a][p], v, nbytes, &plain);
      w->predicted[a][p] = pred;
      if (pred < best) best = pred, ba = a, bp = p;
      if (plain < best_plain) best_plain = plain, pa = a, pp = p;
    }
  w->model_ran = 1;
  w->best_algo = ba, w->best_proto = bp, w->best_us = best;
  if (ba < 0 || w->nccl_algo >= na || w->nccl_proto >= np) return 0;
  w->nccl_us = w->predicted[w->nccl_algo][w->nccl_proto];
  int override = !(ba == w->nccl_algo && bp == w->nccl_proto) &&
                 best < w->nccl_us * (1.0f - (float)BRAID_TUNER_MARGIN);
  if (override) w->algo = ba, w->proto = bp;
  /* The slow node mattered when the uncharged prediction would have picked otherwise. */
  w->straggler = t->hmin < STRAGGLER_REL_BW && pa >= 0 && (pa != w->algo || pp != w->proto);
  return override;
}

/* Words for a model decision (kept off the hot path: only for a caller's why and the log). */
static void model_reason(const struct braid_tuner *t, struct braid_tuner_why *w) {
  char slow[128] = "";
  if (w->straggler)
    snprintf(slow, sizeof slow, "; node %s at %.0f%% of the healthy bandwidth decided it", t->hname,
             t->hmin * 100);
  if (!w->model_ran || w->best_algo < 0 || w->nccl_algo < 0) {
    snprintf(w->reason, sizeof w->reason, "model: no usable entry");
  } else if (w->source == BRAID_TUNER_SRC_MODEL) {
    snprintf(w->reason, sizeof w->reason,
             "model picks %s/%s (predicted %.1f us) over NCCL's %s/%s (%.1f us)%s",
             braid_rule_algo_name(w->algo), braid_rule_proto_name(w->proto), w->best_us,
             braid_rule_algo_name(w->nccl_algo), braid_rule_proto_name(w->nccl_proto), w->nccl_us,
             slow);
  } else if (w->best_algo == w->nccl_algo && w->best_proto == w->nccl_proto) {
    snprintf(w->reason, sizeof w->reason, "model agrees with NCCL's %s/%s (predicted %.1f us)%s",
             braid_rule_algo_name(w->nccl_algo), braid_rule_proto_name(w->nccl_proto), w->nccl_us,
             slow);
  } else {
    snprintf(w->reason, sizeof w->reason,
             "model keeps NCCL's %s/%s (predicted %.1f us; %s/%s at %.1f us is not %.0f%% better)%s",
             braid_rule_algo_name(w->nccl_algo), braid_rule_proto_name(w->nccl_proto), w->nccl_us,
             braid_rule_algo_name(w->best_algo), braid_rule_proto_name(w->best_proto), w->best_us,
             BRAID_TUNER_MARGIN * 100, slow);
  }
}

void braid_tuner_apply_table(struct braid_tuner *t, int coll, size_t nbytes, int pipe_ops,
                             int reg_buff, float *table, int num_algo, int num_proto,
                             int *nchannels, struct braid_tuner_why *why) {
  struct braid_tuner_why local;
  struct braid_tuner_why *w = why ? why : &local;
  if (t) braid_advice_tick(t->advice);
  if (!t || t->in.mode == BRAID_TUNER_OFF) {
    if (why) why_reset(why, NULL, 0, 0);
    return;
  }
  if (!table || num_algo <= 0 || num_proto <= 0) {
    BRAID_WARN_ONCE("tuner: getCollInfo called without a usable cost table (%p, %d x %d); "
                    "NCCL's choice is kept",
                    (void *)table, num_algo, num_proto);
    if (why) why_reset(why, NULL, 0, 0);
    return;
  }
  const struct braid_rule *r = braid_tuner_decide(t, coll, nbytes, pipe_ops, reg_buff);
  if (!r && !t->model_active && !why) return; /* the common case: nothing to decide */
  why_reset(w, table, num_algo, num_proto);
  if (r) {
    w->rule_line = r->line;
    if (r->algo >= num_algo || r->proto >= num_proto) {
      if (why) snprintf(w->reason, sizeof w->reason, "rule line %d is outside NCCL's table", r->line);
      log_rule(t, coll, nbytes, r, "is outside NCCL's cost table; NCCL's choice kept");
      return;
    }
    float *entry = &table[(size_t)r->algo * (size_t)num_proto + (size_t)r->proto];
    if (*entry == (float)NCCL_ALGO_PROTO_IGNORE) {
      if (why) snprintf(w->reason, sizeof w->reason, "rule line %d names an unavailable entry", r->line);
      log_rule(t, coll, nbytes, r, "is not available (IGNORE); NCCL's choice kept");
      return;
    }
    *entry = 0.0f;
    w->source = BRAID_TUNER_SRC_RULE;
    w->algo = r->algo;
    w->proto = r->proto;
    if (r->channels != -1 && nchannels) *nchannels = w->nchannels = r->channels;
    if (why) snprintf(w->reason, sizeof w->reason, "rule line %d", r->line);
    log_rule(t, coll, nbytes, r, "applied");
    return;
  }
  if (!t->model_active) {
    if (why) snprintf(w->reason, sizeof w->reason, "no rule matches and the model has no inputs");
    return;
  }
  if (model_decide(t, coll, nbytes, table, num_algo, num_proto, w)) {
    table[(size_t)w->algo * (size_t)num_proto + (size_t)w->proto] = 0.0f;
    w->source = BRAID_TUNER_SRC_MODEL;
  }
  int log_it = first_in_bin(t, coll, nbytes);
  if (why || log_it) model_reason(t, w);
  if (log_it)
    BRAID_INFO(NCCL_TUNING, "tuner: %s of %zu B (size bin 2^%d): %s", braid_rule_coll_name(coll),
               nbytes, size_bin(nbytes), w->reason);
}

/* Why NCCL 2.19-2.21, which use a v1/v2 answer without any check (an unavailable pair runs
 * anyway, or indexes past NCCL's tables), could not safely run algo/proto for coll; NULL when
 * it can. The pairs NCCL's own model (graph/tuning.cc of those versions) gives a time to, less
 * what a v1/v2 tuner cannot see: NVSwitch presence (CollNetDirect), whether LL128 is enabled on
 * this hardware, the node count under v1, and NCCL_ALGO/NCCL_PROTO, which such an answer would
 * silently override. */
static const char *v2_unsafe(const struct braid_tuner *t, int coll, int algo, int proto,
                             int collnet_support, int nvls_support) {
  if (t->nccl_filter)
    return "NCCL_ALGO or NCCL_PROTO is set, and NCCL 2.19-2.21 would not apply it to a tuner's answer";
  if (algo < NCCL_ALGO_TREE || algo > NCCL_ALGO_NVLS_TREE) return "the algorithm is unknown to NCCL 2.19-2.21";
  if (proto < NCCL_PROTO_LL || proto > NCCL_PROTO_SIMPLE) return "the protocol is unknown";
  if (algo >= NCCL_ALGO_COLLNET_DIRECT && proto != NCCL_PROTO_SIMPLE)
    return "CollNet and NVLS run the Simple protocol only";
  if (proto == NCCL_PROTO_LL128)
    return "NCCL enables LL128 only on some hardware, which a v1/v2 tuner cannot see";
  switch (coll) {
    case ncclFuncBroadcast:
    case ncclFuncReduce:
      return algo == NCCL_ALGO_RING ? NULL : "NCCL runs broadcast and reduce as a ring only";
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
      if (algo == NCCL_ALGO_RING) return NULL;
      if (algo == NCCL_ALGO_NVLS && nvls_support && t->nnodes == 1) return NULL;
      return "allgather and reducescatter run as a ring, or NVLS on one known node";
    case ncclFuncAllReduce:
      switch (algo) {
        case NCCL_ALGO_TREE:
        case NCCL_ALGO_RING:
          return NULL;
        case NCCL_ALGO_COLLNET_CHAIN:
          return collnet_support ? NULL : "no CollNet support";
        case NCCL_ALGO_COLLNET_DIRECT:
          return "CollNetDirect needs an NVSwitch, which a v1/v2 tuner cannot see";
        case NCCL_ALGO_NVLS:
          return nvls_support && (t->nnodes == 1 || (t->nnodes > 1 && collnet_support))
                     ? NULL : "no NVLS support (or several nodes without CollNet)";
        default: /* NVLS_TREE */
          return nvls_support && t->nnodes > 1 ? NULL : "NVLS tree needs NVLS and several known nodes";
      }
    default:
      return "NCCL does not ask a tuner about this operation";
  }
}

void braid_tuner_apply_v2(struct braid_tuner *t, int coll, size_t nbytes, int collnet_support,
                          int nvls_support, int pipe_ops, int *algorithm, int *protocol,
                          int *nchannels) {
  if (t) braid_advice_tick(t->advice);
  const struct braid_rule *r = braid_tuner_decide(t, coll, nbytes, pipe_ops, -1);
  if (!r) return;
  if (!algorithm || !protocol) {
    BRAID_WARN_ONCE("tuner: v%d getCollInfo called without algorithm/protocol; NCCL's choice "
                    "is kept", t->version);
    return;
  }
  const char *why = v2_unsafe(t, coll, r->algo, r->proto, collnet_support, nvls_support);
  if (why) {
    char outcome[200];
    snprintf(outcome, sizeof outcome, "not applied (%s); NCCL's choice kept", why);
    log_rule(t, coll, nbytes, r, outcome);
    return;
  }
  *algorithm = r->algo;
  *protocol = r->proto;
  /* NCCL 2.19-2.21 run a tuner's channel count unchecked, and a count above the
   * communicator's channels (which a v1/v2 tuner is not told) runs channels that do not exist. */
  if (r->channels != -1 && nchannels)
    BRAID_WARN_ONCE("tuner: %s:%d: the channel count of a rule is not applied through tuner v%d "
                    "(NCCL 2.19-2.21 do not check it against the communicator's channels)",
                    t->in.rules_path, r->line, t->version);
  log_rule(t, coll, nbytes, r, "applied");
}

void braid_tuner_sizes_unknown(struct braid_tuner *t) {
  if (t) t->nranks = t->nnodes = -1;
}
