/* netload: thin adapters from the normalized (v11/v12-style) calls to each plugin version. */
#include "netload.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Context netload hands out for v7..v10, which have no per-comm context of their own. */
struct netload_compat_ctx {
  ncclNetCommConfig_v10_t config;
};

/* Calls member `fn` with identical arguments, whatever the version. */
#define NL_SAME(nl, fn, ...)                                      \
  do {                                                            \
    switch ((nl)->version) {                                      \
      case 7: return (nl)->net.v7->fn(__VA_ARGS__);               \
      case 8: return (nl)->net.v8->fn(__VA_ARGS__);               \
      case 9: return (nl)->net.v9->fn(__VA_ARGS__);               \
      case 10: return (nl)->net.v10->fn(__VA_ARGS__);             \
      case 11: return (nl)->net.v11->fn(__VA_ARGS__);             \
      case 12: return (nl)->net.v12->fn(__VA_ARGS__);             \
    }                                                             \
    return ncclInternalError;                                     \
  } while (0)

/* Same, for an optional member: ncclInvalidUsage when it is NULL. */
#define NL_OPT(nl, fn, ...)                                                               \
  do {                                                                                    \
    switch ((nl)->version) {                                                              \
      case 7: return (nl)->net.v7->fn ? (nl)->net.v7->fn(__VA_ARGS__) : ncclInvalidUsage;  \
      case 8: return (nl)->net.v8->fn ? (nl)->net.v8->fn(__VA_ARGS__) : ncclInvalidUsage;  \
      case 9: return (nl)->net.v9->fn ? (nl)->net.v9->fn(__VA_ARGS__) : ncclInvalidUsage;  \
      case 10: return (nl)->net.v10->fn ? (nl)->net.v10->fn(__VA_ARGS__) : ncclInvalidUsage; \
      case 11: return (nl)->net.v11->fn ? (nl)->net.v11->fn(__VA_ARGS__) : ncclInvalidUsage; \
      case 12: return (nl)->net.v12->fn ? (nl)->net.v12->fn(__VA_ARGS__) : ncclInvalidUsage; \
    }                                                                                     \
    return ncclInternalError;                                                             \
  } while (0)

/* ---- lifetime ------------------------------------------------------------------------------ */

static ncclResult_t nl_init_once(struct netload *nl, ncclDebugLogger_t logger,
                                 ncclProfilerCallback_t profiler) {
  switch (nl->version) {
    case 7: return nl->net.v7->init(logger);
    case 8: return nl->net.v8->init(logger);
    case 9: return nl->net.v9->init(logger);
    case 10: return nl->net.v10->init(logger, profiler);
  }
  return ncclInternalError;
}

