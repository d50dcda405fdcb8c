/* The verbs path (comm/path.h): a comm's data over one striped verbs connection (verbs_conn.h).
 *
 * The set-up is the socket transport's (handle, secret, hello, rail list; one stream per rail).
 * Then each end maps its rails (network interfaces) to RDMA ports (verbs_dev.h), opens the
 * connection's queue pairs and sends their addresses on stream 0's socket (link/startup.h); the
 * first data call after the peer's addresses arrived connects the queue pairs.  The sockets stay
 * open, silent: stream 0's closing shows that the peer is gone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/path.h"
#include "link/startup.h"
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "stripe/telemetry.h"
#include "transport/verbs/verbs_conn.h"
#include "transport/verbs/verbs_dev.h"
#include "wire/verbs.h"

#define VLINK_CHUNK (64u << 10) /* x BRAID_VC_MAX_CHUNKS = 1 GiB, maxP2pBytes */
#define VLINK_CHECK_NS 100000000ull

/* The address message is wire/verbs.h's link message. */
_Static_assert(BRAID_VC_MAX_RAILS <= BRAID_VWIRE_RAILS && BRAID_VLINK_MAX_BYTES <= BRAID_LINK_MSG_MAX,
               "the address message fits its buffer");
_Static_assert(BRAID_LINK_IB == BRAID_VADDR_LINK_IB && BRAID_LINK_ETH == BRAID_VADDR_LINK_ETH,
               "the link layer's codes on the wire");

/* The connection holds BRAID_VC_SLOTS requests at a time (what NCCL's proxy has in flight); a
 * comm takes NCCL_NET_MAX_REQUESTS (a sender's maxRecvs times more), as other consumers may post
 * them all before testing any.  So the path keeps, in posting order, every request the
 * connection has not yet completed: those handed to it (vreq >= 0) and behind them those waiting
 * their turn (vreq -1), handed over in order (the n-th send matches the n-th receive) as slots
 * free up.  While some wait, the path completes the connection's requests itself (done set for
 * the caller's next test), so that a consumer testing only its last request still gets there. */
struct vpath {
  struct braid_vc *vc;
  uint64_t published_ns; /* sender: when the rails' telemetry was last brought up to date */
  struct braid_link_startup link; /* the queue pairs' addresses, exchanged on stream 0 */
  struct braid_req **order;       /* c->nreqs entries: requests not completed, posting order */
  int norder, nwait;              /* of which the last nwait wait their turn */
};

static struct braid_vc *vp_vc(const struct braid_comm *c) {
  const struct vpath *p = c->path_state;
  return p ? p->vc : NULL;
}

static ncclResult_t vp_start(struct braid_comm *c) {
  if (c->nrails > BRAID_VC_MAX_RAILS)
    return braid_comm_fail(c, ncclInvalidUsage, "verbs: %d rails (at most %d)", c->nrails, BRAID_VC_MAX_RAILS);
  struct braid_verbs_rail rails[BRAID_VC_MAX_RAILS];
  for (int r = 0; r < c->nrails; r++) {
    char why[256];
    if (braid_verbs_rail_of_netdev(c->streams[r].rail_name, &rails[r], why, sizeof why))
      return braid_comm_fail(c, ncclSystemError, "verbs: rail %d: %s", r, why);
  }
  struct vpath *p = calloc(1, sizeof *p);
  if (!p) return braid_comm_fail(c, ncclSystemError, "verbs: out of memory");
  c->path_state = p;
  if (!(p->order = calloc((size_t)c->nreqs, sizeof *p->order)))
    return braid_comm_fail(c, ncclSystemError, "verbs: out of memory");
  struct braid_vc_opts o = {.chunk = VLINK_CHUNK,
                            .equal = !strcmp(braid_param_str(BRAID_P_STRIPING), "equal"),
                            /* the class the connector chose, on both ends (transport/tclass.h) */
                            .qos = {(uint8_t)(c->cls.tc < 0 ? 0 : c->cls.tc),
                                    (uint8_t)(c->cls.sl < 0 ? 0 : c->cls.sl)}};
  if (braid_vc_open(rails, c->nrails, c->kind == BRAID_COMM_SEND, &o, &p->vc))
    return braid_comm_fail(c, ncclSystemError, "verbs: cannot open queue pairs on the rails (see the WARN above)");
  uint8_t msg[BRAID_LINK_MSG_MAX];
  struct braid_verbs_ep_addr addrs[BRAID_VC_MAX_RAILS];
  braid_vc_addrs(p->vc, addrs);
  size_t len = braid_vlink_encode(addrs, c->nrails, msg);
  if (braid_link_begin(&p->link, c->streams[0].fd, msg, len, braid_now_ns()))
    return braid_comm_fail(c, ncclSystemError, "verbs: cannot send the queue pairs' addresses: %s",
                           c->streams[0].fd < 0 ? "stream 0 did not connect" : strerror(errno));
  for (int r = 0; r < c->nrails; r++)
    BRAID_INFO(NCCL_INIT | NCCL_NET, "verbs: rail %d is %s on %s:%d (%s)", r, c->streams[r].rail_name,
               rails[r].dev, rails[r].port, braid_verbs_link_name(rails[r].link));
  return ncclSuccess;
}

