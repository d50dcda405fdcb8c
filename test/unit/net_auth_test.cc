// The data streams' set-up seen by someone on the wire (docs/security.md, "Net plugin data
// streams"): through the exported v11 table over loopback, with a relay between connector and
// listener that records every byte.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "sodium_lib.h"
#include "transport/socket/sock.h"
#include "wire/wire.h"
extern ncclNet_v11_t ncclNetPlugin_v11;
}
#include "wire_watch.h"
#include "hs_peer.h"

namespace {

using wire_watch::Logger;
using wire_watch::Now;
using wire_watch::Relay;
using wire_watch::TakeWarnings;

const ncclNet_v11_t& net = ncclNetPlugin_v11;

bool Contains(const std::vector<uint8_t>& hay, const uint8_t* needle, size_t n) {
  return std::search(hay.begin(), hay.end(), needle, needle + n) != hay.end();
}

class NetAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("BRAID_SOCKET_IFNAME", "lo", 1);
    setenv("BRAID_TIMEOUT_MS", "2000", 1);
    braid_params_reload();
    ASSERT_EQ(net.init(&ctx_, 1, nullptr, nullptr, nullptr), ncclSuccess);
    braid_log_set_logger(Logger);
    TakeWarnings();
  }
  void TearDown() override {
    for (void* c : sends_) { EXPECT_EQ(net.closeSend(c), ncclSuccess); }
    for (void* c : recvs_) { EXPECT_EQ(net.closeRecv(c), ncclSuccess); }
    if (listen_) { EXPECT_EQ(net.closeListen(listen_), ncclSuccess); }
    EXPECT_EQ(net.finalize(ctx_), ncclSuccess);
    unsetenv("BRAID_NET_AUTH");
    braid_params_reload();
  }
  // listen(); the handle's address, and a copy of the handle that points at relay instead.
  void Listen(braid_handle* h) {
    ASSERT_EQ(net.listen(ctx_, 0, handle_, &listen_), ncclSuccess);
    char err[128];
    ASSERT_EQ(braid_handle_decode(handle_, h, err, sizeof err), 0) << err;
  }
  // Connects through relay (when given) until both ends have their comm; false after 5 s.
  bool Connect(char* handle, Relay* relay, void** s, void** r) {
    *s = *r = nullptr;
    for (double end = Now() + 5; (!*s || !*r) && Now() < end;) {
      if (!*s && net.connect(ctx_, 0, handle, s, nullptr) != ncclSuccess) return false;
      if (relay) relay->Pump();
      if (!*r) {
        EXPECT_EQ(net.accept(listen_, r, nullptr), ncclSuccess);
      }
    }
    if (*s) sends_.push_back(*s);
    if (*r) recvs_.push_back(*r);
    return *s && *r;
  }
  // Sends one message s -> r (driving relay) and checks it arrives.
  void Transfer(void* s, void* r, Relay* relay) {
    std::vector<char> src(100000), dst(100000);
    for (size_t i = 0; i < src.size(); i++) src[i] = (char)(i * 7 + 3);
    void *sreq = nullptr, *rreq = nullptr;
    void* d = dst.data();
    size_t cap = dst.size();
    int tag = 1;
    ASSERT_EQ(net.irecv(r, 1, &d, &cap, &tag, nullptr, nullptr, &rreq), ncclSuccess);
    int sdone = 0, rdone = 0, sz = 0;
    for (double end = Now() + 5; (!sdone || !rdone) && Now() < end;) {
      if (!sreq) {
        ASSERT_EQ(net.isend(s, src.data(), src.size(), 1, nullptr, nullptr, &sreq), ncclSuccess);
      }
      if (relay) relay->Pump();
      if (sreq && !sdone) {
        ASSERT_EQ(net.test(sreq, &sdone, &sz), ncclSuccess);
      }
      if (!rdone) {
        ASSERT_EQ(net.test(rreq, &rdone, &sz), ncclSuccess);
      }
    }
    ASSERT_TRUE(sdone && rdone);
    EXPECT_EQ(src, dst);
  }

  void* ctx_ = nullptr;
  void* listen_ = nullptr;
  char handle_[NCCL_NET_HANDLE_MAXSIZE];
  std::vector<void*> sends_, recvs_;
};

