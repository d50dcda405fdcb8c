/* braid-perf --algo collnet | CollNetDirect: one CollNet allreduce, driven as NCCL 2.27-2.30 do
 * with one rank per node: each head's kernel copies its chunks of the user input into its shared
 * buffer and the result out of it; each head's proxy (coll_net.cc sendProxyProgress /
 * recvProxyProgress, the same code for the chain and CollNetDirect allreduce) issues one
 * iallreduce per step and group of channels and tests the oldest one of each group.
 *
 * NCCL facts used (enqueue.cc topoGetAlgoInfo and calcCollChunking, coll_net.cc,
 * device/all_reduce.h, graph/connect.cc connectCollNet; read in v2.27.7 and v2.30.7):
 *  - channels, chain: nc starts at the comm's nChannels and drops while
 *    nBytes < nc * 640 * 512 (NCCL_MAX_NTHREADS x the SIMPLE thread threshold), down to 1;
 *  - channels, CollNetDirect ("CollNet channel tuning"): for ncSwitch = 16, 8, 4, 2, 1, while
 *    nBytes < nc * 640 * nHeads * threshold and nc > ncSwitch, nc drops (the threshold, 512,
 *    halves when nc == ncSwitch + ncSwitch/2); it stops as soon as the size test fails;
 *  - chunk, chain: min(256 KiB, NCCL_BUFFSIZE/8), halved while nBytes/(nc*chunk) < 64*depth (and
 *    chunk > 128 KiB), < 8*depth (and > 64 KiB), < depth (and > 32 KiB), depth = ranks per node
 *    = 1; CollNetDirect: NCCL_BUFFSIZE/8 (no cap), halved while nBytes/(nc*nHeads*chunk) <
 *    64*depth (and > 128 KiB), < 8*depth (and > 64 KiB), < 8*depth (and > 32 KiB), depth 1 for a
 *    lone head and 2 when a head has other local ranks (here: heads > 1); both rounded down to
 *    the 512-byte grain; steps = ceil(nBytes / (nc * nHeads * chunk)), the same for every head
 *    and channel (the chain: nHeads = 1);
 *  - the kernel of head h on channel s at step k handles elements
 *    [k*nc*H*c + (s*H + h)*c, +c) (c = chunk/eltSize), clipped to the count (possibly empty: the
 *    step still happens);
 *  - shared buffer (per head): channel s's chunk of step k sits at base(k%8) + s*chunk, with
 *    base(j) = (dir*8 + j) * nChannels * slot, dir 0 for send and 1 for receive
 *    (calcRegionOffset; the step counts from the op's start);
 *  - the channels of a group (8 consecutive subs) at one step form ONE iallreduce over
 *    [base + first*chunk, base + (last+1)*chunk): always the whole group x chunk bytes, whatever
 *    the data holds; mhandles of the group's last channel's connections;
 *  - a head's iallreduces go out in order (step k of group 0, 1, ..., then step k+1); a group
 *    that posts (or gets NULL and retries) does not test in the same pass; the oldest request of
 *    a group is tested, and its send and receive slots are reused once it is done: at most
 *    NCCL_STEPS = 8 in flight per group. Heads are independent of each other (each has its own
 *    proxy thread in NCCL); here one loop gives every head a pass in turn. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "collnet.h"
#include "logger.h"
#include "plan.h"
#include "rdv.h"
#include "setup.h"

#define CN_STEPS 8                  /* NCCL_STEPS */
#define CN_MAX_CHUNK (256 * 1024)   /* enqueue.cc: CollNet chain chunk cap */
#define CN_GRAIN 512                /* ncclProtoGrainSize(SIMPLE) */
#define CN_NTHREADS 640             /* NCCL_MAX_NTHREADS: maxThreads[COLLNET_*][SIMPLE] */
#define CN_THREAD_THRESHOLD 512     /* threadThresholds[COLLNET_*][SIMPLE] */
#define CN_MAX_GROUPS ((PERF_MAX_CHANNELS + COLLNET_GROUP_NSUBS - 1) / COLLNET_GROUP_NSUBS)

struct cn_group {
  int s0, s1;                  /* its channels [s0, s1) */
  uint64_t filled;             /* steps whose chunks the "kernel" has copied in */
  uint64_t issued;             /* steps whose iallreduce has a request */
  uint64_t done;               /* steps tested done and copied out */
  void *req[CN_STEPS];
};

