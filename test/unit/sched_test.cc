// Multi-rail scheduler: the API's rules on hand-driven rails, then whole transfers over simulated
// rails (tools/sim/railsim.c, braid-sim's rail simulator) that slow down, fail, black-hole and
// recover.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "railsim.h"

extern "C" {
#include "stripe/sched.h"
}

namespace {

constexpr uint64_t kUs = RS_US;
constexpr uint64_t kMs = RS_MS;
constexpr uint64_t kSec = RS_SEC;
constexpr size_t kKiB = 1024;
constexpr double kRate = 37.5e6; // 300 Mbit/s, the netbed's rails

// ---------------------------------------------------------------------------------------------
// Hand-driven scheduler

class Sched : public ::testing::Test {
 protected:
  braid_sched s{};
  braid_sched_params p{};
  uint64_t now = kSec;
  std::vector<braid_sched_event> events;

  void Init(int n, const std::vector<double> &nominal = {}) {
    ASSERT_EQ(0, braid_sched_init(&s, n, &p, nominal.empty() ? nullptr : nominal.data(), now));
  }
  void SetUp() override { braid_sched_params_default(&p); }

  // Sends `bytes` on `rail` now and acks them once they would have gone at `rate`.
  void Deliver(int rail, size_t bytes, double rate) {
    braid_sched_sent(&s, rail, bytes, now);
    uint64_t sent = now;
    now += (uint64_t)((double)bytes * 1e9 / rate);
    braid_sched_acked(&s, rail, bytes, sent, now);
  }
  int Tick() {
    braid_sched_event ev[BRAID_SCHED_MAX_EVENTS];
    int n = braid_sched_tick(&s, now, ev, BRAID_SCHED_MAX_EVENTS);
    events.insert(events.end(), ev, ev + n);
    return n;
  }
  int Count(braid_sched_reason why, int rail) const {
    int n = 0;
    for (const auto &e : events) n += e.reason == why && e.rail == rail;
    return n;
  }
  braid_sched_rail &R(int i) { return s.rail[i]; }
};

TEST_F(Sched, InitChecksArgumentsAndStartsActive) {
  EXPECT_EQ(-1, braid_sched_init(&s, 0, nullptr, nullptr, 0));
  EXPECT_EQ(-1, braid_sched_init(&s, BRAID_SCHED_MAX_RAILS + 1, nullptr, nullptr, 0));
  EXPECT_EQ(-1, braid_sched_init(nullptr, 2, nullptr, nullptr, 0));
  Init(3, {5e9, 0, 1e9}); // 0: no nominal rate, the prior
  EXPECT_EQ(3, braid_sched_count(&s, BRAID_RAIL_ACTIVE));
  EXPECT_DOUBLE_EQ(5e9, R(0).est_Bps);
  EXPECT_DOUBLE_EQ(p.prior_Bps, R(1).est_Bps);
  EXPECT_FALSE(R(0).measured);
  EXPECT_EQ(p.inflight_min, braid_sched_cap(&s, 0)) << "unmeasured rails get the small cap";
  EXPECT_STREQ("degraded", braid_sched_state_name(BRAID_RAIL_DEGRADED));
  EXPECT_STREQ("stalled", braid_sched_reason_name(BRAID_SCHED_STALLED));
}

TEST_F(Sched, PickChangesNothingAndTiesRotate) {
  Init(4);
  braid_sched before;
  memcpy(&before, &s, sizeof s);
  int first = braid_sched_pick(&s, 128 * kKiB, 128 * kKiB, now);
  EXPECT_EQ(first, braid_sched_pick(&s, 128 * kKiB, 128 * kKiB, now));
  EXPECT_EQ(0, memcmp(&before, &s, sizeof s)) << "pick() must not change the scheduler";
  std::vector<int> order;
  for (int k = 0; k < 8; k++) {
    int r = braid_sched_pick(&s, 64 * kKiB, 1 << 20, now);
    ASSERT_GE(r, 0);
    braid_sched_sent(&s, r, 64 * kKiB, now);
    order.push_back(r);
  }
  EXPECT_EQ((std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}), order);
}

TEST_F(Sched, WorkFollowsExpectedFinish) {
  p.inflight_min = 64 << 20; // caps out of the way: the finish rule alone
  Init(2, {2e9, 1e9});
  size_t bytes[2] = {0, 0};
  for (int k = 0; k < 300; k++) {
    int r = braid_sched_pick(&s, 128 * kKiB, 1u << 30, now);
    ASSERT_GE(r, 0);
    braid_sched_sent(&s, r, 128 * kKiB, now);
    bytes[r] += 128 * kKiB;
  }
  EXPECT_NEAR(2.0, (double)bytes[0] / (double)bytes[1], 0.05) << "a rail twice as fast carries twice as much";
}

TEST_F(Sched, AvoidedRailsNeverTakeTheChunk) {
  Init(3);
  EXPECT_EQ(2, braid_sched_pick_avoid(&s, 128 * kKiB, 128 * kKiB, 0x3, now)) << "0 and 1 hold a copy";
  EXPECT_EQ(BRAID_SCHED_WAIT, braid_sched_pick_avoid(&s, 128 * kKiB, 128 * kKiB, 0x7, now));
  braid_sched_failed(&s, 0, now);
  braid_sched_failed(&s, 1, now);
  EXPECT_EQ(BRAID_SCHED_WAIT, braid_sched_pick_avoid(&s, 128 * kKiB, 128 * kKiB, 0x4, now));
}

