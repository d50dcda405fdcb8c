/* braid-perf: the size sweep of one rank: buffers, warm-up, timed loop, verification, results.
 *
 * At every size the sweep runs one or more variants (an algorithm, protocol and channel count)
 * in interleaved repeats: each repeat runs every variant once, so a noisy moment hits them all
 * alike, and each variant's row shows the median of its repeats (a repeat's time is the
 * slowest rank's). A plain run has one variant per size and one repeat; --calibrate and
 * --algo auto|nccl supply theirs through struct bench_mode. */
#ifndef PERF_BENCH_H
#define PERF_BENCH_H

#include "opts.h"
#include "report.h"
#include "setup.h"

#define BENCH_MAX_VARIANTS 8

struct rdv;

/* One way to run a size. */
struct bench_variant {
  enum perf_algo algo;    /* ring, tree or collnet (allreduce); ring for the other ops */
  enum perf_proto proto;  /* never PERF_PROTO_AUTO */
  int nch;                /* channels the op uses (<= the channels connected) */
  char label[80];         /* the row's last column; "" = the protocol's name */
};

struct bench_mode {
  int repeats; /* >= 1 */
  /* The variants at sweep step `step` (0, 1, ...), whose op moves `bytes` (the table's size):
   * fills v[0..n) and returns n (1..BENCH_MAX_VARIANTS). Every rank gets the same answer. */
  int (*variants)(void *ctx, int step, size_t bytes, struct bench_variant *v);
  /* Rank 0, optional: a variant's row, after it is printed. */
  void (*result)(void *ctx, const struct bench_variant *v, const struct report_row *row);
  void *ctx;
};

/* Runs every size; rank 0 prints the table. mode NULL: one variant per size, from --algo,
 * --proto (proto.c picks by size) and --channels, --repeats repeats. Returns 0 (all right),
 * 1 (wrong results) or exits the process with 2 when an operation fails (a plugin error or
 * timeout). */
int bench_run(struct perf_net *pn, const struct perf_opts *o, struct rdv *r, const char *describe,
              const struct bench_mode *mode);

/* The sweep's sizes are s = -b, bench_next(o, s), ... while s <= -e; the op then moves
 * bench_op_bytes(o, nranks, s) bytes (the table's size column). */
size_t bench_next(const struct perf_opts *o, size_t s);
size_t bench_op_bytes(const struct perf_opts *o, int nranks, size_t s);

#endif
