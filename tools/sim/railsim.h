/* The rail simulator: discrete events on the rails of one striped connection, driving braid's
 * real scheduler (net_plugin/stripe/sched.c) by a simulated clock.  braid-sim's per-node rates
 * come from it, and the scheduler's unit tests (test/unit/sched_test.cc) run their transfers
 * through it.  Deterministic: ties are broken by insertion order, chunks re-queued oldest first.
 *   rails: a rate, a FIFO of chunks transmitted one at a time (the head's progress is kept across
 *     rate changes), a one-way propagation delay for data and acks; an action can change a rate,
 *     fail a rail (everything on it is dropped, the transport sees an error fail_detect_ns
 *     later), black-hole it (data and acks held) or recover it (held data and acks go out late);
 *   transport: NCCL-shaped, like the plugin's: up to `slots` messages posted, freed in order;
 *     messages cut into chunks of at most `chunk` bytes; each chunk goes where
 *     braid_sched_pick_avoid() says; braid_sched_sent/acked/failed/restored/tick called where the
 *     plugin's transport calls them; a generation per rail; re-queue on failure (ahead of new
 *     work), failure on STALLED (at once: the plugin first checks the path).  Beyond the plugin:
 *     a hedge copy on LATE (`hedge`), withdrawal of unsent copies (`withdraw_unsent`, through
 *     braid_sched_withdrawn), reconnection once braid_sched_retry_at() has passed. */
#ifndef BRAID_SIM_RAILSIM_H
#define BRAID_SIM_RAILSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "stripe/sched.h"

#define RS_US 1000ull
#define RS_MS (1000ull * RS_US)
#define RS_SEC (1000ull * RS_MS)

enum rs_act { RS_RATE, RS_FAIL, RS_BLACKHOLE, RS_RECOVER };

struct rs_action {
  uint64_t at_ns;
  int rail;
  enum rs_act kind;
  double rate_Bps; /* RS_RATE only */
};

struct rs_config {
  int nrails;
  double rate_Bps[BRAID_SCHED_MAX_RAILS];
  uint64_t prop_ns;          /* one-way, data and acks [50 us] */
  size_t chunk;              /* [128 KiB] */
  int slots;                 /* messages posted at once [8] */
  const size_t *msgs;        /* sizes, posted in order */
  size_t nmsgs;
  const struct rs_action *actions;
  size_t nactions;
  uint64_t tick_ns;          /* [1 ms] */
  uint64_t fail_detect_ns;   /* [1 ms] */
  uint64_t end_ns;           /* [60 s] */
  uint64_t bin_ns;           /* accepted bytes are binned by this [10 ms] */
  bool equal_striping;       /* baseline: chunk i on rail i mod n, rr_cap bytes per rail */
  size_t rr_cap;             /* [4 MiB] */
  const double *nominal_Bps; /* NULL: the scheduler's prior */
  bool hedge;                /* act on LATE [true] */
  bool withdraw_unsent;      /* take back untransmitted copies of a done chunk [false] */
  struct braid_sched_params params;
};

struct rs_result {
  bool complete, all_down_seen;
  uint64_t finish_ns, total_bytes;
  int nrails;
  uint64_t *bins; /* [bin * nrails + rail]: bytes accepted (first copies) */
  size_t nbins;
  uint64_t bin_ns;
  struct braid_sched_event *events;
  size_t nevents;
  uint64_t dup_chunks, lost_chunks, resent_chunks, hedged_chunks, accepted_bytes, withdrawn_chunks;
  uint64_t inflight_mismatch; /* |scheduler's in-flight bytes - transport's|, summed over rails */
  uint64_t pick_hash, picks;
  uint64_t sent_bytes[BRAID_SCHED_MAX_RAILS];
  uint64_t split_small; /* messages <= chunk whose data came on more than one rail */
  struct braid_sched_rail final_rails[BRAID_SCHED_MAX_RAILS];
};

void rs_config_default(struct rs_config *c);
/* Runs the simulation.  Returns 0, or -1 for a bad config or out of memory. */
int rs_simulate(const struct rs_config *c, struct rs_result *r);
void rs_result_free(struct rs_result *r);

/* Accepted bytes per second over [t0, t1), one rail or all (-1). */
double rs_Bps(const struct rs_result *r, uint64_t t0, uint64_t t1, int rail);
double rs_share(const struct rs_result *r, int rail, uint64_t t0, uint64_t t1);
/* Time of the first event of `reason` on `rail` at or after `after` (UINT64_MAX: none). */
uint64_t rs_first(const struct rs_result *r, enum braid_sched_reason reason, int rail, uint64_t after);
int rs_count(const struct rs_result *r, enum braid_sched_reason reason, int rail);
/* The end of the steady part of a run: the last bins hold the drain of the final messages. */
uint64_t rs_steady_end(const struct rs_result *r);

#ifdef __cplusplus
}
#endif

#endif
