/* braid-verbs-conn-test: a striped verbs connection (net_plugin/transport/verbs/verbs_conn.h) between the rxe_a<r>
 * and rxe_b<r> rails of the soft-RoCE test guest (tools/vm), both ends in this process.  Keeps up
 * to 8 messages in flight as NCCL's proxy does, verifies every byte of every message, and prints
 * the throughput and each rail's share.
 *   --sizes           messages of 0, 1, 4095 bytes, a chunk, a chunk + 1, 3 MiB + 5 (the rest
 *                     of the run uses --size)
 *   --go              after 1 s, print READY and wait for a line on stdin (the caller injects a
 *                     fault meanwhile), then run --seconds more
 *   --hint            offer every receive for early completion (braid_vc_detach, NCCL's
 *                     optional completion): a detached receive is never tested and the receiver
 *                     is never driven for it: its data must land by the sender alone (checked in
 *                     the buffer, as NCCL's LL flags would); prints how many were detached
 *   --mismatch        only: a send larger than its receive must fail both ends as the
 *                     application's error (ncclInvalidUsage), each saying both sizes
 *   --flush           after each verified receive of size > 0, the GPUDirect flush NCCL would
 *                     ask for (braid_vc_flush: an RDMA READ on each live rail's loopback QP),
 *                     tested until done within 10 s; prints the flushes and each rail's
 *                     completed flush reads (host memory here: the path, not GPUDirect)
 *   --dead-flush      with --go: after the go line (the caller took every rail down), only
 *                     flushes of the last receive, each tested until it completes or fails
 *                     (driving the receiver): one must fail with the connection's error within
 *                     15 s, never hang (with --flush, the loopback QPs are open before)
 * Exit status: 0 passed, 1 failed, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "transport/verbs/verbs_conn.h"

#define INFLIGHT 8

static uint8_t pattern(uint64_t msg, size_t i) { return (uint8_t)(msg * 131 + i * 7 + (i >> 12)); }

struct run {
  struct braid_vc *vc[2]; /* sender, receiver */
  int nrails;
  size_t cap;
  char *sbuf[INFLIGHT], *rbuf[INFLIGHT];
  struct braid_vc_mem *smem[INFLIGHT], *rmem[INFLIGHT];
  uint64_t posted, done; /* messages */
  int sreq[INFLIGHT], rreq[INFLIGHT];
  size_t size[INFLIGHT];
  bool sdone[INFLIGHT], rdone[INFLIGHT];
  bool hint, detached[INFLIGHT];
  uint64_t bytes, ndetached;
  bool flush;
  uint64_t flushes;
};

static int fail(struct run *x, const char *what) {
  printf("FAIL: %s (sender: %s; receiver: %s)\n", what, braid_vc_error(x->vc[0]), braid_vc_error(x->vc[1]));
  char d[4096];
  for (int s = 0; s < 2; s++)
    if (x->vc[s]) braid_vc_describe(x->vc[s], d, sizeof d), printf("  %s: %s\n", s ? "receiver" : "sender", d);
  fflush(stdout);
  return -1;
}

/* Posts message posted (size sz) on both ends. */
static int post(struct run *x, size_t sz) {
  int i = (int)(x->posted % INFLIGHT);
  for (size_t k = 0; k < sz; k++) x->sbuf[i][k] = (char)pattern(x->posted, k);
  memset(x->rbuf[i], 0xee, sz < x->cap ? sz + 1 : x->cap);
  int rc;
  double deadline = braid_now_s() + 30;
  /* Only the sender is driven meanwhile: a detached receive in the slot is retired by irecv. */
  while ((rc = braid_vc_irecv(x->vc[1], x->rbuf[i], x->cap, x->rmem[i], &x->rreq[i])) == 1) {
    braid_vc_progress(x->vc[0]);
    if (braid_now_s() > deadline) return fail(x, "irecv found no free slot within 30 s");
  }
  if (rc) return fail(x, "irecv");
  x->detached[i] = x->hint && braid_vc_detach(x->vc[1], x->rreq[i]);
  x->ndetached += x->detached[i];
  while ((rc = braid_vc_isend(x->vc[0], x->sbuf[i], sz, sz ? x->smem[i] : NULL, &x->sreq[i])) == 1) braid_vc_progress(x->vc[1]);
  if (rc) return fail(x, "isend");
  x->size[i] = sz;
  x->sdone[i] = x->rdone[i] = false;
  x->posted++;
  return 0;
}

