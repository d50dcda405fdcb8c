// NCCL's per-communicator trafficClass (transport/tclass.h) through the exported tables over TCP
// sockets on loopback: the class that v11/v12 init's config or v10 connect's config carries is
// the IP TOS (IPv6: traffic class) of every stream's socket on both ends, the accepting end
// included (it learns it from the connector's hello); without one both ends keep the default.
// Also: values braid cannot apply are refused, the class is logged once, and the precedence of
// BRAID_IB_TC / BRAID_IB_SL (NCCL_IB_TC / NCCL_IB_SL) over it on verbs, as NCCL's net_ib.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "comm/comm.h"
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "transport/socket/sock.h"
#include "transport/tclass.h"
extern ncclNet_v10_t ncclNetPlugin_v10;
extern ncclNet_v11_t ncclNetPlugin_v11;
extern ncclNet_v12_t ncclNetPlugin_v12;
}

namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Every line braid logs (WARN and INFO), for the checks on what it says.
std::mutex log_mu;
std::string log_text;
void CaptureLogger(ncclDebugLogLevel level, unsigned long, const char *, int, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(log_mu);
  log_text += std::string(level == NCCL_LOG_WARN ? "WARN " : "INFO ") + msg + "\n";
}
std::string TakeLog() {
  std::lock_guard<std::mutex> lock(log_mu);
  std::string s;
  s.swap(log_text);
  return s;
}
size_t Count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

// The class a socket's packets carry: IP_TOS, or IPV6_TCLASS on an IPv6 socket.
int ClassOf(int fd) {
  int family = 0, v = -1;
  socklen_t len = sizeof family;
  EXPECT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len));
  len = sizeof v;
  int rc = family == AF_INET6 ? getsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, &len)
                              : getsockopt(fd, IPPROTO_IP, IP_TOS, &v, &len);
  EXPECT_EQ(0, rc);
  return v;
}

// Each stream socket's class, "fd:class" for the failure message; every one must be want.
void ExpectClass(void *comm, int want, const char *side) {
  const braid_comm *c = static_cast<const braid_comm *>(comm);
  ASSERT_GT(c->nstreams, 0);
  for (int s = 0; s < c->nstreams; s++) {
    ASSERT_GE(c->streams[s].fd, 0) << side << " stream " << s;
    EXPECT_EQ(want, ClassOf(c->streams[s].fd)) << side << " stream " << s << " of " << c->nstreams;
  }
}

class TrafficClass : public ::testing::Test {
 protected:
  void SetUp() override {
    braid_log_set_logger(CaptureLogger);
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_TRANSPORT", "socket", 1);
    setenv("BRAID_NSTREAMS", "2", 1);  // both streams of a connection, not just stream 0
    ASSERT_EQ(ncclSuccess, braid_params_reload());
    TakeLog();
  }
  void TearDown() override {
    Close();
    for (const char *v : {"BRAID_TRANSPORT", "BRAID_NSTREAMS", "BRAID_IB_TC",
                          "BRAID_IB_SL", "NCCL_IB_TC", "NCCL_IB_SL"})
      unsetenv(v);
    braid_params_reload();
  }
  // Listens, then connects with connect(handle, &send) and accepts until both ends are up.
  template <class ConnectFn>
  void Pair(void *listen_ctx, int version, ConnectFn connect) {
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void *listen = nullptr;
    ncclResult_t rc = version == 10 ? ncclNetPlugin_v10.listen(0, handle, &listen)
                                    : ncclNetPlugin_v12.listen(listen_ctx, 0, handle, &listen);
    ASSERT_EQ(ncclSuccess, rc);
    for (double end = Now() + 10; (!send_ || !recv_) && Now() < end;) {
      if (!send_) { ASSERT_EQ(ncclSuccess, connect(handle, &send_)); }
      if (!recv_) { ASSERT_EQ(ncclSuccess, ncclNetPlugin_v12.accept(listen, &recv_, nullptr)); }
    }
    EXPECT_EQ(ncclSuccess, ncclNetPlugin_v12.closeListen(listen));
    ASSERT_TRUE(send_ && recv_) << TakeLog();
  }
  // A v11 or v12 communicator with init's config (nullptr: none), connected to itself.
  void PairCtx(int version, const int *traffic_class) {
    ncclNetCommConfig_v12_t c12 = {traffic_class ? *traffic_class : 0};
    ncclNetCommConfig_v11_t c11 = {traffic_class ? *traffic_class : 0};
    ncclResult_t rc = version == 11
                          ? ncclNetPlugin_v11.init(&ctx_, 7, traffic_class ? &c11 : nullptr, CaptureLogger, nullptr)
                          : ncclNetPlugin_v12.init(&ctx_, 7, traffic_class ? &c12 : nullptr, CaptureLogger, nullptr);
    ASSERT_EQ(ncclSuccess, rc);
    Pair(ctx_, version, [&](void *handle, void **send) {
      return version == 11 ? ncclNetPlugin_v11.connect(ctx_, 0, handle, send, nullptr)
                           : ncclNetPlugin_v12.connect(ctx_, 0, handle, send, nullptr);
    });
  }
  // NCCL 2.26/2.27: no context; the class comes with every connect (nullptr: no config).
  void PairV10(const int *traffic_class) {
    ASSERT_EQ(ncclSuccess, ncclNetPlugin_v10.init(CaptureLogger, nullptr));
    ncclNetCommConfig_v10_t cfg = {traffic_class ? *traffic_class : 0};
    Pair(nullptr, 10, [&](void *handle, void **send) {
      return ncclNetPlugin_v10.connect(0, traffic_class ? &cfg : nullptr, handle, send, nullptr);
    });
  }
  void Close() {
    if (send_) { EXPECT_EQ(ncclSuccess, ncclNetPlugin_v12.closeSend(send_)); }
    if (recv_) { EXPECT_EQ(ncclSuccess, ncclNetPlugin_v12.closeRecv(recv_)); }
    if (ctx_) { EXPECT_EQ(ncclSuccess, ncclNetPlugin_v12.finalize(ctx_)); }
    send_ = recv_ = ctx_ = nullptr;
  }
  void *ctx_ = nullptr, *send_ = nullptr, *recv_ = nullptr;
};