struct cn_lane {               /* one head's proxy for this op */
  struct collnet_head *hd;
  int h;                       /* NCCL's collnetDirect.headRank */
  struct cn_group g[CN_MAX_GROUPS];
  int turn;                    /* the group whose iallreduce goes out next */
};

struct cn_op {
  struct collnet *cn;
  const struct plan_args *a;
  int nc, ngroups, nheads;
  size_t chunk, cc;            /* bytes and elements per channel, head and step */
  uint64_t nsteps;
  struct cn_lane lane[COLLNET_MAX_HEADS];
};

/* topoGetAlgoInfo's channel tuning for the CollNet chain. */
static int cn_channels(int nch, size_t nbytes) {
  int nc = nch;
  while (nc >= 2 && nbytes < (size_t)nc * CN_NTHREADS * CN_THREAD_THRESHOLD) nc--;
  return nc;
}

/* topoGetAlgoInfo's "CollNet channel tuning" for CollNetDirect with nheads heads. */
static int cn_direct_channels(int nch, size_t nbytes, int nheads) {
  int nc = nch, flag = 1;
  size_t thr = CN_THREAD_THRESHOLD;
  for (int sw = 16; sw >= 1 && flag; sw /= 2)
    while ((flag = nbytes < (size_t)nc * CN_NTHREADS * (size_t)nheads * thr) && nc > sw) {
      if (nc == sw + sw / 2) thr /= 2;
      nc--;
    }
  return nc;
}

/* calcCollChunking for NCCL_ALGO_COLLNET_CHAIN with one rank per node (depth 1). */
static size_t cn_chunk(size_t slot, size_t nbytes, int nc) {
  size_t c = slot < CN_MAX_CHUNK ? slot : CN_MAX_CHUNK, n = (size_t)nc;
  while (nbytes / (n * c) < 64 && c > 131072) c /= 2;
  while (nbytes / (n * c) < 8 && c > 65536) c /= 2;
  while (nbytes / (n * c) < 1 && c > 32768) c /= 2;
  return c / CN_GRAIN * CN_GRAIN;
}

/* calcCollChunking for NCCL_ALGO_COLLNET_DIRECT: depth is connectCollNet's (nUp == 0 &&
 * nDown == 0) ? 1 : 2, and a node of several heads has both. */
static size_t cn_direct_chunk(size_t slot, size_t nbytes, int nc, int nheads) {
  size_t c = slot, n = (size_t)nc * (size_t)nheads, depth = nheads > 1 ? 2 : 1;
  while (nbytes / (n * c) < depth * 64 && c > 131072) c /= 2;
  while (nbytes / (n * c) < depth * 8 && c > 65536) c /= 2;
  while (nbytes / (n * c) < depth * 8 && c > 32768) c /= 2;
  return c / CN_GRAIN * CN_GRAIN;
}

/* Byte offset in a head's shared buffer of channel s's chunk at step k (dir 0 send, 1 recv). */
static size_t cn_region(const struct cn_op *x, int dir, uint64_t k, int s) {
  const struct collnet *cn = x->cn;
  size_t base = ((size_t)dir * CN_STEPS + (size_t)(k % CN_STEPS)) * (size_t)cn->nch * cn->slot;
  return base + (size_t)s * x->chunk;
}

/* Elements of head h's channel s at step k: first element, count (0 past the end). */
static size_t cn_part(const struct cn_op *x, int h, uint64_t k, int s, size_t *first) {
  size_t H = (size_t)x->nheads, count = x->a->count;
  size_t off = ((size_t)k * (size_t)x->nc * H + (size_t)s * H + (size_t)h) * x->cc;
  *first = off;
  return off >= count ? 0 : (count - off < x->cc ? count - off : x->cc);
}

/* The kernel's send to the network: the head's chunks of step k into its send slot. */
static void cn_fill(struct cn_op *x, struct cn_lane *l, struct cn_group *g, uint64_t k) {
  const struct plan_args *a = x->a;
  for (int s = g->s0; s < g->s1; s++) {
    size_t first, n = cn_part(x, l->h, k, s, &first);
    if (n) memcpy(l->hd->region + cn_region(x, 0, k, s), a->in + first * a->esize, n * a->esize);
  }
}

/* The kernel's receive from the network: the head's reduced chunks of step k out to the user
 * buffer. */
