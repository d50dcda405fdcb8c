/* Multi-rail scheduler: estimator, rail choice and state machine (see sched.h). */
#include "stripe/sched.h"

#include <string.h>

#define NS_PER_S 1e9
#define MIN_BPS 1.0 /* keeps every division by an estimate defined */

typedef struct braid_sched_rail rail_t;

void braid_sched_params_default(struct braid_sched_params *p) {
  memset(p, 0, sizeof *p);
  p->queue_target_ns = 20000000;
  p->inflight_min = 256u << 10;
  p->inflight_max = 8u << 20;
  p->probe_inflight = 256u << 10;
  p->est_window_ns = 1000000;
  p->est_tau_ns = 20000000;
  p->prior_Bps = 1e9;
  p->demote_ratio = 0.15;
  p->demote_after_ns = 100000000;
  p->promote_ratio = 0.3;
  p->probe_interval_ns = 50000000;
  p->probe_interval_max_ns = 1000000000;
  p->probe_eval_ns = 20000000;
  p->late_mult = 2.0;
  p->late_margin_ns = 5000000;
  p->stall_mult = 4.0;
  p->stall_margin_ns = 200000000;
  p->retry_base_ns = 50000000;
  p->retry_max_ns = 5000000000ull;
  p->error_forget_ns = 10000000000ull;
}

static bool valid(const struct braid_sched *s, int i) { return s && i >= 0 && i < s->nrails; }

static bool up_state(const rail_t *r) {
  return r->state == BRAID_RAIL_ACTIVE || r->state == BRAID_RAIL_PROBING;
}

static bool carrying(const rail_t *r) { return up_state(r) && !r->standby; }

/* Backup rails stand by while any primary rail is ACTIVE or PROBING. */
static void update_standby(struct braid_sched *s) {
  bool primary_up = false;
  for (int i = 0; i < s->nrails; i++) primary_up |= !s->rail[i].backup && up_state(&s->rail[i]);
  for (int i = 0; i < s->nrails; i++) s->rail[i].standby = s->rail[i].backup && primary_up;
}

/* ------------------------------------------------------------------------------------------ */
/* Events */

/* Best estimate among the measured ACTIVE rails other than `self` (0: none). */
static double ref_excl(const struct braid_sched *s, int self) {
  double best = 0;
  for (int i = 0; i < s->nrails; i++) {
    const rail_t *r = &s->rail[i];
    if (i != self && r->state == BRAID_RAIL_ACTIVE && r->measured && r->est_Bps > best)
      best = r->est_Bps;
  }
  return best;
}

/* Queues an event; a full ring loses its oldest entry (counted) rather than the newest. */
static void emit(struct braid_sched *s, int i, enum braid_rail_state from,
                 enum braid_sched_reason why, uint64_t now) {
  if (s->ev_count == BRAID_SCHED_MAX_EVENTS) {
    s->ev_head = (s->ev_head + 1) % BRAID_SCHED_MAX_EVENTS;
    s->ev_count--;
    s->ev_lost++;
  }
  struct braid_sched_event *e = &s->ev[(s->ev_head + s->ev_count) % BRAID_SCHED_MAX_EVENTS];
  s->ev_count++;
  e->rail = i;
  e->from = from;
  e->to = s->rail[i].state;
  e->reason = why;
  e->at_ns = now;
  e->est_Bps = s->rail[i].est_Bps;
  e->ref_Bps = ref_excl(s, i);
}

/* Moves rail i to `to`, runs the state's entry actions and queues the event. */
static void set_state(struct braid_sched *s, int i, enum braid_rail_state to,
                      enum braid_sched_reason why, uint64_t now) {
  rail_t *r = &s->rail[i];
  enum braid_rail_state from = r->state;
  r->state = to;
  r->slow = false;
  if (to == BRAID_RAIL_DEGRADED) {
    r->probe_gap_ns = s->p.probe_interval_ns;
    r->next_probe_ns = now + r->probe_gap_ns;
  }
  if (to == BRAID_RAIL_PROBING) r->probe_busy_ns = 0;
  update_standby(s);
  emit(s, i, from, why, now);
}

