/* One RC queue pair on one verbs rail (verbs_dev.h): the endpoint a verbs transport builds on.
 *
 * open: protection domain, one completion queue, one RC QP, and a ring of registered receive
 * buffers kept posted for small control messages (up to BRAID_VERBS_CTRL_MAX bytes).  The local
 * address (braid_verbs_ep_addr) goes to the peer out of band; connect takes the peer's and moves
 * the QP through INIT, RTR and RTS (RoCE: GID addressing; InfiniBand: the peer's LID).
 *
 * Posting: a control SEND (inline when small) and an RDMA WRITE_WITH_IMM from a registered local
 * buffer to (remote address, rkey) with a 32-bit immediate.  Every send is signaled.  poll
 * returns completions: a send done, a control message received (its bytes copied out; the
 * buffer is posted again at once), a write-with-imm received (imm and byte count), or an error
 * (status and ibv_wc_status_str's text).  After the first error the endpoint is failed: posts
 * are refused, poll keeps returning the remaining (flushed) completions.
 *
 * A dead peer surfaces as IBV_WC_RETRY_EXC_ERR within about half a second (see verbs_ep.c,
 * BRAID_VERBS_TIMEOUT).  One thread per endpoint; not thread-safe. */
#ifndef BRAID_VERBS_EP_H
#define BRAID_VERBS_EP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/verbs/verbs_dev.h"
#include "wire/verbs.h"

#define BRAID_VERBS_CTRL_MAX 256 /* bytes in one control message */

struct braid_verbs_ep;

/* What a peer needs to connect (struct braid_verbs_ep_addr) is a record of wire/verbs.h's link
 * message, exchanged out of band. */

struct braid_verbs_mr {
  void *addr;
  size_t len;
  uint32_t lkey, rkey;
  void *mr; /* struct ibv_mr */
};

enum braid_verbs_ev_kind {
  BRAID_VERBS_EV_SEND_DONE = 1, /* a control send completed (cookie) */
  BRAID_VERBS_EV_WRITE_DONE,    /* a write-with-imm completed at this side (cookie) */
  BRAID_VERBS_EV_CTRL,          /* a control message arrived: len bytes in data */
  BRAID_VERBS_EV_WRITE_IMM,     /* a peer's write-with-imm landed: imm, len bytes */
  BRAID_VERBS_EV_ERROR,         /* a work completion failed: status, why (cookie for sends) */
  BRAID_VERBS_EV_READ_DONE,     /* a flush read completed (verbs_flush.h; cookie) */
};

struct braid_verbs_ev {
  enum braid_verbs_ev_kind kind;
  uint64_t cookie;
  uint32_t imm;
  uint32_t len;
  int status;    /* enum ibv_wc_status for errors */
  char why[96];  /* errors: "send: transport retry counter exceeded" and the like */
  uint8_t data[BRAID_VERBS_CTRL_MAX];
};

/* The traffic class of an endpoint's queue pair (its connection's: transport/tclass.h), set in
 * its address vector at RTR: the GRH traffic class where the address is global (RoCE: the IP TOS
 * byte of its packets) and the service level.  0 and 0 are the defaults. */
struct braid_verbs_qos {
  uint8_t tc, sl;
};

/* Opens an endpoint on rail (depth: sends and receives each may have outstanding, 0 = 128; qos:
 * NULL for the defaults).  0, or -1 with a WARN. */
int braid_verbs_ep_open(const struct braid_verbs_rail *rail, int depth, const struct braid_verbs_qos *qos,
                        struct braid_verbs_ep **out);
void braid_verbs_ep_addr(const struct braid_verbs_ep *ep, struct braid_verbs_ep_addr *out);
/* Connects to the peer's address (INIT -> RTR -> RTS) in the endpoint's traffic class.  0, or -1
 * with a WARN. */
int braid_verbs_ep_connect(struct braid_verbs_ep *ep, const struct braid_verbs_ep_addr *peer);

/* Registers [buf, buf+len): for local access only, or with remote (a receiver's buffers: the peer
 * RDMA-writes into them, the flush RDMA-reads them back) for remote read and write too; a
 * sender's buffers never grant the peer anything.  0, or -1 with a WARN. */
int braid_verbs_ep_reg(struct braid_verbs_ep *ep, void *buf, size_t len, bool remote, struct braid_verbs_mr *out);
/* Registers the dma-buf fd's [offset, offset+len), mapped at buf (the iova: keys and addresses
 * work as for braid_verbs_ep_reg's).  The fd is needed only during the call.  0, or -1 with a
 * WARN (also when libibverbs lacks ibv_reg_dmabuf_mr). */
