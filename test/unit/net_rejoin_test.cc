// Rejoin (net_plugin/comm/rejoin.c) between two hand-built comms over loopback: a sender and a
// receiver of one connection with 8 rails of 4 streams each (BRAID_NSTREAMS=4 on 8 rails), every
// rail on lo, each receiver rail its own listening socket.  Only the rejoin machinery is driven
// (braid_rejoin_connect on the sender, braid_rejoin_accept on the receiver), so the test sees
// exactly what the rejoin hello carries and when each side takes the new socket.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "comm/comm.h"
#include "comm/gate.h"
#include "comm/hs.h"
#include "comm/life.h"
#include "topo/ifaces.h"
#include "log.h"
#include "param.h"
#include "comm/rejoin.h"
#include "sodium_lib.h"
#include "transport/socket/sock_stream.h"
}
#include "flood.h"
#include "wire_watch.h"

namespace {

using wire_watch::Logger;
using wire_watch::Now;
using wire_watch::Relay;
using wire_watch::TakeWarnings;

class Rejoin : public ::testing::Test {
 protected:
  static constexpr int kRails = 8, kPerRail = 4, kStreams = kRails * kPerRail;

  void SetUp() override {
    braid_log_set_logger(Logger);
    setenv("BRAID_TIMEOUT_MS", "2000", 1);
    braid_params_reload();
    TakeWarnings();
    ASSERT_GE(braid_ifaces_select("=lo", "AF_INET", &lo_, 1), 1);
    tx_ = braid_comm_new(BRAID_COMM_SEND, 0, kStreams);
    rx_ = braid_comm_new(BRAID_COMM_RECV, 0, kStreams);
    ASSERT_TRUE(tx_ && rx_);
    for (braid_comm* c : {tx_, rx_}) {
      c->nrails = c->nprimary = kRails;
      c->rejoin.conn_id = 0x1234567890abcdefull;
      c->rejoin.auth_mode = braid_sodium() ? BRAID_AUTH_MAC : BRAID_AUTH_PLAIN;  // as set-up agreed
      for (int i = 0; i < BRAID_SECRET_BYTES; i++) c->rejoin.secret[i] = (uint8_t)(0xA0 + i);
      snprintf(c->peer, sizeof c->peer, "127.0.0.1");
      for (int s = 0; s < kStreams; s++) {
        c->streams[s].rail = s % kRails;
        c->streams[s].rail_name = "lo";
      }
    }
    // The receiver's gate (a listening socket per rail, the listen handle's secret), with the
    // connection registered as accept registers it; the sender's rails point at its sockets.
    dev_.nrails = kRails;
    for (int r = 0; r < kRails; r++) dev_.rail[r] = &lo_;
    braid_gate* g = braid_gate_open(&dev_, 0, braid_hs_caps());
    ASSERT_NE(g, nullptr);
    braid_gate_member m = {rx_->rejoin.conn_id, kStreams, kRails, 0, rx_->rejoin.auth_mode};
    braid_gate_join(g, &m);
    rx_->rejoin.gate = g;
    for (braid_comm* c : {tx_, rx_}) memcpy(c->rejoin.secret, braid_gate_secret(g), BRAID_SECRET_BYTES);
    for (int r = 0; r < kRails; r++) {
      tx_->rejoin.rail_addr[r] = *braid_gate_rail_addr(g, r);
      tx_->rejoin.rail_ifc[r] = &lo_;
    }
    // Every stream connected (socket pairs stand in for the set-up's TCP streams) but one.
    for (int s = 0; s < kStreams; s++) {
      int sv[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
      tx_->streams[s].fd = sv[0];
      rx_->streams[s].fd = sv[1];
    }
    close(tx_->streams[kDead].fd);
    tx_->streams[kDead].fd = -1;
    tx_->streams[kDead].dead = true;
    old_rx_fd_ = rx_->streams[kDead].fd;
    for (braid_comm* c : {tx_, rx_}) {  // the streams' state, as set-up makes it (braid_comm_ready)
      c->sops = &braid_sock_stream_ops;
      ASSERT_EQ(c->sops->start(c), ncclSuccess);
    }
  }
  void TearDown() override {
    braid_comm_free(tx_);
    braid_comm_free(rx_);
    unsetenv("BRAID_TIMEOUT_MS");
    braid_params_reload();
  }

  // Drives the sender (and the receiver when `receiver`) for `secs` or until pred() holds.
  template <class P>
  bool Drive(double secs, bool receiver, P pred, Relay* relay = nullptr) {
    for (double end = Now() + secs; Now() < end;) {
      uint64_t now = braid_now_ns();
      braid_rejoin_connect(tx_, now);
      if (relay) relay->Pump();
      if (receiver) {
        rx_->rejoin.next_join_ns = 0;  // accept at every call, not every 50 ms
        braid_rejoin_accept(rx_, now);
      }
      if (pred()) return true;
      usleep(1000);
    }
    return false;
  }
  bool SenderRevived() const { return !tx_->streams[kDead].dead && tx_->streams[kDead].fd >= 0; }
  bool ReceiverRejoined() const { return rx_->streams[kDead].fd != old_rx_fd_; }

  // The revived stream carries bytes from the sender's new socket to the receiver's.
  void ExpectConnected() {
    const char msg[] = "after the rejoin";
    ASSERT_EQ(send(tx_->streams[kDead].fd, msg, sizeof msg, MSG_NOSIGNAL), (ssize_t)sizeof msg);
    pollfd p = {rx_->streams[kDead].fd, POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 2000), 1);
    char got[sizeof msg] = {};
    ASSERT_EQ(recv(rx_->streams[kDead].fd, got, sizeof got, MSG_WAITALL), (ssize_t)sizeof got);
    EXPECT_STREQ(got, msg);
  }

