/* The verbs transport's wire (layouts in verbs.h). */
#include "wire/verbs.h"

#include <stdio.h>
#include <string.h>

#include "wire/le.h"

#define VLINK_MAGIC 0x41565242u /* "BRVA" */

#define FAIL(...) return snprintf(err, errlen, __VA_ARGS__), -1

/* ---------- the link message ---------- */

enum { A_QPN = 0, A_PSN = 4, A_LID = 8, A_LINK = 10, A_MTU = 11, A_GID = 12 };
_Static_assert(A_GID + 16 == BRAID_VADDR_BYTES, "rail address record layout");
_Static_assert(BRAID_VLINK_HDR_BYTES == 8 && BRAID_VLINK_MAX_BYTES == 232, "link message layout");

static void addr_put(uint8_t *p, const struct braid_verbs_ep_addr *a) {
  braid_le_put32(p + A_QPN, a->qpn);
  braid_le_put32(p + A_PSN, a->psn);
  braid_le_put16(p + A_LID, a->lid);
  p[A_LINK] = a->link;
  p[A_MTU] = a->mtu;
  memcpy(p + A_GID, a->gid, 16);
}

/* One address record; what names it in a reason ("rail 2", "REJOIN"). */
static int addr_get(const uint8_t *p, struct braid_verbs_ep_addr *a, const char *what, char *err, size_t errlen) {
  a->qpn = braid_le_get32(p + A_QPN);
  a->psn = braid_le_get32(p + A_PSN);
  a->lid = braid_le_get16(p + A_LID);
  a->link = p[A_LINK];
  a->mtu = p[A_MTU];
  memcpy(a->gid, p + A_GID, 16);
  if (a->link != BRAID_VADDR_LINK_IB && a->link != BRAID_VADDR_LINK_ETH)
    FAIL("%s: unknown link layer %u", what, a->link);
  if (a->mtu < BRAID_VADDR_MTU_MIN || a->mtu > BRAID_VADDR_MTU_MAX) FAIL("%s: unknown MTU code %u", what, a->mtu);
  if (a->qpn >> 24 || a->psn >> 24) FAIL("%s: queue pair 0x%x, PSN 0x%x (24 bits each)", what, a->qpn, a->psn);
  return 0;
}

size_t braid_vlink_encode(const struct braid_verbs_ep_addr *a, int n, uint8_t *out) {
  braid_le_put32(out, VLINK_MAGIC);
  braid_le_put32(out + 4, (uint32_t)n);
  for (int r = 0; r < n; r++) addr_put(out + BRAID_VLINK_BYTES((size_t)r), &a[r]);
  return BRAID_VLINK_BYTES((size_t)n);
}

int braid_vlink_rails(const uint8_t *hdr, char *err, size_t errlen) {
  if (braid_le_get32(hdr) != VLINK_MAGIC)
    FAIL("not a verbs link message (magic 0x%08x)", braid_le_get32(hdr));
  uint32_t n = braid_le_get32(hdr + 4);
  if (n < 1 || n > BRAID_VWIRE_RAILS)
    FAIL("verbs link message for %u rails (1 to %d)", n, BRAID_VWIRE_RAILS);
  return (int)n;
}

int braid_vlink_decode(const uint8_t *in, size_t len, struct braid_verbs_ep_addr *out, char *err,
                       size_t errlen) {
  if (len < BRAID_VLINK_HDR_BYTES) FAIL("verbs link message of %zu bytes", len);
  int n = braid_vlink_rails(in, err, errlen);
  if (n < 0) return -1;
  if (len != BRAID_VLINK_BYTES((size_t)n))
    FAIL("verbs link message of %zu bytes for %d rails (%d bytes)", len, n, BRAID_VLINK_BYTES(n));
  for (int r = 0; r < n; r++) {
    char what[24];
    snprintf(what, sizeof what, "rail %d", r);
    if (addr_get(in + BRAID_VLINK_BYTES((size_t)r), &out[r], what, err, errlen)) return -1;
  }
  return n;
}

/* ---------- control messages ---------- */

