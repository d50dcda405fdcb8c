// The net plugin's data path in one process over loopback, through the exported v11 table:
// NCCL's semantics (posting-order matching, tags inside grouped receives, real sizes, NULL
// requests, 32 in flight) and its failure modes (size mismatch, stray connections, bad handles).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <vector>

extern "C" {
#include "nccl_plugin/net.h"
#include "param.h"
#include "wire/handle.h"
#include "wire/wire.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
}
#include "hs_peer.h"

namespace {

const ncclNet_v11_t& net = ncclNetPlugin_v11;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

class Loopback : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_TIMEOUT_MS", "2000", 1);
    braid_params_reload();
    ASSERT_EQ(net.init(&ctx_, 1, nullptr, nullptr, nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net.devices(&ndev), ncclSuccess);
    ASSERT_GE(ndev, 1);
    Connect(&send_, &recv_);
  }
  void TearDown() override {
    if (send_) { EXPECT_EQ(net.closeSend(send_), ncclSuccess); }
    if (recv_) { EXPECT_EQ(net.closeRecv(recv_), ncclSuccess); }
    EXPECT_EQ(net.finalize(ctx_), ncclSuccess);
  }

  void Connect(void** s, void** r) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    ASSERT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
    *s = *r = nullptr;
    double end = Now() + 5;
    while ((!*s || !*r) && Now() < end) {
      if (!*s) { ASSERT_EQ(net.connect(ctx_, 0, handle, s, nullptr), ncclSuccess); }
      if (!*r) { ASSERT_EQ(net.accept(listen, r, nullptr), ncclSuccess); }
    }
    ASSERT_TRUE(*s && *r) << "connection not established in 5 s";
    ASSERT_EQ(net.closeListen(listen), ncclSuccess);
  }

  // Polls request until done (5 s limit); returns the result of the last test().
  ncclResult_t Wait(void* req, int* sizes, std::vector<void*>* also = nullptr) {
    double end = Now() + 5;
    int done = 0;
    while (Now() < end) {
      if (also)
      for (void*& o : *also)
        if (o) {
          int d = 0, sz[8];
          ncclResult_t rc = net.test(o, &d, sz);
          if (rc != ncclSuccess) return rc;
          if (d) o = nullptr;
        }
      ncclResult_t rc = net.test(req, &done, sizes);
      if (rc != ncclSuccess || done) return rc;
    }
    ADD_FAILURE() << "request did not complete in 5 s";
    return ncclInternalError;
  }

  void* Isend(const void* data, size_t size, int tag) {
    void* req = nullptr;
    double end = Now() + 5;
    while (!req && Now() < end)
      EXPECT_EQ(net.isend(send_, const_cast<void*>(data), size, tag, nullptr, nullptr, &req),
                ncclSuccess);
    EXPECT_NE(req, nullptr);
    return req;
  }

  void* Irecv(int n, void** data, size_t* sizes, int* tags) {
    void* req = nullptr;
    EXPECT_EQ(net.irecv(recv_, n, data, sizes, tags, nullptr, nullptr, &req), ncclSuccess);
    EXPECT_NE(req, nullptr);
    return req;
  }

  void* ctx_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

std::vector<char> Pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

TEST_F(Loopback, PropertiesAreComplete) {
  ncclNetProperties_v11_t p;
  memset(&p, 0xA5, sizeof p);  // NCCL passes an uninitialised struct
  ASSERT_EQ(net.getProperties(0, &p), ncclSuccess);
  EXPECT_STREQ(p.name, "lo");
  EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
  EXPECT_GE(p.maxRecvs, 8);
  EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  EXPECT_GT(p.maxP2pBytes, 0u);
  EXPECT_LE(p.maxP2pBytes, NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_GT(p.maxCollBytes, 0u);
  EXPECT_LE(p.maxCollBytes, NCCL_MAX_NET_SIZE_BYTES);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], 0);
  EXPECT_GT(p.speed, 0);
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_EQ(net.getProperties(999, &p), ncclInvalidArgument);
}

TEST_F(Loopback, SizesFromZeroToLarge) {
  for (size_t size : {0ul, 1ul, 7ul, 4096ul, 131071ul, 524289ul, 9437184ul + 3}) {
    auto src = Pattern(size, (int)size);
    std::vector<char> dst(size + 64, 0x55);
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = 3, got = -1;
    void* rreq = Irecv(1, &d, &cap, &tag);
    void* sreq = Isend(src.data(), size, tag);
    std::vector<void*> sends = {sreq};
    ASSERT_EQ(Wait(rreq, &got, &sends), ncclSuccess) << size;
    int sgot = -1;
    if (sends[0]) { ASSERT_EQ(Wait(sends[0], &sgot), ncclSuccess); }
    EXPECT_EQ(got, (int)size) << "a send smaller than the receive reports its real size";
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << size;
    EXPECT_EQ(dst[size], 0x55) << "no byte written past the message";
  }
}

TEST_F(Loopback, SendBeforeReceiveIsHeldNotLost) {
  auto src = Pattern(100000, 1);
  void* sreq = Isend(src.data(), src.size(), 0);
  usleep(20000);
  std::vector<char> dst(src.size());
  void* d = dst.data();
  size_t cap = dst.size();
  int tag = 0, got = 0;
  void* rreq = Irecv(1, &d, &cap, &tag);
  std::vector<void*> sends = {sreq};
  ASSERT_EQ(Wait(rreq, &got, &sends), ncclSuccess);
  EXPECT_EQ(dst, src);
}

