// The libfabric endpoint layer (net_plugin/transport/ofi/ofi.c) on loopback with the tcp provider: frames as
// header + tagged payload, the registration cache, cancellation, bad peer addresses.  Needs
// libfabric1 (installed by tools/deps.sh test and .ci/run).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

#include <vector>

extern "C" {
#include "nccl_plugin/net.h"
#include "transport/ofi/ofi.h"
#include "param.h"
}

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

class Ofi : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FI_PROVIDER", "tcp", 0);
    char why[300] = "";
    int hw = -1;
    ASSERT_TRUE(braid_ofi_probe(&hw, why, sizeof why)) << why;
    EXPECT_EQ(0, hw) << braid_ofi_provider();
    char err[320] = "";
    a_ = braid_ofi_ep_open("lo", 0, err, sizeof err);
    ASSERT_NE(nullptr, a_) << err;
    b_ = braid_ofi_ep_open("lo", 0, err, sizeof err);
    ASSERT_NE(nullptr, b_) << err;
    uint8_t na[BRAID_OFI_NAME_MAX], nb[BRAID_OFI_NAME_MAX];
    size_t la = braid_ofi_ep_name(a_, na, sizeof na), lb = braid_ofi_ep_name(b_, nb, sizeof nb);
    ASSERT_GT(la, 0u);
    ASSERT_GT(lb, 0u);
    ASSERT_EQ(0, braid_ofi_ep_connect(a_, nb, lb, err, sizeof err)) << err;
    ASSERT_EQ(0, braid_ofi_ep_connect(b_, na, la, err, sizeof err)) << err;
  }
  void TearDown() override {
    braid_ofi_ep_close(a_);
    braid_ofi_ep_close(b_);
  }
  // Drives both endpoints until pred() or 10 s; collects b's and a's payload completions.
  template <class P>
  bool Drive(P pred, double secs = 10) {
    for (double end = Now() + secs; Now() < end;) {
      braid_ofi_done d[8];
      int n = braid_ofi_progress(a_, d, 8);
      if (n < 0) return ADD_FAILURE() << braid_ofi_error(a_), false;
      for (int i = 0; i < n; i++) done_a_.push_back(d[i]);
      n = braid_ofi_progress(b_, d, 8);
      if (n < 0) return ADD_FAILURE() << braid_ofi_error(b_), false;
      for (int i = 0; i < n; i++) done_b_.push_back(d[i]);
      if (pred()) return true;
    }
    return false;
  }
  // Retries a post while the provider says "not now" (the first send also sets up the
  // provider's connection), driving both endpoints meanwhile.
  template <class F>
  int Post(F post) {
    int rc = -EAGAIN;
    for (double end = Now() + 10; rc == -EAGAIN && Now() < end;)
      if ((rc = post()) == -EAGAIN) Drive([] { return true; });
    return rc;
  }
  braid_ofi_ep *a_ = nullptr, *b_ = nullptr;
  std::vector<braid_ofi_done> done_a_, done_b_;
};