TEST_F(TrafficClass, InitConfigMarksEveryStreamOnBothEnds) {
  for (int version : {11, 12}) {
    SCOPED_TRACE("ncclNetPlugin_v" + std::to_string(version));
    const int tc = version == 11 ? 104 : 0xb8;  // DSCP 26 (AF31), DSCP 46 (EF)
    PairCtx(version, &tc);
    ExpectClass(send_, tc, "connecting end");
    ExpectClass(recv_, tc, "accepting end");
    Close();
  }
}

TEST_F(TrafficClass, V10ConnectConfigMarksEveryStreamOnBothEnds) {
  const int tc = 0x48;  // DSCP 18 (AF21)
  PairV10(&tc);
  ExpectClass(send_, tc, "connecting end");
  ExpectClass(recv_, tc, "accepting end");
}

TEST_F(TrafficClass, UndefinedLeavesTheDefault) {
  const int undef = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  PairCtx(12, &undef);
  ExpectClass(send_, 0, "connecting end");
  ExpectClass(recv_, 0, "accepting end");
  Close();
  PairCtx(11, nullptr);  // no config at all
  ExpectClass(send_, 0, "connecting end");
  ExpectClass(recv_, 0, "accepting end");
  Close();
  PairV10(&undef);
  ExpectClass(send_, 0, "connecting end");
  ExpectClass(recv_, 0, "accepting end");
  Close();
  PairV10(nullptr);
  ExpectClass(send_, 0, "connecting end");
  ExpectClass(recv_, 0, "accepting end");
  EXPECT_EQ(std::string::npos, TakeLog().find("traffic class")) << "nothing to announce";
}

// The socket option itself, for both families (the device table, and so the family the
// connections above use, is fixed for the process: IPv6 end to end is tools/perf/test/tclass_test.sh's).
TEST(TrafficClassSocket, TosOnIpv4AndTrafficClassOnIpv6) {
  for (int family : {AF_INET, AF_INET6}) {
    int l = socket(family, SOCK_STREAM, 0);
    ASSERT_GE(l, 0);
    sockaddr_storage a = {};
    socklen_t len;
    if (family == AF_INET) {
      auto *v4 = reinterpret_cast<sockaddr_in *>(&a);
      v4->sin_family = AF_INET, v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK), len = sizeof *v4;
    } else {
      auto *v6 = reinterpret_cast<sockaddr_in6 *>(&a);
      v6->sin6_family = AF_INET6, v6->sin6_addr = in6addr_loopback, len = sizeof *v6;
    }
    // (no ::1 on lo fails here as it fails the integration suite's ipv6 case)
    ASSERT_EQ(0, bind(l, (sockaddr *)&a, len)) << family << ": " << strerror(errno);
    ASSERT_EQ(0, listen(l, 1));
    ASSERT_EQ(0, getsockname(l, (sockaddr *)&a, &len));
    int c = socket(family, SOCK_STREAM, 0);
    ASSERT_EQ(0, braid_sock_set_class(c, -1)) << "no class: nothing to do";
    EXPECT_EQ(0, ClassOf(c));
    ASSERT_EQ(0, braid_sock_set_class(c, 0x28));
    ASSERT_EQ(0, connect(c, (sockaddr *)&a, len));
    int s = accept(l, nullptr, nullptr);
    ASSERT_GE(s, 0);
    EXPECT_EQ(0, ClassOf(s)) << "an accepted socket starts in the default class";
    ASSERT_EQ(0, braid_sock_set_class(s, 0x28));
    EXPECT_EQ(0x28, ClassOf(c)) << family;
    EXPECT_EQ(0x28, ClassOf(s)) << family;
    for (int fd : {c, s, l}) close(fd);
  }
}

