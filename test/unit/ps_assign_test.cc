// braid-ps partition layout and server weights (ps_offload/assign.h): what every head relies on to
// give the same bytes to the same server, and to give a slow server only its share.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

extern "C" {
#include "assign.h"
}

namespace {

std::vector<ps_piece> Layout(const uint8_t *w, int n, uint64_t seq, size_t bytes, size_t esize = 4,
                             size_t max_part = 256u << 10) {
  uint32_t count = ps_layout(w, n, seq, bytes, esize, max_part, nullptr, 0);
  std::vector<ps_piece> out(count);
  EXPECT_EQ(count, ps_layout(w, n, seq, bytes, esize, max_part, out.data(), count));
  return out;
}

// Every byte once, in offset order, each piece non-empty and on a server in range.
void ExpectCovers(const std::vector<ps_piece> &p, size_t bytes, int n) {
  size_t at = 0;
  for (const ps_piece &x : p) {
    EXPECT_EQ(x.off, at);
    EXPECT_GT(x.len, 0u);
    EXPECT_GE(x.server, 0);
    EXPECT_LT(x.server, n);
    at = x.off + x.len;
  }
  EXPECT_EQ(at, bytes);
}

std::vector<size_t> Shares(const std::vector<ps_piece> &p, int n) {
  std::vector<size_t> s(n, 0);
  for (const ps_piece &x : p) s[x.server] += x.len;
  return s;
}

}  // namespace

TEST(PsLayout, CoversEveryByteOnceForManyShapes) {
  const uint8_t weights[][4] = {{1, 1, 1, 1}, {255, 255, 255, 51}, {255, 20, 255, 255}, {7, 0, 200, 1}};
  const size_t sizes[] = {4, 4096, 4100, 65536, 1000004, 2u << 20, (64u << 20) + 12};
  for (const auto &w : weights)
    for (size_t bytes : sizes)
      for (uint64_t seq = 0; seq < 5; seq++) ExpectCovers(Layout(w, 4, seq, bytes), bytes, 4);
  ExpectCovers(Layout(weights[0], 4, 0, 0), 0, 4);
  EXPECT_EQ(0u, ps_layout(weights[0], 4, 0, 0, 4, 256u << 10, nullptr, 0));
}

// Each server's bytes are within one grain of its proportional share, and contiguous.
TEST(PsLayout, SharesWithinOneGrainOfProportional) {
  const uint8_t w[4] = {255, 255, 255, 51};
  for (size_t bytes : {size_t{2} << 20, size_t{3} << 20, size_t{64} << 20, size_t{1000} << 12})
    for (uint64_t seq = 0; seq < 8; seq++) {
      std::vector<ps_piece> p = Layout(w, 4, seq, bytes);
      std::vector<size_t> s = Shares(p, 4);
      for (int i = 0; i < 4; i++) {
        double exact = static_cast<double>(bytes) * w[i] / (3 * 255 + 51);
        EXPECT_LE(std::fabs(s[i] - exact), 4096.0) << "server " << i << " bytes " << bytes;
      }
      for (size_t k = 1; k < p.size(); k++) EXPECT_GE(p[k].server, p[k - 1].server) << "one range per server";
    }
}

TEST(PsLayout, DeterministicForTheSameInputs) {
  const uint8_t w[5] = {200, 13, 255, 255, 90};
  for (uint64_t seq : {0ull, 1ull, 31ull, 1000000007ull}) {
    std::vector<ps_piece> a = Layout(w, 5, seq, 5u << 20), b = Layout(w, 5, seq, 5u << 20);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); i++) {  // field by field: the struct has padding
      EXPECT_EQ(a[i].off, b[i].off) << "piece " << i;
      EXPECT_EQ(a[i].len, b[i].len) << "piece " << i;
      EXPECT_EQ(a[i].server, b[i].server) << "piece " << i;
    }
  }
}

