/* libFuzzer target: the verbs connection's handling of what the peer sends (net_plugin/
 * verbs_conn.c, with sched.c, compiled in over a fake endpoint: no device needed).  The peer's
 * control messages (CTS, FENCE, FENCED, FIN, AREA, MISMATCH) and writes with immediates reach
 * on_ctl / r_imm as completion events the harness queues on the fake rails.
 *
 * The input is a script: a configuration byte (sender or receiver, 1 to 4 rails, chunk size),
 * then commands (an opcode byte and its argument bytes; missing bytes read as zero): control
 * messages as arbitrary bytes of arbitrary length, or well-formed ones with fuzzer-chosen fields
 * (sequence numbers near the connection's, slots, rails, capacities, open/fin/posted masks);
 * writes with immediates, structured (slot, chunk count, index, length) or raw; completions of
 * what the connection posted (in order, out of order, with errors); isend / irecv / test;
 * progress.  Control messages and immediates are built by wire/verbs.h's encoders.  Checked,
 * besides the sanitizers:
 * - every control message and immediate delivered goes through wire/verbs.h's decoder too: a
 *   rejection says why, and what it accepts re-encodes to exactly the bytes delivered;
 * - a control message this side never accepts (a type for the other side, a wrong length, a CTS
 *   whose slot or rail count does not match, a FENCE/FENCED for a rail that does not exist, an
 *   AREA for 0 or more than 8 rails, a reserved field set), a write that fits no receive and a
 *   probe with stray bits fail the connection at the progress call that reads them;
 * - a MISMATCH fails the receiver as a usage error; a CTS smaller than its send fails the sender
 *   as a usage error and sends the receiver a MISMATCH;
 * - a receive reported done has a size within its capacity. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_stubs.h"
#include "transport/verbs/verbs_conn.h"
#include "transport/verbs/verbs_ep.h"
#include "transport/verbs/verbs_flush.h"

#include "fuzz_check.h"
#include "fuzz_script.h"

/* The connection's control messages (wire/verbs.h). */
enum { CTL_CTS = BRAID_VCTL_CTS, CTL_FENCE = BRAID_VCTL_FENCE, CTL_FENCED = BRAID_VCTL_FENCED,
       CTL_FIN = BRAID_VCTL_FIN, CTL_AREA = BRAID_VCTL_AREA, CTL_MISMATCH = BRAID_VCTL_MISMATCH,
       CTL_REJOIN = BRAID_VCTL_REJOIN, CTL_REJOIN_ACK = BRAID_VCTL_REJOIN_ACK, CTL_JOINED = BRAID_VCTL_JOINED };
#define SZ_CTS BRAID_VCTL_CTS_BYTES
#define SZ_FENCE BRAID_VCTL_FENCE_BYTES
#define SZ_FENCED BRAID_VCTL_FENCED_BYTES
#define SZ_FIN BRAID_VCTL_FIN_BYTES
#define SZ_AREA BRAID_VCTL_AREA_BYTES
#define SZ_MISMATCH BRAID_VCTL_MISMATCH_BYTES
#define SZ_REJOIN BRAID_VCTL_REJOIN_BYTES
#define SZ_REJOIN_ACK BRAID_VCTL_REJOIN_ACK_BYTES
#define SZ_JOINED BRAID_VCTL_JOINED_BYTES

/* ---------- the fake endpoint ---------- */

#define EVQ 64
#define POSTQ 256
struct braid_verbs_ep {
  struct braid_verbs_ev ev[EVQ];
  int nev;
  uint64_t posted[POSTQ]; /* cookies of sends and writes not yet completed */
  uint8_t posted_type[POSTQ];
  int nposted;
  bool fenced;
};
static int mismatch_sent; /* MISMATCH control messages the connection sent */
static struct braid_verbs_ep *eps[BRAID_VC_MAX_RAILS]; /* in rail order: opened in that order */
static int nopen;

