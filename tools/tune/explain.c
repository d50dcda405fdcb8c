/* braid-tune explain: NCCL's cost table filled for a fabric (model.h), handed to the braid tuner
 * exactly as NCCL would hand it (tuner.h), and the decision shown with its reason. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "calib.h"
#include "chart.h"
#include "inputs.h"
#include "model.h"
#include "param.h"
#include "rules.h"
#include "tune.h"
#include "tuner.h"

#define NALGO NCCL_NUM_ALGORITHMS
#define NPROTO NCCL_NUM_PROTOCOLS
#define MAX_SIZES 256
#define ABI_VERSION 5

struct opts {
  int nranks, nnodes, ppn; /* 0: not given */
  const char *calib, *health, *rules, *mode, *png;
  int coll;
  uint64_t minb, maxb;
  int factor;
  double link_gbs;
  int link_set, channels, channels_set;
  int collnet;
};

/* One size's outcome. */
struct row {
  uint64_t bytes;
  int na, np;            /* NCCL's pick (-1: none) */
  double nccl_us;        /* NCCL's predicted time of its pick */
  int ba, bp;            /* braid's pick (-1: none) */
  double braid_us;       /* predicted time of braid's pick (see curve) */
  double nccl_pred_us;   /* the same prediction for NCCL's pick (chart) */
  enum braid_tuner_source src;
  char reason[sizeof ((struct braid_tuner_why *)0)->reason];
  double curve[NALGO];   /* best protocol's predicted time per algorithm; < 0: unavailable */
};

void braid_tune_explain_usage(FILE *f) {
  fprintf(f,
          "usage: braid-tune explain --nranks N [--nnodes M] [options]\n"
          "\n"
          "For each message size: NCCL's cost table as NCCL fills it (its model, default\n"
          "constants, the fabric below), NCCL's own pick, what the braid tuner picks and why.\n"
          "Tuner inputs default to the environment (NCCL_TUNER_CONFIG_FILE, BRAID_TUNER_MODE,\n"
          "BRAID_TUNER_CALIB, BRAID_TUNER_HEALTH); the flags override it.\n"
          "\n"
          "communicator:\n"
          "  --nranks N           ranks (default: nnodes * ppn)\n"
          "  --nnodes M           nodes (default 1)\n"
          "  --ppn P              ranks per node (default: nranks / nnodes)\n"
          "tuner inputs:\n"
          "  --mode WORD          auto, rules, model or off (BRAID_TUNER_MODE)\n"
          "  --rules FILE         NCCL example-tuner rules CSV (NCCL_TUNER_CONFIG_FILE)\n"
          "  --calib FILE         calibration from braid-perf --calibrate (BRAID_TUNER_CALIB)\n"
          "  --health FILE        health file from braid-tune health (BRAID_TUNER_HEALTH)\n"
          "collective and sizes:\n"
          "  --coll NAME          broadcast, reduce, allgather, reducescatter or allreduce\n"
          "                       (default allreduce)\n"
          "  -b, --minbytes SIZE  first size (default 4K; K, M, G suffixes are binary)\n"
          "  -e, --maxbytes SIZE  last size (default 256M)\n"
          "  -f, --stepfactor F   multiply the size by F each row (default 2)\n"
          "fabric NCCL's model sees:\n"
          "  --link-gbs X         network GB/s (bytes) per node (default 12.5, or the\n"
          "                       calibration's model_link_gbs)\n"
          "  --channels C         channels (default 8, or the calibration's model_nchannels)\n"
          "  --collnet            a CollNet plugin and NVSwitch are present (CollNet algorithms)\n"
          "output:\n"
          "  --png FILE           also draw predicted time per algorithm (log-log) with the\n"
          "                       choices marked\n"
          "  -h, --help           this text\n"
          "\n"
          "exit status: 0 explained, 1 an input could not be used, 2 bad usage\n");
}

static int bad(const char *flag, const char *v, const char *what) {
  fprintf(stderr, "braid-tune explain: %s \"%s\": %s\n", flag, v, what);
  return -1;
}

static int parse_int(const char *flag, const char *s, int min, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > 1 << 24) {
    char what[64];
    snprintf(what, sizeof what, "expected an integer in [%d, %d]", min, 1 << 24);
    return bad(flag, s, what);
  }
  *out = (int)v;
  return 0;
}

