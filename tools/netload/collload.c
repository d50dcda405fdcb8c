/* collload: thin adapters from the normalized (v11/v12-style) CollNet calls to each version. */
#include "collload.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls member `fn` with identical arguments, whatever the version. */
#define CL_SAME(cl, fn, ...)                                      \
  do {                                                            \
    switch ((cl)->version) {                                      \
      case 7: return (cl)->coll.v7->fn(__VA_ARGS__);              \
      case 8: return (cl)->coll.v8->fn(__VA_ARGS__);              \
      case 9: return (cl)->coll.v9->fn(__VA_ARGS__);              \
      case 10: return (cl)->coll.v10->fn(__VA_ARGS__);            \
      case 11: return (cl)->coll.v11->fn(__VA_ARGS__);            \
      case 12: return (cl)->coll.v12->fn(__VA_ARGS__);            \
    }                                                             \
    return ncclInternalError;                                     \
  } while (0)

/* The placeholder context handed out for v7..v10, which have no per-comm context. */
static char collload_compat_ctx;

ncclResult_t collload_open(struct collload *cl, const struct netload *nl, int max_version,
                           char *err, size_t errlen) {
  memset(cl, 0, sizeof *cl);
  if (err && errlen) err[0] = '\0';
  if (max_version <= 0 || max_version > NETLOAD_MAX_VERSION) max_version = NETLOAD_MAX_VERSION;
  if (!nl->lib) {
    if (err && errlen) snprintf(err, errlen, "no net plugin library is open");
    return ncclInvalidUsage;
  }
  for (int v = max_version; v >= NETLOAD_MIN_VERSION; v--) {
    char sym[40];
    snprintf(sym, sizeof sym, "ncclCollNetPlugin_v%d", v);
    const void *t = dlsym(nl->lib, sym);
    if (!t) continue;
    cl->coll.any = t;
    cl->version = v;
    cl->name = *(const char *const *)t; /* `name` is the first member of every version */
    return ncclSuccess;
  }
  if (err && errlen)
    snprintf(err, errlen, "%s exports no ncclCollNetPlugin_v%d..v%d symbol (the plugin has no "
             "CollNet)", nl->path, NETLOAD_MIN_VERSION, max_version);
  return ncclInvalidUsage;
}

/* ---- lifetime ------------------------------------------------------------------------------ */

static ncclResult_t cl_init_once(struct collload *cl, ncclDebugLogger_t logger) {
  switch (cl->version) {
    case 7: return cl->coll.v7->init(logger);
    case 8: return cl->coll.v8->init(logger);
    case 9: return cl->coll.v9->init(logger);
    case 10: return cl->coll.v10->init(logger);
  }
  return ncclInternalError;
}

ncclResult_t collload_init(struct collload *cl, void **ctx, uint64_t comm_id,
                           ncclDebugLogger_t logger) {
  *ctx = NULL;
  if (cl->version == 11) return cl->coll.v11->init(ctx, comm_id, logger);
  if (cl->version == 12) return cl->coll.v12->init(ctx, comm_id, logger);
  if (cl->init_refs == 0) {
    ncclResult_t r = cl_init_once(cl, logger);
    if (r != ncclSuccess) return r;
  }
  cl->init_refs++;
  *ctx = &collload_compat_ctx;
  return ncclSuccess;
}

ncclResult_t collload_finalize(struct collload *cl, void *ctx) {
  if (cl->version == 11)
    return cl->coll.v11->finalize ? cl->coll.v11->finalize(ctx) : ncclInvalidUsage;
  if (cl->version == 12)
    return cl->coll.v12->finalize ? cl->coll.v12->finalize(ctx) : ncclInvalidUsage;
  if (ctx == &collload_compat_ctx && cl->init_refs > 0) cl->init_refs--;
  return ncclSuccess;
}

ncclResult_t collload_devices(struct collload *cl, int *ndev) { CL_SAME(cl, devices, ndev); }

/* ---- properties ---------------------------------------------------------------------------- */

/* netload's defaults for what an old version does not report (NCCL's compatibility layers). */
static void cl_props_defaults(netload_props_t *p, int dev) {
  memset(p, 0, sizeof *p);
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = MAX_NET_SIZE;
  p->maxCollBytes = MAX_COLLNET_SIZE;
  p->maxMultiRequestSize = 1;
  p->railId = NCCL_NET_ID_UNDEF;
  p->planeId = NCCL_NET_ID_UNDEF;
}

