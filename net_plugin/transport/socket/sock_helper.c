/* Socket helper threads (sock_helper.h). */
#include "transport/socket/sock_helper.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm.h"
#include "log.h"
#include "param.h"
#include "stripe/stripe.h"
#include "transport/socket/sock_state.h"

/* What one helper moves, for the automatic choice: one core carries about this much TCP in each
 * direction (docs/performance.md, "Helper threads": measured CPU per byte, with headroom). */
#define HELPER_GBPS_PER_CORE 25.0
/* Below this many cores NCCL's proxy and the application's own threads already share them: the
 * automatic choice keeps the I/O on the proxy (0 helpers). */
#define HELPER_MIN_CORES 4
#define HELPER_SLEEP_NS 100000000ll /* a helper with nothing to wait for looks again this often */
#define HELPER_ACK_WAIT_NS 100000ll /* ... and this soon while it owes acknowledgements */

struct braid_sock_helper {
  struct braid_comm *c;
  int index, count;
  pthread_t thread;
  int evfd;
  atomic_bool sleeping;
  bool stop;    /* the comm's lock's */
  bool started; /* the thread runs (joined at stop) */
};

struct braid_sock_helpers {
  int n;
  struct braid_sock_helper h[];
};

static _Thread_local struct braid_sock_helper *self;

