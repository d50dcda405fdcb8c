// The verbs connection's failover protocol (verbs_conn.h: FENCE, FENCED, FIN) over the scripted
// fabric of fabric.h: the orders of events a real fabric produces only now and then (a soft-RoCE
// port taken down under a loaded host), made to happen every time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "fabric.h"

extern "C" {
#include "transport/verbs/verbs_conn.h"
#include "wire/verbs.h"
}

namespace {

constexpr size_t kChunk = 4096;

// A sending and a receiving connection over `rails` rails each, connected, each with one buffer
// registered.
struct Pair {
  braid_vc *s = nullptr, *r = nullptr;
  braid_vc_mem *smem = nullptr, *rmem = nullptr;
  std::vector<uint8_t> src, dst;
  int rails;

  Pair(int n, size_t bytes) : src(bytes), dst(bytes, 0), rails(n) {
    vfab::Reset(n);
    std::vector<braid_verbs_rail> rl((size_t)n);
    memset(rl.data(), 0, rl.size() * sizeof rl[0]);
    braid_vc_opts o{};
    o.chunk = kChunk;
    o.equal = true;  // chunks go round the rails in turn: which rail carries which is known
    EXPECT_EQ(braid_vc_open(rl.data(), n, true, &o, &s), 0);
    EXPECT_EQ(braid_vc_open(rl.data(), n, false, &o, &r), 0);
    std::vector<struct braid_verbs_ep_addr> a((size_t)n);
    braid_vc_addrs(r, a.data());
    EXPECT_EQ(braid_vc_connect(s, a.data(), n), 0);
    braid_vc_addrs(s, a.data());
    EXPECT_EQ(braid_vc_connect(r, a.data(), n), 0);
    for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 7 + 3);
    EXPECT_EQ(braid_vc_reg(s, src.data(), src.size(), -1, 0, &smem), 0);
    EXPECT_EQ(braid_vc_reg(r, dst.data(), dst.size(), -1, 0, &rmem), 0);
  }
  ~Pair() {
    braid_vc_dereg(s, smem);
    braid_vc_dereg(r, rmem);
    braid_vc_close(s);
    braid_vc_close(r);
  }
  braid_verbs_ep *S(int rail) { return vfab::Endpoints().at((size_t)rail); }
  braid_verbs_ep *R(int rail) { return vfab::Endpoints().at((size_t)(rails + rail)); }

  // Everything posted delivered, oldest first, and both sides driven, until nothing moves or
  // both requests are done; the clock moves 100 us a round.
  void Pump(int sreq, int rreq, bool *sdone, bool *rdone, int rounds = 2000) {
    for (int i = 0; i < rounds && !(*sdone && *rdone); i++) {
      for (braid_verbs_ep *ep : vfab::Endpoints())
        while (ep && !ep->out.empty()) vfab::Deliver(ep, 0);
      size_t size = 0;
      if (!*sdone) {
        ASSERT_EQ(braid_vc_test(s, sreq, sdone, &size), 0) << braid_vc_error(s);
      }
      if (!*rdone) {
        ASSERT_EQ(braid_vc_test(r, rreq, rdone, &size), 0) << braid_vc_error(r);
      }
      vfab::now_ns += 100000;
    }
  }
};

// Where the first queued control message of the type lies: {endpoint, index}, endpoint NULL if none.
std::pair<braid_verbs_ep *, size_t> Find(const std::vector<braid_verbs_ep *> &eps, int type) {
  for (braid_verbs_ep *ep : eps)
    for (size_t i = 0; ep && i < ep->out.size(); i++)
      if (vfab::TypeOf(ep, i) == type) return {ep, i};
  return {nullptr, 0};
}

std::vector<braid_verbs_ep *> Side(Pair &p, bool sender) {
  std::vector<braid_verbs_ep *> v;
  for (int k = 0; k < p.rails; k++) v.push_back(sender ? p.S(k) : p.R(k));
  return v;
}

