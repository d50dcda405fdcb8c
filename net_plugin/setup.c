/* Connection set-up: listen, connect and accept, all non-blocking and polled by NCCL.
 *
 * The receiver listens and puts its address and a random secret in NCCL's handle.  The sender
 * opens BRAID_NSTREAMS TCP streams to it and starts each with a hello carrying the secret and a
 * connection id.  accept() groups streams by connection id and hands out the connection once
 * all of them have arrived; a stream without the right secret is logged and dropped, never
 * accepted.  connect() keeps its state machine behind a pointer in the handle's stage bytes
 * (NCCL calls it again with the same handle until it returns a comm). */
#include "setup.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm.h"
#include "log.h"
#include "param.h"
#include "sock.h"

#define LISTEN_PENDING 64 /* streams waiting for their hello */
#define LISTEN_PARTIAL 8  /* connections with some streams still to come */

struct listen_pending {
  int fd;
  uint8_t hello[BRAID_HELLO_BYTES];
  size_t got;
  uint64_t deadline_ns;
  char peer[64];
};

struct listen_partial {
  uint64_t conn_id;
  int nstreams, count;
  int fds[BRAID_MAX_STREAMS];
  char peer[64];
};

struct braid_listen {
  uint8_t kind;
  int dev;
  int fd;
  uint8_t secret[BRAID_SECRET_BYTES];
  struct listen_pending pending[LISTEN_PENDING];
  int npending;
  struct listen_partial partial[LISTEN_PARTIAL];
  int npartial;
};

ncclResult_t braid_setup_listen(const struct braid_iface *ifc, int dev, void *handle,
                                void **listen_comm) {
  *listen_comm = NULL;
  struct braid_listen *l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  l->kind = BRAID_COMM_LISTEN;
  l->dev = dev;
  l->fd = braid_sock_open(ifc);
  if (l->fd < 0) return free(l), ncclSystemError;
  if (listen(l->fd, 128) != 0) {
    BRAID_WARN("listen on %s failed: %s", ifc->name, strerror(errno));
    close(l->fd);
    free(l);
    return ncclSystemError;
  }
  struct braid_handle h = {0};
  socklen_t len = sizeof h.addr;
  getsockname(l->fd, (struct sockaddr *)&h.addr, &len);
  braid_random(l->secret, sizeof l->secret);
  memcpy(h.secret, l->secret, sizeof h.secret);
  braid_random(&h.listen_id, sizeof h.listen_id);
  braid_handle_encode(&h, handle);
  char a[64];
  BRAID_INFO(NCCL_NET, "listening on %s (device %d, %s)",
             braid_sockaddr_str((struct sockaddr *)&h.addr, a, sizeof a), dev, ifc->name);
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
  for (;;) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int fd = accept4(l->fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    if (l->npending == LISTEN_PENDING) listen_drop(l, 0, "too many connections without a hello");
    struct listen_pending *p = &l->pending[l->npending++];
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->deadline_ns = braid_now_ns() + (uint64_t)braid_param_int(BRAID_P_TIMEOUT_MS) * 1000000ull;
    braid_sockaddr_str((struct sockaddr *)&sa, p->peer, sizeof p->peer);
  }
}

static int secret_equal(const uint8_t *a, const uint8_t *b) {
  uint8_t d = 0;
  for (int i = 0; i < BRAID_SECRET_BYTES; i++) d |= a[i] ^ b[i];
  return d == 0;
}

