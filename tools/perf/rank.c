/* braid-perf: forking local ranks and running one rank. */
#include "rank.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "collnet.h"
#include "logger.h"
#include "mem.h"
#include "multi.h"
#include "rdv.h"
#include "setup.h"

#define RANK_GRACE_S 10 /* after one rank fails, the others get this long to notice */

/* Everything a rank does between joining and leaving the rendezvous. */
static int rank_session(const struct perf_opts *given, struct rdv *r) {
  int rank = r->rank, rc;
  static struct perf_net pn;
  struct engine *e = &pn.eng;
  char memdesc[512] = "";
  /* NCCL's order: the GPU first, then the plugin's properties, then buffers */
  if (perf_mem_is_gpu(given->mem) && (rc = perf_mem_start(given->mem, rank, memdesc, sizeof memdesc)))
    return rc;
  if (setup_plugin(&pn, given, r, rank)) return 2;
  if ((rc = perf_mem_check_plugin(given->mem, &pn.nl, &pn.props, rank, pn.dev))) return rc;
  if (!perf_mem_is_gpu(given->mem) && (rc = perf_mem_start(given->mem, rank, memdesc, sizeof memdesc)))
    return rc;
  static struct perf_opts opts;
  opts = *given;
  perf_opts_after_plugin_init(&opts);
  const struct perf_opts *o = &opts;
  e->nl = &pn.nl;
  e->rdv = r;
  e->rank = rank;
  e->timeout_s = o->timeout_s;
  e->optional_recv = o->optional_recv;
  e->yield_idle = o->yield_idle;
  e->mem = o->mem;
  int only_collnet = o->algo == PERF_ALGO_COLLNET; /* CollNet chain instead of net connections */
  if (only_collnet && collnet_setup(&pn, o, r)) return 2;
  static struct multi m; /* --calibrate, --algo auto|nccl */
  if (multi_prepare(&m, o, r, &pn)) return 2;
  if (!only_collnet && setup_connect(&pn, o, m.nch, r)) return 2;
  char describe[4096];
  setup_describe(&pn, describe, sizeof describe);
  size_t used = strlen(describe);
  snprintf(describe + used, sizeof describe - used, "%s", memdesc);
  if (collnet_ready(&pn)) collnet_describe(&pn, describe, sizeof describe);
  multi_describe(&m, describe, sizeof describe);
  rc = bench_run(&pn, o, r, describe, multi_mode(&m));
  if (multi_finish(&m, rank, describe, rc == 0)) rc = 2;
  if (rdv_barrier(r)) return 2; /* nobody closes comms a peer still uses */
  if (pn.coll && collnet_close(&pn, r)) rc = 2;
  if (setup_teardown(&pn)) rc = 2;
  if (rdv_barrier(r)) rc = 2;
  multi_free(&m);
  return rc;
}

int rank_main(const struct perf_opts *o, int rank, int nranks, int listen_fd, const char *host,
              int port) {
  perf_logger_setup(rank);
  struct rdv r;
  if (rdv_join(&r, listen_fd, host, port, rank, nranks, o->timeout_s)) {
    rdv_close(&r);
    return 2;
  }
  int rc = rank_session(o, &r);
  rdv_close(&r);
  return rc;
}

static void rank_kill_all(pid_t *pids, int n) {
  for (int k = 0; k < n; k++)
    if (pids[k] > 0) kill(pids[k], SIGKILL);
}

/* Waits for every child; the worst exit status wins (2 for a signal). */
static int rank_wait(pid_t *pids, int n) {
  int worst = 0, left = n;
  time_t fail_at = 0;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      int code = WIFEXITED(st) ? WEXITSTATUS(st) : 2;
      for (int k = 0; k < n; k++)
        if (pids[k] == p) {
          pids[k] = 0;
          if (!WIFEXITED(st))
            fprintf(stderr, "braid-perf: rank %d killed by signal %d\n", k, WTERMSIG(st));
        }
      if (code > worst) worst = code;
      if (code && !fail_at) fail_at = time(NULL);
      left--;
      continue;
    }
    if (fail_at && time(NULL) - fail_at > RANK_GRACE_S) {
      fprintf(stderr, "braid-perf: killing the ranks still running %d s after a failure\n",
              RANK_GRACE_S);
      rank_kill_all(pids, n);
      fail_at = time(NULL) + 3600; /* reap them without killing again */
    }
    usleep(10 * 1000);
  }
  return worst;
}

int rank_fork_local(const struct perf_opts *o) {
  int port = 0, n = o->nranks_local;
  int lfd = rdv_listen("127.0.0.1", &port);
  if (lfd < 0) return 2;
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  fflush(stdout);
  fflush(stderr);
  for (int k = 0; k < n; k++) {
    pid_t p = fork();
    if (p == 0) {
      int rc = rank_main(o, k, n, k == 0 ? lfd : (close(lfd), -1), "127.0.0.1", port);
      fflush(stdout);
      _exit(rc);
    }
    if (p < 0) {
      perror("fork");
      rank_kill_all(pids, k);
      return 2;
    }
    pids[k] = p;
  }
  close(lfd);
  int rc = rank_wait(pids, n);
  free(pids);
  return rc;
}
