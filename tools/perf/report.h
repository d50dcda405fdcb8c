/* braid-perf: the nccl-tests table and the JSON records (rank 0 only). */
#ifndef PERF_REPORT_H
#define PERF_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "opts.h"

struct report_row {
  size_t bytes, count;
  double time_us;
  uint64_t wrong;
  enum perf_proto proto;
  enum perf_algo algo;  /* allreduce: what ran (ring, tree or collnet) */
  int nch;              /* channels the op used */
  const char *label;    /* the last column when set and not empty, else the protocol */
  /* All ranks, all repeats: CPU seconds of the rank processes in the timed iterations, and the
   * payload bytes they sent in them (the op's bytes times report_bus_factor, per iteration, per
   * sending rank); cpu_proxy_s: the part of the threads that call the plugin (NCCL's proxy in a
   * job), the rest being threads the plugin started. */
  double cpu_user_s, cpu_sys_s, cpu_bytes, cpu_proxy_s;
};

struct report {
  const struct perf_opts *o;
  int nranks;
  FILE *json;
  int rows;
  double busbw_sum;
  uint64_t wrong_total;
  double cpu_user_s, cpu_sys_s, cpu_bytes, cpu_proxy_s; /* sums of the rows' */
};

/* nccl-tests' bus bandwidth factor of op over nranks: busbw = algbw * this. */
double report_bus_factor(enum perf_op op, int nranks);
/* Bus bandwidth (nccl-tests' factors) of op moving `bytes` over nranks in time_us, GB/s. */
double report_busbw(enum perf_op op, int nranks, size_t bytes, double time_us);
/* Opens --json (if any) and prints the table header; -1 when the file cannot be written. */
int report_open(struct report *rp, const struct perf_opts *o, int nranks, const char *describe);
void report_row(struct report *rp, const struct report_row *row);
/* Prints "# Out of bounds values", "# Outputs checked" (checked: the outputs every rank
 * checked, summed), "# CPU per GB moved" (rank_cpu[q]: rank q's CPU seconds in the timed
 * iterations, the rows' sum) and "# Avg bus bandwidth", and closes the JSON file. */
void report_close(struct report *rp, uint64_t checked, const double *rank_cpu);

#endif
