/* A listen handle's door (see gate.h). */
#include "comm/gate.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "comm/hs.h"
#include "log.h"
#include "param.h"
#include "transport/socket/sock.h"
#include "wire/hello.h"

#define GATE_HELLO_WAIT_NS 5000000000ull   /* a connector answers the challenge at once */
#define GATE_ACCEPTS_PER_CALL 64           /* per listening socket, per call */
#define GATE_JOIN_WAIT_NS 2000000000ull    /* then a connection starts without its missing rails */
#define GATE_JOIN_WAIT_OFI_NS 8000000000ull
#define GATE_ORPHAN_NS 30000000000ull      /* a set-up whose stream 0 never came is dropped */
#define GATE_LOG_EVERY_NS 1000000000ull

struct gate_pending {
  int fd;
  uint8_t chal[BRAID_CHALLENGE_BYTES];
  uint8_t hello[BRAID_HELLO_BYTES];
  size_t got;
  uint64_t since_ns, deadline_ns;
  struct sockaddr_storage from;
  char peer[64];
};

struct gate_join {
  uint64_t conn_id;
  int stream, fd;
};

struct braid_gate {
  pthread_mutex_t mu;
  int refs;
  int dev;
  const struct braid_device *device;
  int nfd; /* the device's rails, then its backup rail */
  int fd[BRAID_MAX_RAILS + 1];
  int caps;
  uint8_t secret[BRAID_SECRET_BYTES];
  uint8_t raillist[BRAID_RAILLIST_BYTES(BRAID_MAX_RAILS + 1)];
  size_t raillist_len;
  struct sockaddr_storage addr[BRAID_MAX_RAILS + 1];
  bool setups_open;
  struct gate_pending pending[BRAID_GATE_PENDING];
  int npending;
  struct braid_gate_setup setup[BRAID_GATE_SETUPS];
  uint64_t setup_since[BRAID_GATE_SETUPS];
  int nsetup;
  struct braid_gate_member *members;
  int nmembers, members_cap;
  struct gate_join *joins;
  int njoins, joins_cap;
  /* drops summarised: the count since the last WARN, and the last one's words */
  int dropped;
  uint64_t logged_ns;
  char last_drop[192];
};

static const struct braid_iface *gate_rail(const struct braid_device *d, int r) {
  return r < d->nrails ? d->rail[r] : d->backup;
}

/* One WARN now and then for strangers turned away: the first at once, the rest counted. */
static void gate_log_drops(struct braid_gate *g, uint64_t now, bool flush) {
  if (!g->dropped || (!flush && g->logged_ns && now - g->logged_ns < GATE_LOG_EVERY_NS)) return;
  if (g->dropped == 1)
    BRAID_WARN("dropped an incoming connection on device %d: %s", g->dev, g->last_drop);
  else
    BRAID_WARN("dropped %d incoming connections on device %d in the last %.1f s (the last: %s)", g->dropped,
               g->dev, g->logged_ns ? (double)(now - g->logged_ns) / 1e9 : 0.0, g->last_drop);
  g->dropped = 0;
  g->logged_ns = now;
}

static void gate_count_drop(struct braid_gate *g, const char *peer, const char *why, uint64_t now) {
  snprintf(g->last_drop, sizeof g->last_drop, "from %s, %s", peer, why);
  g->dropped++;
  gate_log_drops(g, now, false);
}

static void gate_drop(struct braid_gate *g, int i, const char *why, uint64_t now) {
  gate_count_drop(g, g->pending[i].peer, why, now);
  close(g->pending[i].fd);
  g->pending[i] = g->pending[--g->npending];
}

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return false;
  if (a->ss_family == AF_INET)
    return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
  return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                 sizeof(struct in6_addr));
}

/* A new connection: refused when its source has BRAID_GATE_PER_SOURCE waiting already; else it
 * takes a slot (the oldest stranger's when all are taken) and is challenged. */
