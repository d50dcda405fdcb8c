/* A verbs connection striped over rails (see verbs_conn.h). */
#include "transport/verbs/verbs_conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "stripe/sched.h"
#include "transport/verbs/verbs_flush.h"
#include "transport/verbs/verbs_vc.h"
#include "wire/verbs.h"

int vci_fail(struct braid_vc *vc, const char *fmt, ...) {
  if (!vc->failed) {
    vc->failed = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vc->err, sizeof vc->err, fmt, ap);
    va_end(ap);
    BRAID_WARN("verbs connection: %s", vc->err);
  }
  return -1;
}

/* ---------- control messages: queued, posted on a live rail, re-posted if that rail fails ---------- */

int vci_ctl_queue_on(struct braid_vc *vc, const struct braid_vctl *msg, int pin) {
  for (int i = 0; i < CTLQ; i++) {
    if (vc->ctl[i].used) continue;
    vc->ctl[i] = (struct ctlmsg){.used = true, .rail = -1, .pin = pin};
    vc->ctl[i].len = (uint32_t)braid_vctl_encode(msg, vc->ctl[i].data);
    return 0;
  }
  return vci_fail(vc, "more than %d control messages waiting for a live rail", CTLQ);
}

void vci_ctl_post(struct braid_vc *vc) {
  for (int i = 0; i < CTLQ; i++) {
    struct ctlmsg *c = &vc->ctl[i];
    if (!c->used || c->posted) continue;
    if (c->pin >= 0 && vc->down[c->pin]) { /* its rail failed again before it went out */
      c->used = false;
      continue;
    }
    for (int k = 0; k < vc->nrails; k++) {
      int r = c->pin >= 0 ? c->pin : (int)((vc->rr_ctl + (unsigned)k) % (unsigned)vc->nrails);
      if (vc->down[r]) continue;
      if (braid_verbs_ep_send(vc->ep[r], c->data, c->len, COOKIE_CTL | (uint64_t)i) == 0) {
        c->posted = true, c->rail = r;
        if (c->pin < 0) vc->rr_ctl = (unsigned)r + 1;
        break;
      }
      if (c->pin >= 0) break;
    }
  }
}

/* Rail r's completions are given up on (fenced and not drained in time): what it still had of
 * control messages goes out again on a live rail.  The peer takes a message twice (one whose
 * completion alone was lost): a CTS only when newer than the slot's last, a FIN or FENCE
 * as often as it comes. */
static void ctl_repost(struct braid_vc *vc, int r) {
  for (int i = 0; i < CTLQ; i++)
    if (vc->ctl[i].used && vc->ctl[i].posted && vc->ctl[i].rail == r) vc->ctl[i].posted = false;
}

/* ---------- rails ---------- */

void vci_fail_rail(struct braid_vc *vc, int r, const char *why) {
  /* A receiver's rail connected again but not yet confirmed (RJ_JOINING) is down for posting,
   * not for failing: its new queue pair is fenced like any. */
  if (vc->down[r] && vc->rj[r].state != RJ_JOINING) return;
  bool was_up = !vc->down[r];
  vc->down[r] = true;
  BRAID_WARN("verbs rail %d (%s): %s; fenced, its data goes on the other rails", r,
             braid_verbs_ep_name(vc->ep[r]), why);
  braid_verbs_ep_fence(vc->ep[r]);
  vc->probe_out[r] = false; /* a probe on it never completes now */
  if (was_up) braid_sched_failed(&vc->sched, r, braid_now_ns());
  vci_rejoin_down(vc, r, braid_now_ns());
  if (vc->sender) {
    vci_ctl_queue_on(vc, &(struct braid_vctl){.type = BRAID_VCTL_FENCE, .fence = {(uint8_t)r, vc->rj[r].gen}},
                     -1);
  } else {
    vc->fence_wait[r] = true; /* FENCED, unasked, once drained */
    vc->fence_since[r] = braid_now_ns();
  }
  int live = 0;
  for (int i = 0; i < vc->nrails; i++) live += !vc->down[i];
  if (!live) vci_fail(vc, "every rail failed (the last: %s)", why);
}

/* ---------- receiver ---------- */

static bool r_open(const struct rreq *q) {
  return q->used && !(q->nch && q->got == q->nch && !q->needs_fin);
}

/* Rail r is fenced and drained: receives open now need the sender's FIN; tell the sender. */
static void r_send_fenced(struct braid_vc *vc, int r) {
  struct braid_vctl_fenced f = {.rail = (uint8_t)r, .posted = vc->r_posted};
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    struct rreq *q = &vc->r[k];
    /* Only a receive rail r may have written into: one with no chunk yet never saw it (every
     * write r carried has been counted, the rest are gone). */
    if (!r_open(q)) continue;
    f.open |= (uint16_t)(1u << k);
    if (q->got > 0) q->needs_fin = true;
    if (q->needs_fin) f.fin |= (uint16_t)(1u << k);
  }
  for (int k = 0; k < BRAID_VC_SLOTS; k++) f.seq[k] = vc->r[k].seq;
  vc->rj[r].fenced++;
  BRAID_INFO(NCCL_NET, "verbs rail %d (%s): drained; FENCED to the peer: open 0x%x, FIN owed 0x%x, receive %u in slot 0",
             r, braid_verbs_ep_name(vc->ep[r]), f.open, f.fin, f.seq[0]);
  vci_ctl_queue_on(vc, &(struct braid_vctl){.type = BRAID_VCTL_FENCED, .fenced = f}, -1);
}

