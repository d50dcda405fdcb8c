#include "comm/rejoin.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/gate.h"
#include "comm/hs.h"
#include "log.h"
#include "stripe/sched.h"
#include "transport/socket/sock.h"

#define JOIN_BACKOFF_MIN_NS 100000000ull   /* first retry after 100 ms ... */
#define JOIN_BACKOFF_MAX_NS 2000000000ull  /* ... doubling up to 2 s */
#define JOIN_ACCEPT_EVERY_NS 50000000ull
#define JOIN_HELLO_WAIT_NS 5000000000ull
#define JOIN_CONNECT_WAIT_NS 1000000000ull

enum { J_IDLE, J_CONNECTING, J_CHAL, J_HELLO, J_REPLY };

/* ---------- sender ---------- */

static void join_end_attempt(struct braid_stream *s) {
  if (s->join_fd >= 0) close(s->join_fd);
  s->join_fd = -1;
  s->join_state = J_IDLE;
  free(s->join_hs);
  s->join_hs = NULL;
}

static void join_retry_later(struct braid_stream *s, uint64_t now) {
  join_end_attempt(s);
  s->join_backoff_ns = s->join_backoff_ns ? 2 * s->join_backoff_ns : JOIN_BACKOFF_MIN_NS;
  if (s->join_backoff_ns > JOIN_BACKOFF_MAX_NS) s->join_backoff_ns = JOIN_BACKOFF_MAX_NS;
  s->join_at_ns = now + s->join_backoff_ns;
}

/* The receiver confirmed: the new socket replaces the broken one; both ends count frames from
 * zero again. */
static void join_revive(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  if (c->sops->renew) c->sops->renew(c, s); /* (first: no system call on the old socket is under way after it) */
  if (s->fd >= 0) close(s->fd);
  s->fd = s->join_fd;
  s->join_fd = -1;
  join_end_attempt(s);
  braid_sock_tune(s->fd);
  braid_sock_short_queue(s->fd);
  if (c->sops->relink && c->sops->relink(c, s) != 0) {
    BRAID_WARN("send stream %d (rail %d, %s) to %s reconnected, but its %s link could not start "
               "again (see above); trying again later", (int)(s - c->streams), s->rail, s->rail_name,
               c->peer, c->sops->name);
    return join_retry_later(s, now);
  }
  s->join_backoff_ns = 0;
  s->tx_count = 0, s->tx_done = 0;
  s->frames_started = s->frames_acked = s->ignore_until = 0;
  s->dead = false;
  BRAID_WARN("send stream %d (rail %d, %s) to %s reconnected", (int)(s - c->streams), s->rail,
             s->rail_name, c->peer);
  bool rail_up = true;
  for (int i = s->rail; i < c->nstreams; i += c->nrails) rail_up &= !c->streams[i].dead;
  if (rail_up) braid_sched_restored(c->tx.sched, s->rail, now);
}

/* The rejoin hello: the connection's own shape (per_rail streams on each of its nrails rails, the
 * last a borrowed backup when nprimary < nrails), proven like the set-up's. */
static int join_hello(struct braid_comm *c, struct braid_stream *s) {
  struct braid_hello h = {.conn_id = c->rejoin.conn_id, .stream = (uint16_t)(s - c->streams),
                          .per_rail = (uint16_t)(c->nstreams / c->nrails),
                          .nrails = (uint16_t)c->nrails,
                          .nbackup = (uint16_t)(c->nrails - c->nprimary),
                          .flags = BRAID_HELLO_REJOIN};
  char why[128];
  int caps = c->rejoin.auth_mode == BRAID_AUTH_MAC ? BRAID_CAPS_MAC : 0; /* as far as this connection goes */
  if (braid_hs_hello(c->rejoin.secret, c->rejoin.auth_mode, caps, s->join_hs->chal, &h,
                     s->join_hs->hello, why, sizeof why) != 0) {
    BRAID_INFO(NCCL_NET, "rejoin of stream %d to %s: %s", h.stream, c->peer, why);
    return -1;
  }
  s->join_hs->auth = c->rejoin.auth_mode;
  return 0;
}

