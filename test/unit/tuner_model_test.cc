// The tuner's model: NCCL's cost formula, the calibration and health files, and decisions over
// NCCL-shaped tables for every collective, sizes from 1 B to 16 GiB and 1 to 1024 nodes.
#include <gtest/gtest.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

extern "C" {
#include "advice.h"
#include "calib.h"
#include "inputs.h"
#include "model.h"
#include "nccl_plugin/tuner.h"
#include "tuner.h"
}

#include "temp_file.h"

namespace {

constexpr float kIgnore = (float)NCCL_ALGO_PROTO_IGNORE;
constexpr int kA = NCCL_NUM_ALGORITHMS, kP = NCCL_NUM_PROTOCOLS;


struct Warnings {
  std::vector<std::pair<int, std::string>> v;
};
void Collect(void* arg, const char*, int line, const char* msg) {
  static_cast<Warnings*>(arg)->v.emplace_back(line, msg);
}

braid_model Model(int nnodes, int ppn, double link_gbs, int nch, bool collnet = false,
                  unsigned proto_enable = 0) {
  ncclTunerConstants_v5_t c;
  braid_model_default_constants(&c);
  braid_fabric f;
  braid_fabric_default(&f, nnodes, ppn, link_gbs, nch);
  f.collnet = collnet;
  f.proto_enable = proto_enable;
  braid_model m;
  braid_model_build(&m, &c, &f);
  return m;
}

braid_tuner_inputs Inputs(const std::string& calib = "", const std::string& health = "",
                          braid_tuner_mode mode = BRAID_TUNER_AUTO) {
  braid_tuner_inputs in;
  memset(&in, 0, sizeof in);
  in.braid_tuner = 1;
  in.mode = mode;
  in.mode_valid = 1;
  snprintf(in.rules_path, sizeof in.rules_path, "/nonexistent/braid-rules");
  snprintf(in.calib_path, sizeof in.calib_path, "%s", calib.c_str());
  snprintf(in.health_path, sizeof in.health_path, "%s", health.c_str());
  in.fingerprint = 1;
  return in;
}

// ---- NCCL's formula -------------------------------------------------------------------------

TEST(TunerModel, RingAndTreeAllReduceMatchNcclsFormula) {
  // 2 nodes, 1 GPU each, 2 channels of 12.5 GB/s, Hopper.
  braid_model m = Model(2, 1, 25.0, 2);
  const size_t n = 1 << 20;
  // Ring/Simple: base 8.4 + 2 network steps of the tree's network latency (14, one GPU per
  // node), times the 1.4 plateau; bus bandwidth 25 GB/s, ratio nRanks/nsteps = 1.
  float ring = braid_model_time(&m, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, n, 1);
  EXPECT_NEAR(ring, (8.4 + 2 * 14) * 1.4 + n / (1000.0 * 25.0), 0.01);
  // Tree/Simple: base 8.4 + 2 * log2(2) * 14; bandwidth min(25 * .92, 2 * 41.4) * .5, times the
  // tree correction for 1 MiB (0.5).
  float tree = braid_model_time(&m, ncclFuncAllReduce, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, n, 1);
  EXPECT_NEAR(tree, 8.4 + 2 * 14 + n / (1000.0 * 25 * .92 * .5 * .5), 0.01);
  // Latency counts the pipelined operations: ring per op, others per batch of 10.
  float lat1 = braid_model_latency(&m, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, n, 1);
  float lat3 = braid_model_latency(&m, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, n, 3);
  EXPECT_NEAR(lat3, 3 * lat1, 1e-3);
  float tl1 = braid_model_latency(&m, ncclFuncAllReduce, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, n, 1);
  float tl10 = braid_model_latency(&m, ncclFuncAllReduce, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, n, 10);
  EXPECT_NEAR(tl1, tl10, 1e-3);
}

TEST(TunerModel, FillLeavesIgnoreWhereNcclWould) {
  braid_model m = Model(4, 8, 50.0, 4);
  float t[kA * kP];
  // Broadcast: ring only.
  braid_model_fill(&m, ncclFuncBroadcast, 1 << 20, 1, t, kA);
  for (int a = 0; a < kA; a++)
    for (int p = 0; p < kP; p++)
      if (a != NCCL_ALGO_RING) {
        EXPECT_EQ(t[a * kP + p], kIgnore) << a << "/" << p;
      }
  EXPECT_GT(t[NCCL_ALGO_RING * kP + NCCL_PROTO_SIMPLE], 0);
  // AllReduce without CollNet/NVLS: tree and ring only; never PAT.
  braid_model_fill(&m, ncclFuncAllReduce, 1 << 20, 1, t, kA);
  for (int a = 0; a < kA; a++)
    for (int p = 0; p < kP; p++) {
      bool avail = a == NCCL_ALGO_TREE || a == NCCL_ALGO_RING;
      EXPECT_EQ(avail, t[a * kP + p] != kIgnore) << a << "/" << p;
    }
  // CollNet: chain only with Simple; Direct needs NVSwitch.
  m = Model(4, 8, 50.0, 4, true);
  braid_model_fill(&m, ncclFuncAllReduce, 1 << 20, 1, t, kA);
  EXPECT_GT(t[NCCL_ALGO_COLLNET_CHAIN * kP + NCCL_PROTO_SIMPLE], 0);
  EXPECT_EQ(t[NCCL_ALGO_COLLNET_CHAIN * kP + NCCL_PROTO_LL], kIgnore);
  EXPECT_EQ(t[NCCL_ALGO_COLLNET_DIRECT * kP + NCCL_PROTO_SIMPLE], kIgnore);
  // One rank: Ring/Simple = 0, the rest IGNORE.
  m = Model(1, 1, 50.0, 4);
  braid_model_fill(&m, ncclFuncAllReduce, 1 << 20, 1, t, kA);
  for (int i = 0; i < kA * kP; i++)
    EXPECT_EQ(t[i], i == NCCL_ALGO_RING * kP + NCCL_PROTO_SIMPLE ? 0.0f : kIgnore);
  // NCCL_PROTO=Simple.
  m = Model(4, 1, 50.0, 4, false, 1u << NCCL_PROTO_SIMPLE);
  braid_model_fill(&m, ncclFuncAllReduce, 1 << 20, 1, t, kA);
  EXPECT_EQ(t[NCCL_ALGO_RING * kP + NCCL_PROTO_LL], kIgnore);
  EXPECT_GT(t[NCCL_ALGO_RING * kP + NCCL_PROTO_SIMPLE], 0);
}

TEST(TunerModel, PickFollowsNccl) {
  float t[kA * kP];
  for (float& v : t) v = kIgnore;
  int a, p;
  EXPECT_EQ(-1, braid_model_pick(t, kA, kP, &a, &p));
  t[1 * kP + 2] = 5;
  t[0 * kP + 2] = 5;  // tie: the lower algorithm wins
  t[3 * kP + 2] = 7;
  ASSERT_EQ(0, braid_model_pick(t, kA, kP, &a, &p));
  EXPECT_EQ(0, a);
  EXPECT_EQ(2, p);
}

// ---- calibration and health files -----------------------------------------------------------

TEST(TunerCalib, ParsesWritesAndWarnsWithLineNumbers) {
  const std::string text =
      "# from braid-perf\n"
      "braid-calibration 1\n"
      "nranks 4\n"
      "nnodes 4\n"
      "link_gbs 0.05\n"
      "model_link_gbs 0.05\n"
      "model_nchannels 8\n"
      "allreduce ring simple 4096 100 10\n"
      "allreduce ring simple 1048576 400 100   # trailing comment\n"
      "allreduce ring simple 4096 100 10\n"   // 10: duplicate
      "allreduce spiral simple 4096 1 1\n"    // 11: unknown algorithm
      "allreduce tree simple 4096 -5 1\n"     // 12: negative time
      "allreduce tree simple\n"               // 13: too few fields
      "allreduce tree simple 4096 50 25\n";
  Warnings w;
  braid_calib c;
  char err[200] = "";
  ASSERT_EQ(4, braid_calib_parse(text.data(), text.size(), "cal", &c, Collect, &w, err, sizeof err))
      << err;
  ASSERT_EQ(4u, w.v.size());
  EXPECT_EQ(10, w.v[0].first);
  EXPECT_EQ(11, w.v[1].first);
  EXPECT_EQ(12, w.v[2].first);
  EXPECT_EQ(13, w.v[3].first);
  EXPECT_EQ(4, c.nranks);
  EXPECT_EQ(4, c.nnodes);
  EXPECT_DOUBLE_EQ(0.05, c.link_gbs);
  EXPECT_EQ(8, c.model_nchannels);
  ASSERT_EQ(3u, c.n);
  // Ratios: 10 at 4 KiB, 4 at 1 MiB, log-interpolated between, held beyond the ends.
  EXPECT_NEAR(10.0, braid_calib_ratio(&c, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1), 1e-9);
  EXPECT_NEAR(4.0, braid_calib_ratio(&c, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 1ull << 34), 1e-9);
  double mid = braid_calib_ratio(&c, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 65536);
  EXPECT_NEAR(exp(log(10.0) + 0.5 * (log(4.0) - log(10.0))), mid, 1e-6);
  // Other protocols borrow Simple's points; an uncalibrated algorithm has none.
  EXPECT_NEAR(10.0, braid_calib_ratio(&c, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_LL, 4096), 1e-9);
  EXPECT_EQ(0.0, braid_calib_ratio(&c, ncclFuncAllReduce, NCCL_ALGO_COLLNET_CHAIN, NCCL_PROTO_SIMPLE, 4096));
  EXPECT_EQ(100.0, braid_calib_latency(&c, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE));

  // The writer's output parses back to the same points.
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  ASSERT_EQ(0, braid_calib_write(f, &c, "line one\nline two"));
  fclose(f);
  braid_calib d;
  Warnings w2;
  ASSERT_EQ(0, braid_calib_parse(buf, len, "rt", &d, Collect, &w2, err, sizeof err)) << buf;
  ASSERT_EQ(c.n, d.n);
  for (size_t i = 0; i < c.n; i++) {
    EXPECT_EQ(c.v[i].bytes, d.v[i].bytes);
    EXPECT_DOUBLE_EQ(c.v[i].measured_us, d.v[i].measured_us);
  }
  free(buf);
  braid_calib_free(&c);
  braid_calib_free(&d);
}

TEST(TunerCalib, RejectsWhatIsNotACalibration) {
  braid_calib c;
  char err[200];
  Warnings w;
  const std::string rules = "allreduce,0,65536,tree,ll,-1,-1,-1\n";
  EXPECT_EQ(-1, braid_calib_parse(rules.data(), rules.size(), "x", &c, Collect, &w, err, sizeof err));
  EXPECT_NE(std::string(err).find("braid-calibration 1"), std::string::npos) << err;
  const std::string v2 = "braid-calibration 2\n";
  EXPECT_EQ(-1, braid_calib_parse(v2.data(), v2.size(), "x", &c, Collect, &w, err, sizeof err));
  EXPECT_NE(std::string(err).find("version 2"), std::string::npos) << err;
  const std::string nul("braid-calibration 1\n\0x", 22);
  EXPECT_EQ(-1, braid_calib_parse(nul.data(), nul.size(), "x", &c, Collect, &w, err, sizeof err));
  EXPECT_EQ(-1, braid_calib_parse("", 0, "x", &c, Collect, &w, err, sizeof err));
  EXPECT_EQ(-1, braid_calib_load("/nonexistent/calib", &c, Collect, &w, err, sizeof err));
  EXPECT_EQ(0u, c.n);
}

TEST(TunerCalib, Health) {
  const std::string text =
      "braid-health 1\n"
      "h0 1.0\n"
      "h1 1.7\n"      // 3: clamped to 1, warned
      "h2 0.25\n"
      "h3 zero\n";    // 5: skipped
  braid_health h;
  Warnings w;
  char err[200];
  ASSERT_EQ(2, braid_health_parse(text.data(), text.size(), "h", &h, Collect, &w, err, sizeof err));
  ASSERT_EQ(2u, w.v.size());
  EXPECT_EQ(3, w.v[0].first);
  EXPECT_EQ(5, w.v[1].first);
  ASSERT_EQ(3u, h.n);
  const char* name = nullptr;
  EXPECT_DOUBLE_EQ(0.25, braid_health_min(&h, &name));
  EXPECT_STREQ("h2", name);
  braid_health_free(&h);
}

// ---- decisions ------------------------------------------------------------------------------

// A calibration for nnodes ranks (one per node) from measured-time functions, with NCCL's model
// evaluated on the same fabric.
struct Measured {
  int algo;
  double lat_us, us_per_byte;
};

std::string Calibration(int nnodes, double link_gbs, const braid_model& m,
                        const std::vector<Measured>& algos) {
  std::string s = "braid-calibration 1\nnranks " + std::to_string(nnodes) + "\nnnodes " +
                  std::to_string(nnodes) + "\nlink_gbs " + std::to_string(link_gbs) + "\n";
  for (const Measured& x : algos)
    for (uint64_t n = 4096; n <= (256ull << 20); n *= 4) {
      float model = braid_model_time(&m, ncclFuncAllReduce, x.algo, NCCL_PROTO_SIMPLE, n, 1);
      if (model <= 0) continue;
      char line[160];
      snprintf(line, sizeof line, "allreduce %s simple %llu %.6g %.6g\n",
               x.algo == NCCL_ALGO_RING ? "ring" : x.algo == NCCL_ALGO_TREE ? "tree" : "collnet_chain",
               (unsigned long long)n, x.lat_us + x.us_per_byte * (double)n, (double)model);
      s += line;
    }
  return s;
}

struct Choice {
  int algo, proto;
  braid_tuner_why why;
};

Choice Decide(braid_tuner* t, const braid_model& m, size_t n) {
  float tab[kA * kP];
  braid_model_fill(&m, ncclFuncAllReduce, n, 1, tab, kA);
  Choice c;
  int nch = 0;
  braid_tuner_apply_table(t, ncclFuncAllReduce, n, 1, 0, tab, kA, kP, &nch, &c.why);
  EXPECT_EQ(0, braid_model_pick(tab, kA, kP, &c.algo, &c.proto));
  return c;
}

TEST(TunerDecide, CalibrationMovesTheChoiceAndTheMarginKeepsNearTies) {
  const int nodes = 4;
  braid_model m = Model(nodes, 1, 12.5, 4, false, 1u << NCCL_PROTO_SIMPLE);
  // Tree measured 10x slower than NCCL predicts, ring as predicted: ring everywhere.
  std::vector<Measured> algos;
  for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING}) algos.push_back({a, 0, 0});
  std::string text = "braid-calibration 1\nnranks 4\nnnodes 4\n";
  for (uint64_t n = 4096; n <= (64ull << 20); n *= 4)
    for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING}) {
      float model = braid_model_time(&m, ncclFuncAllReduce, a, NCCL_PROTO_SIMPLE, n, 1);
      char line[160];
      snprintf(line, sizeof line, "allreduce %s simple %llu %.6g %.6g\n", a ? "ring" : "tree",
               (unsigned long long)n, model * (a == NCCL_ALGO_TREE ? 10.0 : 1.0), (double)model);
      text += line;
    }
  TempFile cal(text);
  braid_tuner_inputs in = Inputs(cal.path());
  braid_tuner* t = nullptr;
  braid_tuner_create_from(&t, &in, 5, 1, nodes, nodes, nullptr);
  ASSERT_TRUE(t);
  ASSERT_TRUE(braid_tuner_model_active(t));
  for (uint64_t n = 4096; n <= (64ull << 20); n *= 2) {
    Choice c = Decide(t, m, n);
    EXPECT_EQ(NCCL_ALGO_RING, c.algo) << n;
    if (c.why.nccl_algo == NCCL_ALGO_TREE) {
      EXPECT_EQ(BRAID_TUNER_SRC_MODEL, c.why.source) << n;
    }
  }
  braid_tuner_destroy(t);

  // Ratios that put two entries within 2% of each other keep NCCL's pick.
  const size_t n = 1 << 20;
  float ring = braid_model_time(&m, ncclFuncAllReduce, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, n, 1);
  float tree = braid_model_time(&m, ncclFuncAllReduce, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, n, 1);
  int nccl = ring < tree ? NCCL_ALGO_RING : NCCL_ALGO_TREE;
  float lo = ring < tree ? ring : tree;
  char buf[400];
  // Other algorithm measured 2% faster than NCCL's pick: not enough.
  snprintf(buf, sizeof buf,
           "braid-calibration 1\nnranks 4\nnnodes 4\nallreduce ring simple %zu %.6g %.6g\n"
           "allreduce tree simple %zu %.6g %.6g\n",
           n, nccl == NCCL_ALGO_RING ? lo : lo * 0.98, (double)ring, n,
           nccl == NCCL_ALGO_TREE ? lo : lo * 0.98, (double)tree);
  TempFile near(buf);
  in = Inputs(near.path());
  braid_tuner_create_from(&t, &in, 5, 1, nodes, nodes, nullptr);
  Choice c = Decide(t, m, n);
  EXPECT_EQ(nccl, c.algo);
  EXPECT_EQ(BRAID_TUNER_SRC_NCCL, c.why.source);
  EXPECT_NE(std::string(c.why.reason).find("keeps NCCL"), std::string::npos) << c.why.reason;
  braid_tuner_destroy(t);
}