/* Files a stream with a verified hello under its connection; returns the partial entry. */
static struct listen_partial *listen_file(struct braid_listen *l, struct listen_pending *p,
                                          const struct braid_hello *h) {
  struct listen_partial *c = NULL;
  for (int i = 0; i < l->npartial; i++)
    if (l->partial[i].conn_id == h->conn_id) c = &l->partial[i];
  if (!c) {
    if (l->npartial == LISTEN_PARTIAL) return NULL;
    c = &l->partial[l->npartial++];
    memset(c, 0, sizeof *c);
    c->conn_id = h->conn_id;
    c->nstreams = h->nstreams;
    for (int i = 0; i < BRAID_MAX_STREAMS; i++) c->fds[i] = -1;
    memcpy(c->peer, p->peer, sizeof c->peer);
  }
  if (c->nstreams != h->nstreams || c->fds[h->stream] >= 0) return NULL;
  c->fds[h->stream] = p->fd;
  c->count++;
  return c;
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
    struct listen_pending *p = &l->pending[i];
    ssize_t n = recv(p->fd, p->hello + p->got, BRAID_HELLO_BYTES - p->got, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      listen_drop(l, i--, "closed before completing its hello");
      continue;
    }
    if (n > 0) p->got += (size_t)n;
    if (p->got < BRAID_HELLO_BYTES) {
      if (now > p->deadline_ns) listen_drop(l, i--, "sent no hello in time (BRAID_TIMEOUT_MS)");
      continue;
    }
    struct braid_hello h;
    char why[128];
    if (braid_hello_decode(p->hello, &h, why, sizeof why) != 0) {
      listen_drop(l, i--, why);
      continue;
    }
    if (!secret_equal(h.secret, l->secret)) {
      listen_drop(l, i--, "wrong secret (a stray or misdirected connection)");
      continue;
    }
    struct listen_partial *c = listen_file(l, p, &h);
    if (!c) {
      listen_drop(l, i--, "inconsistent stream numbering");
      continue;
    }
    l->pending[i--] = l->pending[--l->npending];
    if (c->count < c->nstreams) continue;

    struct braid_comm *rc = braid_comm_new(BRAID_COMM_RECV, l->dev, c->nstreams);
    if (!rc) return ncclSystemError;
    memcpy(rc->peer, c->peer, sizeof rc->peer);
    for (int s = 0; s < c->nstreams; s++) {
      rc->streams[s].fd = c->fds[s];
      braid_sock_tune(c->fds[s]);
    }
    *c = l->partial[--l->npartial];
    BRAID_INFO(NCCL_NET, "accepted connection from %s on device %d (%d streams)", rc->peer, l->dev,
               rc->nstreams);
    *recv_comm = rc;
    return ncclSuccess;
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
  for (int i = 0; i < l->npending; i++) close(l->pending[i].fd);
  for (int i = 0; i < l->npartial; i++)
    for (int s = 0; s < BRAID_MAX_STREAMS; s++)
      if (l->partial[i].fds[s] >= 0) close(l->partial[i].fds[s]);
  close(l->fd);
  l->kind = 0;
  free(l);
  return ncclSuccess;
}

/* ---------- connect ---------- */

enum { ST_IDLE, ST_CONNECTING, ST_HELLO, ST_DONE };

struct braid_connect {
  struct braid_connect *next; /* in the list of unfinished connects */
  void *owner;                /* the context that started it, for finalize */
  const struct braid_iface *ifc;
  int dev, nstreams;
  struct braid_handle peer;
  char peer_str[64];
  uint64_t conn_id, deadline_ns, retry_at_ns;
  int fd[BRAID_MAX_STREAMS], state[BRAID_MAX_STREAMS];
  uint8_t hello[BRAID_MAX_STREAMS][BRAID_HELLO_BYTES];
  size_t hello_sent[BRAID_MAX_STREAMS];
};

/* Unfinished connects, so a finalize or unload frees what NCCL abandoned mid-connect. */
static pthread_mutex_t connect_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_connect *connect_list;
static uint64_t connect_cookie;

struct connect_stage {
  uint64_t check, ptr;
};

static void connect_free(struct braid_connect *k) {
  pthread_mutex_lock(&connect_lock);
  for (struct braid_connect **p = &connect_list; *p; p = &(*p)->next)
    if (*p == k) {
      *p = k->next;
      break;
    }
  pthread_mutex_unlock(&connect_lock);
  for (int s = 0; s < k->nstreams; s++)
    if (k->fd[s] >= 0) close(k->fd[s]);
  free(k);
}

void braid_setup_abandon(void *owner) {
  for (;;) {
    pthread_mutex_lock(&connect_lock);
    struct braid_connect *k = connect_list;
    while (k && owner && k->owner != owner) k = k->next;
    pthread_mutex_unlock(&connect_lock);
    if (!k) return;
    connect_free(k);
  }
}

static struct braid_connect *connect_from_stage(void *handle) {
  struct connect_stage st;
  memcpy(&st, (uint8_t *)handle + BRAID_HANDLE_STAGE_OFF, sizeof st);
  if (st.ptr == 0 || (st.ptr ^ connect_cookie) != st.check) return NULL;
  struct braid_connect *k = (struct braid_connect *)(uintptr_t)st.ptr;
  pthread_mutex_lock(&connect_lock);
  struct braid_connect *it = connect_list;
  while (it && it != k) it = it->next;
  pthread_mutex_unlock(&connect_lock);
  return it;
}

static void connect_set_stage(void *handle, struct braid_connect *k) {
  struct connect_stage st = {0, 0};
  if (k) st.ptr = (uint64_t)(uintptr_t)k, st.check = st.ptr ^ connect_cookie;
  memcpy((uint8_t *)handle + BRAID_HANDLE_STAGE_OFF, &st, sizeof st);
}