  static constexpr int kDead = 21;  // rail 5, its third stream: index past 16
  braid_iface lo_{};
  braid_device dev_{};
  braid_comm* tx_ = nullptr;
  braid_comm* rx_ = nullptr;
  int old_rx_fd_ = -1;
};

// BRAID_NSTREAMS=4 on 8 rails: the rejoin hello names the connection's real shape (4 per rail on
// 8 rails), which the receiver accepts; it used to say 32 rails of 1 and was refused.
TEST_F(Rejoin, StreamPastSixteenRejoinsWithTheConnectionsShape) {
  ASSERT_TRUE(Drive(5, true, [&] { return SenderRevived() && ReceiverRejoined(); }))
      << "sender revived: " << SenderRevived() << ", receiver rejoined: " << ReceiverRejoined()
      << "\n" << TakeWarnings();
  ExpectConnected();
  EXPECT_EQ(TakeWarnings().find("dropped"), std::string::npos);
}

// The sender takes the new socket only once the receiver confirmed it: a receiver that accepts
// nothing (its kernel completes the TCP handshake all the same) leaves the stream dead.
TEST_F(Rejoin, SenderRevivesOnlyOnTheReceiversConfirmation) {
  EXPECT_FALSE(Drive(0.5, false, [&] { return SenderRevived(); }))
      << "the stream was revived though the receiver never took it";
  EXPECT_FALSE(ReceiverRejoined());
  ASSERT_TRUE(Drive(8, true, [&] { return SenderRevived() && ReceiverRejoined(); }))
      << TakeWarnings();
  ExpectConnected();
}

// A rejoined stream is in the connection's traffic class (transport/tclass.h) on both ends, as
// set-up made its first socket: the sender's new socket from its SYN on, the receiver's once it
// takes it.
TEST_F(Rejoin, RejoinedStreamKeepsTheConnectionsTrafficClass) {
  tx_->cls.tc = rx_->cls.tc = 0x68;
  ASSERT_TRUE(Drive(5, true, [&] { return SenderRevived() && ReceiverRejoined(); })) << TakeWarnings();
  ExpectConnected();
  for (int fd : {tx_->streams[kDead].fd, rx_->streams[kDead].fd}) {
    int tos = -1;
    socklen_t len = sizeof tos;
    ASSERT_EQ(0, getsockopt(fd, IPPROTO_IP, IP_TOS, &tos, &len));
    EXPECT_EQ(0x68, tos) << (fd == tx_->streams[kDead].fd ? "sender" : "receiver");
  }
}

// Strangers flooding the rail's port (128 held silent from 8 addresses, a few thousand a second
// churning from 64 more: they used to take every one of the rejoin listener's 8 slots) while the
// stream rejoins: the rejoin still gets through within seconds.
TEST_F(Rejoin, RejoinGetsThroughAFloodOfStrangers) {
  sockaddr_in to;
  memcpy(&to, &tx_->rejoin.rail_addr[kDead % kRails], sizeof to);
  flood::Flood f(to, 16, 8);
  ASSERT_GE(f.held(), 100) << "the attack could not be set up";
  for (double end = Now() + 0.5; Now() < end;) {  // the churn at full speed, the gate busy with it
    rx_->rejoin.next_join_ns = 0;
    braid_rejoin_accept(rx_, braid_now_ns());
    usleep(1000);
  }
  EXPECT_GT(f.made(), 200) << "the churn did not run";
  double t0 = Now();
  ASSERT_TRUE(Drive(10, true, [&] { return SenderRevived() && ReceiverRejoined(); }))
      << "sender revived: " << SenderRevived() << ", receiver rejoined: " << ReceiverRejoined();
  EXPECT_LT(Now() - t0, 5.0);
  ExpectConnected();
}

// Someone who recorded a rejoin and replays it later (a fresh connection to the rail's rejoin
// listener) is dropped and logged; the stream keeps its socket.
TEST_F(Rejoin, ReplayedRejoinIsRefused) {
  Relay relay;
  relay.Start(tx_->rejoin.rail_addr[kDead % kRails]);
  sockaddr_storage real = tx_->rejoin.rail_addr[kDead % kRails];
  memcpy(&tx_->rejoin.rail_addr[kDead % kRails], &relay.addr, sizeof relay.addr);
  ASSERT_TRUE(Drive(5, true, [&] { return SenderRevived() && ReceiverRejoined(); }, &relay))
      << TakeWarnings();
  ASSERT_FALSE(relay.up.empty());
  memcpy(&tx_->rejoin.rail_addr[kDead % kRails], &real, sizeof real);
  TakeWarnings();
  const int rejoined_fd = rx_->streams[kDead].fd;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, (sockaddr*)&real, sizeof(sockaddr_in)), 0);
  ASSERT_EQ(send(fd, relay.up.data(), relay.up.size(), MSG_NOSIGNAL), (ssize_t)relay.up.size());
  for (double end = Now() + 0.5; Now() < end;) {
    rx_->rejoin.next_join_ns = 0;
    braid_rejoin_accept(rx_, braid_now_ns());
    usleep(1000);
  }
  EXPECT_EQ(rx_->streams[kDead].fd, rejoined_fd) << "a replayed rejoin took over the stream";
  EXPECT_NE(TakeWarnings().find("dropped"), std::string::npos) << "the replay was not logged";
  close(fd);
}

}  // namespace