/* Members every version has, copied by name. */
#define CL_COPY_BASE(d, s)                                                              \
  do {                                                                                  \
    (d)->name = (s)->name, (d)->pciPath = (s)->pciPath, (d)->guid = (s)->guid;          \
    (d)->ptrSupport = (s)->ptrSupport, (d)->speed = (s)->speed, (d)->port = (s)->port;  \
    (d)->latency = (s)->latency, (d)->maxComms = (s)->maxComms;                         \
    (d)->maxRecvs = (s)->maxRecvs, (d)->netDeviceType = (s)->netDeviceType;             \
    (d)->netDeviceVersion = (s)->netDeviceVersion;                                      \
  } while (0)

/* v9..v11 members beyond v8 (vProps holds 4 devices there). */
#define CL_COPY_V9(d, s)                                                                \
  do {                                                                                  \
    (d)->regIsGlobal = (s)->regIsGlobal, (d)->forceFlush = (s)->forceFlush;             \
    (d)->vProps.ndevs = (s)->vProps.ndevs;                                              \
    memcpy((d)->vProps.devs, (s)->vProps.devs, sizeof (s)->vProps.devs);               \
    (d)->maxP2pBytes = (s)->maxP2pBytes, (d)->maxCollBytes = (s)->maxCollBytes;         \
  } while (0)

/* Calls getProperties of version V into the zeroed struct q; R receives the result. */
#define CL_PROPS(V, R, q)                                                               \
  do {                                                                                  \
    memset(&(q), 0, sizeof(q));                                                         \
    (R) = cl->coll.V->getProperties(dev, &(q));                                         \
  } while (0)

ncclResult_t collload_get_properties(struct collload *cl, int dev, netload_props_t *p) {
  ncclResult_t r = ncclInternalError;
  cl_props_defaults(p, dev);
  switch (cl->version) {
    case 7: {
      ncclNetProperties_v7_t q;
      CL_PROPS(v7, r, q);
      if (r == ncclSuccess) CL_COPY_BASE(p, &q);
      break;
    }
    case 8: {
      ncclNetProperties_v8_t q;
      CL_PROPS(v8, r, q);
      if (r != ncclSuccess) break;
      CL_COPY_BASE(p, &q);
      p->regIsGlobal = q.regIsGlobal;
      break;
    }
    case 9: {
      ncclNetProperties_v9_t q;
      CL_PROPS(v9, r, q);
      if (r != ncclSuccess) break;
      CL_COPY_BASE(p, &q);
      CL_COPY_V9(p, &q);
      break;
    }
    case 10: {
      ncclNetProperties_v10_t q;
      CL_PROPS(v10, r, q);
      if (r != ncclSuccess) break;
      CL_COPY_BASE(p, &q);
      CL_COPY_V9(p, &q);
      break;
    }
    case 11: {
      ncclNetProperties_v11_t q;
      CL_PROPS(v11, r, q);
      if (r != ncclSuccess) break;
      CL_COPY_BASE(p, &q);
      CL_COPY_V9(p, &q);
      p->maxMultiRequestSize = q.maxMultiRequestSize;
      break;
    }
    case 12: r = cl->coll.v12->getProperties(dev, p); break;
  }
  return r;
}

/* ---- connection set-up --------------------------------------------------------------------- */

ncclResult_t collload_listen(struct collload *cl, void *ctx, int dev, void *handle,
                             void **listen_comm) {
  switch (cl->version) {
    case 7: return cl->coll.v7->listen(dev, handle, listen_comm);
    case 8: return cl->coll.v8->listen(dev, handle, listen_comm);
    case 9: return cl->coll.v9->listen(dev, handle, listen_comm);
    case 10: return cl->coll.v10->listen(dev, handle, listen_comm);
    case 11: return cl->coll.v11->listen(ctx, dev, handle, listen_comm);
    case 12: return cl->coll.v12->listen(ctx, dev, handle, listen_comm);
  }
  return ncclInternalError;
}

ncclResult_t collload_connect(struct collload *cl, void *handles[], int nranks, int rank,
                              void *listen_comm, void **coll_comm) {
  CL_SAME(cl, connect, handles, nranks, rank, listen_comm, coll_comm);
}

