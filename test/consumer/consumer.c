/* net-consumer: drives a net plugin the way NCCL's other consumers do (plugin test suites, MPI
 * programs, libraries that use the net API directly), not the way NCCL's proxy does: ranks are
 * processes that exchange listen handles out of band, and they
 *   - close a send comm the moment test() says its sends are done (a rank that finishes first);
 *   - post grouped receives (n up to the device's maxRecvs) whose messages arrive in any order,
 *     before or after the receive is posted;
 *   - accept several connections on one listen comm;
 *   - run several rings at once over their own connections.
 * Every message carries its own data pattern and is checked.
 *
 *   net-consumer [-n RANKS] [-i ITERS] [-v ABI] [-I IF0;IF1;...] [PLUGIN]
 *     (default build/libnccl-net-braid.so, 3 ranks, 20 iterations; -I: each rank's
 *     BRAID_SOCKET_IFNAME, e.g. one node's rails per rank)
 * The plugin's own variables choose what it does (BRAID_TRANSPORT, BRAID_NSTREAMS, ...).  Prints
 * "ok CASE" or "FAIL CASE: why" per case and exits 1 on a failure. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "netload.h"

#define MAX_RANKS 8
#define NRINGS 2
#define WAIT_S 20.0

/* Out-of-band state shared by the rank processes (a MAP_SHARED page set up before fork): the
 * handles, a barrier that a failing rank breaks for everyone (abort), and what failed. */
struct shared {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived, generation, abort;
  char handle[MAX_RANKS][NRINGS + 1][NCCL_NET_HANDLE_MAXSIZE];
  char why[MAX_RANKS][256];
};

static struct shared *sh;
static struct netload nl;
static int rank, nranks, iters;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Records this rank's first failure and breaks the barrier for every rank; returns -1. */
static int fail(const char *fmt, ...) {
  pthread_mutex_lock(&sh->mu);
  if (!sh->why[rank][0]) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sh->why[rank], sizeof sh->why[rank], fmt, ap);
    va_end(ap);
  }
  sh->abort = 1;
  pthread_cond_broadcast(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
  return -1;
}

/* Every rank here, or -1 once a rank failed (or after 3 * WAIT_S). */
static int sync_ranks(void) {
  pthread_mutex_lock(&sh->mu);
  int gen = sh->generation, rc = 0;
  if (++sh->arrived == nranks) {
    sh->arrived = 0;
    sh->generation++;
    pthread_cond_broadcast(&sh->cv);
  }
  struct timespec end;
  clock_gettime(CLOCK_REALTIME, &end);
  end.tv_sec += (time_t)(3 * WAIT_S);
  while (!sh->abort && sh->generation == gen && rc == 0) rc = pthread_cond_timedwait(&sh->cv, &sh->mu, &end);
  int broken = sh->abort || sh->generation == gen;
  pthread_mutex_unlock(&sh->mu);
  if (broken && !sh->abort) fail("the other ranks never arrived");
  return broken ? -1 : 0;
}

#define TRY(call, what)                                                          \
  do {                                                                           \
    ncclResult_t rc_ = (call);                                                   \
    if (rc_ != ncclSuccess) return fail("%s: %s", what, netload_result_str(rc_)); \
  } while (0)

static void fill(char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (char)((i * 2654435761u + seed * 40503u + (i >> 11)) >> 7);
}

/* Bytes [from, n) of a buffer filled with seed's pattern. */
static int check_from(const char *p, size_t n, unsigned seed, size_t from, const char *what) {
  for (size_t i = from; i < n; i++)
    if (p[i] != (char)((i * 2654435761u + seed * 40503u + (i >> 11)) >> 7))
      return fail("%s: byte %zu of %zu differs", what, i, n);
  return 0;
}

static int check(const char *p, size_t n, unsigned seed, const char *what) { return check_from(p, n, seed, 0, what); }

/* Connects to handle h (a copy: connect keeps its state in it) and accepts on l at once, as two
 * ranks do from their own processes; either side may be NULL. */
static int connect_accept(void *ctx, const char *h, void **s, void *l, void **r) {
  char copy[NCCL_NET_HANDLE_MAXSIZE];
  if (h) memcpy(copy, h, sizeof copy);
  for (double end = now_s() + WAIT_S; now_s() < end;) {
    if (h && !*s) TRY(netload_connect(&nl, ctx, 0, copy, s, NULL), "connect");
    if (l && !*r) TRY(netload_accept(&nl, l, r, NULL), "accept");
    if ((!h || *s) && (!l || *r)) return 0;
  }
  return fail("no connection in %.0f s", WAIT_S);
}

