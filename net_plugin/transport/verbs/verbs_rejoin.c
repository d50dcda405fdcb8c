/* Failed verbs rails coming back (verbs_conn.h, "Rejoin").
 *
 * A rail fails for good on both ends (fenced: its queue pairs in ERR, the receiver's view of
 * its receives applied by the sender).  Its way back, driven by the sender:
 *   1. the sender waits for its side of the fence (the receiver's FENCED applied), then tries,
 *      backing off (100 ms doubling to 5 s, at most 1 s apart while it only waits for its own
 *      port, at once on the port's PORT_ACTIVE event; a rail that failed again soon after a
 *      rejoin starts where it left), until its port is ACTIVE (and, over Ethernet, has its GID);
 *   2. it makes the rail's endpoint new (verbs_ep.h renew: the old queue pair and its completion
 *      queue destroyed, so nothing of them can land or be reported any more; the protection
 *      domain, and every registration's keys, kept) and sends REJOIN with the new queue pair's
 *      address and the next generation, on a live rail;
 *   3. the receiver, whose side of the fence is done (its FENCED sent) and whose port is up,
 *      renews its endpoint the same way, connects it to the sender's, and answers REJOIN_ACK
 *      with its own address and the count of FENCEDs it sent for the rail; otherwise "not now";
 *   4. the sender, once it has applied that many FENCEDs (an answer may overtake one on another
 *      rail), connects, takes the rail up in the new generation, sends JOINED on the rail itself
 *      and hands it to the scheduler as a restored rail: probed into the scratch area before it
 *      carries data;
 *   5. the receiver posts on the rail again once JOINED arrives on it.
 * A FENCE names its generation, so one from before the rejoin (it can arrive late, on another
 * rail) never fails the new queue pair.  An answer that cannot be used (an address the endpoint
 * cannot connect to) fails that try only: the rail waits for the next one.  One INFO line per
 * rejoin; the counts go to telemetry. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "stripe/sched.h"
#include "transport/verbs/verbs_ep.h"
#include "transport/verbs/verbs_vc.h"

#define RJ_BACKOFF_MIN_NS 100000000ull   /* the first try 100 ms after the fence ... */
#define RJ_BACKOFF_MAX_NS 5000000000ull  /* ... doubling to 5 s while the peer is not ready ... */
#define RJ_PORT_MAX_NS 1000000000ull     /* ... and to 1 s while only this side's port is down
                                            (a local query; its PORT_ACTIVE event tries at once) */
#define RJ_ANSWER_NS 5000000000ull       /* a REJOIN unanswered this long is asked again */
#define RJ_STABLE_NS 30000000000ull      /* up this long, a rail's next failure starts afresh */

static void backoff(struct vc_rejoin *j, uint64_t now, uint64_t max_ns) {
  uint64_t wait = j->backoff_ns < max_ns ? j->backoff_ns : max_ns;
  j->next_ns = now + wait;
  j->backoff_ns = j->backoff_ns * 2 > RJ_BACKOFF_MAX_NS ? RJ_BACKOFF_MAX_NS : j->backoff_ns * 2;
}

/* The reason a try did not go ahead, logged when it changes (not every back-off); max_ns: the
 * longest wait before the next. */
static void not_yet_max(struct braid_vc *vc, int r, const char *why, uint64_t now, uint64_t max_ns) {
  struct vc_rejoin *j = &vc->rj[r];
  if (strcmp(j->why, why)) {
    snprintf(j->why, sizeof j->why, "%s", why);
    BRAID_INFO(NCCL_NET, "verbs rail %d (%s): not rejoining yet: %s", r, braid_verbs_ep_name(vc->ep[r]), why);
  }
  j->state = RJ_WAIT;
  backoff(j, now, max_ns);
}

static void not_yet(struct braid_vc *vc, int r, const char *why, uint64_t now) {
  not_yet_max(vc, r, why, now, RJ_BACKOFF_MAX_NS);
}

void vci_rejoin_port_active(struct braid_vc *vc, int r, uint64_t now) {
  struct vc_rejoin *j = &vc->rj[r];
  if (vc->sender && vc->down[r] && j->state == RJ_WAIT && j->next_ns > now) j->next_ns = now;
}

