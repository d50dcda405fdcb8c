/* chaos-net: a test-only net plugin (ncclNetPlugin_v11) that wraps another through netload and
 * exercises the caller's retry paths: isend/irecv return a NULL request, connect/accept return a
 * NULL comm, and test reports "not done" at random (CHAOS_PERCENT, default 30), without ever
 * changing data. The wrapped plugin is CHAOS_INNER (an NCCL_NET_PLUGIN value).
 * CHAOS_DROP_RECV / CHAOS_STALE_RECV (chaos_fault.h) do change data, once: a receive reported
 * complete holds what its buffer held before, or an earlier receive's bytes.
 * Build: make build/libnccl-net-chaos.so (tools/perf/build.mk). */
#include <stdio.h>
#include <stdlib.h>

#include "chaos_fault.h"
#include "netload.h"

static struct netload chaos_nl;
static int chaos_pct = 30;
static __thread unsigned chaos_seed = 12345;

static int chaos_hit(void) { return (int)(rand_r(&chaos_seed) % 100) < chaos_pct; }

static ncclResult_t chaos_init(void **ctx, uint64_t id, ncclNetCommConfig_v11_t *cfg,
                               ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  char err[1024];
  const char *inner = getenv("CHAOS_INNER"), *pct = getenv("CHAOS_PERCENT");
  if (pct) chaos_pct = atoi(pct);
  chaos_fault_init();
  chaos_seed ^= (unsigned)id;
  if (!chaos_nl.lib && netload_open(&chaos_nl, inner, 0, err, sizeof err) != ncclSuccess) {
    fprintf(stderr, "chaos-net: cannot load CHAOS_INNER=%s: %s\n", inner ? inner : "", err);
    return ncclInvalidUsage;
  }
  netload_config_t c = {cfg ? cfg->trafficClass : -1};
  return netload_init(&chaos_nl, ctx, id, &c, log, prof);
}
static ncclResult_t chaos_devices(int *n) { return netload_devices(&chaos_nl, n); }
static ncclResult_t chaos_props(int dev, ncclNetProperties_v11_t *p) {
  netload_props_t q;
  ncclResult_t r = netload_get_properties(&chaos_nl, dev, &q);
  if (r != ncclSuccess) return r;
  p->name = q.name, p->pciPath = q.pciPath, p->guid = q.guid, p->ptrSupport = q.ptrSupport;
  p->regIsGlobal = q.regIsGlobal, p->forceFlush = q.forceFlush, p->speed = q.speed;
  p->port = q.port, p->latency = q.latency, p->maxComms = q.maxComms, p->maxRecvs = q.maxRecvs;
  p->netDeviceType = q.netDeviceType, p->netDeviceVersion = q.netDeviceVersion;
  p->vProps.ndevs = q.vProps.ndevs > 4 ? 4 : q.vProps.ndevs;
  for (int i = 0; i < 4; i++) p->vProps.devs[i] = q.vProps.devs[i];
  p->maxP2pBytes = q.maxP2pBytes, p->maxCollBytes = q.maxCollBytes;
  p->maxMultiRequestSize = q.maxMultiRequestSize;
  return ncclSuccess;
}
static ncclResult_t chaos_listen(void *ctx, int dev, void *h, void **l) {
  return netload_listen(&chaos_nl, ctx, dev, h, l);
}
static ncclResult_t chaos_connect(void *ctx, int dev, void *h, void **s, ncclNetDeviceHandle_v11_t **d) {
  if (chaos_hit()) return *s = NULL, ncclSuccess;
  return netload_connect(&chaos_nl, ctx, dev, h, s, d);
}
static ncclResult_t chaos_accept(void *l, void **r, ncclNetDeviceHandle_v11_t **d) {
  if (chaos_hit()) return *r = NULL, ncclSuccess;
  return netload_accept(&chaos_nl, l, r, d);
}
static ncclResult_t chaos_reg(void *c, void *d, size_t n, int t, void **m) {
  return netload_reg_mr(&chaos_nl, c, d, n, t, m);
}
static ncclResult_t chaos_dereg(void *c, void *m) { return netload_dereg_mr(&chaos_nl, c, m); }
static ncclResult_t chaos_isend(void *c, void *d, size_t n, int tag, void *m, void *ph, void **req) {
  if (chaos_hit()) return *req = NULL, ncclSuccess;
  return netload_isend(&chaos_nl, c, d, n, tag, m, ph, req);
}
static ncclResult_t chaos_irecv(void *c, int n, void **d, size_t *s, int *t, void **m, void **ph,
                                void **req) {
  if (chaos_hit()) return *req = NULL, ncclSuccess;
  void *token = chaos_fault_posting(n, d, s);
  ncclResult_t r = netload_irecv(&chaos_nl, c, n, d, s, t, m, ph, req);
  chaos_fault_posted(token, r == ncclSuccess ? *req : NULL);
  return r;
}
static ncclResult_t chaos_iflush(void *c, int n, void **d, int *s, void **m, void **req) {
  return netload_iflush(&chaos_nl, c, n, d, s, m, req);
}
static ncclResult_t chaos_test(void *req, int *done, int *sizes) {
  if (chaos_hit()) return *done = 0, ncclSuccess;
  ncclResult_t r = netload_test(&chaos_nl, req, done, sizes);
  if (r == ncclSuccess && *done) chaos_fault_done(req, sizes);
  return r;
}
static ncclResult_t chaos_close_send(void *c) { return netload_close_send(&chaos_nl, c); }
static ncclResult_t chaos_close_recv(void *c) { return netload_close_recv(&chaos_nl, c); }
static ncclResult_t chaos_close_listen(void *c) { return netload_close_listen(&chaos_nl, c); }
static ncclResult_t chaos_finalize(void *ctx) { return netload_finalize(&chaos_nl, ctx); }

__attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    "chaos", chaos_init, chaos_devices, chaos_props, chaos_listen, chaos_connect, chaos_accept,
    chaos_reg, NULL, chaos_dereg, chaos_isend, chaos_irecv, chaos_iflush, chaos_test,
    chaos_close_send, chaos_close_recv, chaos_close_listen, NULL, NULL, NULL, chaos_finalize,
    NULL};
