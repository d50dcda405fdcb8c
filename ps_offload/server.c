/* braid-ps: sockets, the acceptor and the epoll workers (see server.h). */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "conn.h"
#include "sockaddr.h"

#define MAX_THREADS 256
#define TICK_NS 100000000ull /* timeouts are checked this often */
#define READS_PER_EVENT 32   /* fairness: reads of one connection per readiness event */
#define DEFAULT_MAX_PENDING 128

struct worker {
  struct ps_server *srv;
  int epfd, evfd;
  pthread_t th;
  int started;
  pthread_mutex_t inbox_mu;
  struct ps_conn **inbox; /* handed over by the acceptor, under inbox_mu */
  size_t ninbox, capinbox;
  struct ps_conn **conns; /* owned; this thread only */
  size_t nconns, capconns;
};

struct ps_server {
  struct ps_ctx *ctx;
  int lfd, epfd, evfd;
  pthread_t acceptor;
  int acceptor_started;
  atomic_int stop;
  int nworkers;
  unsigned next_worker;
  struct worker *workers;
  int port;
  char addr[INET6_ADDRSTRLEN];
  int quiet, verbose;
  int max_pending;
  /* acceptor thread only: the connections that have not proven the token (a reference each),
   * oldest first, with their source addresses */
  struct pend {
    struct ps_conn *c;
    struct sockaddr_storage from;
  } *pend;
  size_t npend, cappend;
  uint64_t evicted;
};

/* ---- Logging ---- */

void ps_log_stderr(void *arg, int level, const char *msg) {
  (void)arg;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  fprintf(stderr, "%s.%03ld braid-ps%s %s\n", when, ts.tv_nsec / 1000000L,
          level > PS_LOG_INFO ? " [debug]" : "", msg);
}

static void slog(struct ps_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void slog(struct ps_server *s, const char *fmt, ...) {
  if (s->quiet) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ps_log_stderr(NULL, PS_LOG_INFO, msg);
}

/* ---- I/O callbacks for conn.c ---- */

static ssize_t io_writev(struct ps_conn *c, const struct iovec *iov, int n) {
  struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
  return sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void io_want_write(struct ps_conn *c, int on) {
  struct worker *w = c->io;
  struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
  epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev); /* ENOENT once the owner let go: harmless */
}

static void io_shutdown(struct ps_conn *c) { shutdown(c->fd, SHUT_WR); }

static void io_release(struct ps_conn *c) { close(c->fd); }

static const struct ps_io_ops sock_io = {io_writev, io_want_write, io_shutdown, io_release};

/* ---- Workers ---- */

static int grow(struct ps_conn ***v, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 64;
  while (nc < need) nc *= 2;
  struct ps_conn **nv = realloc(*v, nc * sizeof *nv);
  if (!nv) return -1;
  *v = nv;
  *cap = nc;
  return 0;
}

/* The owner lets go of c: no more events, out of its list, its reference dropped. */
static void finalize(struct worker *w, struct ps_conn *c) {
  epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  for (size_t i = 0; i < w->nconns; i++) {
    if (w->conns[i] == c) {
      w->conns[i] = w->conns[--w->nconns];
      break;
    }
  }
  ps_logf(w->srv->ctx, PS_LOG_DEBUG, "connection from %s closed", c->peer);
  ps_conn_put(c);
}

static void adopt_inbox(struct worker *w) {
  uint64_t v;
  while (read(w->evfd, &v, sizeof v) > 0) {
  }
  pthread_mutex_lock(&w->inbox_mu);
  struct ps_conn **in = w->inbox;
  size_t n = w->ninbox;
  w->inbox = NULL;
  w->ninbox = w->capinbox = 0;
  pthread_mutex_unlock(&w->inbox_mu);
  for (size_t i = 0; i < n; i++) {
    struct ps_conn *c = in[i];
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (grow(&w->conns, &w->capconns, w->nconns + 1) != 0 ||
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
      ps_logf(w->srv->ctx, PS_LOG_INFO, "dropping connection from %s: %s", c->peer,
              strerror(errno));
      ps_conn_put(c);
      continue;
    }
    w->conns[w->nconns++] = c;
  }
  free(in);
}

static void read_conn(struct ps_conn *c) {
  for (int i = 0; i < READS_PER_EVENT; i++) {
    size_t len;
    void *buf = ps_conn_rbuf(c, &len);
    ssize_t r = recv(c->fd, buf, len, 0);
    if (r > 0) {
      ps_conn_received(c, (size_t)r);
      if ((size_t)r < len) return; /* drained, most likely */
      continue;
    }
    if (r == 0) {
      ps_conn_eof(c, NULL);
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      char why[96];
      snprintf(why, sizeof why, "receive failed: %s", strerror(errno));
      ps_conn_eof(c, why);
    }
    return;
  }
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct ps_server *s = w->srv;
  uint64_t last_tick = braid_now_ns();
  struct epoll_event evs[64];
  while (!atomic_load(&s->stop)) {
    int n = epoll_wait(w->epfd, evs, 64, (int)(TICK_NS / 1000000));
    for (int i = 0; i < n; i++) {
      struct ps_conn *c = evs[i].data.ptr;
      if (!c) {
        adopt_inbox(w);
        continue;
      }
      if (evs[i].events & EPOLLOUT) ps_conn_flush(c);
      if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) read_conn(c);
      if (ps_conn_done(c)) finalize(w, c);
    }
    uint64_t now = braid_now_ns();
    if (now - last_tick >= TICK_NS) {
      last_tick = now;
      for (size_t i = 0; i < w->nconns;) {
        struct ps_conn *c = w->conns[i];
        ps_conn_tick(c);
        if (ps_conn_done(c))
          finalize(w, c); /* moves the last one into slot i */
        else
          i++;
      }
    }
  }
  return NULL;
}