// Relays a connector through `relay`: returns the handle that points there.
void Redirect(const char* handle, const Relay& relay, char* out) {
  braid_handle h;
  char err[128];
  ASSERT_EQ(braid_handle_decode(handle, &h, err, sizeof err), 0);
  memcpy(&h.addr, &relay.addr, sizeof relay.addr);
  braid_handle_encode(&h, out);
}

// Someone who saw a connection being made replays what the connector wrote on a fresh
// connection to the same listener: it is dropped and logged, never handed to NCCL.
TEST_F(NetAuth, ReplayedHelloIsDroppedAndLoggedNeverAttached) {
  braid_handle h;
  Listen(&h);
  Relay relay;
  relay.Start(h.addr);
  char via[NCCL_NET_HANDLE_MAXSIZE];
  Redirect(handle_, relay, via);
  void *s, *r;
  ASSERT_TRUE(Connect(via, &relay, &s, &r)) << TakeWarnings();
  ASSERT_FALSE(relay.up.empty());
  TakeWarnings();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, (sockaddr*)&h.addr, sizeof(sockaddr_in)), 0);
  ASSERT_EQ(send(fd, relay.up.data(), relay.up.size(), MSG_NOSIGNAL), (ssize_t)relay.up.size());
  void* stray = nullptr;
  for (double end = Now() + 0.5; !stray && Now() < end;) {
    ASSERT_EQ(net.accept(listen_, &stray, nullptr), ncclSuccess);
    usleep(1000);
  }
  if (stray) recvs_.push_back(stray);
  EXPECT_EQ(stray, nullptr) << "a replayed hello was accepted as a connection";
  EXPECT_NE(TakeWarnings().find("dropped an incoming connection"), std::string::npos);
  close(fd);
}

// The handle's secret never crosses the data network: neither the connector's bytes nor the
// listener's (set-up and a message) contain it.
TEST_F(NetAuth, SecretNeverOnTheWire) {
  if (!braid_sodium()) GTEST_SKIP() << "no libsodium: " << braid_sodium_error();
  braid_handle h;
  Listen(&h);
  Relay relay;
  relay.Start(h.addr);
  char via[NCCL_NET_HANDLE_MAXSIZE];
  Redirect(handle_, relay, via);
  void *s, *r;
  ASSERT_TRUE(Connect(via, &relay, &s, &r)) << TakeWarnings();
  Transfer(s, r, &relay);
  EXPECT_GT(relay.up.size(), 100000u);
  EXPECT_FALSE(Contains(relay.up, h.secret, sizeof h.secret)) << "the connector sent the secret";
  EXPECT_FALSE(Contains(relay.down, h.secret, sizeof h.secret)) << "the listener sent the secret";
}

// A peer that knows the listener's address but not its secret (its proof is made with another
// one) is refused, logged, and never handed to NCCL.
TEST_F(NetAuth, WrongProofIsRefusedAndLogged) {
  braid_handle h;
  Listen(&h);
  braid_handle wrong = h;
  wrong.secret[3] ^= 0x40;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, (sockaddr*)&h.addr, sizeof(sockaddr_in)), 0);
  void* r = nullptr;
  auto drive = [&] {
    if (!r) { EXPECT_EQ(net.accept(listen_, &r, nullptr), ncclSuccess); }
  };
  braid_hello hello = {};
  hello.conn_id = 5;
  hello.per_rail = 1;
  hello.nrails = 1;
  braid_hs_conn hs;
  hs_peer::Hello(fd, wrong, hello, &hs, drive);
  ASSERT_TRUE(hs_peer::Read(fd, hs.reply, sizeof hs.reply, drive));
  braid_reply reply;
  char err[128];
  ASSERT_EQ(braid_reply_decode(hs.reply, &reply, err, sizeof err), 0) << err;
  EXPECT_EQ(reply.status, BRAID_REPLY_PROOF);
  EXPECT_EQ(std::vector<uint8_t>(reply.proof, reply.proof + BRAID_PROOF_BYTES),
            std::vector<uint8_t>(BRAID_PROOF_BYTES, 0))
      << "a refused peer gets no proof of anything";
  for (double end = Now() + 0.3; Now() < end;) drive();
  if (r) recvs_.push_back(r);
  EXPECT_EQ(r, nullptr);
  EXPECT_NE(TakeWarnings().find("wrong proof"), std::string::npos);
  close(fd);
}

