/* The sending side of connection set-up: connect(), non-blocking and polled by NCCL with the same
 * handle until it returns a comm.
 *
 * Stream 0 connects from the device's rail 0 to the address in the handle and answers the
 * listener's challenge with its hello (hs.h: a proof of the handle's secret, never the secret);
 * the listener's reply proves it knows the secret too and carries its rail list.  Every stream
 * waits for its reply before it counts as connected.  The connection then uses min(our rails, its rails)
 * rails, BRAID_NSTREAMS streams on each, rail r to rail r (the same rail index on both ends, as
 * rail-only fabrics require).  The state machine lives behind a pointer in the handle's stage
 * bytes, checked against a process cookie so a garbled handle is never taken for a pointer. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
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
#include "transport/socket/sock_helper.h"

#define MAX_STREAMS (BRAID_MAX_STREAMS * BRAID_MAX_RAILS)

enum { ST_IDLE, ST_CONNECTING, ST_CHAL, ST_HELLO, ST_REPLY, ST_LIST, ST_DONE, ST_FAILED };

#define RAIL_WAIT_NS 2000000000ull /* a rail past stream 0 that cannot connect this long is left
                                    * out; the connection starts without it and it rejoins later */

struct braid_connect {
  struct braid_connect *next; /* in the list of unfinished connects */
  void *owner;                /* the context that started it, for finalize */
  const struct braid_device *device;
  int dev, per_rail, nrails, nprimary, nstreams; /* known once the rail list arrived */
  struct braid_handle peer;
  bool ofi;   /* this connection's data goes over libfabric */
  bool verbs; /* ... over verbs */
  struct braid_tclass cls; /* the connection's traffic class, both ends (transport/tclass.h) */
  int caps, mode; /* this node's BRAID_CAPS_*, the connection's BRAID_AUTH_* */
  struct braid_raillist rails;
  uint8_t list[BRAID_RAILLIST_BYTES(BRAID_RAILLIST_MAX)];
  size_t list_got;
  char peer_str[64];
  uint64_t conn_id, deadline_ns, rail_deadline_ns, retry_at_ns;
  int stream0_resets; /* times the listener closed stream 0 before answering */
  int fd[MAX_STREAMS], state[MAX_STREAMS];
  struct braid_hs_conn hs[MAX_STREAMS];
};

/* Unfinished connects, so a finalize or unload frees what NCCL abandoned mid-connect. */
static pthread_mutex_t connect_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_connect *connect_list;
static _Atomic uint64_t connect_cookie; /* read without connect_lock (connect_from_stage) */

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
  for (int s = 0; s < MAX_STREAMS; s++)
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

