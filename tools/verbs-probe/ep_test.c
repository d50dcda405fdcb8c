/* braid-verbs-ep-test: two verbs endpoints (net_plugin/transport/verbs/verbs_ep.h) in one process, on rxe_a<r>
 * and rxe_b<r> (the soft-RoCE test guest, tools/vm), connected to each other.  Checks control
 * messages both ways and 64 RDMA WRITE_WITH_IMM of 256 KiB; with --blackhole, how long a dead
 * peer takes to surface as a work-completion error.  Exit status: 0 passed, 1 failed, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "transport/verbs/verbs_ep.h"

#define NWRITES 64
#define CHUNK (256u << 10)
#define NCTRL 8

static int fail(const char *what) {
  printf("FAIL: %s\n", what);
  fflush(stdout);
  return -1;
}

/* The next completion of ep into ev: 1, 0 after timeout seconds, -1 when the CQ fails. */
static int next_event(struct braid_verbs_ep *ep, struct braid_verbs_ev *ev, double timeout) {
  struct timespec nap = {0, 20000};
  double end = braid_now_s() + timeout;
  for (;;) {
    int n = braid_verbs_ep_poll(ep, ev, 1);
    if (n != 0) return n;
    if (braid_now_s() > end) return 0;
    nanosleep(&nap, NULL);
  }
}

/* Completions expect() has seen in the current phase (reset by each phase), for failure messages. */
static int expect_seen;

/* Waits for one event of kind on ep; any other kind is a failure. */
static int expect(struct braid_verbs_ep *ep, enum braid_verbs_ev_kind kind, struct braid_verbs_ev *ev) {
  int n = next_event(ep, ev, 20);
  if (n <= 0) { /* name what was awaited where, so that a rare stall in the VM can be placed */
    printf("FAIL: %s: %s waiting for a completion of kind %d (%d of this phase seen)\n",
           braid_verbs_ep_name(ep), n ? "poll failed" : "nothing within 20 s", kind, expect_seen);
    return -1;
  }
  expect_seen++;
  if (ev->kind == BRAID_VERBS_EV_ERROR) {
    printf("FAIL: %s: %s\n", braid_verbs_ep_name(ep), ev->why);
    return -1;
  }
  if (ev->kind != kind) {
    printf("FAIL: %s: completion of kind %d, expected %d\n", braid_verbs_ep_name(ep), ev->kind, kind);
    return -1;
  }
  return 0;
}

static const size_t ctrl_len[NCTRL] = {1, 7, 64, 100, 128, 129, 200, BRAID_VERBS_CTRL_MAX};

static void ctrl_fill(uint8_t *m, int side, int i) {
  for (size_t j = 0; j < ctrl_len[i]; j++) m[j] = (uint8_t)(side * 101 + i * 13 + j * 7);
}

/* Each side sends NCTRL messages; each receives the other's, in order and intact. */
static int test_ctrl(struct braid_verbs_ep *ep[2]) {
  uint8_t m[BRAID_VERBS_CTRL_MAX];
  struct braid_verbs_ev ev;
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < NCTRL; i++) {
      ctrl_fill(m, s, i);
      if (braid_verbs_ep_send(ep[s], m, ctrl_len[i], (uint64_t)i)) return fail("control send");
    }
  expect_seen = 0;
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < NCTRL; i++) {
      if (expect(ep[s], BRAID_VERBS_EV_SEND_DONE, &ev)) return -1;
      if (ev.cookie != (uint64_t)i) return fail("send completions out of order");
    }
    for (int i = 0; i < NCTRL; i++) {
      if (expect(ep[1 - s], BRAID_VERBS_EV_CTRL, &ev)) return -1;
      ctrl_fill(m, s, i);
      if (ev.len != ctrl_len[i] || memcmp(ev.data, m, ctrl_len[i])) {
        printf("FAIL: control message %d from side %d: %u bytes or contents wrong (want %zu)\n", i, s,
               ev.len, ctrl_len[i]);
        return -1;
      }
    }
  }
  printf("ctrl: %d messages each way (1..%d bytes) intact\n", NCTRL, BRAID_VERBS_CTRL_MAX);
  return 0;
}

