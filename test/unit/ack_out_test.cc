// Acknowledgements on a socket that takes only part of a frame (issue 19 item 5): the rest goes
// out first on a later call, and the sender reads whole, well-formed frames.
#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <vector>

extern "C" {
#include "transport/socket/ack_out.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "wire/wire.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
}

namespace {

// A socket that is nearly full: every other call takes nothing, the others at most 7 bytes.
int calls = 0;
ssize_t ShortSend(int fd, const void* buf, size_t len, int flags) {
  if (++calls % 2 == 0) {
    errno = EAGAIN;
    return -1;
  }
  return send(fd, buf, len < 7 ? len : 7, flags);
}

struct ShortWrites {
  ShortWrites() { braid_ack_send = ShortSend; }
  ~ShortWrites() { braid_ack_send = send; }
};

TEST(AckOut, PartFrameIsFinishedBeforeTheNextStarts) {
  int sv[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
  ShortWrites shorts;
  struct braid_ack_out o = {};
  uint8_t hdr[2][BRAID_FRAME_HDR_BYTES];
  for (int k = 0; k < 2; k++) {
    struct braid_frame f = {};
    f.type = BRAID_FRAME_ACK;
    f.seq = 100 + k;
    f.offset = 7 + k;
    braid_frame_encode(&f, hdr[k]);
  }
  ASSERT_TRUE(braid_ack_out_send(&o, sv[0], hdr[0])) << "a part went out: the frame is committed";
  EXPECT_EQ(7u, o.off);
  int rounds = 0;
  while (!braid_ack_out_flush(&o, sv[0])) ASSERT_LT(++rounds, 100);
  EXPECT_GE(rounds, 1) << "the stand-in wrote the frame in several calls";
  calls = 1;  // the next call is refused whole: nothing of the frame goes out, nothing is kept
  EXPECT_FALSE(braid_ack_out_send(&o, sv[0], hdr[1]));
  EXPECT_EQ(0u, o.len);
  ASSERT_TRUE(braid_ack_out_send(&o, sv[0], hdr[1]));
  while (!braid_ack_out_flush(&o, sv[0])) ASSERT_LT(++rounds, 200);
  uint8_t got[2 * BRAID_FRAME_HDR_BYTES + 1];
  ASSERT_EQ((ssize_t)(2 * BRAID_FRAME_HDR_BYTES), recv(sv[1], got, sizeof got, MSG_DONTWAIT));
  for (int k = 0; k < 2; k++) {
    struct braid_frame f;
    char why[128];
    ASSERT_EQ(0, braid_frame_decode(got + k * BRAID_FRAME_HDR_BYTES, &f, why, sizeof why)) << why;
    EXPECT_EQ(BRAID_FRAME_ACK, (int)f.type);
    EXPECT_EQ(100u + k, f.seq);
    EXPECT_EQ(7u + k, f.offset);
  }
  close(sv[0]);
  close(sv[1]);
}

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The whole data path with two streams (acknowledged chunks) while every acknowledgement is
// written a few bytes at a time: large sends wait for their acks, so each one must arrive whole.
TEST(AckOut, AcknowledgementsWrittenInPiecesKeepTheConnectionWorking) {
  const ncclNet_v11_t& net = ncclNetPlugin_v11;
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_NSTREAMS", "2", 1);
  braid_params_reload();
  void* ctx = nullptr;
  ASSERT_EQ(ncclSuccess, net.init(&ctx, 1, nullptr, nullptr, nullptr));
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *s = nullptr, *r = nullptr;
  ASSERT_EQ(ncclSuccess, net.listen(ctx, 0, handle, &listen));
  for (double end = Now() + 5; (!s || !r) && Now() < end;) {
    if (!s) { ASSERT_EQ(ncclSuccess, net.connect(ctx, 0, handle, &s, nullptr)); }
    if (!r) { ASSERT_EQ(ncclSuccess, net.accept(listen, &r, nullptr)); }
  }
  ASSERT_TRUE(s && r);
  net.closeListen(listen);
  {
    ShortWrites shorts;
    // Like NCCL, the next receive is posted before the current one completes: the receive comm
    // is still driven (by test on that receive) after the current message is in, which is when
    // the rest of an acknowledgement goes out.  The last receive is for a small send, which
    // completes on its acknowledgement too: with no receive left, the receiver writes that one
    // whole before test() returns, since NCCL may never call the receive comm again.
    const int count = 20;
    const size_t size = 1 << 20;
    std::vector<char> src(size);
    std::vector<std::vector<char>> dst(count + 1, std::vector<char>(size));
    int tag = 3;
    auto post = [&](int m) {
      void* d = dst[m].data();
      size_t cap = size;
      void* rq = nullptr;
      EXPECT_EQ(ncclSuccess, net.irecv(r, 1, &d, &cap, &tag, nullptr, nullptr, &rq));
      return rq;
    };
    void* rq = post(0);
    for (int m = 0; m <= count; m++) {
      size_t len = m < count ? size : 100;
      for (size_t i = 0; i < len; i++) src[i] = (char)(i * 131 + m * 7 + (i >> 12));
      void* next = m < count ? post(m + 1) : nullptr;
      void* sq = nullptr;
      for (double end = Now() + 5; !sq && Now() < end;)
        ASSERT_EQ(ncclSuccess, net.isend(s, src.data(), len, tag, nullptr, nullptr, &sq));
      ASSERT_TRUE(rq && sq);
      int rd = 0, sd = 0, nd = 0, got = 0, sz = 0, nsz = 0;
      for (double end = Now() + 10; (!rd || !sd) && Now() < end;) {
        if (!sd) { ASSERT_EQ(ncclSuccess, net.test(sq, &sd, &sz)) << "message " << m; }
        if (!rd) { ASSERT_EQ(ncclSuccess, net.test(rq, &rd, &got)) << "message " << m; }
        else if (next) { ASSERT_EQ(ncclSuccess, net.test(next, &nd, &nsz)) << "message " << m; }
      }
      ASSERT_TRUE(rd && sd) << "message " << m << " did not complete";
      ASSERT_FALSE(nd);
      EXPECT_EQ((size_t)got, len);
      EXPECT_TRUE(!memcmp(src.data(), dst[m].data(), len)) << "message " << m;
      rq = next;
    }
  }
  net.closeSend(s);
  net.closeRecv(r);
  net.finalize(ctx);
  unsetenv("BRAID_NSTREAMS");
  braid_params_reload();
}

}  // namespace