/* ---- Acceptor ---- */

static void tune_socket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* A short unsent queue in the kernel: RELEASE frames jump ahead of queued RESULTs in our own
   * queue (conn.c), which helps only if the kernel does not hold megabytes ahead of them. */
  int lowat = 64 << 10;
  setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
  /* A head whose machine died is noticed in about half a minute, not hours. */
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 10, intvl = 5, cnt = 3;
  unsigned user_timeout_ms = 30000;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

/* Connections from one address that may be in the handshake at once: more than any node's heads
 * connect at a time, so only a flood from one source reaches it. */
#define MAX_PENDING_PER_SOURCE 32

static bool same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return false;
  if (a->ss_family == AF_INET)
    return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
  return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                 sizeof(struct in6_addr));
}

/* Refused at once for load (a REFUSE frame with PS_FLAG_BUSY if the socket takes it: the head
 * tries again), summarised with the other strangers. */
static void refuse_busy(struct ps_server *s, int fd, const char *peer, const char *why) {
  char text[PS_MAX_TEXT];
  int n = snprintf(text, sizeof text, "%s; try again", why);
  struct ps_hdr h = {.type = PS_REFUSE, .flags = PS_FLAG_BUSY, .len = (uint32_t)n};
  uint8_t frame[PS_HDR_BYTES + PS_MAX_TEXT];
  ps_hdr_encode(&h, frame);
  memcpy(frame + PS_HDR_BYTES, text, (size_t)n);
  if (send(fd, frame, PS_HDR_BYTES + (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
  }
  close(fd);
  ps_ctx_stranger(s->ctx, peer, why);
}

/* Drops the table's entries (and references) for connections that proved the token or are
 * closing: at every accept, and at least once a second. */
static void pend_trim(struct ps_server *s) {
  size_t w = 0;
  for (size_t i = 0; i < s->npend; i++) {
    struct ps_conn *c = s->pend[i].c;
    if (atomic_load(&c->pending) && !atomic_load(&c->closing)) s->pend[w++] = s->pend[i];
    else ps_conn_put(c);
  }
  s->npend = w;
}

/* The table is full: the oldest connection still in the handshake makes room (its socket shut
 * down: its worker sees it end and closes it), so idle connections cannot keep heads out. */
static void pend_evict_oldest(struct ps_server *s) {
  if (!s->npend) return;
  struct ps_conn *c = s->pend[0].c;
  shutdown(c->fd, SHUT_RDWR); /* its fd stays open while the reference is held */
  ps_ctx_stranger(s->ctx, c->peer, "evicted: too many connections in the handshake (braid-ps --max-pending)");
  ps_conn_put(c);
  memmove(s->pend, s->pend + 1, (s->npend - 1) * sizeof *s->pend);
  s->npend--;
  s->evicted++;
}

static void accept_ready(struct ps_server *s) {
  for (int k = 0; k < 256; k++) { /* bounded per wake-up; epoll says when there are more */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(&ss, 0, sizeof ss);
    int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        slog(s, "accept: %s (connection left waiting)", strerror(errno));
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
      }
      return;
    }
    tune_socket(fd);
    char peer[64];
    braid_sockaddr_str((const struct sockaddr *)&ss, peer, sizeof peer);
    pend_trim(s);
    int same = 0;
    for (size_t i = 0; i < s->npend; i++) same += same_host(&s->pend[i].from, &ss);
    if (same >= MAX_PENDING_PER_SOURCE) {
      refuse_busy(s, fd, peer, "too many connections from that address in the handshake");
      continue;
    }
    if (ps_ctx_pending(s->ctx) >= s->max_pending) pend_evict_oldest(s); /* one out for one in */
    if (s->npend == s->cappend) {
      size_t cap = s->cappend ? 2 * s->cappend : 64;
      struct pend *p = realloc(s->pend, cap * sizeof *p);
      if (!p) {
        refuse_busy(s, fd, peer, "out of memory");
        continue;
      }
      s->pend = p, s->cappend = cap;
    }
    struct worker *w = &s->workers[s->next_worker++ % (unsigned)s->nworkers];
    struct ps_conn *c = ps_conn_new(s->ctx, fd, w, peer);
    if (!c) {
      close(fd);
      continue;
    }
    ps_conn_get(c); /* the table's */
    s->pend[s->npend++] = (struct pend){c, ss};
    pthread_mutex_lock(&w->inbox_mu);
    int ok = grow(&w->inbox, &w->capinbox, w->ninbox + 1) == 0;
    if (ok) w->inbox[w->ninbox++] = c;
    pthread_mutex_unlock(&w->inbox_mu);
    if (!ok) {
      s->npend--;
      ps_conn_put(c); /* the table's */
      ps_conn_put(c);
      continue;
    }
    uint64_t one = 1;
    if (write(w->evfd, &one, sizeof one) < 0) { /* cannot fail short of a bug; counted anyway */
    }
  }
}