// Something answering at the handle's address that does not know the secret cannot pass for the
// listener: the connector checks the reply's proof before it counts the stream connected.
TEST_F(NetAuth, ForgedListenerIsRefusedByTheConnector) {
  if (!braid_sodium()) GTEST_SKIP() << "no libsodium: " << braid_sodium_error();
  braid_handle h;
  Listen(&h);
  sockaddr_in a;
  int lfd = wire_watch::ListenLoopback(&a, 4);
  ASSERT_GE(lfd, 0) << strerror(errno);
  braid_handle fake = h;  // what the real listener put in the handle, pointing at the impostor
  memcpy(&fake.addr, &a, sizeof a);
  char fh[NCCL_NET_HANDLE_MAXSIZE];
  braid_handle_encode(&fake, fh);
  void* s = nullptr;
  ncclResult_t rc = ncclSuccess;
  int fd = -1;
  uint8_t hello[BRAID_HELLO_BYTES];
  size_t got = 0;
  bool replied = false;
  for (double end = Now() + 5; rc == ncclSuccess && !s && Now() < end;) {
    rc = net.connect(ctx_, 0, fh, &s, nullptr);
    if (fd < 0 && (fd = accept(lfd, nullptr, nullptr)) >= 0) {
      uint8_t chal[BRAID_CHALLENGE_BYTES];
      ASSERT_EQ(braid_hs_challenge(chal), 0);
      ASSERT_EQ(send(fd, chal, sizeof chal, MSG_NOSIGNAL), (ssize_t)sizeof chal);
      fcntl(fd, F_SETFL, O_NONBLOCK);
    }
    ssize_t n = fd >= 0 ? recv(fd, hello + got, sizeof hello - got, 0) : -1;
    if (n > 0) got += (size_t)n;
    if (got == sizeof hello && !replied) {  // "OK", with a proof it cannot make, and a rail list
      braid_reply r = {};
      memset(r.proof, 0x33, sizeof r.proof);
      uint8_t out[BRAID_REPLY_BYTES + BRAID_RAILLIST_BYTES(1)];
      braid_reply_encode(&r, out);
      braid_raillist l = {};
      l.nrails = 1;
      memcpy(&l.addr[0], &a, sizeof a);
      braid_raillist_encode(&l, out + BRAID_REPLY_BYTES);
      ASSERT_EQ(send(fd, out, sizeof out, MSG_NOSIGNAL), (ssize_t)sizeof out);
      replied = true;
    }
  }
  if (s) sends_.push_back(s);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(rc, ncclRemoteError);
  EXPECT_NE(TakeWarnings().find("wrong proof"), std::string::npos);
  if (fd >= 0) close(fd);
  close(lfd);
}

// One node requires authentication, the other cannot do it: both fail with a WARN that names
// BRAID_NET_AUTH, none hangs; connect returns ncclInvalidUsage.
TEST_F(NetAuth, AuthenticationMismatchIsAClearErrorOnBothSides) {
  if (!braid_sodium()) GTEST_SKIP() << "no libsodium: " << braid_sodium_error();
  setenv("BRAID_NET_AUTH", "required", 1);
  braid_params_reload();
  braid_handle h;
  Listen(&h);
  EXPECT_EQ(h.auth_caps, BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED);
  setenv("BRAID_NET_AUTH", "plain", 1);  // the connecting node (as if it had no libsodium)
  braid_params_reload();
  void* s = nullptr;
  void* r = nullptr;
  ncclResult_t rc = ncclSuccess;
  for (double end = Now() + 5; rc == ncclSuccess && Now() < end;) {
    rc = net.connect(ctx_, 0, handle_, &s, nullptr);
    EXPECT_EQ(net.accept(listen_, &r, nullptr), ncclSuccess);
  }
  for (double end = Now() + 0.2; Now() < end;) net.accept(listen_, &r, nullptr);
  EXPECT_EQ(rc, ncclInvalidUsage);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(r, nullptr);
  std::string w = TakeWarnings();
  EXPECT_NE(w.find("connect on device 0 to"), std::string::npos) << w;
  EXPECT_NE(w.find("dropped an incoming connection"), std::string::npos) << w;
  EXPECT_NE(w.find("authentication modes disagree"), std::string::npos) << w;
  EXPECT_NE(w.find("BRAID_NET_AUTH"), std::string::npos) << w;
}