/* The address message's length, from its header (wire/verbs.h). */
static ssize_t vp_need(const uint8_t *msg, size_t got, const void *arg, char *why, size_t whylen) {
  (void)got;
  const struct braid_comm *c = arg;
  char err[128];
  int n = braid_vlink_rails(msg, err, sizeof err);
  if (n < 0) return snprintf(why, whylen, "the peer's queue-pair addresses are garbled: %s", err), -1;
  if (n != c->nrails)
    return snprintf(why, whylen, "the peer's queue-pair addresses are for %d rails, this end has %d", n,
                    c->nrails), -1;
  return (ssize_t)BRAID_VLINK_BYTES((size_t)n);
}

/* The connection ready to carry data?  1 yes, 0 not yet (NCCL retries), -1 (c failed). */
static int vp_ready(struct braid_comm *c) {
  struct vpath *p = c->path_state;
  char why[300];
  uint64_t now = braid_now_ns();
  bool was = p->link.linked;
  int rc = braid_link_poll(&p->link, c->streams[0].fd, now, c->timeout_ns, VLINK_CHECK_NS, BRAID_VLINK_HDR_BYTES,
                           vp_need, c, "queue-pair addresses", why, sizeof why);
  if (rc == 1 && !was) {
    struct braid_verbs_ep_addr peer[BRAID_VWIRE_RAILS];
    char err[128];
    int npeer = braid_vlink_decode(p->link.msg, p->link.got, peer, err, sizeof err);
    if (npeer < 0) {
      snprintf(why, sizeof why, "the peer's queue-pair addresses are garbled: %s", err);
      rc = -1;
    } else if (braid_vc_connect(p->vc, peer, npeer)) {
      snprintf(why, sizeof why, "connecting the queue pairs failed: %s", braid_vc_error(p->vc));
      rc = -1;
    } else {
      braid_link_up(&p->link, now);
    }
  }
  if (rc < 0) braid_comm_fail(c, ncclRemoteError, "verbs: %s", why);
  return rc;
}

/* Host and CUDA memory (under nvidia-peermem) by address, dma-buf by fd; api/net.c refused
 * what the device did not advertise. */
static ncclResult_t vp_reg(struct braid_comm *c, void *data, size_t size, const struct braid_mem_desc *d,
                           void **mem) {
  struct braid_vc_mem *m = NULL;
  struct braid_vc *vc = vp_vc(c);
  if (!vc) {
    BRAID_WARN("verbs: regMr on a connection whose queue pairs are not open");
    return ncclSystemError;
  }
  if (braid_vc_reg(vc, data, size, d->fd, d->offset, &m)) return ncclSystemError;
  *mem = m;
  return ncclSuccess;
}

static void vp_dereg(struct braid_comm *c, void *data, size_t size, void *mem) {
  (void)data, (void)size;
  if (mem) braid_vc_dereg(vp_vc(c), mem);
}

/* The connection failed; the application's misuse (a size mismatch, told to both sides) is
 * ncclInvalidUsage, the rest ncclRemoteError. */