TEST(TunerDecide, SlowNodeDoesNotChargeSizesTheCalibrationShowsLatencyBound) {
  // A netbed-like fabric: 4 nodes on 500 Mbit/s links, one at 25%. At the smallest calibrated
  // size tree (100 us) beats CollNet (120 us); pushing its 2 n through the slow link would cost
  // more than CollNet's n, but the calibration shows no byte-moving time at that size (shaped
  // links pass small bursts at full speed), so the healthy choice stands there. Where bytes do
  // cost time, the slow link decides.
  const int nodes = 4;
  const double link = 0.0625;
  braid_model m = Model(nodes, 1, link, 4, true, 1u << NCCL_PROTO_SIMPLE);
  std::string cal = Calibration(nodes, link, m,
                                {{NCCL_ALGO_TREE, 100 - 4096 / 40.0, 1 / 40.0},
                                 {NCCL_ALGO_COLLNET_CHAIN, 120 - 4096 / 50.0, 1 / 50.0},
                                 {NCCL_ALGO_RING, 400 - 4096 / 41.0, 1 / 41.0}});
  TempFile calf(cal);
  TempFile sick("braid-health 1\nh0 0.25\nh1 1\nh2 1\nh3 1\n");
  braid_tuner_inputs in = Inputs(calf.path(), sick.path());
  braid_tuner *slow = nullptr;
  braid_tuner_create_from(&slow, &in, 5, 1, nodes, nodes, nullptr);
  Choice small = Decide(slow, m, 4096);
  EXPECT_EQ(NCCL_ALGO_TREE, small.algo) << small.why.reason;
  EXPECT_FALSE(small.why.straggler) << small.why.reason;
  Choice big = Decide(slow, m, 16 << 20);
  EXPECT_EQ(NCCL_ALGO_COLLNET_CHAIN, big.algo) << big.why.reason;
  // CollNet's 16 MiB cross the slow node's 15.6 B/us link: charged, not its healthy 335 ms.
  EXPECT_NEAR((16 << 20) / 15.625, big.why.predicted[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE],
              (16 << 20) / 15.625 * 0.01);
  braid_tuner_destroy(slow);
}

