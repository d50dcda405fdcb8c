// Socket helper threads (BRAID_SOCKET_THREADS, net_plugin/transport/socket/sock_helper.h): a
// connection's socket I/O on threads of its own while the calling thread (NCCL's proxy) only
// posts and tests.  Over loopback, through the exported v11 table: data of every size over one,
// two and three helpers, both directions at once from two threads, closing with requests still
// on the helpers, a helper meeting a socket error, a stream cut on a striped connection, and many
// small messages (the proxy's inline writes).  Built into the unit tests (plain and ASan) and
// into the ThreadSanitizer program (build/tsan/threads-test).
#include <dirent.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "comm/comm.h"
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "transport/socket/sock_stream.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
}
#include "wire_watch.h"

namespace {

using wire_watch::Logger;
using wire_watch::Now;
using wire_watch::TakeWarnings;

const ncclNet_v11_t& net = ncclNetPlugin_v11;

// Sets variables for one test and puts every one back (set or unset) at the end.
class Env {
 public:
  void Set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = getenv(name);
      saved_[name] = old ? std::make_pair(true, std::string(old)) : std::make_pair(false, std::string());
    }
    if (value) setenv(name, value, 1);
    else unsetenv(name);
    braid_params_reload();
  }
  ~Env() {
    for (auto& kv : saved_) {
      if (kv.second.first) setenv(kv.first.c_str(), kv.second.second.c_str(), 1);
      else unsetenv(kv.first.c_str());
    }
    braid_params_reload();
  }

 private:
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

// Threads of this process named like a socket helper ("braid-sockN").
int HelperThreads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (!f) continue;  // (a thread that just ended)
    if (fgets(name, sizeof name, f) && !strncmp(name, "braid-sock", 10)) n++;
    fclose(f);
  }
  closedir(d);
  return n;
}

// A joined thread's /proc entry may outlive pthread_join by a moment.
int HelperThreadsSettled(int want, double secs = 2) {
  int n = HelperThreads();
  for (double end = Now() + secs; n != want && Now() < end; n = HelperThreads()) usleep(1000);
  return n;
}

// Bytes unique to (seed, position): no two messages, rounds or configurations share a pattern.
void Fill(std::vector<char>* v, size_t size, uint64_t seed) {
  v->resize(size);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    memcpy(v->data() + i, &z, 8);
  }
  for (; i < size; i++) (*v)[i] = (char)(seed * 131 + i * 7 + 1);
}

constexpr char kCanary = 0x5a;
constexpr size_t kSlack = 64;  // receive buffers are this much larger, filled with kCanary

struct Msg {
  size_t size;
  int tag;
  uint64_t seed;
};

// One direction of a connection: its messages' contents, and the receiver's check of each.
class Traffic {
 public:
  explicit Traffic(std::vector<Msg> msgs) : msgs_(std::move(msgs)), src_(msgs_.size()) {
    for (size_t i = 0; i < msgs_.size(); i++) Fill(&src_[i], msgs_[i].size, msgs_[i].seed);
  }
  size_t Count() const { return msgs_.size(); }
  const Msg& At(size_t i) const { return msgs_[i]; }
  char* Data(size_t i) { return src_[i].data(); }
  // Message i received into buf (its size + kSlack bytes), size as test() reported it.
  bool Check(size_t i, const std::vector<char>& buf, int size, std::string* why) const {
    const Msg& m = msgs_[i];
    std::string what = "message " + std::to_string(i) + " (" + std::to_string(m.size) + " bytes)";
    if (size != (int)m.size) return *why = what + ": test() reported size " + std::to_string(size), false;
    if (memcmp(buf.data(), src_[i].data(), m.size) != 0) {
      size_t k = 0;
      while (buf[k] == src_[i][k]) k++;
      return *why = what + ": first wrong byte at " + std::to_string(k), false;
    }
    for (size_t k = m.size; k < m.size + kSlack; k++)
      if (buf[k] != kCanary) return *why = what + ": written past its end", false;
    return true;
  }

 private:
  std::vector<Msg> msgs_;
  std::vector<std::vector<char>> src_;
};

// The two ends of one direction, each driven as NCCL's proxy drives it: requests posted in order,
// at most `window` in flight, every open one tested on each step.  Step() returns false with *why
// on an error.
class SendSide {
 public:
  SendSide(void* comm, Traffic* t, int window) : c_(comm), t_(t), window_(window), req_(t->Count()) {}
  bool Step(std::string* why) {
    while (next_ < t_->Count() && next_ - done_ < (size_t)window_) {
      const Msg& m = t_->At(next_);
      ncclResult_t rc = net.isend(c_, t_->Data(next_), m.size, m.tag, nullptr, nullptr, &req_[next_]);
      if (rc != ncclSuccess) return rc_ = rc, *why = "isend " + std::to_string(next_) + ": error " + std::to_string(rc), false;
      if (!req_[next_]) break;  // back-pressure: later
      next_++;
    }
    for (size_t i = done_; i < next_; i++) {
      if (!req_[i]) continue;
      int done = 0, size = -1;
      ncclResult_t rc = net.test(req_[i], &done, &size);
      if (rc != ncclSuccess) return rc_ = rc, *why = "test of send " + std::to_string(i) + ": error " + std::to_string(rc), false;
      if (done) req_[i] = nullptr;
    }
    while (done_ < next_ && !req_[done_]) done_++;
    return true;
  }
  size_t Done() const { return done_; }
  ncclResult_t Error() const { return rc_; }  // what a failed call returned (data errors: none)