TEST_F(Loopback, GroupedReceiveTagsChooseTheBuffer) {
  const int n = 3;
  std::vector<std::vector<char>> src, dst(n, std::vector<char>(5000, 0));
  void* data[n];
  size_t caps[n];
  int tags[n] = {10, 11, 12};
  for (int i = 0; i < n; i++) {
    src.push_back(Pattern(1000 * (i + 1), i));
    data[i] = dst[i].data();
    caps[i] = dst[i].size();
  }
  void* rreq = Irecv(n, data, caps, tags);
  std::vector<void*> sends;
  for (int i : {2, 0, 1}) sends.push_back(Isend(src[i].data(), src[i].size(), tags[i]));
  int sizes[n] = {0};
  ASSERT_EQ(Wait(rreq, sizes, &sends), ncclSuccess);
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(sizes[i], 1000 * (i + 1));
    EXPECT_EQ(0, memcmp(dst[i].data(), src[i].data(), src[i].size())) << i;
  }
}

// A sender may post the next group's send for tag A before this group's send for tag B (two
// local ranks sharing a connection).  The early one must not block the late one.
TEST_F(Loopback, EarlySendForNextGroupDoesNotBlock) {
  std::vector<char> a1 = Pattern(3000, 1), a2 = Pattern(3000, 2), b1 = Pattern(3000, 3),
                    b2 = Pattern(3000, 4);
  std::vector<char> r[4];
  for (auto& v : r) v.assign(3000, 0);
  int tags[2] = {1, 2};
  size_t caps[2] = {3000, 3000};
  void* g1[2] = {r[0].data(), r[1].data()};
  void* req1 = Irecv(2, g1, caps, tags);
  std::vector<void*> sends = {Isend(a1.data(), 3000, 1), Isend(a2.data(), 3000, 1),
                              Isend(b1.data(), 3000, 2)};
  int sizes[2];
  ASSERT_EQ(Wait(req1, sizes, &sends), ncclSuccess);
  void* g2[2] = {r[2].data(), r[3].data()};
  void* req2 = Irecv(2, g2, caps, tags);
  sends.push_back(Isend(b2.data(), 3000, 2));
  ASSERT_EQ(Wait(req2, sizes, &sends), ncclSuccess);
  EXPECT_EQ(r[0], a1);
  EXPECT_EQ(r[1], b1);
  EXPECT_EQ(r[2], a2);
  EXPECT_EQ(r[3], b2);
}

