/* The GPUDirect flush of one verbs rail (see verbs_flush.h). */
#include "transport/verbs/verbs_flush.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "clock.h"
#include "log.h"
#include "transport/verbs/verbs_fn.h"

struct braid_verbs_flush {
  struct braid_verbs_ep *ep;
  struct ibv_cq *cq;
  struct ibv_qp *qp;
  struct ibv_mr *mr;                    /* the host scratch's */
  uint8_t scratch[BRAID_VERBS_FLUSH_BYTES];
  uint64_t cookie[BRAID_VERBS_FLUSH_DEPTH];
  uint64_t head, tail;                  /* reads posted, reads completed */
  bool failed;
  const struct braid_verbs_fn *fn; /* verbs_fn.h */
};

int braid_verbs_flush_open(struct braid_verbs_ep *ep, struct braid_verbs_flush **out) {
  *out = NULL;
  struct braid_verbs_flush *f = calloc(1, sizeof *f);
  if (!f) return -1;
  f->ep = ep;
  const char *name = braid_verbs_ep_name(ep);
  if (!(f->fn = braid_verbs_fn())) goto fail;
  if (!(f->cq = f->fn->create_cq(braid_verbs_ep_context(ep), BRAID_VERBS_FLUSH_DEPTH, NULL, NULL, 0))) {
    BRAID_WARN("%s: flush: ibv_create_cq failed: %s", name, strerror(errno));
    goto fail;
  }
  struct ibv_qp_init_attr ia = {.send_cq = f->cq, .recv_cq = f->cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
                                .cap = {.max_send_wr = BRAID_VERBS_FLUSH_DEPTH, .max_recv_wr = 1,
                                        .max_send_sge = 1, .max_recv_sge = 1}};
  if (!(f->qp = f->fn->create_qp(braid_verbs_ep_pd(ep), &ia))) {
    BRAID_WARN("%s: flush: ibv_create_qp (RC loopback) failed: %s", name, strerror(errno));
    goto fail;
  }
  if (!(f->mr = f->fn->reg_mr(braid_verbs_ep_pd(ep), f->scratch, sizeof f->scratch, IBV_ACCESS_LOCAL_WRITE))) {
    BRAID_WARN("%s: flush: ibv_reg_mr of the scratch failed: %s", name, strerror(errno));
    goto fail;
  }
  if (braid_verbs_ep_loop(ep, f->qp)) goto fail;
  BRAID_INFO(NCCL_NET, "%s: flush QP %u (loopback)", name, f->qp->qp_num);
  *out = f;
  return 0;
fail:
  braid_verbs_flush_close(f);
  return -1;
}

int braid_verbs_flush_post(struct braid_verbs_flush *f, const struct braid_verbs_mr *mr, const void *addr,
                           uint64_t cookie) {
  const char *name = braid_verbs_ep_name(f->ep);
  if (f->failed) {
    BRAID_WARN("%s: flush on a failed flush queue pair", name);
    return -1;
  }
  uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)mr->addr;
  if (!mr->mr || a < lo || a - lo >= mr->len) {
    BRAID_WARN("%s: flush of %p outside its registration (%p, %zu bytes)", name, addr, mr->addr, mr->len);
    return -1;
  }
  if (f->head - f->tail >= BRAID_VERBS_FLUSH_DEPTH) return 1;
  size_t len = mr->len - (a - lo) < BRAID_VERBS_FLUSH_BYTES ? mr->len - (a - lo) : BRAID_VERBS_FLUSH_BYTES;
  struct ibv_sge sge = {.addr = (uintptr_t)f->scratch, .length = (uint32_t)len, .lkey = f->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = f->head, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
                           .send_flags = IBV_SEND_SIGNALED}, *bad;
  wr.wr.rdma.remote_addr = a;
  wr.wr.rdma.rkey = mr->rkey;
  int rc = ibv_post_send(f->qp, &wr, &bad);
  if (rc) {
    BRAID_WARN("%s: flush: ibv_post_send (RDMA READ) failed: %s", name, strerror(rc));
    f->failed = true;
    return -1;
  }
  f->cookie[f->head % BRAID_VERBS_FLUSH_DEPTH] = cookie;
  f->head++;
  return 0;
}

int braid_verbs_flush_poll(struct braid_verbs_flush *f, struct braid_verbs_ev *ev, int max) {
  struct ibv_wc wc[BRAID_VERBS_FLUSH_DEPTH];
  int want = max < BRAID_VERBS_FLUSH_DEPTH ? max : BRAID_VERBS_FLUSH_DEPTH;
  int n = ibv_poll_cq(f->cq, want, wc);
  if (n < 0) {
    BRAID_WARN("%s: flush: ibv_poll_cq failed (%d)", braid_verbs_ep_name(f->ep), n);
    f->failed = true;
    return -1;
  }
  for (int i = 0; i < n; i++) {
    memset(&ev[i], 0, offsetof(struct braid_verbs_ev, data));
    ev[i].cookie = f->cookie[wc[i].wr_id % BRAID_VERBS_FLUSH_DEPTH];
    f->tail++;
    if (wc[i].status == IBV_WC_SUCCESS) {
      ev[i].kind = BRAID_VERBS_EV_READ_DONE;
      continue;
    }
    ev[i].kind = BRAID_VERBS_EV_ERROR;
    ev[i].status = wc[i].status;
    snprintf(ev[i].why, sizeof ev[i].why, "flush read: %s (vendor error %u)", f->fn->wc_status_str(wc[i].status),
             wc[i].vendor_err);
    if (!f->failed && wc[i].status != IBV_WC_WR_FLUSH_ERR)
      BRAID_WARN("%s: %s; the GPU may not see the received data yet", braid_verbs_ep_name(f->ep), ev[i].why);
    f->failed = true;
  }
  return n;
}

void braid_verbs_flush_close(struct braid_verbs_flush *f) {
  if (!f) return;
  if (f->qp) {
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    if (f->head != f->tail && !f->fn->modify_qp(f->qp, &a, IBV_QP_STATE)) {
      struct braid_verbs_ev ev[BRAID_VERBS_FLUSH_DEPTH];
      struct timespec nap = {0, 100000};
      uint64_t t0 = braid_now_ns();
      f->failed = true; /* the flushed reads' completions are not worth a WARN */
      while (f->head != f->tail && braid_now_ns() - t0 < 2000000000ull &&
             braid_verbs_flush_poll(f, ev, BRAID_VERBS_FLUSH_DEPTH) >= 0)
        nanosleep(&nap, NULL);
    }
    int rc = f->fn->destroy_qp(f->qp);
    if (rc) BRAID_WARN("%s: flush: ibv_destroy_qp failed: %s", braid_verbs_ep_name(f->ep), strerror(rc));
  }
  if (f->mr) f->fn->dereg_mr(f->mr);
  if (f->cq) f->fn->destroy_cq(f->cq);
  free(f);
}