static void cn_drain(struct cn_op *x, struct cn_lane *l, struct cn_group *g, uint64_t k) {
  const struct plan_args *a = x->a;
  for (int s = g->s0; s < g->s1; s++) {
    size_t first, n = cn_part(x, l->h, k, s, &first);
    if (n) memcpy(a->out + first * a->esize, l->hd->region + cn_region(x, 1, k, s), n * a->esize);
  }
}

static int cn_fail(struct cn_op *x, const char *what, ncclResult_t r, struct cn_lane *l, int gi) {
  const struct cn_group *g = &l->g[gi];
  fprintf(stderr, "braid-perf: rank %d: CollNet %s failed: %s (%d) (head %d of %d, group %d: "
          "channels %d..%d, step %llu of %llu, %llu in flight)\n", x->cn->rank, what,
          netload_result_str(r), (int)r, l->h, x->nheads, gi, g->s0, g->s1 - 1,
          (unsigned long long)g->issued, (unsigned long long)x->nsteps,
          (unsigned long long)(g->issued - g->done));
  return -1;
}

/* sendProxyProgress's transmit: the iallreduce of the group's next step. 1 posted, 0 NULL. */
static int cn_issue(struct cn_op *x, struct cn_lane *l, int gi) {
  struct collnet *cn = x->cn;
  struct collnet_head *hd = l->hd;
  struct cn_group *g = &l->g[gi];
  uint64_t k = g->issued;
  size_t bytes = (size_t)(g->s1 - g->s0) * x->chunk;
  void *req = NULL;
  ncclResult_t r = collload_iallreduce(&cn->cl, hd->comm, hd->region + cn_region(x, 0, k, g->s0),
                                       hd->region + cn_region(x, 1, k, g->s0), bytes / x->a->esize,
                                       x->a->dt, x->a->redop, hd->send_mh[g->s1 - 1],
                                       hd->recv_mh[g->s1 - 1], &req);
  if (r != ncclSuccess) return cn_fail(x, "iallreduce", r, l, gi);
  if (!req) {
    cn->nulls++;
    return 0;
  }
  perf_logger(NCCL_LOG_TRACE, NCCL_NET, __func__, __LINE__, "CollNet iallreduce head %d step %llu "
              "group %d (channels %d..%d): send +%zu recv +%zu, %zu B, req %p", l->h,
              (unsigned long long)k, gi, g->s0, g->s1 - 1, cn_region(x, 0, k, g->s0),
              cn_region(x, 1, k, g->s0), bytes, req);
  cn->calls++;
  g->req[k % CN_STEPS] = req;
  g->issued++;
  l->turn = (gi + 1) % x->ngroups;
  return 1;
}

/* Tests the group's oldest request; when done, the kernel copies the result out. */
static int cn_test(struct cn_op *x, struct cn_lane *l, int gi) {
  struct collnet *cn = x->cn;
  struct cn_group *g = &l->g[gi];
  int done = 0, size = 0;
  cn->tests++;
  ncclResult_t r = collload_test(&cn->cl, g->req[g->done % CN_STEPS], &done, &size);
  if (r != ncclSuccess) return cn_fail(x, "test", r, l, gi);
  if (!done) return 0;
  g->req[g->done % CN_STEPS] = NULL;
  cn_drain(x, l, g, g->done);
  g->done++;
  return 1;
}

/* One pass of a head's proxy over its groups: -1 error, else whether anything moved. */
static int cn_lane_pass(struct cn_op *x, struct cn_lane *l, int *pending) {
  int moved = 0;
  for (int gi = 0; gi < x->ngroups; gi++) {
    struct cn_group *g = &l->g[gi];
    if (g->done == x->nsteps) continue;
    *pending = 1;
    while (g->filled < x->nsteps && g->filled < g->done + CN_STEPS) { /* free send slots */
      cn_fill(x, l, g, g->filled++);
      moved = 1;
    }
    if (gi == l->turn && g->issued < g->filled) {
      int rc = cn_issue(x, l, gi);
      if (rc < 0) return -1;
      moved |= rc;
      continue; /* as sendProxyProgress: no test in the pass that transmits or retries */
    }
    if (g->done < g->issued) {
      int rc = cn_test(x, l, gi);
      if (rc < 0) return -1;
      moved |= rc;
    }
  }
  return moved;
}