static void r_imm(struct braid_vc *vc, uint32_t imm, uint32_t len) {
  struct braid_vimm w;
  char why[96];
  if (braid_vimm_decode(imm, &w, why, sizeof why)) {
    vci_fail(vc, "garbled write from the peer (%s, %u bytes)", why, len);
    return;
  }
  if (w.probe) return; /* a probe, in the scratch area */
  int k = w.slot;
  uint32_t nch = w.nch, idx = w.idx;
  struct rreq *q = &vc->r[k];
  if (!q->used || (q->nch && q->nch != nch)) {
    vci_fail(vc, "garbled write from the peer (slot %d, chunk %u of %u, %u bytes)", k, idx, nch, len);
    return;
  }
  size_t off = (size_t)idx * vc->chunk;
  if ((idx + 1 < nch && len != vc->chunk) || off + len > q->cap) {
    vci_fail(vc, "a write that does not fit its receive (slot %d, chunk %u of %u, %u bytes)", k, idx,
            nch, len);
    return;
  }
  if (!q->nch) {
    q->nch = nch;
    if (!(q->seen = calloc((nch + 7) / 8, 1))) {
      vci_fail(vc, "out of memory");
      return;
    }
  }
  if (q->seen[idx / 8] & (1u << (idx % 8))) return; /* a chunk re-sent after a fence */
  q->seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
  q->got++;
  if (idx == nch - 1) q->size = off + len;
}

/* Detached receives whose writes have all landed (and whose FIN came, where one is owed). */
static void r_retire(struct braid_vc *vc) {
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    struct rreq *q = &vc->r[k];
    if (!q->used || !q->detached || !q->nch || q->got < q->nch || (q->needs_fin && !q->fin)) continue;
    free(q->seen);
    q->seen = NULL;
    q->used = q->detached = false;
  }
}

/* Receives the peer may still deliver before this side polls again: every chunk open receives
 * can still get (all of a receive's capacity while its count is unknown) and every FIN owed. */
static uint32_t r_due(const struct braid_vc *vc) {
  uint32_t due = 0;
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    const struct rreq *q = &vc->r[k];
    if (!q->used) continue;
    uint32_t nch = q->nch ? q->nch : q->cap ? (uint32_t)((q->cap + vc->chunk - 1) / vc->chunk) : 1;
    due += nch - q->got + (q->needs_fin && !q->fin);
  }
  return due;
}

/* ---------- sender ---------- */

static struct sreq *s_find(struct braid_vc *vc, uint32_t seq) {
  struct sreq *q = &vc->s[seq % BRAID_VC_SLOTS];
  return q->used && q->seq == seq ? q : NULL;
}

static void s_bind(struct braid_vc *vc, struct sreq *q) {
  struct cts_entry *c = &vc->cts[q->seq % BRAID_VC_SLOTS];
  if (q->have_cts || !c->valid || c->m.seq != q->seq) return;
  c->valid = false;
  if (q->size > c->m.cap) {
    vci_fail(vc, "a send of %zu bytes to a receive of %llu bytes: send/receive size mismatch", q->size,
            (unsigned long long)c->m.cap);
    vc->usage = true;
    /* The receiver learns it too: its receive fails with the same words, not a silent wait. */
    struct braid_vctl m = {.type = BRAID_VCTL_MISMATCH,
                           .mismatch = {.seq = q->seq, .size = q->size, .cap = c->m.cap}};
    if (vci_ctl_queue_on(vc, &m, -1) == 0) vci_ctl_post(vc);
    return;
  }
  q->have_cts = true;
  q->raddr = c->m.addr;
  memcpy(q->rkey, c->m.rkey, sizeof q->rkey);
}

static bool s_finished(const struct sreq *q) {
  return q->have_cts && q->acked == q->nch && (!q->needs_fin || q->fin_done);
}

/* A second FENCED for a rail whose first is not applied yet (the receiver failed the rail, then
 * the sender's FENCE came: it answers twice).  Control messages take any live rail, so the two
 * may arrive in either order; neither may be lost.  Per slot: the newer receive's view; for the
 * same receive, closed if either says so (a receive never reopens) and owed a FIN if either says
 * so (a FIN too many is ignored, one too few leaves the receive open for ever).  Commutative:
 * the arrival order does not matter. */
static void fenced_merge(struct braid_vctl_fenced *into, const struct braid_vctl_fenced *f) {
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    uint16_t bit = (uint16_t)(1u << k);
    if (!(f->posted & bit)) continue;
    bool take = !(into->posted & bit) || (int32_t)(f->seq[k] - into->seq[k]) > 0;
    if (take) {
      into->seq[k] = f->seq[k];
      into->open = (uint16_t)((into->open & ~bit) | (f->open & bit));
      into->fin = (uint16_t)((into->fin & ~bit) | (f->fin & bit));
    } else if (f->seq[k] == into->seq[k]) {
      into->open &= (uint16_t)(f->open | ~bit);
      into->fin |= (uint16_t)(f->fin & bit);
    }
    into->posted |= bit;
  }
}

