/* braid-perf: the size sweep of one rank: buffers, warm-up, timed loop, verification, results. */
#ifndef PERF_BENCH_H
#define PERF_BENCH_H

#include "opts.h"
#include "setup.h"

struct rdv;

/* Runs every size; rank 0 prints the table. Returns 0 (all right), 1 (wrong results) or exits
 * the process with 2 when an operation fails (a plugin error or timeout). */
int bench_run(struct perf_net *pn, const struct perf_opts *o, struct rdv *r, const char *describe);

#endif
