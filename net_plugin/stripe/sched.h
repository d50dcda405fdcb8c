/* Multi-rail scheduler: which rail carries the next chunk of a striped connection.
 *
 * Pure: no I/O, no clock, no allocation, no logging.  The caller passes the time (ns, any
 * monotonic origin) to every call and logs the events the scheduler hands back, so the same code
 * runs in the plugin and in the rail simulator (tools/sim/railsim.c: braid-sim and the unit
 * tests).  Depends on the C standard headers only.  Not thread-safe: one scheduler per
 * connection, driven by its owner.
 *
 * Estimator (per rail): delivered throughput while busy.
 *   A rail is busy while it has bytes in flight (sent, not acknowledged).  Busy time and acked
 *   bytes are summed into a sample window; the window closes at the first ack after est_window_ns
 *   of busy time and gives sample = bytes / busy time.  Idle time is never counted, so a rail that
 *   was offered little traffic does not look slow (no spiral).  The first sample after init or
 *   reconnect replaces the prior (nominal rate); later ones are folded in with a time-weighted
 *   EWMA, weight = busy / (busy + est_tau_ns): a fast rail's many short windows and a slow rail's
 *   few long ones both average over about est_tau_ns of busy time.
 *   Silence correction (pick only): a rail with bytes in flight and no ack for T cannot deliver
 *   faster than inflight / T, so pick() uses min(est, inflight / T): work moves off a rail that
 *   went quiet long before the next sample or the stall verdict.
 *   Delay: EWMA (1/8) of each chunk's sojourn, handed to the rail -> acknowledged (delay_ns;
 *   nothing outside the unit tests reads it yet).
 *
 * Choice of rail (pick): earliest expected finish.
 *   finish(r) = (inflight_r + bytes) / est_r.  Carrying rails are ACTIVE and PROBING ones.  The
 *   chunk goes to the carrying rail with room (inflight below its cap) that finishes it earliest,
 *   but only if it finishes no later than the horizon H = max(best finish on any carrying rail,
 *   full or not; (all in-flight bytes + pending) / sum of estimates).  H is when the work known
 *   now would drain if perfectly spread: a chunk that finishes before H costs nothing, one that
 *   finishes after it would become the straggler, so the caller waits (-1) for a better rail.
 *   Long backlogs use every rail; a message's tail avoids slow ones.  Ties rotate.
 *   In-flight cap: est * queue_target_ns clamped to [inflight_min, inflight_max] (inflight_min
 *   until the first sample; at most probe_inflight while PROBING); a chunk always fits an empty
 *   rail.  The queue of every rail thus stays short in time, so a dead rail is told from a slow
 *   one quickly.
 *
 * States and transitions (every transition is queued as an event; tick() hands them out):
 *   ACTIVE    full traffic.
 *             -> DEGRADED (SLOW) when est < demote_ratio * ref for demote_after_ns, where ref is
 *                the best estimate among the other measured ACTIVE rails.
 *   DEGRADED  probe traffic only: one chunk, when the rail is empty, every probe gap (starts at
 *             probe_interval_ns, doubles after each slow probe up to probe_interval_max_ns).
 *             -> PROBING (PROBE_OK) when a probe's sample >= promote_ratio * ref.
 *             -> ACTIVE (LAST_LEFT) when no ACTIVE or PROBING rail remains.
 *   PROBING   capped traffic (probe_inflight) under evaluation; entered from DEGRADED or on
 *             reconnect with an optimistic estimate so it gets traffic at once.
 *             -> ACTIVE (RECOVERED) after probe_eval_ns of busy time if est >= promote_ratio*ref,
 *             -> DEGRADED (SLOW) otherwise.
 *   DOWN      no traffic.  Entered from any state by braid_sched_failed() (FAILED); left by
 *             braid_sched_restored() -> PROBING (RESTORED).
 *   promote_ratio > demote_ratio gives hysteresis.  ref of 0 (no other ACTIVE rail) never
 *   demotes and always promotes, so some rail always carries while any is up.
 *
 * Advice (events without a state change, each queued once per silence; an ack re-arms):
 *   LATE      the rail's in-flight bytes, at what it can at most be delivering now, would finish
 *             later than late_mult * (what the other carrying rails need for theirs plus these)
 *             + late_margin_ns.  Fires tens of ms into a black hole or a sudden crawl, long
 *             before any verdict.  The socket and verbs transports ignore it; the ofi one
 *             suspects the rail already (see STALLED).  The rail simulator can hedge on it
 *             instead: a second copy of each of the rail's unacked chunks that has no other copy
 *             in flight, the originals left where they are.
 *   STALLED   bytes in flight and no ack for longer than (stall_mult * inflight / est +
 *             stall_margin_ns) * 2^min(recent errors, 6): scaled by the rail's own drain time, so
 *             a slow rail is not taken for a dead one, and more patient with a rail that keeps
 *             failing (one slower than the margin allows for a chunk, or one whose optimistic
 *             estimate after reconnecting is far off, still gets measured).  The transport then
 *             calls braid_sched_failed() and re-sends: the socket and ofi ones once the suspect
 *             rail's path also shows dead (stripe/tx.c), the verbs one and the rail simulator at
 *             once.
 *   Log FAILED, SLOW, RECOVERED (and LAST_LEFT) as warnings; LATE, STALLED (followed by FAILED),
 *   PROBE_OK and RESTORED are routine.
 *
 * Contract with the transport:
 *   - call braid_sched_sent() when a chunk is handed to the rail, and match it by exactly one of
 *     braid_sched_acked() (the receiver holds it), braid_sched_withdrawn() (taken back unsent)
 *     or braid_sched_failed() (forgets all of that rail's bytes) on the same rail;
 *   - keep a generation per rail: acks of copies sent before the rail's last failure are not
 *     reported (they still complete the chunk);
 *   - after braid_sched_failed() re-queue that rail's unacked chunks (those with no other copy in
 *     flight), ahead of new work; braid_sched_retry_at() advises when to reconnect;
 *   - pass as `pending` every byte queued and not yet on a rail (re-sends included);
 *     place a second copy of a chunk with braid_sched_pick_avoid(), never on a rail holding one;
 *   - the receiver accepts each chunk's data once (a per-message record of byte ranges held,
 *     not a byte count: a re-send may be cut into other pieces than the copy it replaces) and
 *     discards copies of chunks it holds and of finished messages;
 *   - a chunk is done at its first ack, a message when all its chunks are; a copy left on a slow
 *     rail never delays completion (the receiver discards it);
 *   - call braid_sched_tick() periodically (about every millisecond of activity) and handle the
 *     events it returns. */