static uint32_t word(uint32_t chunk, uint32_t j) { return chunk * 0x01000193u ^ j * 2654435761u ^ 0x5a5a5a5au; }

/* Writes chunks order[0..n) from src to dst at the same offsets; waits for all completions. */
static int write_chunks(struct braid_verbs_ep *ep[2], const struct braid_verbs_mr *src,
                        const struct braid_verbs_mr *dst, int n, uint32_t len, bool verify) {
  int seen[NWRITES] = {0};
  struct braid_verbs_ev ev;
  expect_seen = 0;
  for (int k = 0; k < n; k++) {
    uint32_t i = (uint32_t)(k * 37 % NWRITES); /* 37 is prime to 64: a permutation */
    if (braid_verbs_ep_write_imm(ep[0], src, (size_t)i * CHUNK, len, (uintptr_t)dst->addr + (size_t)i * CHUNK,
                                 dst->rkey, 0xb0000000u | i, i))
      return fail("write_imm post");
  }
  for (int k = 0; k < n; k++) {
    if (expect(ep[1], BRAID_VERBS_EV_WRITE_IMM, &ev)) return -1;
    uint32_t i = ev.imm & 0xffff;
    if ((ev.imm & 0xffff0000u) != 0xb0000000u || i >= NWRITES || seen[i]++) {
      printf("FAIL: unexpected or repeated imm 0x%08x\n", ev.imm);
      return -1;
    }
    if (ev.len != len) {
      printf("FAIL: imm 0x%08x: %u bytes, expected %u\n", ev.imm, ev.len, len);
      return -1;
    }
  }
  for (int k = 0; k < n; k++)
    if (expect(ep[0], BRAID_VERBS_EV_WRITE_DONE, &ev)) return -1;
  if (verify && memcmp(src->addr, dst->addr, (size_t)n * CHUNK)) return fail("written data differs");
  return 0;
}

static int test_writes(struct braid_verbs_ep *ep[2], struct braid_verbs_mr *src, struct braid_verbs_mr *dst) {
  uint32_t *s = src->addr;
  for (uint32_t i = 0; i < NWRITES; i++)
    for (uint32_t j = 0; j < CHUNK / 4; j++) s[(size_t)i * (CHUNK / 4) + j] = word(i, j);
  memset(dst->addr, 0, dst->len);
  double t0 = braid_now_s();
  if (write_chunks(ep, src, dst, NWRITES, CHUNK, true)) return -1;
  double dt = braid_now_s() - t0;
  printf("writes: %d x %u KiB WRITE_WITH_IMM, each imm once, data verified (%.2f s, %.1f MB/s)\n", NWRITES,
         CHUNK >> 10, dt, NWRITES * (double)CHUNK / dt / 1e6);
  return 0;
}

/* After a warm-up: READY, a line on stdin (else 5 s), then writes until the first error. */
static int test_blackhole(struct braid_verbs_ep *ep[2], struct braid_verbs_mr *src, struct braid_verbs_mr *dst) {
  if (write_chunks(ep, src, dst, 4, 64u << 10, false)) return -1;
  printf("READY\n");
  fflush(stdout);
  char line[64];
  if (!fgets(line, sizeof line, stdin)) sleep(5);
  double t0 = braid_now_s();
  for (uint32_t i = 0; i < 8; i++)
    if (braid_verbs_ep_write_imm(ep[0], src, (size_t)i * CHUNK, CHUNK, (uintptr_t)dst->addr + (size_t)i * CHUNK,
                                 dst->rkey, 0xc0000000u | i, i))
      return fail("write_imm post");
  struct braid_verbs_ev ev, other;
  while (braid_now_s() - t0 < 30) {
    braid_verbs_ep_poll(ep[1], &other, 1); /* the receiving side: whatever arrives */
    int n = next_event(ep[0], &ev, 0.001);
    if (n < 0) return fail("poll failed");
    if (n == 0 || ev.kind != BRAID_VERBS_EV_ERROR) continue;
    double ms = (braid_now_s() - t0) * 1e3;
    printf("blackhole: first error after %.0f ms on %s: %s\n", ms, braid_verbs_ep_name(ep[0]), ev.why);
    if (!braid_verbs_ep_failed(ep[0])) return fail("endpoint not failed after an error");
    printf("blackhole: endpoint reports itself failed; posts refused: %s\n",
           braid_verbs_ep_send(ep[0], "x", 1, 0) == -1 ? "yes" : "NO");
    return 0;
  }
  return fail("no work-completion error within 30 s (hang)");
}