void braid_sched_set_backup(struct braid_sched *s, int rail, bool backup) {
  if (!valid(s, rail)) return;
  s->rail[rail].backup = backup;
  update_standby(s);
}

/* While any rail is up, some rail must carry traffic: the best DEGRADED one if need be. */
static void ensure_carrier(struct braid_sched *s, uint64_t now) {
  int best = -1;
  for (int i = 0; i < s->nrails; i++) {
    const rail_t *r = &s->rail[i];
    if (carrying(r)) return;
    if (r->state == BRAID_RAIL_DEGRADED && (best < 0 || r->est_Bps > s->rail[best].est_Bps))
      best = i;
  }
  if (best >= 0) set_state(s, best, BRAID_RAIL_ACTIVE, BRAID_SCHED_LAST_LEFT, now);
}

/* ------------------------------------------------------------------------------------------ */
/* Set-up */

static void rail_init(rail_t *r, double nominal, uint64_t now) {
  memset(r, 0, sizeof *r);
  r->state = BRAID_RAIL_ACTIVE;
  r->nominal_Bps = nominal;
  r->est_Bps = nominal;
  r->busy_mark_ns = now;
  r->last_progress_ns = now;
}

int braid_sched_init(struct braid_sched *s, int nrails, const struct braid_sched_params *p,
                     const double *nominal_Bps, uint64_t now_ns) {
  if (!s || nrails < 1 || nrails > BRAID_SCHED_MAX_RAILS) return -1;
  memset(s, 0, sizeof *s);
  s->nrails = nrails;
  if (p)
    s->p = *p;
  else
    braid_sched_params_default(&s->p);
  if (!(s->p.prior_Bps >= MIN_BPS)) s->p.prior_Bps = MIN_BPS;
  for (int i = 0; i < nrails; i++) {
    double nom = nominal_Bps && nominal_Bps[i] >= MIN_BPS ? nominal_Bps[i] : s->p.prior_Bps;
    rail_init(&s->rail[i], nom, now_ns);
  }
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Choice of rail */

/* The estimate, capped by what a silent busy rail can at most be delivering. */
static double est_now(const rail_t *r, uint64_t now) {
  if (r->inflight == 0 || now <= r->last_progress_ns) return r->est_Bps;
  double bound = (double)r->inflight * NS_PER_S / (double)(now - r->last_progress_ns);
  return bound < r->est_Bps ? bound : r->est_Bps;
}

/* Seconds from now until the rail would have delivered a further `bytes`. */
static double finish_s(const rail_t *r, size_t bytes, uint64_t now) {
  return ((double)r->inflight + (double)bytes) / est_now(r, now);
}

size_t braid_sched_cap(const struct braid_sched *s, int i) {
  if (!valid(s, i)) return 0;
  const rail_t *r = &s->rail[i];
  size_t cap = s->p.inflight_min;
  if (r->measured) {
    double c = r->est_Bps * (double)s->p.queue_target_ns / NS_PER_S;
    if (c >= (double)s->p.inflight_max)
      cap = s->p.inflight_max;
    else if (c > (double)s->p.inflight_min)
      cap = (size_t)c;
  }
  if (r->state == BRAID_RAIL_PROBING && cap > s->p.probe_inflight) cap = s->p.probe_inflight;
  return cap;
}

static bool has_room(const struct braid_sched *s, int i, size_t bytes) {
  const rail_t *r = &s->rail[i];
  return r->inflight == 0 || r->inflight + bytes <= braid_sched_cap(s, i);
}

static bool avoided(uint32_t avoid, int i) { return (avoid >> i) & 1u; }

/* Empty and due for a probe: a DEGRADED rail at its probe time, or an ACTIVE one that earliest-
 * finish has passed over for probe_interval_max_ns (its estimate, measured only while busy, may
 * be stale: a rail that was slow for a while and then recovered would otherwise never be picked
 * again). */
static bool probe_due(const struct braid_sched *s, int i, uint64_t now) {
  const rail_t *r = &s->rail[i];
  if (r->inflight != 0) return false;
  if (r->state == BRAID_RAIL_DEGRADED) return now >= r->next_probe_ns;
  if (r->state != BRAID_RAIL_ACTIVE || !r->measured || r->standby ||
      now - r->last_progress_ns < s->p.probe_interval_max_ns)
    return false;
  for (int k = 0; k < s->nrails; k++) /* passed over: others carry traffic meanwhile */
    if (k != i && s->rail[k].inflight > 0 && s->rail[k].state != BRAID_RAIL_DOWN) return true;
  return false;
}

bool braid_sched_probe_due(const struct braid_sched *s, int rail, uint64_t now_ns) {
  return valid(s, rail) && probe_due(s, rail, now_ns);
}

/* A rail due for a probe (DEGRADED ones first), or -1. */
static int due_probe(const struct braid_sched *s, uint32_t avoid, uint64_t now) {
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < s->nrails; i++)
      if ((s->rail[i].state == BRAID_RAIL_DEGRADED) == (pass == 0) && probe_due(s, i, now) &&
          !avoided(avoid, i))
        return i;
  return -1;
}