// The grains left over by the proportional floors go to a different server as seq moves: over
// as many ops as servers, each server gets the extra grain equally often.
TEST(PsLayout, RemainderRotatesWithSeq) {
  const uint8_t w[4] = {1, 1, 1, 1};
  const size_t bytes = 4096 * 4 * 10 + 4096;  // one grain over an even split
  std::vector<int> extra(4, 0);
  for (uint64_t seq = 0; seq < 400; seq++) {
    std::vector<size_t> s = Shares(Layout(w, 4, seq, bytes), 4);
    int got = 0;
    for (int i = 0; i < 4; i++)
      if (s[i] == 4096 * 11) {
        extra[i]++;
        got++;
      }
    EXPECT_EQ(got, 1);
  }
  for (int i = 0; i < 4; i++) EXPECT_EQ(extra[i], 100) << "server " << i;
  // A tiny op (one grain) goes to each server in turn.
  for (uint64_t seq = 0; seq < 8; seq++) {
    std::vector<ps_piece> p = Layout(w, 4, seq, 8);
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].server, static_cast<int>(seq % 4));
    EXPECT_EQ(p[0].len, 8u);
  }
}

TEST(PsLayout, ZeroWeightGetsNothingAndAllZeroIsEqual) {
  const uint8_t w[3] = {10, 0, 10};
  for (uint64_t seq = 0; seq < 50; seq++)
    for (const ps_piece &x : Layout(w, 3, seq, 1u << 20)) EXPECT_NE(x.server, 1);
  for (uint64_t seq = 0; seq < 6; seq++)  // tiny ops rotate over the servers in use only
    EXPECT_NE(Layout(w, 3, seq, 4)[0].server, 1);
  const uint8_t z[3] = {0, 0, 0};
  std::vector<size_t> s = Shares(Layout(z, 3, 0, 3 * 65536), 3);
  for (int i = 0; i < 3; i++) EXPECT_EQ(s[i], 65536u);
}

// Piece sizes: about a quarter of a server's share, at least 16 KiB, at most the part limit, so a
// slow server's share comes in small pieces.
TEST(PsLayout, PieceSizes) {
  const uint8_t eq[4] = {1, 1, 1, 1};
  std::vector<ps_piece> p = Layout(eq, 4, 0, 2u << 20);  // NCCL's 8 x 256 KiB CollNet op
  ASSERT_EQ(p.size(), 16u);
  for (const ps_piece &x : p) EXPECT_EQ(x.len, 128u << 10);
  p = Layout(eq, 4, 0, 64u << 20);
  ASSERT_EQ(p.size(), 256u) << "capped at the part limit";
  for (const ps_piece &x : p) EXPECT_EQ(x.len, 256u << 10);
  p = Layout(eq, 4, 0, 64u << 10);  // 16 KiB per server: one piece each
  ASSERT_EQ(p.size(), 4u);
  const uint8_t slow[4] = {51, 255, 255, 255};
  p = Layout(slow, 4, 0, 2u << 20);
  size_t n0 = 0;
  for (const ps_piece &x : p) {
    EXPECT_LE(x.len, 256u << 10);
    if (x.server != 0) continue;
    n0++;
    EXPECT_EQ(x.len, 32u << 10);
  }
  EXPECT_EQ(n0, 4u) << "the slow server's 128 KiB in four pieces";
  p = Layout(eq, 4, 0, 1u << 20, 4, 4096);  // BRAID_PS_PARTITION_BYTES=4K
  EXPECT_EQ(p.size(), 256u);
  p = Layout(eq, 4, 0, 1u << 20, 4, 1000);  // below a grain: one grain
  EXPECT_EQ(p.size(), 256u);
}

// Every piece starts on an element boundary and is whole elements, whatever the element size.
TEST(PsLayout, ElementAligned) {
  EXPECT_EQ(ps_grain(1), 4096u);
  EXPECT_EQ(ps_grain(8), 4096u);
  EXPECT_EQ(ps_grain(12), 4104u);
  EXPECT_EQ(ps_grain(0), 4096u);
  const uint8_t w[3] = {255, 40, 180};
  for (size_t esize : {1, 2, 4, 8, 12})
    for (size_t count : {1, 3, 1000, 99999, 1 << 20}) {
      size_t bytes = count * esize;
      std::vector<ps_piece> p = Layout(w, 3, count, bytes, esize, 100000);
      ExpectCovers(p, bytes, 3);
      for (const ps_piece &x : p) {
        EXPECT_EQ(x.off % esize, 0u);
        EXPECT_EQ(x.len % esize, 0u);
      }
    }
}