static int parse_size(const char *flag, const char *s, uint64_t *out) {
  struct braid_param_def def = {.name = flag, .type = BRAID_PARAM_SIZE, .min = 1,
                                .max = (int64_t)1 << 40};
  char err[200];
  int64_t v;
  if (braid_param_parse(&def, s, &v, err, sizeof err) != 0) {
    fprintf(stderr, "braid-tune explain: %s\n", err);
    return -1;
  }
  *out = (uint64_t)v;
  return 0;
}

static int parse_gbs(const char *flag, const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 1e5)
    return bad(flag, s, "expected GB/s, a number in (0, 100000]");
  *out = v;
  return 0;
}

static int parse_coll(const char *s, int *out) {
  for (int c = 0; c < BRAID_MODEL_FUNCS; c++)
    if (strcasecmp(s, braid_rule_coll_name(c)) == 0) return *out = c, 0;
  return bad("--coll", s, "expected broadcast, reduce, allgather, reducescatter or allreduce");
}

static int parse_mode(const char *s) {
  for (int m = BRAID_TUNER_AUTO; m <= BRAID_TUNER_OFF; m++)
    if (strcasecmp(s, braid_tuner_mode_name((enum braid_tuner_mode)m)) == 0) return 0;
  return bad("--mode", s, "expected auto, rules, model or off");
}

enum { O_NRANKS = 256, O_NNODES, O_PPN, O_CALIB, O_HEALTH, O_RULES, O_MODE, O_COLL, O_LINK,
       O_CHANNELS, O_COLLNET, O_PNG };