static void *acceptor_main(void *arg) {
  struct ps_server *s = arg;
  struct epoll_event evs[2];
  while (!atomic_load(&s->stop)) {
    int n = epoll_wait(s->epfd, evs, 2, 1000);
    for (int i = 0; i < n; i++)
      if (evs[i].data.fd == s->lfd) accept_ready(s);
    pend_trim(s);
    ps_ctx_strangers_flush(s->ctx);
  }
  return NULL;
}

/* ---- Start / stop ---- */

/* "ADDR:PORT", "[v6]:PORT", "*:PORT" -> a sockaddr (for "*": the IPv6 wildcard, *wild set). */
static int parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *sl, int *wild,
                        char *err, size_t errlen) {
  char host[INET6_ADDRSTRLEN + 2];
  const char *colon;
  const char *p = spec;
  if (!spec || !*spec) return snprintf(err, errlen, "no listen address (ADDR:PORT)"), -1;
  if (*p == '[') {
    const char *close = strchr(p, ']');
    if (!close || close[1] != ':') return snprintf(err, errlen, "bad listen address '%s' (use [IPv6]:PORT)", spec), -1;
    if ((size_t)(close - p - 1) >= sizeof host) return snprintf(err, errlen, "bad listen address '%s'", spec), -1;
    memcpy(host, p + 1, (size_t)(close - p - 1));
    host[close - p - 1] = 0;
    colon = close + 1;
  } else {
    colon = strrchr(p, ':');
    if (!colon) return snprintf(err, errlen, "bad listen address '%s' (use ADDR:PORT)", spec), -1;
    if ((size_t)(colon - p) >= sizeof host) return snprintf(err, errlen, "bad listen address '%s'", spec), -1;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = 0;
  }
  char *end;
  errno = 0;
  long port = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || errno || port < 0 || port > 65535)
    return snprintf(err, errlen, "bad port in listen address '%s' (0..65535)", spec), -1;
  memset(ss, 0, sizeof *ss);
  *wild = 0;
  struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
  if (!strcmp(host, "*") || !host[0]) {
    *wild = 1;
    s6->sin6_family = AF_INET6;
    s6->sin6_addr = in6addr_any;
    s6->sin6_port = htons((uint16_t)port);
    *sl = sizeof *s6;
  } else if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    *sl = sizeof *s4;
  } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    *sl = sizeof *s6;
  } else {
    return snprintf(err, errlen, "'%s' is not an IPv4 or IPv6 address (nor '*')", host), -1;
  }
  return 0;
}

