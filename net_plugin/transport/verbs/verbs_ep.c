/* One RC queue pair on one verbs rail (see verbs_ep.h). */
#include "transport/verbs/verbs_ep.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "clock.h"
#include "log.h"
#include "transport/verbs/verbs_fn.h"

/* Transport timeout and retries.  The local ACK timeout is 4.096 us * 2^timeout: 16 gives
 * 268 ms.  A write is acknowledged as a whole, so one chunk (verbs_conn.c: 64 KiB) must cross
 * the slowest rail still worth keeping within that time (2 Mbit/s), and a rail's queue of
 * unacknowledged writes is kept under 100 ms of its measured rate.  retry_cnt 6 (rxe treats 7
 * as "retry forever", so never 7) allows 6 retransmissions after the first try, so a peer that
 * stopped answering surfaces as IBV_WC_RETRY_EXC_ERR after (1 + 6) * 268 ms = 1.9 s nominal
 * (up to 4x that on hardware, which may stretch the timer).  That is only the backstop: braid's
 * scheduler declares a rail that acknowledges nothing stalled after 4x its queue's drain time +
 * 400 ms and fails over then, well within a second.  rnr_retry 7 (infinite) applies only to
 * receiver-not-ready NAKs: a live peer whose receive ring is momentarily empty, never a dead
 * one; min_rnr_timer 12 is 0.64 ms between those retries. */
enum {
  BRAID_VERBS_TIMEOUT = 16,
  BRAID_VERBS_RETRY_CNT = 6,
  BRAID_VERBS_RNR_RETRY = 7,
  BRAID_VERBS_MIN_RNR_TIMER = 12,
  BRAID_VERBS_HOP_LIMIT = 255,
  BRAID_VERBS_INLINE = 128, /* inline data asked for at QP creation */
};

#define WR_RECV (1ull << 63) /* wr_id: a receive slot; else a send slot */

static struct braid_verbs_fn fn;

struct send_slot {
  uint64_t cookie;
  enum braid_verbs_ev_kind kind;
};

struct braid_verbs_ep {
  char name[BRAID_VERBS_NAME_MAX + 8];
  struct braid_verbs_rail rail;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *ctrl_mr;
  uint8_t *ctrl;           /* 2 x depth buffers of BRAID_VERBS_CTRL_MAX: receives, send staging */
  struct send_slot *slots; /* depth send slots, a ring: RC completes sends in order */
  int depth;
  uint64_t send_head, send_tail;
  int recv_posted;
  int max_inline;
  int user_mrs;
  uint32_t psn;
  uint16_t lid;
  uint8_t mtu; /* enum ibv_mtu, already capped at 4096 */
  struct braid_verbs_qos qos;
  bool connected, failed, fenced;
};

static unsigned fn_generation; /* braid_verbs_generation() when fn was loaded */

static int load(void) {
  if (fn.loaded && fn_generation == braid_verbs_generation()) return 0;
  fn.loaded = false;
  char why[256];
  if (!braid_verbs_probe(why, sizeof why)) {
    BRAID_WARN("verbs endpoint: %s", why);
    return -1;
  }
  const char *missing = NULL;
#define LOAD(field, name) \
  if (!(*(void **)&fn.field = braid_verbs_sym(name)) && !missing) missing = name
  LOAD(alloc_pd, "ibv_alloc_pd");
  LOAD(dealloc_pd, "ibv_dealloc_pd");
  LOAD(create_cq, "ibv_create_cq");
  LOAD(destroy_cq, "ibv_destroy_cq");
  LOAD(create_qp, "ibv_create_qp");
  LOAD(modify_qp, "ibv_modify_qp");
  LOAD(destroy_qp, "ibv_destroy_qp");
  LOAD(reg_mr, "ibv_reg_mr");
  LOAD(dereg_mr, "ibv_dereg_mr");
  LOAD(wc_status_str, "ibv_wc_status_str");
  LOAD(get_async_event, "ibv_get_async_event");
  LOAD(ack_async_event, "ibv_ack_async_event");
  LOAD(event_type_str, "ibv_event_type_str");
#undef LOAD
  if (missing) {
    BRAID_WARN("verbs endpoint: libibverbs.so.1 lacks %s (rdma-core too old?)", missing);
    return -1;
  }
  *(void **)&fn.reg_dmabuf_mr = braid_verbs_sym("ibv_reg_dmabuf_mr");
  fn_generation = braid_verbs_generation();
  fn.loaded = true;
  return 0;
}