static ncclResult_t connect_start(void *owner, const struct braid_iface *ifc, int dev,
                                  void *handle, struct braid_connect **out) {
  struct braid_handle h;
  char why[160];
  if (braid_handle_decode(handle, &h, why, sizeof why) != 0) {
    BRAID_WARN("connect on device %d: malformed handle: %s", dev, why);
    return ncclInvalidArgument;
  }
  if (h.addr.ss_family != ifc->addr.ss_family) {
    BRAID_WARN("connect on device %d (%s): peer address family differs from the device's", dev,
               ifc->name);
    return ncclInvalidUsage;
  }
  struct braid_connect *k = calloc(1, sizeof *k);
  if (!k) return ncclSystemError;
  k->owner = owner;
  k->ifc = ifc;
  k->dev = dev;
  k->peer = h;
  k->nstreams = (int)braid_param_int(BRAID_P_NSTREAMS);
  braid_sockaddr_str((struct sockaddr *)&h.addr, k->peer_str, sizeof k->peer_str);
  braid_random(&k->conn_id, sizeof k->conn_id);
  k->deadline_ns = braid_now_ns() + (uint64_t)braid_param_int(BRAID_P_TIMEOUT_MS) * 1000000ull;
  for (int s = 0; s < k->nstreams; s++) {
    k->fd[s] = -1;
    struct braid_hello hello = {.conn_id = k->conn_id, .stream = (uint16_t)s,
                                .nstreams = (uint16_t)k->nstreams};
    memcpy(hello.secret, h.secret, sizeof hello.secret);
    braid_hello_encode(&hello, k->hello[s]);
  }
  pthread_mutex_lock(&connect_lock);
  while (!connect_cookie) braid_random(&connect_cookie, sizeof connect_cookie);
  k->next = connect_list;
  connect_list = k;
  pthread_mutex_unlock(&connect_lock);
  *out = k;
  return ncclSuccess;
}

/* Advances stream s; returns 0 (in progress or done) or an error. */
static ncclResult_t connect_stream(struct braid_connect *k, int s, uint64_t now) {
  switch (k->state[s]) {
    case ST_IDLE: {
      if (now < k->retry_at_ns) return ncclSuccess;
      k->fd[s] = braid_sock_open(k->ifc);
      if (k->fd[s] < 0) return ncclSystemError;
      socklen_t len = k->peer.addr.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                         : sizeof(struct sockaddr_in6);
      if (connect(k->fd[s], (struct sockaddr *)&k->peer.addr, len) == 0 || errno == EINPROGRESS) {
        k->state[s] = ST_CONNECTING;
        return ncclSuccess;
      }
      break;
    }
    case ST_CONNECTING: {
      struct pollfd pfd = {.fd = k->fd[s], .events = POLLOUT};
      if (poll(&pfd, 1, 0) <= 0) return ncclSuccess;
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(k->fd[s], SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) {
        braid_sock_tune(k->fd[s]);
        k->state[s] = ST_HELLO;
        return connect_stream(k, s, now);
      }
      errno = err;
      break;
    }
    case ST_HELLO: {
      ssize_t n = send(k->fd[s], k->hello[s] + k->hello_sent[s],
                       BRAID_HELLO_BYTES - k->hello_sent[s], MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) k->hello_sent[s] += (size_t)n;
      else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
      if (k->hello_sent[s] == BRAID_HELLO_BYTES) k->state[s] = ST_DONE;
      return ncclSuccess;
    }
    default:
      return ncclSuccess;
  }
  /* Connection failed.  A refused or timed-out SYN is retried (a listener's backlog can
   * overflow when thousands of ranks connect at once) until BRAID_TIMEOUT_MS. */
  int err = errno;
  close(k->fd[s]);
  k->fd[s] = -1;
  k->state[s] = ST_IDLE;
  k->hello_sent[s] = 0;
  bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN || err == ECONNRESET;
  if (retry && now < k->deadline_ns) {
    k->retry_at_ns = now + 10000000ull;
    return ncclSuccess;
  }
  BRAID_WARN("connect to %s on device %d (%s) failed: %s", k->peer_str, k->dev, k->ifc->name,
             strerror(err));
  return ncclRemoteError;
}

ncclResult_t braid_setup_connect(void *owner, const struct braid_iface *ifc, int dev, void *handle,
                                 void **send_comm) {
  *send_comm = NULL;
  struct braid_connect *k = connect_from_stage(handle);
  if (!k) {
    ncclResult_t rc = connect_start(owner, ifc, dev, handle, &k);
    if (rc) return rc;
    connect_set_stage(handle, k);
  }
  uint64_t now = braid_now_ns();
  int done = 0;
  for (int s = 0; s < k->nstreams; s++) {
    ncclResult_t rc = connect_stream(k, s, now);
    if (rc) {
      connect_set_stage(handle, NULL);
      connect_free(k);
      return rc;
    }
    done += k->state[s] == ST_DONE;
  }
  if (done < k->nstreams) return ncclSuccess;

  struct braid_comm *c = braid_comm_new(BRAID_COMM_SEND, dev, k->nstreams);
  if (!c) return ncclSystemError;
  memcpy(c->peer, k->peer_str, sizeof c->peer);
  for (int s = 0; s < k->nstreams; s++) c->streams[s].fd = k->fd[s], k->fd[s] = -1;
  connect_set_stage(handle, NULL);
  connect_free(k);
  BRAID_INFO(NCCL_NET, "connected to %s on device %d (%s, %d streams)", c->peer, dev, ifc->name,
             c->nstreams);
  *send_comm = c;
  return ncclSuccess;
}
