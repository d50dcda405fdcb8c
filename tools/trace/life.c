/* braid-trace: init, finalize, devices, properties and attribute hints, forwarded and logged. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "api/net.h"
#include "trace.h"

/* NCCL matches NCCL_NET against this: the wrapper answers to braid's name, so NCCL_NET=braid
 * selects the traced braid too (see README.md for wrapping other plugins). */
const char braid_plugin_name[] = "braid";

/* "ncclNetPlugin_v11" -> "v11". */
static const char *life_abi(const char *abi) {
  const char *v = abi ? strrchr(abi, '_') : NULL;
  return v ? v + 1 : "-";
}

/* A new context: the inner plugin's init, then ours around it. */
static ncclResult_t life_new_ctx(uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger,
                                 struct trace_ctx **out) {
  netload_config_t cfg = {traffic_class};
  void *inner = NULL;
  ncclResult_t rc = netload_init(&trace_nl, &inner, comm_id, &cfg, logger, NULL);
  if (rc != ncclSuccess) {
    if (inner) netload_finalize(&trace_nl, inner); /* as NCCL does after a failed init */
    return rc;
  }
  struct trace_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    netload_finalize(&trace_nl, inner);
    return ncclSystemError;
  }
  *c = (struct trace_ctx){TRACE_MAGIC_CTX, trace_next_id(TRACE_ID_CTX), inner};
  *out = c;
  return ncclSuccess;
}

ncclResult_t braid_net_init(void **ctx, uint64_t comm_id, int traffic_class,
                            ncclDebugLogger_t logger, const char *abi) {
  if (ctx) *ctx = NULL;
  braid_log_set_logger(logger);
  uint64_t t0 = braid_now_ns();
  struct trace_ctx *c = NULL;
  ncclResult_t rc = trace_inner_open();
  if (rc == ncclSuccess) {
    /* ABI v7..v10 pass no context: one per process, made by the first init. */
    c = ctx ? NULL : trace_default_ctx();
    if (!c && (rc = life_new_ctx(comm_id, traffic_class, logger, &c)) == ncclSuccess) {
      if (ctx) *ctx = c;
      else trace_set_default_ctx(c);
    }
  }
  struct trace_line l;
  trace_line_begin(&l, "init", t0);
  if (c) trace_line_add(&l, "ctx=x%d", c->id);
  else trace_line_add(&l, "ctx=-");
  trace_line_add(&l, "abi=%s comm_id=0x%llx tc=%d", life_abi(abi), (unsigned long long)comm_id,
                 traffic_class);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 1);
  return rc;
}

ncclResult_t braid_net_finalize(void *ctx) {
  uint64_t t0 = braid_now_ns();
  ncclResult_t rc = ncclSuccess;
  struct trace_line l;
  trace_line_begin(&l, "finalize", t0);
  if (!ctx) { /* after a failed init */
    trace_line_add(&l, "ctx=-");
  } else {
    struct trace_ctx *c = trace_ctx_get(ctx, "finalize");
    if (!c) return ncclInvalidArgument;
    trace_line_add(&l, "ctx=x%d", c->id);
    rc = netload_finalize(&trace_nl, c->inner);
    trace_connect_forget(c);
    if (trace_default_ctx() == c) trace_set_default_ctx(NULL);
    c->magic = 0;
    free(c);
  }
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 1);
  return rc;
}

ncclResult_t braid_net_devices(int *ndev) {
  uint64_t t0 = braid_now_ns();
  *ndev = 0;
  ncclResult_t rc = trace_inner_open();
  if (rc == ncclSuccess) rc = netload_devices(&trace_nl, ndev);
  struct trace_line l;
  trace_line_begin(&l, "devices", t0);
  trace_line_add(&l, "ndev=%d", *ndev);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 0);
  return rc;
}

