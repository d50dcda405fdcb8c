// Several threads, each driving its own connections, as NCCL's proxy threads of several
// communicators do: the shared parts (telemetry registry and metrics file, connect list,
// parameters, logging, diagnosis) must be race-free.  Built and run under ThreadSanitizer by
// `make test` (build/tsan).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
#include "collnet/collnet.h"
#include "nccl_plugin/net.h"
#include "param.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
}

namespace {

const ncclNet_v11_t& net = ncclNetPlugin_v11;

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// One thread's work: a connection to itself, 200 messages of varying sizes, every byte checked.
bool Exchange(int id, std::atomic<int>* failures) {
  void* ctx = nullptr;
  if (net.init(&ctx, (uint64_t)id, nullptr, nullptr, nullptr) != ncclSuccess) return false;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *listen = nullptr, *s = nullptr, *r = nullptr;
  if (net.listen(ctx, 0, handle, &listen) != ncclSuccess) return false;
  for (double end = Now() + 10; (!s || !r) && Now() < end;) {
    if (!s && net.connect(ctx, 0, handle, &s, nullptr) != ncclSuccess) return false;
    if (!r && net.accept(listen, &r, nullptr) != ncclSuccess) return false;
  }
  net.closeListen(listen);
  if (!s || !r) return false;
  std::vector<char> src(300000), dst(300000);
  bool ok = true;
  for (int m = 0; m < 200 && ok; m++) {
    size_t size = (size_t)((m * 7919 + id * 104729) % 300000);
    for (size_t i = 0; i < size; i++) src[i] = (char)(i * 31 + m + id);
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = id;
    void *rq = nullptr, *sq = nullptr;
    ok = net.irecv(r, 1, &d, &cap, &tag, nullptr, nullptr, &rq) == ncclSuccess && rq;
    ok = ok && net.isend(s, src.data(), size, tag, nullptr, nullptr, &sq) == ncclSuccess && sq;
    int rd = 0, sd = 0, got = 0, sz = 0;
    // Generous: under ThreadSanitizer on a loaded 2-core machine a message can take seconds.
    for (double end = Now() + 30; ok && (!rd || !sd) && Now() < end;) {
      if (!sd) ok = net.test(sq, &sd, &sz) == ncclSuccess;
      if (ok && !rd) ok = net.test(rq, &rd, &got) == ncclSuccess;
    }
    ok = ok && rd && sd && (size_t)got == size && !memcmp(src.data(), dst.data(), size);
  }
  if (!ok) failures->fetch_add(1);
  net.closeSend(s);
  net.closeRecv(r);
  net.finalize(ctx);
  return ok;
}

TEST(Threads, ConnectionsOnSeveralThreadsAreIndependent) {
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_NSTREAMS", "2", 1);  // acknowledged chunks, the scheduler, per-rail telemetry
  setenv("BRAID_METRICS_FILE", "/tmp/braid-threads-test.%p.prom", 1);
  setenv("BRAID_METRICS_INTERVAL_MS", "50", 1);
  braid_params_reload();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) threads.emplace_back([t, &failures] { Exchange(t, &failures); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  char path[64];
  snprintf(path, sizeof path, "/tmp/braid-threads-test.%d.prom", (int)getpid());
  EXPECT_EQ(unlink(path), 0) << "the metrics file was written";
  unsetenv("BRAID_NSTREAMS");
  unsetenv("BRAID_METRICS_FILE");
  unsetenv("BRAID_METRICS_INTERVAL_MS");
  braid_params_reload();
}

// NCCL may init CollNet for one communicator while another's connect runs (issue 19 item 5):
// init must not rewrite the braid-ps server list that connect reads. Nothing listens on the
// servers' ports, so each connect reads the list, retries until its short deadline and fails.
TEST(Threads, CollNetInitDuringConnect) {
  setenv("BRAID_SOCKET_IFNAME", "lo", 1);
  setenv("BRAID_PS_SERVERS", "127.0.0.1:1,127.0.0.1:2,[::1]:3,localhost:4", 1);
  setenv("BRAID_PS_TOKEN", "threads-test-token", 1);
  setenv("BRAID_PS_CONNECT_TIMEOUT_MS", "100", 1);
  braid_params_reload();
  braid_coll_init(nullptr, 0, nullptr, "test");  // the list exists before the first connect
  std::atomic<bool> stop{false};
  std::atomic<int> connects{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&stop] {
      while (!stop.load()) {
        void* ctx = nullptr;
        braid_coll_init(&ctx, 1, nullptr, "test");
        braid_coll_finalize(ctx);
      }
    });
  for (int t = 0; t < 2; t++)
    threads.emplace_back([&connects] {
      for (int k = 0; k < 3; k++) {
        char handle[NCCL_NET_HANDLE_MAXSIZE];
        void *listen = nullptr, *comm = nullptr;
        if (braid_coll_listen(nullptr, 0, handle, &listen) != ncclSuccess) return;
        void* handles[1] = {handle};
        // No server answers: the connect fails after reading every server's name and address.
        EXPECT_NE(ncclSuccess, braid_coll_connect(handles, 1, 0, listen, &comm));
        EXPECT_EQ(nullptr, comm);
        braid_coll_close_listen(listen);
        connects.fetch_add(1);
      }
    });
  for (size_t t = 2; t < threads.size(); t++) threads[t].join();
  stop = true;
  threads[0].join();
  threads[1].join();
  EXPECT_EQ(connects.load(), 6);
  unsetenv("BRAID_PS_SERVERS");
  unsetenv("BRAID_PS_TOKEN");
  unsetenv("BRAID_PS_CONNECT_TIMEOUT_MS");
  braid_params_reload();
}

}  // namespace
