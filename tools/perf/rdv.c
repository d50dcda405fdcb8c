/* braid-perf: the rendezvous side channel. */
#include "rdv.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"

#define RDV_MAGIC 0x62726476u /* "brdv" */

struct rdv_hdr {
  uint32_t magic;
  uint32_t rank;
  uint64_t len;
};

static int rdv_resolve(const char *host, int port, struct addrinfo **ai, int passive) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  if (passive) hints.ai_flags = AI_PASSIVE;
  int e = getaddrinfo(host && *host ? host : NULL, ps, &hints, ai);
  if (e) fprintf(stderr, "braid-perf: rendezvous: cannot resolve %s: %s\n", host, gai_strerror(e));
  return e ? -1 : 0;
}

int rdv_listen(const char *host, int *port) {
  struct addrinfo *ai;
  if (rdv_resolve(host, *port, &ai, 1)) return -1;
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
    fprintf(stderr, "braid-perf: rendezvous: cannot listen on %s:%d: %s\n", host, *port,
            strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(fd, (struct sockaddr *)&ss, &sl);
  *port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
  return fd;
}

/* Waits for fd to be ready for `events` until deadline; 0 ready, -1 timeout or error. */
static int rdv_wait(int fd, short events, double deadline) {
  for (;;) {
    int ms = (int)((deadline - braid_now_s()) * 1000);
    if (ms < 0) return -1;
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, ms);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -1;
  }
}

/* Sends or receives exactly len bytes before deadline. */
static int rdv_io(int fd, void *buf, size_t len, int send_dir, double deadline) {
  char *p = buf;
  while (len) {
    if (rdv_wait(fd, send_dir ? POLLOUT : POLLIN, deadline)) return -1;
    ssize_t n = send_dir ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                         : recv(fd, p, len, MSG_DONTWAIT);
    if (n == 0) return -1;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int rdv_send_msg(struct rdv *r, int fd, const void *buf, size_t len, double dl) {
  struct rdv_hdr h = {RDV_MAGIC, (uint32_t)r->rank, len};
  return rdv_io(fd, &h, sizeof h, 1, dl) || rdv_io(fd, (void *)buf, len, 1, dl) ? -1 : 0;
}

static int rdv_recv_msg(int fd, void *buf, size_t len, double dl, int *from) {
  struct rdv_hdr h;
  if (rdv_io(fd, &h, sizeof h, 0, dl)) return -1;
  if (h.magic != RDV_MAGIC || h.len != len) {
    fprintf(stderr, "braid-perf: rendezvous: protocol mismatch (ranks out of step)\n");
    return -1;
  }
  if (from) *from = (int)h.rank;
  return rdv_io(fd, buf, len, 0, dl);
}

static int rdv_connect(const char *host, int port, double dl) {
  struct addrinfo *ai;
  if (rdv_resolve(host, port, &ai, 0)) return -1;
  while (braid_now_s() < dl) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      freeaddrinfo(ai);
      return fd;
    }
    if (fd >= 0) close(fd);
    usleep(50 * 1000);
  }
  freeaddrinfo(ai);
  fprintf(stderr, "braid-perf: rendezvous: cannot connect to %s:%d (timeout)\n", host, port);
  return -1;
}

/* Rank 0: accepts one connection per other rank and files it by the rank it announces. */
static int rdv_accept_all(struct rdv *r, int lfd, double dl) {
  for (int got = 1; got < r->nranks; got++) {
    if (rdv_wait(lfd, POLLIN, dl)) {
      fprintf(stderr, "braid-perf: rendezvous: only %d of %d ranks joined before the timeout\n",
              got, r->nranks);
      return -1;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), from = -1, nr = 0, one = 1;
    if (fd < 0) return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (rdv_recv_msg(fd, &nr, sizeof nr, dl, &from) || from <= 0 || from >= r->nranks ||
        nr != r->nranks || r->fds[from] >= 0) {
      fprintf(stderr, "braid-perf: rendezvous: bad hello (rank %d, nranks %d; expected %d)\n",
              from, nr, r->nranks);
      close(fd);
      return -1;
    }
    r->fds[from] = fd;
  }
  return 0;
}

int rdv_join(struct rdv *r, int listen_fd, const char *host, int port, int rank, int nranks,
             int timeout_s) {
  memset(r, 0, sizeof *r);
  r->rank = rank;
  r->nranks = nranks;
  r->timeout_ms = timeout_s * 1000;
  r->lost_rank = -1;
  r->lost_at = 0;
  r->fds = malloc(sizeof(int) * (size_t)nranks);
  for (int i = 0; i < nranks; i++) r->fds[i] = -1;
  double dl = braid_now_s() + timeout_s;
  int rc = 0;
  if (rank == 0) {
    rc = listen_fd >= 0 ? rdv_accept_all(r, listen_fd, dl) : -1;
    if (listen_fd >= 0) close(listen_fd);
  } else {
    if (listen_fd >= 0) close(listen_fd);
    r->fds[0] = rdv_connect(host, port, dl);
    rc = r->fds[0] < 0 || rdv_send_msg(r, r->fds[0], &nranks, sizeof nranks, dl) ? -1 : 0;
  }
  return rc ? -1 : rdv_barrier(r);
}

static int rdv_fail(struct rdv *r, int peer, const char *what) {
  fprintf(stderr, "braid-perf: rank %d: rendezvous %s with rank %d failed (rank gone or %d s "
          "timeout)\n", r->rank, what, peer, r->timeout_ms / 1000);
  return -1;
}

int rdv_allgather(struct rdv *r, const void *mine, void *all, size_t len) {
  double dl = braid_now_s() + r->timeout_ms / 1000.0;
  char *a = all;
  memcpy(a + (size_t)r->rank * len, mine, len);
  if (r->nranks == 1) return 0;
  if (r->rank != 0) {
    if (rdv_send_msg(r, r->fds[0], mine, len, dl)) return rdv_fail(r, 0, "send");
    if (rdv_recv_msg(r->fds[0], a, len * (size_t)r->nranks, dl, NULL))
      return rdv_fail(r, 0, "receive");
    return 0;
  }
  for (int k = 1; k < r->nranks; k++)
    if (rdv_recv_msg(r->fds[k], a + (size_t)k * len, len, dl, NULL))
      return rdv_fail(r, k, "receive");
  for (int k = 1; k < r->nranks; k++)
    if (rdv_send_msg(r, r->fds[k], a, len * (size_t)r->nranks, dl)) return rdv_fail(r, k, "send");
  return 0;
}

int rdv_barrier(struct rdv *r) {
  char one = 1, *all = malloc((size_t)r->nranks);
  int rc = rdv_allgather(r, &one, all, 1);
  free(all);
  return rc;
}

/* A readable socket outside a collective means EOF (peer gone) or an early message of a rank
 * that is ahead of us; only the first counts as lost. */
int rdv_peer_lost(struct rdv *r) {
  for (int k = 0; k < r->nranks; k++) {
    int fd = r->fds[k];
    if (fd < 0) continue;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) continue;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      r->lost_rank = k;
      return 1;
    }
  }
  return 0;
}

int rdv_peer_silent(struct rdv *r, double now) {
  if (r->lost_at == 0) {
    if (!rdv_peer_lost(r)) return 0;
    r->lost_at = now;
  }
  return now - r->lost_at >= RDV_LOST_GRACE_S;
}

void rdv_close(struct rdv *r) {
  for (int k = 0; k < r->nranks && r->fds; k++)
    if (r->fds[k] >= 0) close(r->fds[k]);
  free(r->fds);
  r->fds = NULL;
}