void vci_rejoin_down(struct braid_vc *vc, int r, uint64_t now) {
  struct vc_rejoin *j = &vc->rj[r];
  bool flapped = j->rejoins && now - j->last_rejoin_ns < RJ_STABLE_NS;
  j->state = RJ_WAIT;
  j->fence_applied = false;
  j->failures++;
  j->down_ns = now;
  j->why[0] = 0;
  if (!flapped || !j->backoff_ns) j->backoff_ns = RJ_BACKOFF_MIN_NS;
  backoff(j, now, RJ_BACKOFF_MAX_NS);
}

void vci_rejoin_fence_applied(struct braid_vc *vc, int r) { vc->rj[r].fence_applied = true; }

bool vci_rejoin_current(const struct braid_vc *vc, int r, uint8_t gen) { return vc->rj[r].gen == gen; }

/* Rail r carries again on this end (generation gen); one INFO line (extra: what follows). */
static void rail_up(struct braid_vc *vc, int r, uint8_t gen, uint64_t now, const char *extra) {
  struct vc_rejoin *j = &vc->rj[r];
  j->gen = gen;
  j->state = RJ_UP;
  j->rejoins++;
  j->last_rejoin_ns = now;
  j->why[0] = 0;
  vc->down[r] = false;
  BRAID_INFO(NCCL_INIT | NCCL_NET, "verbs rail %d (%s): rejoined after %.1f s down (generation %u, rejoin %u)%s", r,
             braid_verbs_ep_name(vc->ep[r]), (double)(now - j->down_ns) * 1e-9, j->gen, j->rejoins, extra);
}

/* ---------- sender ---------- */

static void s_ask(struct braid_vc *vc, int r, uint64_t now) {
  struct vc_rejoin *j = &vc->rj[r];
  char why[96];
  if (!braid_verbs_ep_port_ready(vc->ep[r], why, sizeof why)) return not_yet_max(vc, r, why, now, RJ_PORT_MAX_NS);
  if (braid_verbs_ep_renew(vc->ep[r])) return not_yet(vc, r, "a new queue pair could not be made", now);
  struct braid_vctl m = {.type = BRAID_VCTL_REJOIN, .rejoin = {.rail = (uint8_t)r, .gen = (uint8_t)(j->gen + 1)}};
  braid_verbs_ep_addr(vc->ep[r], &m.rejoin.addr);
  if (vci_ctl_queue_on(vc, &m, -1)) return;
  j->state = RJ_ASKED;
  j->asked_ns = now;
}

/* The receiver joined and every FENCED it counted is applied: the rail is up again. */
static void s_join(struct braid_vc *vc, int r, uint64_t now) {
  struct vc_rejoin *j = &vc->rj[r];
  if (braid_verbs_ep_connect(vc->ep[r], &j->ack.addr))
    return not_yet(vc, r, "the peer's new queue pair could not be connected to", now);
  rail_up(vc, r, j->ack.gen, now, "; probed before it carries data");
  vc->probe_out[r] = false;
  struct braid_vctl m = {.type = BRAID_VCTL_JOINED, .rejoin = {.rail = (uint8_t)r, .gen = j->gen}};
  vci_ctl_queue_on(vc, &m, r);
  braid_sched_restored(&vc->sched, r, now);
}

void vci_rejoin_progress(struct braid_vc *vc, uint64_t now) {
  for (int r = 0; r < vc->nrails && !vc->failed; r++) {
    struct vc_rejoin *j = &vc->rj[r];
    if (!vc->down[r] || vc->fence_wait[r] || !j->fence_applied) continue;
    if (j->state == RJ_ACKED) {
      if (j->fenced >= j->ack.fenced) s_join(vc, r, now);
    } else if (j->state == RJ_ASKED) {
      if (now - j->asked_ns > RJ_ANSWER_NS) not_yet(vc, r, "the peer did not answer the rejoin", now);
    } else if (j->state == RJ_WAIT && now >= j->next_ns) {
      s_ask(vc, r, now);
    }
  }
}