TEST_F(Loopback, ThirtyTwoInFlightMatchInPostingOrder) {
  const int k = 32;
  std::vector<std::vector<char>> src, dst(k, std::vector<char>(70000, 0));
  std::vector<void*> rreqs, sreqs;
  for (int i = 0; i < k; i++) {
    src.push_back(Pattern(1000 + 2000 * i, i));
    void* d = dst[i].data();
    size_t cap = dst[i].size();
    int tag = 7;
    rreqs.push_back(Irecv(1, &d, &cap, &tag));
  }
  void* extra = nullptr;
  char byte;
  void* bp = &byte;
  size_t one = 1;
  int tag7 = 7;
  ASSERT_EQ(net.irecv(recv_, 1, &bp, &one, &tag7, nullptr, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr) << "a 33rd receive is refused with a NULL request (back-pressure)";
  for (int i = 0; i < k; i++) sreqs.push_back(Isend(src[i].data(), src[i].size(), 7));
  for (int i = 0; i < k; i++) {
    int got = 0;
    ASSERT_EQ(Wait(rreqs[i], &got, &sreqs), ncclSuccess);
    EXPECT_EQ(got, 1000 + 2000 * i);
    EXPECT_EQ(0, memcmp(dst[i].data(), src[i].data(), src[i].size())) << i;
  }
}

// NCCL 2.24+ presets *request to NCCL_NET_OPTIONAL_RECV_COMPLETION before irecv (LL/LL128, one
// receive) and still tests what comes back.  The hint is read, never handed back: a real request,
// NULL for "retry later", NULL on an error.  Over sockets the bytes move only while the plugin is
// called, so a hinted receive still completes with its data, never early.
TEST_F(Loopback, OptionalCompletionHintGivesRealRequestsThatCompleteWithTheData) {
  void* const hint = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
  const int k = 32;
  std::vector<std::vector<char>> src, dst(k, std::vector<char>(70000, 0));
  std::vector<void*> rreqs, sreqs;
  for (int i = 0; i < k; i++) {
    src.push_back(Pattern(1000 + 2000 * i, i + 40));
    void* d = dst[i].data();
    size_t cap = dst[i].size();
    int tag = 7;
    void* req = hint;
    ASSERT_EQ(net.irecv(recv_, 1, &d, &cap, &tag, nullptr, nullptr, &req), ncclSuccess);
    ASSERT_NE(req, nullptr);
    ASSERT_NE(req, hint) << "the hint came back as a request";
    rreqs.push_back(req);
  }
  int done = 1, got = -1;
  ASSERT_EQ(net.test(rreqs[0], &done, &got), ncclSuccess);
  EXPECT_EQ(done, 0) << "no data sent yet: sockets must not complete early";
  char byte;
  void* bp = &byte;
  size_t one = 1;
  int tag7 = 7;
  void* extra = hint;
  ASSERT_EQ(net.irecv(recv_, 1, &bp, &one, &tag7, nullptr, nullptr, &extra), ncclSuccess);
  EXPECT_EQ(extra, nullptr) << "a 33rd receive: NULL (retry later), not the hint";
  extra = hint;
  EXPECT_EQ(net.irecv(recv_, 0, &bp, &one, &tag7, nullptr, nullptr, &extra), ncclInvalidArgument);
  EXPECT_EQ(extra, nullptr) << "an error leaves NULL, not the hint";
  for (int i = 0; i < k; i++) sreqs.push_back(Isend(src[i].data(), src[i].size(), 7));
  for (int i = 0; i < k; i++) {
    got = -1;
    ASSERT_EQ(Wait(rreqs[i], &got, &sreqs), ncclSuccess);
    EXPECT_EQ(got, 1000 + 2000 * i) << "completed with its data, so with its real size";
    EXPECT_EQ(0, memcmp(dst[i].data(), src[i].data(), src[i].size())) << i;
  }
  for (void* q : sreqs)
    if (q) { EXPECT_EQ(Wait(q, &got), ncclSuccess); }
}

TEST_F(Loopback, SendLargerThanReceiveFails) {
  auto src = Pattern(2000, 1);
  std::vector<char> dst(1000);
  void* d = dst.data();
  size_t cap = dst.size();
  int tag = 1, got = 0;
  void* rreq = Irecv(1, &d, &cap, &tag);
  void* sreq = Isend(src.data(), src.size(), tag);
  std::vector<void*> sends = {sreq};
  EXPECT_EQ(Wait(rreq, &got, &sends), ncclInvalidUsage);
  void* again = nullptr;
  EXPECT_NE(net.irecv(recv_, 1, &d, &cap, &tag, nullptr, nullptr, &again), ncclSuccess)
      << "a failed connection stays failed";
}

TEST_F(Loopback, PeerCloseWithReceivePendingIsAnError) {
  std::vector<char> dst(1000);
  void* d = dst.data();
  size_t cap = dst.size();
  int tag = 1, got = 0;
  void* rreq = Irecv(1, &d, &cap, &tag);
  ASSERT_EQ(net.closeSend(send_), ncclSuccess);
  send_ = nullptr;
  EXPECT_EQ(Wait(rreq, &got), ncclRemoteError);
}

TEST_F(Loopback, CloseWithPendingRequestsDoesNotBlock) {
  std::vector<char> big(32 << 20, 1), dst(1000);
  void* sreq = Isend(big.data(), big.size(), 0);  // far more than the socket buffers hold
  void* d = dst.data();
  size_t cap = dst.size();
  int tag = 99;
  Irecv(1, &d, &cap, &tag);
  (void)sreq;
  double t = Now();
  EXPECT_EQ(net.closeSend(send_), ncclSuccess);
  EXPECT_EQ(net.closeRecv(recv_), ncclSuccess);
  send_ = recv_ = nullptr;
  EXPECT_LT(Now() - t, 0.5);
}

TEST_F(Loopback, MalformedHandleIsRejected) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0x42, sizeof handle);
  void* s = nullptr;
  EXPECT_EQ(net.connect(ctx_, 0, handle, &s, nullptr), ncclInvalidArgument);
  EXPECT_EQ(s, nullptr);
}

TEST_F(Loopback, StrayConnectionIsDroppedAndRealOneAccepted) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
  // A stray peer learns the port (not the secret) and sends a hello-sized blob.  It is challenged,
  // told no and closed.
  char copy[NCCL_NET_HANDLE_MAXSIZE];
  memcpy(copy, handle, sizeof copy);
  uint16_t port;
  memcpy(&port, copy + 6, 2);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = port;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, (sockaddr*)&sa, sizeof sa), 0);
  char junk[BRAID_HELLO_BYTES];
  memset(junk, 0x17, sizeof junk);
  ASSERT_EQ(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
  void* r = nullptr;
  for (int i = 0; i < 50 && !r; i++) {
    ASSERT_EQ(net.accept(listen, &r, nullptr), ncclSuccess);
    usleep(1000);
  }
  EXPECT_EQ(r, nullptr) << "a connection without the secret is never accepted";
  char buf[BRAID_CHALLENGE_BYTES + BRAID_REPLY_BYTES + 1];
  ssize_t n, total = 0;
  while ((n = read(fd, buf, sizeof buf)) > 0) total += n;
  EXPECT_EQ(total, BRAID_CHALLENGE_BYTES + BRAID_REPLY_BYTES) << "a challenge and a refusal, then closed";
  close(fd);
  void* s = nullptr;
  double end = Now() + 5;
  while ((!s || !r) && Now() < end) {
    if (!s) { ASSERT_EQ(net.connect(ctx_, 0, handle, &s, nullptr), ncclSuccess); }
    if (!r) { ASSERT_EQ(net.accept(listen, &r, nullptr), ncclSuccess); }
  }
  ASSERT_TRUE(s && r);
  EXPECT_EQ(net.closeListen(listen), ncclSuccess);
  EXPECT_EQ(net.closeSend(s), ncclSuccess);
  EXPECT_EQ(net.closeRecv(r), ncclSuccess);
}