/* The receiver's view after rail r was fenced (f), applied once r has drained here. */
static void s_apply_fenced(struct braid_vc *vc, int r, const struct braid_vctl_fenced *f) {
  BRAID_INFO(NCCL_NET, "verbs rail %d (%s): drained; the peer's FENCED applied: open 0x%x, FIN owed 0x%x, "
             "receive %u in slot 0, next send %u", r, braid_verbs_ep_name(vc->ep[r]), f->open, f->fin, f->seq[0],
             vc->s_seq);
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    if (!(f->posted & (1u << k))) continue;
    uint32_t seq = f->seq[k];
    bool open = f->open & (1u << k), fin = f->fin & (1u << k);
    struct sreq *q = &vc->s[k];
    if (q->used && q->seq == seq && fin) q->needs_fin = true;
    if (q->used && q->have_cts && (int32_t)(seq - q->seq) >= 0) {
      bool finished_there = seq != q->seq || !open;
      for (uint32_t i = 0; i < q->nch; i++) {
        struct chunk *c = &q->ch[i];
        if (c->state != CH_INFLIGHT || c->rail != r) continue;
        if (finished_there) c->state = CH_ACKED, q->acked++;
        else c->state = CH_UNSENT; /* written again on a live rail */
      }
    } else if (fin && (int32_t)(seq - vc->s_seq) < 0 && !(q->used && q->seq == seq)) {
      /* done and gone here: FIN at once */
      BRAID_INFO(NCCL_NET, "verbs rail %d: send %u completed before the peer's FENCED: FIN now", r, seq);
      vci_ctl_queue_on(vc, &(struct braid_vctl){.type = BRAID_VCTL_FIN, .fin.seq = seq}, -1);
    }
  }
}

static void s_write_done(struct braid_vc *vc, int r, uint64_t cookie, uint64_t now) {
  struct sreq *q = s_find(vc, (uint32_t)(cookie >> 20));
  uint32_t idx = (uint32_t)(cookie & 0xfffff);
  if (!q || idx >= q->nch) return;
  struct chunk *c = &q->ch[idx];
  if (c->state != CH_INFLIGHT || c->rail != r) return; /* a stale completion */
  size_t len = idx + 1 < q->nch ? vc->chunk : q->size - (size_t)idx * vc->chunk;
  c->state = CH_ACKED;
  q->acked++;
  vc->rail_bytes[r] += len;
  if (!vc->down[r]) braid_sched_acked(&vc->sched, r, len, c->sent_ns, now);
}

/* Writes unsent chunks, oldest send first, where the scheduler says. */
static void s_schedule(struct braid_vc *vc, uint64_t now) {
  size_t pending = 0;
  for (uint32_t n = vc->s_seq - BRAID_VC_SLOTS; n != vc->s_seq; n++) {
    struct sreq *q = s_find(vc, n);
    if (q && q->have_cts) pending += (size_t)(q->nch - q->acked) * vc->chunk;
  }
  for (uint32_t n = vc->s_seq - BRAID_VC_SLOTS; n != vc->s_seq; n++) {
    struct sreq *q = s_find(vc, n);
    if (!q || !q->have_cts) continue;
    for (uint32_t i = 0; i < q->nch; i++) {
      struct chunk *c = &q->ch[i];
      if (c->state != CH_UNSENT) continue;
      size_t off = (size_t)i * vc->chunk;
      size_t len = i + 1 < q->nch ? vc->chunk : q->size - off;
      struct braid_sched_place p = braid_sched_place(&vc->sched, vc->equal, &vc->rr_equal, BRAID_PROBE_SCRATCH, 0,
                                                     len, pending, now);
      int r = p.probe >= 0 ? p.probe : p.rail;
      if (r < 0 || vc->down[r]) return;
      if (p.probe >= 0) {
        /* a probe of a demoted rail goes into the scratch area, never with a message's data */
        if (vc->area_valid && !vc->probe_out[r] && len && len <= vc->area.len) {
          uint32_t probe = braid_vimm_encode(&(struct braid_vimm){.probe = true});
          int rc = braid_verbs_ep_write_imm(vc->ep[r], &q->mem->mr[r], q->base + off, len, vc->area.addr,
                                            vc->area.rkey[r], probe, COOKIE_PROBE);
          if (rc < 0) {
            vci_fail_rail(vc, r, "posting a probe failed");
            return;
          }
          if (rc == 0) {
            vc->probe_out[r] = true, vc->probe_len[r] = len, vc->probe_sent[r] = now;
            braid_sched_sent(&vc->sched, r, len, now);
          }
        }
        r = p.rail; /* the chunk itself: the best rail of the others */
        if (r < 0 || vc->down[r]) return;
      }
      uint32_t imm = braid_vimm_encode(
          &(struct braid_vimm){.slot = (uint8_t)(q->seq % BRAID_VC_SLOTS), .nch = q->nch, .idx = i});
      int rc = braid_verbs_ep_write_imm(vc->ep[r], q->mem ? &q->mem->mr[r] : NULL, q->base + off, len,
                                        q->raddr + off, q->rkey[r], imm, (uint64_t)q->seq << 20 | i);
      if (rc > 0) return; /* that rail's queue is full: later */
      if (rc < 0) {
        vci_fail_rail(vc, r, "posting a write failed");
        return;
      }
      c->state = CH_INFLIGHT, c->rail = (int8_t)r, c->sent_ns = now;
      braid_sched_sent(&vc->sched, r, len, now);
      pending = pending > len ? pending - len : 0;
    }
  }
}

/* ---------- events ---------- */