/* The carrying rail with room that finishes `bytes` earliest; ties go in rotation order. */
static int best_with_room(const struct braid_sched *s, size_t bytes, uint32_t avoid,
                          uint64_t now) {
  int best = -1;
  double best_f = 0;
  for (int k = 0; k < s->nrails; k++) {
    int i = (int)((s->rr + (unsigned)k) % (unsigned)s->nrails);
    if (!carrying(&s->rail[i]) || avoided(avoid, i) || !has_room(s, i, bytes)) continue;
    double f = finish_s(&s->rail[i], bytes, now);
    if (best < 0 || f < best_f) best = i, best_f = f;
  }
  return best;
}

/* Latest acceptable finish: the best finish on a rail that may take the chunk, ignoring caps,
 * or when all known work (in flight + pending) would drain if spread perfectly over the
 * carrying rails. */
static double horizon(const struct braid_sched *s, size_t bytes, size_t pending, uint32_t avoid,
                      uint64_t now) {
  double best = -1, sum_est = 0, sum_in = 0;
  for (int i = 0; i < s->nrails; i++) {
    const rail_t *r = &s->rail[i];
    if (!carrying(r)) continue;
    double f = finish_s(r, bytes, now);
    if (!avoided(avoid, i) && (best < 0 || f < best)) best = f;
    sum_est += est_now(r, now);
    sum_in += (double)r->inflight;
  }
  if (sum_est <= 0) return 0;
  double drain = (sum_in + (double)(pending > bytes ? pending : bytes)) / sum_est;
  return drain > best ? drain : best;
}

int braid_sched_pick(const struct braid_sched *s, size_t bytes, size_t pending, uint64_t now_ns) {
  return braid_sched_pick_avoid(s, bytes, pending, 0, now_ns);
}

int braid_sched_pick_equal(const struct braid_sched *s, size_t bytes, unsigned *rr) {
  for (int k = 0; k < s->nrails; k++) {
    int i = (int)(*rr % (unsigned)s->nrails);
    const rail_t *r = &s->rail[i];
    if (r->state == BRAID_RAIL_DOWN) {
      ++*rr;
      continue;
    }
    if (r->inflight && r->inflight + bytes > braid_sched_cap(s, i)) return BRAID_SCHED_WAIT;
    ++*rr;
    return i;
  }
  return BRAID_SCHED_ALL_DOWN;
}

