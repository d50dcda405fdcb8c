/* The receiving side of connection set-up: listen and accept, non-blocking, polled by NCCL.
 *
 * listen() opens a listening socket on every rail of the device and puts rail 0's address and a
 * random secret in NCCL's handle.  Every incoming stream is sent a challenge and must answer with
 * a hello proving it knows the secret (hs.h); one that does not is logged and dropped, never
 * accepted.  The reply proves the listener knows it too, and on stream 0 carries the rail list
 * (the other rails' addresses do not fit in the handle).  accept() groups streams by connection
 * id and hands out the connection once all of them have arrived. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/life.h"
#include "comm/path.h"
#include "comm/hs.h"
#include "inputs.h"
#include "log.h"
#include "param.h"
#include "transport/transport.h"
#include "comm/setup.h"
#include "transport/socket/sock.h"

#define LISTEN_PENDING 64 /* streams waiting for their hello */
#define LISTEN_PARTIAL 8  /* connections with some streams still to come */
#define LISTEN_JOIN_WAIT_NS 2000000000ull /* then a connection starts without its missing rails */
#define LISTEN_JOIN_WAIT_OFI_NS 8000000000ull

struct listen_pending {
  int fd;
  uint8_t chal[BRAID_CHALLENGE_BYTES];
  uint8_t hello[BRAID_HELLO_BYTES];
  size_t got;
  uint64_t deadline_ns;
  char peer[64];
};

struct listen_partial {
  uint64_t conn_id;
  enum braid_transport transport; /* the connector's choice for this connection (its hello) */
  int auth;                       /* BRAID_AUTH_* of its hellos */
  struct braid_tclass cls;        /* the traffic class its hellos name (transport/tclass.h) */
  int nstreams, count, nrails, nprimary;
  uint64_t first_ns;
  int fds[BRAID_MAX_STREAMS * BRAID_MAX_RAILS];
  char peer[64];
};

struct braid_listen {
  uint8_t kind;
  int dev;
  const struct braid_device *device;
  int nfd;                    /* the device's rails, then its backup rail */
  int caps;                   /* BRAID_CAPS_* of this node, in the handle */
  int fd[BRAID_MAX_RAILS + 1];
  uint8_t secret[BRAID_SECRET_BYTES];
  uint8_t raillist[BRAID_RAILLIST_BYTES(BRAID_MAX_RAILS)];
  size_t raillist_len;
  struct listen_pending pending[LISTEN_PENDING];
  int npending;
  struct listen_partial partial[LISTEN_PARTIAL];
  int npartial;
};

static const struct braid_iface *listen_rail(const struct braid_device *d, int r) {
  return r < d->nrails ? d->rail[r] : d->backup;
}

static void listen_free(struct braid_listen *l) {
  for (int r = 0; r < l->nfd; r++)
    if (l->fd[r] >= 0) close(l->fd[r]);
  for (int i = 0; i < l->npending; i++) close(l->pending[i].fd);
  for (int i = 0; i < l->npartial; i++)
    for (int s = 0; s < l->partial[i].nstreams; s++)
      if (l->partial[i].fds[s] >= 0) close(l->partial[i].fds[s]);
  l->kind = 0;
  free(l);
}

