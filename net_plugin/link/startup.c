/* A link's start-up (see startup.h). */
#include "link/startup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/socket/sock.h"

int braid_link_begin(struct braid_link_startup *l, int fd, const void *msg, size_t len, uint64_t now) {
  memset(l, 0, sizeof *l);
  l->at_ns = now;
  if (len > BRAID_LINK_MSG_MAX) {
    errno = EMSGSIZE;
    return -1;
  }
  if (fd < 0) {
    errno = ENOTCONN;
    return -1;
  }
  ssize_t n = send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == (ssize_t)len) return 0;
  if (n >= 0) errno = EAGAIN; /* part of it: the peer would read a cut message */
  return -1;
}

/* 1 complete, 0 not yet, -1 broken. */
static int link_read(struct braid_link_startup *l, int fd, size_t hdr, braid_link_need_fn need, const void *arg,
                     char *why, size_t whylen) {
  for (;;) {
    size_t want = hdr;
    if (l->got >= hdr) {
      ssize_t total = need(l->msg, l->got, arg, why, whylen);
      if (total < 0) return -1;
      if (total > BRAID_LINK_MSG_MAX || (size_t)total < hdr)
        return snprintf(why, whylen, "the peer announced a start-up message of %zd bytes (%zu to %d)", total,
                        hdr, BRAID_LINK_MSG_MAX), -1;
      if (l->got == (size_t)total) return 1;
      want = (size_t)total;
    }
    ssize_t n = recv(fd, l->msg + l->got, want - l->got, MSG_DONTWAIT);
    if (n == 0) return snprintf(why, whylen, "the peer closed the connection"), -1;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      return snprintf(why, whylen, "receive failed: %s", strerror(errno)), -1;
    }
    l->got += (size_t)n;
  }
}

int braid_link_poll(struct braid_link_startup *l, int fd, uint64_t now, uint64_t timeout_ns, uint64_t check_ns,
                    size_t hdr, braid_link_need_fn need, const void *arg, const char *what, char *why,
                    size_t whylen) {
  /* now may come from before at_ns (a caller's clock read before a relink stamped it) */
  uint64_t since = now > l->at_ns ? now - l->at_ns : 0;
  if (l->linked) {
    if (since < check_ns) return 1;
    l->at_ns = now;
    return braid_sock_silent(fd, why, whylen);
  }
  int rc = link_read(l, fd, hdr, need, arg, why, whylen);
  if (rc != 0) return rc;
  if (since > timeout_ns)
    return snprintf(why, whylen, "the peer sent no %s in %llu ms (BRAID_TIMEOUT_MS)", what,
                    (unsigned long long)(timeout_ns / 1000000)), -1;
  return 0;
}

void braid_link_up(struct braid_link_startup *l, uint64_t now) {
  l->linked = true;
  l->at_ns = now;
}