static int wait_all(void **reqs, int n, int *sizes_out, const char *what) {
  for (double end = now_s() + WAIT_S; now_s() < end;) {
    int left = 0;
    for (int i = 0; i < n; i++) {
      if (!reqs[i]) continue;
      int done = 0, sizes[8] = {0};
      TRY(netload_test(&nl, reqs[i], &done, sizes), what);
      if (done) {
        reqs[i] = NULL;
        if (sizes_out) memcpy(sizes_out + 8 * i, sizes, sizeof sizes);
      } else {
        left++;
      }
    }
    if (!left) return 0;
  }
  return fail("%s: not done in %.0f s", what, WAIT_S);
}

/* Registrations, as every consumer makes them (a verbs connection takes no buffer without one):
 * a buffer is registered on a comm at its first use, deregistered before it is freed or its comm
 * closed. */
static struct reg {
  void *comm;
  char *addr;
  size_t len;
  void *mh;
} regs[512];
static int nregs;

/* The memory handle covering [p, p + len) on comm; NULL (after fail) when it cannot be made. */
static void *mh_of(void *comm, void *p, size_t len) {
  for (int i = 0; i < nregs; i++)
    if (regs[i].comm == comm && (char *)p >= regs[i].addr && (char *)p + len <= regs[i].addr + regs[i].len)
      return regs[i].mh;
  if (nregs == (int)(sizeof regs / sizeof regs[0])) return fail("too many registrations"), NULL;
  void *mh = NULL;
  ncclResult_t rc = netload_reg_mr(&nl, comm, p, len ? len : 1, NCCL_PTR_HOST, &mh);
  if (rc != ncclSuccess) return fail("regMr: %s", netload_result_str(rc)), NULL;
  regs[nregs++] = (struct reg){comm, p, len ? len : 1, mh};
  return mh;
}

/* Deregisters what lies in [p, p + len) (any comm), or everything of comm when p is NULL. */
static int unreg(void *comm, void *p, size_t len) {
  for (int i = 0; i < nregs; i++) {
    bool hit = p ? regs[i].addr >= (char *)p && regs[i].addr < (char *)p + len : regs[i].comm == comm;
    if (!hit) continue;
    TRY(netload_dereg_mr(&nl, regs[i].comm, regs[i].mh), "deregMr");
    regs[i--] = regs[--nregs];
  }
  return 0;
}

static int post_send(void *s, void *data, size_t size, int tag, void **req) {
  *req = NULL;
  void *mh = mh_of(s, data, size);
  if (!mh) return -1;
  for (double end = now_s() + WAIT_S; !*req && now_s() < end;)
    TRY(netload_isend(&nl, s, data, size, tag, mh, NULL, req), "isend");
  return *req ? 0 : fail("isend never posted");
}

static int post_recv(void *r, int n, void **data, size_t *sizes, int *tags, void **req) {
  *req = NULL;
  void *mhs[8];
  for (int i = 0; i < n; i++)
    if (!(mhs[i] = mh_of(r, data[i], sizes[i]))) return -1;
  for (double end = now_s() + WAIT_S; !*req && now_s() < end;)
    TRY(netload_irecv(&nl, r, n, data, sizes, tags, mhs, NULL, req), "irecv");
  return *req ? 0 : fail("irecv never posted");
}

/* Rank 0 sends 32 messages to rank 1 and, the last time, closes its send comm as soon as they
 * are done; rank 1 must receive all 32, intact, and its test() must not fail.  (Two-rank cases:
 * the other ranks only keep step.) */