struct braid_sched_place braid_sched_place(const struct braid_sched *s, bool equal, unsigned *rr,
                                           enum braid_probe_style style, size_t probe_len, size_t len,
                                           size_t pending, uint64_t now_ns) {
  struct braid_sched_place p = {.rail = BRAID_SCHED_WAIT, .len = len, .probe = -1};
  if (equal) {
    p.rail = braid_sched_pick_equal(s, len, rr);
    return p;
  }
  p.rail = braid_sched_pick(s, len, pending, now_ns);
  if (style == BRAID_PROBE_PIECES) {
    if (p.rail >= 0 && len > probe_len && braid_sched_probe_due(s, p.rail, now_ns)) {
      p.len = probe_len; /* a probe is a small piece */
    } else if (p.rail == BRAID_SCHED_WAIT && len > probe_len) {
      p.rail = braid_sched_pick(s, probe_len, pending, now_ns);
      if (p.rail >= 0) p.len = probe_len;
    }
    return p;
  }
  if (p.rail < 0) return p;
  uint32_t demoted = 0, live = 0; /* rails up but not ACTIVE (demoted or on probation), rails up */
  for (int i = 0; i < s->nrails; i++) {
    if (s->rail[i].state == BRAID_RAIL_DOWN) continue;
    live |= 1u << i;
    if (s->rail[i].state != BRAID_RAIL_ACTIVE) demoted |= 1u << i;
  }
  if ((demoted >> p.rail & 1) && demoted != live) {
    p.probe = p.rail;
    p.rail = braid_sched_pick_avoid(s, len, pending, demoted, now_ns);
  }
  return p;
}

int braid_sched_pick_avoid(const struct braid_sched *s, size_t bytes, size_t pending,
                           uint32_t avoid, uint64_t now_ns) {
  if (braid_sched_count(s, BRAID_RAIL_DOWN) == s->nrails) return BRAID_SCHED_ALL_DOWN;
  int i = due_probe(s, avoid, now_ns);
  if (i >= 0) return i;
  i = best_with_room(s, bytes, avoid, now_ns);
  if (i < 0) return BRAID_SCHED_WAIT;
  double limit = horizon(s, bytes, pending, avoid, now_ns) * (1 + 1e-9);
  return finish_s(&s->rail[i], bytes, now_ns) <= limit ? i : BRAID_SCHED_WAIT;
}

/* ------------------------------------------------------------------------------------------ */
/* Traffic and the estimator */

void braid_sched_sent(struct braid_sched *s, int i, size_t bytes, uint64_t now_ns) {
  if (!valid(s, i) || s->rail[i].state == BRAID_RAIL_DOWN) return;
  rail_t *r = &s->rail[i];
  if (r->inflight == 0) { /* a busy period starts: idle time is never measured */
    r->busy_mark_ns = now_ns;
    r->last_progress_ns = now_ns;
    r->stall_reported = false;
    r->late_reported = false;
  }
  r->inflight += bytes;
  if (r->state == BRAID_RAIL_DEGRADED) r->next_probe_ns = now_ns + r->probe_gap_ns;
  s->rr = (unsigned)(i + 1) % (unsigned)s->nrails;
}

static void busy_account(rail_t *r, uint64_t now) {
  if (r->inflight > 0 && now > r->busy_mark_ns) {
    if (r->win_busy_ns == 0) r->win_start_ns = r->busy_mark_ns;
    r->win_busy_ns += now - r->busy_mark_ns;
    r->busy_mark_ns = now;
  }
}

static void delay_update(rail_t *r, uint64_t sent, uint64_t now) {
  if (sent == 0 || now < sent) return;
  uint64_t d = now - sent;
  r->delay_ns = r->delay_ns ? (7 * r->delay_ns + d) / 8 : d;
}

/* First sample replaces the prior; later ones weigh by their busy time against est_tau_ns. */
/* An estimate last fed more than stale_ns ago says nothing about now (a rail that carried only
 * sparse probes since): the next sample replaces it instead of nudging it. */
/* Returns true when the estimate was stale and replaced. */
static bool est_update(const struct braid_sched_params *p, rail_t *r, double sample,
                       uint64_t busy, uint64_t now) {
  uint64_t stale_ns = p->probe_interval_max_ns;
  bool stale = r->measured && now - r->est_at_ns > stale_ns;
  if (!r->measured || stale) {
    r->est_Bps = sample;
    r->measured = true;
  } else {
    double a = (double)busy / (double)(busy + p->est_tau_ns);
    r->est_Bps += a * (sample - r->est_Bps);
  }
  if (r->est_Bps < MIN_BPS) r->est_Bps = MIN_BPS;
  r->est_at_ns = now;
  return stale;
}