 private:
  void* c_;
  Traffic* t_;
  int window_;
  std::vector<void*> req_;
  size_t next_ = 0, done_ = 0;
  ncclResult_t rc_ = ncclSuccess;
};

class RecvSide {
 public:
  RecvSide(void* comm, Traffic* t, int window)
      : c_(comm), t_(t), window_(window), req_(t->Count()), buf_(t->Count()) {}
  bool Step(std::string* why) {
    while (next_ < t_->Count() && next_ < limit_ && next_ - done_ < (size_t)window_) {
      const Msg& m = t_->At(next_);
      buf_[next_].assign(m.size + kSlack, kCanary);
      void* d = buf_[next_].data();
      size_t cap = buf_[next_].size();
      int tag = m.tag;
      ncclResult_t rc = net.irecv(c_, 1, &d, &cap, &tag, nullptr, nullptr, &req_[next_]);
      if (rc != ncclSuccess) return rc_ = rc, *why = "irecv " + std::to_string(next_) + ": error " + std::to_string(rc), false;
      if (!req_[next_]) break;
      next_++;
    }
    for (size_t i = done_; i < next_; i++) {
      if (!req_[i]) continue;
      int done = 0, size = -1;
      ncclResult_t rc = net.test(req_[i], &done, &size);
      if (rc != ncclSuccess) return rc_ = rc, *why = "test of receive " + std::to_string(i) + ": error " + std::to_string(rc), false;
      if (!done) continue;
      req_[i] = nullptr;
      if (!t_->Check(i, buf_[i], size, why)) return false;
      std::vector<char>().swap(buf_[i]);
    }
    while (done_ < next_ && !req_[done_]) done_++;
    return true;
  }
  size_t Done() const { return done_; }
  ncclResult_t Error() const { return rc_; }
  void Limit(size_t n) { limit_ = n; }  // posts no receive for message n onwards

 private:
  void* c_;
  Traffic* t_;
  int window_;
  std::vector<void*> req_;
  std::vector<std::vector<char>> buf_;
  size_t next_ = 0, done_ = 0, limit_ = SIZE_MAX;
  ncclResult_t rc_ = ncclSuccess;
};

// Both ends of one direction from one thread.
class Flow {
 public:
  Flow(void* s, void* r, std::vector<Msg> msgs, int window, int send_window = 0)
      : t_(std::move(msgs)), send_(s, &t_, send_window ? send_window : window), recv_(r, &t_, window) {}
  bool Step(std::string* why) { return send_.Step(why) && recv_.Step(why); }
  bool Done() const { return send_.Done() == t_.Count() && recv_.Done() == t_.Count(); }
  size_t Received() const { return recv_.Done(); }
  SendSide& Send() { return send_; }
  RecvSide& Recv() { return recv_; }
  // Drives until done; false with *why on an error or after `secs`.
  bool Run(double secs, std::string* why) {
    for (double end = Now() + secs; !Done();) {
      if (!Step(why)) return false;
      if (Now() > end) return *why = Progress("not done in " + std::to_string(secs) + " s"), false;
    }
    return true;
  }
  std::string Progress(const std::string& what) const {
    return what + ": " + std::to_string(send_.Done()) + " of " + std::to_string(t_.Count()) +
           " sends and " + std::to_string(recv_.Done()) + " receives complete";
  }

 private:
  Traffic t_;
  SendSide send_;
  RecvSide recv_;
};

const size_t kSizes[] = {0, 1, 8, 4095, 65536, 65537, (1u << 20) + 3, 5u << 20};

// Sizes of kSizes in a few orders, seeds unique to (config, round, index).
std::vector<Msg> Messages(int config, int rounds, int tag) {
  std::vector<Msg> v;
  const size_t n = sizeof kSizes / sizeof kSizes[0];
  for (int round = 0; round < rounds; round++)
    for (size_t k = 0; k < n; k++) {
      size_t i = (k * (2 * round + 1) + round) % n;  // rounds see the sizes in other orders
      v.push_back({kSizes[i], tag, (uint64_t)config << 40 | (uint64_t)round << 20 | (v.size() + 1)});
    }
  return v;
}