/* The peer's FENCE (receiver) or FENCED (sender) of rail: failed here too, answered or applied
 * once its completions have drained.  false for a rail that does not exist (c failed). */
static bool ctl_fence_rail(struct braid_vc *vc, unsigned rail, const char *what, const char *why) {
  if (rail >= (unsigned)vc->nrails) {
    vci_fail(vc, "garbled %s from the peer", what);
    return false;
  }
  vci_fail_rail(vc, (int)rail, why);
  vc->fence_wait[rail] = true;
  vc->fence_since[rail] = braid_now_ns();
  return true;
}

static void on_ctl(struct braid_vc *vc, int on, const uint8_t *d, uint32_t len) {
  struct braid_vctl c;
  char why[128];
  if (braid_vctl_decode(d, len, &c, why, sizeof why)) {
    vci_fail(vc, "garbled control message from the peer: %s", why);
    return;
  }
  uint8_t type = c.type;
  if (vc->sender && type == BRAID_VCTL_CTS) {
    struct braid_vctl_cts m = c.cts;
    if (m.nrails != vc->nrails) {
      vci_fail(vc, "garbled CTS from the peer");
      return;
    }
    /* A control message whose send completion was lost with a failed rail is sent again on
     * another, so a CTS can arrive twice, the copy after the slot's next CTS: only a newer one
     * counts. */
    struct cts_entry *e = &vc->cts[m.slot];
    if (e->seen && (int32_t)(m.seq - e->m.seq) <= 0) return;
    *e = (struct cts_entry){.valid = true, .seen = true, .m = m};
    struct sreq *q = s_find(vc, m.seq);
    if (q) s_bind(vc, q);
  } else if (vc->sender && type == BRAID_VCTL_AREA) {
    vc->area = c.area;
    vc->area_valid = vc->area.nrails == vc->nrails;
  } else if (vc->sender && type == BRAID_VCTL_FENCED) {
    struct braid_vctl_fenced f = c.fenced;
    bool pending = f.rail < (unsigned)vc->nrails && vc->fence_wait[f.rail];
    if (!ctl_fence_rail(vc, f.rail, "FENCED", "the peer fenced it")) return;
    vc->rj[f.rail].fenced++; /* a rejoin's answer counts these (verbs_rejoin.c) */
    if (pending) fenced_merge(&vc->fenced[f.rail], &f);
    else vc->fenced[f.rail] = f;
  } else if (!vc->sender && type == BRAID_VCTL_FENCE) {
    if (c.fence.rail < (unsigned)vc->nrails && !vci_rejoin_current(vc, c.fence.rail, c.fence.gen)) {
      BRAID_INFO(NCCL_NET, "verbs rail %u: FENCE of generation %u, from before its rejoin: ignored", c.fence.rail,
                 c.fence.gen);
      return;
    }
    ctl_fence_rail(vc, c.fence.rail, "FENCE", "the peer failed it");
  } else if (!vc->sender && type == BRAID_VCTL_MISMATCH) {
    struct braid_vctl_mismatch m = c.mismatch;
    vci_fail(vc, "the peer sent %llu bytes to a receive of %llu bytes (message %u): send/receive size "
            "mismatch", (unsigned long long)m.size, (unsigned long long)m.cap, m.seq);
    vc->usage = true;
  } else if (!vc->sender && type == BRAID_VCTL_FIN) {
    struct braid_vctl_fin m = c.fin;
    struct rreq *q = &vc->r[m.seq % BRAID_VC_SLOTS];
    BRAID_INFO(NCCL_NET, "verbs: FIN for receive %u%s", m.seq, q->used && q->seq == m.seq ? "" : " (no longer open)");
    if (q->used && q->seq == m.seq) q->fin = true;
  } else if ((vc->sender && type == BRAID_VCTL_REJOIN_ACK) ||
             (!vc->sender && (type == BRAID_VCTL_REJOIN || type == BRAID_VCTL_JOINED))) {
    if (c.rejoin.rail >= (unsigned)vc->nrails) {
      vci_fail(vc, "garbled %s from the peer (rail %u of %d)", braid_vctl_name(type), c.rejoin.rail, vc->nrails);
      return;
    }
    vci_rejoin_ctl(vc, on, &c, braid_now_ns());
  } else {
    vci_fail(vc, "unexpected control message of type %u (%u bytes) from the peer", type, len);
  }
}

static void on_event(struct braid_vc *vc, int r, const struct braid_verbs_ev *ev, uint64_t now) {
  switch (ev->kind) {
  case BRAID_VERBS_EV_SEND_DONE:
  case BRAID_VERBS_EV_WRITE_DONE:
    if (ev->cookie & COOKIE_CTL) {
      struct ctlmsg *c = &vc->ctl[ev->cookie & (CTLQ - 1)];
      if (!c->used || !c->posted || c->rail != r) break; /* posted again elsewhere since (see ctl_repost) */
      struct braid_vctl m; /* a FIN of ours is delivered: the send it finishes may complete */
      if (vc->sender && !braid_vctl_decode(c->data, c->len, &m, NULL, 0) && m.type == BRAID_VCTL_FIN) {
        struct sreq *q = s_find(vc, m.fin.seq);
        if (q) q->fin_done = true;
      }
      c->used = false;
    } else if (ev->cookie & COOKIE_PROBE) {
      vc->probe_out[r] = false;
      if (!vc->down[r]) braid_sched_acked(&vc->sched, r, vc->probe_len[r], vc->probe_sent[r], now);
    } else {
      s_write_done(vc, r, ev->cookie, now);
    }
    break;
  case BRAID_VERBS_EV_CTRL: on_ctl(vc, r, ev->data, ev->len); break;
  case BRAID_VERBS_EV_WRITE_IMM:
    if (vc->sender) vci_fail(vc, "a write arrived on a sending connection");
    else r_imm(vc, ev->imm, ev->len);
    break;
  case BRAID_VERBS_EV_READ_DONE: break; /* flush reads complete on their own CQ (braid_vc_flush_test) */
  case BRAID_VERBS_EV_ERROR:
    if (ev->cookie & COOKIE_CTL) { /* a control send: post it again on another rail */
      struct ctlmsg *c = &vc->ctl[ev->cookie & (CTLQ - 1)];
      if (c->used && c->rail == r) c->posted = false;
    }
    vci_fail_rail(vc, r, ev->why);
    break;
  }
}

