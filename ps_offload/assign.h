/* braid-ps: which server reduces which partition, and how the weights are measured.
 *
 * Pure functions (no I/O, clock passed in), shared by the CollNet client and braid-sim.
 *
 * An operation of `bytes` is cut into partitions of part_bytes (the last one shorter).  Each
 * partition goes to a server drawn from integer weights (0 = not used) by a low-discrepancy
 * sequence of (seq, part): over many partitions each server gets its weight's share, within one
 * partition per operation.  Every head computes the same answer from the same (weights, seq,
 * part), and the weights of operation seq are the ones rank 0 attached to operation seq - window
 * (equal weights before that), which every head has received before it may issue seq.  So every
 * node uses the same assignment for the same operation without any extra message.
 *
 * A server a head has lost is skipped: its partitions go to the next server in list order that
 * the head still has.  Heads that lose the same server therefore agree on the replacement. */
#ifndef BRAID_PS_ASSIGN_H
#define BRAID_PS_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Number of partitions of an operation (0 for 0 bytes). */
uint32_t ps_nparts(size_t bytes, size_t part_bytes);

/* The server (0..nservers-1) of partition `part` of `nparts` in operation `seq`, or -1 when every
 * weight is 0. */
int ps_assign(const uint8_t *weights, int nservers, uint64_t seq, uint32_t part, uint32_t nparts);

/* `s` itself when it is not in lost (a bit mask), else the next server after it, in list order,
 * that is not; -1 when every server is lost. */
int ps_reroute(int s, uint32_t lost, int nservers);

/* Throughput of one server as one head sees it: bytes of partitions completed per second of the
 * time it had at least one partition outstanding (busy time), so a server that waits for work
 * does not look slow, and one that is always behind shows its real rate. */
struct ps_rate {
  int outstanding;
  uint64_t busy_since;   /* when outstanding became > 0 */
  double busy_ns, bytes; /* in the current window */
  double rate;           /* smoothed bytes per ns; 0 until measured */
};
void ps_rate_start(struct ps_rate *r, uint64_t now_ns);
void ps_rate_done(struct ps_rate *r, uint64_t now_ns, size_t bytes);
/* Closes the window: folds its rate into the smoothed one (when the window saw enough work). */
void ps_rate_window(struct ps_rate *r, uint64_t now_ns);

/* Weights from rates: the fastest server 255, servers within a fifth of it 255 too, slower ones
 * in proportion, every server in use at least 1, lost ones 0, unmeasured ones as the fastest. */
void ps_weights(const struct ps_rate *r, int nservers, uint32_t lost, uint8_t out[PS_MAX_SERVERS]);

#endif