TEST_F(Sched, CapBoundsInflightButAnEmptyRailTakesAnyChunk) {
  Init(2);
  size_t big = 4 * p.inflight_min;
  ASSERT_EQ(0, braid_sched_pick(&s, big, big, now));
  braid_sched_sent(&s, 0, big, now);
  ASSERT_EQ(1, braid_sched_pick(&s, big, 2 * big, now));
  braid_sched_sent(&s, 1, big, now);
  EXPECT_EQ(BRAID_SCHED_WAIT, braid_sched_pick(&s, 4 * kKiB, 4 * kKiB, now)) << "both over their cap";
  braid_sched_acked(&s, 0, big, 0, now + kMs);
  EXPECT_EQ(0, braid_sched_pick(&s, 4 * kKiB, 4 * kKiB, now + kMs));
}

TEST_F(Sched, CapFollowsEstimateAndQueueTarget) {
  Init(1);
  Deliver(0, 1 << 20, 100e6); // measured at 100 MB/s
  EXPECT_NEAR(100e6 * (double)p.queue_target_ns / 1e9, (double)braid_sched_cap(&s, 0), 1e3);
  Deliver(0, 1 << 20, 1e6); // far slower: the cap's floor
  for (int k = 0; k < 10; k++) Deliver(0, 1 << 20, 1e6);
  EXPECT_EQ(p.inflight_min, braid_sched_cap(&s, 0));
}

TEST_F(Sched, HorizonKeepsAMessageTailOffASlowRail) {
  p.inflight_min = 512 * kKiB;
  Init(2, {10e6, 1e6});
  braid_sched_sent(&s, 0, 512 * kKiB, now); // fast rail full
  // Last chunk of the work: 128 ms on the slow rail, 64 ms behind the fast rail's queue.
  EXPECT_EQ(BRAID_SCHED_WAIT, braid_sched_pick(&s, 128 * kKiB, 128 * kKiB, now));
  // A long backlog: the slow rail's chunk finishes well before the backlog drains, so use it.
  EXPECT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 4 << 20, now));
}

TEST_F(Sched, EstimatorMeasuresDeliveryNotOfferedLoad) {
  Init(2);
  // Rail 0: one 128 KiB chunk every 100 ms (1.3 MB/s offered) over a 50 MB/s path.
  // Rail 1: the same path kept busy.
  for (int k = 0; k < 20; k++) {
    Deliver(0, 128 * kKiB, 50e6);
    now += 100 * kMs;
    for (int j = 0; j < 4; j++) Deliver(1, 128 * kKiB, 50e6);
    Tick();
  }
  EXPECT_NEAR(50e6, R(0).est_Bps, 0.01 * 50e6) << "idle time must not count";
  EXPECT_NEAR(50e6, R(1).est_Bps, 0.01 * 50e6);
  EXPECT_EQ(2, braid_sched_count(&s, BRAID_RAIL_ACTIVE));
  EXPECT_NEAR(128 * kKiB * 1e9 / 50e6, (double)R(0).delay_ns, 1e3);
}

TEST_F(Sched, FirstSampleReplacesPriorThenTimeWeightedEwma) {
  Init(1); // prior 1 GB/s
  Deliver(0, 1 << 20, 40e6);
  EXPECT_NEAR(40e6, R(0).est_Bps, 1e3);
  // A window of exactly est_tau_ns busy time at 20 MB/s moves the estimate halfway.
  Deliver(0, (size_t)(20e6 * (double)p.est_tau_ns / 1e9), 20e6);
  EXPECT_NEAR(30e6, R(0).est_Bps, 1e4);
  // Many short windows over one tau weigh about as much as one long one (1 - 1/e .. 1/2).
  double before = R(0).est_Bps;
  for (int k = 0; k < 20; k++) Deliver(0, (size_t)(10e6 * (double)p.est_tau_ns / 20e9), 10e6);
  double moved = (before - R(0).est_Bps) / (before - 10e6);
  EXPECT_GT(moved, 0.5);
  EXPECT_LT(moved, 0.7);
}

TEST_F(Sched, SilentRailLosesWorkBeforeAnyVerdict) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  Deliver(1, 1 << 20, 40e6);
  braid_sched_sent(&s, 0, 128 * kKiB, now);
  braid_sched_sent(&s, 1, 128 * kKiB, now);
  braid_sched_sent(&s, 1, 128 * kKiB, now); // rail 1 has more queued
  EXPECT_EQ(0, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
  now += 50 * kMs; // 15x the time rail 0's chunk should take, and no ack
  EXPECT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
  EXPECT_FALSE(braid_sched_stalled(&s, 0, now)) << "silent, not yet stalled";
}

TEST_F(Sched, StallThresholdScalesWithDrainTime) {
  Init(2);
  for (int k = 0; k < 5; k++) Deliver(0, 1 << 20, 40e6), Deliver(1, 1 << 20, 4e6);
  braid_sched_sent(&s, 0, 256 * kKiB, now);
  braid_sched_sent(&s, 1, 256 * kKiB, now);
  uint64_t fast = braid_sched_stall_ns(&s, 0), slow = braid_sched_stall_ns(&s, 1);
  EXPECT_NEAR(4 * 256 * kKiB * 1e9 / R(0).est_Bps + 200e6, (double)fast, 1e4);
  EXPECT_GT(slow, fast + 200 * kMs) << "a slow rail needs longer before it looks dead";
  EXPECT_LT(slow, kSec) << "a dead rail is still found within a second";
  EXPECT_FALSE(braid_sched_stalled(&s, 0, now + fast));
  EXPECT_TRUE(braid_sched_stalled(&s, 0, now + fast + 1));
  EXPECT_FALSE(braid_sched_stalled(&s, 1, now + fast + 1));
  now += fast + kMs;
  Tick();
  now += 10 * kMs;
  Tick();
  EXPECT_EQ(1, Count(BRAID_SCHED_STALLED, 0)) << "reported once per silence";
  EXPECT_EQ(0, Count(BRAID_SCHED_STALLED, 1));
  braid_sched_acked(&s, 0, 128 * kKiB, 0, now); // progress re-arms
  EXPECT_FALSE(braid_sched_stalled(&s, 0, now + fast / 2));
}