static const struct {
  const char *name;
  size_t bytes;
} vctl[] = {
    [BRAID_VCTL_CTS] = {"CTS", BRAID_VCTL_CTS_BYTES},
    [BRAID_VCTL_FENCE] = {"FENCE", BRAID_VCTL_FENCE_BYTES},
    [BRAID_VCTL_FENCED] = {"FENCED", BRAID_VCTL_FENCED_BYTES},
    [BRAID_VCTL_FIN] = {"FIN", BRAID_VCTL_FIN_BYTES},
    [BRAID_VCTL_AREA] = {"AREA", BRAID_VCTL_AREA_BYTES},
    [BRAID_VCTL_MISMATCH] = {"MISMATCH", BRAID_VCTL_MISMATCH_BYTES},
    [BRAID_VCTL_REJOIN] = {"REJOIN", BRAID_VCTL_REJOIN_BYTES},
    [BRAID_VCTL_REJOIN_ACK] = {"REJOIN_ACK", BRAID_VCTL_REJOIN_ACK_BYTES},
    [BRAID_VCTL_JOINED] = {"JOINED", BRAID_VCTL_JOINED_BYTES},
};
#define VCTL_TYPES (int)(sizeof vctl / sizeof vctl[0])

_Static_assert(24 + 4 * BRAID_VWIRE_RAILS == BRAID_VCTL_CTS_BYTES, "CTS layout");
_Static_assert(8 + 4 * BRAID_VWIRE_SLOTS == BRAID_VCTL_FENCED_BYTES, "FENCED layout");
_Static_assert(4 + 4 == BRAID_VCTL_FIN_BYTES, "FIN layout");
_Static_assert(24 + 4 * BRAID_VWIRE_RAILS == BRAID_VCTL_AREA_BYTES, "AREA layout");
_Static_assert(16 + 8 == BRAID_VCTL_MISMATCH_BYTES, "MISMATCH layout");
_Static_assert(4 + BRAID_VADDR_BYTES == BRAID_VCTL_REJOIN_BYTES, "REJOIN layout");
_Static_assert(8 + BRAID_VADDR_BYTES + 4 == BRAID_VCTL_REJOIN_ACK_BYTES, "REJOIN_ACK layout");
_Static_assert(BRAID_VCTL_CTS_BYTES <= BRAID_VCTL_MAX_BYTES && BRAID_VCTL_AREA_BYTES <= BRAID_VCTL_MAX_BYTES &&
                   BRAID_VCTL_FENCED_BYTES <= BRAID_VCTL_MAX_BYTES &&
                   BRAID_VCTL_MISMATCH_BYTES <= BRAID_VCTL_MAX_BYTES,
               "the largest control message");
_Static_assert(BRAID_VWIRE_SLOTS <= 8, "a FENCED mask bit per slot, the rest reserved");

const char *braid_vctl_name(int type) {
  return type >= 1 && type < VCTL_TYPES ? vctl[type].name : "unknown";
}

size_t braid_vctl_encode(const struct braid_vctl *m, uint8_t out[BRAID_VCTL_MAX_BYTES]) {
  if (m->type < 1 || m->type >= VCTL_TYPES) return 0;
  size_t len = vctl[m->type].bytes;
  memset(out, 0, len);
  out[0] = m->type;
  switch (m->type) {
  case BRAID_VCTL_CTS:
    out[1] = m->cts.slot;
    out[2] = m->cts.nrails;
    braid_le_put32(out + 4, m->cts.seq);
    braid_le_put64(out + 8, m->cts.addr);
    braid_le_put64(out + 16, m->cts.cap);
    for (int r = 0; r < BRAID_VWIRE_RAILS; r++) braid_le_put32(out + 24 + 4 * r, m->cts.rkey[r]);
    break;
  case BRAID_VCTL_FENCE:
    out[1] = m->fence.rail;
    out[2] = m->fence.gen;
    break;
  case BRAID_VCTL_FENCED:
    out[1] = m->fenced.rail;
    braid_le_put16(out + 2, m->fenced.open);
    braid_le_put16(out + 4, m->fenced.fin);
    braid_le_put16(out + 6, m->fenced.posted);
    for (int k = 0; k < BRAID_VWIRE_SLOTS; k++) braid_le_put32(out + 8 + 4 * k, m->fenced.seq[k]);
    break;
  case BRAID_VCTL_FIN: braid_le_put32(out + 4, m->fin.seq); break;
  case BRAID_VCTL_AREA:
    out[1] = m->area.nrails;
    braid_le_put64(out + 8, m->area.addr);
    braid_le_put64(out + 16, m->area.len);
    for (int r = 0; r < BRAID_VWIRE_RAILS; r++) braid_le_put32(out + 24 + 4 * r, m->area.rkey[r]);
    break;
  case BRAID_VCTL_MISMATCH:
    braid_le_put32(out + 4, m->mismatch.seq);
    braid_le_put64(out + 8, m->mismatch.size);
    braid_le_put64(out + 16, m->mismatch.cap);
    break;
  case BRAID_VCTL_REJOIN:
  case BRAID_VCTL_REJOIN_ACK:
  case BRAID_VCTL_JOINED:
    out[1] = m->rejoin.rail;
    out[2] = m->rejoin.gen;
    if (m->type == BRAID_VCTL_REJOIN) addr_put(out + 4, &m->rejoin.addr);
    if (m->type == BRAID_VCTL_REJOIN_ACK) {
      out[3] = m->rejoin.status;
      braid_le_put32(out + 4, m->rejoin.fenced);
      if (m->rejoin.status == BRAID_VREJOIN_JOINED) addr_put(out + 8, &m->rejoin.addr);
    }
    break;
  }
  return len;
}