TEST_F(Ofi, FramesArriveAsHeaderThenTaggedPayloadInPlace) {
  braid_ofi_ep_force_registration(a_);
  braid_ofi_ep_force_registration(b_);
  const size_t kLen = 300000;
  std::vector<uint8_t> src(3 * kLen), dst(3 * kLen, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = (uint8_t)(i * 7 + 3);
  int ctx[3];
  for (int k = 0; k < 3; k++) {
    uint8_t hdr[BRAID_OFI_HDR_BYTES];
    memset(hdr, 0x40 + k, sizeof hdr);
    ASSERT_EQ(0, Post([&] { return braid_ofi_send_hdr(a_, hdr); }));
    ASSERT_EQ(0, Post([&] { return braid_ofi_send_payload(a_, src.data() + k * kLen, kLen, 100 + k, &ctx[k]); }))
        << braid_ofi_error(a_);
  }
  // Headers come in order; each payload is posted where its header says (here: in reverse).
  int seen = 0;
  ASSERT_TRUE(Drive([&] {
    while (const uint8_t* h = braid_ofi_hdr_peek(b_)) {
      EXPECT_EQ(0x40 + seen, h[0]);
      braid_ofi_hdr_consume(b_);
      seen++;
    }
    return seen == 3;
  }));
  for (int k = 2; k >= 0; k--)
    ASSERT_EQ(0, Post([&] { return braid_ofi_recv_payload(b_, dst.data() + k * kLen, kLen, 100 + k, &ctx[k], false); }));
  ASSERT_TRUE(Drive([&] { return done_a_.size() == 3 && done_b_.size() == 3; }));
  for (const braid_ofi_done& d : done_b_) {
    EXPECT_EQ(BRAID_OFI_OK, d.status);
    EXPECT_EQ(kLen, d.len);
  }
  EXPECT_EQ(src, dst);
  EXPECT_EQ(0, braid_ofi_outstanding(a_));
  EXPECT_EQ(0, braid_ofi_outstanding(b_));
  // One registration covers the three sends from one buffer; the next three hit the cache.
  uint64_t regs, hits;
  braid_ofi_ep_mr_counts(a_, &regs, &hits);
  EXPECT_GE(regs, 1u);
  EXPECT_LE(regs, 3u);
  done_a_.clear();
  for (int k = 0; k < 3; k++) {
    uint8_t hdr[BRAID_OFI_HDR_BYTES] = {};
    ASSERT_EQ(0, Post([&] { return braid_ofi_send_hdr(a_, hdr); }));
    ASSERT_EQ(0, Post([&] { return braid_ofi_send_payload(a_, src.data() + k * kLen, kLen, 200 + k, &ctx[k]); }));
    ASSERT_EQ(0, Post([&] { return braid_ofi_recv_payload(b_, dst.data() + k * kLen, kLen, 200 + k, &ctx[k], false); }));
  }
  ASSERT_TRUE(Drive([&] { return done_a_.size() == 3 && done_b_.size() == 6; }));
  uint64_t regs2, hits2;
  braid_ofi_ep_mr_counts(a_, &regs2, &hits2);
  EXPECT_EQ(regs, regs2);
  EXPECT_GE(hits2, hits + 3);
  // Released memory (NCCL's deregMr, a freed buffer) is registered afresh next time.
  braid_ofi_ep_forget(a_, src.data(), src.size());
  ASSERT_EQ(0, Post([&] { return braid_ofi_send_payload(a_, src.data(), kLen, 300, &ctx[0]); }));
  ASSERT_EQ(0, Post([&] { return braid_ofi_recv_payload(b_, dst.data(), kLen, 300, &ctx[0], false); }));
  ASSERT_TRUE(Drive([&] { return done_a_.size() == 4 && done_b_.size() == 7; }));
  uint64_t regs3, hits3;
  braid_ofi_ep_mr_counts(a_, &regs3, &hits3);
  EXPECT_EQ(regs2 + 1, regs3);
  EXPECT_EQ(hits2, hits3);
}

TEST_F(Ofi, CancelledReceiveReportsCancelledAndNeverLands) {
  std::vector<uint8_t> dst(4096, 0xEE);
  int ctx;
  ASSERT_EQ(0, Post([&] { return braid_ofi_recv_payload(b_, dst.data(), dst.size(), 7, &ctx, false); }));
  braid_ofi_cancel(b_, &ctx);
  ASSERT_TRUE(Drive([&] { return done_b_.size() == 1; }));
  EXPECT_EQ(BRAID_OFI_CANCELED, done_b_[0].status);
  EXPECT_EQ(&ctx, done_b_[0].ctx);
  // The payload for that tag, sent afterwards, waits unmatched: nothing lands in dst.
  std::vector<uint8_t> src(4096, 0x11);
  ASSERT_EQ(0, Post([&] { return braid_ofi_send_payload(a_, src.data(), src.size(), 7, &ctx); }));
  Drive([&] { return false; }, 0.3);
  EXPECT_EQ(std::vector<uint8_t>(4096, 0xEE), dst);
}

TEST_F(Ofi, DiscardIntoAShortBufferReportsTruncated) {
  std::vector<uint8_t> src(100000, 0x5A), sink(4096);
  int ctx;
  ASSERT_EQ(0, Post([&] { return braid_ofi_send_payload(a_, src.data(), src.size(), 9, &ctx); }));
  ASSERT_EQ(0, Post([&] { return braid_ofi_recv_payload(b_, sink.data(), sink.size(), 9, &ctx, false); }));
  ASSERT_TRUE(Drive([&] { return done_b_.size() == 1 && done_a_.size() == 1; }));
  EXPECT_EQ(BRAID_OFI_TRUNCATED, done_b_[0].status);
  EXPECT_EQ(BRAID_OFI_OK, done_a_[0].status);
}

ssize_t CancelNothing(struct fid*, void*) { return 0; }

// A receive posted straight into NCCL's buffer (single-stream ofi) must be gone when close
// returns, since NCCL frees that memory next: cancelled, or the process stops with a clear error
// (before, close gave up after 200 ms and returned with the receive still posted).
TEST_F(Ofi, CloseNeverReturnsWithAReceiveIntoApplicationMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<char> app(4096);
  int ctx = 0;
  ASSERT_EQ(0, Post([&] { return braid_ofi_recv_payload(b_, app.data(), app.size(), 11, &ctx, true); }));
  setenv("BRAID_TIMEOUT_MS", "300", 1);
  braid_params_reload();
  EXPECT_DEATH(
      {
        braid_ofi_cancel_hook = CancelNothing;  // a provider that never gives the receive back
        braid_ofi_ep_close(b_);
      },
      "could not be cancelled");
  unsetenv("BRAID_TIMEOUT_MS");
  braid_params_reload();
  EXPECT_TRUE(braid_ofi_ep_close(b_)) << "a receive the provider cancels is closed at once";
  b_ = nullptr;
}

TEST(OfiSetup, BadPeerAddressIsRefusedWithAReason) {
  setenv("FI_PROVIDER", "tcp", 0);
  char err[320] = "";
  braid_ofi_ep* e = braid_ofi_ep_open("lo", 0, err, sizeof err);
  ASSERT_NE(nullptr, e) << err;
  const uint8_t junk[3] = {1, 2, 3};
  EXPECT_NE(0, braid_ofi_ep_connect(e, junk, sizeof junk, err, sizeof err));
  EXPECT_NE(std::string(err).find("address"), std::string::npos) << err;
  // Nothing can be sent before a peer is known.
  uint8_t hdr[BRAID_OFI_HDR_BYTES] = {};
  EXPECT_EQ(-EIO, braid_ofi_send_hdr(e, hdr));
  braid_ofi_ep_close(e);
}

}  // namespace

