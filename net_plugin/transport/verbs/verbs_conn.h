/* A verbs connection: one direction of data between two peers, striped over one RC endpoint per
 * rail (verbs_ep.h), with braid's rail scheduler (sched.h) deciding where each chunk goes.
 *
 * Data moves by RDMA WRITE straight into the receiver's buffer.  Each receive the receiver posts
 * is announced ahead of time (a CTS control message: sequence number, address, capacity, one
 * rkey per rail), so a send whose CTS has arrived starts at once.  The n-th send matches the
 * n-th receive.  A message is cut into chunks of `chunk` bytes (at least one, so an empty message
 * is one empty write); every chunk is a WRITE_WITH_IMM whose immediate names the receive slot,
 * the chunk and the chunk count, and the receiver counts distinct chunks (the last one's length
 * gives the size).  The sender knows a chunk has landed when its write completes (RC: the
 * peer's HCA acknowledged it), which is the scheduler's acknowledgement.  Data never rides on a
 * rail the scheduler has demoted while another rail is active: the scheduler's probes of such a
 * rail are writes of the same size into a scratch area the receiver registered for them, so a
 * slow rail never holds back a message.
 *
 * A rail that fails (a work-completion error, or the scheduler's STALLED verdict) is fenced on
 * both sides before any of its chunks is written again elsewhere: the sender moves its QP to
 * ERR and sends FENCE on a live rail; the receiver moves its own QP to ERR (nothing arriving on
 * it lands any more), drains its completions (every write that landed is counted), and answers
 * FENCED with, per receive slot, the sequence number it holds and whether it is still open.
 * Receives open at that moment complete only on the sender's FIN (sent once all their chunks are
 * acknowledged), so a chunk re-sent on a survivor can never land after the receive completed and
 * NCCL reused its buffer.  A failed rail comes back once its port does (verbs_rejoin.c: new queue
 * pairs on both ends, a new generation, probed before it carries data).  When every rail has
 * failed at once the connection fails.
 *
 * A receive may be handed over to the connection (braid_vc_detach, for NCCL's optional
 * completion) when nothing more is needed from this side for its data to land: its CTS is on the
 * wire, the connection has one rail (over more, a rail's fence needs this side's FENCED), and the
 * rail's posted receives cover every write still due.  The peer's writes then land
 * without this side's CPU; progress retires the receive once they are all counted.
 *
 * Single-threaded: the owner drives it through isend/irecv/test/progress. */
#ifndef BRAID_VERBS_CONN_H
#define BRAID_VERBS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/verbs/verbs_ep.h"
#include "transport/verbs/verbs_limits.h"

struct braid_vc;

struct braid_vc_opts {
  size_t chunk;     /* bytes per chunk (0: 128 KiB) */
  bool equal;       /* stripe in turn instead of by the scheduler (for comparison) */
  struct braid_verbs_qos qos; /* every queue pair's traffic class (zero: the defaults) */
};

/* A buffer registered on every rail of a connection (NCCL's mhandle). */
struct braid_vc_mem {
  int n;
  struct braid_verbs_mr mr[BRAID_VC_MAX_RAILS];
};

/* Opens one endpoint per rail.  0, or -1 with a WARN. */
int braid_vc_open(const struct braid_verbs_rail *rails, int nrails, bool sender,
                  const struct braid_vc_opts *o, struct braid_vc **out);
/* The endpoints' addresses, to send to the peer (nrails entries). */
void braid_vc_addrs(const struct braid_vc *vc, struct braid_verbs_ep_addr *out);
/* Connects each rail to the peer's address for it.  0, or -1 with a WARN. */
int braid_vc_connect(struct braid_vc *vc, const struct braid_verbs_ep_addr *peer, int npeer);

/* Registers [buf, buf+len) on every rail: host or CUDA memory (fd < 0: ibv_reg_mr, which takes
 * CUDA pointers under nvidia-peermem), or the dma-buf fd's [offset, offset+len) mapped at buf
 * (ibv_reg_dmabuf_mr; the fd is needed only during the call).  0, or -1 with a WARN (and
 * nothing left registered).  A rail that fails later keeps its registrations until dereg (its
 * protection domain lives until close), so the other rails' keys never change. */
int braid_vc_reg(struct braid_vc *vc, void *buf, size_t len, int fd, uint64_t offset, struct braid_vc_mem **out);
void braid_vc_dereg(struct braid_vc *vc, struct braid_vc_mem *m);

/* Receiver: GPUDirect flush of the data received into buf (inside mem): an RDMA READ of a few
 * bytes at buf on each live rail's loopback QP (verbs_flush.h; opened at the first flush).  0
 * posted (*req), 1 no room (test earlier flushes first), -1 failed (braid_vc_error).
 * flush_test: 0 (*done once every read completed), -1 when a read failed (the connection fails
 * with the reason). */
int braid_vc_flush(struct braid_vc *vc, const void *buf, struct braid_vc_mem *mem, int *req);
int braid_vc_flush_test(struct braid_vc *vc, int req, bool *done);

/* Posting: 0 posted (*req set), 1 no room now (test earlier requests, then retry), -1 failed
 * (braid_vc_error).  mem may be NULL for an empty message. */
int braid_vc_isend(struct braid_vc *vc, const void *buf, size_t size, struct braid_vc_mem *mem, int *req);
int braid_vc_irecv(struct braid_vc *vc, void *buf, size_t cap, struct braid_vc_mem *mem, int *req);
/* Receive req (just posted) needs nothing more from this side for its data to land (see
 * above)?  true: the connection now owns it and retires it by itself; never test it again.
 * false: test it as usual. */
bool braid_vc_detach(struct braid_vc *vc, int req);
/* Drives the connection, then reports req: 0 (*done, and for receives *size), -1 failed. */
int braid_vc_test(struct braid_vc *vc, int req, bool *done, size_t *size);
/* Drives the connection (completions, control messages, the scheduler).  0, or -1 failed. */
int braid_vc_progress(struct braid_vc *vc);

const char *braid_vc_error(const struct braid_vc *vc);
/* The failure is the application's (a send larger than its receive, reported on both sides):
 * NCCL gets ncclInvalidUsage, else ncclRemoteError. */
bool braid_vc_usage_error(const struct braid_vc *vc);
/* Each rail's and each request's state, for a WARN about a connection that stopped moving. */
void braid_vc_describe(const struct braid_vc *vc, char *buf, size_t len);
/* Bytes each rail carried (acknowledged writes), for telemetry and tests. */
uint64_t braid_vc_rail_bytes(const struct braid_vc *vc, int rail);
bool braid_vc_rail_down(const struct braid_vc *vc, int rail);
/* A rail's state and history on this connection (telemetry, tests): the scheduler's state
 * (enum braid_rail_state) and estimate, bytes carried, times it failed, was demoted as slow and
 * rejoined, and when it last rejoined (braid_now_ns; 0: never). */
struct braid_vc_rail_health {
  bool down;
  int state;
  double est_Bps;
  uint64_t bytes;
  unsigned failures, demotions, rejoins;
  uint64_t last_rejoin_ns;
};
void braid_vc_rail_health(const struct braid_vc *vc, int rail, struct braid_vc_rail_health *h);
/* Receiver: flush reads completed on each rail (braid_vc_flush_test), for tests. */
uint64_t braid_vc_rail_flushes(const struct braid_vc *vc, int rail);
void braid_vc_close(struct braid_vc *vc);

#endif