/* Returns 0, 1 when --help was printed, -1 on bad usage. */
static int parse_opts(int argc, char **argv, struct opts *o) {
  static const struct option lo[] = {
      {"nranks", required_argument, NULL, O_NRANKS},
      {"nnodes", required_argument, NULL, O_NNODES},
      {"ppn", required_argument, NULL, O_PPN},
      {"calib", required_argument, NULL, O_CALIB},
      {"health", required_argument, NULL, O_HEALTH},
      {"rules", required_argument, NULL, O_RULES},
      {"mode", required_argument, NULL, O_MODE},
      {"coll", required_argument, NULL, O_COLL},
      {"minbytes", required_argument, NULL, 'b'},
      {"maxbytes", required_argument, NULL, 'e'},
      {"stepfactor", required_argument, NULL, 'f'},
      {"link-gbs", required_argument, NULL, O_LINK},
      {"channels", required_argument, NULL, O_CHANNELS},
      {"collnet", no_argument, NULL, O_COLLNET},
      {"png", required_argument, NULL, O_PNG},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  memset(o, 0, sizeof *o);
  o->coll = ncclFuncAllReduce;
  o->minb = 4096;
  o->maxb = 256u << 20;
  o->factor = 2;
  o->link_gbs = 12.5;
  o->channels = 8;
  int c, rc = 0;
  optind = 1;
  while (rc == 0 && (c = getopt_long(argc, argv, "b:e:f:h", lo, NULL)) != -1) {
    switch (c) {
      case O_NRANKS: rc = parse_int("--nranks", optarg, 1, &o->nranks); break;
      case O_NNODES: rc = parse_int("--nnodes", optarg, 1, &o->nnodes); break;
      case O_PPN: rc = parse_int("--ppn", optarg, 1, &o->ppn); break;
      case O_CALIB: o->calib = optarg; break;
      case O_HEALTH: o->health = optarg; break;
      case O_RULES: o->rules = optarg; break;
      case O_MODE: o->mode = optarg, rc = parse_mode(optarg); break;
      case O_COLL: rc = parse_coll(optarg, &o->coll); break;
      case 'b': rc = parse_size("-b", optarg, &o->minb); break;
      case 'e': rc = parse_size("-e", optarg, &o->maxb); break;
      case 'f': rc = parse_int("-f", optarg, 2, &o->factor); break;
      case O_LINK: rc = parse_gbs("--link-gbs", optarg, &o->link_gbs), o->link_set = 1; break;
      case O_CHANNELS:
        rc = parse_int("--channels", optarg, 1, &o->channels), o->channels_set = 1;
        if (rc == 0 && o->channels > 64) rc = bad("--channels", optarg, "at most 64");
        break;
      case O_COLLNET: o->collnet = 1; break;
      case O_PNG: o->png = optarg; break;
      case 'h': braid_tune_explain_usage(stdout); return 1;
      default: rc = -1; break;
    }
  }
  if (rc) return -1;
  if (optind < argc) {
    fprintf(stderr, "braid-tune explain: unexpected argument \"%s\"\n", argv[optind]);
    return -1;
  }
  if (!o->nnodes) o->nnodes = 1;
  if (!o->nranks && !o->ppn) {
    fprintf(stderr, "braid-tune explain: give --nranks (or --ppn)\n");
    return -1;
  }
  if (!o->nranks) o->nranks = o->nnodes * o->ppn;
  if (!o->ppn) {
    if (o->nranks % o->nnodes) {
      fprintf(stderr, "braid-tune explain: --nranks %d is not a multiple of --nnodes %d (give "
                      "--ppn for an uneven layout's largest node)\n",
              o->nranks, o->nnodes);
      return -1;
    }
    o->ppn = o->nranks / o->nnodes;
  }
  if (o->nranks != o->nnodes * o->ppn) {
    fprintf(stderr, "braid-tune explain: --nranks %d differs from --nnodes %d x --ppn %d\n",
            o->nranks, o->nnodes, o->ppn);
    return -1;
  }
  if (o->minb > o->maxb) {
    fprintf(stderr, "braid-tune explain: -b is larger than -e\n");
    return -1;
  }
  return 0;
}

/* The tuner's inputs: the environment with the flags written over it, read by the tuner's own
 * reader so that the mode words, the defaults and the fingerprint are exactly the plugin's. */
static void read_inputs(const struct opts *o, struct braid_tuner_inputs *in, int *forced) {
  if (o->mode) setenv("BRAID_TUNER_MODE", o->mode, 1);
  if (o->rules) setenv("NCCL_TUNER_CONFIG_FILE", o->rules, 1);
  if (o->calib) setenv("BRAID_TUNER_CALIB", o->calib, 1);
  if (o->health) setenv("BRAID_TUNER_HEALTH", o->health, 1);
  braid_tuner_inputs_read(in);
  *forced = !in->braid_tuner;
  if (*forced) { /* explain braid's choice even where NCCL_TUNER_PLUGIN names another tuner */
    setenv("NCCL_TUNER_PLUGIN", "braid", 1);
    braid_tuner_inputs_read(in);
  }
}

static void quiet_warn(void *arg, const char *source, int line, const char *msg) {
  (void)arg, (void)source, (void)line, (void)msg;
}

/* The fabric the calibration was measured against, when the user gave none. */
static void calib_fabric(struct opts *o, const struct braid_tuner_inputs *in, char *note,
                         size_t n) {
  note[0] = '\0';
  if (!in->calib_path[0] || in->mode == BRAID_TUNER_OFF || in->mode == BRAID_TUNER_RULES) return;
  struct braid_calib c;
  char err[200];
  if (braid_calib_load(in->calib_path, &c, quiet_warn, NULL, err, sizeof err) < 0) return;
  int took_link = !o->link_set && c.model_link_gbs > 0;
  int took_ch = !o->channels_set && c.model_nchannels > 0;
  if (took_link) o->link_gbs = c.model_link_gbs;
  if (took_ch) o->channels = c.model_nchannels;
  if (took_link || took_ch)
    snprintf(note, n, " (%s%s%s from the calibration file)", took_link ? "GB/s" : "",
             took_link && took_ch ? " and " : "", took_ch ? "channels" : "");
  braid_calib_free(&c);
}

static void size_str(char *buf, size_t n, uint64_t v) {
  static const char units[] = "BKMGT";
  int u = 0;
  while (u < 4 && v >= 1024 && v % 1024 == 0) v /= 1024, u++;
  if (u) snprintf(buf, n, "%llu%c", (unsigned long long)v, units[u]);
  else snprintf(buf, n, "%llu", (unsigned long long)v);
}

static void us_str(char *buf, size_t n, double us) {
  if (us < 0) snprintf(buf, n, "-");
  else snprintf(buf, n, "%.1f", us);
}

static void pick_str(char *buf, size_t n, int a, int p) {
  if (a < 0 || p < 0) snprintf(buf, n, "-");
  else snprintf(buf, n, "%s/%s", braid_rule_algo_name(a), braid_rule_proto_name(p));
}

static const char *source_name(enum braid_tuner_source s) {
  switch (s) {
    case BRAID_TUNER_SRC_RULE: return "rule";
    case BRAID_TUNER_SRC_MODEL: return "model";
    case BRAID_TUNER_SRC_NCCL: break;
  }
  return "nccl";
}

/* Predicted µs per table entry: the model's (calibrated, straggler-charged) where pred ran,
 * else NCCL's own time. */
static double entry_us(const float *nccl, const struct braid_tuner_why *pw, int a, int p) {
  if (a < 0 || p < 0) return -1;
  float v = pw && pw->model_ran ? pw->predicted[a][p] : nccl[a * NPROTO + p];
  return v < 0 ? -1 : v;
}

static void explain_size(struct braid_tuner *t, int t_off, struct braid_tuner *tm,
                         const struct braid_model *m, int coll, uint64_t bytes, struct row *r) {
  float nccl[NALGO * NPROTO], table[NALGO * NPROTO], scratch[NALGO * NPROTO];
  braid_model_fill(m, coll, (size_t)bytes, 1, nccl, NALGO);
  memcpy(table, nccl, sizeof table);
  struct braid_tuner_why w, pw;
  int nch = m->nchannels;
  braid_tuner_apply_table(t, coll, (size_t)bytes, 1, 0, table, NALGO, NPROTO, &nch, &w);
  const struct braid_tuner_why *pred = NULL;
  if (tm) {
    memcpy(scratch, nccl, sizeof scratch);
    int nch2 = m->nchannels;
    braid_tuner_apply_table(tm, coll, (size_t)bytes, 1, 0, scratch, NALGO, NPROTO, &nch2, &pw);
    pred = &pw;
  }
  memset(r, 0, sizeof *r);
  r->bytes = bytes;
  r->na = -1, r->np = -1;
  if (braid_model_pick(nccl, NALGO, NPROTO, &r->na, &r->np) == 0)
    r->nccl_us = nccl[r->na * NPROTO + r->np];
  /* What NCCL selects from the table the tuner edited (the tuner's pick is set to 0). */
  r->ba = -1, r->bp = -1;
  braid_model_pick(table, NALGO, NPROTO, &r->ba, &r->bp);
  r->src = w.source;
  const char *why = t_off ? "BRAID_TUNER_MODE=off: NCCL's choice" : "NCCL's choice";
  snprintf(r->reason, sizeof r->reason, "%s", w.reason[0] ? w.reason : why);
  r->braid_us = entry_us(nccl, pred, r->ba, r->bp);
  r->nccl_pred_us = entry_us(nccl, pred, r->na, r->np);
  for (int a = 0; a < NALGO; a++) {
    r->curve[a] = -1;
    for (int p = 0; p < NPROTO; p++) {
      double v = entry_us(nccl, pred, a, p);
      if (v > 0 && (r->curve[a] < 0 || v < r->curve[a])) r->curve[a] = v;
    }
  }
}

static int same_pick(int a1, int p1, int a2, int p2) { return a1 == a2 && p1 == p2; }

static void print_summary(const struct row *r, size_t n) {
  char lo[24], hi[24], p1[40], p2[40];
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) differ += !same_pick(r[i].na, r[i].np, r[i].ba, r[i].bp);
  printf("\nsummary:\n");
  if (!differ) {
    printf("  braid keeps NCCL's choice at all %zu sizes\n", n);
  } else {
    printf("  braid differs from NCCL at %zu of %zu sizes:\n", differ, n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      if (same_pick(r[i].na, r[i].np, r[i].ba, r[i].bp)) {
        i++;
        continue;
      }
      while (j + 1 < n && same_pick(r[j + 1].na, r[j + 1].np, r[i].na, r[i].np) &&
             same_pick(r[j + 1].ba, r[j + 1].bp, r[i].ba, r[i].bp) && r[j + 1].src == r[i].src)
        j++;
      size_str(lo, sizeof lo, r[i].bytes);
      size_str(hi, sizeof hi, r[j].bytes);
      pick_str(p1, sizeof p1, r[i].na, r[i].np);
      pick_str(p2, sizeof p2, r[i].ba, r[i].bp);
      if (i == j) printf("    %-16s", lo);
      else printf("    %-6s .. %-6s", lo, hi);
      printf(" NCCL %s -> braid %s (%s)\n", p1, p2, source_name(r[i].src));
      i = j + 1;
    }
  }
  printf("  braid's choice by size:");
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && same_pick(r[j + 1].ba, r[j + 1].bp, r[i].ba, r[i].bp)) j++;
    size_str(lo, sizeof lo, r[i].bytes);
    size_str(hi, sizeof hi, r[j].bytes);
    pick_str(p2, sizeof p2, r[i].ba, r[i].bp);
    if (i == j) printf("%s %s at %s", i ? ";" : "", p2, lo);
    else printf("%s %s %s..%s", i ? ";" : "", p2, lo, hi);
    i = j + 1;
  }
  printf("\n");
}