int braid_verbs_ep_open(const struct braid_verbs_rail *rail, int depth, const struct braid_verbs_qos *qos,
                        struct braid_verbs_ep **out) {
  (void)rail, (void)depth, (void)qos;
  *out = calloc(1, sizeof **out);
  CHECK(*out && nopen < BRAID_VC_MAX_RAILS);
  eps[nopen++] = *out;
  return 0;
}
void braid_verbs_ep_close(struct braid_verbs_ep *ep) { free(ep); }
void braid_verbs_ep_addr(const struct braid_verbs_ep *ep, struct braid_verbs_ep_addr *out) {
  (void)ep;
  memset(out, 0, sizeof *out);
}
int braid_verbs_ep_connect(struct braid_verbs_ep *ep, const struct braid_verbs_ep_addr *peer) {
  (void)ep, (void)peer;
  return 0;
}
int braid_verbs_ep_reg(struct braid_verbs_ep *ep, void *buf, size_t len, bool remote, struct braid_verbs_mr *out) {
  (void)ep, (void)remote;
  *out = (struct braid_verbs_mr){.addr = buf, .len = len, .lkey = 1, .rkey = 2};
  return 0;
}
void braid_verbs_ep_dereg(struct braid_verbs_ep *ep, struct braid_verbs_mr *mr) { (void)ep, (void)mr; }
int braid_verbs_ep_reg_dmabuf(struct braid_verbs_ep *ep, void *buf, size_t len, uint64_t offset, int fd, bool remote,
                              struct braid_verbs_mr *out) {
  (void)offset, (void)fd;
  return braid_verbs_ep_reg(ep, buf, len, remote, out);
}
static int post(struct braid_verbs_ep *ep, uint64_t cookie, uint8_t type) {
  if (ep->fenced) return 0; /* flushed: its completion never comes (the drain is assumed) */
  if (ep->nposted == POSTQ) return 1;
  ep->posted_type[ep->nposted] = type;
  ep->posted[ep->nposted++] = cookie;
  return 0;
}
int braid_verbs_ep_send(struct braid_verbs_ep *ep, const void *msg, size_t len, uint64_t cookie) {
  CHECK(len >= 1 && len <= BRAID_VERBS_CTRL_MAX);
  uint8_t type = ((const uint8_t *)msg)[0];
  if (type == CTL_MISMATCH) mismatch_sent++;
  return post(ep, cookie, type);
}
int braid_verbs_ep_write_imm(struct braid_verbs_ep *ep, const struct braid_verbs_mr *mr, size_t off,
                             size_t len, uint64_t raddr, uint32_t rkey, uint32_t imm, uint64_t cookie) {
  (void)raddr, (void)rkey, (void)imm;
  if (len) CHECK(mr && off <= mr->len && len <= mr->len - off); /* inside its registration */
  return post(ep, cookie, 0);
}
int braid_verbs_ep_poll(struct braid_verbs_ep *ep, struct braid_verbs_ev *ev, int max) {
  int n = ep->nev < max ? ep->nev : max;
  memcpy(ev, ep->ev, (size_t)n * sizeof *ev);
  memmove(ep->ev, ep->ev + n, (size_t)(ep->nev - n) * sizeof *ev);
  ep->nev -= n;
  return n;
}
bool braid_verbs_ep_failed(const struct braid_verbs_ep *ep) { return ep->fenced; }
int braid_verbs_ep_port_events(struct braid_verbs_ep *ep, char *why, size_t whylen) {
  (void)ep, (void)why, (void)whylen;
  return 0;
}
int braid_verbs_ep_fence(struct braid_verbs_ep *ep) {
  ep->fenced = true;
  ep->nposted = 0;
  return 0;
}
bool braid_verbs_ep_drained(const struct braid_verbs_ep *ep) { (void)ep; return true; }
bool braid_verbs_ep_port_ready(struct braid_verbs_ep *ep, char *why, size_t whylen) {
  (void)ep, (void)why, (void)whylen;
  return true;
}
int braid_verbs_ep_renew(struct braid_verbs_ep *ep) {
  ep->fenced = false;
  ep->nposted = 0;
  return 0;
}
const char *braid_verbs_ep_name(const struct braid_verbs_ep *ep) { (void)ep; return "fake:1"; }
int braid_verbs_ep_recv_posted(const struct braid_verbs_ep *ep) { (void)ep; return 64; }

