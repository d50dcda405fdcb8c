/* braid-perf --calibrate: ring and tree with every protocol, and CollNet (Simple) when it is set
 * up, at every size of the sweep, in interleaved repeats (bench.h), each measured time next to
 * what NCCL's model predicts for it; rank 0 then writes the braid tuner's calibration file
 * (calib.h: BRAID_TUNER_CALIB) and prints a summary: at each size the fastest measured variant
 * against NCCL's model pick. */
#ifndef PERF_CALIBRATE_H
#define PERF_CALIBRATE_H

#include <stddef.h>

#include "bench.h"
#include "calib.h"
#include "model.h"
#include "opts.h"
#include "report.h"

/* Rank 0's summary of one size. */
struct calibrate_size {
  size_t bytes;
  int best;            /* the fastest variant (index into variants) */
  double best_us;
  int pick;            /* the variant NCCL's model picks (-1: none of them) */
  double pick_us;
};

struct calibrate {
  const struct perf_opts *o;
  int nranks, collnet;
  struct braid_model model;       /* NCCL's, default constants, --link-gbs, --channels */
  struct bench_variant v[BENCH_MAX_VARIANTS];
  int nccl_algo[BENCH_MAX_VARIANTS];
  int nv;
  /* rank 0 */
  struct braid_calib out;
  size_t cap;
  size_t skipped;                 /* points without a model time or an empty op */
  double link_gbs;                /* largest ring/Simple bus bandwidth measured */
  struct calibrate_size *sizes;
  int nsizes, sizes_cap;
};

/* The variants and the model; collnet: CollNet is set up (its variant is measured). */
void calibrate_init(struct calibrate *c, const struct perf_opts *o, int nranks, int collnet);
/* struct bench_mode's callbacks (ctx: the struct calibrate). */
int calibrate_variants(void *ctx, int step, size_t bytes, struct bench_variant *v);
void calibrate_result(void *ctx, const struct bench_variant *v, const struct report_row *row);
/* Rank 0, after the sweep: prints the summary and, when every result was right (results_ok),
 * writes --calibrate's file atomically (FILE.tmp, then rename). net: one line naming the
 * plugin, for the file's header comment. 0, or -1 after printing why. */
int calibrate_finish(struct calibrate *c, const char *net, int results_ok);
void calibrate_free(struct calibrate *c);

#endif