const struct braid_verbs_fn *braid_verbs_fn(void) { return load() ? NULL : &fn; }

static uint8_t mtu_cap(enum ibv_mtu m) {
  return (uint8_t)(m < IBV_MTU_256 || m > IBV_MTU_4096 ? IBV_MTU_4096 : m);
}

static uint32_t new_psn(uint32_t qpn) {
  uint64_t x = braid_now_ns() % 1000000000ull * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 24) ^ qpn;
  return (uint32_t)(x ^ (x >> 29)) & 0xffffff;
}

static int post_recv_slot(struct braid_verbs_ep *ep, int slot) {
  struct ibv_sge sge = {.addr = (uintptr_t)(ep->ctrl + (size_t)slot * BRAID_VERBS_CTRL_MAX),
                        .length = BRAID_VERBS_CTRL_MAX, .lkey = ep->ctrl_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = WR_RECV | (uint64_t)slot, .sg_list = &sge, .num_sge = 1}, *bad;
  int rc = ibv_post_recv(ep->qp, &wr, &bad);
  if (rc) {
    BRAID_WARN("%s: ibv_post_recv failed: %s", ep->name, strerror(rc));
    return -1;
  }
  ep->recv_posted++;
  return 0;
}

static int create_qp(struct braid_verbs_ep *ep) {
  struct ibv_qp_init_attr ia = {
      .send_cq = ep->cq, .recv_cq = ep->cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
      .cap = {.max_send_wr = (uint32_t)ep->depth, .max_recv_wr = (uint32_t)ep->depth,
              .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = BRAID_VERBS_INLINE}};
  ep->qp = fn.create_qp(ep->pd, &ia);
  if (!ep->qp) { /* some providers have no inline data: try without */
    ia.cap.max_inline_data = 0;
    ep->qp = fn.create_qp(ep->pd, &ia);
  }
  if (!ep->qp) {
    BRAID_WARN("%s: ibv_create_qp (RC, depth %d) failed: %s", ep->name, ep->depth, strerror(errno));
    return -1;
  }
  ep->max_inline = (int)ia.cap.max_inline_data;
  return 0;
}

static int to_init(struct braid_verbs_ep *ep, struct ibv_qp *qp) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = (uint8_t)ep->rail.port,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  int rc = fn.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) BRAID_WARN("%s: QP to INIT failed: %s", ep->name, strerror(rc));
  return rc ? -1 : 0;
}

static int open_resources(struct braid_verbs_ep *ep) {
  struct ibv_port_attr pa;
  if (!(ep->ctx = braid_verbs_open(ep->rail.dev))) {
    BRAID_WARN("verbs endpoint: cannot open device %s (gone, or failed to open)", ep->rail.dev);
    return -1;
  }
  if (braid_verbs_port_query(ep->ctx, (uint8_t)ep->rail.port, &pa)) {
    BRAID_WARN("%s: ibv_query_port failed", ep->name);
    return -1;
  }
  ep->lid = pa.lid;
  ep->mtu = mtu_cap(pa.active_mtu);
  int fl = fcntl(ep->ctx->async_fd, F_GETFL);
  if (fl < 0 || fcntl(ep->ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    BRAID_WARN("%s: cannot make the device's event channel non-blocking: %s", ep->name, strerror(errno));
    return -1;
  }
  if (!(ep->pd = fn.alloc_pd(ep->ctx))) {
    BRAID_WARN("%s: ibv_alloc_pd failed: %s", ep->name, strerror(errno));
    return -1;
  }
  if (!(ep->cq = fn.create_cq(ep->ctx, 2 * ep->depth, NULL, NULL, 0))) {
    BRAID_WARN("%s: ibv_create_cq (%d entries) failed: %s", ep->name, 2 * ep->depth, strerror(errno));
    return -1;
  }
  size_t bytes = 2 * (size_t)ep->depth * BRAID_VERBS_CTRL_MAX; /* receives, then send staging */
  if (!(ep->ctrl = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095)) ||
      !(ep->slots = calloc((size_t)ep->depth, sizeof *ep->slots))) {
    BRAID_WARN("%s: out of memory for %d control buffers", ep->name, ep->depth);
    return -1;
  }
  if (!(ep->ctrl_mr = fn.reg_mr(ep->pd, ep->ctrl, bytes, IBV_ACCESS_LOCAL_WRITE))) {
    BRAID_WARN("%s: ibv_reg_mr of the control ring (%zu bytes) failed: %s", ep->name, bytes, strerror(errno));
    return -1;
  }
  if (create_qp(ep) || to_init(ep, ep->qp)) return -1;
  for (int i = 0; i < ep->depth; i++)
    if (post_recv_slot(ep, i)) return -1;
  ep->psn = new_psn(ep->qp->qp_num);
  return 0;
}