// The receiver fails a rail before any chunk of its receive landed (FENCED: open, no FIN owed);
// a chunk then lands on another rail; the sender's write on the failed rail fails (FENCE), and
// the receiver answers again (FENCED: open, FIN owed).  The two answers take different rails and
// reach the sender in reverse order while its own side of the rail has not drained.  The sender
// must still send the FIN: without it the receive never completes (the verbs-perf "portdown"
// hang: "recv 269: 2/2 chunks, fin 1/0" against a sender that had moved on).
TEST(VerbsFence, TwoFencedAnswersInReverseOrderStillOweTheFin) {
  Pair p(3, 2 * kChunk);
  int rq = -1, sq = -1;
  ASSERT_EQ(braid_vc_irecv(p.r, p.dst.data(), p.dst.size(), p.rmem, &rq), 0);
  for (braid_verbs_ep *ep : Side(p, false))
    while (!ep->out.empty()) vfab::Deliver(ep, 0);  // the CTS (and the probe area) to the sender
  ASSERT_EQ(braid_vc_progress(p.s), 0);
  ASSERT_EQ(braid_vc_isend(p.s, p.src.data(), p.src.size(), p.smem, &sq), 0);
  // the message's two writes, on two rails
  int rail_of[2] = {-1, -1};
  for (int k = 0; k < p.rails; k++)
    for (size_t i = 0; i < p.S(k)->out.size(); i++) {
      braid_vimm w;
      char why[64];
      ASSERT_TRUE(p.S(k)->out[i].write);
      ASSERT_EQ(braid_vimm_decode(p.S(k)->out[i].imm, &w, why, sizeof why), 0) << why;
      rail_of[w.idx] = k;
    }
  ASSERT_GE(rail_of[0], 0);
  ASSERT_GE(rail_of[1], 0);
  ASSERT_NE(rail_of[0], rail_of[1]);
  int x = rail_of[0], y = rail_of[1];

  vfab::FailReceive(p.R(y));
  ASSERT_EQ(braid_vc_progress(p.r), 0);
  auto first = Find(Side(p, false), BRAID_VCTL_FENCED);
  ASSERT_NE(first.first, nullptr) << "the receiver answered its own fence";
  braid_verbs_ep *first_ep = first.first;

  vfab::Deliver(p.S(x), 0);  // chunk 0 lands
  ASSERT_EQ(braid_vc_progress(p.r), 0);

  p.S(y)->never_drains = true;  // the sender's side of the rail stops reporting
  vfab::FailPosted(p.S(y), 0);  // chunk 1's write fails
  ASSERT_EQ(braid_vc_progress(p.s), 0);
  auto fence = Find(Side(p, true), BRAID_VCTL_FENCE);
  ASSERT_NE(fence.first, nullptr) << "the sender told the receiver";
  vfab::Deliver(fence.first, fence.second);
  ASSERT_EQ(braid_vc_progress(p.r), 0);
  // the second answer, on another rail than the first
  braid_verbs_ep *second_ep = nullptr;
  size_t second_i = 0;
  for (braid_verbs_ep *ep : Side(p, false))
    for (size_t i = 0; i < ep->out.size(); i++)
      if (vfab::TypeOf(ep, i) == BRAID_VCTL_FENCED && !(ep == first_ep && i == first.second))
        second_ep = ep, second_i = i;
  ASSERT_NE(second_ep, nullptr) << "the receiver answered the sender's FENCE";
  ASSERT_NE(second_ep, first_ep) << "both answers on one rail: they cannot cross";

  vfab::Deliver(second_ep, second_i);  // the newer answer first
  ASSERT_EQ(braid_vc_progress(p.s), 0);
  auto older = Find({first_ep}, BRAID_VCTL_FENCED);
  ASSERT_NE(older.first, nullptr);
  vfab::Deliver(older.first, older.second);  // then the older, before the rail drained
  ASSERT_EQ(braid_vc_progress(p.s), 0);

  bool sdone = false, rdone = false;
  p.Pump(sq, rq, &sdone, &rdone);  // 200 ms: the sender still waits for its side of the rail
  vfab::now_ns += 1100000000ull;   // the sender gives up waiting for its side to drain
  p.Pump(sq, rq, &sdone, &rdone);
  EXPECT_TRUE(sdone) << "the send never completed";
  EXPECT_TRUE(rdone) << "the receive never completed: its FIN was never sent";
  EXPECT_EQ(p.dst, p.src);
}

