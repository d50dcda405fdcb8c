/* braid-perf --algo collnet | CollNetDirect: CollNet load, init, connect, registration,
 * reduceSupport, teardown, in NCCL 2.28's order (plugin/net.cc, transport.cc
 * ncclTransportCollNetSetup, coll_net.cc); CollNetDirect connects each head in turn, as NCCL's
 * ncclCollNetSetup loops over the heads (v2.27.7 and v2.30.7 src/transport/coll_net.cc). */
#include "collnet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logger.h"
#include "rdv.h"
#include "setup.h"

#define CN_INFO(...) \
  perf_logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, __func__, __LINE__, __VA_ARGS__)

static const char *const cn_type_names[COLLNET_NUM_TYPES] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64",
    "half", "float", "double", "bf16", "fp8e4m3", "fp8e5m2"};
static const char *const cn_op_names[COLLNET_NUM_OPS] = {"sum", "prod", "max", "min"};

static int cn_call(int rank, const char *call, ncclResult_t r) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "braid-perf: rank %d: CollNet %s failed: %s (%d)\n", rank, call,
          netload_result_str(r), (int)r);
  return -1;
}

/* Every rank says whether its part went right; 0 when all did. A rank that failed has printed
 * why; the others fail too, quietly, so every rank ends the same way. */
static int cn_agree(struct rdv *r, int ok) {
  int32_t mine = ok ? 1 : 0, *all = calloc((size_t)r->nranks, sizeof *all);
  int rc = all ? rdv_allgather(r, &mine, all, sizeof mine) : -1;
  for (int k = 0; rc == 0 && k < r->nranks; k++)
    if (!all[k]) rc = -1;
  free(all);
  return rc;
}

/* NCCL's tuning (graph/tuning.cc, 2.20-2.30) gives CollNetDirect and, from 2.27, multi-node
 * NVLS allgather / reducescatter zero bandwidth when the CollNet table's iallgather /
 * ireducescatter is NULL, so NCCL never calls a NULL one; braid-perf never calls them at all.
 * Says which it is when CollNet allgather or reducescatter is asked for; -1 then. */
static int cn_refuse_gather(const struct collnet *cn, const struct perf_opts *o) {
  if (o->op != PERF_ALLGATHER && o->op != PERF_REDUCESCATTER) return 0;
  int ag = o->op == PERF_ALLGATHER;
  const char *fn = ag ? "iallgather" : "ireducescatter", *name = cn->cl.name ? cn->cl.name : "?";
  if (cn->rank != 0) return -1;
  if (!collload_has(&cn->cl, ag ? COLLLOAD_FN_IALLGATHER : COLLLOAD_FN_IREDUCESCATTER))
    fprintf(stderr, "braid-perf: CollNet %s unavailable: %s's CollNet (ncclCollNetPlugin_v%d) "
            "offers allreduce only: its %s is NULL, and NCCL's tuning then gives CollNet %s zero "
            "bandwidth and never calls it (use ring: drop --algo)\n", perf_op_name(o->op), name,
            cn->cl.version, fn, perf_op_name(o->op));
  else
    fprintf(stderr, "braid-perf: CollNet %s: %s's CollNet (ncclCollNetPlugin_v%d) has %s, but "
            "braid-perf drives CollNet allreduce only\n", perf_op_name(o->op), name,
            cn->cl.version, fn);
  return -1;
}

/* Head h's device: (--dev + h) mod the device count. getProperties, checked as coll_net.cc's
 * proxy setup does; the first head's properties are kept for the describe line. */