static int draw(const struct opts *o, const struct row *r, size_t n, int model_on) {
  double x[MAX_SIZES], y[NALGO][MAX_SIZES], choice[MAX_SIZES], nccl[MAX_SIZES];
  struct braid_tune_series s[NALGO];
  size_t ns = 0;
  for (size_t i = 0; i < n; i++) {
    x[i] = (double)r[i].bytes;
    choice[i] = r[i].braid_us;
    nccl[i] = r[i].nccl_pred_us;
  }
  for (int a = 0; a < NALGO; a++) {
    int any = 0;
    for (size_t i = 0; i < n; i++) y[ns][i] = r[i].curve[a], any |= r[i].curve[a] > 0;
    if (any) s[ns].name = braid_rule_algo_name(a), s[ns].y = y[ns], ns++;
  }
  char title[200];
  snprintf(title, sizeof title, "%s, %d ranks on %d nodes: predicted time per algorithm (%s)",
           braid_rule_coll_name(o->coll), o->nranks, o->nnodes,
           model_on ? "braid's model, best protocol" : "NCCL's model, best protocol");
  struct braid_tune_chart c = {
      .title = title, .n = n, .x = x, .series = s, .nseries = ns,
      .choice = {"braid's choice", choice}, .nccl = {"NCCL's pick", nccl}};
  char err[300];
  if (braid_tune_chart_png(&c, o->png, err, sizeof err) != 0) {
    fprintf(stderr, "braid-tune explain: chart: %s\n", err);
    return -1;
  }
  printf("\nchart: %s\n", o->png);
  return 0;
}