/* The flush of receive buffer i (its data verified): posted, then tested until done.  0, or -1
 * with the reason (a failed flush, or none within 10 s). */
static int flush_one(struct run *x, int i) {
  int req, rc;
  double deadline = braid_now_s() + 10;
  while ((rc = braid_vc_flush(x->vc[1], x->rbuf[i], x->rmem[i], &req)) == 1)
    if (braid_now_s() > deadline) return fail(x, "no room for a flush within 10 s");
  if (rc) return fail(x, "flush");
  bool done = false;
  while (!done) {
    if (braid_vc_progress(x->vc[0]) || braid_vc_flush_test(x->vc[1], req, &done)) return fail(x, "flush test");
    if (!done && braid_now_s() > deadline) return fail(x, "a flush did not complete within 10 s");
  }
  x->flushes++;
  return 0;
}

/* Completes the oldest message and verifies it. */
static int finish(struct run *x, double deadline) {
  int i = (int)(x->done % INFLIGHT);
  size_t got = 0;
  if (x->detached[i]) {
    /* never tested, the receiver never driven: only the sender moves, the data must land */
    while (!x->sdone[i]) {
      if (braid_vc_test(x->vc[0], x->sreq[i], &x->sdone[i], NULL)) return fail(x, "send test");
      if (braid_now_s() > deadline) return fail(x, "a send to a detached receive did not complete within 30 s");
    }
    while (x->size[i] && ((uint8_t)x->rbuf[i][x->size[i] - 1] != pattern(x->done, x->size[i] - 1) ||
                          (uint8_t)x->rbuf[i][0] != pattern(x->done, 0)))
      if (braid_now_s() > deadline) return fail(x, "a detached receive's data did not land within 30 s");
    x->rdone[i] = true;
  }
  while (!x->sdone[i] || !x->rdone[i]) {
    /* Both ends keep moving, as NCCL's proxy drives every connection: a sender may wait for its
     * peer (a fence) after the receive it is testing has completed. */
    if ((x->sdone[i] && braid_vc_progress(x->vc[0])) || (x->rdone[i] && braid_vc_progress(x->vc[1])))
      return fail(x, "progress");
    if (!x->sdone[i] && braid_vc_test(x->vc[0], x->sreq[i], &x->sdone[i], NULL)) return fail(x, "send test");
    if (!x->rdone[i] && braid_vc_test(x->vc[1], x->rreq[i], &x->rdone[i], &got)) return fail(x, "receive test");
    if (x->rdone[i] && got != x->size[i]) {
      printf("FAIL: message %llu: received %zu bytes, sent %zu\n", (unsigned long long)x->done, got, x->size[i]);
      return -1;
    }
    if (braid_now_s() > deadline) return fail(x, "a message did not complete within 30 s");
  }
  for (size_t k = 0; k < x->size[i]; k++)
    if ((uint8_t)x->rbuf[i][k] != pattern(x->done, k)) {
      printf("FAIL: message %llu (%zu bytes): byte %zu is %u, expected %u\n", (unsigned long long)x->done,
             x->size[i], k, (uint8_t)x->rbuf[i][k], pattern(x->done, k));
      return -1;
    }
  if (x->size[i] < x->cap && (uint8_t)x->rbuf[i][x->size[i]] != 0xee) {
    printf("FAIL: message %llu: written past its %zu bytes\n", (unsigned long long)x->done, x->size[i]);
    return -1;
  }
  if (x->flush && x->size[i] && flush_one(x, i)) return -1;
  x->bytes += x->size[i];
  x->done++;
  return 0;
}