/* ---------- the harness ---------- */

static struct braid_vc *vc;
static int nrails;
static bool sender;
static size_t chunk;
static uint32_t next_seq; /* the connection's next isend / irecv */
#define NBUF 8
static char *bufs[NBUF];
static size_t caps[NBUF];
static struct braid_vc_mem *mems[NBUF];
static int reqs[BRAID_VC_SLOTS];
static size_t req_cap[BRAID_VC_SLOTS];
static bool req_live[BRAID_VC_SLOTS];
static bool failed;
/* per slot: the newest well-formed CTS delivered (the connection ignores any not newer) */
static bool cts_seen[BRAID_VC_SLOTS];
static uint32_t cts_seq[BRAID_VC_SLOTS];
static void cts_note(uint32_t seq) {
  int k = (int)(seq % BRAID_VC_SLOTS);
  if (!cts_seen[k] || (int32_t)(seq - cts_seq[k]) > 0) cts_seen[k] = true, cts_seq[k] = seq;
}
static bool cts_fresh(uint32_t seq) { /* a CTS for seq would count */
  int k = (int)(seq % BRAID_VC_SLOTS);
  return !cts_seen[k] || (int32_t)(seq - cts_seq[k]) > 0;
}
static int progress(void);

static void push(int r, const struct braid_verbs_ev *e) {
  struct braid_verbs_ep *ep = eps[r];
  if (ep->nev == EVQ) progress();
  ep->ev[ep->nev++] = *e;
}

static int progress(void) {
  int rc = braid_vc_progress(vc);
  if (rc) failed = true;
  return rc;
}

static void must_fail(const char *what) {
  if (progress() == 0) {
    fprintf(stderr, "%s was accepted\n", what);
    CHECK(!"garbage accepted by the verbs connection");
  }
}

/* Whether this side accepts a control message of this type and length at all. */
static bool ctl_shape_ok(uint8_t type, uint32_t len) {
  if (sender) return (type == CTL_CTS && len == SZ_CTS) || (type == CTL_AREA && len == SZ_AREA) ||
                     (type == CTL_FENCED && len == SZ_FENCED) || (type == CTL_REJOIN_ACK && len == SZ_REJOIN_ACK);
  return (type == CTL_FENCE && len == SZ_FENCE) || (type == CTL_MISMATCH && len == SZ_MISMATCH) ||
         (type == CTL_FIN && len == SZ_FIN) || (type == CTL_REJOIN && len == SZ_REJOIN) ||
         (type == CTL_JOINED && len == SZ_JOINED);
}

/* Delivers a control message; returns whether wire/verbs.h's decoder accepts it (then it
 * re-encodes to exactly these bytes: no byte is ignored). */
static bool ctl(int r, const uint8_t *d, uint32_t len) {
  struct braid_verbs_ev e = {.kind = BRAID_VERBS_EV_CTRL, .len = len};
  memcpy(e.data, d, len);
  push(r, &e);
  struct braid_vctl m;
  char err[128] = "";
  if (braid_vctl_decode(d, len, &m, err, sizeof err)) {
    CHECK(err[0] && memchr(err, 0, sizeof err)); /* a rejection always says why */
    return false;
  }
  uint8_t enc[BRAID_VCTL_MAX_BYTES];
  CHECK(braid_vctl_encode(&m, enc) == len && memcmp(enc, d, len) == 0);
  return true;
}

/* A slot mask of a FENCED: bits 8..15 (reserved) set now and then. */
static uint16_t rd_mask(void) {
  uint8_t lo = rd8(), hi = rd8();
  return (uint16_t)(lo | (hi > 0xf0 ? hi << 8 : 0));
}

static uint32_t near_seq(uint8_t b) { return next_seq - BRAID_VC_SLOTS + b % (2 * BRAID_VC_SLOTS); }