static int find_rails(int rail, struct braid_verbs_rail out[2]) {
  struct braid_verbs_rail r[4];
  char hca[64], why[512];
  snprintf(hca, sizeof hca, "=rxe_a%d,rxe_b%d", rail, rail);
  int n = braid_verbs_discover(hca, "the test's filter", -1, r, 4, why, sizeof why);
  if (n != 2) {
    printf("FAIL: %s: %d rails (%s)\n", hca, n, n > 0 ? "expected 2" : why);
    return -1;
  }
  int a = r[0].dev[4] == 'a' ? 0 : 1;
  out[0] = r[a], out[1] = r[1 - a];
  return 0;
}

static int run(int rail, bool blackhole) {
  struct braid_verbs_rail rails[2];
  struct braid_verbs_ep *ep[2] = {NULL, NULL};
  struct braid_verbs_mr src = {0}, dst = {0};
  size_t bytes = (size_t)NWRITES * CHUNK;
  void *sbuf = aligned_alloc(4096, bytes), *dbuf = aligned_alloc(4096, bytes);
  int rc = -1;
  if (!sbuf || !dbuf || find_rails(rail, rails)) goto out;
  for (int s = 0; s < 2; s++)
    if (braid_verbs_ep_open(&rails[s], 0, NULL, &ep[s])) goto out;
  struct braid_verbs_ep_addr addr[2];
  for (int s = 0; s < 2; s++) braid_verbs_ep_addr(ep[s], &addr[s]);
  for (int s = 0; s < 2; s++)
    if (braid_verbs_ep_connect(ep[s], &addr[1 - s])) goto out;
  printf("connected: %s QP %u <-> %s QP %u\n", braid_verbs_ep_name(ep[0]), addr[0].qpn,
         braid_verbs_ep_name(ep[1]), addr[1].qpn);
  if (braid_verbs_ep_reg(ep[0], sbuf, bytes, false, &src) || braid_verbs_ep_reg(ep[1], dbuf, bytes, true, &dst)) goto out;
  if (blackhole)
    rc = test_blackhole(ep, &src, &dst);
  else
    rc = test_ctrl(ep) || test_writes(ep, &src, &dst) ? -1 : 0;
out:
  if (ep[0]) braid_verbs_ep_dereg(ep[0], &src);
  if (ep[1]) braid_verbs_ep_dereg(ep[1], &dst);
  /* Close both before freeing: the QPs are flushed and destroyed first. */
  for (int s = 0; s < 2; s++) braid_verbs_ep_close(ep[s]);
  free(sbuf);
  free(dbuf);
  return rc;
}

static void usage(FILE *f) {
  fputs("usage: braid-verbs-ep-test [--rail R] [--blackhole]\n"
        "Opens verbs endpoints on rxe_a<R> and rxe_b<R> (default R 0) in this process, connects\n"
        "them and checks control messages both ways and 64 x 256 KiB RDMA WRITE_WITH_IMM.\n"
        "--blackhole: after a warm-up prints READY, waits for a line on stdin (else 5 s), posts\n"
        "writes and prints how long until the first work-completion error.\n"
        "Exit status: 0 passed, 1 failed, 2 usage.\n", f);
}

int main(int argc, char **argv) {
  int rail = 0;
  bool blackhole = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--blackhole")) {
      blackhole = true;
    } else if (!strcmp(argv[i], "--rail") && i + 1 < argc && (rail = atoi(argv[++i])) >= 0 && rail < 100) {
      continue;
    } else {
      fprintf(stderr, "braid-verbs-ep-test: bad argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (run(rail, blackhole)) {
    printf("verbs-ep: FAIL\n");
    return 1;
  }
  printf("verbs-ep: OK\n");
  return 0;
}