ncclResult_t braid_setup_listen(const struct braid_device *device, int dev, void *handle,
                                void **listen_comm) {
  *listen_comm = NULL;
  struct braid_listen *l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  l->kind = BRAID_COMM_LISTEN;
  l->dev = dev;
  l->device = device;
  l->caps = braid_hs_caps();
  if (l->caps < 0) return free(l), ncclInvalidUsage;
  l->nfd = device->nrails + (device->backup != NULL);
  for (int r = 0; r <= BRAID_MAX_RAILS; r++) l->fd[r] = -1;
  struct braid_raillist rails = {.nrails = l->nfd, .nbackup = device->backup != NULL};
  for (int r = 0; r < l->nfd; r++) {
    l->fd[r] = braid_sock_open(listen_rail(device, r));
    socklen_t len = sizeof rails.addr[r];
    if (l->fd[r] < 0 || listen(l->fd[r], 128) != 0 ||
        getsockname(l->fd[r], (struct sockaddr *)&rails.addr[r], &len) != 0) {
      BRAID_WARN("listen on %s (rail %d of device %d) failed: %s", listen_rail(device, r)->name, r,
                 dev, strerror(errno));
      listen_free(l);
      return ncclSystemError;
    }
  }
  l->raillist_len = braid_raillist_encode(&rails, l->raillist);
  struct braid_handle h = {0};
  h.addr = rails.addr[0];
  if (braid_random(l->secret, sizeof l->secret) != 0 ||
      braid_random(&h.listen_id, sizeof h.listen_id) != 0) {
    BRAID_WARN("listen on device %d failed: no randomness for the connection secret", dev);
    listen_free(l);
    return ncclSystemError;
  }
  memcpy(h.secret, l->secret, sizeof h.secret);
  h.auth_caps = (uint8_t)l->caps;
  h.tuner_fp = braid_tuner_fingerprint();
  enum braid_transport kind = braid_transport_kind();
  h.transport = (uint8_t)((kind == BRAID_TRANSPORT_OFI ? BRAID_HANDLE_OFI : 0) |
                          (kind == BRAID_TRANSPORT_VERBS ? BRAID_HANDLE_VERBS : 0) |
                          (braid_transport_forced() ? BRAID_HANDLE_FORCED : 0));
  braid_handle_encode(&h, handle);
  char a[64];
  BRAID_INFO(NCCL_NET, "listening on %s and %d more rails (device %d, %s)",
             braid_sockaddr_str((struct sockaddr *)&h.addr, a, sizeof a), device->nrails - 1, dev,
             device->name);
  *listen_comm = l;
  return ncclSuccess;
}

static void listen_drop(struct braid_listen *l, int i, const char *why) {
  BRAID_WARN("dropped an incoming connection from %s on device %d: %s", l->pending[i].peer, l->dev,
             why);
  close(l->pending[i].fd);
  l->pending[i] = l->pending[--l->npending];
}