TEST(TunerDecide, SlowNodeMovesTheCrossover) {
  // 4 nodes, 1 GB/s links. Measured: ring 100 us + 1.5 n / 900 B/us; CollNet 300 us + n / 1000.
  // Healthy: ring wins below ~300 KB. With a node at 25%, the slow link carries 1.5 n for ring
  // and n for CollNet, so CollNet wins from ~100 KB.
  const int nodes = 4;
  const double link = 1.0;
  braid_model m = Model(nodes, 1, link, 4, true, 1u << NCCL_PROTO_SIMPLE);
  std::string cal = Calibration(nodes, link, m,
                                {{NCCL_ALGO_RING, 100, 1.5 / 900}, {NCCL_ALGO_COLLNET_CHAIN, 300, 1.0 / 1000},
                                 {NCCL_ALGO_TREE, 150, 2.5 / 900}});
  TempFile calf(cal);
  TempFile sick("braid-health 1\nh0 1\nh1 1\nh2 0.25\nh3 1\n");
  TempFile fine("braid-health 1\nh0 1\nh1 0.9\nh2 1\nh3 1\n");
  braid_tuner *healthy = nullptr, *slow = nullptr, *mild = nullptr;
  braid_tuner_inputs in = Inputs(calf.path());
  braid_tuner_create_from(&healthy, &in, 5, 1, nodes, nodes, nullptr);
  in = Inputs(calf.path(), sick.path());
  braid_tuner_create_from(&slow, &in, 5, 1, nodes, nodes, nullptr);
  in = Inputs(calf.path(), fine.path());
  braid_tuner_create_from(&mild, &in, 5, 1, nodes, nodes, nullptr);
  const size_t mid = 200 * 1000;
  Choice h = Decide(healthy, m, mid), s = Decide(slow, m, mid), f = Decide(mild, m, mid);
  EXPECT_EQ(NCCL_ALGO_RING, h.algo) << h.why.reason;
  EXPECT_EQ(NCCL_ALGO_COLLNET_CHAIN, s.algo) << s.why.reason;
  EXPECT_TRUE(s.why.straggler) << s.why.reason;
  EXPECT_NE(std::string(s.why.reason).find("h2"), std::string::npos) << s.why.reason;
  // 90%: not a straggler, no charge.
  EXPECT_EQ(h.algo, f.algo);
  // Small sizes stay latency-bound (ring), large ones CollNet either way.
  EXPECT_EQ(NCCL_ALGO_RING, Decide(slow, m, 16 * 1024).algo);
  EXPECT_EQ(NCCL_ALGO_COLLNET_CHAIN, Decide(healthy, m, 64 << 20).algo);
  braid_tuner_destroy(healthy);
  braid_tuner_destroy(slow);
  braid_tuner_destroy(mild);
}

