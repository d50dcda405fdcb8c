/* The tuner's measured inputs: a calibration file (written by braid-perf --calibrate on the
 * healthy fabric) and a health file (which nodes are slow now). Both are plain text, versioned
 * by their first line, and must be the same file on every rank (see inputs.h).
 *
 * Calibration:
 *   braid-calibration 1
 *   nranks 4
 *   nnodes 4
 *   link_gbs 0.05              a node's healthy network bandwidth, GB/s
 *   model_link_gbs 0.05        the fabric NCCL's model was evaluated with (optional): network
 *   model_nchannels 8          GB/s per node and channels (braid-perf --algo auto reuses them)
 *   # coll algo proto bytes measured_us model_us
 *   allreduce ring simple 4096 812.5 30.1
 *   ...
 * coll/algo/proto are the names of NCCL's example-tuner CSV (allreduce, ring, simple, ...).
 * measured_us is the median time braid-perf measured, model_us what NCCL's model (model.h, default
 * constants) predicted for the same fabric, so measured/model corrects NCCL's prediction for
 * that algorithm at that size.
 *
 * Health:
 *   braid-health 1
 *   # node relative_bandwidth (1 = as fast as the healthy fabric)
 *   h0 1.00
 *   h3 0.25
 *
 * Parsers are pure (no I/O); *_load reads a file. Warnings name the source and line. */
#ifndef BRAID_TUNER_CALIB_H
#define BRAID_TUNER_CALIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rules.h" /* braid_rules_warn_fn */

struct braid_calib_point {
  int coll, algo, proto;
  uint64_t bytes;
  double measured_us, model_us;
};

struct braid_calib {
  int nranks, nnodes;
  double link_gbs; /* 0: unknown */
  double model_link_gbs; /* 0: not recorded */
  int model_nchannels;   /* 0: not recorded */
  struct braid_calib_point *v; /* sorted by (coll, algo, proto, bytes) */
  size_t n;
};

struct braid_health_node {
  char name[64];
  double rel_bw; /* (0, 1] after clamping */
};

struct braid_health {
  struct braid_health_node *v;
  size_t n;
};

/* Return the number of warnings (lines skipped), or -1 when the text is not a calibration (or
 * health) file at all or memory ran out: *out is then empty and err says why. */
int braid_calib_parse(const char *text, size_t len, const char *source, struct braid_calib *out,
                      braid_rules_warn_fn warn, void *warn_arg, char *err, size_t errlen);
int braid_calib_load(const char *path, struct braid_calib *out, braid_rules_warn_fn warn,
                     void *warn_arg, char *err, size_t errlen);
void braid_calib_free(struct braid_calib *c);
/* Writes c in the format above (header comment included). Returns 0 or -1 (errno set). */
int braid_calib_write(FILE *f, const struct braid_calib *c, const char *comment);

/* measured/model for (coll, algo) at nbytes: the points of the exact protocol if any, else
 * those of the algorithm's other protocols (simple first); interpolated in log(bytes) between
 * points and held constant beyond the ends. Returns 0 when the calibration has no point for
 * (coll, algo). */
double braid_calib_ratio(const struct braid_calib *c, int coll, int algo, int proto,
                         uint64_t nbytes);
/* The measured time of (coll, algo)'s smallest calibrated size (its latency), or 0. */
double braid_calib_latency(const struct braid_calib *c, int coll, int algo, int proto);

int braid_health_parse(const char *text, size_t len, const char *source,
                       struct braid_health *out, braid_rules_warn_fn warn, void *warn_arg,
                       char *err, size_t errlen);
int braid_health_load(const char *path, struct braid_health *out, braid_rules_warn_fn warn,
                      void *warn_arg, char *err, size_t errlen);
void braid_health_free(struct braid_health *h);
/* The slowest node's relative bandwidth (1 when there is none); *name gets its name. */
double braid_health_min(const struct braid_health *h, const char **name);

#endif