static void structured_ctl(int r, uint8_t kind) {
  struct braid_vctl c;
  memset(&c, 0, sizeof c);
  bool bad = false;
  const char *what = "?";
  switch (kind % 9) {
    case 0: { /* CTS */
      uint8_t f = rd8();
      uint32_t seq = near_seq(rd8());
      uint8_t slot = (uint8_t)(f & 1 ? rd8() : seq % BRAID_VC_SLOTS);
      uint8_t nr = (uint8_t)(f & 2 ? rd8() % 9 : nrails);
      uint64_t cap = f & 4 ? rd32() % 600000 : (uint64_t)1 << 30;
      c.type = CTL_CTS;
      c.cts = (struct braid_vctl_cts){.slot = slot, .nrails = nr, .seq = seq, .addr = 0x1000, .cap = cap};
      bad = sender && (slot != seq % BRAID_VC_SLOTS || nr != nrails);
      if (sender && !bad) cts_note(seq);
      what = "a CTS with a wrong slot or rail count";
      break;
    }
    case 1: /* FENCE */
      c.type = CTL_FENCE;
      c.fence.rail = rd8() % 10;
      c.fence.gen = rd8() % 3; /* the rail's generation, or one from before / after a rejoin */
      bad = !sender && c.fence.rail >= nrails;
      what = "a FENCE of a rail that does not exist";
      break;
    case 2: { /* FENCED */
      c.type = CTL_FENCED;
      c.fenced.rail = rd8() % 10;
      c.fenced.open = rd_mask();
      c.fenced.fin = rd_mask();
      c.fenced.posted = rd_mask();
      uint8_t b = rd8();
      for (int k = 0; k < BRAID_VC_SLOTS; k++) c.fenced.seq[k] = near_seq((uint8_t)(b + k));
      bad = sender && (c.fenced.rail >= nrails || (c.fenced.open | c.fenced.fin | c.fenced.posted) >> 8);
      what = "a FENCED of a rail that does not exist, or of slots beyond 8";
      break;
    }
    case 3: /* FIN */
      c.type = CTL_FIN;
      c.fin.seq = near_seq(rd8());
      break;
    case 4: /* AREA */
      c.type = CTL_AREA;
      c.area.nrails = (uint8_t)(rd8() % 2 ? nrails : rd8());
      c.area.addr = 0x2000;
      c.area.len = rd32() % 300000;
      bad = sender && (c.area.nrails < 1 || c.area.nrails > BRAID_VC_MAX_RAILS);
      what = "an AREA for 0 or more than 8 rails";
      break;
    case 6: /* REJOIN_ACK */
    case 7: /* REJOIN */
    case 8: /* JOINED */
      c.type = kind % 9 == 6 ? CTL_REJOIN_ACK : kind % 9 == 7 ? CTL_REJOIN : CTL_JOINED;
      c.rejoin.rail = rd8() % 10;
      c.rejoin.gen = rd8() % 3;
      c.rejoin.status = c.type == CTL_REJOIN_ACK ? rd8() % 2 : 0;
      c.rejoin.fenced = rd8() % 4;
      if (c.type != CTL_JOINED && c.rejoin.status == BRAID_VREJOIN_JOINED)
        c.rejoin.addr = (struct braid_verbs_ep_addr){.qpn = rd8(), .psn = 1, .link = BRAID_VADDR_LINK_ETH,
                                                     .mtu = BRAID_VADDR_MTU_MIN};
      bad = (sender == (c.type == CTL_REJOIN_ACK)) && c.rejoin.rail >= nrails;
      what = "a rejoin message for a rail that does not exist";
      break;
    default: /* MISMATCH */
      c.type = CTL_MISMATCH;
      c.mismatch.seq = near_seq(rd8());
      c.mismatch.size = rd32();
      c.mismatch.cap = rd32();
      break;
  }
  uint8_t m[BRAID_VCTL_MAX_BYTES];
  uint32_t len = (uint32_t)braid_vctl_encode(&c, m);
  if (!ctl_shape_ok(m[0], len)) bad = true, what = "a control message meant for the other side";
  bool decodes = ctl(r, m, len);
  if (bad) {
    must_fail(what);
  } else {
    CHECK(decodes); /* what this side accepts, the wire accepts */
    if (!sender && m[0] == CTL_MISMATCH) {
      must_fail("a MISMATCH");
      CHECK(braid_vc_usage_error(vc));
    }
  }
}

