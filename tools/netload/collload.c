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

ncclResult_t collload_get_properties(struct collload *cl, int dev, netload_props_t *p) {
  union netload_raw_props q;
  memset(&q, 0, sizeof q);
  netload_props_defaults(&q.v12, dev); /* v12 fills the normalized layout itself */
  netload_props_defaults(p, dev);
  ncclResult_t r = ncclInternalError;
  switch (cl->version) {
    case 7: r = cl->coll.v7->getProperties(dev, &q.v7); break;
    case 8: r = cl->coll.v8->getProperties(dev, &q.v8); break;
    case 9: r = cl->coll.v9->getProperties(dev, &q.v9); break;
    case 10: r = cl->coll.v10->getProperties(dev, &q.v10); break;
    case 11: r = cl->coll.v11->getProperties(dev, &q.v11); break;
    case 12: r = cl->coll.v12->getProperties(dev, &q.v12); break;
  }
  if (r == ncclSuccess) netload_props_convert(cl->version, &q, dev, p);
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