/* One pass over every head: -1 error, else whether anything moved. */
static int cn_pass(struct cn_op *x, int *pending) {
  int moved = 0;
  *pending = 0;
  for (int h = 0; h < x->nheads; h++) {
    int rc = cn_lane_pass(x, &x->lane[h], pending);
    if (rc < 0) return -1;
    moved |= rc;
  }
  return moved;
}

static void cn_plan(struct cn_op *x) {
  const struct plan_args *a = x->a;
  const struct collnet *cn = x->cn;
  size_t nbytes = a->count * a->esize;
  int nch = a->nch < cn->nch ? a->nch : cn->nch;
  x->nheads = cn->nheads;
  x->nc = cn->direct ? cn_direct_channels(nch, nbytes, x->nheads) : cn_channels(nch, nbytes);
  x->chunk = cn->direct ? cn_direct_chunk(cn->slot, nbytes, x->nc, x->nheads)
                        : cn_chunk(cn->slot, nbytes, x->nc);
  x->cc = x->chunk / a->esize;
  size_t loop = (size_t)x->nc * (size_t)x->nheads * x->chunk; /* enqueue.cc's loopSize */
  x->nsteps = (nbytes + loop - 1) / loop;
  x->ngroups = (x->nc + COLLNET_GROUP_NSUBS - 1) / COLLNET_GROUP_NSUBS;
  for (int h = 0; h < x->nheads; h++) {
    struct cn_lane *l = &x->lane[h];
    l->hd = &x->cn->head[h];
    l->h = h;
    for (int gi = 0; gi < x->ngroups; gi++) {
      l->g[gi].s0 = gi * COLLNET_GROUP_NSUBS;
      l->g[gi].s1 = l->g[gi].s0 + COLLNET_GROUP_NSUBS < x->nc ? l->g[gi].s0 + COLLNET_GROUP_NSUBS
                                                                : x->nc;
    }
  }
}

static int cn_stuck(struct cn_op *x, const char *why) {
  fprintf(stderr, "braid-perf: rank %d: CollNet allreduce of %zu elements: %s; %d head(s), %d "
          "channel(s), chunk %zu B, %llu step(s):", x->cn->rank, x->a->count, why, x->nheads, x->nc,
          x->chunk, (unsigned long long)x->nsteps);
  for (int h = 0; h < x->nheads; h++)
    for (int gi = 0; gi < x->ngroups; gi++)
      fprintf(stderr, " head %d group %d issued %llu done %llu;", h, gi,
              (unsigned long long)x->lane[h].g[gi].issued,
              (unsigned long long)x->lane[h].g[gi].done);
  fprintf(stderr, " %llu NULL requests so far\n", (unsigned long long)x->cn->nulls);
  return -1;
}

int collnet_run(struct perf_net *pn, const struct plan_args *a) {
  if (a->count == 0) return 0; /* NCCL returns before enqueueing anything */
  struct cn_op x;
  memset(&x, 0, sizeof x);
  x.cn = pn->coll;
  x.a = a;
  cn_plan(&x);
  perf_logger(NCCL_LOG_TRACE, NCCL_COLL, __func__, __LINE__, "CollNet allreduce of %zu elements: "
              "%d head(s), %d channel(s), chunk %zu B, %llu step(s), %d group(s)", a->count,
              x.nheads, x.nc, x.chunk, (unsigned long long)x.nsteps, x.ngroups);
  double last = braid_now_s(), last_check = last;
  int pending = 1;
  while (pending) {
    int moved = cn_pass(&x, &pending);
    if (moved < 0) return -1;
    if (moved || !pending) {
      last = braid_now_s();
      continue;
    }
    double now = braid_now_s();
    if (now - last > x.cn->timeout_s) {
      char why[64];
      snprintf(why, sizeof why, "no progress for %d s (--timeout)", x.cn->timeout_s);
      return cn_stuck(&x, why);
    }
    if (now - last_check > 0.01) {
      last_check = now;
      if (rdv_peer_silent(x.cn->rdv, now)) {
        char why[128];
        snprintf(why, sizeof why, "rank %d is gone (exited or failed); the plugin reported nothing in %d s",
                 x.cn->rdv->lost_rank, RDV_LOST_GRACE_S);
        return cn_stuck(&x, why);
      }
    }
    if (x.cn->yield_idle) sched_yield();
  }
  return 0;
}
