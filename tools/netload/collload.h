/* collload: the CollNet side of a net plugin library (ncclCollNetPlugin_v7..v12), called through
 * one set of normalized, newest-style signatures.
 *
 * NCCL looks the CollNet table up in the SAME dlopen handle as the net plugin, newest version
 * first, independently of the net version (plugin/net.cc). Same rules as netload: every
 * collload_* call is ONE call of the plugin; nothing here loops, sleeps, or keeps state besides
 * what an older version needs to look like a newer one (the per-comm ctx of v7..v10, whose init
 * runs once per process). CollNet `connect` is a blocking collective in every version. */
#ifndef BRAID_COLLLOAD_H
#define BRAID_COLLLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "netload.h"

#ifdef __cplusplus
extern "C" {
#endif

struct collload {
  int version;        /* 7..12: the ncclCollNetPlugin_vN symbol in use */
  const char *name;   /* the table's name field */
  union {
    const void *any;
    const ncclCollNet_v7_t *v7;
    const ncclCollNet_v8_t *v8;
    const ncclCollNet_v9_t *v9;
    const ncclCollNet_v10_t *v10;
    const ncclCollNet_v11_t *v11;
    const ncclCollNet_v12_t *v12;
  } coll;
  int init_refs;      /* v7..v10: init is once per process; counts collload_init calls */
};

/* Finds the newest ncclCollNetPlugin_vN (N <= max_version, 0: no limit) in nl's library.
 * ncclInvalidUsage with a message in err when there is none (the plugin has no CollNet). */
ncclResult_t collload_open(struct collload *cl, const struct netload *nl, int max_version,
                           char *err, size_t errlen);

/* init: v11/v12 call the plugin's per-communicator init(ctx, commId, logger).
 * v7..v10: the plugin's init(logger) runs on the first call only (once per process, as NCCL
 * does); *ctx is then a collload-owned placeholder. */
ncclResult_t collload_init(struct collload *cl, void **ctx, uint64_t comm_id,
                           ncclDebugLogger_t logger);
/* finalize: v11/v12 call finalize(ctx) (ncclInvalidUsage when the table has none); older
 * versions free collload's placeholder. */
ncclResult_t collload_finalize(struct collload *cl, void *ctx);

ncclResult_t collload_devices(struct collload *cl, int *ndev);
/* props is fully written; fields an old version lacks get netload's defaults (netload.h). */
ncclResult_t collload_get_properties(struct collload *cl, int dev, netload_props_t *props);

/* ctx is passed to v11/v12 listen only. handle: NCCL_NET_HANDLE_MAXSIZE bytes. */
ncclResult_t collload_listen(struct collload *cl, void *ctx, int dev, void *handle,
                             void **listen_comm);
/* Blocking collective: handles[k] is rank k's listen handle. */
ncclResult_t collload_connect(struct collload *cl, void *handles[], int nranks, int rank,
                              void *listen_comm, void **coll_comm);
ncclResult_t collload_reduce_support(struct collload *cl, ncclDataType_t dt, ncclRedOp_t op,
                                     int *supported);

/* v7 takes an int size: sizes above INT_MAX give ncclInvalidArgument without a call. */
ncclResult_t collload_reg_mr(struct collload *cl, void *coll_comm, void *data, size_t size,
                             int type, void **mhandle);
ncclResult_t collload_dereg_mr(struct collload *cl, void *coll_comm, void *mhandle);

/* v7/v8 take an int count: counts above INT_MAX give ncclInvalidArgument without a call.
 * *request == NULL after success means "retry the same call later". */
ncclResult_t collload_iallreduce(struct collload *cl, void *coll_comm, void *send_data,
                                 void *recv_data, size_t count, ncclDataType_t dt,
                                 ncclRedOp_t op, void *send_mhandle, void *recv_mhandle,
                                 void **request);
ncclResult_t collload_iflush(struct collload *cl, void *coll_comm, void *data, int size,
                             void *mhandle, void **request);
/* size may be NULL. */
ncclResult_t collload_test(struct collload *cl, void *request, int *done, int *size);

ncclResult_t collload_close_coll(struct collload *cl, void *coll_comm);
ncclResult_t collload_close_listen(struct collload *cl, void *listen_comm);

enum collload_fn {
  COLLLOAD_FN_REG_MR_DMABUF,
  COLLLOAD_FN_IALLGATHER,      /* v8+ */
  COLLLOAD_FN_IREDUCESCATTER,  /* v8+ */
  COLLLOAD_FN_MAKE_VDEVICE,    /* v9+ */
  COLLLOAD_FN_FINALIZE         /* v11+ */
};
/* Whether the loaded table has a non-NULL pointer for fn. */
int collload_has(const struct collload *cl, enum collload_fn fn);

#ifdef __cplusplus
}
#endif

#endif