static void raw_ctl(int r) {
  uint32_t len = rd8() % 80;
  uint8_t m[BRAID_VERBS_CTRL_MAX] = {0};
  for (uint32_t i = 0; i < len; i++) m[i] = rd8();
  bool decodes = ctl(r, m, len);
  if (!ctl_shape_ok(len ? m[0] : 0, len)) must_fail("a control message of the wrong type or length");
  else if (!decodes) must_fail("a control message the wire rejects");
}

/* A peer's write with an immediate on the receiver. */
static void write_imm(int r) {
  uint8_t f = rd8();
  uint32_t imm, len;
  if (f & 1) {
    imm = rd32();
    len = rd32() % (3 * (uint32_t)chunk);
  } else {
    uint32_t slot = (f >> 1) % BRAID_VC_SLOTS, nch = 1 + rd8() % 6, idx = rd8() % (nch + 1);
    imm = braid_vimm_encode(&(struct braid_vimm){.slot = (uint8_t)slot, .nch = nch, .idx = idx});
    len = f & 0x10 ? (uint32_t)chunk : rd32() % (uint32_t)(chunk + 2);
  }
  struct braid_verbs_ev e = {.kind = BRAID_VERBS_EV_WRITE_IMM, .imm = imm, .len = len};
  push(r, &e);
  if (sender) {
    must_fail("a write on a sending connection");
    return;
  }
  /* What r_imm must refuse: a slot with no receive, an index beyond the count, a count that
   * changed, a short chunk before the last, more bytes than the receive holds. */
  uint32_t k = imm >> 28;
  uint32_t nch = ((imm >> 14) & 0x3fff) + 1, idx = imm & 0x3fff;
  struct braid_vimm w;
  char err[96] = "";
  int rc = braid_vimm_decode(imm, &w, err, sizeof err);
  CHECK(rc == 0 ? braid_vimm_encode(&w) == imm : err[0] != 0);
  CHECK((rc == 0) == (k == 15 ? !(imm << 4) : k < BRAID_VC_SLOTS && idx < nch));
  if (k == 15) { /* a probe: only the slot's bits */
    if (imm << 4) must_fail("a probe immediate with other bits set");
    return;
  }
  bool bad = k >= BRAID_VC_SLOTS || !req_live[k] || idx >= nch || (idx + 1 < nch && len != chunk) ||
             (size_t)idx * chunk + len > req_cap[k];
  if (bad) must_fail("a write that fits no receive");
}

static void complete(int r, uint8_t how) {
  struct braid_verbs_ep *ep = eps[r];
  if (!ep->nposted) return;
  int i = how % ep->nposted;
  struct braid_verbs_ev e = {.cookie = ep->posted[i]};
  if (how & 0x80) {
    e.kind = BRAID_VERBS_EV_ERROR;
    snprintf(e.why, sizeof e.why, "fake: transport retry counter exceeded");
  } else {
    e.kind = ep->posted_type[i] ? BRAID_VERBS_EV_SEND_DONE : BRAID_VERBS_EV_WRITE_DONE;
  }
  ep->posted[i] = ep->posted[--ep->nposted];
  ep->posted_type[i] = ep->posted_type[ep->nposted];
  push(r, &e);
}

static void op_post(uint8_t b, uint32_t size) {
  int k = b % NBUF;
  size_t sz = size % (caps[k] + 1);
  int req = -1;
  int rc = sender ? braid_vc_isend(vc, bufs[k], sz, mems[k], &req)
                  : braid_vc_irecv(vc, bufs[k], sz, mems[k], &req);
  if (rc < 0) failed = true;
  if (rc == 0 && req >= 0) {
    CHECK(req < BRAID_VC_SLOTS);
    reqs[req] = req, req_cap[req] = sz, req_live[req] = true;
    next_seq++;
  }
}