/* DEGRADED: a healthy probe starts an evaluation, a slow one backs the probes off. */
static void degraded_sample(struct braid_sched *s, int i, double sample, uint64_t now) {
  rail_t *r = &s->rail[i];
  if (sample >= s->p.promote_ratio * ref_excl(s, i)) {
    r->est_Bps = sample; /* forget the slow history: the evaluation measures afresh */
    set_state(s, i, BRAID_RAIL_PROBING, BRAID_SCHED_PROBE_OK, now);
    return;
  }
  if (r->inflight > 0) return; /* leftovers of its ACTIVE days still draining: not a probe */
  r->probe_gap_ns *= 2;
  if (r->probe_gap_ns > s->p.probe_interval_max_ns) r->probe_gap_ns = s->p.probe_interval_max_ns;
  r->next_probe_ns = now + r->probe_gap_ns;
}

/* PROBING: a verdict once probe_eval_ns of busy time has been measured. */
static void probing_sample(struct braid_sched *s, int i, uint64_t busy, uint64_t now) {
  rail_t *r = &s->rail[i];
  r->probe_busy_ns += busy;
  if (r->probe_busy_ns < s->p.probe_eval_ns) return;
  if (r->est_Bps >= s->p.promote_ratio * ref_excl(s, i))
    set_state(s, i, BRAID_RAIL_ACTIVE, BRAID_SCHED_RECOVERED, now);
  else
    set_state(s, i, BRAID_RAIL_DEGRADED, BRAID_SCHED_SLOW, now);
}

static void close_window(struct braid_sched *s, int i, uint64_t now) {
  rail_t *r = &s->rail[i];
  uint64_t busy = r->win_busy_ns;
  double sample = (double)r->win_bytes * NS_PER_S / (double)busy;
  r->win_busy_ns = 0;
  r->win_bytes = 0;
  double before = r->est_Bps;
  bool stale = est_update(&s->p, r, sample, busy, now);
  /* A passed-over rail whose probe looks much faster than it was (it may have recovered, or a
   * shaper's token bucket filled while it idled): evaluated under PROBING's cap first. */
  if (stale && r->state == BRAID_RAIL_ACTIVE && sample > 2 * before)
    set_state(s, i, BRAID_RAIL_PROBING, BRAID_SCHED_PROBE_OK, now);
  else if (r->state == BRAID_RAIL_DEGRADED) degraded_sample(s, i, sample, now);
  else if (r->state == BRAID_RAIL_PROBING) probing_sample(s, i, busy, now);
}

void braid_sched_acked(struct braid_sched *s, int i, size_t bytes, uint64_t sent_ns,
                       uint64_t now_ns) {
  if (!valid(s, i) || s->rail[i].state == BRAID_RAIL_DOWN) return;
  rail_t *r = &s->rail[i];
  if (bytes > r->inflight) bytes = r->inflight; /* never below zero, whatever the caller does */
  if (r->win_busy_ns && now_ns - r->win_start_ns > s->p.probe_interval_max_ns)
    r->win_busy_ns = r->win_bytes = 0; /* a window that old mixes two different rails: restart */
  busy_account(r, now_ns);
  r->inflight -= bytes;
  r->win_bytes += bytes;
  r->bytes_acked += bytes;
  r->last_progress_ns = now_ns;
  r->stall_reported = false;
  r->late_reported = false;
  delay_update(r, sent_ns, now_ns);
  /* A rail fed only sparse probes never gathers est_window_ns of busy time: when its estimate is
   * stale, each probe that empties it is a sample of its own. */
  bool stale = r->inflight == 0 && now_ns - r->est_at_ns > s->p.probe_interval_max_ns;
  if (r->win_busy_ns > 0 && r->win_bytes > 0 && (r->win_busy_ns >= s->p.est_window_ns || stale))
    close_window(s, i, now_ns);
}

void braid_sched_withdrawn(struct braid_sched *s, int i, size_t bytes, uint64_t now_ns) {
  if (!valid(s, i) || s->rail[i].state == BRAID_RAIL_DOWN) return;
  rail_t *r = &s->rail[i];
  if (bytes > r->inflight) bytes = r->inflight;
  busy_account(r, now_ns); /* the rail was busy with its other chunks until now */
  r->inflight -= bytes;
}