/* Every rail down (the caller's doing, before the go line): flushes of the last receive's buffer,
 * both ends driven, until one fails (the connection's error) or 15 s pass (a failure: the flush
 * never noticed).  Every flush that is posted must finish, or fail, within 10 s. */
static int dead_flush(struct run *x) {
  int i = (int)((x->done + INFLIGHT - 1) % INFLIGHT);
  double t0 = braid_now_s();
  uint64_t ok = 0;
  while (braid_now_s() - t0 < 15) {
    braid_vc_progress(x->vc[0]);
    int req, rc = braid_vc_flush(x->vc[1], x->rbuf[i], x->rmem[i], &req);
    bool done = rc != 0;
    while (rc == 0 && !done) {
      if (braid_vc_flush_test(x->vc[1], req, &done)) rc = -1, done = true;
      else if (!done && braid_now_s() - t0 > 25) return fail(x, "a flush with every rail down hung");
    }
    if (rc < 0) {
      printf("dead flush: failed after %.1f s (%llu flushes completed before): %s\n", braid_now_s() - t0,
             (unsigned long long)ok, braid_vc_error(x->vc[1]));
      return 0;
    }
    ok += rc == 0;
  }
  return fail(x, "flushes still completed 15 s after every rail went down");
}

/* Streams messages of sz for secs seconds (8 in flight); returns 0 or -1. */
static int stream(struct run *x, size_t sz, double secs) {
  double end = braid_now_s() + secs;
  while (braid_now_s() < end) {
    while (x->posted - x->done < INFLIGHT)
      if (post(x, sz)) return -1;
    if (finish(x, braid_now_s() + 30)) return -1;
  }
  while (x->done < x->posted)
    if (finish(x, braid_now_s() + 30)) return -1;
  return 0;
}

/* A send of 2 * cap to a receive of cap: both ends fail, as a usage error, within 10 s. */
static int mismatch(struct run *x) {
  const size_t cap = 4096, sz = 2 * cap;
  int rreq, sreq, rc;
  if (braid_vc_irecv(x->vc[1], x->rbuf[0], cap, x->rmem[0], &rreq)) return fail(x, "irecv");
  while ((rc = braid_vc_isend(x->vc[0], x->sbuf[0], sz, x->smem[0], &sreq)) == 1) braid_vc_progress(x->vc[1]);
  bool sfail = rc < 0, rfail = false, done;
  size_t got;
  for (double end = braid_now_s() + 10; (!sfail || !rfail) && braid_now_s() < end;) {
    if (!sfail) sfail = braid_vc_test(x->vc[0], sreq, &done, NULL) < 0;
    if (!rfail) rfail = braid_vc_test(x->vc[1], rreq, &done, &got) < 0;
    if (!rfail && done) return fail(x, "the receive of a larger send completed");
  }
  printf("mismatch: sender: %s%s\nmismatch: receiver: %s%s\n", sfail ? "failed: " : "still waiting",
         sfail ? braid_vc_error(x->vc[0]) : "", rfail ? "failed: " : "still waiting",
         rfail ? braid_vc_error(x->vc[1]) : "");
  if (!sfail || !rfail) return fail(x, "a size mismatch did not fail both ends within 10 s");
  for (int s = 0; s < 2; s++) {
    if (!braid_vc_usage_error(x->vc[s])) return fail(x, "a size mismatch not reported as a usage error");
    if (!strstr(braid_vc_error(x->vc[s]), "8192 bytes") || !strstr(braid_vc_error(x->vc[s]), "4096 bytes"))
      return fail(x, "a size mismatch reported without both sizes");
  }
  return 0;
}

/* " (down)" while the rail is down, then " (failed N times, rejoined M)" once it has failed. */
static const char *rail_history(const struct braid_vc *vc, int r, char *buf, size_t len) {
  struct braid_vc_rail_health h;
  braid_vc_rail_health(vc, r, &h);
  int n = snprintf(buf, len, "%s", h.down ? " (down)" : "");
  if (h.failures && n >= 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, " (failed %u times, rejoined %u)", h.failures, h.rejoins);
  return buf;
}