// A rail fails on the receiver while its CTS is on that rail, and the rail never drains (a
// soft-RoCE port whose interface went down stops completing anything).  After the drain wait the
// CTS goes out again on a live rail; without it the sender never learns of the receive.
TEST(VerbsFence, ControlMessagesOfARailThatNeverDrainsGoOutAgain) {
  Pair p(2, 2 * kChunk);
  int rq = -1, sq = -1;
  ASSERT_EQ(braid_vc_irecv(p.r, p.dst.data(), p.dst.size(), p.rmem, &rq), 0);
  auto cts = Find(Side(p, false), BRAID_VCTL_CTS);
  ASSERT_NE(cts.first, nullptr);
  cts.first->never_drains = true;
  vfab::FailReceive(cts.first);  // the CTS's rail fails under it, holding it
  ASSERT_EQ(braid_vc_progress(p.r), 0);
  ASSERT_EQ(braid_vc_isend(p.s, p.src.data(), p.src.size(), p.smem, &sq), 0);
  bool sdone = false, rdone = false;
  p.Pump(sq, rq, &sdone, &rdone, 100);  // 10 ms: still waiting for the drain
  EXPECT_FALSE(sdone);
  vfab::now_ns += 1100000000ull;
  p.Pump(sq, rq, &sdone, &rdone);
  EXPECT_TRUE(sdone) << "the send never got its CTS";
  EXPECT_TRUE(rdone);
  EXPECT_EQ(p.dst, p.src);
  bool warned = false;
  for (const auto &w : vfab::warnings) warned |= w.find("did not drain") != std::string::npos;
  EXPECT_TRUE(warned) << "the operator is told the rail never drained";
}

}  // namespace

