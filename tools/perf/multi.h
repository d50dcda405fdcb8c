/* braid-perf: runs that choose among algorithms (--calibrate, --algo auto|nccl): CollNet when
 * it is enabled, the sweep's variants, what the header says and what happens after the sweep.
 * For any other run these do nothing (the sweep runs --algo). */
#ifndef PERF_MULTI_H
#define PERF_MULTI_H

#include <stddef.h>

#include "bench.h"
#include "calibrate.h"
#include "opts.h"
#include "setup.h"
#include "tune.h"

struct rdv;

struct multi {
  const struct perf_opts *o;
  int active;             /* perf_opts_multi_algo */
  int nch;                /* channels to connect */
  struct bench_mode mode;
  struct calibrate cal;   /* --calibrate */
  struct tune_plan tp;    /* --algo auto|nccl */
};

/* After setup_plugin, before setup_connect; every rank. Sets CollNet up when it is enabled
 * (NCCL_COLLNET_ENABLE, BRAID_PS_SERVERS) and goes on without it when it fails; plans
 * --algo auto|nccl (tune.h). 0, or -1 after printing why. */
int multi_prepare(struct multi *m, const struct perf_opts *o, struct rdv *r, struct perf_net *pn);
/* The sweep's mode for bench_run (NULL: a plain run). */
const struct bench_mode *multi_mode(const struct multi *m);
/* Appends the tuner and model lines to the header's describe text. */
void multi_describe(const struct multi *m, char *buf, size_t len);
/* After the sweep (results_ok: no wrong results): --calibrate's summary and file on rank 0.
 * 0, or -1 after printing why. */
int multi_finish(struct multi *m, int rank, const char *describe, int results_ok);
void multi_free(struct multi *m);

#endif