static ncclResult_t connect_start(void *owner, int traffic_class, const struct braid_device *device,
                                  int dev, void *handle, struct braid_connect **out) {
  struct braid_handle h;
  char why[160];
  if (braid_handle_decode(handle, &h, why, sizeof why) != 0) {
    BRAID_WARN("connect on device %d: malformed handle: %s", dev, why);
    return ncclInvalidArgument;
  }
  uint64_t fp = braid_tuner_fingerprint();
  if (h.tuner_fp != fp && braid_param_int(BRAID_P_TUNER_CHECK)) {
    char peer[64];
    BRAID_WARN("connect on device %d to %s: the tuner's inputs differ between this rank "
               "(fingerprint %016llx%s) and the peer (%016llx%s): ranks would choose different "
               "algorithms and hang. Give every rank the same NCCL_TUNER_PLUGIN, BRAID_TUNER_MODE "
               "and BRAID_TUNER_PIN, and the NCCL_TUNER_CONFIG_FILE, BRAID_TUNER_CALIB and "
               "BRAID_TUNER_HEALTH contents that pin names (an earlier WARN says why a rank's files "
               "are not the pinned ones); BRAID_TUNER_CHECK=0 skips this check",
               dev, braid_sockaddr_str((struct sockaddr *)&h.addr, peer, sizeof peer),
               (unsigned long long)fp, fp == BRAID_TUNER_FP_OFF ? ": NCCL's choice" : ": its files",
               (unsigned long long)h.tuner_fp,
               h.tuner_fp == BRAID_TUNER_FP_OFF ? ": NCCL's choice" : ": its files");
    return ncclInvalidUsage;
  }
  /* The transport of this connection: the same on both ends.  Where they differ, TCP sockets,
   * unless a side was told BRAID_TRANSPORT=ofi or verbs. */
  enum braid_transport mine = braid_transport_kind();
  enum braid_transport theirs = h.transport & BRAID_HANDLE_VERBS ? BRAID_TRANSPORT_VERBS
                                : h.transport & BRAID_HANDLE_OFI ? BRAID_TRANSPORT_OFI
                                                                 : BRAID_TRANSPORT_SOCKET;
  if (mine != theirs && ((mine != BRAID_TRANSPORT_SOCKET && braid_transport_forced()) ||
                         (theirs != BRAID_TRANSPORT_SOCKET && (h.transport & BRAID_HANDLE_FORCED)))) {
    char peer[64];
    BRAID_WARN("connect on device %d to %s: this rank uses %s, the peer %s (one of them set by "
               "BRAID_TRANSPORT): set BRAID_TRANSPORT alike on every node", dev,
               braid_sockaddr_str((struct sockaddr *)&h.addr, peer, sizeof peer),
               braid_transport_word(mine), braid_transport_word(theirs));
    return ncclInvalidUsage;
  }
  if (h.addr.ss_family != device->rail[0]->addr.ss_family) {
    BRAID_WARN("connect on device %d (%s): the peer's address family differs from the device's",
               dev, device->name);
    return ncclInvalidUsage;
  }
  int caps = braid_hs_caps();
  if (caps < 0) return ncclInvalidUsage;
  int mode = braid_hs_mode(caps, h.auth_caps);
  char peer[64];
  braid_sockaddr_str((struct sockaddr *)&h.addr, peer, sizeof peer);
  if (mode == BRAID_AUTH_NONE) /* the listener is told (its reply ends the connect) and logs it */
    BRAID_WARN("connect on device %d to %s: authentication modes disagree: this node %s, the "
               "peer %s; set BRAID_NET_AUTH alike and install libsodium23 on every node", dev,
               peer, caps & BRAID_CAPS_MAC ? "requires authentication (BRAID_NET_AUTH=required)"
               : "cannot authenticate (no libsodium, or BRAID_NET_AUTH=plain)",
               h.auth_caps & BRAID_CAPS_MAC ? "requires it" : "cannot");
  static atomic_flag plain_said = ATOMIC_FLAG_INIT;
  if (mode == BRAID_AUTH_PLAIN && !atomic_flag_test_and_set(&plain_said)) /* seen without NCCL_DEBUG */
    BRAID_WARN_LOUD("connect on device %d to %s: the hello carries the connection secret in clear "
                    "(%s has no libsodium, or BRAID_NET_AUTH=plain): anyone who reads the data "
                    "network can attach streams; install libsodium23 on every node and unset "
                    "BRAID_NET_AUTH (required is the default)", dev, peer,
                    caps & BRAID_CAPS_MAC ? "the peer" : "this node");
  struct braid_connect *k = calloc(1, sizeof *k);
  if (!k) return ncclSystemError;
  k->caps = caps, k->mode = mode;
  k->owner = owner;
  k->device = device;
  k->dev = dev;
  k->peer = h;
  k->ofi = mine == theirs && mine == BRAID_TRANSPORT_OFI;
  k->verbs = mine == theirs && mine == BRAID_TRANSPORT_VERBS;
  enum braid_transport used = k->ofi     ? BRAID_TRANSPORT_OFI
                              : k->verbs ? BRAID_TRANSPORT_VERBS
                                         : BRAID_TRANSPORT_SOCKET;
  k->cls = braid_tclass_of(traffic_class, used); /* the accepting end takes it from the hello */
  braid_tclass_announce(&k->cls, used, true);
  k->per_rail = k->verbs ? 1 : (int)braid_param_int(BRAID_P_NSTREAMS); /* verbs stripes itself */
  if (!k->ofi && !k->verbs && !braid_param_from(BRAID_P_NSTREAMS)) {
    /* Sockets with helper threads: a stream for each (a helper owns whole sockets).  Decided
     * here: stream 0's hello carries it. */
    int rails = device->nrails > 0 ? device->nrails : 1;
    double bps = device->speed_mbps > 0 ? device->speed_mbps * 125000.0 : rails * 1.25e9;
    int threads = braid_sock_threads(bps);
    if (threads > rails) k->per_rail = (threads + rails - 1) / rails;
  }
  k->nstreams = 1; /* stream 0 until the rail list says more */
  braid_sockaddr_str((struct sockaddr *)&h.addr, k->peer_str, sizeof k->peer_str);
  if (braid_random(&k->conn_id, sizeof k->conn_id) != 0) {
    BRAID_WARN("connect on device %d to %s failed: no randomness", dev, k->peer_str);
    free(k);
    return ncclSystemError;
  }
  k->deadline_ns = braid_now_ns() + (uint64_t)braid_param_int(BRAID_P_TIMEOUT_MS) * 1000000ull;
  k->rail_deadline_ns = braid_now_ns() + RAIL_WAIT_NS;
  for (int s = 0; s < MAX_STREAMS; s++) k->fd[s] = -1;
  pthread_mutex_lock(&connect_lock);
  if (!connect_cookie) {
    uint64_t cookie = 0;
    if (braid_random(&cookie, sizeof cookie) != 0) {
      pthread_mutex_unlock(&connect_lock);
      free(k);
      return ncclSystemError;
    }
    connect_cookie = cookie | 1; /* never 0; written once */
  }
  k->next = connect_list;
  connect_list = k;
  pthread_mutex_unlock(&connect_lock);
  *out = k;
  return ncclSuccess;
}

