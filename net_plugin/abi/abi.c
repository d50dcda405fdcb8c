/* The exported ncclNetPlugin_v7 ... _v12 tables: thin adapters over net.h's braid_net_* calls,
 * implemented by net.c (libnccl-net-braid.so) or by the braid-trace wrapper.
 *
 * Versions differ only in argument shapes (int vs size_t sizes, a context or not, profiler
 * handles) and in which property fields exist; each adapter converts and forwards.  No tuner or
 * CollNet symbol is exported from here (NCCL would pick a tuner up from the net library unasked). */
#include <string.h>

#include "abi/abi_shared.h"
#include "log.h"
#include "api/net.h"
#include "nccl_plugin/net.h"

#define EXPORT __attribute__((visibility("default")))
/* Defined by the implementation linked in: "braid" (net.c), or the trace wrapper's name. */
#define PLUGIN_NAME braid_plugin_name

/* ---------- properties ---------- */

#define PROPS_V7_FIELDS(d, p)                                 \
  do {                                                        \
    (d)->name = (char *)(p).name;                             \
    (d)->pciPath = (char *)(p).pci_path;                      \
    (d)->guid = (p).guid;                                     \
    (d)->ptrSupport = (p).ptr_support;                        \
    (d)->speed = (p).speed;                                   \
    (d)->port = (p).port;                                     \
    (d)->latency = (p).latency;                               \
    (d)->maxComms = (p).max_comms;                            \
    (d)->maxRecvs = (p).max_recvs;                            \
    (d)->netDeviceType = (ncclNetDeviceType)(p).net_device_type; \
    (d)->netDeviceVersion = (p).net_device_version;           \
  } while (0)

#define PROPS_V9_FIELDS(d, p)                                             \
  do {                                                                    \
    PROPS_V7_FIELDS(d, p);                                                \
    (d)->regIsGlobal = (p).reg_is_global;                                 \
    (d)->forceFlush = (p).force_flush;                                    \
    (d)->vProps.ndevs = (p).ndevs;                                        \
    for (int i_ = 0; i_ < (p).ndevs; i_++) (d)->vProps.devs[i_] = (p).devs[i_]; \
    (d)->maxP2pBytes = (p).max_p2p_bytes;                                 \
    (d)->maxCollBytes = (p).max_coll_bytes;                               \
  } while (0)

/* props_vN: braid's one representation, from get (the net's or CollNet's properties), converted
 * to version N's struct (abi_shared.h). */
#define PROPS_FN(V, FIELDS)                                                              \
  ncclResult_t props_v##V(braid_props_fn get, int dev, ncclNetProperties_v##V##_t *d) { \
    struct braid_props p;                                                                \
    ncclResult_t rc = get(dev, &p);                                                      \
    if (rc) return rc;                                                                   \
    memset(d, 0, sizeof *d);                                                             \
    FIELDS;                                                                              \
    return ncclSuccess;                                                                  \
  }

PROPS_FN(7, PROPS_V7_FIELDS(d, p))
PROPS_FN(8, PROPS_V7_FIELDS(d, p); d->regIsGlobal = p.reg_is_global)
PROPS_FN(9, PROPS_V9_FIELDS(d, p))
PROPS_FN(10, PROPS_V9_FIELDS(d, p))
PROPS_FN(11, PROPS_V9_FIELDS(d, p); d->maxMultiRequestSize = p.max_multi_request_size)
PROPS_FN(12, PROPS_V9_FIELDS(d, p); d->maxMultiRequestSize = p.max_multi_request_size;
         d->railId = p.rail_id; d->planeId = p.plane_id)

/* The net's: its own devices (CollNet's are collnet_abi.c's). */
static ncclResult_t nprops_v7(int dev, ncclNetProperties_v7_t *d) { return props_v7(braid_net_get_properties, dev, d); }
static ncclResult_t nprops_v8(int dev, ncclNetProperties_v8_t *d) { return props_v8(braid_net_get_properties, dev, d); }
static ncclResult_t nprops_v9(int dev, ncclNetProperties_v9_t *d) { return props_v9(braid_net_get_properties, dev, d); }
static ncclResult_t nprops_v10(int dev, ncclNetProperties_v10_t *d) { return props_v10(braid_net_get_properties, dev, d); }
static ncclResult_t nprops_v11(int dev, ncclNetProperties_v11_t *d) { return props_v11(braid_net_get_properties, dev, d); }
static ncclResult_t nprops_v12(int dev, ncclNetProperties_v12_t *d) { return props_v12(braid_net_get_properties, dev, d); }

/* ---------- lifetime ---------- */