static ncclResult_t vp_fail(struct braid_comm *c) {
  struct braid_vc *vc = vp_vc(c);
  return braid_comm_fail(c, braid_vc_usage_error(vc) ? ncclInvalidUsage : ncclRemoteError, "verbs: %s",
                         braid_vc_error(vc));
}

/* Drops order[i], keeping the order of the rest. */
static void order_drop(struct vpath *p, int i) {
  memmove(&p->order[i], &p->order[i + 1], (size_t)(p->norder - i - 1) * sizeof *p->order);
  p->norder--;
}

/* Hands r to the connection: 0 (r->vreq set), 1 no room yet, -1 failed.  NCCL's
 * optional-completion hint: the peer writes straight into the buffer once the CTS (sent here) is
 * on the wire; braid_vc_detach says when nothing else is needed from this side (a one-rail
 * connection, room in its receive ring), and then the request completes at its first test(). */
static int hand_over(struct braid_vc *vc, struct braid_req *r) {
  int rc = r->kind == BRAID_REQ_SEND ? braid_vc_isend(vc, r->data, r->size, r->vmem, &r->vreq)
                                     : braid_vc_irecv(vc, r->slot[0].buf, r->slot[0].cap, r->vmem, &r->vreq);
  if (rc == 0 && r->kind == BRAID_REQ_RECV && r->hinted) r->early = braid_vc_detach(vc, r->vreq);
  if (rc != 0) r->vreq = -1;
  return rc;
}

/* While requests wait their turn: completes what the connection finished (done set, its slot
 * free), then hands the waiting ones over in order while it has room.  0, or -1 (the connection
 * failed). */
static int vp_pump(struct braid_comm *c) {
  struct vpath *p = c->path_state;
  struct braid_vc *vc = p->vc;
  if (!p->nwait) return 0;
  for (int i = 0; i < p->norder - p->nwait;) {
    struct braid_req *r = p->order[i];
    bool done = false;
    size_t size = 0;
    if (braid_vc_test(vc, r->vreq, &done, &size)) return -1;
    if (!done) {
      i++;
      continue;
    }
    if (r->kind == BRAID_REQ_RECV) r->slot[0].size = size;
    r->done = true;
    order_drop(p, i);
  }
  while (p->nwait) {
    int i = p->norder - p->nwait;
    struct braid_req *r = p->order[i];
    int rc = hand_over(vc, r);
    if (rc < 0) return -1;
    if (rc == 1) break;
    p->nwait--;
    if (r->early) order_drop(p, i); /* the connection's now: done at its first test */
  }
  return 0;
}

/* Posts r: to the connection, or behind the requests already waiting.  Never *again: the comm's
 * request pool is the limit. */
static ncclResult_t vp_post(struct braid_comm *c, struct braid_req *r, void *mem, bool *again) {
  struct vpath *p = c->path_state;
  *again = false;
  r->vmem = mem;
  r->vreq = -1;
  if (p->norder == c->nreqs) return braid_comm_fail(c, ncclInternalError, "verbs: request list full");
  int rc = p->nwait ? 1 : hand_over(p->vc, r);
  if (rc < 0) return vp_fail(c);
  if (rc == 0 && r->early) return ncclSuccess;
  p->order[p->norder++] = r;
  if (rc == 1) p->nwait++;
  if (vp_pump(c)) return vp_fail(c);
  return ncclSuccess;
}

static ncclResult_t vp_isend(struct braid_comm *c, struct braid_req *r, void *mem, bool *again) {
  return vp_post(c, r, mem, again);
}

static ncclResult_t vp_irecv(struct braid_comm *c, struct braid_req *r, void *mem, bool *again) {
  return vp_post(c, r, mem, again);
}