static int open_listener(struct ps_server *s, const char *spec, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  socklen_t sl;
  int wild;
  if (parse_listen(spec, &ss, &sl, &wild, err, errlen) != 0) return -1;
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 && wild && (errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT)) {
    uint16_t port = ((struct sockaddr_in6 *)&ss)->sin6_port; /* no IPv6 here: IPv4 wildcard */
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    memset(&ss, 0, sizeof ss);
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(INADDR_ANY);
    s4->sin_port = port;
    sl = sizeof *s4;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  if (fd < 0) return snprintf(err, errlen, "socket: %s", strerror(errno)), -1;
  int one = 1, zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (wild && ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 1024) != 0) {
    snprintf(err, errlen, "cannot listen on %s: %s", spec, strerror(errno));
    close(fd);
    return -1;
  }
  struct sockaddr_storage bound;
  socklen_t bl = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &bl);
  if (bound.ss_family == AF_INET) {
    struct sockaddr_in *b4 = (struct sockaddr_in *)&bound;
    inet_ntop(AF_INET, &b4->sin_addr, s->addr, sizeof s->addr);
    s->port = ntohs(b4->sin_port);
  } else {
    struct sockaddr_in6 *b6 = (struct sockaddr_in6 *)&bound;
    inet_ntop(AF_INET6, &b6->sin6_addr, s->addr, sizeof s->addr);
    s->port = ntohs(b6->sin6_port);
  }
  s->lfd = fd;
  return 0;
}

static uint64_t secs_to_ns(double s) { return s > 0 ? (uint64_t)(s * 1e9) : 0; }

static int default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 4 ? 4 : (int)n;
}