static void s_answer(struct braid_vc *vc, int r, const struct braid_vctl_rejoin *a, uint64_t now) {
  struct vc_rejoin *j = &vc->rj[r];
  if (j->state != RJ_ASKED || a->gen != (uint8_t)(j->gen + 1)) {
    BRAID_INFO(NCCL_NET, "verbs rail %d: a rejoin answer for generation %u, none asked: ignored", r, a->gen);
    return;
  }
  if (a->status == BRAID_VREJOIN_NOT_NOW) return not_yet(vc, r, "the peer's side is not ready", now);
  j->ack = *a;
  j->state = RJ_ACKED;
}

/* ---------- receiver ---------- */

static void r_answer(struct braid_vc *vc, int r, uint8_t gen, bool joined) {
  struct braid_vctl m = {.type = BRAID_VCTL_REJOIN_ACK,
                         .rejoin = {.rail = (uint8_t)r, .gen = gen, .fenced = vc->rj[r].fenced,
                                    .status = joined ? BRAID_VREJOIN_JOINED : BRAID_VREJOIN_NOT_NOW}};
  if (joined) braid_verbs_ep_addr(vc->ep[r], &m.rejoin.addr);
  vci_ctl_queue_on(vc, &m, -1);
}

static void r_rejoin(struct braid_vc *vc, int r, const struct braid_vctl_rejoin *q) {
  struct vc_rejoin *j = &vc->rj[r];
  /* The next generation, or this one again while not yet confirmed (the sender's last answer
   * could not be used: it made its queue pair new again). */
  bool again = j->state == RJ_JOINING && q->gen == j->gen;
  if (!again && (q->gen != (uint8_t)(j->gen + 1) || !vc->down[r])) {
    BRAID_INFO(NCCL_NET, "verbs rail %d: REJOIN for generation %u (this side: %u, %s): ignored", r, q->gen, j->gen,
               vc->down[r] ? "down" : "up");
    return;
  }
  char why[96];
  if (vc->fence_wait[r]) return r_answer(vc, r, q->gen, false);
  if (!braid_verbs_ep_port_ready(vc->ep[r], why, sizeof why)) {
    BRAID_INFO(NCCL_NET, "verbs rail %d (%s): not rejoining yet: %s", r, braid_verbs_ep_name(vc->ep[r]), why);
    return r_answer(vc, r, q->gen, false);
  }
  if (braid_verbs_ep_renew(vc->ep[r]) || braid_verbs_ep_connect(vc->ep[r], &q->addr)) {
    BRAID_INFO(NCCL_NET, "verbs rail %d (%s): rejoin of generation %u failed here (see the WARN above)", r,
               braid_verbs_ep_name(vc->ep[r]), q->gen);
    j->state = RJ_WAIT;
    return r_answer(vc, r, q->gen, false);
  }
  if (vc->flush[r]) { /* the flush's loopback queue pair went down with the port: opened anew */
    braid_verbs_flush_close(vc->flush[r]);
    vc->flush[r] = NULL;
  }
  j->gen = q->gen;
  j->state = RJ_JOINING;
  r_answer(vc, r, q->gen, true);
}

static void r_joined(struct braid_vc *vc, int r, int on, const struct braid_vctl_rejoin *m, uint64_t now) {
  struct vc_rejoin *j = &vc->rj[r];
  if (j->state != RJ_JOINING || m->gen != j->gen || on != r) {
    BRAID_INFO(NCCL_NET, "verbs rail %d: JOINED of generation %u on rail %d: ignored", r, m->gen, on);
    return;
  }
  rail_up(vc, r, j->gen, now, "");
}

void vci_rejoin_ctl(struct braid_vc *vc, int on, const struct braid_vctl *m, uint64_t now) {
  int r = m->rejoin.rail;
  if (m->type == BRAID_VCTL_REJOIN_ACK) s_answer(vc, r, &m->rejoin, now);
  else if (m->type == BRAID_VCTL_REJOIN) r_rejoin(vc, r, &m->rejoin);
  else r_joined(vc, r, on, &m->rejoin, now);
}