/* The flush of GPU memory NCCL asks for after a receive (net.c sends only GPU memory here). */
static ncclResult_t vp_flush(struct braid_comm *c, struct braid_req *r, void *data, void *mem, bool *none) {
  struct braid_vc *vc = vp_vc(c);
  int rc = braid_vc_flush(vc, data, mem, &r->vreq);
  if (rc < 0) return vp_fail(c);
  if (rc == 1) { /* NCCL has no retry for a flush: 8 in flight is more than it ever has */
    BRAID_WARN("verbs: iflush with %d flushes in flight", BRAID_VC_FLUSHES);
    return ncclInternalError;
  }
  *none = false;
  return ncclSuccess;
}

/* Sender: the connection's rails into the comm's telemetry slots (the metrics file, braid-stat,
 * the tuner's snapshot), at most every VPUB_NS. */
#define VPUB_NS 50000000ull
static void vp_publish(struct braid_comm *c, struct vpath *p) {
  uint64_t now = braid_now_ns();
  if (c->kind != BRAID_COMM_SEND || now - p->published_ns < VPUB_NS) return;
  p->published_ns = now;
  for (int r = 0; r < c->nrails && r < 16; r++) {
    struct braid_rail_stats *st = c->stats[r];
    if (!st) continue;
    struct braid_vc_rail_health h;
    braid_vc_rail_health(p->vc, r, &h);
    atomic_store(&st->bytes, h.bytes);
    atomic_store(&st->state, h.state);
    atomic_store(&st->est_bps, (uint64_t)(h.est_Bps * 8));
    atomic_store(&st->failovers, h.failures);
    atomic_store(&st->demotions, h.demotions);
    atomic_store(&st->rejoins, h.rejoins);
    atomic_store(&st->last_rejoin_ns, h.last_rejoin_ns);
  }
  if (c->metrics) braid_telemetry_tick(now);
}

static ncclResult_t vp_test(struct braid_comm *c, struct braid_req *r) {
  struct braid_vc *vc = vp_vc(c);
  size_t size = 0; /* an early receive's size is not known yet: 0 */
  if (c->err) return c->err;
  bool done = false;
  if (r->kind == BRAID_REQ_FLUSH) {
    if (braid_vc_flush_test(vc, r->vreq, &done)) return vp_fail(c);
    r->done = done;
    return ncclSuccess;
  }
  if (vp_pump(c)) return vp_fail(c);
  vp_publish(c, c->path_state);
  if (r->done) return ncclSuccess; /* completed by vp_pump */
  if (r->vreq < 0) return ncclSuccess; /* still waiting its turn */
  if (r->early ? braid_vc_progress(vc) : braid_vc_test(vc, r->vreq, &done, &size)) return vp_fail(c);
  done |= r->early; /* its slot is the connection's now, maybe reused: never tested */
  if (done && r->kind == BRAID_REQ_RECV) r->slot[0].size = size;
  if (done && !r->early) {
    struct vpath *p = c->path_state;
    for (int i = 0; i < p->norder; i++)
      if (p->order[i] == r) {
        order_drop(p, i);
        break;
      }
  }
  r->done = done;
  return ncclSuccess;
}

static void vp_quiesce(struct braid_comm *c) {
  struct vpath *p = c->path_state;
  if (!p) return;
  braid_vc_close(p->vc); /* its queue pairs fenced and drained: nothing lands after this */
  p->vc = NULL;
}

static void vp_free(struct braid_comm *c) {
  struct vpath *p = c->path_state;
  if (p) free(p->order);
  free(c->path_state);
  c->path_state = NULL;
}

static bool vp_describe(struct braid_comm *c, uint64_t now) {
  (void)now;
  struct braid_vc *vc = vp_vc(c);
  if (!vc) return false;
  char d[2048];
  braid_vc_describe(vc, d, sizeof d);
  struct vpath *p = c->path_state;
  BRAID_WARN("  verbs: %d requests waiting for a slot of the connection; %s", p->nwait, d);
  return true;
}

const struct braid_path_ops braid_verbs_path = {
    .name = "verbs",
    .max_recvs = 1,
    .start = vp_start,
    .ready = vp_ready,
    .reg = vp_reg,
    .dereg = vp_dereg,
    .flush = vp_flush,
    .isend = vp_isend,
    .irecv = vp_irecv,
    .test = vp_test,
    .quiesce = vp_quiesce,
    .free = vp_free,
    .describe = vp_describe,
};