/* CPUs this process may run on. */
static int helper_cores(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int braid_sock_threads(double bps) {
  static atomic_flag told = ATOMIC_FLAG_INIT;
  int64_t set = braid_param_int(BRAID_P_SOCKET_THREADS);
  if (set >= 0) {
    if (!atomic_flag_test_and_set(&told))
      BRAID_INFO(NCCL_INIT | NCCL_NET, "socket helper threads per connection: %d (%s)", (int)set,
                 braid_param_from(BRAID_P_SOCKET_THREADS));
    return (int)set;
  }
  int cores = helper_cores();
  int want = (int)ceil(bps * 8e-9 / HELPER_GBPS_PER_CORE);
  if (want < 1) want = 1;
  if (want > cores / 2) want = cores / 2 > 0 ? cores / 2 : 1;
  if (want > 16) want = 16;
  int n = cores < HELPER_MIN_CORES ? 0 : want;
  if (!atomic_flag_test_and_set(&told))
    BRAID_INFO(NCCL_INIT | NCCL_NET, "socket helper threads per connection: %d (automatic: %d cores, "
               "rails %.0f Gbit/s at about %.0f Gbit/s per core%s; BRAID_SOCKET_THREADS sets it)", n,
               cores, bps * 8e-9, HELPER_GBPS_PER_CORE,
               cores < HELPER_MIN_CORES ? ", too few cores to spare" : "");
  return n;
}

static struct braid_sock_stream *ss_of(const struct braid_stream *s) { return s->tp; }

bool braid_sock_mine(const struct braid_stream *s) {
  const struct braid_sock_stream *ss = ss_of(s);
  return !ss->owner || ss->owner == self;
}

static void helper_wake(struct braid_sock_helper *h) {
  if (!atomic_exchange(&h->sleeping, false)) return;
  uint64_t one = 1;
  while (write(h->evfd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void braid_sock_wake(struct braid_stream *s) {
  struct braid_sock_stream *ss = ss_of(s);
  if (ss->owner && ss->owner != self) helper_wake(ss->owner);
}

void braid_sock_io_enter(struct braid_comm *c, struct braid_stream *s) {
  struct braid_sock_stream *ss = ss_of(s);
  if (!ss->owner || ss->owner != self) return; /* (another caller writing inline keeps the lock) */
  atomic_store_explicit(&ss->busy, true, memory_order_relaxed); /* under the lock */
  pthread_mutex_unlock(&c->lock);
}

void braid_sock_io_leave(struct braid_comm *c, struct braid_stream *s) {
  struct braid_sock_stream *ss = ss_of(s);
  if (!ss->owner || ss->owner != self) return;
  atomic_store_explicit(&ss->busy, false, memory_order_release);
  pthread_mutex_lock(&c->lock);
}

void braid_sock_quiet(struct braid_stream *s) {
  struct braid_sock_stream *ss = ss_of(s);
  if (!ss || !ss->owner || ss->owner == self) return;
  /* The mark is set only under the lock, which the caller holds: once clear it stays clear. */
  while (atomic_load_explicit(&ss->busy, memory_order_acquire)) sched_yield();
}

/* ---------- a helper's loop ---------- */

/* Events to wait for on s (0: none). */
static short helper_events(struct braid_comm *c, struct braid_stream *s) {
  struct braid_sock_stream *ss = ss_of(s);
  if (s->dead || s->eof || s->fd < 0) return 0;
  short ev = 0;
  if (c->kind == BRAID_COMM_SEND) {
    if (s->tx_count) ev |= POLLOUT;  /* the socket was full */
    if (c->acks) ev |= POLLIN;       /* acknowledgements */
  } else {
    if (!ss->held) ss->hup = false;
    else if (ss->hup) return 0;      /* (see helper_main) */
    if (!ss->held) ev |= POLLIN;     /* a held frame waits for a receive: irecv wakes us */
    if (ss->ack_out.len) ev |= POLLOUT;
  }
  return ev;
}

static bool helper_owes_acks(struct braid_comm *c, const struct braid_sock_helper *h) {
  if (c->kind != BRAID_COMM_RECV || !c->acks) return false;
  for (int i = h->index; i < c->nstreams; i += h->count) {
    const struct braid_stream *s = &c->streams[i];
    if (!s->dead && s->frames_recvd != s->frames_ack_sent) return true;
  }
  return false;
}

static void *helper_main(void *arg) {
  struct braid_sock_helper *h = arg;
  struct braid_comm *c = h->c;
  self = h;
  int cap = 1 + (c->nstreams + h->count - 1) / h->count; /* the eventfd and its streams */
  struct pollfd *p = calloc((size_t)cap, sizeof *p);
  int *who = calloc((size_t)cap, sizeof *who);
  pthread_mutex_lock(&c->lock);
  if (!p || !who) braid_comm_fail(c, ncclSystemError, "socket helper thread: out of memory");
  while (!h->stop) {
    if (!c->err) {
      if (c->kind == BRAID_COMM_SEND) braid_tx_progress(c);
      else braid_rx_progress(c, true);
    }
    int np = 0;
    if (p) p[np++] = (struct pollfd){.fd = h->evfd, .events = POLLIN};
    for (int i = h->index; i < c->nstreams && np < cap && !c->err; i += h->count) {
      short ev = helper_events(c, &c->streams[i]);
      if (!ev) continue;
      who[np] = i;
      p[np++] = (struct pollfd){.fd = c->streams[i].fd, .events = ev};
    }
    int64_t wait_ns = helper_owes_acks(c, h) ? HELPER_ACK_WAIT_NS : HELPER_SLEEP_NS;
    atomic_store(&h->sleeping, true);
    pthread_mutex_unlock(&c->lock);
    struct timespec ts = {.tv_sec = wait_ns / 1000000000ll, .tv_nsec = wait_ns % 1000000000ll};
    int n = p ? ppoll(p, (nfds_t)np, &ts, NULL) : ppoll(NULL, 0, &ts, NULL);
    if (n > 0 && (p[0].revents & POLLIN)) {
      uint64_t v;
      while (read(h->evfd, &v, sizeof v) < 0 && errno == EINTR) {
      }
    }
    atomic_store(&h->sleeping, false);
    pthread_mutex_lock(&c->lock);
    /* A held stream whose peer hung up would wake us at once for ever: it waits for a receive
     * like the others (the next pass reads the end once one is posted). */
    for (int k = 1; n > 0 && k < np; k++)
      if ((p[k].revents & (POLLHUP | POLLERR)) && ss_of(&c->streams[who[k]])->held)
        ss_of(&c->streams[who[k]])->hup = true;
  }
  pthread_mutex_unlock(&c->lock);
  free(p);
  free(who);
  return NULL;
}

ncclResult_t braid_sock_helpers_start(struct braid_comm *c) {
  double bps = 0;
  for (int r = 0; r < c->nrails && r < c->nstreams; r++) bps += c->streams[r].rail_Bps;
  int n = braid_sock_threads(bps);
  if (n > c->nstreams) n = c->nstreams;
  if (n <= 0) return ncclSuccess;
  struct braid_sock_helpers *hs = calloc(1, sizeof *hs + (size_t)n * sizeof hs->h[0]);
  if (!hs) return ncclSystemError;
  hs->n = n;
  for (int k = 0; k < n; k++) {
    hs->h[k] = (struct braid_sock_helper){.c = c, .index = k, .count = n, .evfd = -1};
    if ((hs->h[k].evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
      BRAID_WARN("socket helper threads: eventfd failed: %s", strerror(errno));
      goto fail;
    }
  }
  for (int i = 0; i < c->nstreams; i++) ss_of(&c->streams[i])->owner = &hs->h[i % n];
  c->helpers = hs;
  c->threaded = true;
  /* The helpers take no signals: they stay with the application's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (int k = 0; k < n; k++) {
    int err = pthread_create(&hs->h[k].thread, NULL, helper_main, &hs->h[k]);
    if (err) {
      pthread_sigmask(SIG_SETMASK, &old, NULL);
      BRAID_WARN("socket helper threads: pthread_create failed: %s", strerror(err));
      braid_sock_helpers_stop(c);
      return ncclSystemError;
    }
    hs->h[k].started = true;
    char name[16];
    snprintf(name, sizeof name, "braid-sock%d", k % 100);
    pthread_setname_np(hs->h[k].thread, name);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return ncclSuccess;
fail:
  for (int k = 0; k < n; k++)
    if (hs->h[k].evfd >= 0) close(hs->h[k].evfd);
  free(hs);
  return ncclSystemError;
}

void braid_sock_helpers_stop(struct braid_comm *c) {
  struct braid_sock_helpers *hs = c->helpers;
  if (!hs) return;
  pthread_mutex_lock(&c->lock);
  for (int k = 0; k < hs->n; k++) {
    hs->h[k].stop = true;
    atomic_store(&hs->h[k].sleeping, true); /* wake it whether or not it sleeps */
    helper_wake(&hs->h[k]);
  }
  pthread_mutex_unlock(&c->lock);
  for (int k = 0; k < hs->n; k++)
    if (hs->h[k].started) pthread_join(hs->h[k].thread, NULL);
  for (int k = 0; k < hs->n; k++) close(hs->h[k].evfd);
  for (int i = 0; i < c->nstreams; i++)
    if (c->streams[i].tp) ss_of(&c->streams[i])->owner = NULL;
  c->threaded = false;
  c->helpers = NULL;
  free(hs);
}