static int cn_head_props(struct collnet *cn, int h, int dev0) {
  int rank = cn->rank, dev = (dev0 + h) % cn->ndev;
  netload_props_t p;
  cn->head[h].dev = dev;
  if (cn_call(rank, "getProperties", collload_get_properties(&cn->cl, dev, &p))) return -1;
  const char *bad = NULL;
  if (p.maxCollBytes == 0 || p.maxCollBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES)
    bad = "maxCollBytes not in (0, 1 TiB] (NCCL fails the CollNet proxy set-up)";
  else if (!(p.ptrSupport & NCCL_PTR_HOST))
    bad = "ptrSupport lacks NCCL_PTR_HOST (braid-perf's CollNet buffers are host memory)";
  if (bad) {
    fprintf(stderr, "braid-perf: rank %d: CollNet getProperties(%d): %s\n", rank, dev, bad);
    return -1;
  }
  if (h == 0) cn->dev = dev, cn->props = p;
  return 0;
}

/* NCCL's pluginInit: init(&collNetContext, commHash, logger), then devices (<= 0: disabled),
 * then the checks of coll_net.cc's proxy setup on getProperties of every head's device.
 * Sets cn->nheads to what this rank wants (collnet_setup takes the smallest of all ranks). */
static int cn_open(struct perf_net *pn, struct collnet *cn, const struct perf_opts *o) {
  char err[1024];
  int rank = cn->rank;
  if (collload_open(&cn->cl, &pn->nl, o->net_version, err, sizeof err) != ncclSuccess) {
    fprintf(stderr, "braid-perf: rank %d: CollNet unavailable: %s\n", rank, err);
    return -1;
  }
  if (cn_refuse_gather(cn, o)) return -1;
  ncclResult_t r = collload_init(&cn->cl, &cn->ctx, pn->comm_id, perf_logger);
  if (r != ncclSuccess) {
    fprintf(stderr, "braid-perf: rank %d: CollNet unavailable: %s init failed: %s (%d)\n", rank,
            cn->cl.name ? cn->cl.name : "?", netload_result_str(r), (int)r);
    return -1;
  }
  cn->ctx_valid = 1;
  r = collload_devices(&cn->cl, &cn->ndev);
  if (r != ncclSuccess || cn->ndev <= 0) {
    fprintf(stderr, "braid-perf: rank %d: CollNet unavailable: devices() returned %s and %d "
            "device(s)\n", rank, netload_result_str(r), cn->ndev);
    return -1;
  }
  if (o->dev >= cn->ndev) {
    fprintf(stderr, "braid-perf: rank %d: CollNet unavailable: %d CollNet device(s); --dev %d "
            "is not one\n", rank, cn->ndev, o->dev);
    return -1;
  }
  cn->nheads = !cn->direct ? 1 : o->collnet_heads > 0 ? o->collnet_heads
               : cn->ndev < COLLNET_MAX_HEADS ? cn->ndev : COLLNET_MAX_HEADS;
  for (int h = 0; h < cn->nheads; h++)
    if (cn_head_props(cn, h, o->dev)) return -1;
  CN_INFO("Initialized CollNet plugin %s (ncclCollNetPlugin_v%d), %d device(s)",
          cn->cl.name ? cn->cl.name : "?", cn->cl.version, cn->ndev);
  return 0;
}

/* Every rank says whether its cn_open went right and how many heads it wants; 0 when all did,
 * with cn->nheads the smallest wish (NCCL's heads per node are the same on every node). */
static int cn_agree_heads(struct collnet *cn, struct rdv *r, int ok) {
  int32_t mine[2] = {ok ? 1 : 0, cn->nheads}, *all = calloc((size_t)r->nranks, sizeof mine);
  int rc = all ? rdv_allgather(r, mine, all, sizeof mine) : -1;
  for (int k = 0; rc == 0 && k < r->nranks; k++) {
    if (!all[2 * k]) rc = -1;
    else if (all[2 * k + 1] < cn->nheads) cn->nheads = all[2 * k + 1];
  }
  free(all);
  return rc;
}

/* Head h: listen, all-gather the handles, one blocking connect of head h of every node,
 * closeListen (coll_net.cc sharedListen and sharedConnect: the first channel connects, the
 * others share its collComm). */