/* A second context in model mode whose predictions fill the "predicted" column and the chart
 * even where a rule decides. Its log lines repeat the first context's, so they are muted
 * (braid_log reads NCCL_DEBUG at every message). */
static struct braid_tuner *model_context(const struct braid_tuner_inputs *in, const struct opts *o,
                                         const ncclTunerConstants_v5_t *k) {
  struct braid_tuner_inputs mi = *in;
  mi.mode = BRAID_TUNER_MODEL;
  mi.mode_valid = 1;
  const char *old = getenv("NCCL_DEBUG");
  char *saved = old ? strdup(old) : NULL;
  setenv("NCCL_DEBUG", "VERSION", 1);
  struct braid_tuner *tm = NULL;
  braid_tuner_create_from(&tm, &mi, ABI_VERSION, 0, (size_t)o->nranks, (size_t)o->nnodes, k);
  if (saved) setenv("NCCL_DEBUG", saved, 1);
  else unsetenv("NCCL_DEBUG");
  free(saved);
  return tm;
}

int braid_tune_explain_main(int argc, char **argv) {
  struct opts o;
  int rc = parse_opts(argc, argv, &o);
  if (rc) return rc > 0 ? 0 : 2;
  struct braid_tuner_inputs in;
  int forced;
  read_inputs(&o, &in, &forced);
  char fabric_note[80];
  calib_fabric(&o, &in, fabric_note, sizeof fabric_note);

  ncclTunerConstants_v5_t k;
  braid_model_default_constants(&k);
  struct braid_fabric fab;
  braid_fabric_default(&fab, o.nnodes, o.ppn, o.link_gbs, o.channels);
  if (o.collnet) fab.collnet = fab.nvswitch = 1;
  struct braid_model *m = malloc(sizeof *m);
  struct row *rows = calloc(MAX_SIZES, sizeof *rows);
  struct braid_tuner *t = NULL, *tm = NULL;
  if (m && rows) braid_tuner_create_from(&t, &in, ABI_VERSION, 0, (size_t)o.nranks,
                                         (size_t)o.nnodes, &k);
  if (!t) {
    fprintf(stderr, "braid-tune explain: out of memory\n");
    free(m);
    free(rows);
    return 1;
  }
  braid_model_build(m, &k, &fab);
  int model_on = braid_tuner_model_active(t);
  if (model_on) tm = model_context(&in, &o, &k);

  printf("braid-tune explain: %s on %d rank%s (%d node%s x %d per node); network %.3g GB/s "
         "per node over %d channels%s; CollNet %s\n",
         braid_rule_coll_name(o.coll), o.nranks, o.nranks == 1 ? "" : "s", o.nnodes,
         o.nnodes == 1 ? "" : "s", o.ppn,
         o.link_gbs, o.channels, fabric_note, o.collnet ? "on" : "off");
  printf("tuner inputs: mode %s%s; rules %s (%zu rule%s); calibration %s; health %s; model %s; "
         "fingerprint %016llx%s\n",
         braid_tuner_mode_name(in.mode), in.mode_valid ? "" : " (BRAID_TUNER_MODE invalid)",
         in.mode == BRAID_TUNER_AUTO || in.mode == BRAID_TUNER_RULES ? in.rules_path : "unused",
         braid_tuner_rule_count(t), braid_tuner_rule_count(t) == 1 ? "" : "s",
         in.calib_path[0] ? in.calib_path : "none", in.health_path[0] ? in.health_path : "none",
         model_on ? "on" : "off", (unsigned long long)in.fingerprint,
         forced ? " (as if NCCL_TUNER_PLUGIN=braid)" : "");
  printf("NCCL's default tuner constants, tuner ABI v%d, numPipeOps 1, unregistered buffers; "
         "times in us%s\n\n",
         ABI_VERSION, model_on ? "; \"predicted\" is braid's model (NCCL's, calibrated and "
                                 "charged for slow nodes)" : "");
  printf("%8s  %-22s %10s  %-22s %10s  %-6s  %s\n", "size", "NCCL's pick", "NCCL us",
         "braid's pick", "predicted", "source", "reason");

  size_t n = 0;
  for (uint64_t b = o.minb; b <= o.maxb && n < MAX_SIZES; n++) {
    struct row *r = &rows[n];
    explain_size(t, in.mode == BRAID_TUNER_OFF, tm, m, o.coll, b, r);
    char sz[24], np[40], bp[40], nu[24], bu[24];
    size_str(sz, sizeof sz, b);
    pick_str(np, sizeof np, r->na, r->np);
    pick_str(bp, sizeof bp, r->ba, r->bp);
    us_str(nu, sizeof nu, r->na < 0 ? -1 : r->nccl_us);
    us_str(bu, sizeof bu, r->braid_us);
    printf("%8s  %-22s %10s  %-22s %10s  %-6s  %s\n", sz, np, nu, bp, bu, source_name(r->src),
           r->reason);
    if (b > UINT64_MAX / (uint64_t)o.factor) {
      n++;
      break;
    }
    b *= (uint64_t)o.factor;
  }
  if (n == MAX_SIZES)
    printf("(stopped after %d sizes; raise -b or -f)\n", MAX_SIZES);
  print_summary(rows, n);
  printf("\nnote: every rank makes these choices from the same inputs, once per collective and\n"
         "size; they hold for the whole run (live telemetry only feeds BRAID_TUNER_ADVICE for\n"
         "the next run), and a CUDA graph replays the algorithm and protocol chosen when it was\n"
         "captured.\n");
  int status = 0;
  if (o.png && draw(&o, rows, n, model_on) != 0) status = 1;
  braid_tuner_destroy(tm);
  braid_tuner_destroy(t);
  free(m);
  free(rows);
  return status;
}