TEST_F(TrafficClass, AnnouncedOncePerClass) {
  const int tc = 0x60;
  PairCtx(12, &tc);
  Close();
  PairCtx(12, &tc);
  std::string log = TakeLog();
  EXPECT_EQ(1u, Count(log, "traffic class 96 (0x60")) << log;
  EXPECT_NE(std::string::npos, log.find("IP TOS")) << log;
}

TEST_F(TrafficClass, ValuesBraidCannotApplyAreRefused) {
  for (int bad : {256, -2, 1 << 20}) {
    ncclNetCommConfig_v12_t cfg = {bad};
    void *ctx = nullptr;
    EXPECT_EQ(ncclInvalidArgument, ncclNetPlugin_v12.init(&ctx, 7, &cfg, CaptureLogger, nullptr)) << bad;
    EXPECT_EQ(nullptr, ctx);
    std::string log = TakeLog();
    EXPECT_NE(std::string::npos, log.find("init: NCCL's trafficClass " + std::to_string(bad)))
        << log;
  }
  ASSERT_EQ(ncclSuccess, ncclNetPlugin_v10.init(CaptureLogger, nullptr));
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void *listen = nullptr, *send = nullptr;
  ASSERT_EQ(ncclSuccess, ncclNetPlugin_v10.listen(0, handle, &listen));
  ncclNetCommConfig_v10_t cfg = {300};
  EXPECT_EQ(ncclInvalidArgument, ncclNetPlugin_v10.connect(0, &cfg, handle, &send, nullptr));
  EXPECT_EQ(nullptr, send);
  EXPECT_NE(std::string::npos, TakeLog().find("connect: NCCL's trafficClass 300"));
  EXPECT_EQ(ncclSuccess, ncclNetPlugin_v10.closeListen(listen));
}

// ---- the precedence (pure), and the environment it reads ----

TEST(TrafficClassResolve, NcclIbPrecedenceOnVerbsOnly) {
  struct Case {
    int tclass, ib_tc, ib_sl;
    enum braid_transport t;
    int tc, sl;
  } cases[] = {
      // sockets and libfabric: the communicator's class, BRAID_IB_* do not apply
      {104, -1, -1, BRAID_TRANSPORT_SOCKET, 104, -1},
      {104, 40, 2, BRAID_TRANSPORT_SOCKET, 104, -1},
      {-1, 40, 2, BRAID_TRANSPORT_SOCKET, -1, -1},
      {104, 40, 2, BRAID_TRANSPORT_OFI, 104, -1},
      // verbs (NCCL's net_ib): the environment, else the class, for each of tc and sl
      {104, -1, -1, BRAID_TRANSPORT_VERBS, 104, 104},
      {104, 40, -1, BRAID_TRANSPORT_VERBS, 40, 104},
      {104, -1, 2, BRAID_TRANSPORT_VERBS, 104, 2},
      {104, 40, 2, BRAID_TRANSPORT_VERBS, 40, 2},
      {-1, 40, -1, BRAID_TRANSPORT_VERBS, 40, -1},
      {-1, -1, 2, BRAID_TRANSPORT_VERBS, -1, 2},
      {-1, -1, -1, BRAID_TRANSPORT_VERBS, -1, -1},
      {0, -1, -1, BRAID_TRANSPORT_VERBS, 0, 0},
  };
  for (const Case &k : cases) {
    braid_tclass c = braid_tclass_resolve(k.tclass, k.t, k.ib_tc, k.ib_sl);
    EXPECT_EQ(k.tc, c.tc) << k.tclass << " " << k.ib_tc << " " << k.ib_sl << " transport " << k.t;
    EXPECT_EQ(k.sl, c.sl) << k.tclass << " " << k.ib_tc << " " << k.ib_sl << " transport " << k.t;
  }
}

TEST(TrafficClassResolve, ReadsBraidThenNcclVariables) {
  setenv("NCCL_IB_TC", "50", 1);
  setenv("NCCL_IB_SL", "4", 1);
  ASSERT_EQ(ncclSuccess, braid_params_reload());
  braid_tclass c = braid_tclass_of(104, BRAID_TRANSPORT_VERBS);
  EXPECT_EQ(50, c.tc);
  EXPECT_EQ(4, c.sl);
  setenv("BRAID_IB_TC", "60", 1);
  setenv("BRAID_IB_SL", "6", 1);
  ASSERT_EQ(ncclSuccess, braid_params_reload());
  c = braid_tclass_of(104, BRAID_TRANSPORT_VERBS);
  EXPECT_EQ(60, c.tc);
  EXPECT_EQ(6, c.sl);
  setenv("BRAID_IB_SL", "16", 1);  // service levels are four bits
  EXPECT_NE(ncclSuccess, braid_params_reload());
  for (const char *v : {"BRAID_IB_TC", "BRAID_IB_SL", "NCCL_IB_TC", "NCCL_IB_SL"}) unsetenv(v);
  ASSERT_EQ(ncclSuccess, braid_params_reload());
  c = braid_tclass_of(104, BRAID_TRANSPORT_VERBS);
  EXPECT_EQ(104, c.tc);
  EXPECT_EQ(104, c.sl);
}

}  // namespace
