// braid-sim's rail simulator (tools/sim/railsim.c) against the plugin's unit-test simulator
// (test/unit/sched_sim.h): both drive braid's real scheduler, so the same scenario must give the
// same picks, the same scheduler events at the same times, the same bytes per rail and the same
// finish time.  Then the SchedSim scenarios' outcomes, asserted on braid-sim's side.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "sched_sim.h"

extern "C" {
#include "railsim.h"
}

namespace {

using namespace braid_sim;

constexpr size_t kKiB = 1024;
constexpr double kRate = 37.5e6; // 300 Mbit/s, as in sched_test.cc

Config Stream(std::vector<double> ratios, size_t nmsgs, size_t size = 512 * kKiB) {
  Config c;
  for (double x : ratios) c.rate_Bps.push_back(x * kRate);
  c.msgs.assign(nmsgs, size);
  return c;
}

// The same scenario in braid-sim's terms (vectors stay owned by `c`).
rs_config ToC(const Config &c, std::vector<rs_action> &acts) {
  rs_config k;
  rs_config_default(&k);
  k.nrails = (int)c.rate_Bps.size();
  for (int i = 0; i < k.nrails; i++) k.rate_Bps[i] = c.rate_Bps[i];
  k.prop_ns = c.prop_ns;
  k.chunk = c.chunk;
  k.slots = c.slots;
  k.msgs = c.msgs.data();
  k.nmsgs = c.msgs.size();
  static const rs_act kinds[] = {RS_RATE, RS_FAIL, RS_BLACKHOLE, RS_RECOVER};
  acts.clear();
  for (const Action &a : c.actions) acts.push_back(rs_action{a.at_ns, a.rail, kinds[(int)a.kind], a.rate_Bps});
  k.actions = acts.data();
  k.nactions = acts.size();
  k.tick_ns = c.tick_ns;
  k.fail_detect_ns = c.fail_detect_ns;
  k.end_ns = c.end_ns;
  k.bin_ns = c.bin_ns;
  k.equal_striping = c.equal_striping;
  k.rr_cap = c.rr_cap;
  k.nominal_Bps = c.nominal_Bps.empty() ? nullptr : c.nominal_Bps.data();
  k.hedge = c.hedge;
  k.withdraw_unsent = c.withdraw_unsent;
  k.params = c.params;
  return k;
}

// Runs both and asserts they agree on everything observable; returns braid-sim's result.
rs_result Both(const Config &c) {
  std::vector<rs_action> acts;
  rs_config k = ToC(c, acts);
  rs_result r;
  EXPECT_EQ(0, rs_simulate(&k, &r));
  Result u = Simulate(c);
  EXPECT_EQ(u.complete, r.complete);
  EXPECT_EQ(u.all_down_seen, r.all_down_seen);
  EXPECT_EQ(u.finish_ns, r.finish_ns);
  EXPECT_EQ(u.picks, r.picks);
  EXPECT_EQ(u.pick_hash, r.pick_hash) << "a different rail for some chunk";
  EXPECT_EQ(u.dup_chunks, r.dup_chunks);
  EXPECT_EQ(u.lost_chunks, r.lost_chunks);
  EXPECT_EQ(u.resent_chunks, r.resent_chunks);
  EXPECT_EQ(u.hedged_chunks, r.hedged_chunks);
  EXPECT_EQ(u.withdrawn_chunks, r.withdrawn_chunks);
  EXPECT_EQ(u.accepted_bytes, r.accepted_bytes);
  EXPECT_EQ(u.total_bytes, r.total_bytes);
  EXPECT_EQ(u.bins.size(), r.nbins);
  for (size_t b = 0; b < u.bins.size() && b < r.nbins; b++)
    for (int i = 0; i < r.nrails; i++) EXPECT_EQ(u.bins[b][i], r.bins[b * r.nrails + i]) << "bin " << b;
  EXPECT_EQ(u.events.size(), r.nevents);
  for (size_t i = 0; i < u.events.size() && i < r.nevents; i++)
    EXPECT_EQ(0, memcmp(&u.events[i], &r.events[i], sizeof r.events[i])) << "event " << i;
  for (int i = 0; i < r.nrails; i++) {
    EXPECT_EQ(u.sent_bytes[i], r.sent_bytes[i]);
    EXPECT_EQ(u.final_rails[i].state, r.final_rails[i].state);
    EXPECT_EQ(u.final_rails[i].est_Bps, r.final_rails[i].est_Bps);
  }
  return r;
}

void ExpectIntact(const rs_result &r) {
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(0u, r.lost_chunks);
  EXPECT_EQ(r.total_bytes, r.accepted_bytes);
  EXPECT_EQ(0u, r.split_small);
  EXPECT_EQ(0u, r.inflight_mismatch);
}

TEST(SimRails, EqualRailsReachTheirSum) {
  rs_result r = Both(Stream({1, 1, 1, 1}, 300));
  ExpectIntact(r);
  uint64_t t1 = rs_steady_end(&r);
  EXPECT_GE(rs_Bps(&r, 100 * RS_MS, t1, -1), 0.95 * 4 * kRate);
  for (int i = 0; i < 4; i++) EXPECT_NEAR(0.25, rs_share(&r, i, 100 * RS_MS, t1), 0.01);
  EXPECT_EQ(0u, r.nevents);
  rs_result_free(&r);
}

TEST(SimRails, VerySlowRailIsDemotedAndCostsLittle) {
  rs_result r = Both(Stream({1, 1, 1, 0.1}, 250));
  ExpectIntact(r);
  double bps = rs_Bps(&r, 200 * RS_MS, rs_steady_end(&r), -1);
  EXPECT_GE(bps, 0.90 * 3 * kRate);
  EXPECT_LT(rs_first(&r, BRAID_SCHED_SLOW, 3, 0), 300 * RS_MS);
  EXPECT_EQ(BRAID_RAIL_DEGRADED, r.final_rails[3].state);
  Config eq = Stream({1, 1, 1, 0.1}, 60);
  eq.equal_striping = true;
  rs_result e = Both(eq);
  ExpectIntact(e);
  EXPECT_GT(bps, 6 * rs_Bps(&e, 100 * RS_MS, rs_steady_end(&e), -1));
  rs_result_free(&r);
  rs_result_free(&e);
}

TEST(SimRails, HalfRateRailCarriesHalfAsMuch) {
  rs_result r = Both(Stream({1, 1, 1, 0.5}, 250));
  ExpectIntact(r);
  EXPECT_NEAR(0.5 / 3.5, rs_share(&r, 3, 100 * RS_MS, rs_steady_end(&r)), 0.015);
  EXPECT_EQ(BRAID_RAIL_ACTIVE, r.final_rails[3].state);
  rs_result_free(&r);
}

TEST(SimRails, ShareFollowsARailThatSlowsMidMessage) {
  Config c = Stream({1, 1, 1, 1}, 300);
  c.actions.push_back({400 * kMs, 0, Act::Rate, 0.5 * kRate});
  rs_result r = Both(c);
  ExpectIntact(r);
  EXPECT_NEAR(0.5 / 3.5, rs_share(&r, 0, 450 * RS_MS, rs_steady_end(&r)), 0.01);
  EXPECT_EQ(0, rs_count(&r, BRAID_SCHED_STALLED, -1));
  rs_result_free(&r);
}

TEST(SimRails, RailThatCrawlsIsDemotedNotDeclaredDead) {
  Config c = Stream({1, 1, 1, 1}, 300);
  c.actions.push_back({400 * kMs, 0, Act::Rate, 0.02 * kRate});
  rs_result r = Both(c);
  ExpectIntact(r);
  EXPECT_LT(rs_first(&r, BRAID_SCHED_SLOW, 0, 0), 800 * RS_MS);
  EXPECT_EQ(0, rs_count(&r, BRAID_SCHED_STALLED, -1));
  EXPECT_GT(r.hedged_chunks, 0u);
  rs_result_free(&r);
  c.withdraw_unsent = true;
  r = Both(c);
  ExpectIntact(r);
  EXPECT_GT(r.withdrawn_chunks, 0u);
  rs_result_free(&r);
}

TEST(SimRails, FailedRailLosesNothingAndIsReadmitted) {
  Config c = Stream({1, 1, 1, 1}, 350);
  c.actions.push_back({300 * kMs, 1, Act::Fail, 0});
  c.actions.push_back({800 * kMs, 1, Act::Recover, 0});
  rs_result r = Both(c);
  ExpectIntact(r);
  EXPECT_GT(r.resent_chunks, 0u);
  EXPECT_GE(rs_Bps(&r, 310 * RS_MS, 800 * RS_MS, -1), 0.90 * 3 * kRate);
  EXPECT_LT(rs_first(&r, BRAID_SCHED_RECOVERED, 1, 800 * RS_MS), 1000 * RS_MS);
  EXPECT_EQ(BRAID_RAIL_ACTIVE, r.final_rails[1].state);
  rs_result_free(&r);
}

TEST(SimRails, BlackHoledRailIsDetectedAndItsChunksResent) {
  Config c = Stream({1, 1, 1, 1}, 400);
  c.actions.push_back({300 * kMs, 2, Act::BlackHole, 0});
  c.actions.push_back({1200 * kMs, 2, Act::Recover, 0});
  rs_result r = Both(c);
  ExpectIntact(r);
  EXPECT_LT(rs_first(&r, BRAID_SCHED_LATE, 2, 0), 400 * RS_MS);
  EXPECT_EQ(rs_first(&r, BRAID_SCHED_FAILED, 2, 0), rs_first(&r, BRAID_SCHED_STALLED, 2, 0));
  EXPECT_GT(r.dup_chunks, 0u);
  rs_result_free(&r);
  c.hedge = false;
  r = Both(c);
  ExpectIntact(r);
  rs_result_free(&r);
}

TEST(SimRails, AllRailsDownThenOneReturns) {
  Config c = Stream({1, 1, 1, 1}, 150);
  for (int i = 0; i < 4; i++) c.actions.push_back({200 * kMs, i, Act::Fail, 0});
  c.actions.push_back({500 * kMs, 0, Act::Recover, 0});
  rs_result r = Both(c);
  ExpectIntact(r);
  EXPECT_TRUE(r.all_down_seen);
  EXPECT_EQ(0.0, rs_Bps(&r, 210 * RS_MS, 500 * RS_MS, -1));
  rs_result_free(&r);
}

TEST(SimRails, LightLoadDoesNotLookSlow) {
  Config c = Stream({1, 1, 1, 1}, 400, 64 * kKiB);
  c.slots = 1;
  rs_result r = Both(c);
  ExpectIntact(r);
  EXPECT_EQ(0u, r.nevents);
  rs_result_free(&r);
}

// Random trouble and mixed sizes: the two simulators must still agree pick for pick.
TEST(SimRails, RandomTroubleSamePicks) {
  static const size_t sizes[] = {0, 100, 8 * kKiB, 128 * kKiB, 300 * kKiB, 512 * kKiB, 2 << 20};
  for (uint32_t seed = 1; seed <= 30; seed++) {
    std::mt19937 rng(seed);
    Config c;
    int n = 2 + (int)(rng() % 5);
    for (int i = 0; i < n; i++) c.rate_Bps.push_back(kRate * (0.2 + (rng() % 100) / 100.0));
    for (int m = 0; m < 200; m++) c.msgs.push_back(sizes[rng() % 7]);
    for (int k = 0; k < 12; k++) {
      Act kind = (Act)(rng() % 4);
      c.actions.push_back({(rng() % 1500) * kMs, (int)(rng() % (uint32_t)n), kind, kRate * (0.02 + (rng() % 150) / 100.0)});
    }
    for (int i = 0; i < n; i++) c.actions.push_back({1600 * kMs, i, Act::Recover, 0});
    c.withdraw_unsent = seed % 3 == 0;
    SCOPED_TRACE("seed " + std::to_string(seed));
    rs_result r = Both(c);
    ExpectIntact(r);
    rs_result_free(&r);
  }
}

TEST(SimRails, BadConfigRefused) {
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