// Heads that lost the same servers, in any order, send a partition to the same replacement.
TEST(PsLayout, RerouteAgreesWhateverTheOrderOfLosses) {
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
  // A layout whose server is lost: its pieces all land on the next one, covering the same bytes.
  const uint8_t w[4] = {255, 255, 255, 255};
  std::vector<ps_piece> p = Layout(w, 4, 3, 2u << 20);
  std::vector<size_t> s(4, 0);
  for (const ps_piece &x : p) s[ps_reroute(x.server, 1u << 1, 4)] += x.len;
  EXPECT_EQ(s[1], 0u);
  EXPECT_EQ(s[2], 1u << 20);
}

namespace {

// n completions of `bytes` each, one after another, every `every` ns, each taking `took` ns
// (the server idles for every - took between them); one op per completion.
void Feed(ps_rate *r, uint64_t *t, int n, size_t bytes, uint64_t took, uint64_t every) {
  for (int i = 0; i < n; i++) {
    ps_rate_start(r, *t);
    ps_rate_done(r, *t + took, bytes);
    *t += every;
    ps_rate_window(r, *t);
  }
}

}  // namespace

TEST(PsRate, WindowNeedsCompletionsAndOps) {
  ps_rate r{};
  uint64_t t = 0;
  EXPECT_EQ(0, ps_rate_window(&r, 100)) << "no work yet";
  Feed(&r, &t, PS_RATE_MIN_DONE - 1, 1000000, 1000000, 1000000);
  EXPECT_EQ(r.rate, 0) << "15 completions: the window is still open";
  Feed(&r, &t, 1, 1000000, 1000000, 1000000);
  EXPECT_DOUBLE_EQ(r.rate, 1.0) << "1 MB per ms = 1 byte per ns";
  // Many completions within few ops: the window waits for the 8th op.
  ps_rate q{};
  for (int i = 0; i < 40; i++) {
    ps_rate_start(&q, t);
    ps_rate_done(&q, t + 1000, 1000);
    t += 1000;
  }
  for (int op = 0; op < PS_RATE_MIN_OPS - 1; op++) ps_rate_window(&q, t);
  EXPECT_EQ(q.rate, 0);
  ps_rate_window(&q, t);
  EXPECT_GT(q.rate, 0);
}

// A server busy all the time at a quarter of the others' rate ends a little under a quarter of
// their weight; one that waits for work between partitions is not judged slow.
TEST(PsRate, IdleServerNotJudgedSlow) {
  ps_rate fast{}, slow{}, idle{};
  uint64_t tf = 0, ts = 0, ti = 0;
  Feed(&fast, &tf, 160, 1000000, 1000000, 1000000);  // 1 MB per ms, busy throughout
  Feed(&slow, &ts, 160, 1000000, 4000000, 4000000);  // 1 MB per 4 ms, busy throughout
  Feed(&idle, &ti, 160, 1000000, 1000000, 4000000);  // 1 MB per ms, then 3 ms waiting
  EXPECT_NEAR(fast.rate, 1.0, 1e-9);
  EXPECT_NEAR(slow.rate, 0.25, 1e-9);
  EXPECT_NEAR(idle.rate, 1.0, 1e-9) << "its first window sets it; busy-time rate";
  // Now the once-fast server gets work slowly, and looks slower while busy (its pieces wait on
  // the other heads): it waited for work most of the window, so its estimate does not drop.
  Feed(&idle, &ti, 160, 1000000, 2000000, 8000000);
  EXPECT_NEAR(idle.rate, 1.0, 1e-9);
  // But an idle window that shows it faster than thought raises it.
  ps_rate low{};
  uint64_t tl = 0;
  Feed(&low, &tl, 16, 1000000, 4000000, 4000000);  // measured busy at 0.25
  EXPECT_NEAR(low.rate, 0.25, 1e-9);
  Feed(&low, &tl, 16, 1000000, 2400000, 4000000);  // busy 60%, 0.42 per ns while busy
  EXPECT_NEAR(low.rate, 0.25, 1e-9) << "a server under 3/4 busy is judged by its busy windows only";
  Feed(&low, &tl, 160, 1000000, 1000000, 4000000);  // busy 1/4, 1 per ns while busy
  EXPECT_NEAR(low.rate, 0.25, 1e-9) << "idle windows (one head's bursts) never raise it";
  ps_rate r[3] = {fast, slow, idle};
  uint8_t w[PS_MAX_SERVERS];
  ps_weights(r, 3, 0, w);
  EXPECT_EQ(w[0], 255);
  EXPECT_EQ(w[1], 51) << "255 x 0.8 x 1/4";
  EXPECT_EQ(w[2], 255);
}

