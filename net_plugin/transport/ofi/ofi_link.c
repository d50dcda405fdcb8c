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
#include "wire/ofi.h"

#define LINK_CHECK_NS 10000000ull /* how often a linked stream's socket is checked */

/* Opens s's endpoint and sends its address on s's socket: 0; -1 when the endpoint cannot be
 * opened (WARN); 1 when the socket would not take the address (errno). */
static int link_open(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  struct braid_ofi_stream *st = s->tp;
  int i = (int)(s - c->streams);
  char err[320];
  struct braid_ofi_ep *ep = braid_ofi_ep_open(s->rail_name, s->rail, err, sizeof err);
  if (!ep) {
    BRAID_WARN("connection with %s: stream %d (rail %d, %s): %s", c->peer, i, s->rail,
               s->rail_name ? s->rail_name : "-", err);
    return -1;
  }
  pthread_mutex_lock(&c->ofi_lock); /* deregMr's forget reads it on another thread (a rejoin) */
  st->ep = ep;
  pthread_mutex_unlock(&c->ofi_lock);
  uint8_t name[BRAID_OFI_NAME_MAX], buf[BRAID_OFI_NAME_MSG_MAX];
  size_t n = braid_ofi_name_encode(name, braid_ofi_ep_name(st->ep, name, sizeof name), buf);
  if (!n) {
    BRAID_WARN("connection with %s: stream %d: the endpoint has no address of at most %d bytes",
               c->peer, i, BRAID_OFI_NAME_MAX);
    return -1;
  }
  return braid_link_begin(&st->link, s->fd, buf, n, now) ? 1 : 0;
}

ncclResult_t braid_ofi_link_start(struct braid_comm *c) {
  uint64_t now = braid_now_ns();
  int alive = 0;
  for (int i = 0; i < c->nstreams; i++) {
    struct braid_stream *s = &c->streams[i];
    if (s->fd < 0) continue;
    int rc = link_open(c, s, now);
    if (rc < 0) return ncclSystemError;
    /* A stream the peer already gave up on (it started without it) is dead for now: it rejoins
     * later (with acks), and the other streams carry. */
    if (rc > 0) {
      BRAID_WARN("connection with %s: stream %d (rail %d): sending the endpoint address failed: "
                 "%s%s", c->peer, i, s->rail, strerror(errno),
                 c->nstreams > 1 ? "; the connection goes on without it" : "");
      if (c->nstreams == 1) return ncclRemoteError;
      braid_ofi_link_close(c, s);
      s->dead = true;
      continue;
    }
    alive++;
  }
  return alive ? ncclSuccess : ncclRemoteError;
}

void braid_ofi_link_renew(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  braid_ofi_link_close(c, s); /* the old endpoint: nothing it posted lands after this */
  /* Counted afresh on the new endpoint, as at set-up (frames, tags and grants from zero). */
  st->tag = st->credit = 0;
  st->poke_ns = st->closed_ns = st->active_ns = 0;
  st->closed_why[0] = 0;
  memset(&st->link, 0, sizeof st->link);
  st->rx_head = st->rx_count = st->rx_pre = 0;
  for (int k = 0; k < BRAID_OFI_RX_DEPTH; k++) st->rx[k].state = BRAID_OFI_RX_TAKEN, st->rx[k].fr.msg = NULL;
}

int braid_ofi_link_relink(struct braid_comm *c, struct braid_stream *s) {
  int rc = link_open(c, s, braid_now_ns());
  if (rc > 0)
    BRAID_WARN("connection with %s: stream %d (rail %d): sending the new endpoint's address failed: %s",
               c->peer, (int)(s - c->streams), s->rail, strerror(errno));
  if (rc != 0) braid_ofi_link_close(c, s);
  return rc ? -1 : 0;
}

/* The address message's length (wire/ofi.h), from its header. */
static ssize_t link_need(const uint8_t *msg, size_t got, const void *arg, char *why, size_t whylen) {
  (void)got, (void)arg;
  char err[128];
  int len = braid_ofi_name_len(msg, err, sizeof err);
  if (len < 0) return snprintf(why, whylen, "the peer announced %s", err), -1;
  return len;
}

int braid_ofi_link_ready(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  if (!st->ep) return snprintf(why, whylen, "the stream has no endpoint"), -1;
  bool was = st->link.linked;
  int rc = braid_link_poll(&st->link, s->fd, now, c->timeout_ns, LINK_CHECK_NS, BRAID_OFI_NAME_HDR_BYTES,
                           link_need, NULL, "endpoint address", why, whylen);
  if (rc != 1 || was) return rc;
  const uint8_t *name;
  char err[128];
  int len = braid_ofi_name_decode(st->link.msg, st->link.got, &name, err, sizeof err);
  if (len < 0) return snprintf(why, whylen, "the peer announced %s", err), -1;
  if (braid_ofi_ep_connect(st->ep, name, (size_t)len, why, whylen)) return -1;
  braid_link_up(&st->link, now);
  return 1;
}

int braid_ofi_link_watch(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen) {
  struct braid_ofi_stream *st = s->tp;
  if (st->closed_ns) return snprintf(why, whylen, "%s", st->closed_why), BRAID_LINK_CLOSED;
  int rc = braid_ofi_link_ready(c, s, now, why, whylen);
  if (rc == BRAID_LINK_CLOSED) {
    st->closed_ns = st->active_ns = now;
    snprintf(st->closed_why, sizeof st->closed_why, "%s", why);
  }
  return rc;
}

bool braid_ofi_link_drained(const struct braid_ofi_stream *st, uint64_t now) {
  return st->closed_ns && now - st->active_ns >= BRAID_OFI_CLOSE_DRAIN_NS;
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
  st->link.linked = false;
  if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
}
