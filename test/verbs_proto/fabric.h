// A scripted fabric for the verbs connection's protocol (net_plugin/transport/verbs/verbs_conn.c):
// verbs_ep.h's endpoints faked in pairs, with nothing delivered until the test says so.  What a
// connection posts (a control message, an RDMA write with immediate) waits on its endpoint's
// queue; Deliver hands it to the peer endpoint (the write's bytes land in the peer's buffer, the
// peer sees the completion of the receive it consumed) and completes it at the poster, in any
// order the test picks, across rails or not.  A fenced endpoint (its QP moved to ERR) drops what
// it still holds, with flush errors, or, set never to drain, silently (a port whose device stops
// reporting).  The clock is the test's (braid_now_ns under BRAID_CLOCK_FAKE).
#ifndef BRAID_TEST_VERBS_FABRIC_H
#define BRAID_TEST_VERBS_FABRIC_H

extern "C" {
#include "transport/verbs/verbs_ep.h"
}

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace vfab {

struct Op {
  bool write;  // else a control message
  uint64_t cookie;
  std::vector<uint8_t> bytes;  // the message, or the write's payload
  uint32_t imm;
  uint64_t raddr;
};

}  // namespace vfab

struct braid_verbs_ep {
  int index;  // in opening order: the first connection's rails, then the second's
  std::string name;
  bool fenced = false;
  bool never_drains = false;  // fenced, it keeps what it held: no flush errors, never drained
  bool connected = false;
  bool port_up = true;  // braid_verbs_ep_port_ready's answer
  int port_queries = 0; // braid_verbs_ep_port_ready calls
  bool port_active_event = false;  // braid_verbs_ep_port_events reports PORT_ACTIVE once
  int renewals = 0;     // its queue pair's incarnation: the address's QP number changes with it
  std::deque<braid_verbs_ev> events;
  std::deque<vfab::Op> out;  // posted, not yet delivered
};

namespace vfab {

extern uint64_t now_ns;
extern std::vector<std::string> warnings;  // every WARN logged

// The endpoints in opening order; the peer of endpoint i is i + rails (or i - rails).
std::vector<braid_verbs_ep *> &Endpoints();
void Reset(int rails);  // before opening the two connections: rails each
braid_verbs_ep *Peer(braid_verbs_ep *ep);
// Hands ep->out[i] to the peer and completes it here.
void Deliver(braid_verbs_ep *ep, size_t i);
// An error completion on ep: of its posted work i (dropped, never delivered), or of a receive.
void FailPosted(braid_verbs_ep *ep, size_t i);
void FailReceive(braid_verbs_ep *ep);
// Control message i of ep's queue decoded: its type (wire/verbs.h), -1 for a write.
int TypeOf(const braid_verbs_ep *ep, size_t i);
// Control messages delivered so far, by type.
extern int delivered[16];
// ep->out[i] taken aside (not delivered) until Release, which queues it again behind the rest.
void Hold(braid_verbs_ep *ep, size_t i);
void Release();
// The PSN a test writes into an address to make connect() refuse it.
constexpr uint32_t kBadPsn = 0xbad;

}  // namespace vfab

#endif
