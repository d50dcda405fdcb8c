// The scripted fabric (fabric.h): verbs_ep.h, the log and the clock, faked (verbs_flush.h: flush_none.c).
#include "fabric.h"

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

extern "C" {
#include "clock.h"
#include "log.h"
#include "transport/verbs/verbs_flush.h"
}

namespace vfab {

uint64_t now_ns = 1000000000ull;
std::vector<std::string> warnings;
int delivered[16];
static int rails_each;
static std::vector<std::pair<braid_verbs_ep *, Op>> held;

std::vector<braid_verbs_ep *> &Endpoints() {
  static std::vector<braid_verbs_ep *> eps;
  return eps;
}

void Reset(int rails) {
  Endpoints().clear();
  warnings.clear();
  held.clear();
  memset(delivered, 0, sizeof delivered);
  rails_each = rails;
}

void Hold(braid_verbs_ep *ep, size_t i) {
  held.emplace_back(ep, ep->out.at(i));
  ep->out.erase(ep->out.begin() + (long)i);
}

void Release() {
  for (auto &h : held) h.first->out.push_back(h.second);
  held.clear();
}

braid_verbs_ep *Peer(braid_verbs_ep *ep) {
  int i = ep->index < rails_each ? ep->index + rails_each : ep->index - rails_each;
  return Endpoints().at((size_t)i);
}

static braid_verbs_ev Event(braid_verbs_ev_kind kind, uint64_t cookie) {
  braid_verbs_ev ev;
  memset(&ev, 0, sizeof ev);
  ev.kind = kind;
  ev.cookie = cookie;
  return ev;
}

static void Error(braid_verbs_ep *ep, uint64_t cookie, const char *why) {
  braid_verbs_ev ev = Event(BRAID_VERBS_EV_ERROR, cookie);
  snprintf(ev.why, sizeof ev.why, "%s", why);
  ep->events.push_back(ev);
}

void Deliver(braid_verbs_ep *ep, size_t i) {
  Op op = ep->out.at(i);
  ep->out.erase(ep->out.begin() + (long)i);
  braid_verbs_ep *peer = Peer(ep);
  if (peer->fenced) {  // its QP is in ERR: nothing lands, the poster's retries run out
    Error(ep, op.cookie, "send: transport retry counter exceeded");
    return;
  }
  if (!peer->connected) ADD_FAILURE() << ep->name << " sent to " << peer->name << ", a queue pair not connected";
  if (!op.write && op.bytes.at(0) < 16) delivered[op.bytes[0]]++;
  braid_verbs_ev in = Event(op.write ? BRAID_VERBS_EV_WRITE_IMM : BRAID_VERBS_EV_CTRL, 0);
  in.len = (uint32_t)op.bytes.size();
  if (op.write) {
    in.imm = op.imm;
    if (!op.bytes.empty()) memcpy(reinterpret_cast<void *>(op.raddr), op.bytes.data(), op.bytes.size());
  } else {
    memcpy(in.data, op.bytes.data(), op.bytes.size());
  }
  peer->events.push_back(in);
  ep->events.push_back(Event(op.write ? BRAID_VERBS_EV_WRITE_DONE : BRAID_VERBS_EV_SEND_DONE, op.cookie));
}

void FailPosted(braid_verbs_ep *ep, size_t i) {
  uint64_t cookie = ep->out.at(i).cookie;
  ep->out.erase(ep->out.begin() + (long)i);
  Error(ep, cookie, "send: transport retry counter exceeded");
}

void FailReceive(braid_verbs_ep *ep) { Error(ep, 0, "receive: local QP operation error"); }

int TypeOf(const braid_verbs_ep *ep, size_t i) {
  const Op &op = ep->out.at(i);
  return op.write ? -1 : op.bytes.at(0);
}

}  // namespace vfab

using vfab::Endpoints;

extern "C" {

uint64_t braid_now_ns(void) { return vfab::now_ns; }

void braid_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
  (void)flags, (void)file, (void)line;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) vfab::warnings.push_back(buf);
  if (getenv("VFAB_VERBOSE")) fprintf(stderr, "%s %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", buf);
}

int braid_verbs_ep_open(const struct braid_verbs_rail *rail, int depth, const struct braid_verbs_qos *qos,
                        struct braid_verbs_ep **out) {
  (void)rail, (void)depth, (void)qos;
  auto *ep = new braid_verbs_ep;
  ep->index = (int)Endpoints().size();
  ep->name = "fab" + std::to_string(ep->index) + ":1";
  Endpoints().push_back(ep);
  *out = ep;
  return 0;
}

void braid_verbs_ep_close(struct braid_verbs_ep *ep) {
  for (auto &e : Endpoints())
    if (e == ep) e = nullptr;
  delete ep;
}