#ifndef BRAID_SCHED_H
#define BRAID_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRAID_SCHED_MAX_RAILS 16
#define BRAID_SCHED_MAX_EVENTS 64 /* queued between two tick() calls */

/* pick() results that are not rails */
#define BRAID_SCHED_WAIT (-1)     /* no rail should take it now: call again after an ack or tick */
#define BRAID_SCHED_ALL_DOWN (-2) /* every rail is DOWN */

enum braid_rail_state { BRAID_RAIL_ACTIVE, BRAID_RAIL_DEGRADED, BRAID_RAIL_PROBING, BRAID_RAIL_DOWN };

enum braid_sched_reason {
  BRAID_SCHED_FAILED,    /* any -> DOWN: the caller reported an error */
  BRAID_SCHED_LATE,      /* no state change: its in-flight chunks are better re-sent elsewhere */
  BRAID_SCHED_STALLED,   /* no state change: in flight, no ack past the threshold */
  BRAID_SCHED_SLOW,      /* ACTIVE or PROBING -> DEGRADED */
  BRAID_SCHED_PROBE_OK,  /* DEGRADED -> PROBING: a probe delivered at a healthy rate */
  BRAID_SCHED_RECOVERED, /* PROBING -> ACTIVE */
  BRAID_SCHED_RESTORED,  /* DOWN -> PROBING: reconnected */
  BRAID_SCHED_LAST_LEFT, /* DEGRADED -> ACTIVE: no faster rail is left */
};