int braid_vc_progress(struct braid_vc *vc) {
  if (vc->failed) return -1;
  uint64_t now = braid_now_ns();
  struct braid_verbs_ev ev[16];
  for (int r = 0; r < vc->nrails && !vc->failed; r++) {
    int n;
    do {
      n = braid_verbs_ep_poll(vc->ep[r], ev, 16);
      if (n < 0) {
        vci_fail_rail(vc, r, "its completion queue cannot be read");
        break;
      }
      for (int i = 0; i < n && !vc->failed; i++) on_event(vc, r, &ev[i], now);
    } while (n == 16 && !vc->failed);
  }
  if (now >= vc->next_event_check) { /* port and QP events: a port down is a rail error */
    vc->next_event_check = now + EVENT_CHECK_NS;
    for (int r = 0; r < vc->nrails && !vc->failed; r++) {
      char why[128];
      int pe = braid_verbs_ep_port_events(vc->ep[r], why, sizeof why);
      if (pe == 2) vci_rejoin_port_active(vc, r, now); /* a down rail tries to rejoin at once */
      if (pe != 1) continue;
      /* Also on a rail already fenced (the peer, or a timeout, was quicker): the cause is what
       * the operator needs to know. */
      if (vc->down[r])
        BRAID_WARN("verbs rail %d (%s): %s, on a rail already fenced", r,
                   braid_verbs_ep_name(vc->ep[r]), why);
      else
        vci_fail_rail(vc, r, why);
    }
  }
  for (int r = 0; r < vc->nrails && !vc->failed; r++) {
    if (!vc->fence_wait[r]) continue;
    if (!braid_verbs_ep_drained(vc->ep[r])) {
      /* The QP is in ERR: nothing lands through it any more, drained or not.  A device that never
       * flushes (soft-RoCE whose interface went down) must not stall the connection forever. */
      if (now - vc->fence_since[r] < DRAIN_WAIT_NS) continue;
      BRAID_WARN("verbs rail %d (%s): its completions did not drain within 1 s of the fence; going "
                 "on without them", r, braid_verbs_ep_name(vc->ep[r]));
      ctl_repost(vc, r);
    }
    vc->fence_wait[r] = false;
    if (vc->sender) {
      s_apply_fenced(vc, r, &vc->fenced[r]);
      vci_rejoin_fence_applied(vc, r);
    } else {
      r_send_fenced(vc, r);
    }
  }
  if (vc->failed) return -1;
  if (!vc->sender) r_retire(vc);
  vci_ctl_post(vc);
  if (vc->sender) {
    for (uint32_t n = vc->s_seq - BRAID_VC_SLOTS; n != vc->s_seq; n++) {
      struct sreq *q = s_find(vc, n);
      if (q && q->needs_fin && !q->fin_queued && q->acked == q->nch) {
        /* re-posted by the queue if lost */
        struct braid_vctl m = {.type = BRAID_VCTL_FIN, .fin.seq = q->seq};
        BRAID_INFO(NCCL_NET, "verbs: send %u acknowledged: FIN", q->seq);
        q->fin_queued = vci_ctl_queue_on(vc, &m, -1) == 0;
      }
    }
    vci_rejoin_progress(vc, now);
    s_schedule(vc, now);
    vci_ctl_post(vc);
  }
  if (now >= vc->next_tick) {
    vc->next_tick = now + TICK_NS;
    struct braid_sched_event e[8];
    int n = braid_sched_tick(&vc->sched, now, e, 8);
    for (int i = 0; i < n; i++) {
      if (e[i].reason == BRAID_SCHED_STALLED && vc->sender)
        vci_fail_rail(vc, e[i].rail, "no write completed for too long (stalled)");
      if (e[i].reason == BRAID_SCHED_SLOW) vc->demotions[e[i].rail]++;
      if (e[i].reason == BRAID_SCHED_SLOW || e[i].reason == BRAID_SCHED_RECOVERED ||
          e[i].reason == BRAID_SCHED_LAST_LEFT)
        BRAID_WARN("verbs rail %d (%s): %s (%.0f Mbit/s measured, best other %.0f Mbit/s)", e[i].rail,
                   braid_verbs_ep_name(vc->ep[e[i].rail]),
                   e[i].reason == BRAID_SCHED_SLOW ? "slow: degraded, probed into scratch memory only"
                                                    : "recovered: carries data again",
                   e[i].est_Bps * 8e-6, e[i].ref_Bps * 8e-6);
    }
  }
  return vc->failed ? -1 : 0;
}