/* ------------------------------------------------------------------------------------------ */
/* Failure and recovery */

void braid_sched_failed(struct braid_sched *s, int i, uint64_t now_ns) {
  if (!valid(s, i) || s->rail[i].state == BRAID_RAIL_DOWN) return;
  rail_t *r = &s->rail[i];
  r->inflight = 0;
  r->win_busy_ns = 0;
  r->win_bytes = 0;
  r->stall_reported = false;
  r->late_reported = false;
  r->errors++;
  r->recent_errors++;
  r->last_error_ns = now_ns;
  set_state(s, i, BRAID_RAIL_DOWN, BRAID_SCHED_FAILED, now_ns);
  ensure_carrier(s, now_ns);
}

void braid_sched_restored(struct braid_sched *s, int i, uint64_t now_ns) {
  if (!valid(s, i) || s->rail[i].state != BRAID_RAIL_DOWN) return;
  rail_t *r = &s->rail[i];
  double ref = ref_excl(s, i);
  r->est_Bps = r->nominal_Bps > ref ? r->nominal_Bps : ref; /* optimistic: gets probed at once */
  r->measured = false;
  r->last_progress_ns = now_ns;
  set_state(s, i, BRAID_RAIL_PROBING, BRAID_SCHED_RESTORED, now_ns);
}

uint64_t braid_sched_retry_at(const struct braid_sched *s, int i) {
  if (!valid(s, i) || s->rail[i].state != BRAID_RAIL_DOWN) return 0;
  const rail_t *r = &s->rail[i];
  unsigned shift = r->recent_errors > 1 ? r->recent_errors - 1 : 0;
  uint64_t d = s->p.retry_max_ns;
  if (shift < 32 && (s->p.retry_base_ns << shift) >> shift == s->p.retry_base_ns &&
      (s->p.retry_base_ns << shift) < d)
    d = s->p.retry_base_ns << shift;
  return r->last_error_ns + d;
}

/* Seconds the other carrying rails would need for their own in-flight bytes plus rail i's
 * (negative when there is no other carrying rail). */
static double others_drain_s(const struct braid_sched *s, int i, uint64_t now) {
  double est = 0, bytes = (double)s->rail[i].inflight;
  for (int j = 0; j < s->nrails; j++) {
    if (j == i || !carrying(&s->rail[j])) continue;
    est += est_now(&s->rail[j], now);
    bytes += (double)s->rail[j].inflight;
  }
  return est > 0 ? bytes / est : -1;
}

bool braid_sched_late(const struct braid_sched *s, int i, uint64_t now_ns) {
  if (!valid(s, i)) return false;
  const rail_t *r = &s->rail[i];
  if (r->state == BRAID_RAIL_DOWN || r->inflight == 0) return false;
  double others = others_drain_s(s, i, now_ns);
  if (others < 0) return false;
  double mine = (double)r->inflight / est_now(r, now_ns);
  return mine * NS_PER_S > s->p.late_mult * others * NS_PER_S + (double)s->p.late_margin_ns;
}

/* Scaled by the rail's own drain time, and doubled per recent failure (up to 64x): a rail that
 * keeps being declared dead on a guess (an optimistic estimate after reconnecting, a path slower
 * than the margin allows for a chunk) is given the time to prove itself. */
uint64_t braid_sched_stall_ns(const struct braid_sched *s, int i) {
  if (!valid(s, i)) return 0;
  const rail_t *r = &s->rail[i];
  double t = s->p.stall_mult * (double)r->inflight / r->est_Bps * NS_PER_S;
  t += (double)s->p.stall_margin_ns;
  t *= (double)(1u << (r->recent_errors < 6 ? r->recent_errors : 6));
  return t < 1e18 ? (uint64_t)t : (uint64_t)1e18; /* stays representable */
}