class SockHelpers : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.Set("BRAID_SOCKET_IFNAME", "lo");
    env_.Set("BRAID_TIMEOUT_MS", "3000");
    env_.Set("BRAID_NSTREAMS", nullptr);
    env_.Set("BRAID_SOCKET_THREADS", nullptr);
    ASSERT_EQ(net.init(&ctx_, 7, nullptr, Logger, nullptr), ncclSuccess);
    TakeWarnings();
  }
  void TearDown() override {
    for (void* c : sends_) { EXPECT_EQ(net.closeSend(c), ncclSuccess); }
    for (void* c : recvs_) { EXPECT_EQ(net.closeRecv(c), ncclSuccess); }
    sends_.clear(), recvs_.clear();
    EXPECT_EQ(HelperThreadsSettled(0), 0) << "helper threads outlive their connections";
    EXPECT_EQ(net.finalize(ctx_), ncclSuccess);
  }
  // threads: BRAID_SOCKET_THREADS; nstreams: BRAID_NSTREAMS, 0 for unset.
  void Configure(int threads, int nstreams) {
    env_.Set("BRAID_SOCKET_THREADS", std::to_string(threads).c_str());
    env_.Set("BRAID_NSTREAMS", nstreams ? std::to_string(nstreams).c_str() : nullptr);
  }
  // A connection to ourselves; both ends are closed at TearDown unless Forget()-ten.
  void Connect(void** s, void** r) {
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listen = nullptr;
    ASSERT_EQ(net.listen(ctx_, 0, handle, &listen), ncclSuccess);
    *s = *r = nullptr;
    for (double end = Now() + 10; (!*s || !*r) && Now() < end;) {
      if (!*s) { ASSERT_EQ(net.connect(ctx_, 0, handle, s, nullptr), ncclSuccess); }
      if (!*r) { ASSERT_EQ(net.accept(listen, r, nullptr), ncclSuccess); }
    }
    ASSERT_EQ(net.closeListen(listen), ncclSuccess);
    ASSERT_TRUE(*s && *r) << "connection not established in 10 s";
    sends_.push_back(*s);
    recvs_.push_back(*r);
  }
  void Forget(void* c) {
    for (auto* v : {&sends_, &recvs_})
      for (size_t i = 0; i < v->size(); i++)
        if ((*v)[i] == c) v->erase(v->begin() + i);
  }
  static braid_comm* C(void* comm) { return static_cast<braid_comm*>(comm); }
  // Stream k's socket, read under the comm's lock (a rejoin may replace it).
  static int Fd(void* comm, int k) {
    braid_comm* c = C(comm);
    pthread_mutex_lock(&c->lock);
    int fd = c->streams[k].fd;
    pthread_mutex_unlock(&c->lock);
    return fd;
  }

  Env env_;
  void* ctx_ = nullptr;
  std::vector<void*> sends_, recvs_;
};

// 1. Every size, up to 8 in flight, over one, two and three helpers per comm (and none, the
// reference); the helpers exist exactly while their connection does.
TEST_F(SockHelpers, DataOfEverySizeOverHelpers) {
  struct Case {
    int threads, nstreams;  // nstreams 0: unset (a stream per helper)
    int want_streams;
    bool want_acks;
  };
  const Case cases[] = {{0, 0, 1, false}, {1, 0, 1, false}, {2, 0, 2, true}, {3, 3, 3, true}};
  int config = 0;
  for (const Case& k : cases) {
    SCOPED_TRACE("BRAID_SOCKET_THREADS=" + std::to_string(k.threads) + " BRAID_NSTREAMS=" +
                 (k.nstreams ? std::to_string(k.nstreams) : "unset"));
    Configure(k.threads, k.nstreams);
    void *s = nullptr, *r = nullptr;
    Connect(&s, &r);
    if (HasFatalFailure()) return;
    EXPECT_EQ(C(s)->nstreams, k.want_streams);
    EXPECT_EQ(C(r)->nstreams, k.want_streams);
    EXPECT_EQ(C(s)->acks, k.want_acks);
    EXPECT_EQ(C(s)->threaded, k.threads > 0);
    EXPECT_EQ(C(r)->threaded, k.threads > 0);
    int per_comm = k.threads < k.want_streams ? k.threads : k.want_streams;
    EXPECT_EQ(HelperThreads(), 2 * per_comm) << "helpers of the send and the receive comm";
    std::string why;
    Flow flow(s, r, Messages(++config, 3, 5), 8);
    EXPECT_TRUE(flow.Run(20, &why)) << why;
    // Grouped receives: tags pick the buffer whatever order the sends come in.
    for (int g = 0; g < 2; g++) {
      const int n = 3;
      const size_t sizes[n] = {65537, 0, (1u << 20) + 3};
      int tags[n] = {10, 11, 12};
      std::vector<char> src[n], dst[n];
      void* data[n];
      size_t caps[n];
      for (int i = 0; i < n; i++) {
        Fill(&src[i], sizes[i], (uint64_t)config << 40 | 0xF0000 | (g << 4) | i);
        dst[i].assign(sizes[i] + kSlack, kCanary);
        data[i] = dst[i].data();
        caps[i] = dst[i].size();
      }
      void* rq = nullptr;
      ASSERT_EQ(net.irecv(r, n, data, caps, tags, nullptr, nullptr, &rq), ncclSuccess);
      ASSERT_NE(rq, nullptr);
      std::vector<void*> sq;
      for (int i : {2, 0, 1}) {
        void* q = nullptr;
        for (double end = Now() + 5; !q && Now() < end;)
          ASSERT_EQ(net.isend(s, src[i].data(), sizes[i], tags[i], nullptr, nullptr, &q), ncclSuccess);
        ASSERT_NE(q, nullptr);
        sq.push_back(q);
      }
      int got[n] = {-1, -1, -1}, rdone = 0;
      for (double end = Now() + 10; Now() < end && (!rdone || sq[0] || sq[1] || sq[2]);) {
        for (void*& q : sq) {
          int d = 0, sz = 0;
          if (q) { ASSERT_EQ(net.test(q, &d, &sz), ncclSuccess); }
          if (d) q = nullptr;
        }
        if (!rdone) { ASSERT_EQ(net.test(rq, &rdone, got), ncclSuccess); }
      }
      ASSERT_TRUE(rdone && !sq[0] && !sq[1] && !sq[2]) << "grouped receive " << g << " not done in 10 s";
      for (int i = 0; i < n; i++) {
        EXPECT_EQ(got[i], (int)sizes[i]) << "group " << g << " slot " << i;
        EXPECT_EQ(0, memcmp(dst[i].data(), src[i].data(), sizes[i])) << "group " << g << " slot " << i;
        EXPECT_EQ(std::string(kSlack, kCanary), std::string(dst[i].data() + sizes[i], kSlack));
      }
    }
    EXPECT_EQ(HelperThreads(), 2 * per_comm);
    Forget(s), Forget(r);
    EXPECT_EQ(net.closeSend(s), ncclSuccess);
    EXPECT_EQ(net.closeRecv(r), ncclSuccess);
    EXPECT_EQ(HelperThreadsSettled(0), 0) << "helpers still running after close";
  }
}