struct braid_sched_event {
  int rail;
  enum braid_rail_state from, to; /* equal for LATE and STALLED */
  enum braid_sched_reason reason;
  uint64_t at_ns;
  double est_Bps; /* the rail's estimate at the event */
  double ref_Bps; /* best other ACTIVE rail's estimate (0: none) */
};

/* Defaults (braid_sched_params_default) in brackets. */
struct braid_sched_params {
  uint64_t queue_target_ns;       /* in-flight cap in time: est * this [20 ms] */
  size_t inflight_min;            /* cap bounds in bytes [256 KiB, 8 MiB]; a chunk always */
  size_t inflight_max;            /*   fits an empty rail */
  size_t probe_inflight;          /* cap while PROBING [256 KiB] */
  uint64_t est_window_ns;         /* busy time per throughput sample, closes at next ack [1 ms] */
  uint64_t est_tau_ns;            /* EWMA time constant, in busy time [20 ms] */
  double prior_Bps;               /* estimate of a rail without a nominal rate [1e9] */
  double demote_ratio;            /* ACTIVE -> DEGRADED below this fraction of ref [0.15] ... */
  uint64_t demote_after_ns;       /* ... sustained this long [100 ms] */
  double promote_ratio;           /* DEGRADED/PROBING -> ACTIVE at this fraction [0.3] */
  uint64_t probe_interval_ns;     /* first gap between probes of a DEGRADED rail [50 ms] */
  uint64_t probe_interval_max_ns; /* gap doubles after each slow probe up to this [1 s] */
  uint64_t probe_eval_ns;         /* busy time a PROBING rail is measured [20 ms] */
  double late_mult;               /* LATE: own drain > late_mult * others' drain [2] ... */
  uint64_t late_margin_ns;        /* ... + this [5 ms] */
  double stall_mult;              /* STALLED: silence > (stall_mult * inflight / est [4] ... */
  uint64_t stall_margin_ns;       /* ... + this [200 ms]) * 2^min(recent errors, 6) */
  uint64_t retry_base_ns;         /* reconnect advice: base << (recent errors - 1) [50 ms] ... */
  uint64_t retry_max_ns;          /* ... capped here [5 s] */
  uint64_t error_forget_ns;       /* recent errors cleared after this long ACTIVE [10 s] */
};

/* Per-rail state.  Read freely (telemetry); written only by the scheduler. */
struct braid_sched_rail {
  enum braid_rail_state state;
  bool backup;            /* a borrowed NIC: carries only while every primary rail is degraded or down */
  bool standby;           /* a backup rail while some primary rail is up */
  bool measured;          /* est_Bps comes from samples, not from the prior */
  bool slow;              /* below demote_ratio * ref since slow_since_ns */
  bool late_reported;     /* LATE already queued for this silence */
  bool stall_reported;    /* STALLED already queued for this silence */
  double nominal_Bps;     /* prior, and optimistic restart value */
  double est_Bps;         /* delivered throughput while busy */
  uint64_t delay_ns;      /* EWMA sojourn of a chunk, sent -> acked (0: no sample) */
  size_t inflight;        /* bytes sent and not yet acked */
  uint64_t busy_mark_ns;  /* busy time is accounted up to here (while inflight > 0) */
  uint64_t est_at_ns;     /* when est_Bps was last updated from a sample */
  uint64_t win_start_ns;  /* when the open sample window got its first busy time */
  uint64_t win_busy_ns;   /* open sample window: busy time and acked bytes */
  uint64_t win_bytes;
  uint64_t last_progress_ns; /* last ack, or when the rail last became busy */
  uint64_t slow_since_ns;
  uint64_t probe_busy_ns;    /* busy time measured in PROBING */
  uint64_t probe_gap_ns;     /* DEGRADED: current gap between probes */
  uint64_t next_probe_ns;    /* DEGRADED: earliest next probe */
  uint32_t errors;           /* failures since init */
  uint32_t recent_errors;    /* not yet forgotten: reconnect backoff, stall patience */
  uint64_t last_error_ns;
  uint64_t bytes_acked;
};

