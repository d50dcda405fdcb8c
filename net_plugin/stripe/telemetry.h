/* Per-rail and per-braid-ps-server telemetry: process-wide registries of lock-free counters,
 * written by the threads that drive each connection (each CollNet communicator) and read by the
 * metrics file writer (Prometheus text format for
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
  atomic_uint_fast64_t rejoins;   /* times the rail came back after going down */
  atomic_uint_fast64_t last_rejoin_ns; /* braid_now_ns of the last rejoin (0: never) */
};

/* One braid-ps server as one CollNet head (a rank of one communicator) sees it. */
struct braid_server_stats {
  atomic_int in_use;
  int dev, rank;
  char server[96]; /* "host:port" */
  atomic_int up;                    /* 1 serving this head, 0 lost */
  atomic_uint_fast64_t failures;    /* times it was lost (or unusable at set-up) */
  atomic_uint_fast64_t parts;       /* partitions pushed to it */
  atomic_uint_fast64_t result_bytes; /* summed bytes it returned */
  atomic_uint_fast64_t rejoins;     /* times it was re-admitted after being lost */
  atomic_uint_fast64_t last_rejoin_ns; /* braid_now_ns of the last re-admission (0: never) */
};

/* A slot for one rail of one connection; NULL when the registry is full (telemetry is then
 * skipped for it, never the data). */
struct braid_rail_stats *braid_telemetry_add(int dev, int rail, const char *peer, const char *nic);
void braid_telemetry_remove(struct braid_rail_stats *s);
/* A slot for one server of one CollNet communicator (NULL when the registry is full). */
struct braid_server_stats *braid_telemetry_add_server(int dev, int rank, const char *server);
void braid_telemetry_remove_server(struct braid_server_stats *s);
/* The rail came back (now_ns: braid_now_ns). */
void braid_telemetry_rejoined(struct braid_rail_stats *s, uint64_t now_ns);
/* The server was re-admitted: up again, counted (now_ns: braid_now_ns). */
void braid_telemetry_server_rejoined(struct braid_server_stats *s, uint64_t now_ns);
/* Whether BRAID_METRICS_FILE is set (cached). */
bool braid_telemetry_on(void);
/* Rewrites BRAID_METRICS_FILE when its interval has passed (cheap to call often). */
void braid_telemetry_tick(uint64_t now_ns);
/* Writes the current metrics to path now; 0 or -1. */
int braid_telemetry_write(const char *path);

#endif
