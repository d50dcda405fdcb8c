/* Inside a verbs connection (verbs_conn.h): its state, shared by verbs_conn.c (the data path,
 * fencing) and verbs_rejoin.c (failed rails coming back).  Nothing else includes this; it does
 * not include verbs_conn.h (the modules include each other in one direction only). */
#ifndef BRAID_VERBS_VC_H
#define BRAID_VERBS_VC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stripe/sched.h"
#include "transport/verbs/verbs_ep.h"
#include "transport/verbs/verbs_flush.h"
#include "transport/verbs/verbs_limits.h"
#include "wire/verbs.h"

enum { CH_UNSENT, CH_INFLIGHT, CH_ACKED };

#define CTLQ 64                 /* control messages queued or in flight */
#define COOKIE_CTL (1ull << 63)   /* else a write: seq << 20 | chunk */
#define COOKIE_PROBE (1ull << 62) /* a probe write into the scratch area */
#define TICK_NS 1000000ull
#define EVENT_CHECK_NS 10000000ull /* device events read every 10 ms */
#define DRAIN_WAIT_NS 1000000000ull

/* Control messages (CTS, FENCE, FENCED, FIN, AREA, MISMATCH) and the writes' immediates are
 * encoded and checked by wire/verbs.h, whose records hold this many rails, slots and chunks. */
_Static_assert(BRAID_VC_MAX_RAILS == BRAID_VWIRE_RAILS && BRAID_VC_SLOTS == BRAID_VWIRE_SLOTS &&
                   BRAID_VC_MAX_CHUNKS <= BRAID_VWIRE_MAX_CHUNKS &&
                   BRAID_VCTL_MAX_BYTES <= BRAID_VERBS_CTRL_MAX,
               "the connection fits its wire records");

struct chunk {
  uint8_t state;
  int8_t rail;
  uint64_t sent_ns;
};

struct sreq {
  bool used, have_cts, needs_fin, fin_queued, fin_done;
  uint32_t seq, nch, acked;
  const char *buf;
  size_t size, base; /* base: buf's offset in its registration */
  struct braid_vc_mem *mem;
  uint64_t raddr;
  uint32_t rkey[BRAID_VC_MAX_RAILS];
  struct chunk *ch;
};

struct rreq {
  bool used, needs_fin, fin;
  bool detached; /* handed over (braid_vc_detach): retired by progress, never tested */
  uint32_t seq, nch, got;
  size_t cap, size;
  uint8_t *seen; /* bit per chunk */
};

struct ctlmsg {
  bool used, posted;
  int rail; /* where it was posted */
  int pin;  /* the rail it must go on (JOINED, on the rejoined rail), -1 any live one */
  uint32_t len;
  uint8_t data[BRAID_VCTL_MAX_BYTES]; /* encoded */
};

struct cts_entry {
  bool valid; /* not yet bound to a send */
  bool seen;  /* m is the newest CTS for the slot */
  struct braid_vctl_cts m;
};

/* A rail's way back after it failed (verbs_rejoin.c).  The sender drives it: REJOIN, the
 * receiver's REJOIN_ACK, then JOINED on the new queue pair. */
enum { RJ_UP, RJ_WAIT, RJ_ASKED, RJ_ACKED, RJ_JOINING };
struct vc_rejoin {
  uint8_t gen;   /* the rail's generation: its rejoins, mod 256 (FENCE carries it) */
  uint8_t state; /* sender: RJ_UP, or down: RJ_WAIT (for its fence, its port, the back-off),
                    RJ_ASKED (REJOIN sent), RJ_ACKED (joined there; waiting for the FENCEDs the
                    answer counts); receiver: RJ_UP, RJ_WAIT (down), RJ_JOINING (connected,
                    waiting for JOINED) */
  bool fence_applied;  /* sender: the receiver's FENCED applied since the rail went down */
  uint32_t fenced;     /* FENCEDs for the rail: received (sender), sent (receiver) */
  uint64_t next_ns, backoff_ns, down_ns, asked_ns;
  struct braid_vctl_rejoin ack; /* sender: the receiver's answer */
  char why[96];                 /* sender: why the last try did not go ahead (logged on change) */
  uint32_t failures, rejoins;   /* for telemetry */
  uint64_t last_rejoin_ns;
};

