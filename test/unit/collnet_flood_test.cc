// CollNet's heads against a braid-ps server under a flood of strangers (issue 33 item 2): the
// whole --max-pending table held by idle connections from 8 addresses and more churning from 64
// others used to get every head refused ("too many connections in the handshake"), which the head
// took as final, failing CollNet connect for every communicator created meanwhile.  The server now
// evicts the oldest stranger for a new connection and refuses for load with PS_FLAG_BUSY; the
// head tries again.  Two heads (connect is a blocking collective), both servers flooded, an
// allreduce checked after each connect, and neither server left out.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "server.h"
extern ncclCollNet_v11_t ncclCollNetPlugin_v11;
}
#include "flood.h"
#include "wire_watch.h"

namespace {

using wire_watch::Now;
const ncclCollNet_v11_t& coll = ncclCollNetPlugin_v11;

struct Servers {
  ps_server* s[2] = {nullptr, nullptr};
  std::string list;
  Servers() {
    for (int i = 0; i < 2; i++) {
      ps_server_opts o = {};
      o.listen = "127.0.0.1:0";
      o.token = "flood-token";
      o.threads = 2;
      o.quiet = 1;
      char err[256];
      s[i] = ps_server_start(&o, err, sizeof err);
      EXPECT_NE(s[i], nullptr) << err;
      if (s[i]) list += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(ps_server_port(s[i]));
    }
  }
  ~Servers() {
    for (auto* x : s)
      if (x) ps_server_stop(x);
  }
};

// Two heads connect (each on its own thread) and run one allreduce; "" or what failed.
std::string ConnectAndReduce(void* ctx, int seed) {
  char handles[2][NCCL_NET_HANDLE_MAXSIZE];
  void* listens[2] = {nullptr, nullptr};
  for (int r = 0; r < 2; r++)
    if (coll.listen(ctx, 0, handles[r], &listens[r]) != ncclSuccess) return "CollNet listen failed";
  std::string errs[2];
  std::thread heads[2];
  for (int r = 0; r < 2; r++)
    heads[r] = std::thread([&, r] {
      void* hs[2] = {handles[0], handles[1]};
      void* cc = nullptr;
      if (coll.connect(hs, 2, r, listens[r], &cc) != ncclSuccess || !cc) return void(errs[r] = "CollNet connect failed");
      const int n = 100000;
      std::vector<float> in(n), out(n);
      for (int i = 0; i < n; i++) in[i] = (float)((i % 100) * (r + 1) + seed);
      void *smh = nullptr, *rmh = nullptr, *req = nullptr;
      coll.regMr(cc, in.data(), in.size() * 4, NCCL_PTR_HOST, &smh);
      coll.regMr(cc, out.data(), out.size() * 4, NCCL_PTR_HOST, &rmh);
      for (double end = Now() + 10; !req && Now() < end;)
        if (coll.iallreduce(cc, in.data(), out.data(), n, ncclFloat32, ncclSum, smh, rmh, &req) != ncclSuccess)
          return void(errs[r] = "iallreduce failed");
      int done = 0, size = 0;
      for (double end = Now() + 10; req && !done && Now() < end;)
        if (coll.test(req, &done, &size) != ncclSuccess) return void(errs[r] = "CollNet test failed");
      if (!done) return void(errs[r] = "the allreduce never completed");
      for (int i = 0; i < n; i++)
        if (out[i] != (float)((i % 100) * 3 + 2 * seed)) return void(errs[r] = "element " + std::to_string(i) + " wrong");
      coll.deregMr(cc, smh);
      coll.deregMr(cc, rmh);
      coll.closeColl(cc);
    });
  for (auto& t : heads) t.join();
  for (int r = 0; r < 2; r++) coll.closeListen(listens[r]);
  return errs[0].empty() ? errs[1] : errs[0];
}

TEST(CollNetFlood, HeadsGetThroughAServerFloodedWithStrangers) {
  braid_log_set_logger(wire_watch::Logger);
  Servers srv;
  ASSERT_TRUE(srv.s[0] && srv.s[1]);
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_PS_SERVERS", srv.list.c_str(), 1);
  setenv("BRAID_PS_TOKEN", "flood-token", 1);
  braid_params_reload();
  void* ctx = nullptr;
  ASSERT_EQ(coll.init(&ctx, 1, wire_watch::Logger), ncclSuccess);
  sockaddr_in to[2] = {};
  for (int i = 0; i < 2; i++) {
    to[i].sin_family = AF_INET;
    to[i].sin_port = htons(static_cast<uint16_t>(ps_server_port(srv.s[i])));
    to[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  {
    flood::Flood f0(to[0], 16, 8), f1(to[1], 16, 8);  // 128 held each: braid-ps's whole --max-pending table
    ASSERT_GE(f0.held() + f1.held(), 200) << "the attack could not be set up";
    usleep(300000);
    wire_watch::TakeWarnings();
    for (int k = 0; k < 3; k++) {
      double t0 = Now();
      EXPECT_EQ(ConnectAndReduce(ctx, k), "") << "communicator " << k << "\n" << wire_watch::TakeWarnings();
      EXPECT_LT(Now() - t0, 5.0) << "communicator " << k;
      EXPECT_EQ(wire_watch::TakeWarnings().find("not usable"), std::string::npos) << "a flooded server was left out";
    }
    EXPECT_GT(f0.made() + f1.made(), 400) << "the churn did not run";
  }
  EXPECT_EQ(coll.finalize(ctx), ncclSuccess);
  unsetenv("BRAID_PS_SERVERS");
  unsetenv("BRAID_PS_TOKEN");
  braid_params_reload();
}

// The token from a file (BRAID_PS_TOKEN_FILE: out of the environment and a container's
// configuration), BRAID_PS_TOKEN unset: CollNet connects and reduces; a file that cannot be read
// turns CollNet off at init with the reason.
TEST(CollNetToken, FromAFileOutOfTheEnvironment) {
  braid_log_set_logger(wire_watch::Logger);
  Servers srv;
  ASSERT_TRUE(srv.s[0] && srv.s[1]);
  char path[] = "/tmp/braid-token-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "flood-token\n", 12), 12);
  close(fd);
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_PS_SERVERS", srv.list.c_str(), 1);
  unsetenv("BRAID_PS_TOKEN");
  setenv("BRAID_PS_TOKEN_FILE", path, 1);
  braid_params_reload();
  void* ctx = nullptr;
  ASSERT_EQ(coll.init(&ctx, 1, wire_watch::Logger), ncclSuccess) << wire_watch::TakeWarnings();
  EXPECT_EQ(ConnectAndReduce(ctx, 5), "") << wire_watch::TakeWarnings();
  EXPECT_EQ(coll.finalize(ctx), ncclSuccess);
  unlink(path);
  wire_watch::TakeWarnings();
  EXPECT_NE(coll.init(&ctx, 1, wire_watch::Logger), ncclSuccess) << "init with an unreadable token file";
  EXPECT_NE(wire_watch::TakeWarnings().find(path), std::string::npos) << "the WARN does not name the file";
  unsetenv("BRAID_PS_SERVERS");
  unsetenv("BRAID_PS_TOKEN_FILE");
  braid_params_reload();
}

}  // namespace