/* ---------- the API ---------- */

int braid_vc_open(const struct braid_verbs_rail *rails, int nrails, bool sender,
                  const struct braid_vc_opts *o, struct braid_vc **out) {
  *out = NULL;
  if (nrails < 1 || nrails > BRAID_VC_MAX_RAILS || nrails > BRAID_SCHED_MAX_RAILS) {
    BRAID_WARN("verbs connection: %d rails (1 to %d)", nrails, BRAID_VC_MAX_RAILS);
    return -1;
  }
  struct braid_vc *vc = calloc(1, sizeof *vc);
  if (!vc) return -1;
  vc->sender = sender;
  vc->nrails = nrails;
  vc->chunk = o && o->chunk ? o->chunk : 128 << 10;
  vc->equal = o && o->equal;
  for (int k = 0; k < BRAID_VC_SLOTS; k++) vc->r[k].seq = (uint32_t)k - BRAID_VC_SLOTS;
  struct braid_sched_params p;
  braid_sched_params_default(&p);
  /* A rail's queue of written-but-unacknowledged chunks must drain well within the QP's ACK
   * timeout (verbs_ep.c), or a slow rail's writes time out and are retransmitted until the
   * rail is declared dead: a slow rail may hold as little as one chunk, probes are one chunk. */
  p.inflight_min = p.probe_inflight = vc->chunk;
  /* ... while a rail's in-flight time must stay well above the round trip of one chunk, or the
   * estimate settles below the link's rate (it measures what the cap lets through), and the
   * connections of NCCL's several channels share each rail: 100 ms, under half the ACK timeout,
   * which also keeps the stall verdict (4x that + the margin below) under a second. */
  p.queue_target_ns = 100000000;
  /* A rail that crawls from the start (its first chunks queued at the prior's rate) acknowledges
   * its first chunk only after that chunk's time on the slow link: 400 ms of margin before the
   * stall verdict lets a rail that still moves a 64 KiB chunk in that time be demoted rather than
   * failed. */
  p.stall_margin_ns = 400000000;
  double Bps[BRAID_SCHED_MAX_RAILS] = {0};
  for (int r = 0; r < nrails; r++) Bps[r] = rails[r].speed_mbps * 125000.0;
  if (braid_sched_init(&vc->sched, nrails, &p, Bps, braid_now_ns())) {
    free(vc);
    return -1;
  }
  for (int r = 0; r < nrails; r++)
    if (braid_verbs_ep_open(&rails[r], 0, o ? &o->qos : NULL, &vc->ep[r])) {
      braid_vc_close(vc);
      return -1;
    }
  *out = vc;
  return 0;
}

void braid_vc_addrs(const struct braid_vc *vc, struct braid_verbs_ep_addr *out) {
  for (int r = 0; r < vc->nrails; r++) braid_verbs_ep_addr(vc->ep[r], &out[r]);
}

int braid_vc_connect(struct braid_vc *vc, const struct braid_verbs_ep_addr *peer, int npeer) {
  if (npeer != vc->nrails) return vci_fail(vc, "the peer has %d rails, this side %d", npeer, vc->nrails);
  for (int r = 0; r < vc->nrails; r++)
    if (braid_verbs_ep_connect(vc->ep[r], &peer[r])) return vci_fail(vc, "connecting rail %s failed", braid_verbs_ep_name(vc->ep[r]));
  if (vc->sender) return 0;
  if (!(vc->scratch = malloc(vc->chunk)) || braid_vc_reg(vc, vc->scratch, vc->chunk, -1, 0, &vc->scratch_mem))
    return vci_fail(vc, "cannot register the probes' scratch area");
  struct braid_vctl a = {.type = BRAID_VCTL_AREA,
                         .area = {.nrails = (uint8_t)vc->nrails, .addr = (uintptr_t)vc->scratch,
                                  .len = vc->chunk}};
  for (int r = 0; r < vc->nrails; r++) a.area.rkey[r] = vc->scratch_mem->mr[r].rkey;
  return vci_ctl_queue_on(vc, &a, -1) ? -1 : braid_vc_progress(vc);
}

int braid_vc_reg(struct braid_vc *vc, void *buf, size_t len, int fd, uint64_t offset, struct braid_vc_mem **out) {
  struct braid_vc_mem *m = calloc(1, sizeof *m);
  if (!m) return -1;
  for (int r = 0; len && r < vc->nrails; r++, m->n++)
    if (fd >= 0 ? braid_verbs_ep_reg_dmabuf(vc->ep[r], buf, len, offset, fd, !vc->sender, &m->mr[r])
                : braid_verbs_ep_reg(vc->ep[r], buf, len, !vc->sender, &m->mr[r])) {
      braid_vc_dereg(vc, m);
      return -1;
    }
  *out = m;
  return 0;
}

void braid_vc_dereg(struct braid_vc *vc, struct braid_vc_mem *m) {
  if (!m) return;
  for (int r = 0; r < m->n; r++) braid_verbs_ep_dereg(vc->ep[r], &m->mr[r]);
  free(m);
}

/* Whether [buf, buf+len) lies inside the registration. */
static bool mem_covers(const struct braid_vc_mem *m, const void *buf, size_t len) {
  uintptr_t a = (uintptr_t)buf, lo = (uintptr_t)m->mr[0].addr;
  return a >= lo && len <= m->mr[0].len && a - lo <= m->mr[0].len - len;
}