ncclResult_t collload_reduce_support(struct collload *cl, ncclDataType_t dt, ncclRedOp_t op,
                                     int *supported) {
  CL_SAME(cl, reduceSupport, dt, op, supported);
}

/* ---- memory registration ------------------------------------------------------------------- */

ncclResult_t collload_reg_mr(struct collload *cl, void *comm, void *data, size_t size, int type,
                             void **mhandle) {
  if (cl->version == 7) {
    if (size > INT_MAX) return ncclInvalidArgument;
    return cl->coll.v7->regMr(comm, data, (int)size, type, mhandle);
  }
  switch (cl->version) {
    case 8: return cl->coll.v8->regMr(comm, data, size, type, mhandle);
    case 9: return cl->coll.v9->regMr(comm, data, size, type, mhandle);
    case 10: return cl->coll.v10->regMr(comm, data, size, type, mhandle);
    case 11: return cl->coll.v11->regMr(comm, data, size, type, mhandle);
    case 12: return cl->coll.v12->regMr(comm, data, size, type, mhandle);
  }
  return ncclInternalError;
}

ncclResult_t collload_dereg_mr(struct collload *cl, void *comm, void *mhandle) {
  CL_SAME(cl, deregMr, comm, mhandle);
}

/* ---- data path ----------------------------------------------------------------------------- */

ncclResult_t collload_iallreduce(struct collload *cl, void *comm, void *send, void *recv,
                                 size_t count, ncclDataType_t dt, ncclRedOp_t op, void *smh,
                                 void *rmh, void **request) {
  if (cl->version <= 8 && count > INT_MAX) return ncclInvalidArgument;
  switch (cl->version) {
    case 7: return cl->coll.v7->iallreduce(comm, send, recv, (int)count, dt, op, smh, rmh, request);
    case 8: return cl->coll.v8->iallreduce(comm, send, recv, (int)count, dt, op, smh, rmh, request);
    case 9: return cl->coll.v9->iallreduce(comm, send, recv, count, dt, op, smh, rmh, request);
    case 10: return cl->coll.v10->iallreduce(comm, send, recv, count, dt, op, smh, rmh, request);
    case 11: return cl->coll.v11->iallreduce(comm, send, recv, count, dt, op, smh, rmh, request);
    case 12: return cl->coll.v12->iallreduce(comm, send, recv, count, dt, op, smh, rmh, request);
  }
  return ncclInternalError;
}

ncclResult_t collload_iflush(struct collload *cl, void *comm, void *data, int size,
                             void *mhandle, void **request) {
  CL_SAME(cl, iflush, comm, data, size, mhandle, request);
}

ncclResult_t collload_test(struct collload *cl, void *request, int *done, int *size) {
  CL_SAME(cl, test, request, done, size);
}

ncclResult_t collload_close_coll(struct collload *cl, void *c) { CL_SAME(cl, closeColl, c); }
ncclResult_t collload_close_listen(struct collload *cl, void *c) { CL_SAME(cl, closeListen, c); }

/* ---- optional entry points ----------------------------------------------------------------- */

int collload_has(const struct collload *cl, enum collload_fn fn) {
  int v = cl->version;
  if (!cl->coll.any) return 0;
  switch (fn) {
    case COLLLOAD_FN_REG_MR_DMABUF: /* at the same place in every version */
      return cl->coll.v7->regMrDmaBuf != NULL;
    case COLLLOAD_FN_IALLGATHER:
      return v >= 8 && cl->coll.v8->iallgather != NULL; /* same place in v8..v12 */
    case COLLLOAD_FN_IREDUCESCATTER:
      return v >= 8 && cl->coll.v8->ireducescatter != NULL;
    case COLLLOAD_FN_MAKE_VDEVICE:
      return (v == 9 && cl->coll.v9->makeVDevice) || (v == 10 && cl->coll.v10->makeVDevice) ||
             (v == 11 && cl->coll.v11->makeVDevice) || (v == 12 && cl->coll.v12->makeVDevice);
    case COLLLOAD_FN_FINALIZE:
      return (v == 11 && cl->coll.v11->finalize) || (v == 12 && cl->coll.v12->finalize);
  }
  return 0;
}