TEST_F(Sched, LateWhenOthersCouldRedoTheWorkSooner) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  Deliver(1, 1 << 20, 40e6);
  braid_sched_sent(&s, 0, 256 * kKiB, now);
  // Others need 256 KiB / 40 MB/s = 6.6 ms for it: late past 2 * 6.6 + 5 ms of silence.
  uint64_t when = (uint64_t)(2 * 256 * kKiB * 1e9 / 40e6) + p.late_margin_ns;
  EXPECT_FALSE(braid_sched_late(&s, 0, now + when - 200 * kUs));
  EXPECT_TRUE(braid_sched_late(&s, 0, now + when + 200 * kUs));
  now += when + kMs;
  Tick();
  Tick();
  EXPECT_EQ(1, Count(BRAID_SCHED_LATE, 0));
  EXPECT_FALSE(braid_sched_late(&s, 1, now)) << "nothing in flight";
  braid_sched_failed(&s, 1, now);
  EXPECT_FALSE(braid_sched_late(&s, 0, now + kSec)) << "no other rail to move the work to";
}

TEST_F(Sched, SlowRailDemotedOnlyWhenSustained) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  Deliver(1, 1 << 20, 4e6); // 10% of rail 0
  Tick();
  now += p.demote_after_ns / 2;
  Deliver(1, 16 << 20, 40e6); // recovers before the verdict: long window, weight ~1
  Tick();
  now += p.demote_after_ns;
  Tick();
  EXPECT_EQ(BRAID_RAIL_ACTIVE, R(1).state) << "a short dip is not a demotion";
  Deliver(1, 1 << 20, 4e6);
  Deliver(1, 1 << 20, 4e6);
  Tick();
  now += p.demote_after_ns;
  Deliver(0, 1 << 20, 40e6);
  Tick();
  EXPECT_EQ(BRAID_RAIL_DEGRADED, R(1).state);
  ASSERT_EQ(1, Count(BRAID_SCHED_SLOW, 1));
  EXPECT_EQ(BRAID_RAIL_ACTIVE, events.back().from);
  EXPECT_NEAR(40e6, events.back().ref_Bps, 1e5);
}

TEST_F(Sched, DegradedRailIsProbedAndReadmitted) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  for (int k = 0; k < 3; k++) Deliver(1, 1 << 20, 4e6);
  Tick();
  now += p.demote_after_ns;
  Tick();
  ASSERT_EQ(BRAID_RAIL_DEGRADED, R(1).state);
  uint64_t demoted = now;
  EXPECT_EQ(0, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now)) << "no probe before its interval";
  now = demoted + p.probe_interval_ns;
  ASSERT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now)) << "probe due";
  Deliver(1, 128 * kKiB, 4e6); // still slow: probes back off
  EXPECT_EQ(2 * p.probe_interval_ns, R(1).probe_gap_ns);
  EXPECT_NE(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now + p.probe_interval_ns));
  now = R(1).next_probe_ns;
  ASSERT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
  Deliver(1, 128 * kKiB, 40e6); // healthy again
  EXPECT_EQ(BRAID_RAIL_PROBING, R(1).state);
  for (int k = 0; k < 20 && R(1).state == BRAID_RAIL_PROBING; k++) Deliver(1, 128 * kKiB, 40e6);
  Tick();
  EXPECT_EQ(BRAID_RAIL_ACTIVE, R(1).state);
  EXPECT_EQ(1, Count(BRAID_SCHED_PROBE_OK, 1));
  EXPECT_EQ(1, Count(BRAID_SCHED_RECOVERED, 1));
}

// A rail that earliest-finish passes over (its estimate went stale while it was slow) is probed
// again after probe_interval_max_ns, so it is used once it has recovered.
TEST_F(Sched, PassedOverActiveRailIsProbed) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  Deliver(1, 1 << 20, 10e6);  // slow, but not slow enough to be demoted
  ASSERT_EQ(BRAID_RAIL_ACTIVE, R(1).state);
  braid_sched_sent(&s, 0, 256 * kKiB, now);  // rail 0 busy
  EXPECT_FALSE(braid_sched_probe_due(&s, 1, now));
  now += p.probe_interval_max_ns;
  braid_sched_acked(&s, 0, 256 * kKiB, 0, now);
  braid_sched_sent(&s, 0, 256 * kKiB, now);
  EXPECT_TRUE(braid_sched_probe_due(&s, 1, now));
  EXPECT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 4 << 20, now));
  Deliver(1, 16 * kKiB, 40e6);  // one small probe, far less than a sample window of busy time
  EXPECT_GT(R(1).est_Bps, 30e6) << "a stale estimate is replaced by the probe's sample";
  EXPECT_FALSE(braid_sched_probe_due(&s, 1, now));
}