// One odd window (a stall) moves the estimate little: the median of the last three windows
// ignores it, and the estimate moves a quarter of the way towards the median.
TEST(PsRate, MedianResistsOneOutlierWindow) {
  ps_rate r{};
  uint64_t t = 0;
  Feed(&r, &t, 48, 1000000, 1000000, 1000000);  // three windows at 1.0
  EXPECT_NEAR(r.rate, 1.0, 1e-9);
  Feed(&r, &t, 16, 1000000, 10000000, 10000000);  // one window at 0.1, busy throughout
  EXPECT_NEAR(r.rate, 1.0, 1e-9) << "median of 1, 1, 0.1";
  Feed(&r, &t, 32, 1000000, 1000000, 1000000);  // two more at 1.0: the outlier is forgotten
  EXPECT_NEAR(r.rate, 1.0, 1e-9);
  // A real change: windows at 0.5 move it a quarter of the way towards the median each, once
  // the median has moved: 1 -> 1 (median of 0.5, 1, 1) -> 0.875 -> 0.78125.
  Feed(&r, &t, 16, 1000000, 2000000, 2000000);
  EXPECT_NEAR(r.rate, 1.0, 1e-9);
  Feed(&r, &t, 16, 1000000, 2000000, 2000000);
  EXPECT_NEAR(r.rate, 0.875, 1e-9);
  Feed(&r, &t, 16, 1000000, 2000000, 2000000);
  EXPECT_NEAR(r.rate, 0.78125, 1e-9);
}

TEST(PsRate, WeightsRule) {
  ps_rate r[5]{};
  r[0].rate = 1.0;   // the fastest
  r[1].rate = 0.85;  // within a fifth: as the fastest
  r[2].rate = 0.1;   // 255 x 0.8 x 0.1 = 20.4
  r[3].rate = 0.001; // at least 1
  r[4].rate = 0;     // unmeasured: as the fastest
  uint8_t w[PS_MAX_SERVERS];
  ps_weights(r, 5, 0, w);
  EXPECT_EQ(w[0], 255);
  EXPECT_EQ(w[1], 255);
  EXPECT_EQ(w[2], 20);
  EXPECT_EQ(w[3], 1);
  EXPECT_EQ(w[4], 255);
  for (int i = 5; i < PS_MAX_SERVERS; i++) EXPECT_EQ(w[i], 0);
  ps_weights(r, 5, 1u << 0, w);  // the fastest lost: the others rescale, the lost one gets 0
  EXPECT_EQ(w[0], 0);
  EXPECT_EQ(w[1], 255);
  EXPECT_EQ(w[2], 24);  // 255 x 0.8 x 0.1 / 0.85
  ps_rate none[2]{};
  ps_weights(none, 2, 0, w);
  EXPECT_EQ(w[0], 255);
  EXPECT_EQ(w[1], 255);
}