static void join_step(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  if (s->join_state == J_IDLE) {
    if (now < s->join_at_ns) return;
    s->join_hs = calloc(1, sizeof *s->join_hs);
    s->join_fd = s->join_hs ? braid_sock_open(c->rejoin.rail_ifc[s->rail]) : -1;
    if (s->join_fd >= 0) braid_sock_set_class(s->join_fd, c->cls.tc); /* the connection's, from the SYN on */
    const struct sockaddr_storage *to = &c->rejoin.rail_addr[s->rail];
    socklen_t len = to->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (s->join_fd < 0 ||
        (connect(s->join_fd, (const struct sockaddr *)to, len) != 0 && errno != EINPROGRESS))
      return join_retry_later(s, now);
    s->join_state = J_CONNECTING;
    s->join_at_ns = now; /* from now: when this attempt started */
  }
  if (s->join_state == J_CONNECTING) {
    int rc = braid_sock_connected(s->join_fd);
    if (rc < 0) return join_retry_later(s, now);
    if (rc == 0) {
      /* A SYN into a cut or black-holed rail: try afresh rather than wait out the kernel's
       * exponential SYN retries. */
      if (now - s->join_at_ns > JOIN_CONNECT_WAIT_NS) join_retry_later(s, now);
      return;
    }
    s->join_state = J_CHAL;
  }
  struct braid_hs_conn *hs = s->join_hs;
  int rc = 1;
  if (s->join_state == J_CHAL) {
    rc = braid_hs_recv(s->join_fd, hs->chal, sizeof hs->chal, &hs->chal_got);
    if (rc == 1 && join_hello(c, s) != 0) rc = -1;
    if (rc == 1) s->join_state = J_HELLO;
  }
  if (s->join_state == J_HELLO) {
    rc = braid_hs_send(s->join_fd, hs->hello, sizeof hs->hello, &hs->hello_sent);
    if (rc == 1) s->join_state = J_REPLY;
  }
  if (s->join_state == J_REPLY) {
    rc = braid_hs_recv(s->join_fd, hs->reply, sizeof hs->reply, &hs->reply_got);
    char why[256];
    if (rc == 1 && braid_hs_reply_check(c->rejoin.secret, hs, NULL, 0, why, sizeof why) != 0) {
      BRAID_WARN_ONCE("rejoin of send stream %d to %s refused: %s", (int)(s - c->streams), c->peer, why);
      BRAID_INFO(NCCL_NET, "rejoin of send stream %d to %s refused: %s", (int)(s - c->streams), c->peer, why);
      rc = -1;
    }
    if (rc == 1) return join_revive(c, s, now);
  }
  if (rc < 0 || now - s->join_at_ns > JOIN_HELLO_WAIT_NS) join_retry_later(s, now);
}

void braid_rejoin_connect(struct braid_comm *c, uint64_t now) {
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i].dead && c->rejoin.rail_ifc[c->streams[i].rail]) join_step(c, &c->streams[i], now);
}

/* ---------- receiver ---------- */

/* A rejoining stream, proven by the gate (with its own challenge, in this connection's shape and
 * authentication), replaces the broken one. */
static void join_replace(struct braid_comm *c, int stream, int fd) {
  struct braid_stream *s = &c->streams[stream];
  if (c->sops->renew) c->sops->renew(c, s); /* a frame half read from the old socket is dropped */
  if (s->fd >= 0) close(s->fd);
  s->fd = fd;
  braid_sock_tune(s->fd);
  braid_sock_set_class(s->fd, c->cls.tc); /* the class the connection was set up with */
  if (c->sops->relink && c->sops->relink(c, s) != 0) {
    /* The sender sees the socket close and tries again later. */
    BRAID_WARN("receive stream %d (rail %d, %s) from %s: its %s link could not start again (see "
               "above); the sender will try again", stream, s->rail, s->rail_name, c->peer, c->sops->name);
    shutdown(s->fd, SHUT_RDWR);
    return;
  }
  s->frames_recvd = s->frames_ack_sent = 0;
  s->eof = s->dead = false;
  BRAID_WARN("receive stream %d (rail %d, %s) from %s rejoined", stream, s->rail, s->rail_name, c->peer);
}

void braid_rejoin_accept(struct braid_comm *c, uint64_t now) {
  if (!c->rejoin.gate || now < c->rejoin.next_join_ns) return;
  c->rejoin.next_join_ns = now + JOIN_ACCEPT_EVERY_NS;
  int stream, fd;
  while (braid_gate_rejoin(c->rejoin.gate, c->rejoin.conn_id, &stream, &fd)) join_replace(c, stream, fd);
}

void braid_rejoin_free(struct braid_comm *c) {
  if (c->rejoin.gate) {
    braid_gate_leave(c->rejoin.gate, c->rejoin.conn_id);
    braid_gate_unref(c->rejoin.gate);
    c->rejoin.gate = NULL;
  }
  for (int i = 0; c->streams && i < c->nstreams; i++) join_end_attempt(&c->streams[i]);
}
