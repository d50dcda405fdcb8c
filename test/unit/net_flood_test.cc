// Strangers on the net plugin's ports (issue 33 items 1, 3, 7): connections from anyone who can
// reach a listening port, that never say a word, must cost a real connection or a real rejoin
// nothing but a moment, and the log a line a second, not a line each.
//
// The attackers connect from other loopback addresses (127.0.0.2 and up: other hosts, as far as
// the listener can tell), the real peer from 127.0.0.1.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "wire/handle.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
}
#include "flood.h"
#include "wire_watch.h"

namespace {

using flood::Flood;
const ncclNet_v11_t& net = ncclNetPlugin_v11;
using wire_watch::Now;

int Lines(const std::string& s, const char* what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}

class NetFlood : public ::testing::Test {
 protected:
  void SetUp() override {
    braid_log_set_logger(wire_watch::Logger);
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_TIMEOUT_MS", "10000", 1);
    braid_params_reload();
    wire_watch::TakeWarnings();
    ASSERT_EQ(net.init(&ctx_, 1, nullptr, wire_watch::Logger, nullptr), ncclSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(net.finalize(ctx_), ncclSuccess);
    unsetenv("BRAID_TIMEOUT_MS");
    unsetenv("BRAID_NSTREAMS");
    braid_params_reload();
  }
  void* ctx_ = nullptr;
};

// 128 silent connections held from 8 addresses (the listener's whole table) and thousands more
// churning from 64 others: ten real connections, one after another, each through in seconds and
// each carrying its data; one WARN a second at most for all the strangers.
TEST_F(NetFlood, RealConnectionsGetThroughAListenerFlood) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = nullptr;
  ASSERT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
  braid_handle h;
  char why[128];
  ASSERT_EQ(braid_handle_decode(handle, &h, why, sizeof why), 0) << why;
  sockaddr_in to;
  memcpy(&to, &h.addr, sizeof to);
  double t0 = Now();
  Flood flood(to, 16, 8);
  ASSERT_GE(flood.held(), 100) << "the attack could not be set up";
  usleep(500000);  // the churn at full speed before the first real connection
  EXPECT_GT(flood.made(), 200) << "the churn did not run";
  for (int k = 0; k < 10; k++) {
    char hk[NCCL_NET_HANDLE_MAXSIZE];
    memcpy(hk, handle, sizeof hk);
    void *s = nullptr, *r = nullptr;
    double c0 = Now();
    while ((!s || !r) && Now() < c0 + 8) {
      if (!s) { ASSERT_EQ(net.connect(ctx_, 0, hk, &s, nullptr), ncclSuccess) << "try " << k; }
      if (!r) { ASSERT_EQ(net.accept(listen, &r, nullptr), ncclSuccess); }
    }
    ASSERT_TRUE(s && r) << "try " << k << ": no connection in 8 s through the flood";
    EXPECT_LT(Now() - c0, 5.0) << "try " << k;
    std::vector<char> out(50000 + k, (char)('a' + k)), in(out.size());
    void* data = in.data();
    size_t size = in.size();
    int tag = 3;
    void *rq = nullptr, *sq = nullptr;
    ASSERT_EQ(net.irecv(r, 1, &data, &size, &tag, nullptr, nullptr, &rq), ncclSuccess);
    while (!sq) ASSERT_EQ(net.isend(s, out.data(), out.size(), 3, nullptr, nullptr, &sq), ncclSuccess);
    int sd = 0, rd = 0, sz;
    for (double end = Now() + 5; (!sd || !rd) && Now() < end;) {
      if (!sd) { ASSERT_EQ(net.test(sq, &sd, &sz), ncclSuccess); }
      if (!rd) { ASSERT_EQ(net.test(rq, &rd, &sz), ncclSuccess); }
      net.accept(listen, &data, nullptr);  // the listener keeps turning strangers away
    }
    ASSERT_TRUE(sd && rd);
    EXPECT_EQ(in, out);
    EXPECT_EQ(net.closeSend(s), ncclSuccess);
    EXPECT_EQ(net.closeRecv(r), ncclSuccess);
  }
  double took = Now() - t0;
  EXPECT_EQ(net.closeListen(listen), ncclSuccess);
  std::string warns = wire_watch::TakeWarnings();
  int lines = Lines(warns, "incoming connection");
  EXPECT_GE(lines, 1) << "the strangers were not logged at all";
  EXPECT_LE(lines, (int)took + 3) << lines << " WARN lines in " << took << " s for " << flood.made()
                                  << " strangers";
}

}  // namespace