/* The rkeys of a CTS or AREA: nrails (checked first) of them, zero after. */
static int rkeys_get(const uint8_t *p, unsigned nrails, uint32_t *rkey, const char *what, char *err,
                     size_t errlen) {
  if (nrails < 1 || nrails > BRAID_VWIRE_RAILS) FAIL("%s for %u rails (1 to %d)", what, nrails, BRAID_VWIRE_RAILS);
  for (unsigned r = 0; r < BRAID_VWIRE_RAILS; r++) {
    rkey[r] = braid_le_get32(p + 4 * r);
    if (r >= nrails && rkey[r]) FAIL("%s for %u rails has a key for rail %u", what, nrails, r);
  }
  return 0;
}

int braid_vctl_decode(const uint8_t *in, size_t len, struct braid_vctl *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (len == 0) FAIL("empty control message");
  uint8_t t = in[0];
  if (t < 1 || t >= VCTL_TYPES) FAIL("control message of unknown type %u (%zu bytes)", t, len);
  if (len != vctl[t].bytes) FAIL("%s of %zu bytes (it has %zu)", vctl[t].name, len, vctl[t].bytes);
  m->type = t;
  switch (t) {
  case BRAID_VCTL_CTS: {
    struct braid_vctl_cts *c = &m->cts;
    c->slot = in[1];
    c->nrails = in[2];
    c->seq = braid_le_get32(in + 4);
    c->addr = braid_le_get64(in + 8);
    c->cap = braid_le_get64(in + 16);
    if (in[3]) FAIL("CTS with reserved byte 0x%02x", in[3]);
    if (rkeys_get(in + 24, c->nrails, c->rkey, "CTS", err, errlen)) return -1;
    if (c->slot != c->seq % BRAID_VWIRE_SLOTS) FAIL("CTS in slot %u for receive %u", c->slot, c->seq);
    return 0;
  }
  case BRAID_VCTL_FENCE:
    m->fence.rail = in[1];
    m->fence.gen = in[2];
    if (m->fence.rail >= BRAID_VWIRE_RAILS) FAIL("FENCE of rail %u", m->fence.rail);
    if (in[3]) FAIL("FENCE with reserved byte 0x%02x", in[3]);
    return 0;
  case BRAID_VCTL_FENCED: {
    struct braid_vctl_fenced *f = &m->fenced;
    f->rail = in[1];
    f->open = braid_le_get16(in + 2);
    f->fin = braid_le_get16(in + 4);
    f->posted = braid_le_get16(in + 6);
    for (int k = 0; k < BRAID_VWIRE_SLOTS; k++) f->seq[k] = braid_le_get32(in + 8 + 4 * k);
    if (f->rail >= BRAID_VWIRE_RAILS) FAIL("FENCED of rail %u", f->rail);
    uint16_t slots = (uint16_t)((1u << BRAID_VWIRE_SLOTS) - 1);
    if ((f->open | f->fin | f->posted) & ~slots)
      FAIL("FENCED names slots beyond %d (open 0x%x, fin 0x%x, posted 0x%x)", BRAID_VWIRE_SLOTS - 1,
           f->open, f->fin, f->posted);
    return 0;
  }
  case BRAID_VCTL_FIN:
    m->fin.seq = braid_le_get32(in + 4);
    if (!braid_le_zero(in + 1, 3)) FAIL("FIN with reserved bytes set");
    return 0;
  case BRAID_VCTL_AREA: {
    struct braid_vctl_area *a = &m->area;
    a->nrails = in[1];
    a->addr = braid_le_get64(in + 8);
    a->len = braid_le_get64(in + 16);
    if (!braid_le_zero(in + 2, 6)) FAIL("AREA with reserved bytes set");
    return rkeys_get(in + 24, a->nrails, a->rkey, "AREA", err, errlen);
  }
  case BRAID_VCTL_REJOIN:
  case BRAID_VCTL_REJOIN_ACK:
  case BRAID_VCTL_JOINED: {
    struct braid_vctl_rejoin *j = &m->rejoin;
    const char *name = vctl[t].name;
    j->rail = in[1];
    j->gen = in[2];
    if (j->rail >= BRAID_VWIRE_RAILS) FAIL("%s of rail %u", name, j->rail);
    if (t == BRAID_VCTL_REJOIN_ACK) {
      j->status = in[3];
      j->fenced = braid_le_get32(in + 4);
      if (j->status > BRAID_VREJOIN_NOT_NOW) FAIL("REJOIN_ACK with status %u", j->status);
      if (!braid_le_zero(in + 36, 4)) FAIL("REJOIN_ACK with reserved bytes set");
      if (j->status == BRAID_VREJOIN_NOT_NOW) {
        if (!braid_le_zero(in + 8, BRAID_VADDR_BYTES)) FAIL("REJOIN_ACK (not now) with an address");
        return 0;
      }
    } else if (in[3]) {
      FAIL("%s with reserved byte 0x%02x", name, in[3]);
    }
    if (t == BRAID_VCTL_JOINED) return 0;
    return addr_get(in + (t == BRAID_VCTL_REJOIN ? 4 : 8), &j->addr, name, err, errlen);
  }
  default: /* BRAID_VCTL_MISMATCH */
    m->mismatch.seq = braid_le_get32(in + 4);
    m->mismatch.size = braid_le_get64(in + 8);
    m->mismatch.cap = braid_le_get64(in + 16);
    if (!braid_le_zero(in + 1, 3)) FAIL("MISMATCH with reserved bytes set");
    return 0;
  }
}