static int cn_connect(struct collnet *cn, int h, struct rdv *r) {
  struct entry { /* handles aligned as NCCL's (they sit at the start of a struct ncclConnect) */
    _Alignas(16) char handle[NCCL_NET_HANDLE_MAXSIZE];
    int64_t ok;
  } mine;
  memset(&mine, 0, sizeof mine);
  int rank = cn->rank, n = cn->nranks, rc = -1;
  void *lc = NULL;
  struct collnet_head *hd = &cn->head[h];
  ncclResult_t res = collload_listen(&cn->cl, cn->ctx, hd->dev, mine.handle, &lc);
  mine.ok = !cn_call(rank, "listen", res);
  if (mine.ok && !lc) mine.ok = 0, fprintf(stderr, "braid-perf: rank %d: CollNet listen "
                                            "returned a NULL listenComm\n", rank);
  struct entry *all = calloc((size_t)n, sizeof *all);
  void **handles = calloc((size_t)n, sizeof *handles);
  if (!all || !handles || rdv_allgather(r, &mine, all, sizeof mine)) goto out;
  for (int k = 0; k < n; k++) {
    if (!all[k].ok) goto out; /* that rank printed why; nobody enters the collective */
    handles[k] = all[k].handle;
  }
  res = collload_connect(&cn->cl, handles, n, rank, lc, &hd->comm);
  int ok = !cn_call(rank, "connect", res);
  if (ok && !hd->comm) ok = 0, fprintf(stderr, "braid-perf: rank %d: CollNet connect returned "
                                       "success and a NULL collComm\n", rank);
  if (ok) ok = !cn_call(rank, "closeListen", collload_close_listen(&cn->cl, lc));
  if (!ok) hd->comm = NULL; /* as NCCL: a failed connect leaves the listen comm alone */
  rc = cn_agree(r, ok);
  if (rc && ok && rank == 0)
    fprintf(stderr, "braid-perf: CollNet unavailable: connect failed on another rank\n");
  if (rc == 0)
    CN_INFO("CollNet connected: head %d of %d on device %d: rank %d of %d, collComm %p", h,
            cn->nheads, hd->dev, rank, n, hd->comm);
out:
  free(all);
  free(handles);
  return rc;
}

/* Head h's shared buffer (sharedBuffersInit: 2 x nChannels x buffSize, zeroed), registered by
 * the receive and then the send connection of every channel, as each proxy connect does. */
static int cn_register(struct collnet *cn, int h) {
  struct collnet_head *hd = &cn->head[h];
  cn->region_bytes = 2 * (size_t)cn->nch * cn->buffsize;
  if (posix_memalign((void **)&hd->region, 4096, cn->region_bytes)) {
    hd->region = NULL;
    fprintf(stderr, "braid-perf: rank %d: no memory for the %zu-byte CollNet buffer of head %d\n",
            cn->rank, cn->region_bytes, h);
    return -1;
  }
  memset(hd->region, 0, cn->region_bytes);
  for (int c = 0; c < cn->nch; c++) {
    ncclResult_t r = collload_reg_mr(&cn->cl, hd->comm, hd->region, cn->region_bytes,
                                     NCCL_PTR_HOST, &hd->recv_mh[c]);
    if (cn_call(cn->rank, "regMr (receive connection)", r)) return -1;
    r = collload_reg_mr(&cn->cl, hd->comm, hd->region, cn->region_bytes, NCCL_PTR_HOST,
                        &hd->send_mh[c]);
    if (cn_call(cn->rank, "regMr (send connection)", r)) return -1;
  }
  return 0;
}

/* Logs one rank's (or the agreed) answers: a line per op, 1/0 per type. */
static void cn_log_matrix(const char *who, unsigned char m[COLLNET_NUM_OPS][COLLNET_NUM_TYPES]) {
  for (int op = 0; op < COLLNET_NUM_OPS; op++) {
    char line[256];
    size_t at = 0;
    for (int ty = 0; ty < COLLNET_NUM_TYPES && at < sizeof line; ty++)
      at += (size_t)snprintf(line + at, sizeof line - at, " %s=%d", cn_type_names[ty], m[op][ty]);
    CN_INFO("CollNet reduceSupport %s %s:%s", who, cn_op_names[op], line);
  }
}

