/* Stand-ins for what the net plugin's data path (rx.c, tx.c) calls outside itself, for the fuzz
 * targets that compile those files in (fuzz_rx, fuzz_tx_ack): no logging, a clock the harness
 * moves, braid_comm_fail recording its cause, and no libfabric (the harness comms never use ofi:
 * any call there is a harness bug and aborts). */
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

#define NO_OFI(name) (fprintf(stderr, "fuzz harness: %s called (no ofi here)\n", name), abort())

bool braid_ofi_rxm(void) { return false; }
void braid_ofi_ep_forget(struct braid_ofi_ep *e, const void *addr, size_t len) {
  (void)e, (void)addr, (void)len;
}
void braid_ofi_link_forget(struct braid_comm *c, const void *addr, size_t len) {
  (void)c, (void)addr, (void)len;
}
void braid_ofi_link_close(struct braid_comm *c, struct braid_stream *s) { (void)c, (void)s; }
int braid_ofi_link_ready(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                         size_t whylen) {
  (void)c, (void)s, (void)now, (void)why, (void)whylen;
  NO_OFI("braid_ofi_link_ready");
}
int braid_ofi_send_hdr(struct braid_ofi_ep *e, const uint8_t hdr[BRAID_OFI_HDR_BYTES]) {
  (void)e, (void)hdr;
  NO_OFI("braid_ofi_send_hdr");
}
int braid_ofi_send_payload(struct braid_ofi_ep *e, const void *buf, size_t len, uint64_t tag,
                           void *ctx) {
  (void)e, (void)buf, (void)len, (void)tag, (void)ctx;
  NO_OFI("braid_ofi_send_payload");
}
int braid_ofi_recv_payload(struct braid_ofi_ep *e, void *buf, size_t len, uint64_t tag, void *ctx,
                           bool app) {
  (void)e, (void)buf, (void)len, (void)tag, (void)ctx, (void)app;
  NO_OFI("braid_ofi_recv_payload");
}
void braid_ofi_cancel(struct braid_ofi_ep *e, void *ctx) {
  (void)e, (void)ctx;
  NO_OFI("braid_ofi_cancel");
}
int braid_ofi_progress(struct braid_ofi_ep *e, struct braid_ofi_done *out, int max) {
  (void)e, (void)out, (void)max;
  NO_OFI("braid_ofi_progress");
}
const uint8_t *braid_ofi_hdr_peek(struct braid_ofi_ep *e) {
  (void)e;
  NO_OFI("braid_ofi_hdr_peek");
}
void braid_ofi_hdr_consume(struct braid_ofi_ep *e) {
  (void)e;
  NO_OFI("braid_ofi_hdr_consume");
}
const char *braid_ofi_error(const struct braid_ofi_ep *e) {
  (void)e;
  return "no ofi in the fuzz harness";
}

void braid_rejoin_accept(struct braid_comm *c, uint64_t now) { (void)c, (void)now; }
void braid_rejoin_connect(struct braid_comm *c, uint64_t now) { (void)c, (void)now; }

const char *braid_param_str(enum braid_param_id id) {
  (void)id;
  return "";
}
const char *braid_param_env(enum braid_param_id id) {
  (void)id;
  return "";
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
