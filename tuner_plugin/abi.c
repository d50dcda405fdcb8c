/* The exported ncclTunerPlugin_v1 .. _v6 tables: thin adapters over tuner.c. */
#include <pthread.h>
#include <stddef.h>

#include "log.h"
#include "nccl_plugin/tuner.h"
#include "tuner.h"

#define EXPORT __attribute__((visibility("default")))

static ncclResult_t init_old(int version, size_t nranks, size_t nnodes,
                             ncclDebugLogger_t logger, void **ctx) {
  braid_log_set_logger(logger);
  if (!ctx) {
    BRAID_WARN("tuner: init v%d called without a context pointer", version);
    return ncclInternalError;
  }
  return braid_tuner_create((struct braid_tuner **)ctx, version, 0, nranks, nnodes, NULL)
             ? ncclInvalidUsage : ncclSuccess;
}

/* v1 (NCCL 2.19, 2.20) has no context: one process-wide context, created by the first
 * communicator's init and destroyed with the last one. Its getCollInfo cannot tell which
 * communicator asks, so rules naming node or rank counts never match there. */
static pthread_mutex_t v1_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_tuner *v1_ctx;
static int v1_refs;

/* NCCL 2.19/2.20 call destroy for every communicator that loaded the plugin, even when its init
 * failed (commCleanup checks only comm->tuner), so every init call counts, refused or not. */
static ncclResult_t init_v1(size_t nranks, size_t nnodes, ncclDebugLogger_t logger) {
  braid_log_set_logger(logger);
  ncclResult_t rc = ncclSuccess;
  pthread_mutex_lock(&v1_lock);
  v1_refs++;
  if (!v1_ctx) {
    if (braid_tuner_create(&v1_ctx, 1, 0, nranks, nnodes, NULL))
      rc = ncclInvalidUsage;
    else
      braid_tuner_sizes_unknown(v1_ctx);
  }
  pthread_mutex_unlock(&v1_lock);
  return rc;
}

/* Under the lock: another communicator's destroy must not free the context mid-call. */
static ncclResult_t coll_v1(ncclFunc_t coll, size_t nbytes, int collnet_support, int nvls_support,
                            int pipe_ops, int *algorithm, int *protocol, int *nchannels) {
  pthread_mutex_lock(&v1_lock);
  braid_tuner_apply_v2(v1_ctx, (int)coll, nbytes, collnet_support, nvls_support, pipe_ops,
                       algorithm, protocol, nchannels);
  pthread_mutex_unlock(&v1_lock);
  return ncclSuccess;
}

static ncclResult_t fini_v1(void) {
  pthread_mutex_lock(&v1_lock);
  if (v1_refs > 0 && --v1_refs == 0) {
    braid_tuner_destroy(v1_ctx);
    v1_ctx = NULL;
  }
  pthread_mutex_unlock(&v1_lock);
  return ncclSuccess;
}

static ncclResult_t init_v2(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **ctx) {
  return init_old(2, nranks, nnodes, logger, ctx);
}
static ncclResult_t init_v3(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **ctx) {
  return init_old(3, nranks, nnodes, logger, ctx);
}
static ncclResult_t init_v4(size_t nranks, size_t nnodes, ncclDebugLogger_t logger, void **ctx) {
  return init_old(4, nranks, nnodes, logger, ctx);
}

static ncclResult_t init_new(int version, void **ctx, uint64_t comm_id, size_t nranks,
                             size_t nnodes, ncclDebugLogger_t logger,
                             const ncclTunerConstants_v5_t *constants) {
  braid_log_set_logger(logger);
  if (!ctx) {
    BRAID_WARN("tuner: init v%d called without a context pointer", version);
    return ncclInternalError;
  }
  return braid_tuner_create((struct braid_tuner **)ctx, version, comm_id, nranks, nnodes, constants)
             ? ncclInvalidUsage : ncclSuccess;
}

/* constants seed the model's latencies; braid leaves them (and nvlDomainInfo) as NCCL set them,
 * so NCCL's own model is unchanged. */
static ncclResult_t init_v5(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes,
                            ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t *nvl,
                            ncclTunerConstants_v5_t *constants) {
  (void)nvl;
  return init_new(5, ctx, comm_id, nranks, nnodes, logger, constants);
}
static ncclResult_t init_v6(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes,
                            ncclDebugLogger_t logger, ncclNvlDomainInfo_v6_t *nvl,
                            ncclTunerConstants_v6_t *constants) {
  (void)nvl;
  return init_new(6, ctx, comm_id, nranks, nnodes, logger, constants);
}

static ncclResult_t coll_v2(void *ctx, ncclFunc_t coll, size_t nbytes, int collnet_support,
                            int nvls_support, int pipe_ops, int *algorithm, int *protocol,
                            int *nchannels) {
  braid_tuner_apply_v2(ctx, (int)coll, nbytes, collnet_support, nvls_support, pipe_ops,
                       algorithm, protocol, nchannels);
  return ncclSuccess;
}

static ncclResult_t coll_v3(void *ctx, ncclFunc_t coll, size_t nbytes, int pipe_ops,
                            float **table, int num_algo, int num_proto, int *nchannels) {
  braid_tuner_apply_table(ctx, (int)coll, nbytes, pipe_ops, -1, (float *)(void *)table,
                          num_algo, num_proto, nchannels, NULL);
  return ncclSuccess;
}

/* v4, v5 and v6 share this signature. */
static ncclResult_t coll_v4(void *ctx, ncclFunc_t coll, size_t nbytes, int pipe_ops,
                            float **table, int num_algo, int num_proto, int reg_buff,
                            int *nchannels) {
  braid_tuner_apply_table(ctx, (int)coll, nbytes, pipe_ops, reg_buff, (float *)(void *)table,
                          num_algo, num_proto, nchannels, NULL);
  return ncclSuccess;
}

static ncclResult_t fini(void *ctx) {
  braid_tuner_destroy(ctx);
  return ncclSuccess;
}

EXPORT const ncclTuner_v1_t ncclTunerPlugin_v1 = {"braid", init_v1, coll_v1, fini_v1};
EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {"braid", init_v2, coll_v2, fini};
EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {"braid", init_v3, coll_v3, fini};
EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {"braid", init_v4, coll_v4, fini};
EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {"braid", init_v5, coll_v4, fini};
EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {"braid", init_v6, coll_v4, fini, NULL};
