// A hand-made connector's side of the stream handshake (net_plugin/comm/hs.h), for tests that play a
// braid peer over raw sockets.  drive() is called while waiting (it must call the plugin's
// accept(), which is what sends the challenge and the reply).
#ifndef BRAID_TEST_HS_PEER_H
#define BRAID_TEST_HS_PEER_H

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <time.h>

#include <functional>
#include <vector>

extern "C" {
#include "comm/hs.h"
#include "wire/wire.h"
}

namespace hs_peer {

inline double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Reads exactly len bytes into buf, driving meanwhile; false after 5 s or on EOF.
inline bool Read(int fd, uint8_t* buf, size_t len, const std::function<void()>& drive) {
  size_t got = 0;
  for (double end = Now() + 5; Now() < end;) {
    drive();
    ssize_t n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n > 0) got += (size_t)n;
    if (got == len) return true;
  }
  return false;
}

// Answers the listener's challenge on fd with hello (its conn_id, stream, shape and flags),
// proven with the handle's secret the way braid would.  hs keeps what the reply check needs.
inline void Hello(int fd, const braid_handle& h, braid_hello hello, braid_hs_conn* hs,
                  const std::function<void()>& drive) {
  *hs = braid_hs_conn{};
  ASSERT_TRUE(Read(fd, hs->chal, sizeof hs->chal, drive)) << "no challenge";
  int caps = braid_hs_caps();
  hs->auth = braid_hs_mode(caps, h.auth_caps);
  char why[128] = "";
  ASSERT_EQ(braid_hs_hello(h.secret, hs->auth, caps, hs->chal, &hello, hs->hello, why, sizeof why), 0)
      << why;
  ASSERT_EQ(send(fd, hs->hello, sizeof hs->hello, MSG_NOSIGNAL), (ssize_t)sizeof hs->hello);
}

// Reads and checks the listener's reply (and on stream 0 the rail list after it).
inline void Reply(int fd, const braid_handle& h, braid_hs_conn* hs, bool stream0,
                  const std::function<void()>& drive) {
  ASSERT_TRUE(Read(fd, hs->reply, sizeof hs->reply, drive)) << "no reply";
  std::vector<uint8_t> list;
  if (stream0) {
    list.resize(BRAID_RAILLIST_BYTES(BRAID_RAILLIST_MAX));
    char err[128] = "";
    ASSERT_TRUE(Read(fd, list.data(), BRAID_RAILLIST_HDR, drive));
    int len = braid_raillist_len(list.data(), err, sizeof err);
    ASSERT_GT(len, BRAID_RAILLIST_HDR) << err;
    ASSERT_TRUE(Read(fd, list.data() + BRAID_RAILLIST_HDR, (size_t)len - BRAID_RAILLIST_HDR, drive));
    list.resize((size_t)len);
  }
  char why[256] = "";
  EXPECT_EQ(braid_hs_reply_check(h.secret, hs, stream0 ? list.data() : nullptr, list.size(), why,
                                 sizeof why), 0)
      << why;
}

}  // namespace hs_peer

#endif
