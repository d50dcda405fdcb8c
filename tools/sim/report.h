/* braid-sim's report: the table (text and CSV) and the scaling chart (PNG). */
#ifndef BRAID_SIM_REPORT_H
#define BRAID_SIM_REPORT_H

#include <stdio.h>

#include "coll.h"

struct row {
  enum scenario sc;
  enum algo algo;
  bool braid;
  long gpus;
  struct coll_result r;
  double healthy_s; /* the same algorithm, healthy (slowdown = time / this) */
  double wall_s;    /* seconds this row took to simulate */
};

/* The table: one row per scenario and algorithm. */
void report_text(FILE *f, const struct row *rows, size_t n);
void report_csv(FILE *f, const struct row *rows, size_t n);

/* The scaling sweep: busbw and efficiency (busbw / busbw at the smallest size) per GPU count. */
void report_scaling_text(FILE *f, const struct row *rows, size_t n);
void report_scaling_csv(FILE *f, const struct row *rows, size_t n);

/* busbw against GPUs, one line per (scenario, algorithm) of the sweep.  Returns 0, or -1 with
 * err. */
int report_png(const char *path, const struct row *rows, size_t n, const char *title, char *err,
               size_t errlen);

#endif