struct braid_sched {
  int nrails;
  unsigned rr; /* rotation for ties */
  struct braid_sched_params p;
  struct braid_sched_rail rail[BRAID_SCHED_MAX_RAILS];
  struct braid_sched_event ev[BRAID_SCHED_MAX_EVENTS]; /* ring */
  unsigned ev_head, ev_count;
  uint64_t ev_lost; /* events overwritten before tick() collected them */
};

void braid_sched_params_default(struct braid_sched_params *p);

/* nrails in 1..BRAID_SCHED_MAX_RAILS; p NULL: defaults; nominal_Bps NULL or an entry <= 0: the
 * prior (e.g. from NIC speeds, only their ratios and scale matter until the first samples).
 * Every rail starts ACTIVE.  Returns 0, or -1 for a bad argument. */
int braid_sched_init(struct braid_sched *s, int nrails, const struct braid_sched_params *p,
                     const double *nominal_Bps, uint64_t now_ns);

/* Rail for the next chunk of `bytes`, where `pending` is every byte the caller still has queued
 * for this connection and not yet on a rail, this chunk included (pending = bytes: earliest
 * finish of this chunk alone).  Returns a rail (then call braid_sched_sent() when the chunk is
 * handed to it), BRAID_SCHED_WAIT or BRAID_SCHED_ALL_DOWN.  A DEGRADED rail is returned when its
 * probe is due: send it the chunk like any other.  Changes nothing: braid_sched_sent() commits,
 * and the same state, arguments and time always give the same answer. */
int braid_sched_pick(const struct braid_sched *s, size_t bytes, size_t pending, uint64_t now_ns);

/* BRAID_STRIPING=equal (for comparison with the scheduler): the next rail in turn that is not
 * DOWN, once it has room for bytes (one chunk always fits an empty rail).  *rr is the caller's
 * turn, kept between calls.  A rail, BRAID_SCHED_WAIT or BRAID_SCHED_ALL_DOWN. */
int braid_sched_pick_equal(const struct braid_sched *s, size_t bytes, unsigned *rr);

/* The same, never returning a rail r with bit r set in `avoid`: for a second copy of a chunk (a
 * re-send while an older copy may still arrive, the rail simulator's hedge), pass the rails that
 * already hold a copy, so that two copies never share a rail (their acks could not be told
 * apart); the verbs transport passes its demoted rails, to keep a message's data off them. */
int braid_sched_pick_avoid(const struct braid_sched *s, size_t bytes, size_t pending,
                           uint32_t avoid, uint64_t now_ns);

/* A chunk of `bytes` was handed to `rail`. */
void braid_sched_sent(struct braid_sched *s, int rail, size_t bytes, uint64_t now_ns);

/* The receiver holds `bytes` sent on `rail` at sent_ns (0: unknown).  Ignored on a DOWN rail. */
void braid_sched_acked(struct braid_sched *s, int rail, size_t bytes, uint64_t sent_ns,
                       uint64_t now_ns);

/* `bytes` handed to `rail` were taken back before they left (the rail simulator's
 * withdraw_unsent: a copy still queued when another copy of its chunk was acked): no longer in
 * flight, not delivered either. */
void braid_sched_withdrawn(struct braid_sched *s, int rail, size_t bytes, uint64_t now_ns);

