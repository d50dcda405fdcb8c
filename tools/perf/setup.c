/* braid-perf: plugin load, init, properties and connection set-up, in NCCL's order. */
#include "setup.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "collnet.h"
#include "logger.h"
#include "plan.h"
#include "rdv.h"

#define SETUP_HANDLE NCCL_NET_HANDLE_MAXSIZE

static int setup_call(int rank, const char *call, ncclResult_t r) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "braid-perf: rank %d: plugin call %s failed: %s (%d)\n", rank, call,
          netload_result_str(r), (int)r);
  return -1;
}

/* The checks NCCL makes on device properties (net.cc, transport/net.cc). */
static int setup_check_props(const netload_props_t *p, int rank, int dev) {
  const char *bad = NULL;
  if (!p->name) bad = "name is NULL";
  else if (p->netDeviceType != NCCL_NET_DEVICE_HOST &&
           !(p->netDeviceType == NCCL_NET_DEVICE_UNPACK &&
             p->netDeviceVersion == NCCL_NET_DEVICE_UNPACK_VERSION))
    bad = "netDeviceType is neither HOST nor UNPACK v7 (NCCL skips the plugin)";
  else if (p->maxP2pBytes == 0 || p->maxP2pBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES)
    bad = "maxP2pBytes not in (0, 1 TiB] (NCCL fails every connection)";
  else if (p->maxCollBytes == 0 || p->maxCollBytes > (size_t)NCCL_MAX_NET_SIZE_BYTES)
    bad = "maxCollBytes not in (0, 1 TiB]";
  else if (!(p->ptrSupport & NCCL_PTR_HOST))
    bad = "ptrSupport lacks NCCL_PTR_HOST (braid-perf registers host memory)";
  else if (p->maxRecvs < 1)
    bad = "maxRecvs < 1";
  if (!bad) return 0;
  fprintf(stderr, "braid-perf: rank %d: getProperties(%d): %s\n", rank, dev, bad);
  return -1;
}

int setup_plugin(struct perf_net *pn, const struct perf_opts *o, struct rdv *r, int rank) {
  char err[2048];
  memset(pn, 0, sizeof *pn);
  if (netload_open(&pn->nl, o->plugin, o->net_version, err, sizeof err) != ncclSuccess) {
    fprintf(stderr, "braid-perf: rank %d: cannot load net plugin \"%s\": %s\n", rank, o->plugin,
            err);
    return -1;
  }
  /* NCCL's commId is the comm hash, equal on every rank: rank 0 picks it. */
  uint64_t id = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid(), *ids;
  ids = calloc((size_t)r->nranks, sizeof *ids);
  if (rdv_allgather(r, &id, ids, sizeof id)) return free(ids), -1;
  id = ids[0];
  free(ids);
  pn->comm_id = id;
  /* NCCL's communicator config: init's from ncclNet_v11, each connect's on v10 (netload keeps it
   * in the context it hands out), not passed at all to v7..v9 (NCCL 2.19-2.25 had none). */
  pn->traffic_class = o->traffic_class;
  netload_config_t cfg = {o->traffic_class};
  if (setup_call(rank, "init", netload_init(&pn->nl, &pn->ctx, id, &cfg, perf_logger, NULL)))
    return -1;
  pn->ctx_valid = 1;
  if (setup_call(rank, "devices", netload_devices(&pn->nl, &pn->ndev))) return -1;
  if (pn->ndev <= 0 || o->dev >= pn->ndev) {
    fprintf(stderr, "braid-perf: rank %d: plugin reports %d devices; --dev %d is not one\n", rank,
            pn->ndev, o->dev);
    return -1;
  }
  pn->dev = o->dev;
  if (setup_call(rank, "getProperties", netload_get_properties(&pn->nl, pn->dev, &pn->props)))
    return -1;
  return setup_check_props(&pn->props, rank, pn->dev);
}