TEST(TunerDecide, CalibrationForAnotherSizeIsNotUsed) {
  braid_model m = Model(4, 1, 1.0, 4);
  TempFile cal(Calibration(4, 1.0, m, {{NCCL_ALGO_RING, 100, 0.001}}));
  braid_tuner_inputs in = Inputs(cal.path());
  braid_tuner* t = nullptr;
  braid_tuner_create_from(&t, &in, 5, 1, 8, 8, nullptr);  // 8 ranks: the file says 4
  ASSERT_TRUE(t);
  EXPECT_FALSE(braid_tuner_model_active(t));
  braid_tuner_destroy(t);
}

TEST(TunerDecide, ModesOffAndModelIgnoreRules) {
  TempFile rules("allreduce,0,-1,tree,simple,3,-1,-1\n");
  braid_model m = Model(4, 1, 12.5, 4);
  for (braid_tuner_mode mode : {BRAID_TUNER_OFF, BRAID_TUNER_MODEL, BRAID_TUNER_RULES}) {
    braid_tuner_inputs in = Inputs("", "", mode);
    snprintf(in.rules_path, sizeof in.rules_path, "%s", rules.path().c_str());
    braid_tuner* t = nullptr;
    braid_tuner_create_from(&t, &in, 5, 1, 4, 4, nullptr);
    float tab[kA * kP], before[kA * kP];
    braid_model_fill(&m, ncclFuncAllReduce, 64 << 20, 1, tab, kA);
    memcpy(before, tab, sizeof tab);
    int nch = 0;
    braid_tuner_apply_table(t, ncclFuncAllReduce, 64 << 20, 1, 0, tab, kA, kP, &nch, nullptr);
    if (mode == BRAID_TUNER_RULES) {
      EXPECT_EQ(0.0f, tab[NCCL_ALGO_TREE * kP + NCCL_PROTO_SIMPLE]);
      EXPECT_EQ(3, nch);
    } else {
      EXPECT_EQ(0, memcmp(before, tab, sizeof tab)) << braid_tuner_mode_name(mode);
      EXPECT_EQ(0, nch);
    }
    braid_tuner_destroy(t);
  }
}