static void gate_admit(struct braid_gate *g, int fd, const struct sockaddr_storage *from, uint64_t now) {
  char peer[64];
  braid_sockaddr_str((const struct sockaddr *)from, peer, sizeof peer);
  int same = 0, oldest = 0;
  for (int i = 0; i < g->npending; i++) {
    same += same_host(&g->pending[i].from, from);
    if (g->pending[i].since_ns < g->pending[oldest].since_ns) oldest = i;
  }
  if (same >= BRAID_GATE_PER_SOURCE) {
    close(fd);
    return gate_count_drop(g, peer, "too many connections from that address without a hello", now);
  }
  if (g->npending == BRAID_GATE_PENDING) gate_drop(g, oldest, "evicted: too many connections without a hello", now);
  struct gate_pending *p = &g->pending[g->npending++];
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->from = *from;
  memcpy(p->peer, peer, sizeof p->peer);
  p->since_ns = now;
  uint64_t wait = (uint64_t)braid_param_int(BRAID_P_TIMEOUT_MS) * 1000000ull;
  p->deadline_ns = now + (wait < GATE_HELLO_WAIT_NS ? wait : GATE_HELLO_WAIT_NS);
  size_t sent = 0; /* a fresh socket takes the whole challenge */
  if (braid_hs_challenge(p->chal) != 0) gate_drop(g, g->npending - 1, "no randomness for its challenge", now);
  else if (braid_hs_send(fd, p->chal, sizeof p->chal, &sent) != 1)
    gate_drop(g, g->npending - 1, "could not send the challenge", now);
}

