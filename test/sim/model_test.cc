// braid-sim's model against closed forms: max-min fair sharing, the ring's
// 2(n-1)/n M/B + latency terms, CollNet-PS's M/B with enough servers (and its server bound with
// too few), braid's striping over healthy and faulty rails.  Each within 2% unless said.
#include <gtest/gtest.h>

#include <cmath>

extern "C" {
#include "cfg.h"
#include "cluster.h"
#include "coll.h"
#include "flow.h"
}

namespace {

TEST(SimFlow, MaxMinFairTextbook) {
  // Link 0 (10) carries f0 and f1; link 1 (4) carries f1 and f2: f1 and f2 get 2 each on link 1,
  // f0 takes what link 0 has left, 8.
  double cap[] = {10, 4};
  flow f[3] = {};
  f[0].npath = 1, f[0].path[0] = 0, f[0].mult = 1;
  f[1].npath = 2, f[1].path[0] = 0, f[1].path[1] = 1, f[1].mult = 1;
  f[2].npath = 1, f[2].path[0] = 1, f[2].mult = 1;
  ASSERT_EQ(0, flow_maxmin(2, cap, f, 3));
  EXPECT_NEAR(8, f[0].rate, 1e-9);
  EXPECT_NEAR(2, f[1].rate, 1e-9);
  EXPECT_NEAR(2, f[2].rate, 1e-9);
  // A class of 3 identical flows and a single one on a link of 8: 2 each.
  double cap2[] = {8};
  flow g[2] = {};
  g[0].npath = 1, g[0].mult = 3;
  g[1].npath = 1, g[1].mult = 1;
  ASSERT_EQ(0, flow_maxmin(1, cap2, g, 2));
  EXPECT_NEAR(2, g[0].rate, 1e-9);
  EXPECT_NEAR(2, g[1].rate, 1e-9);
  // A dead link: its flow gets nothing and never finishes.
  double cap3[] = {0};
  flow h[1] = {};
  h[0].npath = 1, h[0].mult = 1, h[0].bytes = 1;
  EXPECT_TRUE(std::isinf(flow_run(1, cap3, h, 1)));
}

TEST(SimFlow, RunRecomputesRatesAsFlowsFinish) {
  double cap[] = {10};
  flow f[2] = {};
  f[0].npath = 1, f[0].mult = 1, f[0].bytes = 10; // 5/s until done at 2 s
  f[1].npath = 1, f[1].mult = 1, f[1].bytes = 30; // then 10/s for the last 20
  EXPECT_NEAR(4.0, flow_run(1, cap, f, 2), 1e-9);
  EXPECT_NEAR(2.0, f[0].done_s, 1e-9);
  EXPECT_NEAR(4.0, f[1].done_s, 1e-9);
}

TEST(SimRing, RecurrenceIsTheClosedForm) {
  const int n = 64;
  std::vector<double> rate(n, 25e9), lat(n, 5e-6);
  double M = 64.0 * (1 << 20), steps;
  // One loop (chunk >= M/n): 2(n-1) steps of M/n, each after the previous one arrived.
  double t = ring_recurrence(n, rate.data(), lat.data(), M, 4 << 20, &steps);
  double closed = 2.0 * (n - 1) / n * M / 25e9 + 2.0 * (n - 1) * 5e-6;
  EXPECT_NEAR(closed, t, 0.02 * closed);
  EXPECT_EQ(2.0 * (n - 1) * n, steps);
  // Many loops of 256 KiB chunks: the bandwidth term, plus the latency chain once per loop.
  double loops = std::ceil(M / (n * 256.0 * 1024));
  t = ring_recurrence(n, rate.data(), lat.data(), M, 256 * 1024, &steps);
  closed = 2.0 * (n - 1) / n * M / 25e9 + loops * 2.0 * (n - 1) * 5e-6;
  EXPECT_NEAR(closed, t, 0.02 * closed);
  // One hop at half rate: the ring goes at its slowest hop.
  rate[17] = 12.5e9;
  std::fill(lat.begin(), lat.end(), 0.0);
  t = ring_recurrence(n, rate.data(), lat.data(), M, 4 << 20, &steps);
  closed = 2.0 * (n - 1) / n * M / 12.5e9;
  EXPECT_NEAR(closed, t, 0.02 * closed);
}

sim_cfg Small(int nodes, int gpus, int rails) {
  sim_cfg c;
  sim_cfg_default(&c);
  c.nodes = nodes, c.gpus = gpus, c.rails = rails;
  c.channels_per_rail = 1;
  c.tiers = 1;
  c.msg_mib = 256;
  c.braid_warmup_ms = 200;
  c.braid_measure_ms = 50;
  c.sweep = 0;
  return c;
}

struct Net {
  cluster cl;
  stripe_cache *cache;
  Net(const sim_cfg &c, scenario sc) : cache(stripe_cache_new()) { EXPECT_EQ(0, cluster_build(&cl, &c, c.nodes, sc, cache)); }
  ~Net() {
    cluster_free(&cl);
    stripe_cache_free(cache);
  }
  coll_result Go(algo a, bool braid) {
    coll_result r{};
    EXPECT_EQ(0, coll_run(&cl, a, braid, &r));
    return r;
  }
};

TEST(SimRing, ClusterRingIsTheClosedForm) {
  sim_cfg c = Small(32, 1, 1); // one GPU, one NIC per node: every hop a network hop
  Net run(c, SC_HEALTHY);
  coll_result r = run.Go(ALGO_RING, false);
  double n = 32, M = c.msg_mib * (1 << 20), B = c.nic_gbps * 1e9 / 8;
  double L = (c.net_lat_us + c.switch_lat_us) * 1e-6, chunk = c.ring_chunk_kib * 1024;
  double loops = std::ceil(M / (n * chunk));
  double closed = 2 * (n - 1) / n * M / B + loops * 2 * (n - 1) * L;
  EXPECT_NEAR(closed, r.time_s, 0.02 * closed);
  EXPECT_DOUBLE_EQ(2 * (n - 1) / n * M / r.time_s, r.busbw_Bps);
  EXPECT_EQ(1, r.simulated);
}

TEST(SimRing, SlowNicSlowsPlainRingsNotBraid) {
  sim_cfg c = Small(8, 1, 2);
  c.slow_nics = 1;
  c.slow_nic_frac = 0.5;
  c.net_lat_us = 0, c.switch_lat_us = 0; // bandwidth only
  Net healthy(c, SC_HEALTHY), slow(c, SC_SLOW_NICS);
  double h = healthy.Go(ALGO_RING, false).time_s, s = slow.Go(ALGO_RING, false).time_s;
  // Plain NCCL: the channel on the slow NIC's rail runs at half: twice the time.
  EXPECT_NEAR(2.0, s / h, 0.04);
  coll_result sr = slow.Go(ALGO_RING, true);
  double hb = healthy.Go(ALGO_RING, true).time_s;
  // braid: that node delivers what its scheduler gets from 1 + 0.5 rails: at best 1.5 of 2.
  EXPECT_GT(sr.time_s / hb, 2 / 1.5 * 0.98);
  EXPECT_LT(sr.time_s / hb, 2 / 1.5 * 1.05);
  EXPECT_EQ(2, slow.Go(ALGO_RING, false).simulated) << "one healthy ring and the faulty rail's";
}

TEST(SimTree, TwoNodesIsTheClosedForm) {
  // Two nodes, one GPU and one NIC each, two channels (one per tree): each NIC carries M/2 up
  // on one tree and M/2 down on the other, both ways at once: M/B, plus the pipeline's fill (the
  // first chunk's trip up, at half the NIC) and a step's latency each way.
  sim_cfg c = Small(2, 1, 1);
  c.channels_per_rail = 2;
  Net run(c, SC_HEALTHY);
  coll_result r = run.Go(ALGO_TREE, false);
  double M = c.msg_mib * (1 << 20), B = c.nic_gbps * 1e9 / 8, chunk = c.tree_chunk_kib * 1024;
  double L = (c.net_lat_us + c.switch_lat_us) * 1e-6;
  double closed = M / B + chunk / (B / 2) + 2 * L;
  EXPECT_NEAR(closed, r.time_s, 0.02 * closed);
  EXPECT_NEAR(B, r.busbw_Bps, 0.02 * B);
}

TEST(SimPs, EnoughServersGiveMOverB) {
  sim_cfg c = Small(8, 1, 1);
  c.servers = 8;
  c.server_gbps = c.nic_gbps; // 8 servers for 8 nodes: each node's NIC is the limit
  Net run(c, SC_HEALTHY);
  double M = c.msg_mib * (1 << 20), B = c.nic_gbps * 1e9 / 8;
  EXPECT_NEAR(M / B, run.Go(ALGO_PS, false).time_s, 0.02 * M / B);
  EXPECT_NEAR(M / B, run.Go(ALGO_PS, true).time_s, 0.03 * M / B) << "braid over one rail: the same";
  c.servers = 2; // too few: the servers are the limit, nodes x M / (servers x Bs)
  Net few(c, SC_HEALTHY);
  EXPECT_NEAR(4 * M / B, few.Go(ALGO_PS, false).time_s, 0.02 * 4 * M / B);
}

TEST(SimPs, WeightsMoveWorkOffASlowServer) {
  sim_cfg c = Small(8, 1, 1);
  c.servers = 4;
  c.server_gbps = 2 * c.nic_gbps;
  c.slow_server_frac = 0.25;
  c.msg_mib = 1024;
  c.ps_ops = 1; // equal weights: the slow server holds everyone up
  Net eq(c, SC_SLOW_SERVER);
  double t1 = eq.Go(ALGO_PS, false).time_s;
  c.ps_ops = 12; // measured weights (ps_rate, ps_weights) once the first window closes (8 ops)
  Net ad(c, SC_SLOW_SERVER);
  double t12 = ad.Go(ALGO_PS, false).time_s;
  EXPECT_LT(t12, 0.6 * t1);
}

// With one of 4 servers at a quarter of the rate and the servers the limit, the best any layout
// can do is the healthy time x 4/3.25 (the servers' capacity drops to 3.25 of 4).  braid-ps's
// layout and weights (a little under the slow server's share) land within a few percent of it.
TEST(SimPs, ASlowServerCostsOnlyItsShare) {
  sim_cfg c = Small(8, 1, 1);
  c.servers = 4;
  c.server_gbps = 2 * c.nic_gbps; // the servers carry exactly what the nodes' NICs do
  c.msg_mib = 1024;
  c.ps_ops = 12;
  Net healthy(c, SC_HEALTHY);
  double th = healthy.Go(ALGO_PS, false).time_s;
  c.slow_server_frac = 0.25;
  Net slow(c, SC_SLOW_SERVER);
  double ts = slow.Go(ALGO_PS, false).time_s, best = th * 4 / 3.25;
  EXPECT_GE(ts, 0.995 * best) << "faster than the servers can carry: the model is wrong";
  EXPECT_LE(ts, 1.03 * best) << "healthy " << th << " s, slow server " << ts << " s";
}

TEST(SimStripe, SchedulerUsesHealthyRailsAndDropsASlowOne) {
  sim_cfg c;
  sim_cfg_default(&c);
  c.braid_warmup_ms = 300, c.braid_measure_ms = 100;
  stripe_cache *k = stripe_cache_new();
  double B = c.nic_gbps * 1e9 / 8;
  double all[8] = {B, B, B, B, B, B, B, B};
  EXPECT_NEAR(8 * B, stripe_Bps(k, &c, all, 8), 0.02 * 8 * B);
  double slow[8] = {B, B, B, 0.1 * B, B, B, B, B};
  double s = stripe_Bps(k, &c, slow, 8);
  EXPECT_GE(s, 0.98 * 7 * B) << "the slow rail costs little once demoted";
  double down[8] = {0, B, B, B, B, B, B, B};
  EXPECT_NEAR(7 * B, stripe_Bps(k, &c, down, 8), 0.02 * 7 * B) << "a down rail loses nothing else";
  EXPECT_EQ(3, stripe_runs(k));
  stripe_Bps(k, &c, all, 8);
  EXPECT_EQ(3, stripe_runs(k)) << "cached";
  stripe_cache_free(k);
}

TEST(SimCluster, RailDownStopsPlainNcclNotBraid) {
  sim_cfg c = Small(4, 1, 2);
  Net run(c, SC_RAIL_DOWN);
  for (int a = 0; a < ALGO_COUNT; a++) {
    EXPECT_TRUE(std::isinf(run.Go((algo)a, false).time_s)) << algo_name((algo)a, false);
    EXPECT_TRUE(std::isfinite(run.Go((algo)a, true).time_s)) << algo_name((algo)a, true);
  }
}

TEST(SimCfg, KeysParseAndRefuse) {
  sim_cfg c;
  sim_cfg_default(&c);
  char err[256];
  EXPECT_EQ(1280, c.nodes);
  EXPECT_EQ(0, sim_cfg_set(&c, "nodes", "64", err, sizeof err));
  EXPECT_EQ(64, c.nodes);
  EXPECT_EQ(-1, sim_cfg_set(&c, "nodes", "6.5", err, sizeof err));
  EXPECT_EQ(-1, sim_cfg_set(&c, "servers", "17", err, sizeof err)) << "PS_MAX_SERVERS";
  EXPECT_EQ(-1, sim_cfg_set(&c, "no_such_key", "1", err, sizeof err));
  EXPECT_EQ(-1, sim_cfg_set(&c, "nic_gbps", "fast", err, sizeof err));
  c.down_rail = 8;
  EXPECT_EQ(-1, sim_cfg_check(&c, err, sizeof err));
}

} // namespace