/* The rail broke (error, reset, stall verdict): DOWN, its in-flight bytes forgotten.  The caller
 * re-queues that rail's unacknowledged chunks.  No-op on a DOWN rail. */
void braid_sched_failed(struct braid_sched *s, int rail, uint64_t now_ns);

/* A DOWN rail reconnected: PROBING with an optimistic estimate.  No-op otherwise. */
void braid_sched_restored(struct braid_sched *s, int rail, uint64_t now_ns);

/* Periodic work (demotion, LATE and STALLED detection), then hands out up to max_ev queued events, oldest
 * first; returns how many.  Events left over stay queued for the next call. */
int braid_sched_tick(struct braid_sched *s, uint64_t now_ns, struct braid_sched_event *ev,
                     int max_ev);

/* Whether the rail's in-flight bytes, at what it can at most be delivering now, would finish
 * later than late_mult times what the other carrying rails need for theirs plus these, plus
 * late_margin_ns (the LATE condition). */
bool braid_sched_late(const struct braid_sched *s, int rail, uint64_t now_ns);

/* Stall threshold of a rail now (ns) and whether it is exceeded. */
uint64_t braid_sched_stall_ns(const struct braid_sched *s, int rail);
bool braid_sched_stalled(const struct braid_sched *s, int rail, uint64_t now_ns);

/* In-flight cap of a rail now (bytes): also a sensible socket buffer / TCP_NOTSENT_LOWAT. */
size_t braid_sched_cap(const struct braid_sched *s, int rail);

/* Earliest time to try reconnecting a DOWN rail (backs off with recent failures).  The rail
 * simulator waits for it; the plugin's rejoin (comm/rejoin.c) keeps its own backoff. */
uint64_t braid_sched_retry_at(const struct braid_sched *s, int rail);

/* Marks a rail as a backup (a neighbouring device's NIC borrowed for failover). */
void braid_sched_set_backup(struct braid_sched *s, int rail, bool backup);

/* Whether pick() would return `rail` as a probe now (the caller then sends a small piece). */
bool braid_sched_probe_due(const struct braid_sched *s, int rail, uint64_t now_ns);

/* The one placement decision for the next chunk of len bytes, for every path's schedule loop
 * (stripe/tx.c, transport/verbs/verbs_conn.c): BRAID_STRIPING=equal takes the next rail in turn
 * (pick_equal, with *rr); adaptive asks pick, then probes the way the path probes:
 * - BRAID_PROBE_PIECES (stream path): a rail whose probe is due, or, when no rail takes the whole
 *   chunk now, any rail that takes probe_len, gets a piece of probe_len bytes of the chunk (the
 *   caller splits it);
 * - BRAID_PROBE_SCRATCH (verbs): data never goes to a demoted rail while an active one is up;
 *   when pick chose one, it is named in .probe (the caller probes it with a copy written into
 *   scratch memory) and the chunk goes to the best of the others (pick_avoid).
 * Pure, like every call here: the caller does the I/O. */
enum braid_probe_style { BRAID_PROBE_PIECES, BRAID_PROBE_SCRATCH };
struct braid_sched_place {
  int rail;    /* where the chunk (or its first len bytes) goes; BRAID_SCHED_WAIT or _ALL_DOWN */
  size_t len;  /* how much of the chunk goes there: all of it or a probe piece */
  int probe;   /* BRAID_PROBE_SCRATCH: a demoted rail to probe now, else -1 */
};
struct braid_sched_place braid_sched_place(const struct braid_sched *s, bool equal, unsigned *rr,
                                           enum braid_probe_style style, size_t probe_len, size_t len,
                                           size_t pending, uint64_t now_ns);

/* Number of rails in a state. */
int braid_sched_count(const struct braid_sched *s, enum braid_rail_state state);

const char *braid_sched_state_name(enum braid_rail_state state);
const char *braid_sched_reason_name(enum braid_sched_reason reason);

#endif
