/* Live fabric health as advice for the next run.
 *
 * Live telemetry never changes a choice inside a run: ranks see different local telemetry, and
 * no agreement inside getCollInfo is both hang-free and certain (a rank that misses the switch
 * point would choose differently from its peers). Instead, each rank samples braid's telemetry
 * snapshot (include/braid/snapshot.h) while it runs, and at finalize writes what it saw to
 * BRAID_TUNER_ADVICE (a path; %h is replaced by the host name, %p by the pid) and logs a warning
 * for every rail that stayed far below its connection's best rail. `braid-tune health` merges the
 * advice files of all ranks into one health file (calib.h) for the next run's BRAID_TUNER_HEALTH,
 * the same file on every rank. */
#ifndef BRAID_TUNER_ADVICE_H
#define BRAID_TUNER_ADVICE_H

#include <stdint.h>
#include <stdio.h>

#include "braid/snapshot.h"

struct braid_advice;

/* NULL (and nothing is sampled) when memory runs out; sampling works without an advice file
 * (the warnings still appear in the log). */
struct braid_advice *braid_advice_create(uint64_t comm_id, int nranks, int nnodes);
/* Called from every getCollInfo: a counter; every 1024 calls it reads the clock, and at most
 * every BRAID_TUNER_ADVICE_INTERVAL_MS (default 5000) it takes a snapshot. */
void braid_advice_tick(struct braid_advice *a);
/* Takes a last snapshot, writes the advice file (if configured), logs, frees. */
void braid_advice_finish(struct braid_advice *a);

/* Tests: where snapshots come from (NULL: braid's net plugin, found with dlopen RTLD_NOLOAD). */
void braid_advice_set_source(braid_snapshot_fn_v1 fn);
/* Tests: take a snapshot now, regardless of the counter and the interval. */
void braid_advice_sample_now(struct braid_advice *a);
/* Writes the advice text (the format is documented at the top of advice.c) to f. Not to be
 * called while another thread ticks or samples the same context. Returns 0 or -1. */
int braid_advice_write(const struct braid_advice *a, FILE *f);

#endif