int braid_vc_isend(struct braid_vc *vc, const void *buf, size_t size, struct braid_vc_mem *mem, int *req) {
  if (vc->failed) return -1;
  if (!vc->sender) return vci_fail(vc, "isend on a receiving connection");
  uint32_t nch = size ? (uint32_t)((size + vc->chunk - 1) / vc->chunk) : 1;
  if (size && (!mem || mem->n != vc->nrails))
    return vci_fail(vc, "a send of %zu bytes from unregistered memory", size);
  if (size > (size_t)BRAID_VC_MAX_CHUNKS * vc->chunk)
    return vci_fail(vc, "a send of %zu bytes: larger than the connection carries", size);
  if (size && !mem_covers(mem, buf, size)) return vci_fail(vc, "a send from outside its memory registration");
  struct sreq *q = &vc->s[vc->s_seq % BRAID_VC_SLOTS];
  if (q->used) return 1;
  struct chunk *ch = calloc(nch, sizeof *ch);
  if (!ch) return vci_fail(vc, "out of memory");
  *q = (struct sreq){.used = true, .seq = vc->s_seq++, .nch = nch, .buf = buf, .size = size,
                     .base = size ? (size_t)((uintptr_t)buf - (uintptr_t)mem->mr[0].addr) : 0,
                     .mem = mem, .ch = ch};
  s_bind(vc, q);
  *req = (int)(q - vc->s);
  return braid_vc_progress(vc);
}

int braid_vc_irecv(struct braid_vc *vc, void *buf, size_t cap, struct braid_vc_mem *mem, int *req) {
  if (vc->failed) return -1;
  if (vc->sender) return vci_fail(vc, "irecv on a sending connection");
  int k = (int)(vc->r_seq % BRAID_VC_SLOTS);
  struct rreq *q = &vc->r[k];
  if (q->used && q->detached && braid_vc_progress(vc)) return -1; /* its writes may be in */
  if (q->used) return 1;
  if (cap && (!mem || mem->n != vc->nrails || !mem_covers(mem, buf, cap)))
    return vci_fail(vc, "a receive into unregistered memory");
  struct braid_vctl m = {.type = BRAID_VCTL_CTS,
                         .cts = {.slot = (uint8_t)k, .nrails = (uint8_t)vc->nrails, .seq = vc->r_seq,
                                 .addr = (uintptr_t)buf, .cap = cap}};
  for (int r = 0; cap && r < vc->nrails; r++) m.cts.rkey[r] = mem->mr[r].rkey;
  *q = (struct rreq){.used = true, .seq = vc->r_seq++, .cap = cap};
  vc->r_posted |= (uint16_t)(1u << k);
  if (vci_ctl_queue_on(vc, &m, -1)) return -1;
  *req = k;
  return braid_vc_progress(vc);
}

bool braid_vc_detach(struct braid_vc *vc, int req) {
  if (vc->failed || vc->sender || req < 0 || req >= BRAID_VC_SLOTS) return false;
  struct rreq *q = &vc->r[req];
  if (!q->used || q->detached) return false;
  /* Over two or more rails a rail's failure (even one fenced long ago: the sender may not have
   * heard yet) needs this side's FENCED before the sender writes its chunks again; over one,
   * the rail's failure is the connection's. */
  if (vc->nrails != 1 || vc->down[0]) return false;
  for (int i = 0; i < CTLQ; i++) /* every CTS (this one included) on the wire, none queued */
    if (vc->ctl[i].used && !vc->ctl[i].posted) return false;
  /* Each write consumes one of the rail's posted receives; an empty ring would RNR-NAK the peer
   * until this side polls, which may be never. */
  if (r_due(vc) > (uint32_t)braid_verbs_ep_recv_posted(vc->ep[0])) return false;
  q->detached = true;
  return true;
}

int braid_vc_test(struct braid_vc *vc, int req, bool *done, size_t *size) {
  *done = false;
  if (braid_vc_progress(vc)) return -1;
  if (req < 0 || req >= BRAID_VC_SLOTS) return vci_fail(vc, "test of an unknown request");
  if (vc->sender) {
    struct sreq *q = &vc->s[req];
    if (!q->used) return vci_fail(vc, "test of an unknown request");
    if (!s_finished(q)) return 0;
    if (size) *size = q->size;
    free(q->ch);
    q->ch = NULL;
    q->used = false;
  } else {
    struct rreq *q = &vc->r[req];
    if (!q->used || q->detached) return vci_fail(vc, "test of an unknown request");
    if (!q->nch || q->got < q->nch || (q->needs_fin && !q->fin)) return 0;
    if (size) *size = q->size;
    free(q->seen);
    q->seen = NULL;
    q->used = false;
  }
  *done = true;
  return 0;
}

