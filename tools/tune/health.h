/* braid-tune health: advice files (tuner_plugin/advice.c writes them, one per process) parsed
 * strictly and merged into one health file (tuner_plugin/calib.h's "braid-health 1" format).
 *
 * Pure: text in, text out (a FILE the caller opened); no file system access, so the unit tests
 * link it as it is. */
#ifndef BRAID_TUNE_HEALTH_H
#define BRAID_TUNE_HEALTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BRAID_TUNE_NODE_NAME_MAX 63 /* calib.h's health node names */
#define BRAID_TUNE_SLOW_RUN 3       /* a rail slow in this many snapshots in a row is "slow" */

/* What one advice file says. */
struct braid_tune_advice {
  char source[256];    /* the file name, for messages and the health file's header */
  char host[BRAID_TUNE_NODE_NAME_MAX + 1]; /* cut to 63 characters (host_cut set) */
  int host_cut;
  double seconds;
  uint64_t samples;    /* 0: no telemetry */
  double send_gbps;    /* Gb/s */
  size_t nrails;
  size_t nslow;        /* rails slow for >= BRAID_TUNE_SLOW_RUN snapshots in a row */
  char slowest[128];   /* "nic to peer" of the slow rail with the longest run, "" if none */
};

/* Parses one advice file's text (len bytes, need not be NUL-terminated). Strict: anything but
 * the documented format is an error, and err then reads "source:line: what" (or "source: what"
 * for a missing record). Returns 0, or -1. */
int braid_tune_advice_parse(const char *text, size_t len, const char *source,
                            struct braid_tune_advice *out, char *err, size_t errlen);

/* Merges advice into a health file written to out:
 *   - a host's figure is the mean send_gbps of its files that have telemetry (samples > 0 and
 *     send_gbps > 0; one file per process, so a host with a missing rank's file is not
 *     penalised);
 *   - the reference is the upper median of the hosts' figures (the faster middle host for an
 *     even count, so with two hosts the slow one is measured against the fast one);
 *   - rel_bw = figure / reference, capped at 1 and floored at 0.01 (the tuner's floor);
 *   - a '#' header names every input and what it contributed; hosts are sorted by name.
 * Returns the number of node lines written, or -1 with err (no file had telemetry, or out
 * failed). */
int braid_tune_health_merge(const struct braid_tune_advice *v, size_t n, FILE *out, char *err,
                            size_t errlen);

#endif