static int case_close_after_completion(void *ctx) {
  enum { N = 32 };
  void *s = NULL, *r = NULL, *l = NULL;
  if (rank == 1) TRY(netload_listen(&nl, ctx, 0, sh->handle[1][0], &l), "listen");
  if (sync_ranks()) return -1;
  if (rank == 0 && connect_accept(ctx, sh->handle[1][0], &s, NULL, NULL)) return -1;
  if (rank == 1 && connect_accept(ctx, NULL, NULL, l, &r)) return -1;
  if (l) TRY(netload_close_listen(&nl, l), "closeListen");
  for (int it = 0; it < iters; it++) {
    size_t size = 1000 + 70000 * (size_t)(it % 5);
    char *buf = malloc(N * size);
    void *reqs[N] = {0};
    if (!buf) return fail("no memory");
    if (rank == 1)
      for (int m = 0; m < N; m++) {
        void *d = buf + m * size;
        size_t sz = size;
        int tag = m;
        if (post_recv(r, 1, &d, &sz, &tag, &reqs[m])) return -1;
      }
    if (sync_ranks()) return -1;
    if (rank == 0) {
      for (int m = 0; m < N; m++) {
        fill(buf + m * size, size, (unsigned)(it * N + m));
        if (post_send(s, buf + m * size, size, m, &reqs[m])) return -1;
      }
      if (wait_all(reqs, N, NULL, "send test")) return -1;
      if (it == iters - 1) {
        if (unreg(s, NULL, 0)) return -1;
        TRY(netload_close_send(&nl, s), "closeSend right after completion");
        s = NULL;
      }
    } else if (rank == 1) {
      if (wait_all(reqs, N, NULL, "receive test after the sender closed")) return -1;
      for (int m = 0; m < N; m++)
        if (check(buf + m * size, size, (unsigned)(it * N + m), "a message")) return -1;
    }
    if (unreg(NULL, buf, N * size)) return -1;
    free(buf);
    if (it < iters - 1 && sync_ranks()) return -1;
  }
  if (r && unreg(r, NULL, 0)) return -1;
  if (r) TRY(netload_close_recv(&nl, r), "closeRecv");
  return 0;
}

/* Grouped receives of n = 2 .. maxRecvs messages, each tag its own size, sent in reverse tag
 * order; every other iteration the sends are posted first (eager: the messages wait for the
 * receive). */
static int case_grouped_receives(void *ctx) {
  netload_props_t p;
  TRY(netload_get_properties(&nl, 0, &p), "getProperties");
  int maxr = p.maxRecvs > 8 ? 8 : p.maxRecvs;
  if (maxr < 2) return 0; /* the device takes single receives only: nothing to group */
  void *s = NULL, *r = NULL, *l = NULL;
  if (rank == 1) TRY(netload_listen(&nl, ctx, 0, sh->handle[1][0], &l), "listen");
  if (sync_ranks()) return -1;
  if (rank == 0 && connect_accept(ctx, sh->handle[1][0], &s, NULL, NULL)) return -1;
  if (rank == 1 && connect_accept(ctx, NULL, NULL, l, &r)) return -1;
  if (l) TRY(netload_close_listen(&nl, l), "closeListen");
  for (int it = 0; it < iters; it++) {
    int n = 2 + it % (maxr - 1);
    bool eager = it % 2;
    char *bufs[8];
    size_t sizes[8];
    int tags[8];
    for (int k = 0; k < n; k++) {
      sizes[k] = 64 + 3000 * (size_t)k + (size_t)it * 17;
      tags[k] = 100 + k;
      if (!(bufs[k] = malloc(sizes[k]))) return fail("no memory");
    }
    void *req = NULL, *sreq[8] = {0};
    bool posted[8] = {false};
    if (rank == 1 && !eager && post_recv(r, n, (void **)bufs, sizes, tags, &req)) return -1;
    if (sync_ranks()) return -1;
    if (rank == 0) /* reverse tag order; eager: one try each, before the receive exists (a plugin
                    * may hold a send until the receiver is ready: isend then answers NULL) */
      for (int k = n - 1; k >= 0; k--) {
        fill(bufs[k], sizes[k], (unsigned)(it * 8 + k));
        void *mh = eager ? mh_of(s, bufs[k], sizes[k]) : NULL;
        if (eager && !mh) return -1;
        if (eager) TRY(netload_isend(&nl, s, bufs[k], sizes[k], tags[k], mh, NULL, &sreq[k]), "isend");
        else if (post_send(s, bufs[k], sizes[k], tags[k], &sreq[k])) return -1;
        posted[k] = sreq[k] != NULL;
      }
    if (sync_ranks()) return -1;
    if (rank == 1 && eager && post_recv(r, n, (void **)bufs, sizes, tags, &req)) return -1;
    if (rank == 0) {
      for (int k = n - 1; k >= 0; k--)
        if (!posted[k] && post_send(s, bufs[k], sizes[k], tags[k], &sreq[k])) return -1;
      if (wait_all(sreq, n, NULL, "send test")) return -1;
    }
    if (rank == 1) {
      int got[8];
      if (wait_all(&req, 1, got, "grouped receive")) return -1;
      for (int k = 0; k < n; k++) {
        if (got[k] != (int)sizes[k]) return fail("buffer %d of %d: %d bytes, sent %zu", k, n, got[k], sizes[k]);
        if (check(bufs[k], sizes[k], (unsigned)(it * 8 + k), "a grouped message")) return -1;
      }
    }
    if (sync_ranks()) return -1;
    for (int k = 0; k < n; k++)
      if (unreg(NULL, bufs[k], sizes[k])) return -1;
    for (int k = 0; k < n; k++) free(bufs[k]);
  }
  if (s && unreg(s, NULL, 0)) return -1;
  if (s) TRY(netload_close_send(&nl, s), "closeSend");
  if (r && unreg(r, NULL, 0)) return -1;
  if (r) TRY(netload_close_recv(&nl, r), "closeRecv");
  return 0;
}

