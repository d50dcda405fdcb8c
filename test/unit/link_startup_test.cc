// A link's start-up (net_plugin/link/startup.h): the exchange of endpoint addresses on the set-up
// socket that the libfabric and verbs transports share, at set-up and at every rejoin.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

extern "C" {
#include "link/startup.h"
}

namespace {

constexpr uint64_t kSec = 1000000000ull;
constexpr uint64_t kTimeout = 60 * kSec;
constexpr uint64_t kCheck = 10000000ull;

// A message of one header byte that gives the whole length (0xff: malformed).
ssize_t NeedFromFirstByte(const uint8_t *msg, size_t, const void *, char *why, size_t whylen) {
  if (msg[0] == 0xff) return snprintf(why, whylen, "a malformed header"), -1;
  return msg[0];
}

class LinkStartup : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fd_)); }
  void TearDown() override {
    if (fd_[0] >= 0) close(fd_[0]);
    if (fd_[1] >= 0) close(fd_[1]);
  }
  int Poll(uint64_t now) {
    why_[0] = 0;
    return braid_link_poll(&l_, fd_[0], now, kTimeout, kCheck, 1, NeedFromFirstByte, nullptr,
                           "endpoint address", why_, sizeof why_);
  }
  int fd_[2] = {-1, -1};
  braid_link_startup l_{};
  char why_[256];
};

TEST_F(LinkStartup, CompletesWhenThePeersMessageArrives) {
  const uint8_t mine[3] = {3, 'a', 'b'};
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  uint8_t got[3];
  ASSERT_EQ(3, recv(fd_[1], got, 3, 0));
  EXPECT_EQ(0, memcmp(mine, got, 3));
  EXPECT_EQ(0, Poll(100 * kSec + 1));
  const uint8_t theirs[4] = {4, 'x', 'y', 'z'};
  ASSERT_EQ(2, send(fd_[1], theirs, 2, 0));  // in two pieces
  EXPECT_EQ(0, Poll(100 * kSec + 2));
  ASSERT_EQ(2, send(fd_[1], theirs + 2, 2, 0));
  ASSERT_EQ(1, Poll(100 * kSec + 3));
  EXPECT_EQ(4u, l_.got);
  EXPECT_EQ(0, memcmp(theirs, l_.msg, 4));
}

// A rejoin starts the link with a clock read after the one the data path's pass took: a poll in
// that same pass (its now earlier than the start) is not a timeout.  Before the fix the unsigned
// difference wrapped and every ofi rejoin failed at once with "no endpoint address in 60000 ms".
TEST_F(LinkStartup, APollWithAnEarlierClockIsNotATimeout) {
  const uint8_t mine[1] = {1};
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  EXPECT_EQ(0, Poll(100 * kSec - 5000)) << why_;
  EXPECT_EQ(0, Poll(100 * kSec + kTimeout)) << why_;
}

TEST_F(LinkStartup, NoMessageWithinTheTimeoutFails) {
  const uint8_t mine[1] = {1};
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  EXPECT_EQ(-1, Poll(100 * kSec + kTimeout + 1));
  EXPECT_NE(std::string::npos, std::string(why_).find("no endpoint address in 60000 ms")) << why_;
}

TEST_F(LinkStartup, APeerThatClosesBeforeItsMessageFails) {
  const uint8_t mine[1] = {1};
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  uint8_t got[1];
  ASSERT_EQ(1, recv(fd_[1], got, 1, 0));
  close(fd_[1]);
  fd_[1] = -1;
  EXPECT_EQ(-1, Poll(100 * kSec + 1));
  EXPECT_NE(std::string::npos, std::string(why_).find("closed")) << why_;
}

// A peer that answers a start-up (a rejoin's included) with garbage fails that start-up, with the
// reason, and nothing else: the transport fails that stream, which rejoins again later.
TEST_F(LinkStartup, GarbageFromThePeerFailsTheStartUpWithItsReason) {
  const uint8_t mine[1] = {1};
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  const uint8_t garbage[3] = {0xff, 0x12, 0x34};
  ASSERT_EQ(3, send(fd_[1], garbage, 3, 0));
  EXPECT_EQ(-1, Poll(100 * kSec + 1));
  EXPECT_STREQ("a malformed header", why_);
  const uint8_t too_long[1] = {0xfe};  // 254 bytes announced, within the cap: waits for them
  LinkStartup::TearDown();
  SetUp();
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  ASSERT_EQ(1, send(fd_[1], too_long, 1, 0));
  EXPECT_EQ(0, Poll(100 * kSec + 1));
}

TEST_F(LinkStartup, ALinkedSocketThatClosesIsReportedClosed) {
  const uint8_t mine[1] = {1};
  ASSERT_EQ(0, braid_link_begin(&l_, fd_[0], mine, sizeof mine, 100 * kSec));
  const uint8_t theirs[1] = {1};
  ASSERT_EQ(1, send(fd_[1], theirs, 1, 0));
  ASSERT_EQ(1, Poll(100 * kSec + 1));
  braid_link_up(&l_, 100 * kSec + 2);
  close(fd_[1]);
  fd_[1] = -1;
  EXPECT_EQ(1, Poll(100 * kSec + 3));  // checked at most every kCheck
  EXPECT_EQ(BRAID_LINK_CLOSED, Poll(100 * kSec + 3 + kCheck));
}

}  // namespace