// A borrowed NIC carries nothing while its device's own rail is up, everything while it is down.
TEST_F(Sched, BackupRailOnlyWhilePrimaryIsDown) {
  Init(2);
  braid_sched_set_backup(&s, 1, true);
  for (int k = 0; k < 4; k++) {
    EXPECT_EQ(0, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
    Deliver(0, 128 * kKiB, 40e6);
  }
  EXPECT_EQ(0u, R(1).bytes_acked) << "the backup stands by";
  braid_sched_failed(&s, 0, now);
  EXPECT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now)) << "primary down: backup carries";
  Deliver(1, 128 * kKiB, 20e6);
  braid_sched_restored(&s, 0, now);
  EXPECT_EQ(0, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now)) << "primary back: backup stands by";
  EXPECT_TRUE(R(1).standby);
}

TEST_F(Sched, FailureForgetsInflightAndRestoreProbes) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  Deliver(1, 1 << 20, 40e6);
  braid_sched_sent(&s, 1, 256 * kKiB, now);
  braid_sched_failed(&s, 1, now);
  braid_sched_failed(&s, 1, now); // once only
  EXPECT_EQ(BRAID_RAIL_DOWN, R(1).state);
  EXPECT_EQ(0u, R(1).inflight);
  braid_sched_acked(&s, 1, 256 * kKiB, 0, now); // a straggling ack: ignored
  EXPECT_EQ(0u, R(1).bytes_acked - (1u << 20));
  for (int k = 0; k < 4; k++) {
    int r = braid_sched_pick(&s, 128 * kKiB, 1 << 20, now);
    EXPECT_EQ(0, r);
    braid_sched_sent(&s, 0, 128 * kKiB, now);
  }
  braid_sched_restored(&s, 1, now);
  EXPECT_EQ(BRAID_RAIL_PROBING, R(1).state);
  EXPECT_FALSE(R(1).measured);
  EXPECT_GE(R(1).est_Bps, R(0).est_Bps) << "optimistic, so it is probed at once";
  EXPECT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
  EXPECT_EQ(p.probe_inflight, braid_sched_cap(&s, 1));
  for (int k = 0; k < 20 && R(1).state == BRAID_RAIL_PROBING; k++) Deliver(1, 128 * kKiB, 40e6);
  EXPECT_EQ(BRAID_RAIL_ACTIVE, R(1).state);
  Tick();
  std::vector<braid_sched_reason> seen;
  for (const auto &e : events) seen.push_back(e.reason);
  EXPECT_EQ((std::vector<braid_sched_reason>{BRAID_SCHED_FAILED, BRAID_SCHED_RESTORED,
                                             BRAID_SCHED_RECOVERED}),
            seen);
}

