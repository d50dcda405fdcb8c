// The libibverbs mock of verbs_mock.h.
#include "verbs_mock.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <unistd.h>

extern "C" {
#include "transport/verbs/verbs_dev.h"
}

namespace vmock {
namespace {

VerbsMock *cur;  // the installed mock

struct Ctx {
  ibv_context ctx{};
  std::string dev;
  int pipe[2] = {-1, -1};
};
struct Cq {
  ibv_cq cq{};
  std::deque<ibv_wc> q;
};
struct Qp {
  ibv_qp qp{};
  std::deque<uint64_t> sends, recvs;  // outstanding wr_ids
  bool destroyed = false;
};

std::vector<ibv_device *> devices;
std::vector<Ctx *> ctxs;
std::vector<Cq *> cqs;
std::vector<Qp *> qps;
uint32_t next_qpn = 100, next_key = 1000;

Ctx *CtxOf(ibv_context *c) { return reinterpret_cast<Ctx *>(c); }  // ctx is Ctx's first member
Cq *CqOf(ibv_cq *c) { return reinterpret_cast<Cq *>(c); }
Qp *QpOf(ibv_qp *q) { return reinterpret_cast<Qp *>(q); }

void Push(ibv_cq *cq, uint64_t wr_id, ibv_wc_status st, ibv_wc_opcode op, ibv_qp *qp) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = st;
  wc.opcode = op;
  wc.qp_num = qp->qp_num;
  CqOf(cq)->q.push_back(wc);
}

// ---- the ops of every context (verbs.h's inlines call these) ----
int PollCq(ibv_cq *cq, int n, ibv_wc *wc) {
  Cq *c = CqOf(cq);
  int got = 0;
  while (got < n && !c->q.empty()) wc[got++] = c->q.front(), c->q.pop_front();
  return got;
}
int PostSend(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad) {
  for (; wr; wr = wr->next) {
    Post p{CtxOf(qp->context)->dev, qp, wr->opcode, wr->wr_id, 0, 0, 0, wr->wr.rdma.remote_addr,
           wr->wr.rdma.rkey};
    if (wr->num_sge) p.sge_addr = wr->sg_list[0].addr, p.sge_len = wr->sg_list[0].length, p.lkey = wr->sg_list[0].lkey;
    if (qp->state == IBV_QPS_ERR) {  // flushed at once
      Push(qp->send_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, qp);
    } else {
      QpOf(qp)->sends.push_back(wr->wr_id);
    }
    cur->posts.push_back(p);
  }
  *bad = nullptr;
  return 0;
}
int PostRecv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad) {
  for (; wr; wr = wr->next) QpOf(qp)->recvs.push_back(wr->wr_id);
  *bad = nullptr;
  return 0;
}