static ncclResult_t init_v7(ncclDebugLogger_t log) {
  return braid_net_init(NULL, 0, -1, log, "ncclNetPlugin_v7");
}
static ncclResult_t init_v8(ncclDebugLogger_t log) {
  return braid_net_init(NULL, 0, -1, log, "ncclNetPlugin_v8");
}
static ncclResult_t init_v9(ncclDebugLogger_t log) {
  return braid_net_init(NULL, 0, -1, log, "ncclNetPlugin_v9");
}
static ncclResult_t init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)prof;
  return braid_net_init(NULL, 0, -1, log, "ncclNetPlugin_v10");
}
static ncclResult_t init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                             ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)prof;
  return braid_net_init(ctx, comm_id, config ? config->trafficClass : -1, log, "ncclNetPlugin_v11");
}
static ncclResult_t init_v12(void **ctx, uint64_t comm_id, ncclNetCommConfig_v12_t *config,
                             ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)prof;
  return braid_net_init(ctx, comm_id, config ? config->trafficClass : -1, log, "ncclNetPlugin_v12");
}

static ncclResult_t set_attr_v11(void *ctx, ncclNetAttr_v11_t *a) {
  return a ? braid_net_set_attr(ctx, a->sendCommAttr.maxConcurrentPeers,
                                a->sendCommAttr.maxFlowsPerPeer, a->op)
           : ncclSuccess;
}
static ncclResult_t set_attr_v12(void *ctx, ncclNetAttr_v12_t *a) {
  return a ? braid_net_set_attr(ctx, a->sendCommAttr.maxConcurrentPeers,
                                a->sendCommAttr.maxFlowsPerPeer, a->op)
           : ncclSuccess;
}

/* ---------- connection set-up (device handles: braid is a HOST device, none offered) ---------- */

static ncclResult_t listen_old(int dev, void *handle, void **lc) {
  return braid_net_listen(NULL, dev, handle, lc);
}
static ncclResult_t connect_old(int dev, void *handle, void **sc, ncclNetDeviceHandle_v7_t **dc) {
  (void)dc;
  return braid_net_connect(NULL, dev, NCCL_NET_TRAFFIC_CLASS_UNDEF, handle, sc);
}
/* NCCL 2.26/2.27 pass the communicator's trafficClass with every connect (v11 moved it to init). */
static ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle, void **sc,
                                ncclNetDeviceHandle_v10_t **dc) {
  (void)dc;
  return braid_net_connect(NULL, dev, config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
                           handle, sc);
}
static ncclResult_t connect_ctx(void *ctx, int dev, void *handle, void **sc,
                                ncclNetDeviceHandle_v11_t **dc) {
  (void)dc;
  return braid_net_connect(ctx, dev, NCCL_NET_TRAFFIC_CLASS_UNDEF, handle, sc);
}
static ncclResult_t accept_any(void *lc, void **rc, ncclNetDeviceHandle_v7_t **dc) {
  (void)dc;
  return braid_net_accept(lc, rc);
}

/* ---------- data path ---------- */

static ncclResult_t reg_mr_int(void *comm, void *data, int size, int type, void **mh) {
  if (size < 0) {
    BRAID_WARN("regMr with negative size %d", size);
    return ncclInvalidArgument;
  }
  return braid_net_reg_mr(comm, data, (size_t)size, type, mh);
}

static ncclResult_t isend_int(void *sc, void *data, int size, int tag, void *mh, void **req) {
  if (size < 0) {
    *req = NULL;
    BRAID_WARN("isend with negative size %d", size);
    return ncclInvalidArgument;
  }
  return braid_net_isend(sc, data, (size_t)size, tag, mh, req);
}
static ncclResult_t isend_v9(void *sc, void *data, size_t size, int tag, void *mh, void **req) {
  return braid_net_isend(sc, data, size, tag, mh, req);
}
static ncclResult_t isend_v10(void *sc, void *data, size_t size, int tag, void *mh, void *ph,
                              void **req) {
  (void)ph;
  return braid_net_isend(sc, data, size, tag, mh, req);
}

/* v7/v8 know no optional-completion hint (NCCL's shims for them clear it): whatever *req holds
 * is not one.  v9+ pass *req through for braid_net_irecv to read. */
static ncclResult_t irecv_int(void *rc, int n, void **data, int *sizes, int *tags, void **mh,
                              void **req) {
  size_t wide[8] = {0};
  *req = NULL;
  if (n < 1 || n > 8) return braid_net_irecv(rc, n, data, wide, tags, mh, req); /* rejects n */
  for (int i = 0; i < n; i++) wide[i] = sizes[i] < 0 ? 0 : (size_t)sizes[i];
  return braid_net_irecv(rc, n, data, wide, tags, mh, req);
}
static ncclResult_t irecv_v9(void *rc, int n, void **data, size_t *sizes, int *tags, void **mh,
                             void **req) {
  return braid_net_irecv(rc, n, data, sizes, tags, mh, req);
}
static ncclResult_t irecv_v10(void *rc, int n, void **data, size_t *sizes, int *tags, void **mh,
                              void **ph, void **req) {
  (void)ph;
  return braid_net_irecv(rc, n, data, sizes, tags, mh, req);
}