TEST_F(Sched, LastRailStandingCarriesAndAllDownIsReported) {
  Init(2);
  Deliver(0, 1 << 20, 40e6);
  for (int k = 0; k < 3; k++) Deliver(1, 1 << 20, 4e6);
  Tick();
  now += p.demote_after_ns;
  Tick();
  ASSERT_EQ(BRAID_RAIL_DEGRADED, R(1).state);
  braid_sched_failed(&s, 0, now);
  EXPECT_EQ(BRAID_RAIL_ACTIVE, R(1).state) << "slow beats nothing";
  Tick();
  EXPECT_EQ(1, Count(BRAID_SCHED_LAST_LEFT, 1));
  EXPECT_EQ(1, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
  braid_sched_failed(&s, 1, now);
  EXPECT_EQ(BRAID_SCHED_ALL_DOWN, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
  braid_sched_restored(&s, 0, now);
  EXPECT_EQ(0, braid_sched_pick(&s, 128 * kKiB, 1 << 20, now));
}

TEST_F(Sched, ReconnectAdviceBacksOffAndForgets) {
  Init(2);
  std::vector<uint64_t> waits;
  for (int k = 0; k < 10; k++) {
    braid_sched_failed(&s, 1, now);
    waits.push_back(braid_sched_retry_at(&s, 1) - now);
    braid_sched_restored(&s, 1, now);
  }
  EXPECT_EQ(p.retry_base_ns, waits[0]);
  EXPECT_EQ(2 * p.retry_base_ns, waits[1]);
  EXPECT_EQ(4 * p.retry_base_ns, waits[2]);
  EXPECT_EQ(p.retry_max_ns, waits[9]);
  EXPECT_EQ(0u, braid_sched_retry_at(&s, 1)) << "only DOWN rails reconnect";
  Deliver(1, 1 << 20, 40e6);
  while (R(1).state != BRAID_RAIL_ACTIVE) Deliver(1, 128 * kKiB, 40e6);
  now += p.error_forget_ns;
  Tick();
  EXPECT_EQ(0u, R(1).recent_errors);
  EXPECT_EQ(10u, R(1).errors);
}

TEST_F(Sched, EventRingKeepsTheNewest) {
  Init(2);
  for (int k = 0; k < 40; k++) { // 80 events, ring of 64
    braid_sched_failed(&s, 1, now + k);
    braid_sched_restored(&s, 1, now + k);
  }
  EXPECT_EQ(16u, s.ev_lost);
  braid_sched_event ev[10];
  ASSERT_EQ(10, braid_sched_tick(&s, now + 100, ev, 10));
  EXPECT_EQ(now + 8, ev[0].at_ns); // oldest kept: the 17th event
  EXPECT_EQ(54, Tick());
  EXPECT_EQ(BRAID_SCHED_RESTORED, events.back().reason);
  EXPECT_EQ(now + 39, events.back().at_ns);
}

TEST_F(Sched, WithdrawnBytesLeaveInflightWithoutCountingAsDelivered) {
  Init(1);
  Deliver(0, 1 << 20, 40e6);
  braid_sched_sent(&s, 0, 128 * kKiB, now);
  uint64_t sent = now;
  braid_sched_sent(&s, 0, 128 * kKiB, now);
  now += (uint64_t)(128 * kKiB * 1e9 / 40e6);
  braid_sched_acked(&s, 0, 128 * kKiB, sent, now);
  braid_sched_withdrawn(&s, 0, 128 * kKiB, now);
  EXPECT_EQ(0u, R(0).inflight);
  EXPECT_EQ((1u << 20) + 128 * kKiB, R(0).bytes_acked);
  EXPECT_NEAR(40e6, R(0).est_Bps, 0.01 * 40e6);
  EXPECT_FALSE(braid_sched_stalled(&s, 0, now + 10 * kSec)) << "nothing left in flight";
}

TEST_F(Sched, AcksNeverDriveInflightNegative) {
  Init(1);
  braid_sched_sent(&s, 0, 1000, now);
  braid_sched_acked(&s, 0, 5000, now, now + kMs);
  EXPECT_EQ(0u, R(0).inflight);
  EXPECT_EQ(1000u, R(0).bytes_acked);
  braid_sched_acked(&s, 7, 100, 0, now); // bad rail: ignored
  braid_sched_sent(&s, -1, 100, now);
  EXPECT_EQ(0u, R(0).inflight);
}

// ---------------------------------------------------------------------------------------------
// Simulated rails

// A scenario: railsim's configuration (rs_config_default's values) and the message sizes and
// actions it points to, set when it runs.
struct Config : rs_config {
  std::vector<size_t> sizes;
  std::vector<rs_action> acts;
  Config() : rs_config() { rs_config_default(this); }
};

// railsim's result for a scenario, freed with it.
struct Result : rs_result {
  explicit Result(Config &c) : rs_result() {
    c.msgs = c.sizes.data(), c.nmsgs = c.sizes.size();
    c.actions = c.acts.data(), c.nactions = c.acts.size();
    EXPECT_EQ(0, rs_simulate(&c, this)) << "railsim refused the scenario";
  }
  ~Result() { rs_result_free(this); }
  Result(const Result &) = delete;
  Result &operator=(const Result &) = delete;

  double Bps(uint64_t t0, uint64_t t1, int rail = -1) const { return rs_Bps(this, t0, t1, rail); }
  double Share(int rail, uint64_t t0, uint64_t t1) const { return rs_share(this, rail, t0, t1); }
  uint64_t First(braid_sched_reason why, int rail, uint64_t after = 0) const {
    return rs_first(this, why, rail, after);
  }
  int Count(braid_sched_reason why, int rail = -1) const { return rs_count(this, why, rail); }
};

Config Stream(std::vector<double> ratios, size_t nmsgs, size_t size = 512 * kKiB) {
  Config c;
  c.nrails = (int)ratios.size();
  for (size_t i = 0; i < ratios.size(); i++) c.rate_Bps[i] = ratios[i] * kRate;
  c.sizes.assign(nmsgs, size);
  return c;
}

// The end of the steady part of a run: the last bins hold the drain of the final messages.
uint64_t SteadyEnd(const Result &r) { return rs_steady_end(&r); }

void ExpectIntact(const Result &r) {
  EXPECT_TRUE(r.complete) << "transfer did not finish";
  EXPECT_EQ(0u, r.lost_chunks);
  EXPECT_EQ(r.total_bytes, r.accepted_bytes) << "every byte accepted exactly once";
  EXPECT_EQ(0u, r.split_small);
  EXPECT_EQ(0u, r.inflight_mismatch) << "scheduler and transport disagree on bytes in flight";
}

// Bytes the rails could have carried over [0, t): rates integrated, none while failed or
// black-holed.  The yardstick for runs whose capacity changes.
double CapacityBytes(const Config &c, uint64_t t) {
  std::vector<rs_action> acts = c.acts;
  std::stable_sort(acts.begin(), acts.end(), [](const rs_action &a, const rs_action &b) { return a.at_ns < b.at_ns; });
  double sum = 0;
  for (int r = 0; r < c.nrails; r++) {
    double rate = c.rate_Bps[r];
    bool up = true;
    uint64_t from = 0;
    for (const rs_action &a : acts) {
      if (a.rail != r || a.at_ns >= t) continue;
      sum += (up ? rate : 0) * (double)(a.at_ns - from) / 1e9;
      from = a.at_ns;
      if (a.kind == RS_RATE) rate = a.rate_Bps;
      up = a.kind == RS_RATE ? up : a.kind == RS_RECOVER;
    }
    sum += (up ? rate : 0) * (double)(t - from) / 1e9;
  }
  return sum;
}

void Figure(const char *what, double value, const char *unit) {
  printf("[  figure  ] %-58s %9.3f %s\n", what, value, unit);
  ::testing::Test::RecordProperty(what, std::to_string(value));
}

TEST(SchedSim, EqualRailsReachTheirSum) {
  Config c = Stream({1, 1, 1, 1}, 300);
  Result r(c);
  ExpectIntact(r);
  double bps = r.Bps(100 * kMs, SteadyEnd(r));
  Figure("4 equal rails: throughput / sum of rails", bps / (4 * kRate), "");
  EXPECT_GE(bps, 0.95 * 4 * kRate);
  for (int i = 0; i < 4; i++) EXPECT_NEAR(0.25, r.Share(i, 100 * kMs, SteadyEnd(r)), 0.01);
  EXPECT_EQ(0u, r.nevents) << "healthy rails: nothing to report";
  EXPECT_EQ(0u, r.hedged_chunks + r.dup_chunks);
}

TEST(SchedSim, VerySlowRailIsDemotedAndCostsLittle) {
  Config c = Stream({1, 1, 1, 0.1}, 250);
  Result r(c);
  ExpectIntact(r);
  double bps = r.Bps(200 * kMs, SteadyEnd(r));
  Figure("1:1:1:0.1: throughput / three fast rails", bps / (3 * kRate), "");
  EXPECT_GE(bps, 0.90 * 3 * kRate);
  uint64_t slow = r.First(BRAID_SCHED_SLOW, 3);
  Figure("1:1:1:0.1: slow rail demoted at", (double)slow / 1e6, "ms");
  EXPECT_LT(slow, 300 * kMs);
  EXPECT_EQ(BRAID_RAIL_DEGRADED, r.final_rails[3].state);
  EXPECT_NEAR(0.1 * kRate, r.final_rails[3].est_Bps, 0.01 * kRate);

  Config eq = Stream({1, 1, 1, 0.1}, 60);
  eq.equal_striping = true;
  Result e(eq);
  ExpectIntact(e);
  double ebps = e.Bps(100 * kMs, SteadyEnd(e));
  Figure("1:1:1:0.1: equal striping / (4 x slow rail)", ebps / (4 * 0.1 * kRate), "");
  EXPECT_LT(ebps, 1.05 * 4 * 0.1 * kRate) << "equal striping is capped by the slow rail";
  EXPECT_GT(bps, 6 * ebps);
}

TEST(SchedSim, HalfRateRailCarriesHalfAsMuch) {
  Config c = Stream({1, 1, 1, 0.5}, 250);
  Result r(c);
  ExpectIntact(r);
  uint64_t t1 = SteadyEnd(r);
  double bps = r.Bps(100 * kMs, t1);
  Figure("1:1:1:0.5: throughput / sum of rails", bps / (3.5 * kRate), "");
  Figure("1:1:1:0.5: half-rate rail's share (ideal 0.143)", r.Share(3, 100 * kMs, t1), "");
  EXPECT_GE(bps, 0.95 * 3.5 * kRate);
  EXPECT_NEAR(0.5 / 3.5, r.Share(3, 100 * kMs, t1), 0.015);
  EXPECT_EQ(BRAID_RAIL_ACTIVE, r.final_rails[3].state) << "half as fast is not 'far slower'";
}

TEST(SchedSim, ShareFollowsARailThatSlowsMidMessage) {
  Config c = Stream({1, 1, 1, 1}, 300);
  c.acts.push_back({400 * kMs, 0, RS_RATE, 0.5 * kRate});
  Result r(c);
  ExpectIntact(r);
  Figure("rail 0 at half rate from 400 ms: share in 400..450 ms", r.Share(0, 400 * kMs, 450 * kMs), "");
  Figure("rail 0 at half rate from 400 ms: share after 450 ms", r.Share(0, 450 * kMs, SteadyEnd(r)), "");
  EXPECT_NEAR(0.25, r.Share(0, 100 * kMs, 400 * kMs), 0.01);
  EXPECT_NEAR(0.5 / 3.5, r.Share(0, 400 * kMs, 450 * kMs), 0.03);
  EXPECT_NEAR(0.5 / 3.5, r.Share(0, 450 * kMs, SteadyEnd(r)), 0.01);
  EXPECT_GE(r.Bps(450 * kMs, SteadyEnd(r)), 0.95 * 3.5 * kRate);
  EXPECT_EQ(0, r.Count(BRAID_SCHED_STALLED)) << "slow is not dead";
  EXPECT_EQ(0, r.Count(BRAID_SCHED_SLOW));
}

TEST(SchedSim, RailThatCrawlsIsDemotedNotDeclaredDead) {
  Config c = Stream({1, 1, 1, 1}, 300);
  c.acts.push_back({400 * kMs, 0, RS_RATE, 0.02 * kRate}); // 50x slower
  Result r(c);
  ExpectIntact(r);
  uint64_t slow = r.First(BRAID_SCHED_SLOW, 0);
  Figure("rail 0 at 1/50 from 400 ms: demoted after", (double)(slow - 400 * kMs) / 1e6, "ms");
  Figure("rail 0 at 1/50: throughput 400..700 ms / three rails", r.Bps(400 * kMs, 700 * kMs) / (3 * kRate), "");
  EXPECT_LT(slow, 800 * kMs);
  EXPECT_EQ(0, r.Count(BRAID_SCHED_STALLED));
  EXPECT_GT(r.hedged_chunks, 0u) << "its stuck chunks were re-sent on the others";
  EXPECT_GE(r.Bps(400 * kMs, 700 * kMs), 0.85 * 3 * kRate);
  EXPECT_GE(r.Bps(700 * kMs, SteadyEnd(r)), 0.95 * 3 * kRate);
}

TEST(SchedSim, UnsentCopiesOfACrawlingRailAreWithdrawn) {
  Config c = Stream({1, 1, 1, 1}, 300);
  c.acts.push_back({400 * kMs, 0, RS_RATE, 0.02 * kRate});
  c.withdraw_unsent = true; // a transport with its own per-rail send queue
  Result r(c);
  ExpectIntact(r);
  Figure("rail 0 at 1/50, queued copies withdrawn", (double)r.withdrawn_chunks, "chunks");
  EXPECT_GT(r.withdrawn_chunks, 0u);
  EXPECT_LT(r.dup_chunks, r.hedged_chunks) << "withdrawn copies never reach the receiver";
  EXPECT_GE(r.Bps(400 * kMs, 700 * kMs), 0.85 * 3 * kRate);
}

TEST(SchedSim, FailedRailLosesNothingAndIsReadmitted) {
  Config c = Stream({1, 1, 1, 1}, 350);
  c.acts.push_back({300 * kMs, 1, RS_FAIL, 0});
  c.acts.push_back({800 * kMs, 1, RS_RECOVER, 0});
  Result r(c);
  ExpectIntact(r);
  EXPECT_GT(r.resent_chunks, 0u);
  EXPECT_LE(r.First(BRAID_SCHED_FAILED, 1), 300 * kMs + c.fail_detect_ns + c.tick_ns);
  double during = r.Bps(310 * kMs, 800 * kMs);
  Figure("rail 1 failed 300..800 ms: throughput / three survivors", during / (3 * kRate), "");
  EXPECT_GE(during, 0.90 * 3 * kRate);
  uint64_t back = r.First(BRAID_SCHED_RECOVERED, 1, 800 * kMs);
  Figure("rail 1 recovered at 800 ms: re-admitted after", (double)(back - 800 * kMs) / 1e6, "ms");
  EXPECT_LT(back, 1000 * kMs);
  EXPECT_GE(r.Bps(back + 50 * kMs, SteadyEnd(r)), 0.95 * 4 * kRate);
  EXPECT_EQ(BRAID_RAIL_ACTIVE, r.final_rails[1].state);
}

TEST(SchedSim, BlackHoledRailIsDetectedAndItsChunksResent) {
  Config c = Stream({1, 1, 1, 1}, 400);
  c.acts.push_back({300 * kMs, 2, RS_BLACKHOLE, 0});
  c.acts.push_back({1200 * kMs, 2, RS_RECOVER, 0}); // then delivers what it held: duplicates
  Result r(c);
  ExpectIntact(r);
  uint64_t late = r.First(BRAID_SCHED_LATE, 2), stalled = r.First(BRAID_SCHED_STALLED, 2);
  Figure("rail 2 black-holed at 300 ms: LATE (hedge) after", (double)(late - 300 * kMs) / 1e6, "ms");
  Figure("rail 2 black-holed at 300 ms: STALLED after", (double)(stalled - 300 * kMs) / 1e6, "ms");
  Figure("rail 2 black-holed: throughput 300..1200 ms / three rails", r.Bps(300 * kMs, 1200 * kMs) / (3 * kRate), "");
  Figure("rail 2 black-holed: late duplicates discarded", (double)r.dup_chunks, "chunks");
  EXPECT_LT(late, 400 * kMs);
  EXPECT_LT(stalled, 1300 * kMs) << "a dead rail is found within about a second";
  EXPECT_EQ(r.First(BRAID_SCHED_FAILED, 2), stalled) << "the transport failed it on STALLED";
  EXPECT_GE(r.Bps(350 * kMs, 1200 * kMs), 0.90 * 3 * kRate);
  EXPECT_GT(r.dup_chunks, 0u);
  EXPECT_LT(r.First(BRAID_SCHED_RECOVERED, 2, 1200 * kMs), 1500 * kMs);

  c.hedge = false; // the same without acting on LATE: resent only once declared dead
  Result n(c);
  ExpectIntact(n);
  EXPECT_GT(n.resent_chunks, 0u);
  Figure("  same without hedging: throughput 300..1200 ms / three rails", n.Bps(300 * kMs, 1200 * kMs) / (3 * kRate), "");
  EXPECT_LT(n.Bps(300 * kMs, 1200 * kMs), r.Bps(300 * kMs, 1200 * kMs));
}

TEST(SchedSim, AllRailsDownThenOneReturns) {
  Config c = Stream({1, 1, 1, 1}, 150);
  for (int i = 0; i < 4; i++) c.acts.push_back({200 * kMs, i, RS_FAIL, 0});
  c.acts.push_back({500 * kMs, 0, RS_RECOVER, 0});
  Result r(c);
  ExpectIntact(r);
  EXPECT_TRUE(r.all_down_seen) << "the transport is told when no path is left";
  EXPECT_EQ(0.0, r.Bps(210 * kMs, 500 * kMs));
  EXPECT_GE(r.Bps(550 * kMs, SteadyEnd(r)), 0.95 * kRate);
}

TEST(SchedSim, LightLoadDoesNotLookSlow) {
  Config c = Stream({1, 1, 1, 1}, 400, 64 * kKiB);
  c.slots = 1; // one small message at a time: every rail mostly idle
  Result r(c);
  ExpectIntact(r);
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ(BRAID_RAIL_ACTIVE, r.final_rails[i].state);
    EXPECT_GT(r.final_rails[i].est_Bps, 0.9 * kRate) << "rail " << i;
    EXPECT_GT(r.sent_bytes[i], 80 * 64 * kKiB) << "rail " << i << " starved";
  }
  EXPECT_EQ(0u, r.nevents);
}

Config Mixed(uint32_t seed) {
  static const size_t sizes[] = {0, 256, 4 * kKiB, 64 * kKiB, 128 * kKiB, 200 * kKiB, 512 * kKiB, 1 << 20, 4 << 20};
  static const int weight[] = {1, 10, 10, 8, 8, 4, 6, 2, 1};
  std::mt19937 rng(seed); // exact sequence fixed by the standard
  Config c = Stream({1, 0.8, 0.6, 1}, 0);
  c.chunk = 128 * kKiB;
  for (int m = 0; m < 5000; m++) {
    uint32_t x = rng() % 50;
    int k = 0;
    while (x >= (uint32_t)weight[k]) x -= weight[k++];
    c.sizes.push_back(sizes[k]);
  }
  c.acts = {{1 * kSec, 1, RS_RATE, 0.15 * kRate}, {2 * kSec, 3, RS_FAIL, 0},
            {3 * kSec, 3, RS_RECOVER, 0},         {4 * kSec, 0, RS_BLACKHOLE, 0},
            {5 * kSec, 0, RS_RECOVER, 0},         {5500 * kMs, 1, RS_RATE, kRate}};
  return c;
}

TEST(SchedSim, ThousandsOfMixedMessagesThroughTrouble) {
  Config c = Mixed(7);
  Result r(c);
  ExpectIntact(r);
  double eff = (double)r.total_bytes / CapacityBytes(c, r.finish_ns);
  Figure("5000 mixed messages: simulated seconds", (double)r.finish_ns / 1e9, "s");
  Figure("5000 mixed messages: bytes / what the rails could carry", eff, "");
  EXPECT_GT(eff, 0.85);
  Figure("5000 mixed messages: mean throughput", (double)r.total_bytes / ((double)r.finish_ns / 1e9) / 1e6, "MB/s");
  printf("[  figure  ] %-58s %lu / %lu / %lu\n", "5000 mixed messages: resent / hedged / duplicates", (unsigned long)r.resent_chunks,
         (unsigned long)r.hedged_chunks, (unsigned long)r.dup_chunks);
  EXPECT_EQ(1, r.Count(BRAID_SCHED_FAILED, 3));
  EXPECT_GE(r.Count(BRAID_SCHED_SLOW, 1), 1);
  EXPECT_GE(r.Count(BRAID_SCHED_STALLED, 0), 1);
  for (int i = 0; i < 4; i++) EXPECT_EQ(BRAID_RAIL_ACTIVE, r.final_rails[i].state) << "rail " << i;
}

// Random rates, failures, black holes and recoveries (everything healed at the end): whatever
// happens, every chunk is accepted exactly once and the books balance.
Config RandomTrouble(uint32_t seed, const size_t *sizes, size_t nsizes) {
  std::mt19937 rng(seed);
  Config c;
  c.nrails = 2 + (int)(rng() % 5);
  for (int i = 0; i < c.nrails; i++) c.rate_Bps[i] = kRate * (0.2 + (rng() % 100) / 100.0);
  for (int m = 0; m < 200; m++) c.sizes.push_back(sizes[rng() % nsizes]);
  for (int k = 0; k < 12; k++) {
    rs_act kind = (rs_act)(rng() % 4);
    c.acts.push_back({(rng() % 1500) * kMs, (int)(rng() % (uint32_t)c.nrails), kind, kRate * (0.02 + (rng() % 150) / 100.0)});
  }
  for (int i = 0; i < c.nrails; i++) c.acts.push_back({1600 * kMs, i, RS_RECOVER, 0});
  return c;
}

TEST(SchedSim, RandomTroubleNeverLosesAChunk) {
  static const size_t sizes[] = {100, 8 * kKiB, 128 * kKiB, 300 * kKiB, 512 * kKiB, 2 << 20};
  uint64_t dups = 0, resent = 0, hedged = 0;
  for (uint32_t seed = 1; seed <= 100; seed++) {
    Config c = RandomTrouble(seed, sizes, 6);
    Result r(c);
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExpectIntact(r);
    dups += r.dup_chunks, resent += r.resent_chunks, hedged += r.hedged_chunks;
  }
  printf("[  figure  ] %-58s %lu / %lu / %lu\n", "100 random runs: resent / hedged / duplicates discarded", (unsigned long)resent,
         (unsigned long)hedged, (unsigned long)dups);
  EXPECT_GT(resent, 0u);
  EXPECT_GT(dups, 0u);
}

// The same with empty messages among the sizes, and every third run withdrawing copies not yet
// sent once their chunk is done.
TEST(SchedSim, RandomTroubleWithWithdrawalsNeverLosesAChunk) {
  static const size_t sizes[] = {0, 100, 8 * kKiB, 128 * kKiB, 300 * kKiB, 512 * kKiB, 2 << 20};
  for (uint32_t seed = 1; seed <= 30; seed++) {
    Config c = RandomTrouble(seed, sizes, 7);
    c.withdraw_unsent = seed % 3 == 0;
    Result r(c);
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExpectIntact(r);
  }
}

TEST(SchedSim, SameInputsSamePicks) {
  Config ca = Mixed(7), cb = Mixed(7), cc = Mixed(8);
  Result a(ca), b(cb), c(cc);
  EXPECT_EQ(a.pick_hash, b.pick_hash);
  EXPECT_EQ(a.picks, b.picks);
  EXPECT_EQ(a.finish_ns, b.finish_ns);
  ASSERT_EQ(a.nevents, b.nevents);
  for (size_t i = 0; i < a.nevents; i++) EXPECT_EQ(0, memcmp(&a.events[i], &b.events[i], sizeof a.events[i]));
  EXPECT_NE(a.pick_hash, c.pick_hash);
}

TEST(SchedSim, BadConfigRefused) {
  rs_config k;
  rs_config_default(&k);
  rs_result r;
  k.nrails = 0;
  EXPECT_EQ(-1, rs_simulate(&k, &r));
  k.nrails = BRAID_SCHED_MAX_RAILS + 1;
  EXPECT_EQ(-1, rs_simulate(&k, &r));
  k.nrails = 2; // rates left at 0
  EXPECT_EQ(-1, rs_simulate(&k, &r));
}

} // namespace
