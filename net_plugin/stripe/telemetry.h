/* Per-rail telemetry: one process-wide registry of lock-free counters, written by the threads
 * that drive each connection and read by the metrics file writer (Prometheus text format for
 * node_exporter's textfile collector, BRAID_METRICS_FILE) and by the close summary. */
#ifndef BRAID_TELEMETRY_H
#define BRAID_TELEMETRY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct braid_rail_stats {
  atomic_int in_use;
  int dev, rail;
  char peer[64], nic[16];
  atomic_uint_fast64_t bytes;     /* delivered (acknowledged, or written without acks) */
  atomic_uint_fast64_t chunks;
  atomic_uint_fast64_t resent;    /* chunks moved off this rail when it failed */
  atomic_uint_fast64_t failovers; /* times the rail went down */
  atomic_uint_fast64_t demotions; /* times the rail was demoted as slow */
  atomic_int state;               /* enum braid_rail_state */
  atomic_uint_fast64_t est_bps;   /* estimated delivered bits/s */
};

/* A slot for one rail of one connection; NULL when the registry is full (telemetry is then
 * skipped for it, never the data). */
struct braid_rail_stats *braid_telemetry_add(int dev, int rail, const char *peer, const char *nic);
void braid_telemetry_remove(struct braid_rail_stats *s);
/* Whether BRAID_METRICS_FILE is set (cached). */
bool braid_telemetry_on(void);
/* Rewrites BRAID_METRICS_FILE when its interval has passed (cheap to call often). */
void braid_telemetry_tick(uint64_t now_ns);
/* Writes the current metrics to path now; 0 or -1. */
int braid_telemetry_write(const char *path);

#endif
