/* braid-perf: what an operation needs to run over the engine, and who talks to whom. */
#ifndef PERF_PLAN_H
#define PERF_PLAN_H

#include <stddef.h>

#include "engine.h"
#include "opts.h"
#include "proto.h"

struct plan_args {
  const struct perf_opts *o;
  enum perf_algo algo;  /* allreduce: ring, tree or collnet (never auto/nccl) */
  int rank, nranks, nch;
  ncclDataType_t dt;
  ncclRedOp_t redop;
  size_t esize;
  const char *in;
  char *out;
  char *tmp;            /* reducescatter partial sums: as large as `in` */
  size_t count;         /* sendrecv: bytes; allreduce: elements; allgather/reducescatter:
                           elements per rank */
  /* sendrecv with --mem other than host: user buffers of that kind, which the direct path
   * (p2p_direct_used) sends from and receives into; bench.c copies `in` into in_mem and out_mem
   * back into `out`, untimed. NULL otherwise. */
  const struct perf_buf *in_mem, *out_mem;
  struct proto_cfg proto;
};

#define PLAN_MAX_PEERS 6

/* Peers of `rank` on channel `chan` for the configured op: it sends to send[], receives from
 * recv[]. */
struct plan_peers {
  int send[PLAN_MAX_PEERS], nsend;
  int recv[PLAN_MAX_PEERS], nrecv;
};
void plan_peers(const struct perf_opts *o, int rank, int nranks, int chan, struct plan_peers *p);

/* Channel c's contiguous part [*start, *start + *len) of count items split over nch channels,
 * as NCCL splits a collective (parts are multiples of `align` items, the last one shorter). */
void plan_split(size_t count, int nch, int c, size_t align, size_t *start, size_t *len);

/* The connection of this rank to `peer` on channel `chan` (NULL when there is none). */
struct eng_conn *plan_conn(struct engine *e, int chan, int peer, int is_send);

int p2p_run(struct engine *e, const struct plan_args *a);
/* Whether p2p_run moves the data straight from / into the user buffers (Simple, not --staged). */
int p2p_direct_used(const struct plan_args *a);
int ring_run(struct engine *e, const struct plan_args *a);
int tree_run(struct engine *e, const struct plan_args *a);

/* The binary trees of NCCL's double binary tree (graph/trees.cc): tree 0 or 1. */
void tree_links(int nranks, int rank, int tree, int *up, int down[2]);

#endif
