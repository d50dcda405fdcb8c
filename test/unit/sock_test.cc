// The set-up socket that ofi and verbs keep open beside their data: silent but for pokes, which
// the sender uses to tell a dead path from a slow one (tx.c).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

extern "C" {
#include "transport/socket/sock.h"
}

namespace {

// A connected TCP pair on loopback (TCP_INFO needs TCP, not a socketpair).
struct TcpPair {
  int a = -1, b = -1;
  TcpPair() {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(l, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0 || listen(l, 1) != 0 ||
        getsockname(l, reinterpret_cast<sockaddr *>(&sa), &len) != 0)
      return;
    a = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(a, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) return;
    b = accept(l, nullptr, nullptr);
    close(l);
  }
  ~TcpPair() {
    if (a >= 0) close(a);
    if (b >= 0) close(b);
  }
};

// Waits until fd has something to read (the bytes crossed loopback).
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 2000) == 1;
}

// Waits until the peer's kernel has acknowledged everything sent on fd.
bool Acked(int fd) {
  for (int i = 0; i < 200; i++) {
    if (!braid_sock_retransmitting(fd) && braid_sock_poke(fd) != 1) return true;
    usleep(10000);
  }
  return false;
}

TEST(SetupSocket, SilentWhileNothingArrives) {
  TcpPair p;
  ASSERT_GE(p.b, 0);
  char why[128] = "";
  EXPECT_EQ(braid_sock_silent(p.b, why, sizeof why), 1);
  EXPECT_FALSE(braid_sock_retransmitting(p.a));
}

TEST(SetupSocket, PokesAreDroppedAndTheSocketStaysSilent) {
  TcpPair p;
  ASSERT_GE(p.b, 0);
  ASSERT_EQ(braid_sock_poke(p.a), 0);
  ASSERT_TRUE(Readable(p.b));
  char why[128] = "";
  EXPECT_EQ(braid_sock_silent(p.b, why, sizeof why), 1) << why;
  // Dropped, not left queued: nothing to read now.
  char c;
  EXPECT_LT(recv(p.b, &c, 1, MSG_DONTWAIT), 0);
  // A live peer's kernel acknowledged it: a new poke can go.
  ASSERT_TRUE(Acked(p.a));
  EXPECT_EQ(braid_sock_poke(p.a), 0);
  ASSERT_TRUE(Readable(p.b));
  EXPECT_EQ(braid_sock_silent(p.b, why, sizeof why), 1) << why;
}

TEST(SetupSocket, OtherBytesAreAProtocolError) {
  TcpPair p;
  ASSERT_GE(p.b, 0);
  ASSERT_EQ(send(p.a, "X", 1, 0), 1);
  ASSERT_TRUE(Readable(p.b));
  char why[128] = "";
  EXPECT_EQ(braid_sock_silent(p.b, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("unexpected bytes"), std::string::npos) << why;
}

TEST(SetupSocket, JunkAfterPokesIsStillAnError) {
  TcpPair p;
  ASSERT_GE(p.b, 0);
  ASSERT_EQ(braid_sock_poke(p.a), 0);
  ASSERT_TRUE(Acked(p.a));
  ASSERT_EQ(send(p.a, "Z", 1, 0), 1);
  for (int i = 0; i < 100; i++) {  // both bytes arrived
    char buf[4];
    if (recv(p.b, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK) == 2) break;
    usleep(10000);
  }
  char why[128] = "";
  EXPECT_EQ(braid_sock_silent(p.b, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("unexpected bytes"), std::string::npos) << why;
}

TEST(SetupSocket, APeerThatClosedIsSeen) {
  TcpPair p;
  ASSERT_GE(p.b, 0);
  close(p.a);
  p.a = -1;
  ASSERT_TRUE(Readable(p.b));
  char why[128] = "";
  EXPECT_EQ(braid_sock_silent(p.b, why, sizeof why), BRAID_SOCK_CLOSED) << "told apart from a failure";
  EXPECT_NE(std::string(why).find("closed"), std::string::npos) << why;
}

}  // namespace