namespace {

// n windows of a server that works at `rate` bytes per ns for `busy` of each op's time (the rest
// it waits for work): one op per completion, 16 ops per window.
void Windows(ps_rate *r, uint64_t *t, int n, double rate, double busy) {
  const uint64_t every = 1000000;
  const uint64_t took = (uint64_t)(every * busy);
  Feed(r, t, n * PS_RATE_MIN_DONE, (size_t)(rate * took), took, every);
}

// Windows (of 16 operations here) until one closes PS_PROBE_SETTLE_OPS after a probe or a
// promotion: the ones before are measured before the new weight took effect.
constexpr int kSettle = (PS_PROBE_SETTLE_OPS + PS_RATE_MIN_DONE - 1) / PS_RATE_MIN_DONE;

uint8_t WeightOf(ps_rate *fast, ps_rate *slow) {
  ps_rate r[2] = {*fast, *slow};
  uint8_t w[PS_MAX_SERVERS];
  ps_weights(r, 2, 0, w);
  *fast = r[0];
  *slow = r[1];
  return w[1];
}

// A fast server and a slow one, each measured over 4 busy windows; the slow one's weight.
uint8_t Settle(ps_rate *fast, uint64_t *tf, ps_rate *slow, uint64_t *ts, double slow_rate) {
  Windows(fast, tf, 4, 1.0, 1.0);
  Windows(slow, ts, 4, slow_rate, 1.0);
  return WeightOf(fast, slow);
}

}  // namespace

// A server that was slow and recovered is idle under its small share, so its windows never
// count: after PS_PROBE_FIRST idle windows its weight is doubled, and again, until a window that
// counts measures it under load; that rate is taken as it is, and the weight is 255 again.
TEST(PsProbe, ARecoveredServerEarnsItsWeightBack) {
  ps_rate fast{}, slow{};
  uint64_t tf = 0, ts = 0;
  ASSERT_EQ(Settle(&fast, &tf, &slow, &ts, 0.25), 51) << "255 x 0.8 x 1/4";
  EXPECT_EQ(slow.reduced, 1);
  EXPECT_EQ(fast.reduced, 0);
  // Recovered: full speed, a fifth of the time busy (its share is small).
  Windows(&slow, &ts, PS_PROBE_FIRST - 1, 1.0, 0.2);
  EXPECT_EQ(slow.boost, 0);
  EXPECT_EQ(WeightOf(&fast, &slow), 51) << "7 idle windows: no probe yet";
  Windows(&slow, &ts, 1, 1.0, 0.2);
  EXPECT_EQ(slow.boost, 1);
  EXPECT_EQ(WeightOf(&fast, &slow), 102) << "the 8th: doubled";
  EXPECT_NEAR(slow.rate, 0.25, 1e-9) << "a probe changes the weight, not the estimate";
  // Busy 60%: not loaded enough to answer (its rate would read low), nor idle enough to double.
  Windows(&slow, &ts, 2 * PS_PROBE_FIRST, 1.0, 0.6);
  EXPECT_EQ(slow.boost, 1);
  EXPECT_NEAR(slow.rate, 0.25, 1e-9);
  Windows(&slow, &ts, PS_PROBE_FIRST, 1.0, 0.4);
  EXPECT_EQ(WeightOf(&fast, &slow), 204) << "still idle at twice the share: doubled again";
  Windows(&slow, &ts, kSettle, 1.0, 0.9);  // now loaded: it counts
  EXPECT_EQ(slow.boost, 0);
  EXPECT_NEAR(slow.rate, 1.0, 1e-9) << "the loaded window's rate, as it is";
  EXPECT_EQ(WeightOf(&fast, &slow), 255);
  EXPECT_EQ(slow.reduced, 0);
  // At 255 a server is never probed, however idle.
  Windows(&slow, &ts, 4 * PS_PROBE_FIRST, 1.0, 0.2);
  EXPECT_EQ(slow.boost, 0);
  EXPECT_EQ(WeightOf(&fast, &slow), 255);
}