// Every collective, sizes 1 B .. 16 GiB, 1 .. 1024 nodes, 6- and 7-algorithm tables, with the
// model fully active (calibration + a slow node): no IGNORE entry is ever enabled, nothing
// outside the table is written, at most one entry changes and it becomes 0, and NCCL can still
// select something.
TEST(TunerDecide, NcclShapedTablesEverywhere) {
  const int node_counts[] = {1, 2, 3, 4, 8, 16, 64, 128, 512, 1024};
  for (int nodes : node_counts)
    for (int ppn : {1, 8}) {
      int nranks = nodes * ppn;
      braid_model m = Model(nodes, ppn, 50.0, 8, nodes > 1);
      std::string cal = "braid-calibration 1\nnranks " + std::to_string(nranks) + "\nnnodes " +
                        std::to_string(nodes) + "\nlink_gbs 50\n";
      for (int coll = 0; coll < 5; coll++)
        for (int a = 0; a < kA; a++)
          for (uint64_t n = 1024; n <= (1ull << 32); n *= 32) {
            float model = braid_model_time(&m, coll, a, NCCL_PROTO_SIMPLE, n, 1);
            if (model <= 0) continue;
            char line[160];
            static const char* cn[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
            static const char* an[] = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
            snprintf(line, sizeof line, "%s %s simple %llu %.6g %.6g\n", cn[coll], an[a],
                     (unsigned long long)n, model * (1.0 + 0.37 * ((a + coll) % 4)), (double)model);
            cal += line;
          }
      TempFile calf(cal);
      TempFile health("braid-health 1\nslow 0.3\n");
      braid_tuner_inputs in = Inputs(calf.path(), health.path());
      braid_tuner* t = nullptr;
      braid_tuner_create_from(&t, &in, 5, 7, nranks, nodes, nullptr);
      ASSERT_TRUE(t);
      for (int numAlgo : {6, 7})
        for (int coll = 0; coll < 5; coll++)
          for (int k = 0; k <= 34; k++)
            for (uint64_t n : {1ull << k, (1ull << k) + (1ull << k) / 3}) {
            float buf[kA * kP + 8], before[kA * kP + 8];
            for (float& v : buf) v = 12345.0f;  // sentinel beyond the table
            braid_model_fill(&m, coll, n, 1, buf, numAlgo);
            memcpy(before, buf, sizeof buf);
            int nch = 0;
            braid_tuner_apply_table(t, coll, n, 1, 0, buf, numAlgo, kP, &nch, nullptr);
            int changed = 0;
            for (int i = 0; i < kA * kP + 8; i++) {
              if (i >= numAlgo * kP) {
                ASSERT_EQ(12345.0f, buf[i]) << "wrote outside a " << numAlgo << "-algorithm table";
                continue;
              }
              if (before[i] == kIgnore) {
                ASSERT_EQ(kIgnore, buf[i]) << "enabled an IGNORE entry";
              }
              if (buf[i] != before[i]) {
                changed++;
                ASSERT_EQ(0.0f, buf[i]);
              }
            }
            ASSERT_LE(changed, 1);
            ASSERT_EQ(0, nch);
            int a, p;
            ASSERT_EQ(0, braid_model_pick(buf, numAlgo, kP, &a, &p))
                << nodes << " nodes, coll " << coll << ", " << n << " B";
            }
      braid_tuner_destroy(t);
    }
}

// Ranks see different local telemetry (here: which of their rails is slow, and how slow); the
// telemetry only feeds advice for the next run, so all ranks make identical choices.
int g_slow_rail = 0;
double g_slow_share = 1.0;
int FakeSnapshot(braid_snapshot_v1* out, uint32_t max_rails) {
  if (!out) return -1;
  out->version = BRAID_SNAPSHOT_VERSION_1;
  out->total = 4;
  out->nrails = max_rails < 4 ? max_rails : 4;
  for (uint32_t r = 0; r < out->nrails; r++) {
    braid_snapshot_rail_v1& x = out->rail[r];
    memset(&x, 0, sizeof x);
    x.rail = (int32_t)r;
    x.est_bps = (uint64_t)(25e9 * ((int)r == g_slow_rail ? g_slow_share : 1.0));
    x.bytes = 1ull << 30;
    snprintf(x.peer, sizeof x.peer, "10.0.0.9:1234");
    snprintf(x.nic, sizeof x.nic, "eth%u", r);
  }
  return 0;
}

TEST(TunerRanks, DifferentLocalTelemetrySameChoices) {
  const int nodes = 8, ranks = 16;
  braid_model m = Model(nodes, 2, 25.0, 4, true);
  // A calibration for 16 ranks on 8 nodes, with ring measured 1.4x and CollNet 0.8x the model.
  std::string text = "braid-calibration 1\nnranks 16\nnnodes 8\nlink_gbs 25\n";
  for (uint64_t n = 4096; n <= (1ull << 30); n *= 4)
    for (int a : {NCCL_ALGO_TREE, NCCL_ALGO_RING, NCCL_ALGO_COLLNET_CHAIN}) {
      float model = braid_model_time(&m, ncclFuncAllReduce, a, NCCL_PROTO_SIMPLE, n, 1);
      if (model <= 0) continue;
      char line[160];
      snprintf(line, sizeof line, "allreduce %s simple %llu %.6g %.6g\n",
               a == NCCL_ALGO_TREE ? "tree" : a == NCCL_ALGO_RING ? "ring" : "collnet_chain",
               (unsigned long long)n, model * (a == NCCL_ALGO_RING ? 1.4 : a == NCCL_ALGO_TREE ? 1.0 : 0.8),
               (double)model);
      text += line;
    }
  TempFile calib(text);
  TempFile health("braid-health 1\nh3 0.3\n");
  braid_advice_set_source(FakeSnapshot);
  std::vector<std::vector<float>> answers;
  for (int rank = 0; rank < ranks; rank++) {
    g_slow_rail = rank % 4;
    g_slow_share = 0.05 + 0.06 * rank;
    braid_tuner_inputs in = Inputs(calib.path(), health.path());
    braid_tuner* t = nullptr;
    braid_tuner_create_from(&t, &in, 5, 0xabc, ranks, nodes, nullptr);
    ASSERT_TRUE(t);
    ASSERT_TRUE(braid_tuner_model_active(t));
    for (int i = 0; i < 4; i++) braid_advice_sample_now(braid_tuner_advice(t));
    std::vector<float> mine;
    for (int coll = 0; coll < 5; coll++)
      for (uint64_t n = 1; n <= (4ull << 30); n = n * 3 + 1) {
        float tab[kA * kP];
        braid_model_fill(&m, coll, n, 1, tab, kA);
        int nch = 0;
        braid_tuner_apply_table(t, coll, n, 1, 0, tab, kA, kP, &nch, nullptr);
        if (n % 7 == 0) braid_advice_sample_now(braid_tuner_advice(t));
        mine.insert(mine.end(), tab, tab + kA * kP);
        mine.push_back((float)nch);
      }
    braid_tuner_destroy(t);
    answers.push_back(mine);
  }
  braid_advice_set_source(nullptr);
  for (int rank = 1; rank < ranks; rank++) ASSERT_EQ(answers[0], answers[rank]) << "rank " << rank;
  // And the model did change something (the test would be empty otherwise).
  bool changed = false;
  for (int coll = 0, i = 0; coll < 5 && !changed; coll++)
    for (uint64_t n = 1; n <= (4ull << 30); n = n * 3 + 1, i++) {
      float tab[kA * kP];
      braid_model_fill(&m, coll, n, 1, tab, kA);
      if (memcmp(tab, &answers[0][(size_t)i * (kA * kP + 1)], sizeof tab) != 0) changed = true;
    }
  EXPECT_TRUE(changed);
}

}  // namespace