/* Rank 0 listens once; every other rank connects to that one handle; rank 0 accepts them all on
 * the one listen comm, then each connection carries data. */
static int case_reused_listen_comm(void *ctx) {
  void *l = NULL, *s = NULL, *r[MAX_RANKS] = {0};
  if (rank == 0) TRY(netload_listen(&nl, ctx, 0, sh->handle[0][0], &l), "listen");
  if (sync_ranks()) return -1;
  if (rank > 0 && connect_accept(ctx, sh->handle[0][0], &s, NULL, NULL)) return -1;
  if (rank == 0)
    for (int k = 1; k < nranks; k++)
      if (connect_accept(ctx, NULL, NULL, l, &r[k])) return fail("accept %d of %d on one listen comm: %s", k,
                                                                  nranks - 1, sh->why[rank]);
  if (sync_ranks()) return -1;
  if (l) TRY(netload_close_listen(&nl, l), "closeListen");
  size_t size = 200000;
  char *buf = malloc(size * MAX_RANKS);
  if (!buf) return fail("no memory");
  for (int it = 0; it < iters; it++) {
    if (rank > 0) {
      void *req = NULL;
      fill(buf, size, (unsigned)(it * MAX_RANKS + rank));
      memcpy(buf, &rank, sizeof rank); /* the accepting side does not know which comm is whose */
      if (post_send(s, buf, size, 1, &req) || wait_all(&req, 1, NULL, "send test")) return -1;
    } else {
      void *req[MAX_RANKS] = {0};
      for (int k = 1; k < nranks; k++) {
        void *d = buf + k * size;
        size_t sz = size;
        int tag = 1;
        if (post_recv(r[k], 1, &d, &sz, &tag, &req[k])) return -1;
      }
      if (wait_all(req + 1, nranks - 1, NULL, "receive test")) return -1;
      for (int k = 1; k < nranks; k++) {
        int from;
        memcpy(&from, buf + k * size, sizeof from);
        if (from < 1 || from >= nranks) return fail("a message names rank %d", from);
        if (check_from(buf + k * size, size, (unsigned)(it * MAX_RANKS + from), sizeof from,
                       "a message on a reused listen comm"))
          return -1;
      }
    }
  }
  if (unreg(NULL, buf, size * MAX_RANKS)) return -1;
  free(buf);
  if (s && unreg(s, NULL, 0)) return -1;
  if (s) TRY(netload_close_send(&nl, s), "closeSend");
  for (int k = 1; k < nranks; k++) {
    if (r[k] && unreg(r[k], NULL, 0)) return -1;
    if (r[k]) TRY(netload_close_recv(&nl, r[k]), "closeRecv");
  }
  return 0;
}

/* NRINGS rings at once, each over its own connections (its own listen comm per rank): every
 * rank sends to the next and receives from the previous, every ring and iteration its own data. */
static int case_rings(void *ctx) {
  void *l[NRINGS] = {0}, *s[NRINGS] = {0}, *r[NRINGS] = {0};
  for (int g = 0; g < NRINGS; g++) TRY(netload_listen(&nl, ctx, 0, sh->handle[rank][g + 1], &l[g]), "listen");
  if (sync_ranks()) return -1;
  int next = (rank + 1) % nranks;
  for (int g = 0; g < NRINGS; g++)
    if (connect_accept(ctx, sh->handle[next][g + 1], &s[g], l[g], &r[g])) return -1;
  for (int g = 0; g < NRINGS; g++) TRY(netload_close_listen(&nl, l[g]), "closeListen");
  size_t size = 1 << 20;
  char *out = malloc(NRINGS * size), *in = malloc(NRINGS * size);
  if (!out || !in) return fail("no memory");
  int prev = (rank + nranks - 1) % nranks;
  for (int it = 0; it < iters; it++) {
    void *req[2 * NRINGS] = {0};
    for (int g = 0; g < NRINGS; g++) {
      void *d = in + g * size;
      size_t sz = size;
      int tag = g;
      if (post_recv(r[g], 1, &d, &sz, &tag, &req[g])) return -1;
      fill(out + g * size, size, (unsigned)((it * NRINGS + g) * MAX_RANKS + rank));
      if (post_send(s[g], out + g * size, size, g, &req[NRINGS + g])) return -1;
    }
    if (wait_all(req, 2 * NRINGS, NULL, "ring step")) return -1;
    for (int g = 0; g < NRINGS; g++)
      if (check(in + g * size, size, (unsigned)((it * NRINGS + g) * MAX_RANKS + prev), "a ring message")) return -1;
  }
  if (unreg(NULL, out, NRINGS * size) || unreg(NULL, in, NRINGS * size)) return -1;
  free(out);
  free(in);
  if (sync_ranks()) return -1; /* the last step is everyone's before anyone closes */
  for (int g = 0; g < NRINGS; g++) {
    if (unreg(s[g], NULL, 0) || unreg(r[g], NULL, 0)) return -1;
    TRY(netload_close_send(&nl, s[g]), "closeSend");
    TRY(netload_close_recv(&nl, r[g]), "closeRecv");
  }
  return 0;
}

