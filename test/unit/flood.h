// Strangers for the tests that check what they cost: TCP connections to a port from other
// loopback addresses (127.0.0.2 and up: other hosts, as far as the listener can tell) that never
// send a byte.
#ifndef BRAID_TEST_FLOOD_H
#define BRAID_TEST_FLOOD_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace flood {

// A TCP connection to `to` from 127.0.0.<host>, never sending; -1 when it could not be made.
inline int Stranger(const sockaddr_in& to, int host, bool wait) {
  int fd = socket(AF_INET, SOCK_STREAM | (wait ? 0 : SOCK_NONBLOCK), 0);
  sockaddr_in from = {};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)host);
  if (fd < 0 || bind(fd, (sockaddr*)&from, sizeof from) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  if (connect(fd, (const sockaddr*)&to, sizeof to) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connections held open from many addresses, and a churn of short-lived ones, while it lives.
class Flood {
 public:
  Flood(const sockaddr_in& to, int held_per_host, int held_hosts) : to_(to) {
    for (int h = 0; h < held_hosts; h++)
      for (int k = 0; k < held_per_host; k++) {
        int fd = Stranger(to, 2 + h, true);
        if (fd >= 0) held_.push_back(fd);
      }
    churn_ = std::thread([this] {
      std::vector<int> open;
      for (int i = 0; !stop_; i++) {
        int fd = Stranger(to_, 40 + i % 64, false);
        if (fd >= 0) open.push_back(fd), made_++;
        if (open.size() > 32) close(open.front()), open.erase(open.begin());
        if (i % 16 == 15) usleep(1000);  // a few thousand a second
      }
      for (int fd : open) close(fd);
    });
  }
  ~Flood() {
    stop_ = true;
    churn_.join();
    for (int fd : held_) close(fd);
  }
  int held() const { return (int)held_.size(); }
  long made() const { return made_; }

 private:
  sockaddr_in to_;
  std::vector<int> held_;
  std::thread churn_;
  std::atomic<bool> stop_{false};
  std::atomic<long> made_{0};
};

}  // namespace flood

#endif