// ---- exported libibverbs symbols ----
int ForkInit() { return 0; }
ibv_device **GetDeviceList(int *n) {
  *n = (int)devices.size();
  auto **l = static_cast<ibv_device **>(calloc(devices.size() + 1, sizeof(ibv_device *)));
  for (size_t i = 0; i < devices.size(); i++) l[i] = devices[i];
  return l;
}
void FreeDeviceList(ibv_device **l) { free(l); }
const char *GetDeviceName(ibv_device *d) { return d->name; }
ibv_context *OpenDevice(ibv_device *d) {
  Ctx *c = new Ctx;
  c->dev = d->name;
  c->ctx.device = d;
  if (pipe(c->pipe)) return nullptr;
  c->ctx.async_fd = c->pipe[0];
  c->ctx.ops.poll_cq = PollCq;
  c->ctx.ops.post_send = PostSend;
  c->ctx.ops.post_recv = PostRecv;
  ctxs.push_back(c);
  return &c->ctx;
}
int CloseDevice(ibv_context *c) {
  Ctx *x = CtxOf(c);
  close(x->pipe[0]), close(x->pipe[1]);
  x->pipe[0] = x->pipe[1] = -1;
  return 0;
}
int QueryDevice(ibv_context *, ibv_device_attr *a) {
  memset(a, 0, sizeof *a);
  a->phys_port_cnt = 1;
  return 0;
}
int QueryPort(ibv_context *, uint8_t, _compat_ibv_port_attr *compat) {
  // the old struct is the prefix of ibv_port_attr (braid passes the full one, zeroed)
  ibv_port_attr *a = reinterpret_cast<ibv_port_attr *>(compat);
  a->state = IBV_PORT_ACTIVE;
  a->active_mtu = IBV_MTU_1024;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->gid_tbl_len = 1;
  return 0;
}
int QueryGid(ibv_context *, uint8_t, int, ibv_gid *g) {
  memset(g, 0, sizeof *g);
  g->raw[10] = g->raw[11] = 0xff, g->raw[12] = 10, g->raw[15] = 1;
  return 0;
}
ibv_pd *AllocPd(ibv_context *c) {
  auto *pd = new ibv_pd{};
  pd->context = c;
  cur->pds.push_back(pd);
  return pd;
}
int DeallocPd(ibv_pd *pd) {
  for (Mr *m : cur->mrs)
    if (m->pd == pd && m->deregs == 0) return EBUSY;
  pd->handle = 0xdead;  // kept (tests look at it); freed with the mock
  return 0;
}
ibv_cq *CreateCq(ibv_context *c, int, void *, ibv_comp_channel *, int) {
  Cq *q = new Cq;
  q->cq.context = c;
  cqs.push_back(q);
  return &q->cq;
}
int DestroyCq(ibv_cq *) { return 0; }
ibv_qp *CreateQp(ibv_pd *pd, ibv_qp_init_attr *ia) {
  Qp *q = new Qp;
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = ia->send_cq;
  q->qp.recv_cq = ia->recv_cq;
  q->qp.qp_num = next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  qps.push_back(q);
  return &q->qp;
}
int ModifyQp(ibv_qp *qp, ibv_qp_attr *a, int mask) {
  if (mask & IBV_QP_STATE) qp->state = a->qp_state;
  bool av = mask & IBV_QP_AV;
  cur->modifies.push_back({qp, a->qp_state, (mask & IBV_QP_DEST_QPN) ? a->dest_qp_num : 0, av,
                           av ? a->ah_attr.is_global : (uint8_t)0,
                           av ? a->ah_attr.grh.traffic_class : (uint8_t)0, av ? a->ah_attr.sl : (uint8_t)0});
  if (a->qp_state == IBV_QPS_ERR) {  // everything outstanding completes, flushed
    Qp *q = QpOf(qp);
    for (uint64_t id : q->sends) Push(qp->send_cq, id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, qp);
    for (uint64_t id : q->recvs) Push(qp->recv_cq, id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp);
    q->sends.clear(), q->recvs.clear();
  }
  return 0;
}
int DestroyQp(ibv_qp *qp) {
  QpOf(qp)->destroyed = true;
  return 0;
}
Mr *NewMr(ibv_pd *pd, bool dmabuf, void *addr, size_t len, uint64_t offset, int fd, int access) {
  Mr *m = new Mr{CtxOf(pd->context)->dev, pd, dmabuf, addr, len, offset, fd, access};
  m->mr.pd = pd;
  m->mr.context = pd->context;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = next_key++;
  m->mr.rkey = next_key++;
  cur->mrs.push_back(m);
  return m;
}
ibv_mr *RegMr(ibv_pd *pd, void *addr, size_t len, int access) {
  return &NewMr(pd, false, addr, len, 0, -1, access)->mr;
}
ibv_mr *RegDmabufMr(ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  if (fd < 0) {
    cur->probes.push_back({pd, offset, len, iova, fd, access});
    errno = cur->dmabuf_errno;
    return nullptr;
  }
  if (CtxOf(pd->context)->dev == cur->fail_dmabuf_dev) {
    errno = EINVAL;
    return nullptr;
  }
  return &NewMr(pd, true, reinterpret_cast<void *>(iova), len, offset, fd, access)->mr;
}
int DeregMr(ibv_mr *mr) {
  for (Mr *m : cur->mrs)
    if (&m->mr == mr) {
      m->deregs++;
      return 0;
    }
  return EINVAL;
}
const char *WcStatusStr(ibv_wc_status s) { return s == IBV_WC_SUCCESS ? "success" : "mock error status"; }
int GetAsyncEvent(ibv_context *, ibv_async_event *) {
  errno = EAGAIN;
  return -1;
}
void AckAsyncEvent(ibv_async_event *) {}
const char *EventTypeStr(ibv_event_type) { return "mock event"; }

}  // namespace