struct braid_vc {
  bool sender, failed;
  bool usage; /* failed through the application's misuse (a size mismatch): ncclInvalidUsage */
  char err[256];
  int nrails;
  size_t chunk;
  bool equal;
  unsigned rr_ctl, rr_equal;
  struct braid_verbs_ep *ep[BRAID_VC_MAX_RAILS];
  bool down[BRAID_VC_MAX_RAILS];
  bool fence_wait[BRAID_VC_MAX_RAILS]; /* sender: FENCED came, applied once the rail drains;
                                          receiver: FENCED to send once the rail drains */
  struct braid_vctl_fenced fenced[BRAID_VC_MAX_RAILS];
  uint64_t fence_since[BRAID_VC_MAX_RAILS];
  uint64_t rail_bytes[BRAID_VC_MAX_RAILS];
  uint64_t flush_reads[BRAID_VC_MAX_RAILS]; /* receiver: flush reads completed, per rail */
  struct braid_sched sched;
  uint64_t next_tick, next_event_check;
  struct ctlmsg ctl[CTLQ];
  /* probes: the receiver's scratch area (receiver: its own, registered) */
  bool area_valid;
  struct braid_vctl_area area;
  void *scratch;
  struct braid_vc_mem *scratch_mem;
  size_t probe_len[BRAID_VC_MAX_RAILS];
  uint64_t probe_sent[BRAID_VC_MAX_RAILS];
  bool probe_out[BRAID_VC_MAX_RAILS];
  /* sender */
  uint32_t s_seq; /* next isend */
  struct sreq s[BRAID_VC_SLOTS];
  struct cts_entry cts[BRAID_VC_SLOTS];
  /* receiver */
  uint32_t r_seq; /* next irecv */
  uint16_t r_posted;
  struct rreq r[BRAID_VC_SLOTS];
  struct vc_rejoin rj[BRAID_VC_MAX_RAILS]; /* failed rails coming back (verbs_rejoin.c) */
  uint32_t demotions[BRAID_VC_MAX_RAILS];  /* times the scheduler demoted the rail as slow */
  /* receiver: GPUDirect flushes (one loopback QP per rail, opened at the first flush) */
  struct braid_verbs_flush *flush[BRAID_VC_MAX_RAILS];
  struct {
    bool used;
    int pending; /* reads not yet completed */
  } fl[BRAID_VC_FLUSHES];
};

/* Fails the connection (first cause wins) with a WARN; returns -1. */
__attribute__((format(printf, 2, 3))) int vci_fail(struct braid_vc *vc, const char *fmt, ...);
/* Queues a control message for a live rail (pin >= 0: that rail only; dropped if it is down);
 * 0, or -1 (the connection failed: the queue is full). */
int vci_ctl_queue_on(struct braid_vc *vc, const struct braid_vctl *msg, int pin);
/* Posts what is queued. */
void vci_ctl_post(struct braid_vc *vc);
/* Fails and fences rail r (its data goes on the others); a rail already down: nothing. */
void vci_fail_rail(struct braid_vc *vc, int r, const char *why);

/* verbs_rejoin.c */
/* Rail r just failed here: its way back starts (generation kept, back-off grown on a flap). */
void vci_rejoin_down(struct braid_vc *vc, int r, uint64_t now);
/* Sender: the receiver's FENCED of rail r applied. */
void vci_rejoin_fence_applied(struct braid_vc *vc, int r);
/* Rail r's port became ACTIVE (its event): a down rail waiting to rejoin tries at once. */
void vci_rejoin_port_active(struct braid_vc *vc, int r, uint64_t now);
/* Sender: asks for failed rails whose port is up again, completes answered ones. */
void vci_rejoin_progress(struct braid_vc *vc, uint64_t now);
/* REJOIN, REJOIN_ACK or JOINED from the peer, which arrived on rail `on`. */
void vci_rejoin_ctl(struct braid_vc *vc, int on, const struct braid_vctl *m, uint64_t now);
/* Receiver: whether a FENCE of generation gen names the rail as it is now (else a stale one,
 * from before a rejoin: ignored). */
bool vci_rejoin_current(const struct braid_vc *vc, int r, uint8_t gen);

#endif