int braid_verbs_ep_open(const struct braid_verbs_rail *rail, int depth, const struct braid_verbs_qos *qos,
                        struct braid_verbs_ep **out) {
  *out = NULL;
  if (load()) return -1;
  struct braid_verbs_ep *ep = calloc(1, sizeof *ep);
  if (!ep) return -1;
  ep->rail = *rail;
  if (qos) ep->qos = *qos;
  ep->depth = depth > 0 ? depth : 128;
  snprintf(ep->name, sizeof ep->name, "%s:%d", rail->dev, rail->port);
  if (open_resources(ep)) {
    braid_verbs_ep_close(ep);
    return -1;
  }
  BRAID_INFO(NCCL_INIT | NCCL_NET, "%s: RC QP %u, depth %d, inline %d, MTU %d, traffic class %d, SL %d",
             ep->name, ep->qp->qp_num, ep->depth, ep->max_inline, 128 << ep->mtu, ep->qos.tc, ep->qos.sl);
  *out = ep;
  return 0;
}

void braid_verbs_ep_addr(const struct braid_verbs_ep *ep, struct braid_verbs_ep_addr *out) {
  memset(out, 0, sizeof *out);
  out->qpn = ep->qp ? ep->qp->qp_num : 0;
  out->psn = ep->psn;
  out->lid = ep->lid;
  out->link = (uint8_t)ep->rail.link;
  out->mtu = ep->mtu;
  memcpy(out->gid, ep->rail.gid, 16);
}

static int to_rtr(struct braid_verbs_ep *ep, struct ibv_qp *qp, const struct braid_verbs_ep_addr *peer) {
  uint8_t mtu = peer->mtu >= IBV_MTU_256 && peer->mtu < ep->mtu ? peer->mtu : ep->mtu;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = (enum ibv_mtu)mtu,
                          .dest_qp_num = peer->qpn, .rq_psn = peer->psn, .max_dest_rd_atomic = 1,
                          .min_rnr_timer = BRAID_VERBS_MIN_RNR_TIMER};
  a.ah_attr.port_num = (uint8_t)ep->rail.port;
  a.ah_attr.dlid = peer->lid;
  a.ah_attr.sl = ep->qos.sl;
  if (ep->rail.link == BRAID_LINK_ETH) { /* RoCE: GID addressing, always */
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)ep->rail.gid_index;
    a.ah_attr.grh.hop_limit = BRAID_VERBS_HOP_LIMIT;
    a.ah_attr.grh.traffic_class = ep->qos.tc;
  }
  int rc = fn.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) BRAID_WARN("%s: QP to RTR (peer QP %u) failed: %s", ep->name, peer->qpn, strerror(rc));
  return rc ? -1 : 0;
}

static int to_rts(struct braid_verbs_ep *ep, struct ibv_qp *qp, uint32_t psn) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .sq_psn = psn, .timeout = BRAID_VERBS_TIMEOUT,
                          .retry_cnt = BRAID_VERBS_RETRY_CNT, .rnr_retry = BRAID_VERBS_RNR_RETRY,
                          .max_rd_atomic = 1};
  int rc = fn.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) BRAID_WARN("%s: QP to RTS failed: %s", ep->name, strerror(rc));
  return rc ? -1 : 0;
}

int braid_verbs_ep_connect(struct braid_verbs_ep *ep, const struct braid_verbs_ep_addr *peer) {
  if (ep->connected || ep->failed || !ep->qp) {
    BRAID_WARN("%s: connect on an endpoint that is %s", ep->name, ep->failed ? "failed" : "already connected");
    return -1;
  }
  if (peer->link != ep->rail.link) {
    BRAID_WARN("%s: peer is on %s, this rail on %s", ep->name, braid_verbs_link_name(peer->link),
               braid_verbs_link_name(ep->rail.link));
    return -1;
  }
  if (to_rtr(ep, ep->qp, peer) || to_rts(ep, ep->qp, ep->psn)) {
    ep->failed = true;
    return -1;
  }
  ep->connected = true;
  return 0;
}