// The default requires authentication: a node that cannot do it (no libsodium; plain stands in
// for it) is refused by a default node, with the reason on both sides.
TEST_F(NetAuth, DefaultRefusesAPeerThatCannotAuthenticate) {
  if (!braid_sodium()) GTEST_SKIP() << "no libsodium: " << braid_sodium_error();
  braid_handle h;
  Listen(&h);  // BRAID_NET_AUTH unset: required
  EXPECT_EQ(h.auth_caps, BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED);
  setenv("BRAID_NET_AUTH", "plain", 1);
  braid_params_reload();
  void* s = nullptr;
  void* r = nullptr;
  ncclResult_t rc = ncclSuccess;
  for (double end = Now() + 5; rc == ncclSuccess && Now() < end;) {
    rc = net.connect(ctx_, 0, handle_, &s, nullptr);
    EXPECT_EQ(net.accept(listen_, &r, nullptr), ncclSuccess);
  }
  EXPECT_EQ(rc, ncclInvalidUsage);
  EXPECT_EQ(s, nullptr);
  std::string w = TakeWarnings();
  EXPECT_NE(w.find("authentication modes disagree"), std::string::npos) << w;
}

// BRAID_NET_AUTH=auto and a node without libsodium: the connection still works, with the secret
// in clear and one WARN that says so.
TEST_F(NetAuth, PlainPeerStillConnectsWithAWarning) {
  setenv("BRAID_NET_AUTH", "auto", 1);
  braid_params_reload();
  braid_handle h;
  Listen(&h);
  setenv("BRAID_NET_AUTH", "plain", 1);
  braid_params_reload();
  void *s, *r;
  ASSERT_TRUE(Connect(handle_, nullptr, &s, &r)) << TakeWarnings();
  Transfer(s, r, nullptr);
}

// Listen refuses to make a secret without randomness (it used to fall back to time and pid).
TEST_F(NetAuth, ListenFailsWithoutRandomness) {
  auto saved = braid_random_source;
  braid_random_source = [](void*, size_t) {
    errno = ENOSYS;
    return -1;
  };
  void* l = nullptr;
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  ncclResult_t rc = net.listen(ctx_, 0, handle, &l);
  braid_random_source = saved;
  EXPECT_EQ(rc, ncclSystemError);
  EXPECT_EQ(l, nullptr);
  std::string w = TakeWarnings();
  EXPECT_NE(w.find("no randomness"), std::string::npos) << w;
  if (l) net.closeListen(l);
}

// A WARN that must be seen goes through NCCL's logger and, where NCCL_DEBUG would hide it (NCCL
// prints WARNs only with NCCL_DEBUG=WARN or more), to stderr as well.
TEST(WarnLoud, OnStderrWhenNcclWouldHideIt) {
  braid_log_set_logger(Logger);
  for (const char* level : {(const char*)nullptr, "VERSION", "WARN", "info"}) {
    if (level) setenv("NCCL_DEBUG", level, 1);
    else unsetenv("NCCL_DEBUG");
    fflush(stderr);
    int saved = dup(2), p[2];
    ASSERT_EQ(pipe(p), 0);
    dup2(p[1], 2);
    TakeWarnings();
    braid_warn_loud(__FILE__, __LINE__, "the secret goes in clear (test %s)", level ? level : "unset");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(p[1]);
    char buf[4096] = {0};
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    std::string err(buf, n > 0 ? (size_t)n : 0);
    bool hidden = !level || !strcmp(level, "VERSION");
    EXPECT_NE(TakeWarnings().find("the secret goes in clear"), std::string::npos) << "not through NCCL's logger";
    EXPECT_EQ(err.find("NET/braid WARN the secret goes in clear") != std::string::npos, hidden)
        << "NCCL_DEBUG=" << (level ? level : "(unset)") << ", stderr: " << err;
  }
  unsetenv("NCCL_DEBUG");
}

}  // namespace
