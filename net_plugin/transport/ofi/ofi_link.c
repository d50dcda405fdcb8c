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
#include "transport/ofi/ofi.h"
#include "wire/ofi.h"

#define LINK_CHECK_NS 10000000ull /* how often a linked stream's socket is checked */

/* The address message is wire/ofi.h's; s->ofi_name holds the peer's as it arrives. */
_Static_assert(sizeof(((struct braid_stream *)0)->ofi_name) >= BRAID_OFI_NAME_MSG_MAX,
               "a stream holds the largest endpoint-address message");

ncclResult_t braid_ofi_link_start(struct braid_comm *c) {
  uint64_t now = braid_now_ns();
  int alive = 0;
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    if (s->fd < 0) continue;
    char err[320];
    s->ofi = braid_ofi_ep_open(s->rail_name, s->rail, err, sizeof err);
    if (!s->ofi) {
      BRAID_WARN("connection with %s: stream %d (rail %d, %s): %s", c->peer, i, s->rail,
                 s->rail_name ? s->rail_name : "-", err);
      return ncclSystemError;
    }
    uint8_t name[BRAID_OFI_NAME_MAX], buf[BRAID_OFI_NAME_MSG_MAX];
    size_t n = braid_ofi_name_encode(name, braid_ofi_ep_name(s->ofi, name, sizeof name), buf);
    if (!n) {
      BRAID_WARN("connection with %s: stream %d: the endpoint has no address of at most %d bytes",
                 c->peer, i, BRAID_OFI_NAME_MAX);
      return ncclSystemError;
    }
    /* A few hundred bytes into a fresh socket's empty buffer: all or nothing.  A stream the
     * peer already gave up on (it started without it) is dead for this connection: there is
     * no rejoin over ofi; the other streams carry. */
    if (send(s->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n) {
      BRAID_WARN("connection with %s: stream %d (rail %d): sending the endpoint address failed: "
                 "%s%s", c->peer, i, s->rail, strerror(errno),
                 c->nstreams > 1 ? "; the connection goes on without it" : "");
      if (c->nstreams == 1) return ncclRemoteError;
      braid_ofi_link_close(c, s);
      s->dead = true;
      continue;
    }
    s->ofi_check_ns = now;
    alive++;
  }
  return alive ? ncclSuccess : ncclRemoteError;
}

/* Reads what the socket has of the peer's address; 1 complete, 0 not yet, -1 broken. */
static int link_read(struct braid_stream *s, char *why, size_t whylen) {
  size_t need = BRAID_OFI_NAME_HDR_BYTES;
  if (s->ofi_name_got >= BRAID_OFI_NAME_HDR_BYTES) {
    char err[128];
    int len = braid_ofi_name_len(s->ofi_name, err, sizeof err);
    if (len < 0) return snprintf(why, whylen, "the peer announced %s", err), -1;
    need = (size_t)len;
  }
  ssize_t n = recv(s->fd, s->ofi_name + s->ofi_name_got, need - s->ofi_name_got, MSG_DONTWAIT);
  if (n == 0) return snprintf(why, whylen, "the peer closed the connection"), -1;
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    return snprintf(why, whylen, "receive failed: %s", strerror(errno)), -1;
  }
  s->ofi_name_got += (size_t)n;
  if (s->ofi_name_got == BRAID_OFI_NAME_HDR_BYTES) return link_read(s, why, whylen);
  return s->ofi_name_got == need && need > BRAID_OFI_NAME_HDR_BYTES;
}

int braid_ofi_link_ready(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen) {
  if (!s->ofi) return snprintf(why, whylen, "the stream has no endpoint"), -1;
  if (s->ofi_linked) {
    if (now - s->ofi_check_ns < LINK_CHECK_NS) return 1;
    s->ofi_check_ns = now;
    return braid_sock_silent(s->fd, why, whylen);
  }
  int rc = link_read(s, why, whylen);
  if (rc < 0) return -1;
  if (rc == 0) {
    if (now - s->ofi_check_ns > c->timeout_ns)
      return snprintf(why, whylen, "the peer sent no endpoint address in %llu ms (BRAID_TIMEOUT_MS)",
                      (unsigned long long)(c->timeout_ns / 1000000)), -1;
    return 0;
  }
  const uint8_t *name;
  char err[128];
  int len = braid_ofi_name_decode(s->ofi_name, s->ofi_name_got, &name, err, sizeof err);
  if (len < 0) return snprintf(why, whylen, "the peer sent %s", err), -1;
  if (braid_ofi_ep_connect(s->ofi, name, (size_t)len, why, whylen)) return -1;
  s->ofi_linked = true;
  s->ofi_check_ns = now;
  return 1;
}

/* deregMr may come on another thread than the data path's (NCCL's proxy service thread): the
 * endpoint pointers are read and cleared under the comm's lock, the caches under each
 * endpoint's own. */
void braid_ofi_link_forget(struct braid_comm *c, const void *addr, size_t len) {
  if (!c->ofi) return;
  pthread_mutex_lock(&c->ofi_lock);
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i].ofi) braid_ofi_ep_forget(c->streams[i].ofi, addr, len);
  pthread_mutex_unlock(&c->ofi_lock);
}

void braid_ofi_link_close(struct braid_comm *c, struct braid_stream *s) {
  if (!s->ofi) return;
  pthread_mutex_lock(&c->ofi_lock);
  bool closed = braid_ofi_ep_close(s->ofi);
  s->ofi = NULL;
  pthread_mutex_unlock(&c->ofi_lock);
  for (int k = 0; k < BRAID_OFI_RX_DEPTH; k++) {
    if (!closed) s->ofi_rx[k].bounce = NULL, s->ofi_rx[k].bounce_cap = 0; /* still targets: kept */
    s->ofi_rx[k].msg = NULL;
  }
  s->ofi_rx_count = 0;
  s->ofi_rx_pre = 0;
  s->ofi_linked = false;
  if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
}