/* NCCL's sweep (coll_net.cc ncclCollNetSetup): every head asks about types 0..11 x ops 0..3;
 * the answers are all-gathered; a pair is usable when some rank says yes and none says no. */
static int cn_support(struct collnet *cn, const struct perf_opts *o, struct rdv *r, int ok) {
  struct answer {
    int32_t ok;
    unsigned char bits[COLLNET_NUM_OPS][COLLNET_NUM_TYPES]; /* 1: no, 2: yes */
  } mine;
  memset(&mine, 0, sizeof mine);
  unsigned char own[COLLNET_NUM_OPS][COLLNET_NUM_TYPES];
  for (int ty = 0; ok && ty < COLLNET_NUM_TYPES; ty++)
    for (int op = 0; ok && op < COLLNET_NUM_OPS; op++) {
      int s = 0;
      ncclResult_t res = collload_reduce_support(&cn->cl, (ncclDataType_t)ty, (ncclRedOp_t)op, &s);
      if (res != ncclSuccess) {
        fprintf(stderr, "braid-perf: rank %d: CollNet reduceSupport(%s, %s) failed: %s (%d); NCCL "
                "would hang here (its peers wait in an all-gather)\n", cn->rank, cn_type_names[ty],
                cn_op_names[op], netload_result_str(res), (int)res);
        ok = 0;
      }
      own[op][ty] = s != 0;
      mine.bits[op][ty] = (unsigned char)(1 << (s ? 1 : 0));
    }
  mine.ok = ok;
  if (ok) cn_log_matrix("(this rank)", own);
  struct answer *all = calloc((size_t)cn->nranks, sizeof *all);
  if (!all || rdv_allgather(r, &mine, all, sizeof mine)) return free(all), -1;
  int rc = 0;
  for (int k = 0; k < cn->nranks; k++) rc |= all[k].ok ? 0 : -1;
  cn->nsupported = 0;
  for (int op = 0; op < COLLNET_NUM_OPS; op++)
    for (int ty = 0; ty < COLLNET_NUM_TYPES; ty++) {
      unsigned acc = 0;
      for (int k = 0; k < cn->nranks; k++) acc |= all[k].bits[op][ty];
      cn->support[op][ty] = acc == 2;
      cn->nsupported += cn->support[op][ty];
    }
  free(all);
  if (rc) return -1;
  if (cn->rank == 0) cn_log_matrix("(all ranks)", cn->support);
  if (!cn->support[o->redop][o->dtype]) {
    if (cn->rank == 0)
      fprintf(stderr, "braid-perf: CollNet unavailable for %s %s: reduceSupport says no on some "
              "rank (NCCL would not use CollNet for it)\n", cn_type_names[o->dtype],
              cn_op_names[o->redop]);
    return -1;
  }
  return 0;
}

int collnet_setup(struct perf_net *pn, const struct perf_opts *o, struct rdv *r) {
  struct collnet *cn = calloc(1, sizeof *cn);
  if (!cn) return -1;
  pn->coll = cn;
  cn->rank = r->rank;
  cn->nranks = r->nranks;
  cn->rdv = r;
  cn->timeout_s = o->timeout_s;
  cn->yield_idle = o->yield_idle;
  cn->direct = o->algo == PERF_ALGO_COLLNET && o->collnet_direct;
  cn->nch = o->nchannels;
  cn->buffsize = o->buffsize;
  cn->slot = o->buffsize / 8; /* NCCL_STEPS */
  if (cn_agree_heads(cn, r, cn_open(pn, cn, o) == 0)) return -1;
  for (int h = 0; h < cn->nheads; h++)
    if (cn_connect(cn, h, r)) return -1;
  int ok = 1;
  for (int h = 0; ok && h < cn->nheads; h++) ok = cn_register(cn, h) == 0;
  if (cn_support(cn, o, r, ok)) return -1;
  cn->ready = 1;
  return 0;
}