int braid_verbs_ep_loop(struct braid_verbs_ep *ep, struct ibv_qp *qp) {
  struct braid_verbs_ep_addr self;
  braid_verbs_ep_addr(ep, &self);
  self.qpn = qp->qp_num;
  self.psn = new_psn(qp->qp_num);
  if (to_init(ep, qp) || to_rtr(ep, qp, &self) || to_rts(ep, qp, self.psn)) return -1;
  return 0;
}

struct ibv_pd *braid_verbs_ep_pd(const struct braid_verbs_ep *ep) { return ep->pd; }
struct ibv_context *braid_verbs_ep_context(const struct braid_verbs_ep *ep) { return ep->ctx; }

/* What a registration grants: a sender's buffer is only read by its own NIC. */
static int reg_access(bool remote) {
  return IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0);
}

int braid_verbs_ep_reg_dmabuf(struct braid_verbs_ep *ep, void *buf, size_t len, uint64_t offset, int fd, bool remote,
                              struct braid_verbs_mr *out) {
  memset(out, 0, sizeof *out);
  if (!fn.reg_dmabuf_mr) {
    BRAID_WARN("%s: dma-buf registration of %p: libibverbs lacks ibv_reg_dmabuf_mr", ep->name, buf);
    return -1;
  }
  /* iova = the buffer's address: keys and remote addresses work as for ibv_reg_mr's */
  struct ibv_mr *mr = fn.reg_dmabuf_mr(ep->pd, offset, len, (uintptr_t)buf, fd, reg_access(remote));
  if (!mr) {
    BRAID_WARN("%s: ibv_reg_dmabuf_mr(fd %d, offset %llu, %zu bytes at %p) failed: %s", ep->name, fd,
               (unsigned long long)offset, len, buf, strerror(errno));
    return -1;
  }
  *out = (struct braid_verbs_mr){.addr = buf, .len = len, .lkey = mr->lkey, .rkey = mr->rkey, .mr = mr};
  ep->user_mrs++;
  return 0;
}

int braid_verbs_ep_reg(struct braid_verbs_ep *ep, void *buf, size_t len, bool remote, struct braid_verbs_mr *out) {
  memset(out, 0, sizeof *out);
  struct ibv_mr *mr = fn.reg_mr(ep->pd, buf, len, reg_access(remote));
  if (!mr) {
    BRAID_WARN("%s: ibv_reg_mr(%p, %zu) failed: %s", ep->name, buf, len, strerror(errno));
    return -1;
  }
  *out = (struct braid_verbs_mr){.addr = buf, .len = len, .lkey = mr->lkey, .rkey = mr->rkey, .mr = mr};
  ep->user_mrs++;
  return 0;
}

void braid_verbs_ep_dereg(struct braid_verbs_ep *ep, struct braid_verbs_mr *mr) {
  if (!mr->mr) return;
  int rc = fn.dereg_mr(mr->mr);
  if (rc) BRAID_WARN("%s: ibv_dereg_mr failed: %s", ep->name, strerror(rc));
  ep->user_mrs--;
  memset(mr, 0, sizeof *mr);
}

/* 0 when the endpoint can post one more send, 1 when its queue is full, -1 when it cannot. */
static int send_ready(struct braid_verbs_ep *ep) {
  if (ep->failed || !ep->connected) {
    BRAID_WARN("%s: post on an endpoint that is %s", ep->name, ep->failed ? "failed" : "not connected");
    return -1;
  }
  return ep->send_head - ep->send_tail >= (uint64_t)ep->depth ? 1 : 0;
}

static int post(struct braid_verbs_ep *ep, struct ibv_send_wr *wr, enum braid_verbs_ev_kind kind, uint64_t cookie) {
  uint64_t slot = ep->send_head % (uint64_t)ep->depth;
  ep->slots[slot] = (struct send_slot){.cookie = cookie, .kind = kind};
  wr->wr_id = slot;
  struct ibv_send_wr *bad;
  int rc = ibv_post_send(ep->qp, wr, &bad);
  if (rc) {
    BRAID_WARN("%s: ibv_post_send failed: %s", ep->name, strerror(rc));
    return -1;
  }
  ep->send_head++;
  return 0;
}