bool braid_sched_stalled(const struct braid_sched *s, int i, uint64_t now_ns) {
  if (!valid(s, i)) return false;
  const rail_t *r = &s->rail[i];
  if (r->state == BRAID_RAIL_DOWN || r->inflight == 0 || now_ns <= r->last_progress_ns)
    return false;
  return now_ns - r->last_progress_ns > braid_sched_stall_ns(s, i);
}

/* ------------------------------------------------------------------------------------------ */
/* Periodic work */

/* LATE and STALLED: each reported once per silence (an ack or a new busy period re-arms). */
static void check_silence(struct braid_sched *s, int i, uint64_t now) {
  rail_t *r = &s->rail[i];
  if (!r->late_reported && braid_sched_late(s, i, now)) {
    r->late_reported = true;
    emit(s, i, r->state, BRAID_SCHED_LATE, now);
  }
  if (!r->stall_reported && braid_sched_stalled(s, i, now)) {
    r->stall_reported = true;
    emit(s, i, r->state, BRAID_SCHED_STALLED, now);
  }
}

/* ACTIVE -> DEGRADED once the estimate has stayed below demote_ratio * ref long enough. */
static void check_slow(struct braid_sched *s, int i, uint64_t now) {
  rail_t *r = &s->rail[i];
  if (r->state != BRAID_RAIL_ACTIVE || !r->measured) return;
  if (!(r->est_Bps < s->p.demote_ratio * ref_excl(s, i))) {
    r->slow = false;
    return;
  }
  if (!r->slow) {
    r->slow = true;
    r->slow_since_ns = now;
  } else if (now - r->slow_since_ns >= s->p.demote_after_ns) {
    set_state(s, i, BRAID_RAIL_DEGRADED, BRAID_SCHED_SLOW, now);
  }
}

static void forget_errors(struct braid_sched *s, int i, uint64_t now) {
  rail_t *r = &s->rail[i];
  if (r->state == BRAID_RAIL_ACTIVE && r->recent_errors > 0 &&
      now - r->last_error_ns >= s->p.error_forget_ns)
    r->recent_errors = 0;
}

static int drain_events(struct braid_sched *s, struct braid_sched_event *ev, int max_ev) {
  int n = 0;
  while (n < max_ev && s->ev_count > 0) {
    ev[n++] = s->ev[s->ev_head];
    s->ev_head = (s->ev_head + 1) % BRAID_SCHED_MAX_EVENTS;
    s->ev_count--;
  }
  return n;
}

int braid_sched_tick(struct braid_sched *s, uint64_t now_ns, struct braid_sched_event *ev,
                     int max_ev) {
  for (int i = 0; i < s->nrails; i++) {
    if (s->rail[i].state == BRAID_RAIL_DOWN) continue;
    check_silence(s, i, now_ns);
    check_slow(s, i, now_ns);
    forget_errors(s, i, now_ns);
  }
  ensure_carrier(s, now_ns);
  return drain_events(s, ev, max_ev);
}

/* ------------------------------------------------------------------------------------------ */
/* Names */

int braid_sched_count(const struct braid_sched *s, enum braid_rail_state state) {
  int n = 0;
  for (int i = 0; i < s->nrails; i++) n += s->rail[i].state == state;
  return n;
}

const char *braid_sched_state_name(enum braid_rail_state state) {
  switch (state) {
  case BRAID_RAIL_ACTIVE: return "active";
  case BRAID_RAIL_DEGRADED: return "degraded";
  case BRAID_RAIL_PROBING: return "probing";
  case BRAID_RAIL_DOWN: return "down";
  }
  return "?";
}

const char *braid_sched_reason_name(enum braid_sched_reason reason) {
  switch (reason) {
  case BRAID_SCHED_FAILED: return "failed";
  case BRAID_SCHED_LATE: return "late";
  case BRAID_SCHED_STALLED: return "stalled";
  case BRAID_SCHED_SLOW: return "slow";
  case BRAID_SCHED_PROBE_OK: return "probe ok";
  case BRAID_SCHED_RECOVERED: return "recovered";
  case BRAID_SCHED_RESTORED: return "restored";
  case BRAID_SCHED_LAST_LEFT: return "last left";
  }
  return "?";
}