void braid_verbs_ep_addr(const struct braid_verbs_ep *ep, struct braid_verbs_ep_addr *out) {
  memset(out, 0, sizeof *out);
  out->qpn = (uint32_t)(ep->index + 1000 * ep->renewals);
  out->psn = 1;
  out->link = BRAID_VADDR_LINK_ETH;
  out->mtu = BRAID_VADDR_MTU_MIN;
}

int braid_verbs_ep_connect(struct braid_verbs_ep *ep, const struct braid_verbs_ep_addr *peer) {
  if (ep->connected || ep->fenced) {
    ADD_FAILURE() << ep->name << ": connect on a queue pair " << (ep->fenced ? "fenced" : "already connected");
    return -1;
  }
  if (peer->psn == vfab::kBadPsn) {
    vfab::warnings.push_back(ep->name + ": connect refused the address");
    ep->fenced = true;  // failed, as the real endpoint
    return -1;
  }
  braid_verbs_ep *p = vfab::Peer(ep);
  if (peer->qpn != (uint32_t)(p->index + 1000 * p->renewals))
    ADD_FAILURE() << ep->name << " connected to QP " << peer->qpn << ", not its peer's current one";
  ep->connected = true;
  return 0;
}

bool braid_verbs_ep_port_ready(struct braid_verbs_ep *ep, char *why, size_t whylen) {
  ep->port_queries++;
  if (!ep->port_up) snprintf(why, whylen, "its port is down");
  return ep->port_up;
}

int braid_verbs_ep_renew(struct braid_verbs_ep *ep) {
  ep->out.clear();
  ep->events.clear();  // the old completion queue is gone, with what it held
  ep->fenced = ep->connected = false;
  ep->renewals++;
  return 0;
}

int braid_verbs_ep_reg(struct braid_verbs_ep *ep, void *buf, size_t len, bool remote, struct braid_verbs_mr *out) {
  (void)ep, (void)remote;
  memset(out, 0, sizeof *out);
  out->addr = buf;
  out->len = len;
  out->lkey = out->rkey = 7;
  return 0;
}

int braid_verbs_ep_reg_dmabuf(struct braid_verbs_ep *ep, void *buf, size_t len, uint64_t offset, int fd, bool remote,
                              struct braid_verbs_mr *out) {
  (void)offset, (void)fd;
  return braid_verbs_ep_reg(ep, buf, len, remote, out);
}

void braid_verbs_ep_dereg(struct braid_verbs_ep *ep, struct braid_verbs_mr *mr) { (void)ep, (void)mr; }

static int Post(braid_verbs_ep *ep, vfab::Op op) {
  if (ep->fenced) {  // a QP in ERR flushes what is posted to it
    if (!ep->never_drains) vfab::Error(ep, op.cookie, "send: Work Request Flushed Error");
    return 0;
  }
  if (!ep->connected) {
    ADD_FAILURE() << ep->name << ": a post on a queue pair not connected";
    return -1;
  }
  ep->out.push_back(std::move(op));
  return 0;
}

int braid_verbs_ep_send(struct braid_verbs_ep *ep, const void *msg, size_t len, uint64_t cookie) {
  const auto *p = static_cast<const uint8_t *>(msg);
  return Post(ep, vfab::Op{false, cookie, std::vector<uint8_t>(p, p + len), 0, 0});
}

int braid_verbs_ep_write_imm(struct braid_verbs_ep *ep, const struct braid_verbs_mr *mr, size_t off, size_t len,
                             uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t cookie) {
  (void)rkey;
  const auto *p = len ? static_cast<const uint8_t *>(mr->addr) + off : nullptr;
  return Post(ep, vfab::Op{true, cookie, std::vector<uint8_t>(p, p + len), imm, raddr});
}

int braid_verbs_ep_poll(struct braid_verbs_ep *ep, struct braid_verbs_ev *ev, int max) {
  int n = 0;
  while (n < max && !ep->events.empty()) {
    ev[n++] = ep->events.front();
    ep->events.pop_front();
  }
  return n;
}

bool braid_verbs_ep_failed(const struct braid_verbs_ep *ep) { return ep->fenced || !ep->connected; }

int braid_verbs_ep_port_events(struct braid_verbs_ep *ep, char *why, size_t whylen) {
  (void)why, (void)whylen;
  bool active = ep->port_active_event;
  ep->port_active_event = false;
  return active ? 2 : 0;
}

int braid_verbs_ep_fence(struct braid_verbs_ep *ep) {
  ep->fenced = true;
  while (!ep->out.empty()) {
    if (!ep->never_drains) vfab::Error(ep, ep->out.front().cookie, "send: Work Request Flushed Error");
    ep->out.pop_front();
  }
  return 0;
}

bool braid_verbs_ep_drained(const struct braid_verbs_ep *ep) { return !ep->never_drains && ep->events.empty(); }

const char *braid_verbs_ep_name(const struct braid_verbs_ep *ep) { return ep->name.c_str(); }

int braid_verbs_ep_recv_posted(const struct braid_verbs_ep *ep) {
  (void)ep;
  return 64;
}


}  // extern "C"