int collnet_ready(const struct perf_net *pn) { return pn->coll && pn->coll->ready; }

void collnet_describe(const struct perf_net *pn, char *buf, size_t len) {
  const struct collnet *cn = pn->coll;
  size_t at = strlen(buf);
  if (!cn || at + 1 >= len) return;
  at += (size_t)snprintf(buf + at, len - at, "\n# CollNet \"%s\" (ncclCollNetPlugin_v%d), %d "
                         "device(s); dev %d: %s, speed %d Mbps, maxCollBytes %zu; ",
                         cn->cl.name ? cn->cl.name : "?", cn->cl.version, cn->ndev, cn->dev,
                         cn->props.name ? cn->props.name : "?", cn->props.speed,
                         cn->props.maxCollBytes);
  if (cn->direct && at + 1 < len) {
    at += (size_t)snprintf(buf + at, len - at, "CollNetDirect: %d head(s) per node, each its own "
                           "collComm (nranks %d), on device(s)", cn->nheads, cn->nranks);
    for (int h = 0; h < cn->nheads && at + 1 < len; h++)
      at += (size_t)snprintf(buf + at, len - at, "%s%d", h ? "," : " ", cn->head[h].dev);
    if (at + 1 < len) at += (size_t)snprintf(buf + at, len - at, "; per head: ");
  }
  if (at + 1 < len)
    snprintf(buf + at, len - at, "shared buffer 2 x %d ch x %zu B, registered %d times "
             "(NCCL_PTR_HOST); reduceSupport: %d of %d (op, type) pairs on every rank", cn->nch,
             cn->buffsize, 2 * cn->nch, cn->nsupported, COLLNET_NUM_OPS * COLLNET_NUM_TYPES);
}

int collnet_close(struct perf_net *pn, struct rdv *r) {
  struct collnet *cn = pn->coll;
  int rc = 0;
  if (!cn) return 0;
  for (int h = 0; h < COLLNET_MAX_HEADS; h++) {
    struct collnet_head *hd = &cn->head[h];
    for (int c = 0; hd->comm && c < cn->nch; c++) { /* sendProxyFree, recvProxyFree */
      void *mh[2] = {hd->send_mh[c], hd->recv_mh[c]};
      for (int d = 0; d < 2; d++)
        if (mh[d] && cn_call(cn->rank, "deregMr", collload_dereg_mr(&cn->cl, hd->comm, mh[d])))
          rc = -1;
      hd->send_mh[c] = hd->recv_mh[c] = NULL;
    }
    if (hd->comm && cn_call(cn->rank, "closeColl", collload_close_coll(&cn->cl, hd->comm)))
      rc = -1;
    hd->comm = NULL;
  }
  uint64_t mine[3] = {cn->calls, cn->nulls, cn->tests};
  uint64_t *all = calloc((size_t)r->nranks, sizeof mine);
  if (!all || rdv_allgather(r, mine, all, sizeof mine)) rc = -1;
  else if (r->rank == 0 && cn->ready) {
    uint64_t sum[3] = {0, 0, 0};
    for (int k = 0; k < r->nranks; k++)
      for (int i = 0; i < 3; i++) sum[i] += all[3 * k + i];
    printf("# all ranks: %llu iallreduce requests, iallreduce returned NULL %llu times (retried), "
           "%llu test calls\n", (unsigned long long)sum[0], (unsigned long long)sum[1],
           (unsigned long long)sum[2]);
  }
  free(all);
  return rc;
}

int collnet_finalize(struct perf_net *pn) {
  struct collnet *cn = pn->coll;
  int rc = 0;
  if (!cn) return 0;
  if (cn->ctx_valid && cn_call(cn->rank, "finalize", collload_finalize(&cn->cl, cn->ctx))) rc = -1;
  for (int h = 0; h < COLLNET_MAX_HEADS; h++) free(cn->head[h].region);
  free(cn);
  pn->coll = NULL;
  return rc;
}