int braid_verbs_ep_send(struct braid_verbs_ep *ep, const void *msg, size_t len, uint64_t cookie) {
  int r = send_ready(ep);
  if (r) return r;
  if (len > BRAID_VERBS_CTRL_MAX) {
    BRAID_WARN("%s: control message of %zu bytes (at most %d)", ep->name, len, BRAID_VERBS_CTRL_MAX);
    return -1;
  }
  bool in = len <= (size_t)ep->max_inline;
  struct ibv_sge sge = {.addr = (uintptr_t)msg, .length = (uint32_t)len}; /* inline: copied at post */
  if (!in) { /* staged in the send slot's own registered buffer, after the receive ring */
    uint8_t *stage = ep->ctrl + (size_t)(ep->depth + (int)(ep->send_head % (uint64_t)ep->depth)) * BRAID_VERBS_CTRL_MAX;
    memcpy(stage, msg, len);
    sge.addr = (uintptr_t)stage;
    sge.lkey = ep->ctrl_mr->lkey;
  }
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = IBV_WR_SEND,
                           .send_flags = in ? IBV_SEND_INLINE : 0};
  return post(ep, &wr, BRAID_VERBS_EV_SEND_DONE, cookie);
}

int braid_verbs_ep_write_imm(struct braid_verbs_ep *ep, const struct braid_verbs_mr *mr, size_t off,
                             size_t len, uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t cookie) {
  int r = send_ready(ep);
  if (r) return r;
  if (len && (!mr || off > mr->len || len > mr->len - off || len > UINT32_MAX)) {
    BRAID_WARN("%s: write of %zu bytes at offset %zu outside a registration of %zu", ep->name, len, off, mr->len);
    return -1;
  }
  struct ibv_sge sge = {0};
  if (len) sge = (struct ibv_sge){.addr = (uintptr_t)mr->addr + off, .length = (uint32_t)len, .lkey = mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = len ? 1 : 0, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .imm_data = htonl(imm)};
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return post(ep, &wr, BRAID_VERBS_EV_WRITE_DONE, cookie);
}

static void error_event(struct braid_verbs_ep *ep, const struct ibv_wc *wc, struct braid_verbs_ev *ev) {
  bool recv = wc->wr_id & WR_RECV;
  ev->kind = BRAID_VERBS_EV_ERROR;
  ev->status = wc->status;
  snprintf(ev->why, sizeof ev->why, "%s: %s (vendor error %u)", recv ? "receive" : "send",
           fn.wc_status_str(wc->status), wc->vendor_err);
  if (!ep->failed && wc->status != IBV_WC_WR_FLUSH_ERR)
    BRAID_WARN("%s: work completion failed: %s; endpoint failed", ep->name, ev->why);
  ep->failed = true;
}

/* One completion into ev. */
static void complete(struct braid_verbs_ep *ep, const struct ibv_wc *wc, struct braid_verbs_ev *ev) {
  memset(ev, 0, offsetof(struct braid_verbs_ev, data));
  if (wc->wr_id & WR_RECV) {
    int slot = (int)(wc->wr_id & ~WR_RECV);
    ep->recv_posted--;
    if (wc->status != IBV_WC_SUCCESS) {
      error_event(ep, wc, ev);
      return;
    }
    ev->len = wc->byte_len;
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      ev->kind = BRAID_VERBS_EV_WRITE_IMM;
      ev->imm = ntohl(wc->imm_data);
    } else {
      ev->kind = BRAID_VERBS_EV_CTRL;
      memcpy(ev->data, ep->ctrl + (size_t)slot * BRAID_VERBS_CTRL_MAX,
             wc->byte_len < BRAID_VERBS_CTRL_MAX ? wc->byte_len : BRAID_VERBS_CTRL_MAX);
    }
    if (!ep->failed) post_recv_slot(ep, slot);
    return;
  }
  const struct send_slot *s = &ep->slots[wc->wr_id % (uint64_t)ep->depth];
  ep->send_tail++;
  ev->cookie = s->cookie;
  if (wc->status != IBV_WC_SUCCESS) {
    error_event(ep, wc, ev);
    return;
  }
  ev->kind = s->kind;
}

