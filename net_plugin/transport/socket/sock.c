#include "transport/socket/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "param.h"
#include "wire/wire.h"

/* The kernel's CSPRNG: getrandom, or /dev/urandom where a seccomp filter or an old kernel
 * refuses the system call. */
static int random_os(void *buf, size_t len) {
  uint8_t *p = buf;
  int fd = -1;
  while (len > 0) {
    ssize_t n = fd < 0 ? getrandom(p, len, 0) : read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && fd < 0 && (errno == ENOSYS || errno == EPERM)) {
      fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      if (fd >= 0) continue;
    }
    if (n <= 0) break;
    p += n, len -= (size_t)n;
  }
  if (fd >= 0) close(fd);
  return len == 0 ? 0 : -1;
}

int (*braid_random_source)(void *buf, size_t len) = random_os;

int braid_random(void *buf, size_t len) {
  if (braid_random_source(buf, len) == 0) return 0;
  BRAID_WARN("no randomness available (getrandom and /dev/urandom failed: %s): braid cannot make "
             "connection secrets or nonces", strerror(errno));
  return -1;
}

int braid_sock_open(const struct braid_iface *ifc) {
  int fd = socket(ifc->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    BRAID_WARN("socket() failed: %s", strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  static atomic_flag told = ATOMIC_FLAG_INIT;
  if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifc->name, (socklen_t)strlen(ifc->name) + 1) != 0 &&
      !atomic_flag_test_and_set(&told))
    BRAID_INFO(NCCL_NET | NCCL_INIT, "cannot bind sockets to device %s (%s): binding to its "
               "address only, so the routing table picks the outgoing NIC", ifc->name, strerror(errno));
  if (bind(fd, (const struct sockaddr *)&ifc->addr, ifc->addrlen) != 0) {
    BRAID_WARN("bind to %s failed: %s", ifc->name, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

int braid_sock_set_class(int fd, int tc) {
  if (tc < 0) return 0;
  int family = AF_UNSPEC;
  socklen_t len = sizeof family;
  int rc = getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len);
  if (rc == 0)
    rc = family == AF_INET6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tc, sizeof tc)
                            : setsockopt(fd, IPPROTO_IP, IP_TOS, &tc, sizeof tc);
  if (rc != 0)
    BRAID_WARN_ONCE("cannot give a socket traffic class %d (%s %s): its traffic goes in the "
                    "default class", tc, family == AF_INET6 ? "IPV6_TCLASS:" : "IP_TOS:",
                    strerror(errno));
  return rc ? -1 : 0;
}

void braid_sock_set_timeout(int fd, int64_t timeout_ms) {
  unsigned int user_timeout = (unsigned int)timeout_ms;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  /* Keepalive probes are answered by the peer's kernel even while its application is busy, so a
   * silent peer host is detected without failing a peer that is merely slow. */
  int one = 1, idle = (int)(timeout_ms / 3000) > 0 ? (int)(timeout_ms / 3000) : 1, cnt = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

void braid_sock_tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  braid_sock_set_timeout(fd, braid_param_int(BRAID_P_TIMEOUT_MS));
  int buf = (int)braid_param_int(BRAID_P_SOCK_BUF_BYTES);
  if (buf > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  }
}

int braid_sock_connected(int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLOUT};
  if (poll(&pfd, 1, 0) <= 0) return 0;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (!err) return 1;
  errno = err;
  return -1;
}

#define SOCK_POKE 0x50 /* 'P' */

int braid_sock_silent(int fd, char *why, size_t whylen) {
  char b[64];
  ssize_t n = recv(fd, b, 1, MSG_DONTWAIT | MSG_PEEK);
  if (n == 0) return snprintf(why, whylen, "the peer closed the connection"), BRAID_SOCK_CLOSED;
  if (n > 0 && (uint8_t)b[0] == SOCK_POKE) {
    /* Drop the pokes waiting (all of them, up to one that is not a poke). */
    ssize_t k = recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_PEEK), m = 0;
    while (m < k && (uint8_t)b[m] == SOCK_POKE) m++;
    if (m > 0 && recv(fd, b, (size_t)m, MSG_DONTWAIT) != m)
      return snprintf(why, whylen, "set-up socket failed: %s", strerror(errno)), -1;
    return m == k ? 1 : braid_sock_silent(fd, why, whylen);
  }
  if (n > 0) return snprintf(why, whylen, "unexpected bytes on the set-up socket"), -1;
  if (errno == ECONNRESET)
    return snprintf(why, whylen, "the peer reset the connection"), BRAID_SOCK_CLOSED;
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return snprintf(why, whylen, "set-up socket failed: %s", strerror(errno)), -1;
  return 1;
}

bool braid_sock_retransmitting(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return true;
  return ti.tcpi_unacked > 0 && (ti.tcpi_retransmits > 0 || ti.tcpi_backoff > 0);
}

int braid_sock_poke(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -1;
  if (ti.tcpi_unacked > 0) return 1;
  uint8_t b = SOCK_POKE;
  ssize_t n = send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == 1) return 0;
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 1 : -1;
}

void braid_sock_short_queue(int fd) {
  int lowat = 64 << 10;
  setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
}