static void op_test(uint8_t b) {
  int k = b % BRAID_VC_SLOTS;
  if (!req_live[k]) return;
  bool done = false;
  size_t size = 0;
  if (braid_vc_test(vc, k, &done, &size)) {
    failed = true;
    return;
  }
  if (!done) return;
  if (!sender) CHECK(size <= req_cap[k]);
  else CHECK(size == req_cap[k]);
  req_live[k] = false;
}

static void setup(uint8_t cfg) {
  sender = cfg & 1;
  nopen = 0;
  nrails = 1 + (cfg >> 1) % 4;
  static const size_t chunks[4] = {4096, 1024, 65536, 128};
  chunk = chunks[cfg >> 3 & 3];
  struct braid_verbs_rail rails[BRAID_VC_MAX_RAILS];
  memset(rails, 0, sizeof rails);
  for (int r = 0; r < nrails; r++) rails[r].speed_mbps = 100000;
  struct braid_vc_opts o = {.chunk = chunk};
  CHECK(braid_vc_open(rails, nrails, sender, &o, &vc) == 0);
  /* the endpoints, in rail order, from the connection itself */
  struct braid_verbs_ep_addr addrs[BRAID_VC_MAX_RAILS];
  braid_vc_addrs(vc, addrs);
  for (int k = 0; k < NBUF; k++) {
    caps[k] = (size_t)(k + 1) * chunk * 3 / 4 + (size_t)k * 97;
    bufs[k] = malloc(caps[k]);
    CHECK(bufs[k]);
    CHECK(braid_vc_reg(vc, bufs[k], caps[k], -1, 0, &mems[k]) == 0);
  }
  failed = false;
  next_seq = 0;
  mismatch_sent = 0;
  memset(req_live, 0, sizeof req_live);
  memset(cts_seen, 0, sizeof cts_seen);
}

static void teardown(void) {
  for (int k = 0; k < NBUF; k++) {
    braid_vc_dereg(vc, mems[k]);
    free(bufs[k]);
  }
  braid_vc_close(vc);
  vc = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in_p = data, in_n = size;
  setup(rd8());
  CHECK(braid_vc_connect(vc, (struct braid_verbs_ep_addr[BRAID_VC_MAX_RAILS]){{0}}, nrails) == 0);
  while (in_n && !failed) {
    uint8_t op = rd8();
    int r = (op >> 4) % nrails;
    /* what came before is read first, so a check below sees the effect of this one message */
    if ((op % 9 <= 2 || op % 9 == 6) && progress()) break;
    switch (op % 9) {
      case 0: structured_ctl(r, rd8()); break;
      case 1: raw_ctl(r); break;
      case 2: write_imm(r); break;
      case 3: complete(r, rd8()); break;
      case 4: op_post(rd8(), rd32()); break;
      case 5: op_test(rd8()); break;
      case 6: { /* a CTS for the send just posted (sender), sized from the script */
        if (!sender || next_seq == 0) break;
        uint8_t m[BRAID_VCTL_MAX_BYTES];
        uint32_t seq = next_seq - 1;
        uint64_t cap = rd32() % 600000;
        struct braid_vctl c = {.type = CTL_CTS, .cts = {.slot = (uint8_t)(seq % BRAID_VC_SLOTS),
                                                        .nrails = (uint8_t)nrails, .seq = seq,
                                                        .addr = 0x1000, .cap = cap}};
        CHECK(ctl(r, m, (uint32_t)braid_vctl_encode(&c, m)));
        int k = (int)(seq % BRAID_VC_SLOTS);
        int before = mismatch_sent;
        bool fresh = cts_fresh(seq);
        cts_note(seq);
        if (req_live[k] && fresh && req_cap[k] > cap) {
          must_fail("a CTS smaller than its send");
          CHECK(braid_vc_usage_error(vc));
          CHECK(mismatch_sent > before); /* the receiver hears of it */
        } else {
          progress();
        }
        break;
      }
      default: progress(); break;
    }
  }
  teardown();
  return 0;
}