/* vdev_vN: version N's makeVDevice arguments handed to fuse (the net's or CollNet's). */
ncclResult_t vdev_v9(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v9_t *p) {
  return p ? fuse(d, p->ndevs, p->devs, NCCL_NET_MAX_DEVS_PER_NIC_V11) : ncclInvalidArgument;
}
ncclResult_t vdev_v10(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v10_t *p) {
  return p ? fuse(d, p->ndevs, p->devs, NCCL_NET_MAX_DEVS_PER_NIC_V11) : ncclInvalidArgument;
}
ncclResult_t vdev_v11(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v11_t *p) {
  return p ? fuse(d, p->ndevs, p->devs, NCCL_NET_MAX_DEVS_PER_NIC_V11) : ncclInvalidArgument;
}
ncclResult_t vdev_v12(braid_fuse_fn fuse, int *d, ncclNetVDeviceProps_v12_t *p) {
  return p ? fuse(d, p->ndevs, p->devs, NCCL_NET_MAX_DEVS_PER_NIC_V12) : ncclInvalidArgument;
}

static ncclResult_t nvdev_v9(int *d, ncclNetVDeviceProps_v9_t *p) { return vdev_v9(braid_net_make_vdevice, d, p); }
static ncclResult_t nvdev_v10(int *d, ncclNetVDeviceProps_v10_t *p) { return vdev_v10(braid_net_make_vdevice, d, p); }
static ncclResult_t nvdev_v11(int *d, ncclNetVDeviceProps_v11_t *p) { return vdev_v11(braid_net_make_vdevice, d, p); }
static ncclResult_t nvdev_v12(int *d, ncclNetVDeviceProps_v12_t *p) { return vdev_v12(braid_net_make_vdevice, d, p); }

/* ---------- the tables ---------- */

#define COMMON_TAIL                                                                   \
  .deregMr = braid_net_dereg_mr, .iflush = braid_net_iflush, .test = braid_net_test, \
  .closeSend = braid_net_close_send, .closeRecv = braid_net_close_recv,              \
  .closeListen = braid_net_close_listen, .getDeviceMr = NULL, .irecvConsumed = NULL, \
  .regMrDmaBuf = braid_net_reg_mr_dmabuf

EXPORT ncclNet_v7_t ncclNetPlugin_v7 = {
    .name = PLUGIN_NAME, .init = init_v7, .devices = braid_net_devices,
    .getProperties = nprops_v7, .listen = listen_old, .connect = connect_old,
    .accept = accept_any, .regMr = reg_mr_int, .isend = isend_int, .irecv = irecv_int,
    COMMON_TAIL};

EXPORT ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = PLUGIN_NAME, .init = init_v8, .devices = braid_net_devices,
    .getProperties = nprops_v8, .listen = listen_old, .connect = connect_old,
    .accept = accept_any, .regMr = braid_net_reg_mr, .isend = isend_int, .irecv = irecv_int,
    COMMON_TAIL};

EXPORT ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = PLUGIN_NAME, .init = init_v9, .devices = braid_net_devices,
    .getProperties = nprops_v9, .listen = listen_old, .connect = connect_old,
    .accept = accept_any, .regMr = braid_net_reg_mr, .isend = isend_v9, .irecv = irecv_v9,
    .makeVDevice = nvdev_v9, COMMON_TAIL};

EXPORT ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = PLUGIN_NAME, .init = init_v10, .devices = braid_net_devices,
    .getProperties = nprops_v10, .listen = listen_old, .connect = connect_v10,
    .accept = accept_any, .regMr = braid_net_reg_mr, .isend = isend_v10, .irecv = irecv_v10,
    .makeVDevice = nvdev_v10, COMMON_TAIL};

EXPORT ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = PLUGIN_NAME, .init = init_v11, .devices = braid_net_devices,
    .getProperties = nprops_v11, .listen = braid_net_listen, .connect = connect_ctx,
    .accept = accept_any, .regMr = braid_net_reg_mr, .isend = isend_v10, .irecv = irecv_v10,
    .makeVDevice = nvdev_v11, .finalize = braid_net_finalize, .setNetAttr = set_attr_v11,
    COMMON_TAIL};

EXPORT ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = PLUGIN_NAME, .init = init_v12, .devices = braid_net_devices,
    .getProperties = nprops_v12, .listen = braid_net_listen, .connect = connect_ctx,
    .accept = accept_any, .regMr = braid_net_reg_mr, .isend = isend_v10, .irecv = irecv_v10,
    .makeVDevice = nvdev_v12, .finalize = braid_net_finalize, .setNetAttr = set_attr_v12,
    COMMON_TAIL};