/* Rail r: the device's rail r, or past its rails the backup (the peer's is its list's last). */
static const struct sockaddr_storage *connect_target(const struct braid_connect *k, int s) {
  if (s == 0) return &k->peer.addr;
  int r = s % k->nrails;
  return r < k->nprimary ? &k->rails.addr[r] : &k->rails.addr[k->rails.nrails - 1];
}

static const struct braid_iface *connect_local(const struct braid_connect *k, int s) {
  int r = s == 0 ? 0 : s % k->nrails;
  return r < k->nprimary || s == 0 ? k->device->rail[r] : k->device->backup;
}

/* The hello answering stream s's challenge. */
static ncclResult_t connect_make_hello(struct braid_connect *k, int s) {
  struct braid_hello hello = {.conn_id = k->conn_id, .stream = (uint16_t)s,
                              .per_rail = (uint16_t)k->per_rail,
                              .nrails = (uint16_t)(k->device->nrails + (k->device->backup != NULL)),
                              .nbackup = (uint16_t)(k->device->backup != NULL)};
  if (k->ofi) hello.flags |= BRAID_HELLO_OFI;
  if (k->verbs) hello.flags |= BRAID_HELLO_VERBS;
  if (k->cls.tc >= 0) hello.flags |= BRAID_HELLO_TC, hello.tc = (uint8_t)k->cls.tc;
  if (k->cls.sl >= 0) hello.flags |= BRAID_HELLO_SL, hello.sl = (uint8_t)k->cls.sl;
  char why[160];
  if (braid_hs_hello(k->peer.secret, k->mode, k->caps, k->hs[s].chal, &hello, k->hs[s].hello, why,
                     sizeof why) != 0)
    return BRAID_WARN("connect to %s (stream %d): %s", k->peer_str, s, why), ncclRemoteError;
  k->hs[s].auth = k->mode;
  return ncclSuccess;
}

/* The listener's reply on stream s (with the rail list on stream 0) checked.  A stream past 0
 * that the listener no longer expects (it arrived after the connection started without it) is
 * left out, to rejoin later. */
static ncclResult_t connect_check_reply(struct braid_connect *k, int s) {
  char why[256];
  int rc = braid_hs_reply_check(k->peer.secret, &k->hs[s], s == 0 ? k->list : NULL,
                                s == 0 ? k->list_got : 0, why, sizeof why);
  if (rc == 0) return ncclSuccess;
  if (s > 0 && rc == BRAID_REPLY_STREAM) {
    BRAID_WARN("connect to %s on device %d (stream %d): %s; starting without it, it rejoins when "
               "it can", k->peer_str, k->dev, s, why);
    close(k->fd[s]);
    k->fd[s] = -1;
    k->state[s] = ST_FAILED;
    return ncclSuccess;
  }
  BRAID_WARN("connect to %s on device %d (stream %d) failed: %s", k->peer_str, k->dev, s, why);
  return rc == BRAID_REPLY_AUTH || rc == BRAID_REPLY_TRANSPORT ? ncclInvalidUsage : ncclRemoteError;
}