static void listen_accept_new(struct braid_listen *l) {
  for (int r = 0; r < l->nfd; r++) {
    for (;;) {
      struct sockaddr_storage sa;
      socklen_t len = sizeof sa;
      int fd = accept4(l->fd[r], (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      if (l->npending == LISTEN_PENDING) listen_drop(l, 0, "too many connections without a hello");
      struct listen_pending *p = &l->pending[l->npending++];
      memset(p, 0, sizeof *p);
      p->fd = fd;
      p->deadline_ns = braid_now_ns() + (uint64_t)braid_param_int(BRAID_P_TIMEOUT_MS) * 1000000ull;
      braid_sockaddr_str((struct sockaddr *)&sa, p->peer, sizeof p->peer);
      size_t sent = 0; /* a fresh socket takes the whole challenge */
      if (braid_hs_challenge(p->chal) != 0)
        listen_drop(l, l->npending - 1, "no randomness for its challenge");
      else if (braid_hs_send(fd, p->chal, sizeof p->chal, &sent) != 1)
        listen_drop(l, l->npending - 1, "could not send the challenge");
    }
  }
}

/* Files a stream with a verified hello under its connection; NULL when inconsistent. */
static struct listen_partial *listen_file(struct braid_listen *l, struct listen_pending *p,
                                          const struct braid_hello *h) {
  int mine = l->device->nrails, theirs = h->nrails - h->nbackup;
  int primary = theirs < mine ? theirs : mine;
  int rails = primary + (h->nbackup && l->device->backup);
  int total = h->per_rail * rails;
  if (h->stream >= total) return NULL;
  struct listen_partial *c = NULL;
  for (int i = 0; i < l->npartial; i++)
    if (l->partial[i].conn_id == h->conn_id) c = &l->partial[i];
  if (!c) {
    if (l->npartial == LISTEN_PARTIAL) return NULL;
    c = &l->partial[l->npartial++];
    memset(c, 0, sizeof *c);
    c->conn_id = h->conn_id;
    c->nstreams = total;
    c->nrails = rails;
    c->nprimary = primary;
    c->first_ns = braid_now_ns();
    for (int i = 0; i < total; i++) c->fds[i] = -1;
    memcpy(c->peer, p->peer, sizeof c->peer);
  }
  if (c->nstreams != total || c->fds[h->stream] >= 0) return NULL;
  c->fds[h->stream] = p->fd;
  c->count++;
  return c;
}

/* Reads pending i's hello; returns its connection when the stream was filed, NULL otherwise
 * (still incomplete, or dropped: then i is gone and *dropped is set). */
static struct listen_partial *listen_hello(struct braid_listen *l, int i, uint64_t now,
                                           int *dropped) {
  struct listen_pending *p = &l->pending[i];
  *dropped = 1;
  int rc = braid_hs_recv(p->fd, p->hello, BRAID_HELLO_BYTES, &p->got);
  if (rc < 0) return listen_drop(l, i, "closed before completing its hello"), NULL;
  if (rc == 0) {
    if (now > p->deadline_ns) return listen_drop(l, i, "sent no hello in time (BRAID_TIMEOUT_MS)"), NULL;
    *dropped = 0;
    return NULL;
  }
  struct braid_hello h = {0};
  char why[256];
  int status = braid_hs_hello_check(l->secret, l->caps, -1, p->chal, p->hello, &h, why, sizeof why);
  /* The connector chose the transport from ours (in the handle) and its own. */
  enum braid_transport theirs = h.flags & BRAID_HELLO_VERBS ? BRAID_TRANSPORT_VERBS
                                : h.flags & BRAID_HELLO_OFI ? BRAID_TRANSPORT_OFI
                                                            : BRAID_TRANSPORT_SOCKET;
  enum braid_transport mine = braid_transport_kind();
  if (status == BRAID_REPLY_OK && theirs != BRAID_TRANSPORT_SOCKET && theirs != mine) {
    snprintf(why, sizeof why, "the peer sends over %s, this process uses %s: set BRAID_TRANSPORT "
             "alike on every node", braid_transport_word(theirs), braid_transport_word(mine));
    status = BRAID_REPLY_TRANSPORT;
  }
  if (status == BRAID_REPLY_OK && theirs == BRAID_TRANSPORT_SOCKET && mine != BRAID_TRANSPORT_SOCKET &&
      braid_transport_forced()) {
    snprintf(why, sizeof why, "the peer sends over TCP sockets, this process was told to use %s "
             "(BRAID_TRANSPORT): set BRAID_TRANSPORT alike on every node", braid_transport_word(mine));
    status = BRAID_REPLY_TRANSPORT;
  }
  struct listen_partial *c = status == BRAID_REPLY_OK ? listen_file(l, p, &h) : NULL;
  if (status == BRAID_REPLY_OK && !c) {
    snprintf(why, sizeof why, "inconsistent stream numbering");
    status = BRAID_REPLY_STREAM;
  }
  /* The connector chose the class; this end applies it (tclass.h), from the reply on. */
  struct braid_tclass cls = {h.flags & BRAID_HELLO_TC ? h.tc : BRAID_TCLASS_UNDEF,
                             h.flags & BRAID_HELLO_SL ? h.sl : BRAID_TCLASS_UNDEF};
  if (c && c->count == 1) c->transport = theirs, c->auth = h.auth, c->cls = cls;
  else if (c && (c->transport != theirs || c->auth != h.auth || c->cls.tc != cls.tc || c->cls.sl != cls.sl)) {
    snprintf(why, sizeof why, "streams of one connection on two transports, authentications or "
             "traffic classes");
    status = BRAID_REPLY_STREAM;
  }
  if (status == BRAID_REPLY_OK) braid_sock_set_class(p->fd, cls.tc);
  uint8_t reply[BRAID_REPLY_BYTES + sizeof l->raillist];
  size_t len = braid_hs_reply(l->secret, status, p->chal, p->hello, h.stream == 0 ? l->raillist : NULL,
                              l->raillist_len, reply), sent = 0;
  if (braid_hs_send(p->fd, reply, len, &sent) != 1 && status == BRAID_REPLY_OK) {
    snprintf(why, sizeof why, "could not send its reply");
    status = BRAID_REPLY_STREAM;
  }
  if (status != BRAID_REPLY_OK) {
    if (c) c->fds[h.stream] = -1, c->count--; /* not filed after all: the drop closes it */
    return listen_drop(l, i, why), NULL;
  }
  l->pending[i] = l->pending[--l->npending];
  return c;
}

static ncclResult_t listen_finish(struct braid_listen *l, struct listen_partial *c,
                                  void **recv_comm) {
  struct braid_comm *rc = braid_comm_new(BRAID_COMM_RECV, l->dev, c->nstreams);
  if (!rc) return ncclSystemError;
  memcpy(rc->peer, c->peer, sizeof rc->peer);
  rc->nrails = c->nrails;
  rc->nprimary = c->nprimary;
  for (int s = 0; s < c->nstreams; s++) {
    int r = s % c->nrails;
    rc->streams[s].fd = c->fds[s], c->fds[s] = -1;
    rc->streams[s].rail = r;
    rc->streams[s].rail_name = (r < c->nprimary ? l->device->rail[r] : l->device->backup)->name;
  }
  rc->rejoin.conn_id = c->conn_id;
  rc->ofi = c->transport == BRAID_TRANSPORT_OFI;
  rc->cls = c->cls;
  braid_tclass_announce(&rc->cls, c->transport, false);
  if (c->transport == BRAID_TRANSPORT_VERBS) rc->path = &braid_verbs_path;
  memcpy(rc->rejoin.secret, l->secret, sizeof rc->rejoin.secret);
  rc->rejoin.auth_mode = c->auth;
  if (c->nstreams > 1 && c->transport == BRAID_TRANSPORT_SOCKET) { /* sockets stay, for rejoins */
    for (int r = 0; r < l->nfd; r++) {
      rc->rejoin.listen_fd[r] = l->fd[r], l->fd[r] = -1;
      braid_sock_set_class(rc->rejoin.listen_fd[r], rc->cls.tc); /* rejoins' SYN-ACKs: accepted sockets inherit it */
    }
    rc->rejoin.nlisten = l->nfd;
  }
  if (c->count < c->nstreams)
    BRAID_WARN("connection from %s on device %d starts with %d of %d streams; the missing rails "
               "join when they can connect", rc->peer, l->dev, c->count, c->nstreams);
  *c = l->partial[--l->npartial];
  ncclResult_t err = braid_comm_ready(rc);
  if (err) return braid_comm_free(rc), err;
  BRAID_INFO(NCCL_NET, "accepted connection from %s on device %d (%d rails, %d streams)", rc->peer,
             l->dev, rc->nrails, rc->nstreams);
  *recv_comm = rc;
  return ncclSuccess;
}

ncclResult_t braid_setup_accept(void *listen_comm, void **recv_comm) {
  struct braid_listen *l = listen_comm;
  *recv_comm = NULL;
  if (!l || l->kind != BRAID_COMM_LISTEN) {
    BRAID_WARN("accept() on an invalid listen comm %p", listen_comm);
    return ncclInvalidArgument;
  }
  listen_accept_new(l);
  uint64_t now = braid_now_ns();
  for (int i = 0; i < l->npending; i++) {
    int dropped;
    struct listen_partial *c = listen_hello(l, i, now, &dropped);
    if (c || dropped) i--;
    if (c && c->count == c->nstreams) return listen_finish(l, c, recv_comm);
  }
  for (int i = 0; i < l->npartial; i++) { /* stream 0 is there, other rails never came */
    struct listen_partial *c = &l->partial[i];
    /* Over ofi or verbs a stream that misses the start never joins: wait longer for it. */
    uint64_t wait = c->transport != BRAID_TRANSPORT_SOCKET ? LISTEN_JOIN_WAIT_OFI_NS : LISTEN_JOIN_WAIT_NS;
    if (c->fds[0] >= 0 && now > c->first_ns + wait) return listen_finish(l, c, recv_comm);
  }
  return ncclSuccess;
}

ncclResult_t braid_setup_close_listen(void *listen_comm) {
  struct braid_listen *l = listen_comm;
  if (!l) return ncclSuccess;
  if (l->kind != BRAID_COMM_LISTEN) {
    BRAID_WARN("closeListen() on an invalid listen comm %p", listen_comm);
    return ncclInvalidArgument;
  }
  listen_free(l);
  return ncclSuccess;
}