// 1b. A send's buffer is the caller's again once test() says done: free it at once (ASan then
// sees any later read).  Grouped receives over three helpers: a message's last bytes arrive on
// one stream while the receiver's acknowledgement of the whole message comes back on another, so
// a send can complete while the helper that wrote its chunk is still in its system call
// (tx_release_held must let that call end first: stream.h tx_settle).
TEST_F(SockHelpers, SendBuffersFreedAtCompletion) {
  Configure(3, 3);
  void *s = nullptr, *r = nullptr;
  Connect(&s, &r);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(C(s)->acks && C(s)->threaded);
#ifdef __SANITIZE_THREAD__
  const int groups = 60;  // (ThreadSanitizer: its cost is in the copies and checks)
#else
  const int groups = 400;  // (ASan: 400 groups caught every run without tx_settle)
#endif
  for (int g = 0; g < groups; g++) {
    const int n = 3;
    const size_t sizes[n] = {65537, 0, (1u << 20) + 3};
    int tags[n] = {10, 11, 12};
    std::vector<char> want[n], dst[n];
    std::unique_ptr<std::vector<char>> src[n];
    void* data[n];
    size_t caps[n];
    for (int i = 0; i < n; i++) {
      Fill(&want[i], sizes[i], 0xF100000 + 4 * g + i);
      src[i].reset(new std::vector<char>(want[i]));
      dst[i].assign(sizes[i] + kSlack, kCanary);
      data[i] = dst[i].data();
      caps[i] = dst[i].size();
    }
    void* rq = nullptr;
    ASSERT_EQ(net.irecv(r, n, data, caps, tags, nullptr, nullptr, &rq), ncclSuccess);
    ASSERT_NE(rq, nullptr);
    void* sq[n] = {nullptr, nullptr, nullptr};
    for (int i : {2, 0, 1})
      for (double end = Now() + 5; !sq[i] && Now() < end;)
        ASSERT_EQ(net.isend(s, src[i]->data(), sizes[i], tags[i], nullptr, nullptr, &sq[i]), ncclSuccess);
    int got[n] = {-1, -1, -1}, rdone = 0, open = n;
    for (double end = Now() + 10; Now() < end && (!rdone || open);) {
      for (int i = 0; i < n; i++) {
        int d = 0, sz = 0;
        if (sq[i]) { ASSERT_EQ(net.test(sq[i], &d, &sz), ncclSuccess); }
        if (!d) continue;
        sq[i] = nullptr, open--;
        src[i].reset();  // the caller's again
      }
      if (!rdone) { ASSERT_EQ(net.test(rq, &rdone, got), ncclSuccess); }
    }
    ASSERT_TRUE(rdone && !open) << "group " << g << " not done in 10 s";
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(got[i], (int)sizes[i]) << "group " << g << " slot " << i;
      ASSERT_EQ(0, memcmp(dst[i].data(), want[i].data(), sizes[i])) << "group " << g << " slot " << i;
    }
  }
}

// 2. Two ranks' proxies: A sends to B while B sends to A, each rank's send comm and receive comm
// driven from its own thread, the four comms' helpers all running at once.
TEST_F(SockHelpers, BothDirectionsFromTwoThreads) {
  Configure(2, 0);
  void *s_ab, *r_ab, *s_ba, *r_ba;
  Connect(&s_ab, &r_ab);
  Connect(&s_ba, &r_ba);
  if (HasFatalFailure()) return;
  EXPECT_EQ(HelperThreads(), 8);
  Traffic ab(Messages(101, 4, 1)), ba(Messages(102, 4, 2));
  std::atomic<bool> failed{false};
  std::string why[2];
  auto rank = [&failed](SendSide* tx, RecvSide* rx, size_t n, std::string* why) {
    for (double end = Now() + 40; (tx->Done() < n || rx->Done() < n) && !failed;) {
      if (!tx->Step(why) || !rx->Step(why)) return (void)(failed = true);
      if (Now() > end) {
        *why = "not done in 40 s: " + std::to_string(tx->Done()) + " sends, " + std::to_string(rx->Done()) + " receives";
        return (void)(failed = true);
      }
    }
  };
  SendSide a_tx(s_ab, &ab, 8), b_tx(s_ba, &ba, 8);
  RecvSide b_rx(r_ab, &ab, 8), a_rx(r_ba, &ba, 8);
  std::thread a(rank, &a_tx, &a_rx, ba.Count(), &why[0]), b(rank, &b_tx, &b_rx, ab.Count(), &why[1]);
  a.join();
  b.join();
  EXPECT_FALSE(failed.load()) << "rank A: " << why[0] << "; rank B: " << why[1];
  EXPECT_EQ(a_tx.Done(), ab.Count());
  EXPECT_EQ(b_rx.Done(), ab.Count());
  EXPECT_EQ(b_tx.Done(), ba.Count());
  EXPECT_EQ(a_rx.Done(), ba.Count());
}