/* Stream 0 reads the listener's rail list; then every other stream can start. */
static ncclResult_t connect_read_list(struct braid_connect *k) {
  size_t need = BRAID_RAILLIST_HDR;
  char why[128];
  if (k->list_got >= BRAID_RAILLIST_HDR) {
    int len = braid_raillist_len(k->list, why, sizeof why);
    if (len < 0) return BRAID_WARN("connect to %s: %s", k->peer_str, why), ncclRemoteError;
    need = (size_t)len;
  }
  ssize_t n = recv(k->fd[0], k->list + k->list_got, need - k->list_got, MSG_DONTWAIT);
  if (n == 0) {
    BRAID_WARN("connect to %s: the listener closed the connection (it is gone)", k->peer_str);
    return ncclRemoteError;
  }
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? ncclSuccess : ncclRemoteError;
  k->list_got += (size_t)n;
  if (k->list_got < need || need == BRAID_RAILLIST_HDR) return ncclSuccess;
  if (braid_raillist_decode(k->list, k->list_got, &k->rails, why, sizeof why) != 0)
    return BRAID_WARN("connect to %s: %s", k->peer_str, why), ncclRemoteError;
  ncclResult_t rc = connect_check_reply(k, 0);
  if (rc) return rc;
  int theirs = k->rails.nrails - k->rails.nbackup, mine = k->device->nrails;
  k->nprimary = theirs < mine ? theirs : mine;
  k->nrails = k->nprimary + (k->rails.nbackup && k->device->backup);
  k->nstreams = k->nrails * k->per_rail;
  k->state[0] = ST_DONE;
  return ncclSuccess;
}

/* Advances stream s; returns 0 (in progress or done) or an error. */
static ncclResult_t connect_stream(struct braid_connect *k, int s, uint64_t now) {
  switch (k->state[s]) {
    case ST_IDLE: {
      if (now < k->retry_at_ns) return ncclSuccess;
      k->fd[s] = braid_sock_open(connect_local(k, s));
      if (k->fd[s] < 0) return ncclSystemError;
      braid_sock_set_class(k->fd[s], k->cls.tc); /* before connect: the SYN is marked too */
      const struct sockaddr_storage *to = connect_target(k, s);
      socklen_t len = to->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
      if (connect(k->fd[s], (const struct sockaddr *)to, len) == 0 || errno == EINPROGRESS) {
        k->state[s] = ST_CONNECTING;
        return ncclSuccess;
      }
      break;
    }
    case ST_CONNECTING: {
      int rc = braid_sock_connected(k->fd[s]);
      if (rc == 0) { /* a SYN into a black hole: BRAID_TIMEOUT_MS, not the kernel's SYN retries */
        if (now > (s == 0 ? k->deadline_ns : k->rail_deadline_ns)) {
          errno = ETIMEDOUT;
          break;
        }
        return ncclSuccess;
      }
      if (rc < 0) break;
      k->state[s] = ST_CHAL;
    }
    /* fall through */
    case ST_CHAL:
    case ST_REPLY: {
      bool chal = k->state[s] == ST_CHAL;
      struct braid_hs_conn *hs = &k->hs[s];
      int rc = chal ? braid_hs_recv(k->fd[s], hs->chal, sizeof hs->chal, &hs->chal_got)
                    : braid_hs_recv(k->fd[s], hs->reply, sizeof hs->reply, &hs->reply_got);
      if (rc == 0) { /* the listener's process answers: BRAID_TIMEOUT_MS, as for stream 0 */
        if (now < k->deadline_ns) return ncclSuccess;
        errno = ETIMEDOUT;
      }
      if (rc == 0 && s == 0) {
        BRAID_WARN("connect to %s: the listener waited BRAID_TIMEOUT_MS before answering stream 0 (it "
                   "is stuck, or dropped the stream: its log says why)", k->peer_str);
        return ncclRemoteError;
      }
      /* Closed before answering: a listener that turned strangers away under a flood may have
       * taken this stream for one (it drops the oldest it has not heard from), or it is gone:
       * tried again, as a refused SYN is, until BRAID_TIMEOUT_MS. */
      if (rc < 0 && s == 0) k->stream0_resets++;
      if (rc < 0) errno = ECONNRESET;
      if (rc <= 0) break;
      if (!chal) {
        struct braid_reply r;
        char why[64];
        if (s == 0 && braid_reply_decode(hs->reply, &r, why, sizeof why) == 0 && r.status == BRAID_REPLY_OK) {
          k->state[s] = ST_LIST;
          return connect_read_list(k);
        }
        k->state[s] = ST_DONE;
        return connect_check_reply(k, s); /* or ST_FAILED, or an error */
      }
      ncclResult_t err = connect_make_hello(k, s);
      if (err) return err;
      k->state[s] = ST_HELLO;
    }
    /* fall through */
    case ST_HELLO: {
      int rc = braid_hs_send(k->fd[s], k->hs[s].hello, BRAID_HELLO_BYTES, &k->hs[s].hello_sent);
      if (rc < 0) break;
      if (rc == 1) k->state[s] = ST_REPLY;
      return ncclSuccess;
    }
    case ST_LIST:
      return connect_read_list(k);
    default:
      return ncclSuccess;
  }
  /* Connection failed.  A refused or timed-out SYN is retried (a listener's backlog can
   * overflow when thousands of ranks connect at once) until BRAID_TIMEOUT_MS. */
  int err = errno;
  close(k->fd[s]);
  k->fd[s] = -1;
  k->state[s] = ST_IDLE;
  memset(&k->hs[s], 0, sizeof k->hs[s]);
  bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN || err == ECONNRESET ||
               (s > 0 && (err == ENETUNREACH || err == EHOSTUNREACH));
  if (retry && now < (s == 0 ? k->deadline_ns : k->rail_deadline_ns)) {
    k->retry_at_ns = now + 10000000ull;
    return ncclSuccess;
  }
  if (s > 0) { /* the connection can start on the other rails */
    BRAID_WARN("connect to %s on device %d (%s, stream %d, %s) failed: %s; starting without it, "
               "it rejoins when it can connect", k->peer_str, k->dev, k->device->name, s,
               connect_local(k, s)->name, strerror(err));
    k->state[s] = ST_FAILED;
    return ncclSuccess;
  }
  BRAID_WARN("connect to %s on device %d (%s, stream %d, %s%s) failed: %s%s", k->peer_str, k->dev,
             k->device->name, s, connect_local(k, s)->name,
             s && s % k->nrails >= k->nprimary ? ", the borrowed backup rail" : "", strerror(err),
             k->stream0_resets ? " (the listener closed stream 0 before answering it, each try: it is gone, or "
                                 "drops this connection: its log says why)" : "");
  return ncclRemoteError;
}