// Debian's libfabric is built without CUDA: GPU memory must be reported as not carried, with the
// reason found by a real probe (the provider's FI_HMEM answer and a registration through the CUDA
// interface), never guessed from the provider's name.
TEST_F(Ofi, GpuMemoryIsReportedHostOnlyWithTheProbedReason) {
  char why[320] = "";
  EXPECT_EQ(braid_ofi_hmem(why, sizeof why), NCCL_PTR_HOST);
  EXPECT_TRUE(strstr(why, "does not offer FI_HMEM")) << why;  // tcp;ofi_rxm in libfabric 1.17
  char again[320] = "";
  braid_ofi_hmem(again, sizeof again);
  EXPECT_STREQ(why, again) << "probed once per process";
  // shm offers FI_HMEM, so there the registration through the CUDA interface decides.  libfabric
  // reads FI_PROVIDER (tcp here) once per process: the check runs in a child of this binary.
  std::string cmd = "FI_PROVIDER=shm /proc/" + std::to_string(getpid()) +
                    "/exe --gtest_also_run_disabled_tests --gtest_filter=OfiHmemChild.DISABLED_ShmProbe"
                    " >/dev/null 2>&1";
  EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
}

// Run only by the test above, in a process whose libfabric sees FI_PROVIDER=shm.
TEST(OfiHmemChild, DISABLED_ShmProbe) {
  char why[320] = "";
  ASSERT_TRUE(braid_ofi_probe(nullptr, why, sizeof why)) << why;
  EXPECT_EQ(braid_ofi_hmem_of("shm", why, sizeof why), NCCL_PTR_HOST);
  EXPECT_TRUE(strstr(why, "CUDA interface is not available")) << why;
}
