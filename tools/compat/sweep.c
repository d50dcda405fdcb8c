/* The tuner sweep (see sweep.h). */
#include "sweep.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model.h"
#include "nccl_plugin/tuner.h"

#define NALGO NCCL_NUM_ALGORITHMS
#define NPROTO NCCL_NUM_PROTOCOLS

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                   const char *fmt, ...) {
  (void)flags;
  const char *dbg = getenv("NCCL_DEBUG"); /* WARN always, INFO as NCCL_DEBUG=INFO asks */
  if (level != NCCL_LOG_WARN && !(level == NCCL_LOG_INFO && dbg && !strcasecmp(dbg, "INFO"))) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[nccl %s] %s:%d ", level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* A cost table shaped like NCCL's on a node without NVSwitch: CollNetDirect, NVLS, NVLS tree
 * and PAT unavailable, tree only for allreduce, latency plus bytes over bandwidth elsewhere, so
 * that NCCL's own pick moves from LL to Simple as the size grows. */
static void fill_table(float t[NALGO][NPROTO], int coll, size_t bytes) {
  static const float lat[NPROTO] = {6.0f, 8.0f, 14.0f}, bw[NPROTO] = {2.0f, 9.0f, 11.0f};
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++) {
      int ok = a == NCCL_ALGO_RING || a == NCCL_ALGO_COLLNET_CHAIN ||
               (a == NCCL_ALGO_TREE && coll == ncclFuncAllReduce);
      if (a == NCCL_ALGO_COLLNET_CHAIN && (coll != ncclFuncAllReduce || p != NCCL_PROTO_SIMPLE)) ok = 0;
      t[a][p] = ok ? lat[p] * (1.0f + 0.1f * (float)a) + (float)bytes / (bw[p] * 1e3f) : -1.0f;
    }
}

/* The entry NCCL would run: the one the tuner set to 0, else the cheapest available. */
static void pick(float t[NALGO][NPROTO], int *algo, int *proto) {
  float best = 3.6e9f;
  *algo = *proto = -1;
  for (int a = 0; a < NALGO; a++)
    for (int p = 0; p < NPROTO; p++)
      if (t[a][p] >= 0 && t[a][p] < best) best = t[a][p], *algo = a, *proto = p;
}

int compat_sweep(const void *table, int version, int nranks, int nnodes, FILE *out) {
  static const int colls[] = {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather,
                              ncclFuncReduceScatter, ncclFuncAllReduce};
  void *ctx = NULL;
  ncclResult_t rc;
  ncclTunerConstants_v5_t constants;
  ncclNvlDomainInfo_v5_t nvl = {nnodes, nranks / (nnodes ? nnodes : 1), nranks / (nnodes ? nnodes : 1)};
  braid_model_default_constants(&constants);
  const ncclTuner_v1_t *t1 = table;
  const ncclTuner_v2_t *t2 = table;
  const ncclTuner_v3_t *t3 = table;
  const ncclTuner_v4_t *t4 = table;
  const ncclTuner_v5_t *t5 = table;
  switch (version) {
    case 1: rc = t1->init((size_t)nranks, (size_t)nnodes, logger); break;
    case 2: rc = t2->init((size_t)nranks, (size_t)nnodes, logger, &ctx); break;
    case 3: rc = t3->init((size_t)nranks, (size_t)nnodes, logger, &ctx); break;
    case 4: rc = t4->init((size_t)nranks, (size_t)nnodes, logger, &ctx); break;
    default: rc = t5->init(&ctx, 0x5eed, (size_t)nranks, (size_t)nnodes, logger, &nvl, &constants); break;
  }
  if (rc != ncclSuccess) {
    fprintf(out, "init failed: ncclResult_t %d (NCCL fails the communicator's init)\n", (int)rc);
    return 3;
  }
  int bad = 0;
  for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
    for (int lg = 0; lg <= 30; lg += 2) {
      size_t bytes = (size_t)1 << lg;
      int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF, nch = 0;
      float tab[NALGO][NPROTO];
      fill_table(tab, colls[c], bytes);
      float **ft = (float **)(void *)tab;
      ncclFunc_t f = (ncclFunc_t)colls[c];
      switch (version) {
        case 1: rc = t1->getCollInfo(f, bytes, 1, 0, 1, &algo, &proto, &nch); break;
        case 2: rc = t2->getCollInfo(ctx, f, bytes, 1, 0, 1, &algo, &proto, &nch); break;
        case 3: rc = t3->getCollInfo(ctx, f, bytes, 1, ft, NALGO, NPROTO, &nch); break;
        default: rc = t4->getCollInfo(ctx, f, bytes, 1, ft, NALGO, NPROTO, 0, &nch); break;
      }
      if (rc != ncclSuccess) bad = 1;
      /* v1/v2: both set, or NCCL decides (the table's pick); v3+: the table decides. */
      if (version >= 3 || algo < 0 || proto < 0) pick(tab, &algo, &proto);
      fprintf(out, "coll %d bytes %zu algo %d proto %d channels %d%s\n", colls[c], bytes, algo,
              proto, nch, rc != ncclSuccess ? " getCollInfo-failed" : "");
    }
  switch (version) {
    case 1: rc = t1->destroy(); break;
    case 2: rc = t2->destroy(ctx); break;
    case 3: rc = t3->destroy(ctx); break;
    case 4: rc = t4->destroy(ctx); break;
    default: rc = t5->finalize(ctx); break;
  }
  return bad || rc != ncclSuccess ? 1 : 0;
}