void setup_describe(const struct perf_net *pn, char *buf, size_t len) {
  const netload_props_t *p = &pn->props;
  snprintf(buf, len, "plugin \"%s\" from %s (ncclNetPlugin_v%d), %d device(s); dev %d: %s, "
           "speed %d Mbps, latency %.1f us, maxRecvs %d, maxComms %d, ptrSupport 0x%x, "
           "regIsGlobal %d, maxP2pBytes %zu, maxCollBytes %zu",
           pn->nl.name ? pn->nl.name : "?", pn->nl.path, pn->nl.version, pn->ndev, pn->dev,
           p->name ? p->name : "?", p->speed, p->latency, p->maxRecvs, p->maxComms, p->ptrSupport,
           p->regIsGlobal, p->maxP2pBytes, p->maxCollBytes);
  size_t used = strlen(buf);
  if (pn->traffic_class != NCCL_NET_TRAFFIC_CLASS_UNDEF && used < len)
    snprintf(buf + used, len - used, "; trafficClass %d%s", pn->traffic_class,
             pn->nl.version >= 11   ? " (init's config)"
             : pn->nl.version == 10 ? " (each connect's config)"
                                    : " NOT passed: ncclNetPlugin_v7..v9 carry no traffic class");
}

struct setup_entry {
  uint32_t valid;
  char handle[SETUP_HANDLE];
};

struct setup_pending {
  struct eng_conn *c;
  void *listen;                 /* receive side: the listen comm */
  char handle[SETUP_HANDLE];    /* send side: the SAME buffer for every connect call */
};

static struct eng_conn *setup_add_conn(struct perf_net *pn, int ch, int peer, int is_send) {
  struct engine *e = &pn->eng;
  struct eng_conn *c = calloc(1, sizeof *c);
  c->chan = ch;
  c->peer = peer;
  c->is_send = is_send;
  e->conns = realloc(e->conns, sizeof(*e->conns) * (size_t)(e->nconns + 1));
  e->conns[e->nconns++] = c;
  return c;
}

/* Listens for every (channel, source) this rank receives from; fills mine[ch * nranks + src]. */
static int setup_listen(struct perf_net *pn, const struct perf_opts *o, int nch, int rank,
                        int nranks, struct setup_entry *mine, struct setup_pending *pend,
                        int *np) {
  for (int ch = 0; ch < nch; ch++) {
    struct plan_peers p;
    plan_peers(o, rank, nranks, ch, &p);
    for (int k = 0; k < p.nrecv; k++) {
      struct setup_entry *en = &mine[ch * nranks + p.recv[k]];
      struct setup_pending *sp = &pend[(*np)++];
      sp->c = setup_add_conn(pn, ch, p.recv[k], 0);
      en->valid = 1;
      ncclResult_t r = netload_listen(&pn->nl, pn->ctx, pn->dev, en->handle, &sp->listen);
      if (setup_call(rank, "listen", r)) return -1;
      if (!sp->listen) return setup_call(rank, "listen (returned a NULL listenComm)", ncclInternalError);
    }
  }
  return 0;
}

/* Prepares a connect for every (channel, destination) this rank sends to. */
static int setup_targets(struct perf_net *pn, const struct perf_opts *o, int nch, int rank,
                         int nranks, const struct setup_entry *all, struct setup_pending *pend,
                         int *np) {
  size_t per_rank = (size_t)nch * (size_t)nranks;
  for (int ch = 0; ch < nch; ch++) {
    struct plan_peers p;
    plan_peers(o, rank, nranks, ch, &p);
    for (int k = 0; k < p.nsend; k++) {
      const struct setup_entry *en = &all[(size_t)p.send[k] * per_rank + (size_t)ch * nranks + rank];
      if (!en->valid) {
        fprintf(stderr, "braid-perf: rank %d: rank %d does not listen for us on channel %d "
                "(ranks disagree on the op?)\n", rank, p.send[k], ch);
        return -1;
      }
      struct setup_pending *sp = &pend[(*np)++];
      sp->c = setup_add_conn(pn, ch, p.send[k], 1);
      memcpy(sp->handle, en->handle, SETUP_HANDLE);
    }
  }
  return 0;
}

