/* Allreduce on the simulated cluster: NCCL's ring and tree, CollNet-PS (braid-ps), each plain
 * (NCCL's one NIC per channel) or over braid's striping (every connection of a node spread over
 * its rails by braid's scheduler, at the rate the rail simulator measured for that node). */
#ifndef BRAID_SIM_COLL_H
#define BRAID_SIM_COLL_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster.h"

enum algo { ALGO_RING, ALGO_TREE, ALGO_PS, ALGO_COUNT };

struct coll_result {
  double time_s;     /* INFINITY: the collective cannot complete (note says why) */
  double algbw_Bps;  /* bytes per GPU / time */
  double busbw_Bps;  /* algbw * 2 (n - 1) / n */
  int simulated;     /* rings (ring), channels (tree) or node classes (ps) simulated */
  int of;            /* ... out of */
  double steps;      /* chunk steps (ring), flows (tree, ps) computed */
  char note[160];
};

/* NCCL's ring: channels_per_rail x rails channels, each a ring over every GPU (node-major),
 * channel c leaving each node on rail c mod rails (braid: on the node's striped rate, shared by
 * all channels).  Chunk-faithful: every step of every loop on every hop of one ring, with the
 * step's data waiting for the previous step to arrive (NCCL's recvReduceSend chain) and each hop
 * sending in order.  Rings that meet no fault are identical: one is simulated for all of them,
 * plus every ring that a fault touches. */
int coll_ring(const struct cluster *cl, bool braid, struct coll_result *res);

/* NCCL's tree: a double binary tree over the nodes (half the channels on each) and a chain
 * through the GPUs of each node; reduce up and broadcast down, pipelined in chunks.  Every edge
 * of every channel is a flow; their max-min fair rates give each channel's pipeline rate; time =
 * critical path of one chunk up and down + (chunks - 1) x chunk / rate. */
int coll_tree(const struct cluster *cl, bool braid, struct coll_result *res);

/* CollNet-PS: reduce-scatter over NVLink, each rail's head pushes its part of the node's sum to
 * the servers in partitions laid out by braid-ps's own ps_layout() (weights from ps_rate and
 * ps_weights(), adapting from one operation to the next), the servers reduce, heads pull the
 * result, all-gather over NVLink; pipelined.  Identical nodes form one class (a flow of
 * multiplicity m); every node a fault touches is its own class. */
int coll_ps(const struct cluster *cl, bool braid, struct coll_result *res);

int coll_run(const struct cluster *cl, enum algo a, bool braid, struct coll_result *res);
const char *algo_name(enum algo a, bool braid);

/* The ring's recurrence on one ring of n hops (exposed for the tests): hop i sends to i+1 mod n
 * at rate[i] bytes/s with latency lat[i] s; `bytes` per channel, chunk cap `chunk`.  Returns the
 * time (s) the last rank holds the result, and the steps computed in *steps. */
double ring_recurrence(int n, const double *rate, const double *lat, double bytes, double chunk,
                       double *steps);

#endif
