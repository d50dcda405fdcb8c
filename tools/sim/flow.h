/* Flow-level network model: max-min fair sharing of link capacity (progressive filling).
 *
 * A flow crosses up to FLOW_MAX_PATH links and stands for `mult` identical flows (a class of
 * identical nodes simulated once: each of its links then has mult times one link's capacity,
 * which the caller sets).  Every unfrozen flow's rate rises together until some link is full;
 * the flows on it are frozen at that rate; repeat.  The result: no flow can get more without
 * taking from one that has no more than it. */
#ifndef BRAID_SIM_FLOW_H
#define BRAID_SIM_FLOW_H

#include <stddef.h>

#define FLOW_MAX_PATH 6

struct flow {
  int npath;
  int path[FLOW_MAX_PATH]; /* link indices */
  double mult;             /* identical flows this one stands for (>= 1) */
  double bytes;            /* flow_run: bytes to move */
  double rate;             /* out: bytes/s */
  double done_s;           /* flow_run out: completion time */
};

/* Max-min fair rates for every flow given link capacities (bytes/s).  A flow crossing a link of
 * capacity 0 gets rate 0.  Returns 0, or -1 out of memory or for a bad link index. */
int flow_maxmin(int nlinks, const double *cap, struct flow *f, size_t nf);

/* Runs the flows from time 0 (all start together) to completion, recomputing the max-min rates
 * each time a flow finishes; fills done_s.  Returns the last completion time (s), or a negative
 * value on error; INFINITY when some flow can never finish (a zero-capacity link). */
double flow_run(int nlinks, const double *cap, struct flow *f, size_t nf);

#endif