// 3. Closing with sends and receives still on the helpers (a communicator aborted mid-step):
// close returns promptly, stops the helpers, and leaks nothing (the ASan build checks).
TEST_F(SockHelpers, CloseWithRequestsPendingOnHelpers) {
  for (int threads : {1, 2})
    for (bool recv_first : {false, true}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (recv_first ? ", receiver closed first" : ", sender closed first"));
      Configure(threads, 0);
      void *s = nullptr, *r = nullptr;
      Connect(&s, &r);
      if (HasFatalFailure()) return;
      ASSERT_TRUE(C(s)->threaded && C(r)->threaded);
      const int k = 8;
      std::vector<std::vector<char>> src(k), dst(k);
      std::vector<void*> sq(k), rq(k);
      for (int i = 0; i < k; i++) {
        Fill(&src[i], 4u << 20, 300 + i);
        dst[i].assign(4u << 20, 0);
        void* d = dst[i].data();
        size_t cap = dst[i].size();
        // The last two receives wait for a tag no send carries: they are still open at close,
        // and the last two sends' data waits for them in the receiver's buffers.
        int tag = i < k - 2 ? 3 : 4;
        ASSERT_EQ(net.irecv(r, 1, &d, &cap, &tag, nullptr, nullptr, &rq[i]), ncclSuccess);
        ASSERT_NE(rq[i], nullptr);
        for (double end = Now() + 5; !sq[i] && Now() < end;)
          ASSERT_EQ(net.isend(s, src[i].data(), src[i].size(), 3, nullptr, nullptr, &sq[i]), ncclSuccess);
        ASSERT_NE(sq[i], nullptr);
      }
      // Some progress: the first receive completes; most of the data is still to move.
      int d0 = 0, sz = 0;
      for (double end = Now() + 10; !d0 && Now() < end;) {
        ASSERT_EQ(net.test(rq[0], &d0, &sz), ncclSuccess);
        int sd = 0;
        if (sq[0]) { ASSERT_EQ(net.test(sq[0], &sd, &sz), ncclSuccess); }
        if (sd) sq[0] = nullptr;
      }
      ASSERT_TRUE(d0) << "first receive not done in 10 s";
      EXPECT_EQ(0, memcmp(dst[0].data(), src[0].data(), src[0].size()));
      Forget(s), Forget(r);
      double t = Now();
      std::atomic<bool> closed{false};
      std::thread closer([&] {
        void* first = recv_first ? r : s;
        void* second = recv_first ? s : r;
        EXPECT_EQ(recv_first ? net.closeRecv(first) : net.closeSend(first), ncclSuccess);
        usleep(20000);  // the other end's helpers meet the closed peer, its requests still open
        EXPECT_EQ(recv_first ? net.closeSend(second) : net.closeRecv(second), ncclSuccess);
        closed = true;
      });
      while (!closed && Now() - t < 5) usleep(1000);
      if (!closed) {  // fail, rather than hang the whole program
        ADD_FAILURE() << "close with requests pending did not return in 5 s";
        fflush(stdout);
        _exit(1);
      }
      closer.join();
      EXPECT_EQ(HelperThreadsSettled(0), 0);
    }
}

// A comm's pending request, tested until it fails; the result (ncclSuccess if it completed, or
// ncclInProgress after `secs`).
ncclResult_t TestUntilError(void* q, double secs) {
  for (double end = Now() + secs; Now() < end;) {
    int d = 0, sz = 0;
    ncclResult_t rc = net.test(q, &d, &sz);
    if (rc != ncclSuccess) return rc;
    if (d) return ncclSuccess;
  }
  return ncclInProgress;
}

// Resets s's TCP connection in place (an RST to the peer): connect() with AF_UNSPEC disconnects
// the socket without closing the descriptor the helpers poll.
int Reset(int fd) {
  sockaddr sa{};
  sa.sa_family = AF_UNSPEC;
  return connect(fd, &sa, sizeof sa);
}

