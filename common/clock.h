/* The one clock: CLOCK_MONOTONIC, in nanoseconds from an arbitrary origin.  Every time the
 * plugins, braid-ps and the tools measure (timeouts, rates, deadlines, elapsed times) is read
 * here; wall-clock time (CLOCK_REALTIME, for timestamps people read) is not.
 *
 * A test harness that moves time by hand compiles with -DBRAID_CLOCK_FAKE and defines
 * braid_now_ns() itself (test/fuzz/net_stubs.c).  braid-ps's sessions take their clock as a
 * function pointer instead (ps_offload/session.h), which its fuzzer sets. */
#ifndef BRAID_CLOCK_H
#define BRAID_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef BRAID_CLOCK_FAKE
uint64_t braid_now_ns(void);
#else
static inline uint64_t braid_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

/* braid_now_ns() in seconds: the tools' elapsed times. */
static inline double braid_now_s(void) { return (double)braid_now_ns() * 1e-9; }

#endif