static void life_props_copy(struct braid_props *p, const netload_props_t *q) {
  memset(p, 0, sizeof *p);
  p->name = q->name;
  p->pci_path = q->pciPath;
  p->guid = q->guid;
  /* abi.c offers no regMrDmaBuf: NCCL must register GPU memory with regMr. */
  p->ptr_support = q->ptrSupport & ~NCCL_PTR_DMABUF;
  p->reg_is_global = q->regIsGlobal;
  p->force_flush = q->forceFlush;
  p->speed = q->speed;
  p->port = q->port;
  p->latency = q->latency;
  p->max_comms = q->maxComms;
  p->max_recvs = q->maxRecvs;
  p->net_device_type = q->netDeviceType;
  p->net_device_version = q->netDeviceVersion;
  p->ndevs = q->vProps.ndevs < 0 ? 0 : q->vProps.ndevs > 8 ? 8 : q->vProps.ndevs;
  for (int i = 0; i < p->ndevs; i++) p->devs[i] = q->vProps.devs[i];
  p->max_p2p_bytes = q->maxP2pBytes;
  p->max_coll_bytes = q->maxCollBytes;
  p->max_multi_request_size = q->maxMultiRequestSize;
  p->rail_id = q->railId;
  p->plane_id = q->planeId;
}

ncclResult_t braid_net_get_properties(int dev, struct braid_props *p) {
  uint64_t t0 = braid_now_ns();
  netload_props_t q;
  memset(&q, 0, sizeof q);
  memset(p, 0, sizeof *p);
  ncclResult_t rc = trace_inner_open();
  if (rc == ncclSuccess) rc = netload_get_properties(&trace_nl, dev, &q);
  if (rc == ncclSuccess && q.netDeviceType != NCCL_NET_DEVICE_HOST) {
    /* abi.c forwards no device handles, so device offload cannot pass through the wrapper. */
    BRAID_WARN("braid-trace: %s device %d uses device offload (type %d), which braid-trace "
               "cannot forward", trace_nl.path, dev, (int)q.netDeviceType);
    rc = ncclInvalidUsage;
  }
  if (rc == ncclSuccess) life_props_copy(p, &q);
  struct trace_line l;
  trace_line_begin(&l, "props", t0);
  trace_line_add(&l, "dev=%d name=%s ptr=0x%x speed=%d latency=%g max_comms=%d max_recvs=%d "
                 "max_p2p=%zu force_flush=%d reg_global=%d", dev,
                 q.name && *q.name && !strchr(q.name, ' ') ? q.name : "-", q.ptrSupport, q.speed,
                 (double)q.latency, q.maxComms, q.maxRecvs, q.maxP2pBytes, q.forceFlush,
                 q.regIsGlobal);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 0);
  return rc;
}

/* abi.c hands over the send-side peers and flows and the op bits; the rest stays undefined. */
ncclResult_t braid_net_set_attr(void *ctx, int32_t max_peers, int32_t max_flows, uint32_t ops) {
  uint64_t t0 = braid_now_ns();
  struct trace_ctx *c = ctx ? trace_ctx_get(ctx, "setNetAttr") : trace_default_ctx();
  if (!c) return ncclInvalidArgument;
  ncclResult_t rc = ncclSuccess;
  if (netload_has(&trace_nl, NETLOAD_FN_SET_NET_ATTR)) {
    netload_attr_t a = NCCL_NET_ATTR_INIT;
    a.sendCommAttr.maxConcurrentPeers = max_peers;
    a.sendCommAttr.maxFlowsPerPeer = max_flows;
    a.op = ops;
    rc = netload_set_net_attr(&trace_nl, c->inner, &a);
  }
  struct trace_line l;
  trace_line_begin(&l, "set_attr", t0);
  trace_line_add(&l, "ctx=x%d peers=%d flows=%d op=0x%x", c->id, max_peers, max_flows, ops);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 0);
  return rc;
}

ncclResult_t braid_net_make_vdevice(int *d, int ndevs, const int *devs, int max) {
  uint64_t t0 = braid_now_ns();
  ncclResult_t rc = ncclInvalidUsage;
  if (ndevs < 0 || ndevs > max || ndevs > NCCL_NET_MAX_DEVS_PER_NIC_V12) {
    rc = ncclInvalidArgument;
  } else if (trace_inner_open() == ncclSuccess && netload_has(&trace_nl, NETLOAD_FN_MAKE_VDEVICE)) {
    netload_vprops_t p = {.ndevs = ndevs};
    for (int i = 0; i < ndevs; i++) p.devs[i] = devs[i];
    rc = netload_make_vdevice(&trace_nl, d, &p);
  }
  struct trace_line l;
  trace_line_begin(&l, "make_vdevice", t0);
  trace_line_add(&l, "ndevs=%d dev=%d", ndevs, rc == ncclSuccess ? *d : -1);
  trace_emit(&l, rc, t0, braid_now_ns(), NULL, 0, 0);
  return rc;
}