static void gate_accept_new(struct braid_gate *g, uint64_t now) {
  for (int r = 0; r < g->nfd; r++)
    for (int k = 0; k < GATE_ACCEPTS_PER_CALL; k++) {
      struct sockaddr_storage sa;
      socklen_t len = sizeof sa;
      memset(&sa, 0, sizeof sa);
      int fd = accept4(g->fd[r], (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      gate_admit(g, fd, &sa, now);
    }
}

static struct braid_gate_member *gate_member(struct braid_gate *g, uint64_t conn_id) {
  for (int i = 0; i < g->nmembers; i++)
    if (g->members[i].conn_id == conn_id) return &g->members[i];
  return NULL;
}

/* A proven set-up stream filed under its connection; a refusal (BRAID_REPLY_*) with why. */
static int gate_file_setup(struct braid_gate *g, struct gate_pending *p, const struct braid_hello *h,
                           uint64_t now, char *why, size_t whylen) {
  if (!g->setups_open) {
    snprintf(why, whylen, "the listen comm it was meant for is closed");
    return BRAID_REPLY_STREAM;
  }
  if (gate_member(g, h->conn_id)) {
    snprintf(why, whylen, "its connection started without it (it rejoins)");
    return BRAID_REPLY_STREAM;
  }
  enum braid_transport theirs = h->flags & BRAID_HELLO_VERBS ? BRAID_TRANSPORT_VERBS
                                : h->flags & BRAID_HELLO_OFI ? BRAID_TRANSPORT_OFI
                                                             : BRAID_TRANSPORT_SOCKET;
  enum braid_transport mine = braid_transport_kind();
  if (theirs != BRAID_TRANSPORT_SOCKET && theirs != mine) {
    snprintf(why, whylen, "the peer sends over %s, this process uses %s: set BRAID_TRANSPORT alike on every node",
             braid_transport_word(theirs), braid_transport_word(mine));
    return BRAID_REPLY_TRANSPORT;
  }
  if (theirs == BRAID_TRANSPORT_SOCKET && mine != BRAID_TRANSPORT_SOCKET && braid_transport_forced()) {
    snprintf(why, whylen, "the peer sends over TCP sockets, this process was told to use %s (BRAID_TRANSPORT): "
             "set BRAID_TRANSPORT alike on every node", braid_transport_word(mine));
    return BRAID_REPLY_TRANSPORT;
  }
  struct braid_tclass cls = {h->flags & BRAID_HELLO_TC ? h->tc : BRAID_TCLASS_UNDEF,
                             h->flags & BRAID_HELLO_SL ? h->sl : BRAID_TCLASS_UNDEF};
  int mine_rails = g->device->nrails, theirs_rails = h->nrails - h->nbackup;
  int primary = theirs_rails < mine_rails ? theirs_rails : mine_rails;
  int rails = primary + (h->nbackup && g->device->backup);
  int total = h->per_rail * rails;
  struct braid_gate_setup *c = NULL;
  for (int i = 0; i < g->nsetup && !c; i++)
    if (g->setup[i].conn_id == h->conn_id) c = &g->setup[i];
  if (!c) {
    if (g->nsetup == BRAID_GATE_SETUPS || total > BRAID_GATE_MAX_STREAMS) {
      snprintf(why, whylen, "%s", total > BRAID_GATE_MAX_STREAMS ? "too many streams" : "too many connections being set up at once");
      return BRAID_REPLY_STREAM;
    }
    g->setup_since[g->nsetup] = now;
    c = &g->setup[g->nsetup++];
    memset(c, 0, sizeof *c);
    c->conn_id = h->conn_id;
    c->nstreams = total;
    c->nrails = rails;
    c->nprimary = primary;
    c->transport = theirs;
    c->auth = h->auth;
    c->cls = cls;
    for (int i = 0; i < total; i++) c->fds[i] = -1;
    memcpy(c->peer, p->peer, sizeof c->peer);
  }
  if (c->nstreams != total || h->stream >= total || c->fds[h->stream] >= 0) {
    snprintf(why, whylen, "inconsistent stream numbering");
    return BRAID_REPLY_STREAM;
  }
  if (c->transport != theirs || c->auth != h->auth || c->cls.tc != cls.tc || c->cls.sl != cls.sl) {
    snprintf(why, whylen, "streams of one connection on two transports, authentications or traffic classes");
    return BRAID_REPLY_STREAM;
  }
  braid_sock_set_class(p->fd, cls.tc); /* the connector chose the class: this end applies it, from the reply on */
  c->fds[h->stream] = p->fd;
  c->count++;
  return BRAID_REPLY_OK;
}

/* A proven rejoin: a stream of a registered connection, in its shape, proven as its set-up was. */
static int gate_file_rejoin(struct braid_gate *g, struct gate_pending *p, const struct braid_hello *h, char *why,
                            size_t whylen) {
  const struct braid_gate_member *m = gate_member(g, h->conn_id);
  if (!m || h->stream >= m->nstreams || h->nrails != m->nrails || h->per_rail * h->nrails != m->nstreams ||
      h->nbackup != m->nbackup) {
    snprintf(why, whylen, "a rejoin that is not a stream of a connection accepted here (%s, %u per rail on %u rails)",
             m ? "its shape differs" : "no such connection", h->per_rail, h->nrails);
    return BRAID_REPLY_STREAM;
  }
  if (h->auth != m->auth) {
    snprintf(why, whylen, "a rejoin proven another way than its connection's set-up");
    return BRAID_REPLY_AUTH;
  }
  if (g->njoins == g->joins_cap) {
    int cap = g->joins_cap ? 2 * g->joins_cap : 8;
    struct gate_join *j = realloc(g->joins, (size_t)cap * sizeof *j);
    if (!j) {
      snprintf(why, whylen, "no memory");
      return BRAID_REPLY_STREAM;
    }
    g->joins = j, g->joins_cap = cap;
  }
  g->joins[g->njoins++] = (struct gate_join){h->conn_id, h->stream, p->fd};
  return BRAID_REPLY_OK;
}

/* Reads pending i's hello and routes it when proven; true when i left the table. */
static bool gate_hello(struct braid_gate *g, int i, uint64_t now) {
  struct gate_pending *p = &g->pending[i];
  int rc = braid_hs_recv(p->fd, p->hello, BRAID_HELLO_BYTES, &p->got);
  if (rc < 0) return gate_drop(g, i, "closed before completing its hello", now), true;
  if (rc == 0) {
    if (now <= p->deadline_ns) return false;
    return gate_drop(g, i, "sent no hello in time", now), true;
  }
  struct braid_hello h;
  memset(&h, 0, sizeof h);
  char why[256];
  int status = braid_hs_hello_check(g->secret, g->caps, -1, p->chal, p->hello, &h, why, sizeof why);
  bool rejoin = status == BRAID_REPLY_OK && (h.flags & BRAID_HELLO_REJOIN);
  if (status == BRAID_REPLY_OK)
    status = rejoin ? gate_file_rejoin(g, p, &h, why, sizeof why) : gate_file_setup(g, p, &h, now, why, sizeof why);
  uint8_t reply[BRAID_REPLY_BYTES + sizeof g->raillist];
  size_t len = braid_hs_reply(g->secret, status, p->chal, p->hello, !rejoin && h.stream == 0 ? g->raillist : NULL,
                              g->raillist_len, reply),
         sent = 0;
  if (braid_hs_send(p->fd, reply, len, &sent) != 1 && status == BRAID_REPLY_OK) {
    /* filed, but its connector will not know: take it back */
    if (rejoin) g->njoins--;
    else
      for (int k = 0; k < g->nsetup; k++)
        if (g->setup[k].conn_id == h.conn_id) g->setup[k].fds[h.stream] = -1, g->setup[k].count--;
    snprintf(why, sizeof why, "could not send its reply");
    status = BRAID_REPLY_STREAM;
  }
  if (status != BRAID_REPLY_OK) return gate_drop(g, i, why, now), true;
  g->pending[i] = g->pending[--g->npending];
  return true;
}

static void gate_poll(struct braid_gate *g, uint64_t now) {
  gate_accept_new(g, now);
  for (int i = 0; i < g->npending; i++)
    if (gate_hello(g, i, now)) i--;
  gate_log_drops(g, now, false);
}

static void setup_close(struct braid_gate_setup *c) {
  for (int s = 0; s < c->nstreams; s++)
    if (c->fds[s] >= 0) close(c->fds[s]);
}

struct braid_gate *braid_gate_open(const struct braid_device *device, int dev, int caps) {
  struct braid_gate *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  pthread_mutex_init(&g->mu, NULL);
  g->refs = 1;
  g->dev = dev;
  g->device = device;
  g->setups_open = true;
  g->caps = caps;
  g->nfd = device->nrails + (device->backup != NULL);
  for (int r = 0; r <= BRAID_MAX_RAILS; r++) g->fd[r] = -1;
  struct braid_raillist rails = {.nrails = g->nfd, .nbackup = device->backup != NULL};
  for (int r = 0; r < g->nfd; r++) {
    g->fd[r] = braid_sock_open(gate_rail(device, r));
    socklen_t len = sizeof rails.addr[r];
    if (g->fd[r] < 0 || listen(g->fd[r], 128) != 0 ||
        getsockname(g->fd[r], (struct sockaddr *)&rails.addr[r], &len) != 0) {
      BRAID_WARN("listen on %s (rail %d of device %d) failed: %s", gate_rail(device, r)->name, r, dev,
                 strerror(errno));
      braid_gate_unref(g);
      return NULL;
    }
  }
  g->raillist_len = braid_raillist_encode(&rails, g->raillist);
  for (int r = 0; r < g->nfd; r++) g->addr[r] = rails.addr[r];
  if (braid_random(g->secret, sizeof g->secret) != 0) {
    BRAID_WARN("listen on device %d failed: no randomness for the connection secret", dev);
    braid_gate_unref(g);
    return NULL;
  }
  return g;
}

void braid_gate_ref(struct braid_gate *g) {
  pthread_mutex_lock(&g->mu);
  g->refs++;
  pthread_mutex_unlock(&g->mu);
}

void braid_gate_unref(struct braid_gate *g) {
  if (!g) return;
  pthread_mutex_lock(&g->mu);
  int left = --g->refs;
  pthread_mutex_unlock(&g->mu);
  if (left) return;
  gate_log_drops(g, braid_now_ns(), true);
  for (int r = 0; r < g->nfd; r++)
    if (g->fd[r] >= 0) close(g->fd[r]);
  for (int i = 0; i < g->npending; i++) close(g->pending[i].fd);
  for (int i = 0; i < g->nsetup; i++) setup_close(&g->setup[i]);
  for (int i = 0; i < g->njoins; i++) close(g->joins[i].fd);
  free(g->joins);
  free(g->members);
  pthread_mutex_destroy(&g->mu);
  memset(g->secret, 0, sizeof g->secret);
  free(g);
}

const struct sockaddr_storage *braid_gate_addr(const struct braid_gate *g) { return &g->addr[0]; }
const struct sockaddr_storage *braid_gate_rail_addr(const struct braid_gate *g, int r) {
  return r >= 0 && r < g->nfd ? &g->addr[r] : NULL;
}
const uint8_t *braid_gate_secret(const struct braid_gate *g) { return g->secret; }
int braid_gate_caps(const struct braid_gate *g) { return g->caps; }

int braid_gate_setup(struct braid_gate *g, struct braid_gate_setup *out) {
  uint64_t now = braid_now_ns();
  pthread_mutex_lock(&g->mu);
  gate_poll(g, now);
  int found = -1;
  for (int i = 0; i < g->nsetup && found < 0; i++) {
    struct braid_gate_setup *c = &g->setup[i];
    /* Over ofi or verbs a stream that misses the start never joins: wait longer for it. */
    uint64_t wait = c->transport != BRAID_TRANSPORT_SOCKET ? GATE_JOIN_WAIT_OFI_NS : GATE_JOIN_WAIT_NS;
    if (c->count == c->nstreams || (c->fds[0] >= 0 && now > g->setup_since[i] + wait)) found = i;
    else if (c->fds[0] < 0 && now > g->setup_since[i] + GATE_ORPHAN_NS) { /* stream 0 never came */
      gate_count_drop(g, c->peer, "a connection's other streams came, its first never did", now);
      setup_close(c);
      g->setup[i] = g->setup[--g->nsetup];
      g->setup_since[i] = g->setup_since[g->nsetup];
      i--;
    }
  }
  if (found >= 0) {
    *out = g->setup[found];
    g->setup[found] = g->setup[--g->nsetup];
    g->setup_since[found] = g->setup_since[g->nsetup];
  }
  pthread_mutex_unlock(&g->mu);
  return found >= 0;
}

void braid_gate_setups_end(struct braid_gate *g) {
  pthread_mutex_lock(&g->mu);
  g->setups_open = false;
  for (int i = 0; i < g->nsetup; i++) setup_close(&g->setup[i]);
  g->nsetup = 0;
  pthread_mutex_unlock(&g->mu);
}

void braid_gate_join(struct braid_gate *g, const struct braid_gate_member *m) {
  pthread_mutex_lock(&g->mu);
  if (g->nmembers == g->members_cap) {
    int cap = g->members_cap ? 2 * g->members_cap : 4;
    struct braid_gate_member *a = realloc(g->members, (size_t)cap * sizeof *a);
    if (a) g->members = a, g->members_cap = cap;
  }
  if (g->nmembers < g->members_cap) g->members[g->nmembers++] = *m;
  else BRAID_WARN("device %d: no memory to take rejoins for a connection from now on", g->dev);
  pthread_mutex_unlock(&g->mu);
}

void braid_gate_leave(struct braid_gate *g, uint64_t conn_id) {
  pthread_mutex_lock(&g->mu);
  for (int i = 0; i < g->nmembers; i++)
    if (g->members[i].conn_id == conn_id) g->members[i--] = g->members[--g->nmembers];
  for (int i = 0; i < g->njoins; i++)
    if (g->joins[i].conn_id == conn_id) close(g->joins[i].fd), g->joins[i--] = g->joins[--g->njoins];
  pthread_mutex_unlock(&g->mu);
}

int braid_gate_rejoin(struct braid_gate *g, uint64_t conn_id, int *stream, int *fd) {
  uint64_t now = braid_now_ns();
  pthread_mutex_lock(&g->mu);
  gate_poll(g, now);
  int found = 0;
  for (int i = 0; i < g->njoins && !found; i++)
    if (g->joins[i].conn_id == conn_id) {
      *stream = g->joins[i].stream, *fd = g->joins[i].fd;
      g->joins[i] = g->joins[--g->njoins];
      found = 1;
    }
  pthread_mutex_unlock(&g->mu);
  return found;
}
