/* braid-perf --algo auto: finding, opening and calling a tuner plugin as NCCL does. */
#ifndef PERF_TUNERLOAD_H
#define PERF_TUNERLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/tuner.h"

struct tunerload {
  void *lib;
  const ncclTuner_v5_t *t;
  void *ctx;
  int ctx_valid;
  char path[1024];   /* the library that was opened */
};

/* Opens the tuner named by NCCL_TUNER_PLUGIN (default "braid"): a path as given; a name X as
 * libnccl-tuner-X.so, first next to braid-perf (and in ../lib from there), then through the
 * loader's path; "lib*.so" as given. dlopen(RTLD_NOW | RTLD_LOCAL), symbol ncclTunerPlugin_v5.
 * 0, or -1 with err saying what was tried. */
int tunerload_open(struct tunerload *tl, char *err, size_t errlen);
/* init(&ctx, commId, nRanks, nNodes, logger, nvl, constants): 0 or -1 (printed). */
int tunerload_init(struct tunerload *tl, uint64_t comm_id, int nranks, int nnodes,
                   ncclNvlDomainInfo_v5_t *nvl, ncclTunerConstants_v5_t *constants);
/* getCollInfo(ctx, coll, nbytes, 1 pipelined op, table[7][3], regBuff 0, &nchannels). */
int tunerload_coll_info(struct tunerload *tl, int coll, size_t nbytes, float *table,
                        int *nchannels);
/* finalize (after a successful init) and dlclose. */
void tunerload_close(struct tunerload *tl);

#endif