VerbsMock::VerbsMock(std::vector<std::string> devs) {
  cur = this;
  for (const std::string &d : devs) {
    auto *dev = new ibv_device{};
    snprintf(dev->name, sizeof dev->name, "%s", d.c_str());
    devices.push_back(dev);
  }
  braid_verbs_test_resolver(Resolve);
}

VerbsMock::~VerbsMock() {
  braid_verbs_test_resolver(nullptr);
  for (Mr *m : mrs) delete m;
  for (ibv_pd *p : pds) delete p;
  for (Ctx *c : ctxs) {
    if (c->pipe[0] >= 0) close(c->pipe[0]), close(c->pipe[1]);
    delete c;
  }
  for (Cq *c : cqs) delete c;
  for (Qp *q : qps) delete q;
  for (ibv_device *d : devices) delete d;
  devices.clear(), ctxs.clear(), cqs.clear(), qps.clear();
  cur = nullptr;
}

bool VerbsMock::Complete(size_t i, ibv_wc_status status) {
  if (i >= posts.size()) return false;
  const Post &p = posts[i];
  Qp *q = QpOf(p.qp);
  for (auto it = q->sends.begin(); it != q->sends.end(); ++it)
    if (*it == p.wr_id) {
      q->sends.erase(it);
      Push(p.qp->send_cq, p.wr_id, status,
           p.opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, p.qp);
      return true;
    }
  return false;
}

bool VerbsMock::FailRecv(ibv_qp *qp, ibv_wc_status status) {
  Qp *q = QpOf(qp);
  if (q->recvs.empty()) return false;
  uint64_t id = q->recvs.front();
  q->recvs.pop_front();
  Push(qp->recv_cq, id, status, IBV_WC_RECV, qp);
  return true;
}

std::string VerbsMock::DevOfPd(const ibv_pd *pd) const { return CtxOf(pd->context)->dev; }
std::string VerbsMock::DevOfQp(const ibv_qp *qp) const { return CtxOf(qp->context)->dev; }
size_t VerbsMock::LiveQps() const {
  size_t n = 0;
  for (Qp *q : qps) n += !q->destroyed;
  return n;
}

void *VerbsMock::Resolve(const char *name) {
  static const std::map<std::string, void *> table = {
      {"ibv_fork_init", (void *)ForkInit},
      {"ibv_get_device_list", (void *)GetDeviceList},
      {"ibv_free_device_list", (void *)FreeDeviceList},
      {"ibv_get_device_name", (void *)GetDeviceName},
      {"ibv_open_device", (void *)OpenDevice},
      {"ibv_close_device", (void *)CloseDevice},
      {"ibv_query_device", (void *)QueryDevice},
      {"ibv_query_port", (void *)QueryPort},
      {"ibv_query_gid", (void *)QueryGid},
      {"ibv_alloc_pd", (void *)AllocPd},
      {"ibv_dealloc_pd", (void *)DeallocPd},
      {"ibv_create_cq", (void *)CreateCq},
      {"ibv_destroy_cq", (void *)DestroyCq},
      {"ibv_create_qp", (void *)CreateQp},
      {"ibv_modify_qp", (void *)ModifyQp},
      {"ibv_destroy_qp", (void *)DestroyQp},
      {"ibv_reg_mr", (void *)RegMr},
      {"ibv_reg_dmabuf_mr", (void *)RegDmabufMr},
      {"ibv_dereg_mr", (void *)DeregMr},
      {"ibv_wc_status_str", (void *)WcStatusStr},
      {"ibv_get_async_event", (void *)GetAsyncEvent},
      {"ibv_ack_async_event", (void *)AckAsyncEvent},
      {"ibv_event_type_str", (void *)EventTypeStr},
  };
  if (!strcmp(name, "ibv_reg_dmabuf_mr") && cur && !cur->has_dmabuf) return nullptr;
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace vmock