static int find_rails(int n, struct braid_verbs_rail *a, struct braid_verbs_rail *b) {
  char hca[256] = "=", why[512];
  for (int r = 0; r < n; r++) {
    char one[40];
    snprintf(one, sizeof one, "%srxe_a%d,rxe_b%d", r ? "," : "", r, r);
    strncat(hca, one, sizeof hca - strlen(hca) - 1);
  }
  struct braid_verbs_rail all[2 * BRAID_VC_MAX_RAILS];
  int got = braid_verbs_discover(hca, "the test's filter", -1, all, 2 * BRAID_VC_MAX_RAILS, why, sizeof why);
  if (got != 2 * n) {
    printf("FAIL: %s: %d rails (%s)\n", hca, got, got > 0 ? "expected one per device" : why);
    return -1;
  }
  for (int i = 0; i < got; i++) {
    int r = atoi(all[i].dev + 5);
    if (all[i].dev[4] == 'a') a[r] = all[i];
    else b[r] = all[i];
  }
  return 0;
}

static void usage(void) {
  fputs("usage: braid-verbs-conn-test [--rails N] [--size BYTES] [--chunk BYTES] [--seconds S]\n"
        "                             [--equal] [--sizes] [--go] [--hint] [--flush]\n"
        "                             [--mismatch | --go --dead-flush]\n"
        "A striped verbs connection over rxe_a<r> -> rxe_b<r>, r < N (default 4), in this process:\n"
        "8 messages of --size (default 1 MiB) in flight for --seconds (default 3), every byte\n"
        "verified; prints Mbit/s and each rail's share.  --equal stripes in turn instead of by\n"
        "braid's scheduler; --sizes first sends 0, 1, 4095 bytes, a chunk, a chunk + 1 and 3 MiB\n"
        "+ 5; --go prints READY after 1 s and waits for a line on stdin before the timed run;\n"
        "--hint offers each receive for early completion and checks detached ones in place;\n"
        "--mismatch only checks that a send larger than its receive fails both ends; --flush\n"
        "flushes each verified receive (each live rail's loopback READ) and counts them;\n"
        "--dead-flush (with --go) only flushes after the go line, expecting a failure.\n",
        stderr);
}

