/* libFuzzer target: the transports' wire decoders on arbitrary bytes: wire/verbs.h's control
 * messages (braid_vctl_decode), immediates (braid_vimm_decode) and link message
 * (braid_vlink_rails, braid_vlink_decode), and wire/ofi.h's endpoint-address message
 * (braid_ofi_name_len, braid_ofi_name_decode).  The first byte picks the decoder (% 4), the rest
 * is its input (an immediate: the next 4 bytes, little-endian, missing ones zero).  A rejection
 * must say why; what decodes must hold the documented invariants and re-encode to exactly the
 * input: no byte is ignored, so nothing unchecked rides along.  Seeds: seed_transport_wire.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/ofi.h"
#include "wire/verbs.h"

#include "fuzz_check.h"

static char err[256];

static void rejected(void) { CHECK(err[0] && memchr(err, 0, sizeof err)); /* says why */ }

static void vctl(const uint8_t *d, size_t n) {
  struct braid_vctl m;
  if (braid_vctl_decode(d, n, &m, err, sizeof err)) return rejected();
  static const size_t bytes[] = {0, BRAID_VCTL_CTS_BYTES, BRAID_VCTL_FENCE_BYTES, BRAID_VCTL_FENCED_BYTES,
                                 BRAID_VCTL_FIN_BYTES, BRAID_VCTL_AREA_BYTES, BRAID_VCTL_MISMATCH_BYTES,
                                 BRAID_VCTL_REJOIN_BYTES, BRAID_VCTL_REJOIN_ACK_BYTES, BRAID_VCTL_JOINED_BYTES};
  CHECK(m.type >= BRAID_VCTL_CTS && m.type <= BRAID_VCTL_JOINED && n == bytes[m.type]);
  switch (m.type) {
  case BRAID_VCTL_CTS:
    CHECK(m.cts.nrails >= 1 && m.cts.nrails <= BRAID_VWIRE_RAILS);
    CHECK(m.cts.slot == m.cts.seq % BRAID_VWIRE_SLOTS);
    for (int r = m.cts.nrails; r < BRAID_VWIRE_RAILS; r++) CHECK(m.cts.rkey[r] == 0);
    break;
  case BRAID_VCTL_FENCE: CHECK(m.fence.rail < BRAID_VWIRE_RAILS); break;
  case BRAID_VCTL_FENCED:
    CHECK(m.fenced.rail < BRAID_VWIRE_RAILS);
    CHECK(((m.fenced.open | m.fenced.fin | m.fenced.posted) >> BRAID_VWIRE_SLOTS) == 0);
    break;
  case BRAID_VCTL_AREA:
    CHECK(m.area.nrails >= 1 && m.area.nrails <= BRAID_VWIRE_RAILS);
    for (int r = m.area.nrails; r < BRAID_VWIRE_RAILS; r++) CHECK(m.area.rkey[r] == 0);
    break;
  case BRAID_VCTL_REJOIN:
  case BRAID_VCTL_REJOIN_ACK:
  case BRAID_VCTL_JOINED:
    CHECK(m.rejoin.rail < BRAID_VWIRE_RAILS && m.rejoin.status <= BRAID_VREJOIN_NOT_NOW);
    if (m.type != BRAID_VCTL_JOINED && m.rejoin.status == BRAID_VREJOIN_JOINED)
      CHECK((m.rejoin.addr.link == BRAID_VADDR_LINK_IB || m.rejoin.addr.link == BRAID_VADDR_LINK_ETH) &&
            !(m.rejoin.addr.qpn >> 24) && !(m.rejoin.addr.psn >> 24));
    break;
  }
  uint8_t enc[BRAID_VCTL_MAX_BYTES];
  CHECK(braid_vctl_encode(&m, enc) == n && memcmp(enc, d, n) == 0);
  CHECK(strcmp(braid_vctl_name(m.type), "unknown") != 0);
}

static void vimm(const uint8_t *d, size_t n) {
  uint32_t imm = 0;
  for (size_t i = 0; i < 4 && i < n; i++) imm |= (uint32_t)d[i] << (8 * i);
  struct braid_vimm w;
  if (braid_vimm_decode(imm, &w, err, sizeof err)) return rejected();
  if (w.probe) {
    CHECK(imm == (uint32_t)BRAID_VIMM_PROBE_SLOT << 28);
  } else {
    CHECK(w.slot < BRAID_VWIRE_SLOTS && w.nch >= 1 && w.nch <= BRAID_VWIRE_MAX_CHUNKS && w.idx < w.nch);
  }
  CHECK(braid_vimm_encode(&w) == imm);
}

static void vlink(const uint8_t *d, size_t n) {
  int hdr = -2;
  if (n >= BRAID_VLINK_HDR_BYTES) {
    hdr = braid_vlink_rails(d, err, sizeof err);
    if (hdr < 0) rejected();
    else CHECK(hdr >= 1 && hdr <= BRAID_VWIRE_RAILS);
  }
  struct braid_verbs_ep_addr a[BRAID_VWIRE_RAILS];
  int nr = braid_vlink_decode(d, n, a, err, sizeof err);
  if (nr < 0) return rejected();
  CHECK(nr == hdr && n == (size_t)BRAID_VLINK_BYTES(nr));
  for (int r = 0; r < nr; r++) {
    CHECK(a[r].link == BRAID_VADDR_LINK_IB || a[r].link == BRAID_VADDR_LINK_ETH);
    CHECK(a[r].mtu >= BRAID_VADDR_MTU_MIN && a[r].mtu <= BRAID_VADDR_MTU_MAX);
    CHECK(a[r].qpn >> 24 == 0 && a[r].psn >> 24 == 0);
  }
  uint8_t enc[BRAID_VLINK_MAX_BYTES];
  CHECK(braid_vlink_encode(a, nr, enc) == n && memcmp(enc, d, n) == 0);
}

static void ofi_name(const uint8_t *d, size_t n) {
  int hdr = -2;
  if (n >= BRAID_OFI_NAME_HDR_BYTES) {
    hdr = braid_ofi_name_len(d, err, sizeof err);
    if (hdr < 0) rejected();
    else CHECK(hdr > BRAID_OFI_NAME_HDR_BYTES && hdr <= BRAID_OFI_NAME_MSG_MAX);
  }
  const uint8_t *name = NULL;
  int len = braid_ofi_name_decode(d, n, &name, err, sizeof err);
  if (len < 0) return rejected();
  CHECK(len >= 1 && len <= BRAID_OFI_NAME_MAX && (size_t)len + BRAID_OFI_NAME_HDR_BYTES == n);
  CHECK(hdr == (int)n && name == d + BRAID_OFI_NAME_HDR_BYTES);
  uint8_t enc[BRAID_OFI_NAME_MSG_MAX];
  CHECK(braid_ofi_name_encode(name, (size_t)len, enc) == n && memcmp(enc, d, n) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  /* a copy of exactly the input's bytes, so ASan sees any read past them */
  size_t n = size - 1;
  uint8_t *d = malloc(n ? n : 1);
  CHECK(d);
  memcpy(d, data + 1, n);
  err[0] = 0;
  switch (data[0] % 4) {
  case 0: vctl(d, n); break;
  case 1: vimm(d, n); break;
  case 2: vlink(d, n); break;
  default: ofi_name(d, n); break;
  }
  free(d);
  return 0;
}
