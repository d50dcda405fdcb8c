#include "rejoin.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sched.h"
#include "sock.h"

#define JOIN_BACKOFF_MIN_NS 100000000ull   /* first retry after 100 ms ... */
#define JOIN_BACKOFF_MAX_NS 2000000000ull  /* ... doubling up to 2 s */
#define JOIN_ACCEPT_EVERY_NS 50000000ull
#define JOIN_HELLO_WAIT_NS 5000000000ull
#define JOIN_CONNECT_WAIT_NS 1000000000ull

enum { J_IDLE, J_CONNECTING, J_HELLO };

/* ---------- sender ---------- */

static void join_retry_later(struct braid_stream *s, uint64_t now) {
  if (s->join_fd >= 0) close(s->join_fd);
  s->join_fd = -1;
  s->join_state = J_IDLE;
  s->join_sent = 0;
  s->join_backoff_ns = s->join_backoff_ns ? 2 * s->join_backoff_ns : JOIN_BACKOFF_MIN_NS;
  if (s->join_backoff_ns > JOIN_BACKOFF_MAX_NS) s->join_backoff_ns = JOIN_BACKOFF_MAX_NS;
  s->join_at_ns = now + s->join_backoff_ns;
}

/* The new socket replaces the broken one; both ends count frames from zero again. */
static void join_revive(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  if (s->fd >= 0) close(s->fd);
  s->fd = s->join_fd;
  s->join_fd = -1;
  s->join_state = J_IDLE;
  s->join_sent = 0;
  s->join_backoff_ns = 0;
  braid_sock_tune(s->fd);
  braid_sock_short_queue(s->fd);
  s->tx_count = 0, s->tx_done = 0;
  free(s->rescue);
  s->rescue = NULL;
  s->frames_started = s->frames_acked = s->ignore_until = 0;
  s->ack_got = 0;
  s->dead = false;
  BRAID_WARN("send stream %d (rail %d, %s) to %s reconnected", (int)(s - c->streams), s->rail,
             s->rail_name, c->peer);
  bool rail_up = true;
  for (int i = s->rail; i < c->nstreams; i += c->nrails) rail_up &= !c->streams[i].dead;
  if (rail_up) braid_sched_restored(c->sched, s->rail, now);
}

static void join_step(struct braid_comm *c, struct braid_stream *s, uint64_t now) {
  int idx = (int)(s - c->streams);
  if (s->join_state == J_IDLE) {
    if (now < s->join_at_ns) return;
    s->join_fd = braid_sock_open(c->rail_ifc[s->rail]);
    const struct sockaddr_storage *to = &c->rail_addr[s->rail];
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
    s->join_state = J_HELLO;
  }
  struct braid_hello h = {.conn_id = c->conn_id, .stream = (uint16_t)idx, .per_rail = 1,
                          .nrails = (uint16_t)c->nstreams, .flags = BRAID_HELLO_REJOIN};
  memcpy(h.secret, c->secret, sizeof h.secret);
  uint8_t buf[BRAID_HELLO_BYTES];
  braid_hello_encode(&h, buf);
  ssize_t n = send(s->join_fd, buf + s->join_sent, sizeof buf - s->join_sent,
                   MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n > 0) s->join_sent += (size_t)n;
  else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return join_retry_later(s, now);
  if (s->join_sent == sizeof buf) join_revive(c, s, now);
}

void braid_rejoin_connect(struct braid_comm *c, uint64_t now) {
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i].dead && c->rail_ifc[c->streams[i].rail]) join_step(c, &c->streams[i], now);
}

/* ---------- receiver ---------- */

static void join_drop(struct braid_comm *c, int i, const char *why) {
  BRAID_WARN("dropped a connection to a receive connection from %s: %s", c->peer, why);
  close(c->join[i].fd);
  c->join[i] = c->join[--c->njoin];
}

static void join_replace(struct braid_comm *c, int i, const struct braid_hello *h) {
  struct braid_stream *s = &c->streams[h->stream];
  if (s->fd >= 0) close(s->fd);
  s->fd = c->join[i].fd;
  c->join[i] = c->join[--c->njoin];
  braid_sock_tune(s->fd);
  s->stage_off = s->stage_len = 0;
  s->in_frame = s->frame_discard = false; /* a frame half read from the old socket is dropped */
  s->frame_msg = NULL;
  s->frames_recvd = s->frames_ack_sent = 0;
  braid_ack_out_reset(&s->ack_out); /* the rest of an acknowledgement was for the old socket */
  s->stall_since_ns = 0;
  s->eof = s->dead = false;
  BRAID_WARN("receive stream %d (rail %d, %s) from %s rejoined", (int)h->stream, s->rail,
             s->rail_name, c->peer);
}

static void join_hello(struct braid_comm *c, int i, uint64_t now) {
  ssize_t n = recv(c->join[i].fd, c->join[i].hello + c->join[i].got,
                   BRAID_HELLO_BYTES - c->join[i].got, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    return join_drop(c, i, "closed before completing its hello");
  if (n > 0) c->join[i].got += (size_t)n;
  if (c->join[i].got < BRAID_HELLO_BYTES) {
    if (now > c->join[i].deadline_ns) join_drop(c, i, "sent no hello in time");
    return;
  }
  struct braid_hello h;
  char why[128];
  if (braid_hello_decode(c->join[i].hello, &h, why, sizeof why) != 0) return join_drop(c, i, why);
  bool d = !braid_secret_equal(h.secret, c->secret);
  if (d || h.conn_id != c->conn_id || !(h.flags & BRAID_HELLO_REJOIN) || h.stream >= c->nstreams) {
    snprintf(why, sizeof why, "not a stream of this connection (%s%s%s%s)", d ? "wrong secret " : "",
             h.conn_id != c->conn_id ? "other connection " : "",
             !(h.flags & BRAID_HELLO_REJOIN) ? "not a rejoin " : "",
             h.stream >= c->nstreams ? "stream index out of range" : "");
    return join_drop(c, i, why);
  }
  join_replace(c, i, &h);
}

void braid_rejoin_accept(struct braid_comm *c, uint64_t now) {
  if (!c->nlisten || now < c->next_join_ns) return;
  c->next_join_ns = now + JOIN_ACCEPT_EVERY_NS;
  for (int r = 0; r < c->nlisten; r++) {
    int fd;
    while ((fd = accept4(c->listen_fd[r], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
      if (c->njoin == 8) {
        close(fd);
        continue;
      }
      c->join[c->njoin].fd = fd;
      c->join[c->njoin].got = 0;
      c->join[c->njoin++].deadline_ns = now + JOIN_HELLO_WAIT_NS;
    }
  }
  for (int i = c->njoin - 1; i >= 0; i--) join_hello(c, i, now);
}

void braid_rejoin_free(struct braid_comm *c) {
  for (int r = 0; r < c->nlisten; r++) close(c->listen_fd[r]);
  for (int i = 0; i < c->njoin; i++) close(c->join[i].fd);
  for (int i = 0; c->streams && i < c->nstreams; i++)
    if (c->streams[i].join_fd >= 0) close(c->streams[i].join_fd);
  c->nlisten = c->njoin = 0;
}
