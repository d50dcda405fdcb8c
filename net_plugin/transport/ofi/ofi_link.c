/* ofi transport: each stream's libfabric endpoint, and the exchange of endpoint addresses over
 * the stream's socket once the (socket) handshake has authenticated the connection.  The socket
 * stays open, silent, for the connection's life: when the peer process goes, its kernel closes
 * it, which is how a receiver learns that a stream is gone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "comm/comm.h"
#include "log.h"
#include "transport/socket/sock.h"
#include "transport/ofi/ofi_stream.h"

#define LINK_CHECK_NS 10000000ull /* how often a linked stream's socket is checked */

ncclResult_t braid_ofi_link_start(struct braid_comm *c) {
  uint64_t now = braid_now_ns();
  int alive = 0;
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    struct braid_ofi_stream *st = s->tp;
    if (s->fd < 0) continue;
    char err[320];
    st->ep = braid_ofi_ep_open(s->rail_name, s->rail, err, sizeof err);
    if (!st->ep) {
      BRAID_WARN("connection with %s: stream %d (rail %d, %s): %s", c->peer, i, s->rail,
                 s->rail_name ? s->rail_name : "-", err);
      return ncclSystemError;
    }
    uint8_t buf[2 + BRAID_OFI_NAME_MAX];
    size_t n = braid_ofi_ep_name(st->ep, buf + 2, BRAID_OFI_NAME_MAX);
    if (!n) {
      BRAID_WARN("connection with %s: stream %d: the endpoint has no address of at most %d bytes",
                 c->peer, i, BRAID_OFI_NAME_MAX);
      return ncclSystemError;
    }
    buf[0] = (uint8_t)(n & 0xff), buf[1] = (uint8_t)(n >> 8);
    /* A few hundred bytes into a fresh socket's empty buffer: all or nothing.  A stream the
     * peer already gave up on (it started without it) is dead for this connection: there is
     * no rejoin over ofi; the other streams carry. */
    if (send(s->fd, buf, n + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(n + 2)) {
      BRAID_WARN("connection with %s: stream %d (rail %d): sending the endpoint address failed: "
                 "%s%s", c->peer, i, s->rail, strerror(errno),
                 c->nstreams > 1 ? "; the connection goes on without it" : "");
      if (c->nstreams == 1) return ncclRemoteError;
      braid_ofi_link_close(c, s);
      s->dead = true;
      continue;
    }
    st->check_ns = now;
    alive++;
  }
  return alive ? ncclSuccess : ncclRemoteError;
}

/* Reads what the socket has of the peer's address; 1 complete, 0 not yet, -1 broken. */
static int link_read(struct braid_stream *s, char *why, size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  size_t need = st->name_got < 2 ? 2 : 2 + (st->name[0] | (size_t)st->name[1] << 8);
  if (st->name_got >= 2 && need == 2) {
    snprintf(why, whylen, "the peer announced an empty endpoint address");
    return -1;
  }
  if (need > sizeof st->name) {
    snprintf(why, whylen, "the peer announced an endpoint address of %zu bytes (at most %d)",
             need - 2, BRAID_OFI_NAME_MAX);
    return -1;
  }
  ssize_t n = recv(s->fd, st->name + st->name_got, need - st->name_got, MSG_DONTWAIT);
  if (n == 0) return snprintf(why, whylen, "the peer closed the connection"), -1;
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    return snprintf(why, whylen, "receive failed: %s", strerror(errno)), -1;
  }
  st->name_got += (size_t)n;
  if (st->name_got == 2) return link_read(s, why, whylen);
  return st->name_got == need && need > 2;
}

int braid_ofi_link_ready(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  if (!st->ep) return snprintf(why, whylen, "the stream has no endpoint"), -1;
  if (st->linked) {
    if (now - st->check_ns < LINK_CHECK_NS) return 1;
    st->check_ns = now;
    return braid_sock_silent(s->fd, why, whylen);
  }
  int rc = link_read(s, why, whylen);
  if (rc < 0) return -1;
  if (rc == 0) {
    if (now - st->check_ns > c->timeout_ns)
      return snprintf(why, whylen, "the peer sent no endpoint address in %llu ms (BRAID_TIMEOUT_MS)",
                      (unsigned long long)(c->timeout_ns / 1000000)), -1;
    return 0;
  }
  size_t len = st->name[0] | (size_t)st->name[1] << 8;
  if (braid_ofi_ep_connect(st->ep, st->name + 2, len, why, whylen)) return -1;
  st->linked = true;
  st->check_ns = now;
  return 1;
}

/* deregMr may come on another thread than the data path's (NCCL's proxy service thread): the
 * endpoint pointers are read and cleared under the comm's lock, the caches under each
 * endpoint's own. */
void braid_ofi_link_forget(struct braid_comm *c, const void *addr, size_t len) {
  if (!c->ofi) return;
  pthread_mutex_lock(&c->ofi_lock);
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_ofi_stream *st = c->streams[i].tp;
    if (st && st->ep) braid_ofi_ep_forget(st->ep, addr, len);
  }
  pthread_mutex_unlock(&c->ofi_lock);
}

void braid_ofi_link_close(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  if (!st->ep) return;
  pthread_mutex_lock(&c->ofi_lock);
  bool closed = braid_ofi_ep_close(st->ep);
  st->ep = NULL;
  pthread_mutex_unlock(&c->ofi_lock);
  for (int k = 0; k < BRAID_OFI_RX_DEPTH; k++) {
    if (!closed) st->rx[k].bounce = NULL, st->rx[k].bounce_cap = 0; /* still targets: kept */
    st->rx[k].fr.msg = NULL;
  }
  st->rx_count = 0;
  st->rx_pre = 0;
  st->linked = false;
  if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
}