ncclResult_t netload_init(struct netload *nl, void **ctx, uint64_t comm_id,
                          const netload_config_t *config, ncclDebugLogger_t logger,
                          ncclProfilerCallback_t profiler) {
  netload_config_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (config) cfg = *config;
  *ctx = NULL;
  if (nl->version == 11) {
    ncclNetCommConfig_v11_t c11 = {cfg.trafficClass};
    return nl->net.v11->init(ctx, comm_id, &c11, logger, profiler);
  }
  if (nl->version == 12) return nl->net.v12->init(ctx, comm_id, &cfg, logger, profiler);
  if (nl->init_refs == 0) {
    ncclResult_t r = nl_init_once(nl, logger, profiler);
    if (r != ncclSuccess) return r;
  }
  struct netload_compat_ctx *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  c->config.trafficClass = cfg.trafficClass;
  nl->init_refs++;
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t netload_finalize(struct netload *nl, void *ctx) {
  if (nl->version == 11) return nl->net.v11->finalize(ctx);
  if (nl->version == 12) return nl->net.v12->finalize(ctx);
  if (ctx) {
    free(ctx);
    nl->init_refs--;
  }
  return ncclSuccess;
}

ncclResult_t netload_devices(struct netload *nl, int *ndev) { NL_SAME(nl, devices, ndev); }

/* ---- properties ---------------------------------------------------------------------------- */

/* Defaults for the fields an old version does not report (NCCL's compatibility layers). */
void netload_props_defaults(netload_props_t *p, int dev) {
  memset(p, 0, sizeof *p);
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = MAX_NET_SIZE;
  p->maxCollBytes = MAX_COLLNET_SIZE;
  p->maxMultiRequestSize = 1;
  p->railId = NCCL_NET_ID_UNDEF;
  p->planeId = NCCL_NET_ID_UNDEF;
}

/* Fields common to every version, copied by name from any props struct. */
#define NL_COPY_BASE(dst, src)                   \
  do {                                           \
    (dst)->name = (src)->name;                   \
    (dst)->pciPath = (src)->pciPath;             \
    (dst)->guid = (src)->guid;                   \
    (dst)->ptrSupport = (src)->ptrSupport;       \
    (dst)->speed = (src)->speed;                 \
    (dst)->port = (src)->port;                   \
    (dst)->latency = (src)->latency;             \
    (dst)->maxComms = (src)->maxComms;           \
    (dst)->maxRecvs = (src)->maxRecvs;           \
    (dst)->netDeviceType = (src)->netDeviceType; \
    (dst)->netDeviceVersion = (src)->netDeviceVersion; \
  } while (0)

/* v9..v11 fields beyond v8 (vProps has 4 entries there). */
#define NL_COPY_V9(dst, src)                                            \
  do {                                                                  \
    (dst)->regIsGlobal = (src)->regIsGlobal;                            \
    (dst)->forceFlush = (src)->forceFlush;                              \
    (dst)->vProps.ndevs = (src)->vProps.ndevs;                          \
    memcpy((dst)->vProps.devs, (src)->vProps.devs, sizeof (src)->vProps.devs); \
    (dst)->maxP2pBytes = (src)->maxP2pBytes;                            \
    (dst)->maxCollBytes = (src)->maxCollBytes;                          \
  } while (0)

void netload_props_convert(int version, const union netload_raw_props *q, int dev,
                           netload_props_t *p) {
  netload_props_defaults(p, dev);
  switch (version) {
    case 7: NL_COPY_BASE(p, &q->v7); break;
    case 8: NL_COPY_BASE(p, &q->v8); p->regIsGlobal = q->v8.regIsGlobal; break;
    case 9: NL_COPY_BASE(p, &q->v9); NL_COPY_V9(p, &q->v9); break;
    case 10: NL_COPY_BASE(p, &q->v10); NL_COPY_V9(p, &q->v10); break;
    case 11:
      NL_COPY_BASE(p, &q->v11);
      NL_COPY_V9(p, &q->v11);
      p->maxMultiRequestSize = q->v11.maxMultiRequestSize;
      break;
    case 12: *p = q->v12; break;
  }
}

ncclResult_t netload_get_properties(struct netload *nl, int dev, netload_props_t *props) {
  union netload_raw_props q;
  memset(&q, 0, sizeof q);
  netload_props_defaults(&q.v12, dev); /* v12 fills the normalized layout itself */
  ncclResult_t r = ncclInternalError;
  switch (nl->version) {
    case 7: r = nl->net.v7->getProperties(dev, &q.v7); break;
    case 8: r = nl->net.v8->getProperties(dev, &q.v8); break;
    case 9: r = nl->net.v9->getProperties(dev, &q.v9); break;
    case 10: r = nl->net.v10->getProperties(dev, &q.v10); break;
    case 11: r = nl->net.v11->getProperties(dev, &q.v11); break;
    case 12: r = nl->net.v12->getProperties(dev, &q.v12); break;
  }
  if (r == ncclSuccess) netload_props_convert(nl->version, &q, dev, props);
  else netload_props_defaults(props, dev);
  return r;
}

/* ---- connection set-up --------------------------------------------------------------------- */

ncclResult_t netload_listen(struct netload *nl, void *ctx, int dev, void *handle,
                            void **listen_comm) {
  switch (nl->version) {
    case 7: return nl->net.v7->listen(dev, handle, listen_comm);
    case 8: return nl->net.v8->listen(dev, handle, listen_comm);
    case 9: return nl->net.v9->listen(dev, handle, listen_comm);
    case 10: return nl->net.v10->listen(dev, handle, listen_comm);
    case 11: return nl->net.v11->listen(ctx, dev, handle, listen_comm);
    case 12: return nl->net.v12->listen(ctx, dev, handle, listen_comm);
  }
  return ncclInternalError;
}

ncclResult_t netload_connect(struct netload *nl, void *ctx, int dev, void *handle,
                             void **send_comm, netload_devhandle_t **dev_comm) {
  struct netload_compat_ctx *c = ctx;
  switch (nl->version) {
    case 7: return nl->net.v7->connect(dev, handle, send_comm, dev_comm);
    case 8: return nl->net.v8->connect(dev, handle, send_comm, dev_comm);
    case 9: return nl->net.v9->connect(dev, handle, send_comm, dev_comm);
    case 10: return nl->net.v10->connect(dev, c ? &c->config : NULL, handle, send_comm, dev_comm);
    case 11: return nl->net.v11->connect(ctx, dev, handle, send_comm, dev_comm);
    case 12: return nl->net.v12->connect(ctx, dev, handle, send_comm, dev_comm);
  }
  return ncclInternalError;
}

ncclResult_t netload_accept(struct netload *nl, void *listen_comm, void **recv_comm,
                            netload_devhandle_t **dev_comm) {
  NL_SAME(nl, accept, listen_comm, recv_comm, dev_comm);
}

/* ---- memory registration ------------------------------------------------------------------- */

ncclResult_t netload_reg_mr(struct netload *nl, void *comm, void *data, size_t size, int type,
                            void **mhandle) {
  if (nl->version == 7) {
    if (size > INT_MAX) return ncclInvalidArgument;
    return nl->net.v7->regMr(comm, data, (int)size, type, mhandle);
  }
  switch (nl->version) {
    case 8: return nl->net.v8->regMr(comm, data, size, type, mhandle);
    case 9: return nl->net.v9->regMr(comm, data, size, type, mhandle);
    case 10: return nl->net.v10->regMr(comm, data, size, type, mhandle);
    case 11: return nl->net.v11->regMr(comm, data, size, type, mhandle);
    case 12: return nl->net.v12->regMr(comm, data, size, type, mhandle);
  }
  return ncclInternalError;
}

ncclResult_t netload_reg_mr_dmabuf(struct netload *nl, void *comm, void *data, size_t size,
                                   int type, uint64_t offset, int fd, void **mhandle) {
  NL_OPT(nl, regMrDmaBuf, comm, data, size, type, offset, fd, mhandle);
}

ncclResult_t netload_dereg_mr(struct netload *nl, void *comm, void *mhandle) {
  NL_SAME(nl, deregMr, comm, mhandle);
}

/* ---- data path ----------------------------------------------------------------------------- */

ncclResult_t netload_isend(struct netload *nl, void *send_comm, void *data, size_t size, int tag,
                           void *mhandle, void *phandle, void **request) {
  if (nl->version <= 8 && size > INT_MAX) return ncclInvalidArgument;
  switch (nl->version) {
    case 7: return nl->net.v7->isend(send_comm, data, (int)size, tag, mhandle, request);
    case 8: return nl->net.v8->isend(send_comm, data, (int)size, tag, mhandle, request);
    case 9: return nl->net.v9->isend(send_comm, data, size, tag, mhandle, request);
    case 10: return nl->net.v10->isend(send_comm, data, size, tag, mhandle, phandle, request);
    case 11: return nl->net.v11->isend(send_comm, data, size, tag, mhandle, phandle, request);
    case 12: return nl->net.v12->isend(send_comm, data, size, tag, mhandle, phandle, request);
  }
  return ncclInternalError;
}

/* v7/v8: irecv sizes are int, and no optional-completion hint (NCCL's shims clear it). */
static ncclResult_t nl_irecv_int(struct netload *nl, void *comm, int n, void **data,
                                 size_t *sizes, int *tags, void **mh, void **request) {
  int isz[NETLOAD_MAX_RECVS];
  if (*request == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION) *request = NULL;
  if (n < 0 || n > NETLOAD_MAX_RECVS) return ncclInvalidArgument;
  for (int i = 0; i < n; i++) {
    if (sizes[i] > INT_MAX) return ncclInvalidArgument;
    isz[i] = (int)sizes[i];
  }
  if (nl->version == 7) return nl->net.v7->irecv(comm, n, data, isz, tags, mh, request);
  return nl->net.v8->irecv(comm, n, data, isz, tags, mh, request);
}

ncclResult_t netload_irecv(struct netload *nl, void *recv_comm, int n, void **data,
                           size_t *sizes, int *tags, void **mhandles, void **phandles,
                           void **request) {
  switch (nl->version) {
    case 7:
    case 8: return nl_irecv_int(nl, recv_comm, n, data, sizes, tags, mhandles, request);
    case 9: return nl->net.v9->irecv(recv_comm, n, data, sizes, tags, mhandles, request);
    case 10:
      return nl->net.v10->irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
    case 11:
      return nl->net.v11->irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
    case 12:
      return nl->net.v12->irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
  }
  return ncclInternalError;
}

ncclResult_t netload_iflush(struct netload *nl, void *recv_comm, int n, void **data, int *sizes,
                            void **mhandles, void **request) {
  NL_SAME(nl, iflush, recv_comm, n, data, sizes, mhandles, request);
}

ncclResult_t netload_test(struct netload *nl, void *request, int *done, int *sizes) {
  NL_SAME(nl, test, request, done, sizes);
}

ncclResult_t netload_close_send(struct netload *nl, void *c) { NL_SAME(nl, closeSend, c); }
ncclResult_t netload_close_recv(struct netload *nl, void *c) { NL_SAME(nl, closeRecv, c); }
ncclResult_t netload_close_listen(struct netload *nl, void *c) { NL_SAME(nl, closeListen, c); }

/* ---- optional entry points ----------------------------------------------------------------- */

ncclResult_t netload_get_device_mr(struct netload *nl, void *comm, void *mhandle, void **dptr) {
  NL_OPT(nl, getDeviceMr, comm, mhandle, dptr);
}

ncclResult_t netload_irecv_consumed(struct netload *nl, void *recv_comm, int n, void *request) {
  NL_OPT(nl, irecvConsumed, recv_comm, n, request);
}

ncclResult_t netload_make_vdevice(struct netload *nl, int *d, netload_vprops_t *props) {
  if (nl->version == 12)
    return nl->net.v12->makeVDevice ? nl->net.v12->makeVDevice(d, props) : ncclInvalidUsage;
  if (nl->version < 9) return ncclInvalidUsage;
  if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V11) return ncclInvalidArgument;
  ncclNetVDeviceProps_v11_t q = {props->ndevs, {0}};
  memcpy(q.devs, props->devs, sizeof q.devs);
  /* v9..v11 vProps have the same layout, only the type names differ. */
  switch (nl->version) {
    case 9:
      return nl->net.v9->makeVDevice ? nl->net.v9->makeVDevice(d, (ncclNetVDeviceProps_v9_t *)&q)
                                     : ncclInvalidUsage;
    case 10:
      return nl->net.v10->makeVDevice
                 ? nl->net.v10->makeVDevice(d, (ncclNetVDeviceProps_v10_t *)&q)
                 : ncclInvalidUsage;
    case 11: return nl->net.v11->makeVDevice ? nl->net.v11->makeVDevice(d, &q) : ncclInvalidUsage;
  }
  return ncclInternalError;
}