// 4a. One stream (no acknowledgements: a broken stream fails the connection).  A large send
// waits in its helper for room (the receiver posted nothing yet); the connection is reset under
// it, from either end.  The helpers meet the error; the pending requests fail with it (never
// succeed, never hang) and a WARN names the cause.
TEST_F(SockHelpers, SocketErrorInAHelperFailsTheRequests) {
  for (bool reset_receiver : {true, false}) {
    SCOPED_TRACE(reset_receiver ? "the receiver's socket reset" : "the sender's socket reset");
    Configure(1, 0);
    void *s = nullptr, *r = nullptr;
    Connect(&s, &r);
    if (HasFatalFailure()) return;
    ASSERT_EQ(C(s)->nstreams, 1);
    ASSERT_TRUE(C(s)->threaded && C(r)->threaded);
    std::vector<char> src, dst(64u << 20, 0);
    Fill(&src, dst.size(), 400 + reset_receiver);
    void* sq = nullptr;
    for (double end = Now() + 5; !sq && Now() < end;)
      ASSERT_EQ(net.isend(s, src.data(), src.size(), 1, nullptr, nullptr, &sq), ncclSuccess);
    ASSERT_NE(sq, nullptr);
    // Far more than the sockets hold: the send stays open, its helper waiting for room.
    EXPECT_EQ(TestUntilError(sq, 0.3), ncclInProgress) << "64 MiB sent to a receiver that posted nothing";
    // An irecv for the message is not posted yet: the receiver's helper holds the frame.
    TakeWarnings();
    ASSERT_EQ(Reset(Fd(reset_receiver ? r : s, 0)), 0) << strerror(errno);
    ncclResult_t rc = TestUntilError(sq, 5);
    EXPECT_TRUE(rc == ncclRemoteError || rc == ncclSystemError) << "send test() returned " << rc;
    // Now the receive: its helper reads what is left, then meets the end of the connection.
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = 1;
    void* rq = nullptr;
    ncclResult_t rrc = net.irecv(r, 1, &d, &cap, &tag, nullptr, nullptr, &rq);
    if (rrc == ncclSuccess) {
      ASSERT_NE(rq, nullptr);
      rrc = TestUntilError(rq, 5);
    }
    EXPECT_TRUE(rrc == ncclRemoteError || rrc == ncclSystemError) << "receive returned " << rrc;
    std::string w = TakeWarnings();
    EXPECT_NE(w.find("send failed: "), std::string::npos) << w;
    bool rx_cause = w.find("peer closed the connection in the middle of a message") != std::string::npos ||
                    w.find("receive failed: ") != std::string::npos;
    EXPECT_TRUE(rx_cause) << w;
    Forget(s), Forget(r);
    EXPECT_EQ(net.closeSend(s), ncclSuccess);
    EXPECT_EQ(net.closeRecv(r), ncclSuccess);
  }
}

// 4b. Two streams on the one loopback rail (acknowledged chunks): one stream is cut, from either
// end, while the other's helper goes on.  A rail fails as a whole (tx_fail_rail: every stream of
// it settles its last write across threads, braid_sock_tx_failed quieting the other helper
// first), and this connection has no other rail.  Two outcomes are right, and which one comes
// depends on timing:
// - the connection fails: chunks wait to be re-sent and no rail is up to take them ("every rail
//   to the peer is down"; always so with threads 0 when chunks are in flight).  The pending sends
//   fail within seconds with that WARN, the receives that completed hold the right bytes, and
//   once the sender closes the pending ones complete (only acknowledgements were lost) or fail;
// - it carries on: an acknowledgement on the surviving stream, read by its own helper while the
//   cut stream's helper is in a system call, revives the rail (or the stream rejoins) before a
//   chunk needs it; then every message arrives byte for byte, each checked as it completes.
// Cut while held (the receiver posted nothing for the messages in flight: both streams full of
// unacknowledged chunks) and while flowing (receives posted as the data moves).
TEST_F(SockHelpers, CutStreamOnTheOnlyRail) {
  int run = 0;
  for (bool held : {true, false})
    for (bool cut_receiver : {false, true}) {
      std::string what = std::string(held ? "held" : "flowing") +
                         (cut_receiver ? ", the receiver's stream 1 cut" : ", the sender's stream 1 cut");
      SCOPED_TRACE(what);
      Configure(2, 0);
      void *s = nullptr, *r = nullptr;
      Connect(&s, &r);
      if (HasFatalFailure()) return;
      ASSERT_EQ(C(s)->nstreams, 2);
      ASSERT_EQ(C(s)->nrails, 1);
      ASSERT_TRUE(C(s)->acks);
      ASSERT_TRUE(C(s)->threaded && C(r)->threaded);
      const size_t n = 16, first = 2;
      std::vector<Msg> msgs;
      for (size_t i = 0; i < n; i++) msgs.push_back({(2u << 20) + 17u * i, 4, 500 + 100 * (uint64_t)run + i});
      run++;
      Flow flow(s, r, msgs, 8, held ? (int)n : 8);
      if (held) flow.Recv().Limit(first);
      std::string why;
      for (double end = Now() + 10; flow.Received() < first && Now() < end;) ASSERT_TRUE(flow.Step(&why)) << why;
      ASSERT_GE(flow.Received(), first) << "first messages not received in 10 s";
      if (held) {  // the sender's helpers fill both streams, which the receiver holds
        for (double end = Now() + 0.1; Now() < end;) ASSERT_TRUE(flow.Step(&why)) << why;
        ASSERT_EQ(flow.Received(), first);
      }
      ASSERT_LT(flow.Received(), n) << "all done before the cut: nothing tested";
      TakeWarnings();
      ASSERT_EQ(shutdown(Fd(cut_receiver ? r : s, 1), SHUT_RDWR), 0) << strerror(errno);
      double t = Now();
      if (held) flow.Recv().Limit(SIZE_MAX);
      while (flow.Step(&why) && !flow.Done() && Now() - t < 10) {
      }
      std::string w = TakeWarnings();
      EXPECT_NE(w.find("send stream 1 (rail 0, lo)"), std::string::npos) << "the sender saw the cut\n" << w;
      EXPECT_EQ(flow.Recv().Error(), ncclSuccess) << why;
      if (flow.Done()) {  // carried on: every byte was checked as it arrived
        printf("  (%s: carried on)\n", what.c_str());
        EXPECT_EQ(w.find("every rail to the peer is down"), std::string::npos) << w;
        Forget(s), Forget(r);
        EXPECT_EQ(net.closeSend(s), ncclSuccess);
        EXPECT_EQ(net.closeRecv(r), ncclSuccess);
        continue;
      }
      printf("  (%s: the connection failed)\n", what.c_str());
      EXPECT_EQ(flow.Send().Error(), ncclRemoteError) << why << " (after " << Now() - t << " s)";
      EXPECT_LT(Now() - t, 5.0) << "the failure took more than 5 s to show";
      EXPECT_NE(w.find("every rail to the peer is down"), std::string::npos) << w;
      // The sender goes away: the receives still pending complete (what was on the wire may be
      // all of it: only the acknowledgements were lost) or fail; none waits for ever.
      Forget(s);
      EXPECT_EQ(net.closeSend(s), ncclSuccess);
      t = Now();
      while (flow.Recv().Done() < n && flow.Recv().Step(&why) && Now() - t < 5) {
      }
      if (flow.Recv().Done() < n) { EXPECT_EQ(flow.Recv().Error(), ncclRemoteError) << why; }
      Forget(r);
      EXPECT_EQ(net.closeRecv(r), ncclSuccess);
    }
}

