/* Writes fuzz_transport_wire's seed corpus: one file per record kind, made by the encoders
 * (wire/verbs.h, wire/ofi.h), each prefixed with the byte that picks its decoder.
 *   cc -std=c11 -D_GNU_SOURCE -iquote net_plugin test/fuzz/seed_transport_wire.c \
 *      net_plugin/wire/verbs.c net_plugin/wire/ofi.c -o /tmp/seed && \
 *   /tmp/seed test/fuzz/corpus/fuzz_transport_wire */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "wire/ofi.h"
#include "wire/verbs.h"

enum { PICK_VCTL = 0, PICK_VIMM = 1, PICK_VLINK = 2, PICK_OFI = 3 };

static const char *dir;
static int failed;

static void put(const char *name, uint8_t pick, const uint8_t *b, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fputc(pick, f) == EOF || fwrite(b, 1, n, f) != n || fclose(f)) {
    perror(path);
    failed = 1;
  }
}

static void ctl(const char *name, const struct braid_vctl *m) {
  uint8_t b[BRAID_VCTL_MAX_BYTES];
  put(name, PICK_VCTL, b, braid_vctl_encode(m, b));
}

static void imm(const char *name, struct braid_vimm w) {
  uint32_t v = braid_vimm_encode(&w);
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  put(name, PICK_VIMM, b, sizeof b);
}

static void link_msg(const char *name, int n) {
  struct braid_verbs_ep_addr a[BRAID_VWIRE_RAILS];
  memset(a, 0, sizeof a);
  for (int r = 0; r < n; r++) {
    a[r].qpn = 0x11 + (uint32_t)r;
    a[r].psn = 0x654321u ^ (uint32_t)r;
    a[r].lid = (uint16_t)(n > 2 ? 0 : r + 1);
    a[r].link = n > 2 ? BRAID_VADDR_LINK_ETH : BRAID_VADDR_LINK_IB;
    a[r].mtu = n > 2 ? 3 : 5;
    for (int i = 0; i < 16; i++) a[r].gid[i] = (uint8_t)(i < 10 ? 0 : i < 12 ? 0xff : 10 * r + i);
  }
  uint8_t b[BRAID_VLINK_MAX_BYTES];
  put(name, PICK_VLINK, b, braid_vlink_encode(a, n, b));
}

static void ofi(const char *name, size_t len) {
  uint8_t addr[BRAID_OFI_NAME_MAX], b[BRAID_OFI_NAME_MSG_MAX];
  for (size_t i = 0; i < len; i++) addr[i] = (uint8_t)(i * 37 + 2);
  put(name, PICK_OFI, b, braid_ofi_name_encode(addr, len, b));
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  struct braid_vctl m;
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_CTS;
  m.cts = (struct braid_vctl_cts){.slot = 3, .nrails = 2, .seq = 11, .addr = 0x7f0000100000ull,
                                  .cap = 1 << 20, .rkey = {0x1234, 0x5678}};
  ctl("ctl_cts", &m);
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_FENCE;
  m.fence.rail = 1;
  ctl("ctl_fence", &m);
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_FENCED;
  m.fenced = (struct braid_vctl_fenced){.rail = 2, .open = 0x06, .fin = 0x02, .posted = 0xff,
                                        .seq = {8, 9, 10, 11, 4, 5, 6, 7}};
  ctl("ctl_fenced", &m);
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_FIN;
  m.fin.seq = 42;
  ctl("ctl_fin", &m);
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_AREA;
  m.area = (struct braid_vctl_area){.nrails = 4, .addr = 0x7f0000200000ull, .len = 128 << 10,
                                    .rkey = {1, 2, 3, 4}};
  ctl("ctl_area", &m);
  memset(&m, 0, sizeof m);
  m.type = BRAID_VCTL_MISMATCH;
  m.mismatch = (struct braid_vctl_mismatch){.seq = 7, .size = 3 << 20, .cap = 1 << 20};
  ctl("ctl_mismatch", &m);
  imm("imm_data", (struct braid_vimm){.slot = 5, .nch = 9, .idx = 8});
  imm("imm_probe", (struct braid_vimm){.probe = true});
  link_msg("link_1rail", 1);
  link_msg("link_4rails", 4);
  ofi("ofi_tcp", 16);
  ofi("ofi_max", BRAID_OFI_NAME_MAX);
  return failed;
}