int main(int argc, char **argv) {
  int nrails = 4;
  size_t size = 1 << 20;
  double secs = 3;
  bool sizes = false, go = false, only_mismatch = false, dead = false;
  struct braid_vc_opts o = {0};
  static struct run x;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rails") && i + 1 < argc) nrails = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) o.chunk = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--equal")) o.equal = true;
    else if (!strcmp(argv[i], "--sizes")) sizes = true;
    else if (!strcmp(argv[i], "--go")) go = true;
    else if (!strcmp(argv[i], "--hint")) x.hint = true;
    else if (!strcmp(argv[i], "--mismatch")) only_mismatch = true;
    else if (!strcmp(argv[i], "--flush")) x.flush = true;
    else if (!strcmp(argv[i], "--dead-flush")) dead = true;
    else {
      usage();
      return 2;
    }
  }
  if (nrails < 1 || nrails > BRAID_VC_MAX_RAILS || size < 1 || secs <= 0 || (dead && !go)) {
    usage();
    return 2;
  }
  struct braid_verbs_rail a[BRAID_VC_MAX_RAILS], b[BRAID_VC_MAX_RAILS];
  if (find_rails(nrails, a, b)) return 1;
  x.nrails = nrails;
  size_t chunk = o.chunk ? o.chunk : 128 << 10;
  x.cap = size > (3u << 20) + 5 ? size : (3u << 20) + 5;
  if (braid_vc_open(a, nrails, true, &o, &x.vc[0]) || braid_vc_open(b, nrails, false, &o, &x.vc[1])) return 1;
  struct braid_verbs_ep_addr aa[BRAID_VC_MAX_RAILS], ba[BRAID_VC_MAX_RAILS];
  braid_vc_addrs(x.vc[0], aa);
  braid_vc_addrs(x.vc[1], ba);
  if (braid_vc_connect(x.vc[0], ba, nrails) || braid_vc_connect(x.vc[1], aa, nrails)) return fail(&x, "connect"), 1;
  for (int i = 0; i < INFLIGHT; i++) {
    x.sbuf[i] = malloc(x.cap);
    x.rbuf[i] = malloc(x.cap);
    if (!x.sbuf[i] || !x.rbuf[i] || braid_vc_reg(x.vc[0], x.sbuf[i], x.cap, -1, 0, &x.smem[i]) ||
        braid_vc_reg(x.vc[1], x.rbuf[i], x.cap, -1, 0, &x.rmem[i]))
      return fail(&x, "buffers"), 1;
  }
  printf("connected: %d rails, chunk %zu, %s striping\n", nrails, chunk, o.equal ? "equal" : "adaptive");
  int rc = 0;
  if (only_mismatch) {
    rc = mismatch(&x);
    sizes = go = false;
    secs = 0;
  }
  if (!rc && sizes) {
    const size_t sz[] = {0, 1, 4095, chunk, chunk + 1, (3u << 20) + 5};
    for (size_t k = 0; k < sizeof sz / sizeof sz[0] && !rc; k++) {
      rc = post(&x, sz[k]) || finish(&x, braid_now_s() + 30) ? -1 : 0;
      if (!rc) printf("size %zu: verified\n", sz[k]);
    }
  }
  if (!rc && go) {
    rc = stream(&x, size, 1);
    printf("READY\n");
    fflush(stdout);
    char line[16];
    if (!rc && !fgets(line, sizeof line, stdin)) rc = fail(&x, "no go line on stdin");
    if (!rc && dead) {
      rc = dead_flush(&x);
      secs = 0;
    }
  }
  if (!rc && secs > 0) {
    uint64_t b0 = x.bytes, m0 = x.done, rb0[BRAID_VC_MAX_RAILS];
    for (int r = 0; r < nrails; r++) rb0[r] = braid_vc_rail_bytes(x.vc[0], r);
    double t0 = braid_now_s();
    rc = stream(&x, size, secs);
    double dt = braid_now_s() - t0;
    if (!rc) {
      printf("throughput %.1f Mbit/s: %llu messages of %zu bytes in %.2f s, every byte verified\n",
             (double)(x.bytes - b0) * 8 / dt / 1e6, (unsigned long long)(x.done - m0), size, dt);
      for (int r = 0; r < nrails; r++) {
        char hist[80];
        printf("rail %d: %.1f Mbit/s%s\n", r, (double)(braid_vc_rail_bytes(x.vc[0], r) - rb0[r]) * 8 / dt / 1e6,
               rail_history(x.vc[0], r, hist, sizeof hist));
      }
    }
  }
  if (!rc && x.flush) {
    printf("flushed %llu receives\n", (unsigned long long)x.flushes);
    char buf[80];
    for (int r = 0; r < nrails; r++)
      printf("rail %d: %llu flush reads%s\n", r, (unsigned long long)braid_vc_rail_flushes(x.vc[1], r),
             rail_history(x.vc[1], r, buf, sizeof buf));
  }
  if (!rc && x.hint)
    printf("detached %llu of %llu receives (completed early, their data verified in place)\n",
           (unsigned long long)x.ndetached, (unsigned long long)x.posted);
  for (int i = 0; i < INFLIGHT; i++) {
    braid_vc_dereg(x.vc[0], x.smem[i]);
    braid_vc_dereg(x.vc[1], x.rmem[i]);
    free(x.sbuf[i]);
    free(x.rbuf[i]);
  }
  braid_vc_close(x.vc[0]);
  braid_vc_close(x.vc[1]);
  printf(rc ? "FAILED\n" : "PASSED\n");
  return rc ? 1 : 0;
}