int braid_verbs_ep_poll(struct braid_verbs_ep *ep, struct braid_verbs_ev *ev, int max) {
  struct ibv_wc wc[16];
  int got = 0;
  if (!ep->cq) return 0; /* a renewal that failed half-way: nothing posted, nothing to see */
  while (got < max) {
    int want = max - got < 16 ? max - got : 16;
    int n = ibv_poll_cq(ep->cq, want, wc);
    if (n < 0) {
      BRAID_WARN("%s: ibv_poll_cq failed (%d)", ep->name, n);
      ep->failed = true;
      return -1;
    }
    for (int i = 0; i < n; i++) complete(ep, &wc[i], &ev[got++]);
    if (n < want) break;
  }
  return got;
}

bool braid_verbs_ep_failed(const struct braid_verbs_ep *ep) { return ep->failed; }

int braid_verbs_ep_port_events(struct braid_verbs_ep *ep, char *why, size_t whylen) {
  struct ibv_async_event e;
  int down = 0, active = 0;
  while (fn.get_async_event(ep->ctx, &e) == 0) {
    bool ours_port = (e.event_type == IBV_EVENT_PORT_ERR || e.event_type == IBV_EVENT_PORT_ACTIVE ||
                      e.event_type == IBV_EVENT_GID_CHANGE || e.event_type == IBV_EVENT_LID_CHANGE) &&
                     e.element.port_num == ep->rail.port;
    bool ours_qp = (e.event_type == IBV_EVENT_QP_FATAL || e.event_type == IBV_EVENT_QP_ACCESS_ERR ||
                    e.event_type == IBV_EVENT_QP_REQ_ERR) && e.element.qp == ep->qp;
    bool fatal = e.event_type == IBV_EVENT_DEVICE_FATAL;
    if ((ours_port && e.event_type == IBV_EVENT_PORT_ERR) || ours_qp || fatal) {
      if (!down) snprintf(why, whylen, "%s (asynchronous event)", fn.event_type_str(e.event_type));
      down = 1;
    } else if (ours_port) {
      BRAID_INFO(NCCL_NET, "%s: %s", ep->name, fn.event_type_str(e.event_type));
      active |= e.event_type == IBV_EVENT_PORT_ACTIVE;
    }
    fn.ack_async_event(&e);
  }
  return down ? 1 : active ? 2 : 0;
}

int braid_verbs_ep_fence(struct braid_verbs_ep *ep) {
  ep->failed = true;
  if (ep->fenced || !ep->qp) return 0;
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
  int rc = fn.modify_qp(ep->qp, &a, IBV_QP_STATE);
  if (rc) {
    BRAID_WARN("%s: QP to ERR failed: %s", ep->name, strerror(rc));
    return -1;
  }
  ep->fenced = true;
  return 0;
}

/* The QP and CQ of a fenced endpoint replaced (verbs_ep.h).  Destroying the QP ends whatever it
 * still held; destroying the CQ drops any completion of it not yet polled, so nothing of the old
 * queue pair is ever reported as the new one's. */
int braid_verbs_ep_renew(struct braid_verbs_ep *ep) {
  if (ep->qp) {
    if (!ep->fenced) braid_verbs_ep_fence(ep);
    int rc = fn.destroy_qp(ep->qp);
    if (rc) BRAID_WARN("%s: ibv_destroy_qp failed: %s", ep->name, strerror(rc));
    ep->qp = NULL;
  }
  if (ep->cq) {
    int rc = fn.destroy_cq(ep->cq);
    if (rc) BRAID_WARN("%s: ibv_destroy_cq failed: %s", ep->name, strerror(rc));
    ep->cq = NULL;
  }
  ep->send_head = ep->send_tail = 0;
  ep->recv_posted = 0;
  ep->connected = ep->fenced = false;
  ep->failed = true; /* until the new queue pair is in place */
  struct ibv_port_attr pa;
  if (!braid_verbs_port_query(ep->ctx, (uint8_t)ep->rail.port, &pa)) {
    ep->lid = pa.lid;
    ep->mtu = mtu_cap(pa.active_mtu);
  }
  if (!(ep->cq = fn.create_cq(ep->ctx, 2 * ep->depth, NULL, NULL, 0))) {
    BRAID_WARN("%s: ibv_create_cq (%d entries) failed: %s", ep->name, 2 * ep->depth, strerror(errno));
    return -1;
  }
  if (create_qp(ep) || to_init(ep, ep->qp)) return -1;
  ep->failed = false;
  for (int i = 0; i < ep->depth; i++)
    if (post_recv_slot(ep, i)) {
      ep->failed = true;
      return -1;
    }
  ep->psn = new_psn(ep->qp->qp_num);
  BRAID_INFO(NCCL_NET, "%s: new RC QP %u for a rejoin", ep->name, ep->qp->qp_num);
  return 0;
}

