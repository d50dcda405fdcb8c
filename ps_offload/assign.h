/* braid-ps: which server reduces which bytes of an operation, and how the weights are measured.
 *
 * Pure functions (no I/O, clock passed in), shared by the CollNet client and braid-sim.
 *
 * An operation of `bytes` is cut into one contiguous range per server, in proportion to integer
 * weights (0 = not used), on a grain of 4 KiB (a multiple of the element size, so no element is
 * ever split between servers); the grains that proportional shares leave over go one each to the
 * servers in turn from one that rotates with the operation's seq, so every share is within one
 * grain of proportional and no server is always the one given the extra.  Each server's range is
 * cut into pieces (partitions) of about a quarter of its share, at least 16 KiB and at most the
 * part size limit, so a server's partitions pipeline and a slow server's are small.  Every head
 * computes the same layout from the same (weights, nservers, seq, bytes, esize, part limit), and
 * the weights of operation seq are the ones rank 0 attached to operation seq - window (equal
 * weights before that), which every head has received before it may issue seq.  So every node
 * uses the same layout for the same operation without any extra message.
 *
 * A server a head has lost is skipped: its partitions go to the next server in list order that
 * the head still has (ps_reroute).  Heads that lose the same server therefore agree on the
 * replacement. */
#ifndef BRAID_PS_ASSIGN_H
#define BRAID_PS_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define PS_GRAIN_BYTES 4096u           /* the unit shares are counted in */
#define PS_MIN_PIECE_BYTES (16u << 10) /* pieces are not cut smaller than this ... */
#define PS_PIECES_PER_SERVER 4         /* ... to give each server this many */

/* One partition of an operation: bytes [off, off + len) reduced by `server`. */
struct ps_piece {
  size_t off, len;
  int server;
};

/* The grain for elements of esize bytes: 4 KiB rounded up to a multiple of esize. */
size_t ps_grain(size_t esize);

/* The layout of an operation of `bytes` (a multiple of esize) over nservers servers with these
 * weights (all 0: equal), in offset order.  Writes the first min(count, cap) pieces to out and
 * returns count (0 for 0 bytes); call again with room for count when it is larger than cap.
 * max_part is the part size limit (rounded down to the grain, at least one grain). */
uint32_t ps_layout(const uint8_t *weights, int nservers, uint64_t seq, size_t bytes, size_t esize,
                   size_t max_part, struct ps_piece *out, uint32_t cap);

/* ps_layout into *buf, grown (realloc) to hold every piece; *cap is its size in pieces.  Returns
 * the number of pieces, or -1 when it could not grow *buf (left as it was). */
int64_t ps_layout_buf(const uint8_t *weights, int nservers, uint64_t seq, size_t bytes, size_t esize,
                      size_t max_part, struct ps_piece **buf, uint32_t *cap);

/* `s` itself when it is not in lost (a bit mask), else the next server after it, in list order,
 * that is not; -1 when every server is lost. */
int ps_reroute(int s, uint32_t lost, int nservers);

/* Throughput of one server as one head sees it: bytes of partitions completed per second of the
 * time it had at least one partition outstanding (busy time), measured over windows that close
 * once the server has completed PS_RATE_MIN_DONE partitions and PS_RATE_MIN_OPS operations have
 * been issued.  A window counts only when the server was busy for at least 3/4 of it: one that
 * waited for work has not shown how fast it is (except the first window, which sets the
 * estimate whatever it was).  The estimate moves a quarter of the way towards the median of the
 * last PS_RATE_KEEP windows that counted, so one odd window moves weights little.
 *
 * A server given less than 255 that keeps waiting for work may have recovered, but its small
 * share cannot show it (it is idle, so its windows do not count).  So it is probed: after
 * PS_PROBE_FIRST windows in a row in which it was busy under half the time (it could carry twice
 * its share), its weight is doubled (boost); after PS_PROBE_FIRST more such windows doubled
 * again, up to 255.  The first window that counts (busy 3/4) while it is boosted answers the
 * probe: it was measured under load, so its rate is taken as the estimate as it is.  A server
 * busy between half and 3/4 of the time keeps its boost.  An answer of twice the estimate, or of
 * half the fastest's rate, or more promotes the server to the fastest's rate (a full share): a
 * server with a smaller share reads slower than it is (its partitions' waits for the heads weigh
 * more in its busy time; on the netbed a restored server read 2.3-3.8 MB/s at a third to a half
 * of a share against the others' 5.5), so only at a full share is it measured as the others are;
 * that next window's rate is taken as it is, which drops it again at once if it was slower (and
 * then counts as a probe that found it no faster).  A probe that found the server no faster
 * (under 1.25 times the estimate) doubles the wait before the next one, up to PS_PROBE_MAX
 * windows, so a server that stays slow costs a doubled share for about one window in every
 * PS_PROBE_MAX at most. */
#define PS_RATE_MIN_DONE 16
#define PS_RATE_MIN_OPS 8
#define PS_RATE_KEEP 3
#define PS_PROBE_FIRST 8
#define PS_PROBE_MAX 256
#define PS_PROBE_MAX_BOOST 8 /* 1 << 8 > 255 */
/* Operations after a server's weight is changed by a probe or a promotion before a window can
 * answer for it: weights take effect 32 operations after rank 0 decides them (collnet_int.h's
 * PS_WINDOW), and a window is at least PS_RATE_MIN_OPS. */
#define PS_PROBE_SETTLE_OPS (32 + PS_RATE_MIN_OPS)
struct ps_rate {
  int outstanding;
  int started;           /* a window is open (since win_start) */
  uint64_t busy_since;   /* when outstanding became > 0 */
  uint64_t win_start;
  double busy_ns, bytes; /* in the current window */
  uint32_t done, ops;    /* completions and operations in the current window */
  double keep[PS_RATE_KEEP]; /* the last windows' rates, bytes per ns */
  int nkeep;
  double rate;           /* the estimate, bytes per ns; 0 until measured */
  int reduced;           /* ps_weights gave it under 255 before any boost */
  int boost;             /* a probe: its weight is doubled this many times */
  uint32_t idle;         /* windows in a row that did not count while reduced */
  uint32_t wait;         /* such windows before the next doubling (0: PS_PROBE_FIRST) */
  int promote;           /* a probe answered: 2 promote it to the fastest's rate, 1 if at half of it */
  int verify;            /* promoted: its next window that counts is taken as it is */
  uint32_t settle;       /* operations until a window can answer a probe or verify a promotion */
};
void ps_rate_start(struct ps_rate *r, uint64_t now_ns);
void ps_rate_done(struct ps_rate *r, uint64_t now_ns, size_t bytes);
/* One operation issued: counts it and closes the window when it is full.  Returns 1 when the
 * estimate changed. */
int ps_rate_window(struct ps_rate *r, uint64_t now_ns);

/* Weights from rates: the fastest server 255, servers within a fifth of it 255 too, slower ones
 * 0.8 x their proportional weight (a little under their share, so that the slow server is not the
 * last to finish every operation), every server in use at least 1, lost ones 0, unmeasured ones
 * as the fastest; then a probed server's weight doubled `boost` times, at most 255.  Records in
 * each rate whether its weight was reduced (which makes its idle windows lead to a probe). */
void ps_weights(struct ps_rate *r, int nservers, uint32_t lost, uint8_t out[PS_MAX_SERVERS]);

#endif