ncclResult_t netload_set_net_attr(struct netload *nl, void *ctx, netload_attr_t *attr) {
  if (nl->version == 12)
    return nl->net.v12->setNetAttr ? nl->net.v12->setNetAttr(ctx, attr) : ncclInvalidUsage;
  if (nl->version == 11) {
    ncclNetAttr_v11_t a;
    memcpy(&a, attr, sizeof a); /* identical layout (static assertions in net.h) */
    return nl->net.v11->setNetAttr ? nl->net.v11->setNetAttr(ctx, &a) : ncclInvalidUsage;
  }
  return ncclInvalidUsage;
}

/* Member pointer of fn in the loaded table, as a boolean. */
int netload_has(const struct netload *nl, enum netload_fn fn) {
  int v = nl->version;
  if (!nl->net.any) return 0;
  switch (fn) {
    case NETLOAD_FN_FINALIZE:
      return (v == 11 && nl->net.v11->finalize) || (v == 12 && nl->net.v12->finalize);
    case NETLOAD_FN_SET_NET_ATTR:
      return (v == 11 && nl->net.v11->setNetAttr) || (v == 12 && nl->net.v12->setNetAttr);
    case NETLOAD_FN_MAKE_VDEVICE:
      return (v == 9 && nl->net.v9->makeVDevice) || (v == 10 && nl->net.v10->makeVDevice) ||
             (v == 11 && nl->net.v11->makeVDevice) || (v == 12 && nl->net.v12->makeVDevice);
    case NETLOAD_FN_REG_MR_DMABUF:
      /* regMrDmaBuf, getDeviceMr and irecvConsumed sit at the same place in every version. */
      return nl->net.v7->regMrDmaBuf != NULL;
    case NETLOAD_FN_GET_DEVICE_MR: return nl->net.v7->getDeviceMr != NULL;
    case NETLOAD_FN_IRECV_CONSUMED: return nl->net.v7->irecvConsumed != NULL;
  }
  return 0;
}
