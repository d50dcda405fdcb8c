/* Stand-ins for what the net plugin's data path (rx.c, tx.c) calls outside itself, for the fuzz
 * targets that compile those files in (fuzz_rx, fuzz_tx_ack, with the socket stream transport):
 * no logging, a clock the harness moves, braid_comm_fail recording its cause, and no TCP_INFO or
 * rejoins (the harness's streams are socket pairs). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "log.h"
#include "net_stubs.h"
#include "param.h"
#include "comm/rejoin.h"
#include "transport/socket/sock.h"
#include "stripe/telemetry.h"

uint64_t fuzz_now_ns = 1000000000ull;
char fuzz_fail_msg[512];
int fuzz_verbose;

#ifdef BRAID_CLOCK_FAKE /* fuzz_rx, fuzz_tx_ack (test/fuzz/run.sh) */
uint64_t braid_now_ns(void) { return fuzz_now_ns; }
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *v = getenv("FUZZ_VERBOSE");
  fuzz_verbose = v && *v == '1';
  return 0;
}

ncclResult_t braid_comm_fail(struct braid_comm *c, ncclResult_t err, const char *fmt, ...) {
  if (c->err) return c->err;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fuzz_fail_msg, sizeof fuzz_fail_msg, fmt, ap);
  va_end(ap);
  c->err = err;
  if (fuzz_verbose) fprintf(stderr, "comm failed (%d): %s\n", (int)err, fuzz_fail_msg);
  return err;
}

void braid_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
               const char *fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line;
  if (!fuzz_verbose) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

void braid_rejoin_accept(struct braid_comm *c, uint64_t now) { (void)c, (void)now; }
void braid_rejoin_connect(struct braid_comm *c, uint64_t now) { (void)c, (void)now; }

const char *braid_param_str(enum braid_param_id id) {
  (void)id;
  return "";
}
int64_t braid_param_int(enum braid_param_id id) {
  (void)id; /* BRAID_SOCKET_THREADS 0: no helper threads, the harness drives every call */
  return 0;
}
const char *braid_param_env(enum braid_param_id id) {
  (void)id;
  return "";
}
const char *braid_param_from(enum braid_param_id id) {
  (void)id; /* no variable set */
  return NULL;
}
int braid_sock_poke(int fd) {
  (void)fd;
  return 0;
}
bool braid_sock_retransmitting(int fd) {
  (void)fd;
  return false;
}
void braid_sock_short_queue(int fd) { (void)fd; }
void braid_telemetry_tick(uint64_t now_ns) { (void)now_ns; }
bool braid_telemetry_on(void) { return false; }
void braid_telemetry_rejoined(struct braid_rail_stats *s, uint64_t now_ns) { (void)s, (void)now_ns; }
struct braid_server_stats *braid_telemetry_add_server(int dev, int rank, const char *server) {
  (void)dev, (void)rank, (void)server;
  return NULL;
}
void braid_telemetry_remove_server(struct braid_server_stats *s) { (void)s; }

/* fuzz_collnet_client passes no memory handles: its buffers are host memory, never staged. */
char *braid_coll_mr_host(void *mh, void *p, size_t len, int input);
char *braid_coll_mr_host(void *mh, void *p, size_t len, int input) {
  (void)mh, (void)len, (void)input;
  return p;
}
int braid_coll_mr_done(void *mh, void *p, size_t len);
int braid_coll_mr_done(void *mh, void *p, size_t len) {
  (void)mh, (void)p, (void)len;
  return 0;
}

/* fuzz_collnet_client: a lost server's re-admission (collnet_rejoin.c) is compiled in; with no
 * token it never opens a connection, so an admission word in a RESULT finds the server without
 * one (or never lost) and the handshake itself is not reached. */
#include "collnet/ps_hs.h"
int braid_coll_token(char *buf, size_t n);
int braid_coll_token(char *buf, size_t n) {
  if (n) buf[0] = 0;
  return 0;
}
void ps_hs_start(struct ps_hs *h, int i, const struct braid_iface *const *rails, int nrails, uint64_t now) {
  (void)i, (void)rails, (void)nrails, (void)now;
  ps_hs_fail(h, "%s", "not in the fuzzer");
}
void ps_hs_step(struct ps_hs *h, int i, const char *token, const struct braid_iface *const *rails,
                int nrails, uint64_t now) {
  (void)h, (void)i, (void)token, (void)rails, (void)nrails, (void)now;
}
void ps_hs_fail(struct ps_hs *h, const char *fmt, const char *detail) {
  snprintf(h->why, sizeof h->why, fmt, detail);
  h->st = PS_HS_FAILED;
}
void braid_telemetry_server_rejoined(struct braid_server_stats *s, uint64_t now_ns) { (void)s, (void)now_ns; }