// A hand-made peer that knows the secret (as a buggy or hostile braid would) and then misbehaves.
class RawPeer : public Loopback {
 protected:
  // Accepts a raw connection on a fresh listener; returns the raw fd, sets recv_raw_.
  int Open() {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    EXPECT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
    braid_handle h;
    char err[128];
    EXPECT_EQ(braid_handle_decode(handle, &h, err, sizeof err), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(fd, (sockaddr*)&h.addr, sizeof(sockaddr_in)), 0);
    braid_hello hello = {};
    hello.conn_id = 77;
    hello.per_rail = 1;
    hello.nrails = 1;
    auto drive = [&] {
      if (!recv_raw_) { EXPECT_EQ(net.accept(listen, &recv_raw_, nullptr), ncclSuccess); }
    };
    braid_hs_conn hs;
    hs_peer::Hello(fd, h, hello, &hs, drive);
    hs_peer::Reply(fd, h, &hs, true, drive);
    for (double end = Now() + 5; !recv_raw_ && Now() < end;) drive();
    EXPECT_NE(recv_raw_, nullptr);
    EXPECT_EQ(net.closeListen(listen), ncclSuccess);
    return fd;
  }
  void TearDown() override {
    if (recv_raw_) { EXPECT_EQ(net.closeRecv(recv_raw_), ncclSuccess); }
    Loopback::TearDown();
  }
  void* PostRecv(std::vector<char>* buf) {
    void* d = buf->data();
    size_t cap = buf->size();
    int tag = 0;
    void* req = nullptr;
    EXPECT_EQ(net.irecv(recv_raw_, 1, &d, &cap, &tag, nullptr, nullptr, &req), ncclSuccess);
    return req;
  }
  static std::vector<uint8_t> Header(uint64_t seq, uint64_t off, uint32_t len, uint64_t size) {
    braid_frame f = {};
    f.type = BRAID_FRAME_DATA;
    f.seq = seq, f.offset = off, f.len = len, f.size = size, f.tag = 0;
    std::vector<uint8_t> h(BRAID_FRAME_HDR_BYTES);
    braid_frame_encode(&f, h.data());
    return h;
  }
  void* recv_raw_ = nullptr;
};

TEST_F(RawPeer, GarbledFrameFailsTheReceive) {
  int fd = Open();
  std::vector<char> buf(4096);
  void* req = PostRecv(&buf);
  auto h = Header(0, 0, 100, 100);
  h[20] ^= 0x10;  // a flipped bit in the offset
  ASSERT_EQ(write(fd, h.data(), h.size()), (ssize_t)h.size());
  int got = 0;
  EXPECT_EQ(Wait(req, &got), ncclRemoteError);
  close(fd);
}

TEST_F(RawPeer, FrameForTheWrongMessageFailsTheReceive) {
  int fd = Open();
  std::vector<char> buf(4096);
  void* req = PostRecv(&buf);
  auto h = Header(5, 0, 10, 10);  // message 5 before message 0 on a single stream
  ASSERT_EQ(write(fd, h.data(), h.size()), (ssize_t)h.size());
  int got = 0;
  EXPECT_EQ(Wait(req, &got), ncclRemoteError);
  close(fd);
}

// One stream carries a message's frames in order: a repeated frame is garbage, never counted twice
// (counted twice, the receive completed with its second half never written).
TEST_F(RawPeer, RepeatedFrameFailsTheReceiveNotCompletesIt) {
  int fd = Open();
  std::vector<char> buf(4096, 0x5a);
  void* req = PostRecv(&buf);
  std::vector<char> half(1024, 0x11);
  for (int k = 0; k < 2; k++) {  // the first half of a 2048-byte message, twice
    auto h = Header(0, 0, 1024, 2048);
    ASSERT_EQ(write(fd, h.data(), h.size()), (ssize_t)h.size());
    ASSERT_EQ(write(fd, half.data(), half.size()), (ssize_t)half.size());
  }
  int got = 0;
  EXPECT_EQ(Wait(req, &got), ncclRemoteError);
  close(fd);
}

TEST_F(RawPeer, TruncatedFrameFailsWhenThePeerCloses) {
  int fd = Open();
  std::vector<char> buf(4096);
  void* req = PostRecv(&buf);
  auto h = Header(0, 0, 1000, 1000);
  ASSERT_EQ(write(fd, h.data(), h.size()), (ssize_t)h.size());
  ASSERT_EQ(write(fd, buf.data(), 300), 300);
  close(fd);
  int got = 0;
  EXPECT_EQ(Wait(req, &got), ncclRemoteError);
}