struct ps_server *ps_server_start(const struct ps_server_opts *o, char *err, size_t errlen) {
  if (!o->token || !o->token[0]) return snprintf(err, errlen, "no token"), NULL;
  if (ps_auth_init() != 0)
    return snprintf(err, errlen, "no authentication: %s (apt-get install libsodium23)", ps_auth_error()), NULL;
  int nthreads = o->threads > 0 ? o->threads : default_threads();
  if (nthreads > MAX_THREADS) return snprintf(err, errlen, "at most %d threads", MAX_THREADS), NULL;
  struct ps_server *s = calloc(1, sizeof *s);
  if (!s) return snprintf(err, errlen, "out of memory"), NULL;
  s->lfd = s->epfd = s->evfd = -1;
  s->quiet = o->quiet;
  s->verbose = o->verbose;
  s->max_pending = o->max_pending > 0 ? o->max_pending : DEFAULT_MAX_PENDING;
  atomic_init(&s->stop, 0);
  struct ps_ctx_opts co = {
      .token = o->token,
      .max_memory = o->max_memory,
      .join_timeout_ns = secs_to_ns(o->join_timeout_s),
      .handshake_timeout_ns = secs_to_ns(o->handshake_timeout_s),
      .require_frame_auth = o->require_frame_auth,
      .linger_ns = secs_to_ns(o->linger_s),
      .io = &sock_io,
      .log = o->quiet ? NULL : ps_log_stderr,
      .verbose = o->verbose,
  };
  s->ctx = ps_ctx_create(&co);
  if (!s->ctx) {
    snprintf(err, errlen, "cannot initialise (out of memory)");
    free(s);
    return NULL;
  }
  if (open_listener(s, o->listen, err, errlen) != 0) goto fail;
  s->workers = calloc((size_t)nthreads, sizeof *s->workers);
  if (!s->workers) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  s->nworkers = nthreads;
  for (int i = 0; i < nthreads; i++) {
    struct worker *w = &s->workers[i];
    w->srv = s;
    w->epfd = w->evfd = -1;
    pthread_mutex_init(&w->inbox_mu, NULL);
  }
  for (int i = 0; i < nthreads; i++) {
    struct worker *w = &s->workers[i];
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (w->epfd < 0 || w->evfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &ev) != 0) {
      snprintf(err, errlen, "epoll: %s", strerror(errno));
      goto fail;
    }
  }
  s->epfd = epoll_create1(EPOLL_CLOEXEC);
  s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct epoll_event lev = {.events = EPOLLIN, .data.fd = s->lfd};
  struct epoll_event sev = {.events = EPOLLIN, .data.fd = s->evfd};
  if (s->epfd < 0 || s->evfd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &lev) != 0 ||
      epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &sev) != 0) {
    snprintf(err, errlen, "epoll: %s", strerror(errno));
    goto fail;
  }
  for (int i = 0; i < nthreads; i++) {
    if (pthread_create(&s->workers[i].th, NULL, worker_main, &s->workers[i]) != 0) {
      snprintf(err, errlen, "cannot start worker threads");
      goto fail;
    }
    s->workers[i].started = 1;
  }
  if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
    snprintf(err, errlen, "cannot start the acceptor thread");
    goto fail;
  }
  s->acceptor_started = 1;
  return s;
fail:
  ps_server_stop(s);
  return NULL;
}

int ps_server_port(const struct ps_server *s) { return s->port; }
const char *ps_server_address(const struct ps_server *s) { return s->addr; }
int ps_server_threads(const struct ps_server *s) { return s->nworkers; }
uint64_t ps_server_memory(struct ps_server *s) { return ps_ctx_memory(s->ctx); }
int ps_server_sessions(struct ps_server *s) { return ps_ctx_sessions(s->ctx); }
int ps_server_pending(struct ps_server *s) { return ps_ctx_pending(s->ctx); }

static void wake(int evfd) {
  uint64_t one = 1;
  if (evfd >= 0 && write(evfd, &one, sizeof one) < 0) {
  }
}

void ps_server_stop(struct ps_server *s) {
  if (!s) return;
  atomic_store(&s->stop, 1);
  wake(s->evfd);
  if (s->acceptor_started) pthread_join(s->acceptor, NULL);
  for (int i = 0; i < s->nworkers; i++) {
    wake(s->workers[i].evfd);
    if (s->workers[i].started) pthread_join(s->workers[i].th, NULL);
  }
  /* Every thread is gone: this one owns every connection now. */
  int nsessions = ps_ctx_sessions(s->ctx);
  ps_ctx_close_all(s->ctx, "server shutting down");
  for (int i = 0; i < s->nworkers; i++) {
    struct worker *w = &s->workers[i];
    for (size_t j = 0; j < w->ninbox; j++) ps_conn_put(w->inbox[j]);
    for (size_t j = 0; j < w->nconns; j++) {
      ps_conn_close(w->conns[j], 0, 0, 0, NULL);
      ps_conn_put(w->conns[j]);
    }
    free(w->inbox);
    free(w->conns);
    if (w->epfd >= 0) close(w->epfd);
    if (w->evfd >= 0) close(w->evfd);
    pthread_mutex_destroy(&w->inbox_mu);
  }
  for (size_t i = 0; i < s->npend; i++) ps_conn_put(s->pend[i].c);
  free(s->pend);
  free(s->workers);
  if (s->lfd >= 0) close(s->lfd);
  if (s->epfd >= 0) close(s->epfd);
  if (s->evfd >= 0) close(s->evfd);
  if (nsessions) slog(s, "stopped (%d session%s closed)", nsessions, nsessions == 1 ? "" : "s");
  ps_ctx_destroy(s->ctx);
  free(s);
}