struct test_case {
  const char *name;
  int (*run)(void *ctx);
  int min_ranks;
};

static const struct test_case cases[] = {
    {"close-right-after-completion", case_close_after_completion, 2},
    {"grouped-receives", case_grouped_receives, 2},
    {"reused-listen-comm", case_reused_listen_comm, 2},
    {"rings", case_rings, 2},
};

static int rank_main(int max_version, const char *plugin) {
  char err[256];
  if (netload_open(&nl, plugin, max_version, err, sizeof err) != ncclSuccess) return fail("open: %s", err);
  void *ctx = NULL;
  TRY(netload_init(&nl, &ctx, 42, NULL, NULL, NULL), "init");
  int ndev = 0;
  TRY(netload_devices(&nl, &ndev), "devices");
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    if (nranks < cases[c].min_ranks) continue;
    if (sync_ranks() || cases[c].run(ctx) || sync_ranks()) {
      fail("failed"); /* the others stop too; rank 0 says which case */
      if (rank == 0) {
        for (int k = 0; k < nranks; k++)
          if (sh->why[k][0] && strcmp(sh->why[k], "failed")) printf("FAIL %s: rank %d: %s\n", cases[c].name, k, sh->why[k]);
        fflush(stdout);
      }
      return 1; /* the comms of a failed case are in an unknown state: no finalize */
    }
    if (rank == 0) printf("ok %s\n", cases[c].name), fflush(stdout);
  }
  netload_finalize(&nl, ctx);
  return 0;
}

int main(int argc, char **argv) {
  int opt, max_version = 0;
  const char *ifnames = NULL;
  nranks = 3, iters = 20;
  while ((opt = getopt(argc, argv, "n:i:v:I:h")) != -1) {
    if (opt == 'n') nranks = atoi(optarg);
    else if (opt == 'i') iters = atoi(optarg);
    else if (opt == 'v') max_version = atoi(optarg);
    else if (opt == 'I') ifnames = optarg;
    else {
      fprintf(stderr, "usage: net-consumer [-n RANKS (2..%d)] [-i ITERS] [-v ABI] [-I IF0;IF1;...] [PLUGIN]\n",
              MAX_RANKS);
      return opt == 'h' ? 0 : 2;
    }
  }
  if (nranks < 2 || nranks > MAX_RANKS || iters < 1) return fprintf(stderr, "net-consumer: bad -n or -i\n"), 2;
  const char *plugin = optind < argc ? argv[optind] : "build/libnccl-net-braid.so";
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return perror("mmap"), 1;
  memset(sh, 0, sizeof *sh);
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  pthread_mutex_init(&sh->mu, &ma);
  pthread_cond_init(&sh->cv, &ca);
  pid_t pids[MAX_RANKS];
  for (int k = 0; k < nranks; k++) {
    pids[k] = fork();
    if (pids[k] == 0) {
      rank = k;
      for (const char *p = ifnames; p; p = strchr(p, ';') ? strchr(p, ';') + 1 : NULL)
        if (k-- == 0) {
          char ifc[128];
          snprintf(ifc, sizeof ifc, "%.*s", (int)strcspn(p, ";"), p);
          setenv("BRAID_SOCKET_IFNAME", ifc, 1);
          break;
        }
      alarm(600); /* a hang is a failure, never a stuck test run */
      _exit(rank_main(max_version, plugin));
    }
  }
  int bad = 0;
  for (int k = 0; k < nranks; k++) {
    int st = 0;
    waitpid(pids[k], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      bad = 1;
      if (!WIFEXITED(st)) printf("FAIL rank %d died: %s\n", k, strsignal(WTERMSIG(st)));
    }
  }
  return bad;
}
