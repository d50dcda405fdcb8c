/* The exported ncclCollNetPlugin_v7 ... _v12 tables: thin adapters over collnet.h.
 *
 * Versions differ in argument widths (int count and size in v7/v8), in a context for init and
 * listen (v11+), in finalize and makeVDevice, and in the property struct.
 *
 * braid's CollNet does allreduce only: iallgather and ireducescatter stay NULL, NCCL's "not
 * supported".  NCCL reaches them only through CollNetDirect (2.20+) and multi-node NVLS (2.27+)
 * allgather / reducescatter, and its tuning (src/graph/tuning.cc) gives those zero bandwidth when
 * the pointer is NULL.  That holds because every NCCL version loads the newest CollNet ABI it
 * knows from here as is (v7 on 2.19, which has neither member and offers CollNet for allreduce
 * only; v8 on 2.20-2.23, v9 on 2.24-2.25, v10 on 2.26-2.27, v11 on 2.28-2.29, v12 on 2.30); an
 * older v8+ table would reach NCCL through a wrapper whose forwarders are never NULL.
 * test/unit/collnet_abi_test.cc checks both; docs/collnet.md ("AllGather and ReduceScatter")
 * names the one NCCL path that skips the check.
 *
 * Heads: NCCL's CollNet heads on a node are its unique GPUs next to NICs that the CollNet device
 * list marks coll=1 (up to 8, comm->collNetHeadsNum); braid lists every net device as a CollNet
 * device, so a node with a GPU next to each of 8 NICs has 8 heads.  With CollNetDirect every
 * head connects its own collComm (nranks = nodes, rank = node) and reduces its share of each
 * step, all at once; CollNetChain uses one head per channel.  braid-perf --algo CollNetDirect
 * drives that shape. */
#include "abi/abi_shared.h"
#include "collnet/collnet.h"
#include "log.h"
#include "api/net.h"
#include "nccl_plugin/net.h"

#define EXPORT __attribute__((visibility("default")))

static ncclResult_t cinit_v7(ncclDebugLogger_t log) {
  return braid_coll_init(NULL, 0, log, "ncclCollNetPlugin_v7");
}
static ncclResult_t cinit_v8(ncclDebugLogger_t log) {
  return braid_coll_init(NULL, 0, log, "ncclCollNetPlugin_v8");
}
static ncclResult_t cinit_v9(ncclDebugLogger_t log) {
  return braid_coll_init(NULL, 0, log, "ncclCollNetPlugin_v9");
}
static ncclResult_t cinit_v10(ncclDebugLogger_t log) {
  return braid_coll_init(NULL, 0, log, "ncclCollNetPlugin_v10");
}
static ncclResult_t cinit_v11(void **ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  return braid_coll_init(ctx, comm_id, log, "ncclCollNetPlugin_v11");
}
static ncclResult_t cinit_v12(void **ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  return braid_coll_init(ctx, comm_id, log, "ncclCollNetPlugin_v12");
}

static ncclResult_t clisten_old(int dev, void *handle, void **lc) {
  return braid_coll_listen(NULL, dev, handle, lc);
}

static ncclResult_t creduce_support(ncclDataType_t dt, ncclRedOp_t op, int *supported) {
  return braid_coll_reduce_support((int)dt, (int)op, supported);
}

static ncclResult_t creg_mr_int(void *cc, void *data, int size, int type, void **mh) {
  if (size < 0) {
    BRAID_WARN("CollNet regMr with negative size %d", size);
    return ncclInvalidArgument;
  }
  return braid_coll_reg_mr(cc, data, (size_t)size, type, mh);
}

static ncclResult_t ciallreduce_int(void *cc, void *s, void *r, int count, ncclDataType_t dt,
                                    ncclRedOp_t op, void *smh, void *rmh, void **req) {
  if (count < 0) {
    *req = NULL;
    BRAID_WARN("CollNet iallreduce with negative count %d", count);
    return ncclInvalidArgument;
  }
  return braid_coll_iallreduce(cc, s, r, (size_t)count, (int)dt, (int)op, smh, rmh, req);
}
static ncclResult_t ciallreduce(void *cc, void *s, void *r, size_t count, ncclDataType_t dt,
                                ncclRedOp_t op, void *smh, void *rmh, void **req) {
  return braid_coll_iallreduce(cc, s, r, count, (int)dt, (int)op, smh, rmh, req);
}