/* ---------- the immediate ---------- */

#define IMM_SLOT_SHIFT 28
#define IMM_NCH_SHIFT 14
#define IMM_FIELD 0x3fffu
_Static_assert(BRAID_VWIRE_MAX_CHUNKS - 1 == IMM_FIELD && BRAID_VWIRE_SLOTS <= BRAID_VIMM_PROBE_SLOT &&
                   BRAID_VIMM_PROBE_SLOT < 16 && IMM_SLOT_SHIFT == 2 * IMM_NCH_SHIFT,
               "immediate layout: 4 + 14 + 14 bits");

uint32_t braid_vimm_encode(const struct braid_vimm *w) {
  if (w->probe) return (uint32_t)BRAID_VIMM_PROBE_SLOT << IMM_SLOT_SHIFT;
  return (uint32_t)w->slot << IMM_SLOT_SHIFT | ((w->nch - 1) & IMM_FIELD) << IMM_NCH_SHIFT | (w->idx & IMM_FIELD);
}

int braid_vimm_decode(uint32_t imm, struct braid_vimm *w, char *err, size_t errlen) {
  unsigned slot = imm >> IMM_SLOT_SHIFT;
  *w = (struct braid_vimm){.slot = (uint8_t)slot, .nch = ((imm >> IMM_NCH_SHIFT) & IMM_FIELD) + 1,
                           .idx = imm & IMM_FIELD};
  if (slot == BRAID_VIMM_PROBE_SLOT) {
    if (imm << 4) FAIL("probe immediate 0x%08x with other bits set", imm);
    *w = (struct braid_vimm){.probe = true};
    return 0;
  }
  if (slot >= BRAID_VWIRE_SLOTS) FAIL("slot %u, chunk %u of %u", slot, w->idx, w->nch);
  if (w->idx >= w->nch) FAIL("slot %u, chunk %u of %u", slot, w->idx, w->nch);
  return 0;
}
