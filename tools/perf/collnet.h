/* braid-perf --algo collnet | CollNetDirect: NCCL's CollNet allreduce over the plugin's
 * ncclCollNetPlugin_vN, with one rank per node.
 *
 * Shaped as NCCL 2.27/2.28/2.30 src/transport/coll_net.cc, transport.cc and enqueue.cc do it:
 *  - heads: NCCL's heads are the node's unique GPUs at channel index 0 of the CollNetDirect graph,
 *    which only takes NICs the CollNet device list marked coll=1 (coll_net.cc ncclCollNetSetup
 *    "Head GPU index is always 0", graph/search.cc); braid lists every net device, so a node with
 *    a GPU next to each of 8 NICs has 8 heads (collNetHeadsNum; NCCL_MAX_DIRECT_ARITY + 1 = 8
 *    local ranks at most). The chain (--algo collnet) has one head here: the rank itself.
 *    --algo CollNetDirect gives each rank (node) --heads heads; all of a node's heads live in
 *    its one process, as when one process drives all of a node's GPUs.
 *  - set-up (collnet_setup.c): CollNet init + devices right after the net plugin's; then for
 *    each head in turn (transport.cc ncclTransportCollNetSetup, called by every rank for each
 *    head h): listen on the head's device, all-gather the 128-byte handles, ONE blocking
 *    connect(handles of head h of every node, nranks = nodes, rank = node, listenComm,
 *    &collComm) shared by every channel of that head (coll_net.cc sharedConnect), closeListen;
 *    each head's own shared buffer of 2 x nChannels x NCCL_BUFFSIZE (send half, then receive
 *    half; host memory here) registered once per channel and direction (NCCL's per-connection
 *    regMr); then reduceSupport for every type 0..11 x op 0..3, all-gathered (a pair is usable
 *    when no rank says no).
 *  - data (collnet.c): the op uses nc <= nChannels channels and a chunk per channel and step
 *    (calcCollChunking: CollNetChain at most 256 KiB, CollNetDirect at most one NCCL_STEPS
 *    slot); step k of head h's channel s carries elements [(k*nc*H + s*H + h) * chunk, +chunk)
 *    of the user buffer (device/all_reduce.h CollNetDirect: offset = gridOffset +
 *    (bid*nHeads + headRank)*chunkSize; the chain is H = 1), staged in slot k%8 of that head's
 *    shared buffer at s*chunk; the chunks of up to 8 consecutive channels (a "group") at one step
 *    are ONE iallreduce over their contiguous region, always the full group x chunk bytes; up to
 *    NCCL_STEPS = 8 per group are in flight, issued in step-then-group order per head; a NULL
 *    request is the same call retried later. Every head's proxy runs at once.
 *  - never iallgather / ireducescatter: NCCL's tuning (graph/tuning.cc) gives CollNetDirect
 *    (2.20-2.26) and CollNetDirect / multi-node NVLS (2.27+) allgather and reducescatter zero
 *    bandwidth when the table's pointer is NULL; braid-perf refuses those ops over CollNet. */
#ifndef PERF_COLLNET_H
#define PERF_COLLNET_H

#include <stddef.h>
#include <stdint.h>

#include "../netload/collload.h"
#include "opts.h"

#define COLLNET_GROUP_NSUBS 8   /* coll_net.cc: channels per iallreduce */
#define COLLNET_NUM_TYPES 12    /* ncclNumTypes in 2.28 (fp8 included) */
#define COLLNET_NUM_OPS 4       /* Sum, Prod, Max, Min: what NCCL asks reduceSupport about */
#define COLLNET_MAX_HEADS 8     /* NCCL_MAX_DIRECT_ARITY + 1: CollNetDirect's local ranks */

struct perf_net;
struct plan_args;
struct rdv;

/* One head: NCCL's head rank with its own proxy, collComm and shared buffer. */
struct collnet_head {
  int dev;                    /* its CollNet device */
  void *comm;                 /* the collComm every channel shares (NCCL's sharedConnect) */
  char *region;               /* shared buffer: send slots 0..7, then receive slots 0..7 */
  void *send_mh[PERF_MAX_CHANNELS], *recv_mh[PERF_MAX_CHANNELS];
};

struct collnet {
  struct collload cl;
  void *ctx;
  int ctx_valid;
  int dev, ndev;              /* the first head's device; the CollNet device count */
  netload_props_t props;      /* the first head's device's properties */
  int direct;                 /* CollNetDirect (else the chain) */
  int nheads;                 /* heads per node, the same on every rank (1 for the chain) */
  struct collnet_head head[COLLNET_MAX_HEADS];
  int nch;                    /* the comm's channels: NCCL's collNet->nChannels */
  size_t buffsize, slot;      /* NCCL_BUFFSIZE (Simple) and one of its NCCL_STEPS slots */
  size_t region_bytes;        /* of each head's shared buffer */
  unsigned char support[COLLNET_NUM_OPS][COLLNET_NUM_TYPES]; /* agreed by every rank */
  int nsupported;
  int rank, nranks, timeout_s, yield_idle;
  int ready;                  /* collnet_setup succeeded on every rank */
  struct rdv *rdv;
  uint64_t calls, nulls, tests; /* iallreduce requests, NULL requests retried, test() calls */
};

/* Loads and sets up CollNet from the net plugin's library (after setup_plugin); every rank
 * calls it, and every rank gets the same result. -1 after printing why ("CollNet unavailable:
 * ..." and the like, or that CollNet does allreduce only when o->op is allgather or
 * reducescatter); pn->coll then stays (not ready) for collnet_close/collnet_finalize. */
int collnet_setup(struct perf_net *pn, const struct perf_opts *o, struct rdv *r);
/* Appends the CollNet device and set-up to the describe line. */
void collnet_describe(const struct perf_net *pn, char *buf, size_t len);
/* 1 when collnet_setup succeeded (CollNet can run allreduces). */
int collnet_ready(const struct perf_net *pn);
/* One allreduce of a->count elements of a->in into a->out over min(a->nch, the set-up
 * channels) channels of every head. 0, or -1 after printing why. */
int collnet_run(struct perf_net *pn, const struct plan_args *a);
/* deregMr and closeColl (NCCL's proxy free), then rank 0 prints the all-rank call counts
 * (when CollNet was ready). Every rank calls it. */
int collnet_close(struct perf_net *pn, struct rdv *r);
/* CollNet finalize (NCCL calls it after the net's finalize) and frees the state. */
int collnet_finalize(struct perf_net *pn);

#endif