namespace {

// One message of `bytes` from the pair's sender to its receiver, its own pattern, pumped until
// both ends complete: true when it arrived intact.
bool Transfer(Pair &p, size_t bytes, unsigned pattern) {
  for (size_t i = 0; i < bytes; i++) p.src[i] = (uint8_t)(i * 13 + pattern);
  std::fill(p.dst.begin(), p.dst.end(), 0);
  int rq = -1, sq = -1;
  if (braid_vc_irecv(p.r, p.dst.data(), p.dst.size(), p.rmem, &rq) != 0) return false;
  if (braid_vc_isend(p.s, p.src.data(), bytes, p.smem, &sq) != 0) return false;
  bool sdone = false, rdone = false;
  p.Pump(sq, rq, &sdone, &rdone);
  return sdone && rdone && std::equal(p.src.begin(), p.src.begin() + (long)bytes, p.dst.begin());
}

// Messages until the clock moved `ns`, each checked.
void TransferFor(Pair &p, uint64_t ns, unsigned *pattern) {
  for (uint64_t end = vfab::now_ns + ns; vfab::now_ns < end;)
    ASSERT_TRUE(Transfer(p, p.src.size(), (*pattern)++)) << "message " << *pattern << " lost or wrong";
}

// A rail fails with its port down on both ends: no REJOIN is tried while the port stays down;
// once it is up, the rail rejoins on both ends and carries data again.  Every message checked.
TEST(VerbsRejoin, ARailWhosePortComesBackRejoinsAndCarriesDataAgain) {
  Pair p(2, 16 * kChunk);
  unsigned pattern = 1;
  TransferFor(p, 50000000, &pattern);
  p.S(1)->port_up = p.R(1)->port_up = false;
  vfab::FailReceive(p.R(1));
  TransferFor(p, 3000000000ull, &pattern);  // 3 s with the port down
  EXPECT_TRUE(braid_vc_rail_down(p.s, 1));
  EXPECT_TRUE(braid_vc_rail_down(p.r, 1));
  EXPECT_EQ(vfab::delivered[BRAID_VCTL_REJOIN], 0) << "asked while its own port was down";
  p.S(1)->port_up = p.R(1)->port_up = true;
  TransferFor(p, 6000000000ull, &pattern);  // the back-off reached 3.2 s at most
  EXPECT_FALSE(braid_vc_rail_down(p.s, 1)) << "the sender did not take the rail back";
  EXPECT_FALSE(braid_vc_rail_down(p.r, 1)) << "the receiver did not take the rail back";
  EXPECT_EQ(vfab::delivered[BRAID_VCTL_JOINED], 1);
  uint64_t before = braid_vc_rail_bytes(p.s, 1);
  TransferFor(p, 2000000000ull, &pattern);
  EXPECT_GT(braid_vc_rail_bytes(p.s, 1), before) << "the rejoined rail carried no data";
}

// A port down for long is looked at every second at most, and its PORT_ACTIVE event has the
// rail try at once: the port comes back just after a look, and the rail is back well before the
// next one would have come.
TEST(VerbsRejoin, APortActiveEventRejoinsAtOnce) {
  Pair p(2, 16 * kChunk);
  unsigned pattern = 1;
  TransferFor(p, 50000000, &pattern);
  p.S(1)->port_up = p.R(1)->port_up = false;
  vfab::FailReceive(p.R(1));
  TransferFor(p, 10000000000ull, &pattern);  // 10 s down: the back-off is at its longest
  ASSERT_TRUE(braid_vc_rail_down(p.s, 1));
  int looks = p.S(1)->port_queries;
  TransferFor(p, 1100000000ull, &pattern);
  EXPECT_GE(p.S(1)->port_queries, looks + 1) << "a port down for 10 s is looked at less than every second";
  looks = p.S(1)->port_queries;
  for (int i = 0; i < 2000 && p.S(1)->port_queries == looks; i++) TransferFor(p, 1000000, &pattern);
  ASSERT_GT(p.S(1)->port_queries, looks);  // a look just went by
  p.S(1)->port_up = p.R(1)->port_up = true;
  p.S(1)->port_active_event = true;
  TransferFor(p, 100000000, &pattern);
  EXPECT_FALSE(braid_vc_rail_down(p.s, 1)) << "the rail waited for its next look despite PORT_ACTIVE";
  EXPECT_EQ(vfab::delivered[BRAID_VCTL_JOINED], 1);
}

// A connection over 3 rails carries data; then the receiver fails rail 1 and its FENCED reaches
// the sender, which fails the rail too: *fence is the sender's FENCE, not yet delivered.
void ReceiverFailsRailOne(Pair &p, unsigned *pattern, std::pair<braid_verbs_ep *, size_t> *fence) {
  TransferFor(p, 50000000, pattern);
  vfab::FailReceive(p.R(1));
  ASSERT_EQ(braid_vc_progress(p.r), 0);
  auto fenced = Find(Side(p, false), BRAID_VCTL_FENCED);
  ASSERT_NE(fenced.first, nullptr);
  vfab::Deliver(fenced.first, fenced.second);
  ASSERT_EQ(braid_vc_progress(p.s), 0);  // the sender fails the rail too: FENCE
  *fence = Find(Side(p, true), BRAID_VCTL_FENCE);
  ASSERT_NE(fence->first, nullptr);
}

// The sender's FENCE crosses the rejoin: it was sent when the sender heard of the failure and
// arrives after the receiver took the rail back.  It names the old generation and is ignored;
// without generations it would fail the new queue pair.
TEST(VerbsRejoin, AFenceFromBeforeTheRejoinDoesNotFailTheNewQueuePair) {
  Pair p(3, 16 * kChunk);
  unsigned pattern = 1;
  std::pair<braid_verbs_ep *, size_t> fence;
  ASSERT_NO_FATAL_FAILURE(ReceiverFailsRailOne(p, &pattern, &fence));
  vfab::Hold(fence.first, fence.second);
  TransferFor(p, 2000000000ull, &pattern);
  ASSERT_FALSE(braid_vc_rail_down(p.r, 1)) << "the rail did not rejoin";
  int fenced_before = vfab::delivered[BRAID_VCTL_FENCED];
  vfab::Release();  // the old FENCE arrives now
  TransferFor(p, 500000000, &pattern);
  EXPECT_EQ(vfab::delivered[BRAID_VCTL_FENCED], fenced_before) << "a stale FENCE failed the rejoined rail";
  EXPECT_EQ(vfab::delivered[BRAID_VCTL_JOINED], 1) << "the rail had to rejoin again";
  EXPECT_FALSE(braid_vc_rail_down(p.r, 1));
  EXPECT_FALSE(braid_vc_rail_down(p.s, 1));
}

// The receiver answers FENCED twice (its own failure, then the sender's FENCE); the second is
// slow and the rejoin's answer overtakes it.  The answer counts the FENCEDs sent, so the sender
// takes the rail up only after applying both; joining at once, the late FENCED would fail the
// new queue pair.
TEST(VerbsRejoin, AnAnswerThatOvertakesAFencedWaitsForIt) {
  Pair p(3, 16 * kChunk);
  unsigned pattern = 1;
  std::pair<braid_verbs_ep *, size_t> fence;
  ASSERT_NO_FATAL_FAILURE(ReceiverFailsRailOne(p, &pattern, &fence));
  vfab::Deliver(fence.first, fence.second);
  ASSERT_EQ(braid_vc_progress(p.r), 0);  // the second FENCED
  auto second = Find(Side(p, false), BRAID_VCTL_FENCED);
  ASSERT_NE(second.first, nullptr);
  vfab::Hold(second.first, second.second);
  TransferFor(p, 2000000000ull, &pattern);  // asked and answered meanwhile
  EXPECT_GE(vfab::delivered[BRAID_VCTL_REJOIN_ACK], 1);
  EXPECT_TRUE(braid_vc_rail_down(p.s, 1)) << "joined before the FENCED its answer counts";
  vfab::Release();
  TransferFor(p, 2000000000ull, &pattern);
  EXPECT_FALSE(braid_vc_rail_down(p.s, 1));
  EXPECT_FALSE(braid_vc_rail_down(p.r, 1));
  EXPECT_EQ(vfab::delivered[BRAID_VCTL_JOINED], 1) << "the rail had to rejoin again";
}

// The receiver's port is still down when the sender asks: "not now", and the sender asks again
// later, backing off, until the port is up.
TEST(VerbsRejoin, NotNowWhileThePeersPortIsDownThenJoined) {
  Pair p(2, 16 * kChunk);
  unsigned pattern = 1;
  p.R(1)->port_up = false;
  vfab::FailReceive(p.R(1));
  TransferFor(p, 2000000000ull, &pattern);
  EXPECT_GE(vfab::delivered[BRAID_VCTL_REJOIN_ACK], 2) << "not asked again after 'not now'";
  EXPECT_TRUE(braid_vc_rail_down(p.s, 1));
  p.R(1)->port_up = true;
  TransferFor(p, 6000000000ull, &pattern);
  EXPECT_FALSE(braid_vc_rail_down(p.s, 1));
  EXPECT_FALSE(braid_vc_rail_down(p.r, 1));
}

// An answer whose address cannot be connected to fails that try only: the connection lives, the
// rail is asked for again and joins with a good answer.
TEST(VerbsRejoin, AnAnswerThatCannotBeConnectedToFailsOnlyThatTry) {
  Pair p(2, 16 * kChunk);
  unsigned pattern = 1;
  vfab::FailReceive(p.R(1));
  bool spoiled = false;
  for (int i = 0; i < 200000 && !spoiled; i++) {  // the first answer that joins: spoiled
    for (braid_verbs_ep *ep : Side(p, false))
      for (size_t k = 0; k < ep->out.size(); k++)
        if (vfab::TypeOf(ep, k) == BRAID_VCTL_REJOIN_ACK && ep->out[k].bytes[3] == BRAID_VREJOIN_JOINED) {
          uint8_t *psn = &ep->out[k].bytes[8 + 4];
          psn[0] = vfab::kBadPsn & 0xff, psn[1] = vfab::kBadPsn >> 8, psn[2] = psn[3] = 0;
          spoiled = true;
        }
    for (braid_verbs_ep *ep : vfab::Endpoints())
      while (!ep->out.empty()) vfab::Deliver(ep, 0);
    ASSERT_EQ(braid_vc_progress(p.s), 0) << braid_vc_error(p.s);
    ASSERT_EQ(braid_vc_progress(p.r), 0) << braid_vc_error(p.r);
    vfab::now_ns += 100000;
  }
  ASSERT_TRUE(spoiled) << "no rejoin was answered";
  TransferFor(p, 8000000000ull, &pattern);
  EXPECT_FALSE(braid_vc_rail_down(p.s, 1)) << "the rail never joined after the spoiled answer";
  EXPECT_FALSE(braid_vc_rail_down(p.r, 1));
  EXPECT_GE(vfab::delivered[BRAID_VCTL_REJOIN], 2);
}

}  // namespace