static ncclResult_t connect_finish(struct braid_connect *k, void **send_comm) {
  struct braid_comm *c = braid_comm_new(BRAID_COMM_SEND, k->dev, k->nstreams);
  if (!c) return ncclSystemError;
  memcpy(c->peer, k->peer_str, sizeof c->peer);
  c->nrails = k->nrails;
  c->nprimary = k->nprimary;
  c->rejoin.conn_id = k->conn_id;
  c->ofi = k->ofi;
  c->cls = k->cls;
  if (k->verbs) c->path = &braid_verbs_path;
  memcpy(c->rejoin.secret, k->peer.secret, sizeof c->rejoin.secret);
  c->rejoin.auth_mode = k->mode;
  for (int r = 0; r < k->nrails; r++) {
    c->rejoin.rail_ifc[r] = connect_local(k, r == 0 ? 0 : r);
    c->rejoin.rail_addr[r] = r == 0 ? k->peer.addr : *connect_target(k, r);
  }
  for (int s = 0; s < k->nstreams; s++) {
    const struct braid_iface *ifc = connect_local(k, s);
    c->streams[s].fd = k->fd[s], k->fd[s] = -1;
    c->streams[s].rail = s % k->nrails;
    c->streams[s].rail_name = ifc->name;
    c->streams[s].rail_Bps = (ifc->speed_mbps > 0 ? ifc->speed_mbps : 10000) * 125000.0;
  }
  ncclResult_t rc = braid_comm_ready(c);
  if (rc) return braid_comm_free(c), rc;
  BRAID_INFO(NCCL_NET, "connected to %s on device %d (%s, %d rails, %d streams)", c->peer, k->dev,
             k->device->name, c->nrails, c->nstreams);
  *send_comm = c;
  return ncclSuccess;
}

ncclResult_t braid_setup_connect(void *owner, int traffic_class, const struct braid_device *device,
                                 int dev, void *handle, void **send_comm) {
  *send_comm = NULL;
  struct braid_connect *k = connect_from_stage(handle);
  if (!k) {
    ncclResult_t rc = connect_start(owner, traffic_class, device, dev, handle, &k);
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
    done += k->state[s] == ST_DONE || k->state[s] == ST_FAILED;
  }
  if (done < k->nstreams || k->nrails == 0) return ncclSuccess;
  ncclResult_t rc = connect_finish(k, send_comm);
  connect_set_stage(handle, NULL);
  connect_free(k);
  return rc;
}