// Only a server busy under half the time could carry twice its share, so only such windows lead
// to a probe.  A server that is still slow answers a probe with its slow rate: back to its
// weight, and the wait before the next probe doubles each time, up to PS_PROBE_MAX windows.
TEST(PsProbe, AStillSlowServerIsProbedLessAndLessOften) {
  ps_rate fast{}, slow{};
  uint64_t tf = 0, ts = 0;
  ASSERT_EQ(Settle(&fast, &tf, &slow, &ts, 0.25), 51);
  // Busy just over half the time at its weight: it could not carry twice its share, never probed.
  Windows(&slow, &ts, 4 * PS_PROBE_FIRST, 0.25, 0.55);
  EXPECT_EQ(slow.boost, 0);
  // Busy under half, but not 8 windows in a row: no probe either.
  for (int i = 0; i < 4; i++) {
    Windows(&slow, &ts, PS_PROBE_FIRST - 1, 0.25, 0.4);
    Windows(&slow, &ts, 1, 0.25, 0.6);
  }
  EXPECT_EQ(slow.boost, 0);
  uint32_t wait = PS_PROBE_FIRST;
  for (int probe = 0; probe < 8; probe++) {
    // Busy 40% at its weight (the heads' other work): idle windows, then a probe.
    Windows(&slow, &ts, (int)wait - 1, 0.25, 0.4);
    ASSERT_EQ(slow.boost, 0) << "probe " << probe << ": not before " << wait << " idle windows";
    Windows(&slow, &ts, 1, 0.25, 0.4);
    ASSERT_EQ(slow.boost, 1) << "probe " << probe;
    EXPECT_EQ(WeightOf(&fast, &slow), 102);
    Windows(&slow, &ts, kSettle, 0.25, 1.0);  // the doubled share loads it: still a quarter
    EXPECT_EQ(slow.boost, 0);
    EXPECT_NEAR(slow.rate, 0.25, 1e-9);
    EXPECT_EQ(WeightOf(&fast, &slow), 51);
    wait = wait * 2 > PS_PROBE_MAX ? PS_PROBE_MAX : wait * 2;
    EXPECT_EQ(slow.wait, wait);
  }
  EXPECT_EQ(wait, (uint32_t)PS_PROBE_MAX);
}

// A probe answered at half the fastest's rate or more promotes the server to the fastest's rate
// (a full share, where it is measured as the others are); its next window that counts is taken
// as it is, so a server only partly recovered drops to its real weight at once.
TEST(PsProbe, HalfTheFastestIsPromotedThenVerified) {
  ps_rate fast{}, slow{};
  uint64_t tf = 0, ts = 0;
  ASSERT_EQ(Settle(&fast, &tf, &slow, &ts, 0.25), 51);
  Windows(&slow, &ts, PS_PROBE_FIRST, 0.6, 0.3);
  ASSERT_EQ(WeightOf(&fast, &slow), 102);
  Windows(&slow, &ts, kSettle, 0.6, 0.9);  // answers at 0.6 of the fastest
  EXPECT_EQ(WeightOf(&fast, &slow), 255) << "promoted to a full share";
  EXPECT_NEAR(slow.rate, 1.0, 1e-9) << "the fastest's rate";
  EXPECT_EQ(slow.verify, 1);
  Windows(&slow, &ts, kSettle - 1, 0.3, 1.0);  // before the full share took effect: ignored
  EXPECT_EQ(slow.verify, 1);
  EXPECT_NEAR(slow.rate, 1.0, 1e-9);
  Windows(&slow, &ts, 1, 0.5, 1.0);  // at the full share it shows its real rate
  EXPECT_EQ(slow.verify, 0);
  EXPECT_NEAR(slow.rate, 0.5, 1e-9) << "the verifying window, as it is";
  EXPECT_EQ(WeightOf(&fast, &slow), 102) << "255 x 0.8 x 1/2";
  EXPECT_EQ(slow.wait, (uint32_t)PS_PROBE_FIRST * 2) << "slower than promoted: a probe that found it no faster";
  // An answer under half the fastest's rate is taken as it is, without a promotion.
  ps_rate f2{}, s2{};
  uint64_t t2 = 0, u2 = 0;
  ASSERT_EQ(Settle(&f2, &t2, &s2, &u2, 0.25), 51);
  Windows(&s2, &u2, PS_PROBE_FIRST, 0.4, 0.3);
  Windows(&s2, &u2, kSettle, 0.4, 0.9);
  EXPECT_NEAR(s2.rate, 0.4, 1e-9);
  EXPECT_EQ(WeightOf(&f2, &s2), 82) << "255 x 0.8 x 0.4";
  EXPECT_EQ(s2.verify, 0);
  EXPECT_EQ(s2.promote, 0);
  EXPECT_EQ(s2.wait, (uint32_t)PS_PROBE_FIRST) << "1.6 times the estimate: found faster";
  // Twice the estimate promotes it too, though under half the fastest's rate (a noisy fastest).
  ps_rate f3{}, s3{};
  uint64_t t3 = 0, u3 = 0;
  ASSERT_EQ(Settle(&f3, &t3, &s3, &u3, 0.1), 20);
  Windows(&s3, &u3, PS_PROBE_FIRST, 0.3, 0.3);
  ASSERT_EQ(WeightOf(&f3, &s3), 41);
  Windows(&s3, &u3, kSettle - 1, 0.3, 0.6);  // neither counts nor leads to a probe
  Windows(&s3, &u3, 1, 0.3, 0.9);            // the answer: 3 times the estimate
  EXPECT_EQ(WeightOf(&f3, &s3), 255);
  EXPECT_EQ(s3.verify, 1);
}

