// Helpers for tests that watch the net plugin on the wire: a clock, the WARN lines braid logs
// (through the logger it is given), and a TCP relay that records both directions.
#ifndef BRAID_TEST_WIRE_WATCH_H
#define BRAID_TEST_WIRE_WATCH_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include "nccl_plugin/common.h"
}

namespace wire_watch {

inline double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

inline std::mutex& WarnLock() {
  static std::mutex mu;
  return mu;
}
inline std::string& Warnings() {
  static std::string w;
  return w;
}

// An NCCL logger (braid_log_set_logger) that keeps every WARN for TakeWarnings().
inline void Logger(ncclDebugLogLevel level, unsigned long, const char* file, int line,
                   const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (level != NCCL_LOG_WARN) return;
  {
    std::lock_guard<std::mutex> lock(WarnLock());
    Warnings() += std::string(msg) + "\n";
  }
  fprintf(stderr, "[warn] %s:%d %s\n", file, line, msg);
}

// The WARNs logged since the last call.
inline std::string TakeWarnings() {
  std::lock_guard<std::mutex> lock(WarnLock());
  std::string s;
  s.swap(Warnings());
  return s;
}

// A non-blocking listening TCP socket on 127.0.0.1 at a free port, whose address goes to *addr;
// -1 when any step fails.
inline int ListenLoopback(sockaddr_in* addr, int backlog) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof *addr;
  if (fd >= 0 && bind(fd, (sockaddr*)addr, sizeof *addr) == 0 && listen(fd, backlog) == 0 &&
      getsockname(fd, (sockaddr*)addr, &len) == 0)
    return fd;
  if (fd >= 0) close(fd);
  return -1;
}

// A TCP relay between one connector and a listener (target) that records both directions.
struct Relay {
  int lfd = -1, a = -1, b = -1;
  sockaddr_in addr{}, to{};
  std::vector<uint8_t> up, down;  // connector -> listener, listener -> connector
  void Start(const sockaddr_storage& target) {
    memcpy(&to, &target, sizeof to);
    lfd = ListenLoopback(&addr, 4);
    ASSERT_GE(lfd, 0) << strerror(errno);
  }
  // Accepts the connector once, then moves what either side wrote to the other.
  void Pump() {
    if (a < 0) {
      a = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK);
      if (a < 0) return;
      b = socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_EQ(connect(b, (sockaddr*)&to, sizeof to), 0);
      fcntl(b, F_SETFL, O_NONBLOCK);
    }
    char buf[65536];
    ssize_t n;
    while ((n = recv(a, buf, sizeof buf, 0)) > 0) {
      up.insert(up.end(), buf, buf + n);
      ASSERT_EQ(send(b, buf, (size_t)n, MSG_NOSIGNAL), n);
    }
    while ((n = recv(b, buf, sizeof buf, 0)) > 0) {
      down.insert(down.end(), buf, buf + n);
      ASSERT_EQ(send(a, buf, (size_t)n, MSG_NOSIGNAL), n);
    }
  }
  ~Relay() {
    for (int fd : {lfd, a, b})
      if (fd >= 0) close(fd);
  }
};

}  // namespace wire_watch

#endif