bool braid_verbs_ep_port_ready(struct braid_verbs_ep *ep, char *why, size_t whylen) {
  struct ibv_port_attr pa;
  if (braid_verbs_port_query(ep->ctx, (uint8_t)ep->rail.port, &pa)) {
    snprintf(why, whylen, "its port cannot be queried");
    return false;
  }
  if (pa.state != IBV_PORT_ACTIVE) {
    snprintf(why, whylen, "its port is %s", pa.state == IBV_PORT_DOWN ? "down" : "not active yet");
    return false;
  }
  if (ep->rail.link != BRAID_LINK_ETH) return true;
  uint8_t gid[16];
  if (!braid_verbs_gid(ep->ctx, ep->rail.port, ep->rail.gid_index, gid)) {
    snprintf(why, whylen, "its GID %d is empty (the interface has no address yet)", ep->rail.gid_index);
    return false;
  }
  if (memcmp(gid, ep->rail.gid, 16)) {
    char was[64], now[64];
    braid_verbs_gid_str(ep->rail.gid, was, sizeof was);
    braid_verbs_gid_str(gid, now, sizeof now);
    BRAID_INFO(NCCL_NET, "%s: GID %d is now %s (was %s)", ep->name, ep->rail.gid_index, now, was);
    memcpy(ep->rail.gid, gid, 16);
  }
  return true;
}

bool braid_verbs_ep_drained(const struct braid_verbs_ep *ep) {
  return ep->fenced && ep->recv_posted == 0 && ep->send_head == ep->send_tail;
}
const char *braid_verbs_ep_name(const struct braid_verbs_ep *ep) { return ep->name; }
int braid_verbs_ep_recv_posted(const struct braid_verbs_ep *ep) { return ep->recv_posted; }

/* After the QP is in ERR every posted request completes (flushed); wait for them, bounded. */
static void drain(struct braid_verbs_ep *ep) {
  int rc = braid_verbs_ep_fence(ep);
  struct timespec nap = {0, 100000};
  uint64_t t0 = braid_now_ns();
  struct braid_verbs_ev ev[16];
  while (!rc && (ep->recv_posted > 0 || ep->send_head != ep->send_tail)) {
    if (braid_verbs_ep_poll(ep, ev, 16) < 0) break;
    if (braid_now_ns() - t0 >= 2000000000ull) {
      BRAID_WARN("%s: %d receives and %llu sends not flushed after 2 s; destroying the QP anyway",
                 ep->name, ep->recv_posted, (unsigned long long)(ep->send_head - ep->send_tail));
      break;
    }
    nanosleep(&nap, NULL);
  }
}

void braid_verbs_ep_close(struct braid_verbs_ep *ep) {
  if (!ep) return;
  if (ep->user_mrs) BRAID_WARN("%s: closed with %d registrations left", ep->name, ep->user_mrs);
  if (ep->qp) {
    drain(ep);
    /* Destroying the QP ends every request on it: after this nothing references the buffers. */
    int rc = fn.destroy_qp(ep->qp);
    if (rc) BRAID_WARN("%s: ibv_destroy_qp failed: %s", ep->name, strerror(rc));
  }
  if (ep->ctrl_mr) fn.dereg_mr(ep->ctrl_mr);
  if (ep->cq) fn.destroy_cq(ep->cq);
  if (ep->pd) {
    int rc = fn.dealloc_pd(ep->pd);
    if (rc) BRAID_WARN("%s: ibv_dealloc_pd failed: %s (registrations left?)", ep->name, strerror(rc));
  }
  braid_verbs_close(ep->ctx);
  free(ep->ctrl);
  free(ep->slots);
  free(ep);
}