int braid_verbs_ep_reg_dmabuf(struct braid_verbs_ep *ep, void *buf, size_t len, uint64_t offset, int fd, bool remote,
                              struct braid_verbs_mr *out);
/* Deregisters; the caller makes sure no posted work still uses it. */
void braid_verbs_ep_dereg(struct braid_verbs_ep *ep, struct braid_verbs_mr *mr);

/* Posts: 0 posted, 1 the send queue is full (poll, then try again), -1 error (WARN; failed
 * endpoint, bad length or offset, ibv_post_send refused). */
int braid_verbs_ep_send(struct braid_verbs_ep *ep, const void *msg, size_t len, uint64_t cookie);
/* write_imm: len 0 writes nothing (mr may be NULL) and still delivers imm. */
int braid_verbs_ep_write_imm(struct braid_verbs_ep *ep, const struct braid_verbs_mr *mr, size_t off,
                             size_t len, uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t cookie);

/* Up to max completions into ev; returns how many (0: none yet), -1 when the CQ cannot be
 * polled.  Error completions come back as BRAID_VERBS_EV_ERROR events. */
int braid_verbs_ep_poll(struct braid_verbs_ep *ep, struct braid_verbs_ev *ev, int max);
bool braid_verbs_ep_failed(const struct braid_verbs_ep *ep);
/* Reads the device's asynchronous events (never blocks): 1 when one says this endpoint can no
 * longer carry data (its port went down, its QP hit a fatal error, the device failed), with the
 * event in why; else 2 when its port became ACTIVE; 0 otherwise (other ports' events are
 * ignored, this port's others logged).  (The events are the device context's: one endpoint of
 * the context reads each, so a caller must not count on seeing every one.) */
int braid_verbs_ep_port_events(struct braid_verbs_ep *ep, char *why, size_t whylen);
/* Fences the endpoint: its QP to ERR, so nothing more is sent from it and nothing arriving on it
 * lands in memory; every posted request then completes (flushed) through poll.  0, or -1 with a
 * WARN when the QP cannot be moved. */
int braid_verbs_ep_fence(struct braid_verbs_ep *ep);
/* Fenced, and every posted request has come back through poll: the completions of whatever
 * landed before the fence have all been seen. */
bool braid_verbs_ep_drained(const struct braid_verbs_ep *ep);
const char *braid_verbs_ep_name(const struct braid_verbs_ep *ep); /* "rxe_a0:1" */
/* Whether the endpoint's port can carry traffic again: ACTIVE and, over Ethernet, a GID at the
 * rail's index (taken as the rail's from now on: it may have changed while the port was down).
 * false with the reason. */
bool braid_verbs_ep_port_ready(struct braid_verbs_ep *ep, char *why, size_t whylen);
/* A fenced endpoint made new, for a rejoin: its QP and CQ destroyed (nothing of the old queue
 * pair can land, complete or be reported any more) and new ones created, in INIT, with the
 * control receives posted; the protection domain, and with it every registration and its keys,
 * stays.  Its address (a new QP number and PSN, the port's current GID) goes to the peer, then
 * connect as after open.  0, or -1 with a WARN (the endpoint stays failed; renew may be tried
 * again). */
int braid_verbs_ep_renew(struct braid_verbs_ep *ep);
/* Receives posted and not yet seen through poll: what the peer may still send or write with an
 * immediate before this side polls again (more would be RNR-NAKed and wait). */
int braid_verbs_ep_recv_posted(const struct braid_verbs_ep *ep);

/* For a second queue pair on this endpoint's protection domain and port (verbs_flush.h): its
 * protection domain, device context, and the move of an RC QP through INIT, RTR and RTS
 * connected to itself.  0, or -1 with a WARN. */
struct ibv_pd;
struct ibv_qp;
struct ibv_pd *braid_verbs_ep_pd(const struct braid_verbs_ep *ep);
struct ibv_context *braid_verbs_ep_context(const struct braid_verbs_ep *ep);
int braid_verbs_ep_loop(struct braid_verbs_ep *ep, struct ibv_qp *qp);

/* Moves the QP to ERR, drains the CQ (bounded), destroys QP, CQ, control buffers, PD, device
 * context.  The user's registrations must be deregistered first (a WARN names any left). */
void braid_verbs_ep_close(struct braid_verbs_ep *ep);

#endif