TEST_F(RawPeer, StalledMessageTimesOutButAnIdlePeerDoesNot) {
  setenv("BRAID_TIMEOUT_MS", "300", 1);
  braid_params_reload();
  int fd = Open();
  std::vector<char> buf(4096);
  void* req = PostRecv(&buf);
  // Idle (no message started) for longer than the timeout: a straggler, not an error.
  double idle_end = Now() + 0.6;
  int done = 0, got = 0;
  while (Now() < idle_end) ASSERT_EQ(net.test(req, &done, &got), ncclSuccess);
  EXPECT_EQ(done, 0);
  auto h = Header(0, 0, 1000, 1000);
  ASSERT_EQ(write(fd, h.data(), h.size()), (ssize_t)h.size());
  ASSERT_EQ(write(fd, buf.data(), 10), 10);  // then nothing: bytes in flight stop moving
  double t0 = Now();
  EXPECT_EQ(Wait(req, &got), ncclRemoteError);
  EXPECT_GT(Now() - t0, 0.25);
  EXPECT_LT(Now() - t0, 3.0);
  close(fd);
}

// A hand-made peer with several streams on one rail (acknowledged chunks), to replay what a
// multi-rail sender does around a failure.
class RawStreams : public RawPeer {
 protected:
  // Connects n raw streams of one connection; the receive comm is recv_raw_.
  void OpenStreams(int n, int* fds) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    ASSERT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
    braid_handle h;
    char err[128];
    ASSERT_EQ(braid_handle_decode(handle, &h, err, sizeof err), 0);
    auto drive = [&] {
      if (!recv_raw_) { EXPECT_EQ(net.accept(listen, &recv_raw_, nullptr), ncclSuccess); }
    };
    std::vector<braid_hs_conn> hs(n);
    for (int s = 0; s < n; s++) {
      fds[s] = socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_EQ(connect(fds[s], (sockaddr*)&h.addr, sizeof(sockaddr_in)), 0);
      int one = 1;  // each frame leaves at once (no Nagle wait for the previous one's ack)
      setsockopt(fds[s], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      braid_hello hello = {};
      hello.conn_id = 78;
      hello.stream = static_cast<uint16_t>(s);
      hello.per_rail = static_cast<uint16_t>(n);
      hello.nrails = 1;
      hs_peer::Hello(fds[s], h, hello, &hs[s], drive);
    }
    for (int s = 0; s < n; s++) hs_peer::Reply(fds[s], h, &hs[s], s == 0, drive);
    for (double end = Now() + 5; !recv_raw_ && Now() < end;) drive();
    ASSERT_NE(recv_raw_, nullptr);
    EXPECT_EQ(net.closeListen(listen), ncclSuccess);
  }
  // Writes one frame (header and payload) of message seq on fd, in one piece.
  static void Frame(int fd, uint64_t seq, const std::vector<char>& msg, size_t off, size_t len) {
    auto h = Header(seq, off, static_cast<uint32_t>(len), msg.size());
    std::vector<char> f(h.begin(), h.end());
    f.insert(f.end(), msg.begin() + off, msg.begin() + off + len);
    ASSERT_EQ(write(fd, f.data(), f.size()), (ssize_t)f.size());
  }
  // Polls the receive (which stays incomplete) until the receiver acknowledges `frames` frames
  // on fd: then it holds their data.
  static void AwaitAck(int fd, void* req, uint64_t frames) {
    uint8_t ack[BRAID_FRAME_HDR_BYTES];
    size_t got_bytes = 0;
    for (double end = Now() + 5; Now() < end;) {
      int done = 0, got = 0;
      ASSERT_EQ(net.test(req, &done, &got), ncclSuccess);
      ASSERT_EQ(done, 0);
      ssize_t n = recv(fd, ack + got_bytes, sizeof ack - got_bytes, MSG_DONTWAIT);
      if (n > 0) got_bytes += (size_t)n;
      if (got_bytes < sizeof ack) continue;
      got_bytes = 0;
      braid_frame f;
      char err[128];
      ASSERT_EQ(braid_frame_decode(ack, &f, err, sizeof err), 0) << err;
      ASSERT_EQ(f.type, BRAID_FRAME_ACK);
      if (f.seq >= frames) return;
    }
    FAIL() << "no acknowledgement of " << frames << " frames in 5 s";
  }
};

// A rail fails with a chunk on it; the sender re-sends the chunk on another rail cut into
// different pieces (a small probe piece first), while the original, already on its way, still
// arrives whole.  Each byte counts once: the message completes, with its data.
TEST_F(RawStreams, ChunkResentInPiecesWhileTheOriginalArrivesCountsEachByteOnce) {
  int fds[2];
  OpenStreams(2, fds);
  const size_t size = 32 << 10, piece = 8 << 10;
  // Message 0: the re-sent head piece arrives first; message 1: the re-sent tail does.
  for (uint64_t seq = 0; seq < 2; seq++) {
    std::vector<char> src = Pattern(size, static_cast<int>(seq) + 3), buf(size);
    void* req = PostRecv(&buf);
    size_t first_off = seq == 0 ? 0 : piece, first_len = seq == 0 ? piece : size - piece;
    size_t rest_off = seq == 0 ? piece : 0, rest_len = size - first_len;
    Frame(fds[0], seq, src, first_off, first_len);  // part of the re-send, on stream 0
    AwaitAck(fds[0], req, 2 * seq + 1);             // (the late copy of the previous one counts)
    Frame(fds[1], seq, src, 0, size);  // the original copy, whole, on stream 1
    int got = 0;
    ASSERT_EQ(Wait(req, &got), ncclSuccess) << "message " << seq;
    EXPECT_EQ(got, static_cast<int>(size));
    EXPECT_EQ(buf, src) << "message " << seq;
    Frame(fds[0], seq, src, rest_off, rest_len);  // the rest of the re-send: a late copy
  }
  // The late copies are read and dropped: a further message still lands intact.
  std::vector<char> src = Pattern(size, 9), buf(size);
  void* req = PostRecv(&buf);
  Frame(fds[0], 2, src, 0, size);
  int got = 0;
  ASSERT_EQ(Wait(req, &got), ncclSuccess);
  EXPECT_EQ(buf, src);
  for (int fd : fds) close(fd);
}