int braid_vc_flush(struct braid_vc *vc, const void *buf, struct braid_vc_mem *mem, int *req) {
  if (vc->failed) return -1;
  if (vc->sender) return vci_fail(vc, "flush on a sending connection");
  if (!mem || mem->n != vc->nrails || !mem_covers(mem, buf, 1))
    return vci_fail(vc, "a flush of %p outside its memory registration", buf);
  int k = 0;
  while (k < BRAID_VC_FLUSHES && vc->fl[k].used) k++;
  if (k == BRAID_VC_FLUSHES) return 1;
  for (int r = 0; r < vc->nrails; r++) /* room on every live rail's QP first: all or nothing */
    if (!vc->down[r] && vc->flush[r] == NULL && braid_verbs_flush_open(vc->ep[r], &vc->flush[r]))
      return vci_fail(vc, "cannot open the flush queue pair of rail %s", braid_verbs_ep_name(vc->ep[r]));
  vc->fl[k].pending = 0;
  for (int r = 0; r < vc->nrails; r++) {
    if (vc->down[r]) continue; /* a fenced rail's writes were all drained before it was failed */
    int rc = braid_verbs_flush_post(vc->flush[r], &mem->mr[r], buf, (uint64_t)k);
    if (rc < 0) return vci_fail(vc, "posting the flush read on rail %s failed", braid_verbs_ep_name(vc->ep[r]));
    if (rc == 1) return vci_fail(vc, "rail %s's flush queue is full", braid_verbs_ep_name(vc->ep[r]));
    vc->fl[k].pending++;
  }
  if (!vc->fl[k].pending) return vci_fail(vc, "a flush with every rail down");
  vc->fl[k].used = true;
  *req = k;
  return 0;
}

int braid_vc_flush_test(struct braid_vc *vc, int req, bool *done) {
  *done = false;
  if (braid_vc_progress(vc)) return -1;
  if (req < 0 || req >= BRAID_VC_FLUSHES || !vc->fl[req].used) return vci_fail(vc, "test of an unknown flush");
  for (int r = 0; r < vc->nrails; r++) {
    struct braid_verbs_ev ev[BRAID_VERBS_FLUSH_DEPTH];
    int n = vc->flush[r] ? braid_verbs_flush_poll(vc->flush[r], ev, BRAID_VERBS_FLUSH_DEPTH) : 0;
    if (n < 0) return vci_fail(vc, "rail %s's flush queue cannot be polled", braid_verbs_ep_name(vc->ep[r]));
    for (int i = 0; i < n; i++) {
      if (ev[i].kind == BRAID_VERBS_EV_ERROR)
        return vci_fail(vc, "the flush on rail %s failed: %s", braid_verbs_ep_name(vc->ep[r]), ev[i].why);
      vc->flush_reads[r]++;
      if (ev[i].cookie < BRAID_VC_FLUSHES && vc->fl[ev[i].cookie].pending > 0) vc->fl[ev[i].cookie].pending--;
    }
  }
  if (vc->fl[req].pending) return 0;
  vc->fl[req].used = false;
  *done = true;
  return 0;
}

void braid_vc_describe(const struct braid_vc *vc, char *buf, size_t len) {
  size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
  buf[0] = 0;
  for (int r = 0; r < vc->nrails; r++)
    PUT("rail %d: %s, state %d, %zu bytes in flight%s%s, generation %u, rejoin step %d; ", r,
        vc->down[r] ? "down" : "up", (int)vc->sched.rail[r].state, vc->sched.rail[r].inflight,
        vc->probe_out[r] ? ", probe out" : "", vc->fence_wait[r] ? ", fence pending" : "", vc->rj[r].gen,
        vc->rj[r].state);
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    const struct sreq *q = &vc->s[k];
    const struct rreq *p = &vc->r[k];
    if (vc->sender && q->used)
      PUT("send %u: cts %d, %u/%u chunks acked, fin %d/%d; ", q->seq, q->have_cts, q->acked, q->nch,
          q->needs_fin, q->fin_done);
    if (!vc->sender && p->used)
      PUT("recv %u: %u/%u chunks, fin %d/%d%s; ", p->seq, p->got, p->nch, p->needs_fin, p->fin,
          p->detached ? ", detached" : "");
  }
#undef PUT
}

const char *braid_vc_error(const struct braid_vc *vc) { return vc->err; }
bool braid_vc_usage_error(const struct braid_vc *vc) { return vc->usage; }
uint64_t braid_vc_rail_bytes(const struct braid_vc *vc, int rail) { return vc->rail_bytes[rail]; }
bool braid_vc_rail_down(const struct braid_vc *vc, int rail) { return vc->down[rail]; }
void braid_vc_rail_health(const struct braid_vc *vc, int rail, struct braid_vc_rail_health *h) {
  const struct braid_sched_rail *sr = &vc->sched.rail[rail];
  *h = (struct braid_vc_rail_health){.down = vc->down[rail], .state = (int)sr->state, .est_Bps = sr->est_Bps,
                                     .bytes = vc->rail_bytes[rail], .failures = vc->rj[rail].failures,
                                     .demotions = vc->demotions[rail], .rejoins = vc->rj[rail].rejoins,
                                     .last_rejoin_ns = vc->rj[rail].last_rejoin_ns};
}
uint64_t braid_vc_rail_flushes(const struct braid_vc *vc, int rail) { return vc->flush_reads[rail]; }

void braid_vc_close(struct braid_vc *vc) {
  if (!vc) return;
  braid_vc_dereg(vc, vc->scratch_mem);
  free(vc->scratch);
  for (int r = 0; r < vc->nrails; r++) braid_verbs_flush_close(vc->flush[r]); /* before its PD goes */
  for (int r = 0; r < vc->nrails; r++) braid_verbs_ep_close(vc->ep[r]);
  for (int k = 0; k < BRAID_VC_SLOTS; k++) {
    free(vc->s[k].ch);
    free(vc->r[k].seen);
  }
  free(vc);
}