namespace {

// A closed loop of rank 0 and 4 servers: each op's layout from the weights decided kDelay ops
// before, every server's pieces outstanding from the op's start and completing evenly until its
// share is done at its rate; the op ends when the last server is done.  Returns each op's time.
constexpr int kServers = 4, kDelay = 4;
std::vector<double> Loop(int ops, const std::vector<double> &rate0_at_op) {
  const size_t bytes = 4u << 20;
  ps_rate r[kServers]{};
  std::vector<std::vector<uint8_t>> decided;
  ps_piece *pc = nullptr;
  uint32_t cap = 0;
  double t = 0;
  std::vector<double> took;
  for (int op = 0; op < ops; op++) {
    uint8_t w[PS_MAX_SERVERS] = {};
    if (op < kDelay) memset(w, 255, kServers);
    else memcpy(w, decided[op - kDelay].data(), kServers);
    int64_t n = ps_layout_buf(w, kServers, (uint64_t)op, bytes, 4, 256u << 10, &pc, &cap);
    EXPECT_GT(n, 0);
    double share[kServers] = {}, pieces[kServers] = {}, end = 0;
    for (int64_t p = 0; p < n; p++) share[pc[p].server] += (double)pc[p].len, pieces[pc[p].server]++;
    for (int s = 0; s < kServers; s++) {
      double rate = s == 0 ? rate0_at_op[op] : 1.0, done = share[s] / rate;
      for (int j = 0; j < pieces[s]; j++) ps_rate_start(&r[s], (uint64_t)t);
      for (int j = 0; j < pieces[s]; j++)
        ps_rate_done(&r[s], (uint64_t)(t + done * (j + 1) / pieces[s]), (size_t)(share[s] / pieces[s]));
      end = std::max(end, done);
    }
    took.push_back(end);
    t += end;
    for (int s = 0; s < kServers; s++) ps_rate_window(&r[s], (uint64_t)t);
    uint8_t mine[PS_MAX_SERVERS];
    ps_weights(r, kServers, 0, mine);
    decided.emplace_back(mine, mine + kServers);
  }
  free(pc);
  return took;
}

}  // namespace

// The whole loop: a server at a quarter of the others' rate costs about its share; once it
// recovers, the operations are back within 5% of healthy (before probing, its share stayed a
// fifth of the others' for good).  Busy 80% of the time at its weight, it is never probed while
// slow, so it is probed PS_PROBE_FIRST windows after it recovered.
TEST(PsProbe, ClosedLoopRecovers) {
  const double healthy = (4u << 20) / (double)kServers;
  std::vector<double> rate(1600, 1.0);
  for (int op = 0; op < 600; op++) rate[op] = 0.25;
  std::vector<double> took = Loop(1600, rate);
  double slow = *std::min_element(took.begin() + 400, took.begin() + 600);
  EXPECT_LT(slow, 1.2 * healthy * 4 / 3.25) << "slow: about its share";
  int back = -1;
  for (int op = 600; op < 1600 && back < 0; op++)
    if (took[op] <= 1.05 * healthy) back = op - 600;
  ASSERT_GE(back, 0) << "never back within 5% of healthy";
  EXPECT_LE(back, 300);
  for (int op = 600 + back + 40; op < 1600; op++) ASSERT_LE(took[op], 1.05 * healthy) << "op " << op << ": it stays back";
  printf("slow %.3f x healthy; back within 5%% %d ops after it recovered\n", slow / healthy, back);
}
