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
};

struct report {
  const struct perf_opts *o;
  int nranks;
  FILE *json;
  int rows;
  double busbw_sum;
  uint64_t wrong_total;
};

/* Opens --json (if any) and prints the table header; -1 when the file cannot be written. */
int report_open(struct report *rp, const struct perf_opts *o, int nranks, const char *describe);
void report_row(struct report *rp, const struct report_row *row);
/* Prints "# Avg bus bandwidth" and closes the JSON file. */
void report_close(struct report *rp);

#endif