// 5. Small messages one at a time (a ping-pong), in a stream of 8 in flight, and among large ones,
// one helper per comm (and two: acknowledged chunks): the proxy writes a small batch itself while
// the helper is idle (sock_tx.c), the helper reads (and acknowledges); every message arrives, in
// order, with its own content.
TEST_F(SockHelpers, ManySmallMessagesInOrder) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE("BRAID_SOCKET_THREADS=" + std::to_string(threads));
    Configure(threads, 0);
    void *s_ab, *r_ab, *s_ba, *r_ba;
    Connect(&s_ab, &r_ab);
    Connect(&s_ba, &r_ba);
    if (HasFatalFailure()) return;
    ASSERT_EQ(C(s_ab)->nstreams, threads);
    ASSERT_EQ(HelperThreads(), 4 * threads) << "two connections' helpers";
    auto word = [threads](int dir, int i) {
      return (uint64_t)0xB1A1D000u << 32 | (uint64_t)threads << 28 | (uint64_t)dir << 24 | (uint64_t)i;
    };
    // Ping-pong: A sends i to B, then B its own word for i to A.
    const int rounds = 1000;
    for (int i = 0; i < rounds; i++) {
      for (int dir = 0; dir < 2; dir++) {
        void* s = dir ? s_ba : s_ab;
        void* r = dir ? r_ba : r_ab;
        uint64_t out = word(dir, i), in[2] = {0, 0x5a5a5a5a5a5a5a5aull};
        void* d = &in[0];
        size_t cap = sizeof in;
        int tag = 9, got = -1, rd = 0, sd = 0;
        void *rq = nullptr, *sq = nullptr;
        ASSERT_EQ(net.irecv(r, 1, &d, &cap, &tag, nullptr, nullptr, &rq), ncclSuccess);
        ASSERT_NE(rq, nullptr);
        for (double end = Now() + 5; !sq && Now() < end;)
          ASSERT_EQ(net.isend(s, &out, sizeof out, tag, nullptr, nullptr, &sq), ncclSuccess);
        ASSERT_NE(sq, nullptr);
        for (double end = Now() + 10; (!rd || !sd) && Now() < end;) {
          int sz;
          if (!sd) { ASSERT_EQ(net.test(sq, &sd, &sz), ncclSuccess); }
          if (!rd) { ASSERT_EQ(net.test(rq, &rd, &got), ncclSuccess); }
        }
        ASSERT_TRUE(rd && sd) << "round " << i << " direction " << dir << " not done in 10 s";
        ASSERT_EQ(got, 8) << i;
        ASSERT_EQ(in[0], out) << "round " << i << " direction " << dir;
        ASSERT_EQ(in[1], 0x5a5a5a5a5a5a5a5aull) << "written past the message";
      }
    }
    // A stream of 2000 8-byte messages, 8 in flight: each carries its own index.
    std::vector<Msg> msgs;
    for (int i = 0; i < 2000; i++) msgs.push_back({8, 9, (uint64_t)threads << 32 | (700000 + (uint64_t)i)});
    Flow flow(s_ab, r_ab, msgs, 8);
    std::string why;
    EXPECT_TRUE(flow.Run(30, &why)) << why;
    // Small messages among large ones: the proxy writes a small batch itself right after the
    // helper's write of a large one returns, before the helper has counted it (sock_tx.c settles
    // that write first).
    std::vector<Msg> mixed;
    const size_t cycle[] = {8, 300000, 8, 64, 8, 70001, 1, 8};
    for (int i = 0; i < 800; i++) mixed.push_back({cycle[i % 8], 9, (uint64_t)threads << 32 | (800000 + (uint64_t)i)});
    Flow flow2(s_ba, r_ba, mixed, 8);
    EXPECT_TRUE(flow2.Run(30, &why)) << why;
    for (void* c : {s_ab, s_ba}) {
      Forget(c);
      EXPECT_EQ(net.closeSend(c), ncclSuccess);
    }
    for (void* c : {r_ab, r_ba}) {
      Forget(c);
      EXPECT_EQ(net.closeRecv(c), ncclSuccess);
    }
  }
}