// Pieces arriving in reverse order, each touching the next, then one overlapping them all: the
// held ranges merge and the message completes once, with its data.
TEST_F(RawStreams, PiecesInReverseOrderMergeAndComplete) {
  int fds[2];
  OpenStreams(2, fds);
  const size_t size = 64 << 10, piece = 4 << 10;
  std::vector<char> src = Pattern(size, 31), buf(size);
  void* req = PostRecv(&buf);
  const int n = static_cast<int>(size / piece);
  for (int k = n - 1; k >= 1; k -= 2) Frame(fds[0], 0, src, k * piece, piece);  // odd pieces, last first
  for (int k = n - 2; k >= 2; k -= 2) Frame(fds[1], 0, src, k * piece, piece);  // even ones but the first
  Frame(fds[1], 0, src, 0, size);  // the whole chunk re-sent: only the first piece is new
  int got = 0;
  ASSERT_EQ(Wait(req, &got), ncclSuccess);
  EXPECT_EQ(got, static_cast<int>(size));
  EXPECT_EQ(buf, src);
  for (int fd : fds) close(fd);
}

// A faulty or hostile peer sends 1-byte frames at every other offset of a 64 MiB message: the
// receiver must not spend more and more per frame (it held every piece in a list it walked
// whole: 7 s in one test() call after 80,000 frames); the connection fails with the reason once
// the message is in more pieces than any honest sender makes, and no test() call takes long.
TEST_F(RawStreams, ThousandsOfTinyDisjointFramesFailTheConnectionQuickly) {
  int fds[2];
  OpenStreams(2, fds);
  const size_t size = 64 << 20;
  std::vector<char> src(16, 'x'), buf(size);
  void* req = PostRecv(&buf);
  std::vector<char> wire;
  for (size_t k = 0; k < 20000; k++) {
    auto h = Header(0, 2 * k, 1, size);
    wire.insert(wire.end(), h.begin(), h.end());
    wire.push_back('x');
  }
  size_t sent = 0;
  ncclResult_t rc = ncclSuccess;
  double worst = 0, t0 = Now();
  while (rc == ncclSuccess && Now() < t0 + 20) {
    if (sent < wire.size()) {
      ssize_t n = send(fds[0], wire.data() + sent, wire.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += (size_t)n;
    }
    int done = 0, got = 0;
    double c0 = Now();
    rc = net.test(req, &done, &got);
    worst = std::max(worst, Now() - c0);
    ASSERT_EQ(done, 0) << "a message of 64 MiB completed from 20,000 bytes";
  }
  EXPECT_EQ(rc, ncclRemoteError);
  EXPECT_LT(Now() - t0, 5.0);
  EXPECT_LT(worst, 0.5) << "one test() call took " << worst << " s";
  for (int fd : fds) close(fd);
}

// After a rail failed, the re-sent rest of a matched message can sit on a surviving stream behind
// the first frame of the next message, whose receive NCCL posts only once the first completes.
// The next message is buffered, never held in front of the bytes the first one waits for.
TEST_F(RawStreams, NextMessageAheadOfAResentChunkIsBufferedNotHeld) {
  int fds[2];
  OpenStreams(2, fds);
  const size_t size = 32 << 10, half = size / 2;
  std::vector<char> src0 = Pattern(size, 21), src1 = Pattern(size, 22), buf0(size, 0x5a), buf1(size, 0x5a);
  void* req0 = PostRecv(&buf0);
  Frame(fds[0], 0, src0, 0, half);  // the first half arrives; its rail then fails
  AwaitAck(fds[0], req0, 1);
  Frame(fds[1], 1, src1, 0, size);     // the next message, all of it, on the surviving stream
  Frame(fds[1], 0, src0, half, half);  // the first one's re-sent second half, behind it
  int got = 0;
  ASSERT_EQ(Wait(req0, &got), ncclSuccess) << "message 0 waited behind message 1";
  EXPECT_EQ(got, static_cast<int>(size));
  EXPECT_EQ(buf0, src0);
  void* req1 = PostRecv(&buf1);
  ASSERT_EQ(Wait(req1, &got), ncclSuccess);
  EXPECT_EQ(got, static_cast<int>(size));
  EXPECT_EQ(buf1, src1);
  for (int fd : fds) close(fd);
}

// Several streams (acknowledged chunks): a receiver that posts nothing for longer than any stall
// threshold (a straggler, a checkpoint) is waited for, never failed.
class LoopbackStreams : public Loopback {
 protected:
  void SetUp() override {
    setenv("BRAID_NSTREAMS", "2", 1);
    Loopback::SetUp();
  }
  void TearDown() override {
    Loopback::TearDown();
    unsetenv("BRAID_NSTREAMS");
    braid_params_reload();
  }
};

TEST_F(LoopbackStreams, SlowReceiverIsWaitedForNotFailed) {
  const int k = 8;
  std::vector<std::vector<char>> src;
  std::vector<void*> sends;
  for (int i = 0; i < k; i++) {
    src.push_back(Pattern(3 << 20, i));
    sends.push_back(Isend(src[i].data(), src[i].size(), 1));
  }
  double end = Now() + 1.5;  // nothing posted on the receive side meanwhile
  while (Now() < end)
    for (void*& q : sends) {
      int d = 0, sz;
      if (q) { ASSERT_EQ(net.test(q, &d, &sz), ncclSuccess) << "a slow receiver is not an error"; }
      if (d) q = nullptr;
    }
  std::vector<std::vector<char>> dst(k, std::vector<char>(3 << 20));
  for (int i = 0; i < k; i++) {
    void* d = dst[i].data();
    size_t cap = dst[i].size();
    int tag = 1, got = 0;
    void* rq = Irecv(1, &d, &cap, &tag);
    ASSERT_EQ(Wait(rq, &got, &sends), ncclSuccess);
    EXPECT_EQ(dst[i], src[i]) << i;
  }
}

// Small sends on a striped connection, driven as NCCL's proxy drives them: it calls test() only
// on sends it has not seen complete, and a receiver that shows up later must still get every
// byte.  A send reported done while its chunk still waited in the sender's queue (it used to be
// copied and completed at once) left the receiver waiting for ever once the sender stopped.
TEST_F(LoopbackStreams, SmallSendsStayOpenUntilTheReceiverHasThem) {
  const int k = 256, window = 8;
  std::vector<std::vector<char>> src;
  for (int i = 0; i < k; i++) src.push_back(Pattern((64 << 10) - 64 * (i % 3), 100 + i));
  std::vector<void*> sends;
  int posted = 0, done_early = 0;
  double end = Now() + 1.0;  // the receiver is not driven meanwhile
  while (Now() < end) {
    if (posted < k && sends.size() < window) {
      void* q = nullptr;
      ASSERT_EQ(net.isend(send_, src[posted].data(), src[posted].size(), 1, nullptr, nullptr, &q),
                ncclSuccess);
      if (q) sends.push_back(q), posted++;
    }
    for (size_t j = 0; j < sends.size();) {
      int d = 0, sz = 0;
      ASSERT_EQ(net.test(sends[j], &d, &sz), ncclSuccess);
      if (d) sends.erase(sends.begin() + j), done_early++;
      else j++;
    }
  }
  // Now only the receiver and the sends still open are driven, as NCCL does.
  for (int i = 0; i < posted; i++) {
    std::vector<char> dst(64 << 10, 0x5a);
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = 1, got = -1;
    void* rq = Irecv(1, &d, &cap, &tag);
    ASSERT_EQ(Wait(rq, &got, &sends), ncclSuccess)
        << "message " << i << " of " << posted << " (" << done_early
        << " sends were reported done before the receiver read anything)";
    ASSERT_EQ(got, (int)src[i].size()) << i;
    ASSERT_TRUE(std::equal(src[i].begin(), src[i].end(), dst.begin())) << i;
  }
  for (void* q : sends) {
    int got = 0;
    if (q) { ASSERT_EQ(Wait(q, &got), ncclSuccess); }
  }
}

// A listener whose SYNs go unanswered (its accept queue full: the kernel drops further SYNs, as a
// black-holed route or a dead host does): connect fails after BRAID_TIMEOUT_MS, not after the
// kernel's SYN retries (over two minutes).
TEST(NetConnect, UnansweredSynFailsAfterTheTimeout) {
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_TIMEOUT_MS", "1500", 1);
  braid_params_reload();
  void* ctx = nullptr;
  ASSERT_EQ(net.init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(lfd, (sockaddr*)&a, sizeof a), 0);
  ASSERT_EQ(listen(lfd, 0), 0);
  ASSERT_EQ(getsockname(lfd, (sockaddr*)&a, &len), 0);
  std::vector<int> fill;  // the accept queue (backlog 0 holds one) filled, never accepted
  for (int i = 0; i < 3; i++) {
    int f = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(f, (sockaddr*)&a, sizeof a);
    fill.push_back(f);
  }
  usleep(100000);
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net.listen(ctx, 0, handle, &listen), ncclSuccess);  // a real handle, then its address
  braid_handle h;
  char why[128];
  ASSERT_EQ(braid_handle_decode(handle, &h, why, sizeof why), 0) << why;
  memcpy(&h.addr, &a, sizeof a);
  braid_handle_encode(&h, handle);
  void* s = nullptr;
  ncclResult_t rc = ncclSuccess;
  double t0 = Now();
  while (rc == ncclSuccess && !s && Now() < t0 + 20) rc = net.connect(ctx, 0, handle, &s, nullptr);
  double took = Now() - t0;
  EXPECT_NE(rc, ncclSuccess) << "connected to a listener that never answers";
  EXPECT_EQ(s, nullptr);
  EXPECT_GE(took, 1.4);
  EXPECT_LT(took, 4.0) << "BRAID_TIMEOUT_MS=1500 not honoured while the SYN goes unanswered";
  for (int f : fill) close(f);
  close(lfd);
  EXPECT_EQ(net.closeListen(listen), ncclSuccess);
  EXPECT_EQ(net.finalize(ctx), ncclSuccess);
  unsetenv("BRAID_TIMEOUT_MS");
  braid_params_reload();
}