/* One connect or accept attempt for sp; 1 when its comm is up. */
static int setup_poll_one(struct perf_net *pn, struct setup_pending *sp, int rank) {
  netload_devhandle_t *dev = NULL;
  ncclResult_t r;
  if (sp->c->is_send) {
    r = netload_connect(&pn->nl, pn->ctx, pn->dev, sp->handle, &sp->c->comm, &dev);
    if (setup_call(rank, "connect", r)) return -1;
    return sp->c->comm != NULL;
  }
  r = netload_accept(&pn->nl, sp->listen, &sp->c->comm, &dev);
  if (setup_call(rank, "accept", r)) return -1;
  if (!sp->c->comm) return 0;
  r = netload_close_listen(&pn->nl, sp->listen); /* NCCL closes the listen comm after accept */
  sp->listen = NULL;
  return setup_call(rank, "closeListen", r) ? -1 : 1;
}

/* Polls every connect and accept, NCCL-style, until all are up; bounded by the timeout. */
static int setup_poll(struct perf_net *pn, struct setup_pending *pend, int n, int timeout_s,
                      struct rdv *r) {
  int left = n, rank = pn->eng.rank;
  double dl = braid_now_s() + timeout_s;
  while (left > 0) {
    for (int k = 0; k < n; k++) {
      if (pend[k].c->comm) continue;
      int rc = setup_poll_one(pn, &pend[k], rank);
      if (rc < 0) return -1;
      left -= rc;
    }
    if (left && braid_now_s() > dl) {
      fprintf(stderr, "braid-perf: rank %d: %d of %d connections not up after %d s:", rank, left,
              n, timeout_s);
      for (int k = 0; k < n; k++)
        if (!pend[k].c->comm)
          fprintf(stderr, " %s rank %d ch %d;", pend[k].c->is_send ? "connect to" : "accept from",
                  pend[k].c->peer, pend[k].c->chan);
      fprintf(stderr, "\n");
      return -1;
    }
    if (left && rdv_peer_lost(r)) {
      fprintf(stderr, "braid-perf: rank %d: rank %d is gone during connection set-up\n", rank,
              r->lost_rank);
      return -1;
    }
    if (left) sched_yield();
  }
  return 0;
}

int setup_connect(struct perf_net *pn, const struct perf_opts *o, int nch, struct rdv *r) {
  int rank = r->rank, nranks = r->nranks, np = 0, rc = -1;
  size_t per_rank = (size_t)nch * (size_t)nranks;
  struct setup_entry *mine = calloc(per_rank, sizeof *mine);
  struct setup_entry *all = calloc(per_rank * (size_t)nranks, sizeof *all);
  struct setup_pending *pend = calloc((size_t)nch * 2 * PLAN_MAX_PEERS, sizeof *pend);
  if (!mine || !all || !pend) goto out;
  if (setup_listen(pn, o, nch, rank, nranks, mine, pend, &np)) goto out;
  if (rdv_allgather(r, mine, all, per_rank * sizeof *mine)) goto out;
  if (setup_targets(pn, o, nch, rank, nranks, all, pend, &np)) goto out;
  rc = setup_poll(pn, pend, np, o->timeout_s, r);
out:
  free(mine);
  free(all);
  free(pend);
  return rc;
}

int setup_teardown(struct perf_net *pn) {
  struct engine *e = &pn->eng;
  int rc = 0;
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    if (c->comm) {
      if (eng_conn_release(e, c)) rc = -1;
      ncclResult_t r = c->is_send ? netload_close_send(&pn->nl, c->comm)
                                  : netload_close_recv(&pn->nl, c->comm);
      if (r != ncclSuccess) rc = eng_fail(e, c->is_send ? "closeSend" : "closeRecv", r, c);
    }
    free(c);
  }
  free(e->conns);
  free(e->scratch);
  e->conns = NULL;
  e->nconns = 0;
  if (pn->ctx_valid && setup_call(e->rank, "finalize", netload_finalize(&pn->nl, pn->ctx))) rc = -1;
  pn->ctx_valid = 0;
  if (collnet_finalize(pn)) rc = -1; /* NCCL finalizes CollNet after the net, before dlclose */
  netload_close(&pn->nl);
  return rc;
}
