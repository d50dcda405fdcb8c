/* braid-perf --algo auto|nccl: what NCCL would run at each size of the sweep.
 *
 * Before any connection is made, every rank fills NCCL's cost table for every size with NCCL's
 * model (model.h; entries braid-perf cannot run are left IGNORE, as NCCL leaves those of
 * unavailable algorithms), notes NCCL's own pick, lets the tuner plugin edit the table (auto
 * only) and picks as NCCL does. The ranks then all-gather their plans and the tuner's input
 * fingerprint (inputs.h): any difference fails the run before a collective could hang on it. */
#ifndef PERF_TUNE_H
#define PERF_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "model.h"
#include "opts.h"
#include "tunerload.h"

struct rdv;

/* One size's decision, in NCCL's indices (NCCL_ALGO_*, NCCL_PROTO_*). */
struct tune_choice {
  int32_t algo, proto;           /* what runs */
  int32_t nch;                   /* channels it runs on */
  int32_t nccl_algo, nccl_proto; /* NCCL's own pick from the untouched table (-1: none) */
};

struct tune_plan {
  const struct perf_opts *o;
  int nsteps;
  size_t *bytes;            /* per sweep step: the op's bytes */
  struct tune_choice *v;    /* per sweep step */
  int max_nch;              /* ring/tree channels the plan needs connected (>= --channels) */
  int collnet;              /* CollNet entries were offered */
  char describe[2048];      /* the tuner and the model's fabric, for the table's header */
  struct tunerload tl;      /* --algo auto: the tuner, open for the whole run as under NCCL */
  int tuner_open;
};

/* --algo auto: NCCL_TUNER_PLUGIN defaults to braid (set in the environment, before any plugin
 * reads it, so the tuner's and every rank's inputs fingerprint agree). */
void tune_env_defaults(const struct perf_opts *o);

/* Plans the whole sweep (see above). comm_id: the id every rank shares (NCCL's commHash);
 * collnet: CollNet is set up. Every rank calls it; 0, or -1 after printing why (the same
 * outcome on every rank). */
int tune_plan_make(struct tune_plan *tp, const struct perf_opts *o, struct rdv *r,
                   uint64_t comm_id, int collnet);
/* Finalizes and closes the tuner (--algo auto), as NCCL does at communicator destruction:
 * before the net plugin's connections close, so what the tuner samples at finalize (its
 * BRAID_TUNER_ADVICE) still sees them. Idempotent. */
void tune_plan_close_tuner(struct tune_plan *tp);
void tune_plan_free(struct tune_plan *tp);
/* struct bench_mode's variants(): the plan's choice for that step (ctx: the plan). */
int tune_variants(void *ctx, int step, size_t bytes, struct bench_variant *v);

/* NCCL's view of this run (shared with --calibrate): nranks nodes of one rank each, link_gbs
 * of network per node over nch channels, CollNet when set up, --proto as NCCL_PROTO. */
void tune_fabric(struct braid_fabric *f, const struct perf_opts *o, int nranks, double link_gbs,
                 int nch, int collnet);
/* Sets IGNORE every entry of a flat [NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] table that
 * braid-perf cannot run: algorithms other than tree, ring and CollNet, CollNet without
 * collnet, and CollNet with a protocol other than Simple. */
void tune_mask(float *table, int collnet);
/* braid-perf's algorithm for NCCL's index; -1 when braid-perf cannot run it. */
int tune_perf_algo(int nccl_algo);
/* "ring/simple" and the like, in the tuner's names. */
const char *tune_name(char *buf, size_t len, int nccl_algo, int nccl_proto);

#endif