// 5b. (White box.) The proxy writes a small batch itself only once the helper's last write on the
// socket is counted (sock_tx.c: braid_sock_tx_settle before an inline write).  The window is
// made wide on purpose.  Each round: a large message, which the helper writes; a small one posted
// while the helper writes it, which the helper writes next, alone; this thread catches the helper
// in that system call, holds the comm's lock past the call's end and posts another small message
// at once: isend finds the helper's write finished and not yet counted.  Were it not counted
// first, the inline write would resend bytes the helper already wrote, and the receiver would
// get a garbled stream.
TEST_F(SockHelpers, InlineWriteAfterAHelperWriteCountsItFirst) {
  // This thread watches the helper from a CPU of its own: the helpers (started by Connect, from
  // this thread) inherit every CPU but that one.  (With one CPU the helper is never caught.)
  struct Affinity {
    cpu_set_t all;
    Affinity() { sched_getaffinity(0, sizeof all, &all); }
    ~Affinity() { pthread_setaffinity_np(pthread_self(), sizeof all, &all); }
  } affinity;
  const int ncpu = CPU_COUNT(&affinity.all);
  int mine = -1;
  for (int k = 0; k < CPU_SETSIZE && mine < 0; k++)
    if (CPU_ISSET(k, &affinity.all)) mine = k;
  cpu_set_t others = affinity.all, one;
  CPU_CLR(mine, &others);
  CPU_ZERO(&one);
  CPU_SET(mine, &one);
  if (ncpu >= 2) { ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof others, &others), 0); }
  Configure(1, 0);
  void *s = nullptr, *r = nullptr;
  Connect(&s, &r);
  if (HasFatalFailure()) return;
  if (ncpu >= 2) { ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0); }
  braid_comm* c = C(s);
  ASSERT_EQ(c->nstreams, 1);
  ASSERT_TRUE(c->threaded);
  auto* ss = static_cast<braid_sock_stream*>(c->streams[0].tp);
  auto busy = [ss] { return ss->busy.load(std::memory_order_acquire); };
  const size_t rounds = 150, n = 3 * rounds;
  std::vector<Msg> msgs;
  for (size_t i = 0; i < n; i++) msgs.push_back({i % 3 ? 8 + i % 5 : 100000 + i, 6, 1000000 + (uint64_t)i});
  Traffic t(msgs);
  RecvSide rx(r, &t, 8);
  std::vector<void*> sq(n);
  size_t posted = 0, done = 0;
  int caught = 0;
  std::string why;
  auto drive = [&]() {  // the receiver, and the sends still open
    if (!rx.Step(&why)) return false;
    for (size_t i = done; i < posted; i++) {
      int d = 0, sz = 0;
      if (sq[i] && net.test(sq[i], &d, &sz) != ncclSuccess) return why = "test of send " + std::to_string(i), false;
      if (d) sq[i] = nullptr;
    }
    while (done < posted && !sq[done]) done++;
    return true;
  };
  auto post = [&]() {
    const Msg& m = t.At(posted);
    for (double end = Now() + 5; !sq[posted] && Now() < end;) {
      if (net.isend(s, t.Data(posted), m.size, m.tag, nullptr, nullptr, &sq[posted]) != ncclSuccess) return false;
      if (!sq[posted] && !drive()) return false;
    }
    return sq[posted++] != nullptr;
  };
  for (size_t k = 0; k < rounds; k++) {
    for (double end = Now() + 10; posted - done > 4 && Now() < end;) ASSERT_TRUE(drive()) << why;
    ASSERT_TRUE(post()) << "large message " << posted;  // the helper writes it
    bool seen = false;
    for (double end = Now() + 0.02; !seen && Now() < end;) seen = busy();
    ASSERT_TRUE(post()) << "small message " << posted;  // left to the helper if it writes still
    if (seen) {  // the helper's next system call: the small message alone (when the large is out)
      for (double end = Now() + 0.02; busy() && Now() < end;) {
      }
      bool next = false;
      for (double end = Now() + 0.02; !next && Now() < end;) next = busy();
      if (next) {
        pthread_mutex_lock(&c->lock);
        for (double end = Now() + 1; busy() && Now() < end;) {
        }
        pthread_mutex_unlock(&c->lock);
        caught++;
      }
    }
    ASSERT_TRUE(post()) << "small message " << posted;  // inline, right after that write
  }
  for (double end = Now() + 20; (rx.Done() < n || done < n) && Now() < end;) ASSERT_TRUE(drive()) << why;
  EXPECT_EQ(rx.Done(), n) << why;
  EXPECT_EQ(done, n);
  if (ncpu >= 2) { EXPECT_GE(caught, (int)rounds / 10) << "the helper was seldom caught in a write: little tested"; }
  printf("  (caught the helper in a write in %d of %zu rounds)\n", caught, rounds);
}

}  // namespace