/* CollNet's own devices and properties (a plugin of its own to NCCL: topo/devtable.h). */
static ncclResult_t cprops_v7(int dev, ncclNetProperties_v7_t *d) { return props_v7(braid_coll_get_properties, dev, d); }
static ncclResult_t cprops_v8(int dev, ncclNetProperties_v8_t *d) { return props_v8(braid_coll_get_properties, dev, d); }
static ncclResult_t cprops_v9(int dev, ncclNetProperties_v9_t *d) { return props_v9(braid_coll_get_properties, dev, d); }
static ncclResult_t cprops_v10(int dev, ncclNetProperties_v10_t *d) { return props_v10(braid_coll_get_properties, dev, d); }
static ncclResult_t cprops_v11(int dev, ncclNetProperties_v11_t *d) { return props_v11(braid_coll_get_properties, dev, d); }
static ncclResult_t cprops_v12(int dev, ncclNetProperties_v12_t *d) { return props_v12(braid_coll_get_properties, dev, d); }
static ncclResult_t cvdev_v9(int *d, ncclNetVDeviceProps_v9_t *p) { return vdev_v9(braid_coll_make_vdevice, d, p); }
static ncclResult_t cvdev_v10(int *d, ncclNetVDeviceProps_v10_t *p) { return vdev_v10(braid_coll_make_vdevice, d, p); }
static ncclResult_t cvdev_v11(int *d, ncclNetVDeviceProps_v11_t *p) { return vdev_v11(braid_coll_make_vdevice, d, p); }
static ncclResult_t cvdev_v12(int *d, ncclNetVDeviceProps_v12_t *p) { return vdev_v12(braid_coll_make_vdevice, d, p); }

#define CTAIL                                                                                 \
  .devices = braid_coll_devices, .connect = braid_coll_connect,                               \
  .reduceSupport = creduce_support, .regMrDmaBuf = braid_coll_reg_mr_dmabuf, .deregMr = braid_coll_dereg_mr,      \
  .iflush = braid_coll_iflush, .test = braid_coll_test, .closeColl = braid_coll_close,        \
  .closeListen = braid_coll_close_listen

EXPORT ncclCollNet_v7_t ncclCollNetPlugin_v7 = {
    .name = "braid", .init = cinit_v7, .getProperties = cprops_v7, .listen = clisten_old,
    .regMr = creg_mr_int, .iallreduce = ciallreduce_int, CTAIL};

EXPORT ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    .name = "braid", .init = cinit_v8, .getProperties = cprops_v8, .listen = clisten_old,
    .regMr = braid_coll_reg_mr, .iallreduce = ciallreduce_int, .iallgather = NULL,
    .ireducescatter = NULL, CTAIL};

EXPORT ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
    .name = "braid", .init = cinit_v9, .getProperties = cprops_v9, .listen = clisten_old,
    .regMr = braid_coll_reg_mr, .iallreduce = ciallreduce, .iallgather = NULL,
    .ireducescatter = NULL, .makeVDevice = cvdev_v9, CTAIL};

EXPORT ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    .name = "braid", .init = cinit_v10, .getProperties = cprops_v10, .listen = clisten_old,
    .regMr = braid_coll_reg_mr, .iallreduce = ciallreduce, .iallgather = NULL,
    .ireducescatter = NULL, .makeVDevice = cvdev_v10, CTAIL};

EXPORT ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    .name = "braid", .init = cinit_v11, .getProperties = cprops_v11, .listen = braid_coll_listen,
    .regMr = braid_coll_reg_mr, .iallreduce = ciallreduce, .iallgather = NULL,
    .ireducescatter = NULL, .makeVDevice = cvdev_v11, .finalize = braid_coll_finalize, CTAIL};

EXPORT ncclCollNet_v12_t ncclCollNetPlugin_v12 = {
    .name = "braid", .init = cinit_v12, .getProperties = cprops_v12, .listen = braid_coll_listen,
    .regMr = braid_coll_reg_mr, .iallreduce = ciallreduce, .iallgather = NULL,
    .ireducescatter = NULL, .makeVDevice = cvdev_v12, .finalize = braid_coll_finalize, CTAIL};