// Other consumers of the net API accept several connections on one listen comm.  Whether that
// works must not depend on the stream count (with more than one stream the listening sockets used
// to move into the first connection, for its rejoins): three connections on one listen comm, each
// carrying data before and after the listen comm is closed; then a connect to the closed listen
// comm's handle fails with the reason (refused, or no listener), within BRAID_TIMEOUT_MS.
TEST(NetListen, OneListenCommAcceptsSeveralConnectionsWhateverTheStreams) {
  for (const char* nstreams : {"1", "2", "4"}) {
    SCOPED_TRACE(std::string("BRAID_NSTREAMS=") + nstreams);
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_NSTREAMS", nstreams, 1);
    setenv("BRAID_TIMEOUT_MS", "3000", 1);
    braid_params_reload();
    void* ctx = nullptr;
    ASSERT_EQ(net.init(&ctx, 1, nullptr, nullptr, nullptr), ncclSuccess);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    ASSERT_EQ(net.listen(ctx, 0, handle, &listen), ncclSuccess);
    std::vector<void*> s(3, nullptr), r(3, nullptr);
    for (int k = 0; k < 3; k++) {
      char h[NCCL_NET_HANDLE_MAXSIZE];
      memcpy(h, handle, sizeof h);  // each connect keeps its state in its own copy
      for (double end = Now() + 5; (!s[k] || !r[k]) && Now() < end;) {
        if (!s[k]) { ASSERT_EQ(net.connect(ctx, 0, h, &s[k], nullptr), ncclSuccess); }
        if (!r[k]) { ASSERT_EQ(net.accept(listen, &r[k], nullptr), ncclSuccess); }
      }
      ASSERT_TRUE(s[k] && r[k]) << "connection " << k << " on the same listen comm";
    }
    auto exchange = [&](int round) {
      for (int k = 0; k < 3; k++) {
        std::vector<char> out = Pattern(100000 + 777 * k, round * 3 + k), in(out.size());
        void* data = in.data();
        size_t size = in.size();
        int tag = 9;
        void *rq = nullptr, *sq = nullptr;
        ASSERT_EQ(net.irecv(r[k], 1, &data, &size, &tag, nullptr, nullptr, &rq), ncclSuccess);
        for (double end = Now() + 5; !sq && Now() < end;)
          ASSERT_EQ(net.isend(s[k], out.data(), out.size(), 9, nullptr, nullptr, &sq), ncclSuccess);
        int sd = 0, rd = 0, sz = 0;
        for (double end = Now() + 5; (!sd || !rd) && Now() < end;) {
          if (!sd) { ASSERT_EQ(net.test(sq, &sd, &sz), ncclSuccess); }
          if (!rd) { ASSERT_EQ(net.test(rq, &rd, &sz), ncclSuccess); }
        }
        ASSERT_TRUE(sd && rd) << "connection " << k << " round " << round;
        EXPECT_EQ(in, out) << "connection " << k << " round " << round;
      }
    };
    exchange(0);
    ASSERT_EQ(net.closeListen(listen), ncclSuccess);
    exchange(1);
    char h[NCCL_NET_HANDLE_MAXSIZE];
    memcpy(h, handle, sizeof h);
    void* late = nullptr;
    ncclResult_t rc = ncclSuccess;
    double t0 = Now();
    while (rc == ncclSuccess && !late && Now() < t0 + 10) rc = net.connect(ctx, 0, h, &late, nullptr);
    EXPECT_NE(rc, ncclSuccess) << "a connect to a closed listen comm succeeded";
    EXPECT_LT(Now() - t0, 4.5) << "a connect to a closed listen comm must fail within BRAID_TIMEOUT_MS";
    for (int k = 0; k < 3; k++) {
      EXPECT_EQ(net.closeSend(s[k]), ncclSuccess);
      EXPECT_EQ(net.closeRecv(r[k]), ncclSuccess);
    }
    EXPECT_EQ(net.finalize(ctx), ncclSuccess);
  }
  unsetenv("BRAID_NSTREAMS");
  unsetenv("BRAID_TIMEOUT_MS");
  braid_params_reload();
}

TEST(NetLifetime, FinalizeAcceptsNullAndHalfBuiltContexts) {
  EXPECT_EQ(ncclNetPlugin_v11.finalize(nullptr), ncclSuccess);
}

TEST(NetLifetime, SeveralContextsAtOnce) {
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  braid_params_reload();
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(ncclNetPlugin_v11.init(&a, 1, nullptr, nullptr, nullptr), ncclSuccess);
  ASSERT_EQ(ncclNetPlugin_v11.init(&b, 2, nullptr, nullptr, nullptr), ncclSuccess);
  EXPECT_NE(a, b);
  EXPECT_EQ(ncclNetPlugin_v11.finalize(a), ncclSuccess);
  EXPECT_EQ(ncclNetPlugin_v11.finalize(b), ncclSuccess);
}

}  // namespace
