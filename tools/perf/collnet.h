/* braid-perf --algo collnet: NCCL's CollNet chain allreduce over the plugin's
 * ncclCollNetPlugin_vN, with one rank per node (every rank is its node's head).
 *
 * Shaped as NCCL 2.28's src/transport/coll_net.cc and enqueue.cc do it:
 *  - set-up (collnet_setup.c): CollNet init + devices right after the net plugin's; listen on
 *    the device, all-gather the 128-byte handles, ONE blocking connect(handles, nranks, rank,
 *    listenComm, &collComm) shared by every channel, closeListen; the shared buffer of
 *    2 x nChannels x NCCL_BUFFSIZE (send half, then receive half; host memory here) registered
 *    once per channel and direction (NCCL's per-connection regMr); then reduceSupport for every
 *    type 0..11 x op 0..3, all-gathered (a pair is usable when no rank says no).
 *  - data (collnet.c): the op uses nc <= nChannels channels and a chunk of at most 256 KiB per
 *    channel; step k of channel s carries elements [k*nc*chunk + s*chunk, +chunk) of the user
 *    buffer, staged in slot k%8 of the shared buffer at s*chunk; the chunks of up to 8
 *    consecutive channels (a "group") at one step are ONE iallreduce over their contiguous
 *    region, always the full group x chunk bytes; up to NCCL_STEPS = 8 per group are in flight,
 *    issued in step-then-group order; a NULL request is the same call retried later. */
#ifndef PERF_COLLNET_H
#define PERF_COLLNET_H

#include <stddef.h>
#include <stdint.h>

#include "../netload/collload.h"
#include "opts.h"

#define COLLNET_GROUP_NSUBS 8   /* coll_net.cc: channels per iallreduce */
#define COLLNET_NUM_TYPES 12    /* ncclNumTypes in 2.28 (fp8 included) */
#define COLLNET_NUM_OPS 4       /* Sum, Prod, Max, Min: what NCCL asks reduceSupport about */

struct perf_net;
struct plan_args;
struct rdv;

struct collnet {
  struct collload cl;
  void *ctx;
  int ctx_valid;
  int dev, ndev;
  netload_props_t props;
  void *comm;                 /* the collComm every channel shares (NCCL's sharedConnect) */
  int nch;                    /* the comm's channels: NCCL's collNet->nChannels */
  size_t buffsize, slot;      /* NCCL_BUFFSIZE (Simple) and one of its NCCL_STEPS slots */
  char *region;               /* shared buffer: send slots 0..7, then receive slots 0..7 */
  size_t region_bytes;
  void *send_mh[PERF_MAX_CHANNELS], *recv_mh[PERF_MAX_CHANNELS];
  unsigned char support[COLLNET_NUM_OPS][COLLNET_NUM_TYPES]; /* agreed by every rank */
  int nsupported;
  int rank, nranks, timeout_s, yield_idle;
  int ready;                  /* collnet_setup succeeded on every rank */
  struct rdv *rdv;
  uint64_t calls, nulls, tests; /* iallreduce requests, NULL requests retried, test() calls */
};

/* Loads and sets up CollNet from the net plugin's library (after setup_plugin); every rank
 * calls it, and every rank gets the same result. -1 after printing why ("CollNet unavailable:
 * ..." and the like); pn->coll then stays (not ready) for collnet_close/collnet_finalize. */
int collnet_setup(struct perf_net *pn, const struct perf_opts *o, struct rdv *r);
/* Appends the CollNet device and set-up to the describe line. */
void collnet_describe(const struct perf_net *pn, char *buf, size_t len);
/* 1 when collnet_setup succeeded (CollNet can run allreduces). */
int collnet_ready(const struct perf_net *pn);
/* One allreduce of a->count elements of a->in into a->out over min(a->nch, the set-up
 * channels) channels. 0, or -1 after printing why. */
int collnet_run(struct perf_net *pn, const struct plan_args *a);
/* deregMr and closeColl (NCCL's proxy free), then rank 0 prints the all-rank call counts
 * (when CollNet was ready). Every rank calls it. */
int collnet_close(struct perf_net *pn, struct rdv *r);
/* CollNet finalize (NCCL calls it after the net's finalize) and frees the state. */
int collnet_finalize(struct perf_net *pn);

#endif
