/* braid's read-only telemetry snapshot, exported by libnccl-net-braid.so for the braid tuner
 * (and anything else in the process).
 *
 * NCCL opens plugins RTLD_LOCAL, so a reader finds the net library with
 *   void *lib = dlopen("libnccl-net-braid.so", RTLD_NOW | RTLD_NOLOAD);  (or the path NCCL used)
 *   braid_snapshot_fn_v1 fn = (braid_snapshot_fn_v1)dlsym(lib, BRAID_SNAPSHOT_SYMBOL_V1);
 * afresh at each use (NCCL may unload and reload the net library), and dlcloses it after.
 * Layouts only ever grow at the end; a new incompatible layout gets a new symbol (_v2). */
#ifndef BRAID_SNAPSHOT_H
#define BRAID_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_SNAPSHOT_SYMBOL_V1 "braid_snapshot_v1"
#define BRAID_SNAPSHOT_VERSION_1 1

/* One rail of one send connection. */
struct braid_snapshot_rail_v1 {
  int32_t dev;         /* NCCL device index */
  int32_t rail;        /* rail index within the connection */
  int32_t state;       /* 0 active, 1 degraded, 2 probing, 3 down */
  uint32_t reserved;
  uint64_t bytes;      /* delivered */
  uint64_t failovers;
  uint64_t demotions;
  uint64_t est_bps;    /* the scheduler's delivered-throughput estimate, bits/s (0: none yet) */
  char peer[64];       /* "addr:port" */
  char nic[16];
};

struct braid_snapshot_v1 {
  uint32_t version;    /* BRAID_SNAPSHOT_VERSION_1 */
  uint32_t nrails;     /* entries filled in rail[] */
  uint32_t total;      /* rails known (may exceed the caller's capacity) */
  uint32_t reserved;
  uint64_t taken_ns;   /* CLOCK_MONOTONIC */
  struct braid_snapshot_rail_v1 rail[];
};

/* Fills out (with room for max_rails entries); returns 0, or -1 for bad arguments. */
typedef int (*braid_snapshot_fn_v1)(struct braid_snapshot_v1 *out, uint32_t max_rails);

#if defined(__LP64__)
#ifdef __cplusplus
static_assert(sizeof(struct braid_snapshot_rail_v1) == 128, "snapshot rail layout");
static_assert(offsetof(struct braid_snapshot_rail_v1, peer) == 48, "snapshot rail layout");
static_assert(offsetof(struct braid_snapshot_v1, rail) == 24, "snapshot layout");
#else
_Static_assert(sizeof(struct braid_snapshot_rail_v1) == 128, "snapshot rail layout");
_Static_assert(offsetof(struct braid_snapshot_rail_v1, peer) == 48, "snapshot rail layout");
_Static_assert(offsetof(struct braid_snapshot_v1, rail) == 24, "snapshot layout");
#endif
#endif

#ifdef __cplusplus
}
#endif

#endif
