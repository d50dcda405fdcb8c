// braid-ps partition assignment and server weights (ps_offload/assign.h): what every head relies
// on to pick the same server for the same partition, and to give a slow server less.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

extern "C" {
#include "assign.h"
}

TEST(PsAssign, PartitionCount) {
  EXPECT_EQ(ps_nparts(0, 4096), 0u);
  EXPECT_EQ(ps_nparts(1, 4096), 1u);
  EXPECT_EQ(ps_nparts(4096, 4096), 1u);
  EXPECT_EQ(ps_nparts(4097, 4096), 2u);
  EXPECT_EQ(ps_nparts(64u << 20, 256u << 10), 256u);
}

// Shares follow the weights over many operations, within one partition per op.
TEST(PsAssign, SharesFollowWeights) {
  const uint8_t w[4] = {255, 255, 255, 64};
  std::vector<long> got(4, 0);
  const uint32_t nparts = 16;
  for (uint64_t seq = 0; seq < 4000; seq++)
    for (uint32_t p = 0; p < nparts; p++) {
      int s = ps_assign(w, 4, seq, p, nparts);
      ASSERT_GE(s, 0);
      ASSERT_LT(s, 4);
      got[s]++;
    }
  double total = 4000.0 * nparts, wsum = 255 * 3 + 64;
  for (int i = 0; i < 4; i++) EXPECT_NEAR(got[i] / total, w[i] / wsum, 0.01) << "server " << i;
}

TEST(PsAssign, EqualWeightsBalancedWithinAnOp) {
  const uint8_t w[4] = {1, 1, 1, 1};
  for (uint64_t seq = 0; seq < 100; seq++) {
    int count[4] = {0, 0, 0, 0};
    for (uint32_t p = 0; p < 16; p++) count[ps_assign(w, 4, seq, p, 16)]++;
    for (int i = 0; i < 4; i++) EXPECT_EQ(count[i], 4) << "seq " << seq;
  }
}

TEST(PsAssign, ZeroWeightNeverChosenAndAllZeroIsNone) {
  const uint8_t w[3] = {10, 0, 10};
  for (uint64_t seq = 0; seq < 500; seq++)
    for (uint32_t p = 0; p < 7; p++) EXPECT_NE(ps_assign(w, 3, seq, p, 7), 1);
  const uint8_t z[3] = {0, 0, 0};
  EXPECT_EQ(ps_assign(z, 3, 5, 0, 1), -1);
}

// Heads that lost the same servers, in any order, send a partition to the same replacement.
TEST(PsAssign, RerouteAgreesWhateverTheOrderOfLosses) {
  EXPECT_EQ(ps_reroute(2, 0, 4), 2);
  EXPECT_EQ(ps_reroute(2, 1u << 2, 4), 3);
  EXPECT_EQ(ps_reroute(3, 1u << 3, 4), 0);
  EXPECT_EQ(ps_reroute(1, 0xF, 4), -1);
  // Head A lost 1 then 2 (partition on 1 moves to 2, then to 3); head B lost 2 then 1.
  int a = ps_reroute(1, 1u << 1, 4);
  a = ps_reroute(a, (1u << 1) | (1u << 2), 4);
  int b = ps_reroute(1, (1u << 1) | (1u << 2), 4);
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 3);
}

// A server that is busy all the time at a quarter of the others' rate gets about a quarter of
// their weight; a server that idles between bursts does not look slow.
TEST(PsAssign, RatesFromBusyTime) {
  ps_rate fast{}, slow{}, idle{};
  uint64_t t = 0;
  for (int i = 0; i < 100; i++) {
    ps_rate_start(&fast, t);
    ps_rate_done(&fast, t + 1000000, 1000000);  // 1 MB in 1 ms
    ps_rate_start(&slow, t);
    ps_rate_done(&slow, t + 4000000, 1000000);  // 1 MB in 4 ms
    ps_rate_start(&idle, t);
    ps_rate_done(&idle, t + 1000000, 1000000);  // 1 MB in 1 ms, then 3 ms idle
    t += 4000000;
  }
  ps_rate_window(&fast, t);
  ps_rate_window(&slow, t);
  ps_rate_window(&idle, t);
  ps_rate r[3] = {fast, slow, idle};
  uint8_t w[PS_MAX_SERVERS];
  ps_weights(r, 3, 0, w);
  EXPECT_EQ(w[0], 255);
  EXPECT_NEAR(w[1], 64, 2);
  EXPECT_EQ(w[2], 255);
  ps_weights(r, 3, 1u << 0, w);  // the fastest lost: the others rescale, the lost one gets 0
  EXPECT_EQ(w[0], 0);
  EXPECT_NEAR(w[1], 64, 2);
  EXPECT_EQ(w[2], 255);
}

TEST(PsAssign, UnmeasuredServersCountAsFastest) {
  ps_rate r[2]{};
  uint8_t w[PS_MAX_SERVERS];
  ps_weights(r, 2, 0, w);
  EXPECT_EQ(w[0], 255);
  EXPECT_EQ(w[1], 255);
}
