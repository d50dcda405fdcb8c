/* braid-tune explain --png: predicted time per algorithm over message sizes, log-log, drawn with
 * cairo. */
#ifndef BRAID_TUNE_CHART_H
#define BRAID_TUNE_CHART_H

#include <stddef.h>

struct braid_tune_series {
  const char *name;
  const double *y; /* µs per x; < 0: no point (the line breaks there) */
};

/* A set of markers drawn over the lines, one per x (y < 0: none at that x). */
struct braid_tune_marks {
  const char *name;
  const double *y;
};

struct braid_tune_chart {
  const char *title;
  size_t n;
  const double *x; /* message sizes in bytes, increasing, > 0 */
  const struct braid_tune_series *series;
  size_t nseries;
  struct braid_tune_marks choice; /* braid's choice: filled circles */
  struct braid_tune_marks nccl;   /* NCCL's pick: crosses (y may be NULL: not drawn) */
};

/* Writes the chart as a PNG. Returns 0, or -1 with err. */
int braid_tune_chart_png(const struct braid_tune_chart *c, const char *path, char *err,
                         size_t errlen);

#endif
