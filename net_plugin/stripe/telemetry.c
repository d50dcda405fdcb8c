#include "stripe/telemetry.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "braid/snapshot.h"
#include "clock.h"
#include "log.h"
#include "param.h"
#include "tmpfile.h"

#define TELEMETRY_SLOTS 4096
#define SERVER_SLOTS 1024

static struct braid_rail_stats telemetry_slots[TELEMETRY_SLOTS];
static struct braid_server_stats server_slots[SERVER_SLOTS];
/* Guards slot labels between add/remove and readers (rare); counters are atomics. */
static pthread_mutex_t telemetry_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint_fast64_t telemetry_next_ns;

/* Both registries are arrays of slots that begin with their in_use flag (0 free, 2 being
 * filled, 1 published).  Under the lock: the first free slot of n, each `size` bytes, marked
 * being filled; NULL when all are taken. */
_Static_assert(offsetof(struct braid_rail_stats, in_use) == 0 && offsetof(struct braid_server_stats, in_use) == 0,
               "a slot begins with its in_use flag");
static void *slot_claim(void *slots, size_t size, int n) {
  for (int i = 0; i < n; i++) {
    atomic_int *in_use = (atomic_int *)(void *)((char *)slots + (size_t)i * size);
    int free_slot = 0;
    if (atomic_compare_exchange_strong(in_use, &free_slot, 2)) return in_use;
  }
  return NULL;
}

static void slot_release(atomic_int *in_use) {
  pthread_mutex_lock(&telemetry_lock);
  atomic_store(in_use, 0);
  pthread_mutex_unlock(&telemetry_lock);
}

struct braid_rail_stats *braid_telemetry_add(int dev, int rail, const char *peer, const char *nic) {
  pthread_mutex_lock(&telemetry_lock);
  struct braid_rail_stats *s = slot_claim(telemetry_slots, sizeof *s, TELEMETRY_SLOTS);
  if (s) {
    s->dev = dev, s->rail = rail;
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    snprintf(s->nic, sizeof s->nic, "%s", nic);
    atomic_store(&s->bytes, 0), atomic_store(&s->chunks, 0), atomic_store(&s->resent, 0);
    atomic_store(&s->failovers, 0), atomic_store(&s->demotions, 0);
    atomic_store(&s->state, 0), atomic_store(&s->est_bps, 0);
    atomic_store(&s->rejoins, 0), atomic_store(&s->last_rejoin_ns, 0);
    atomic_store(&s->in_use, 1); /* published: readers see the labels complete */
  }
  pthread_mutex_unlock(&telemetry_lock);
  if (!s)
    BRAID_WARN_ONCE("telemetry registry full (%d rails): further rails are not reported", TELEMETRY_SLOTS);
  return s;
}

void braid_telemetry_remove(struct braid_rail_stats *s) {
  if (s) slot_release(&s->in_use);
}

struct braid_server_stats *braid_telemetry_add_server(int dev, int rank, const char *server) {
  pthread_mutex_lock(&telemetry_lock);
  struct braid_server_stats *s = slot_claim(server_slots, sizeof *s, SERVER_SLOTS);
  if (s) {
    s->dev = dev, s->rank = rank;
    snprintf(s->server, sizeof s->server, "%s", server);
    for (char *c = s->server; *c; c++) /* a label value: no quote, backslash or line break */
      if (*c == '"' || *c == '\\' || *c == '\n') *c = '_';
    atomic_store(&s->up, 0), atomic_store(&s->failures, 0);
    atomic_store(&s->parts, 0), atomic_store(&s->result_bytes, 0);
    atomic_store(&s->rejoins, 0), atomic_store(&s->last_rejoin_ns, 0);
    atomic_store(&s->in_use, 1);
  }
  pthread_mutex_unlock(&telemetry_lock);
  if (!s)
    BRAID_WARN_ONCE("telemetry registry full (%d braid-ps servers): further servers are not reported",
                    SERVER_SLOTS);
  return s;
}

void braid_telemetry_remove_server(struct braid_server_stats *s) {
  if (s) slot_release(&s->in_use);
}

void braid_telemetry_rejoined(struct braid_rail_stats *s, uint64_t now_ns) {
  if (!s) return;
  atomic_fetch_add(&s->rejoins, 1);
  atomic_store(&s->last_rejoin_ns, now_ns ? now_ns : 1);
}

void braid_telemetry_server_rejoined(struct braid_server_stats *s, uint64_t now_ns) {
  if (!s) return;
  atomic_store(&s->up, 1);
  atomic_fetch_add(&s->rejoins, 1);
  atomic_store(&s->last_rejoin_ns, now_ns ? now_ns : 1);
}

static const char *const telemetry_metrics[][3] = {
    {"braid_rail_bytes_total", "counter", "Bytes delivered on a rail (acknowledged by the peer)"},
    {"braid_rail_chunks_total", "counter", "Chunks delivered on a rail"},
    {"braid_rail_resent_chunks_total", "counter", "Chunks re-sent elsewhere after the rail failed"},
    {"braid_rail_failovers_total", "counter", "Times the rail went down"},
    {"braid_rail_demotions_total", "counter", "Times the rail was demoted as far slower than its peers"},
    {"braid_rail_state", "gauge", "0 active, 1 degraded (probed), 2 probing, 3 down"},
    {"braid_rail_estimate_bits_per_second", "gauge", "Delivered throughput the scheduler measures"},
    {"braid_rail_rejoins_total", "counter", "Times the rail came back after going down"},
    {"braid_rail_last_rejoin_timestamp_seconds", "gauge", "When the rail last came back (Unix time; 0: never)"},
};
#define TELEMETRY_METRICS (int)(sizeof telemetry_metrics / sizeof telemetry_metrics[0])

static const char *const server_metrics[][3] = {
    {"braid_ps_server_up", "gauge", "1 while the braid-ps server serves this CollNet head, 0 while lost"},
    {"braid_ps_server_failures_total", "counter", "Times the server was lost (or unusable at set-up)"},
    {"braid_ps_server_partitions_total", "counter", "Partitions this head pushed to the server"},
    {"braid_ps_server_result_bytes_total", "counter", "Summed bytes the server returned to this head"},
    {"braid_ps_server_rejoins_total", "counter", "Times the server was re-admitted after being lost"},
    {"braid_ps_server_last_rejoin_timestamp_seconds", "gauge", "When the server was last re-admitted (Unix time; 0: never)"},
};
#define SERVER_METRICS (int)(sizeof server_metrics / sizeof server_metrics[0])

/* A braid_now_ns instant as Unix seconds (now: the same clock's reading and CLOCK_REALTIME's). */
static uint64_t telemetry_unix_s(uint64_t at_ns, uint64_t now_ns, const struct timespec *real) {
  uint64_t ago = now_ns > at_ns ? now_ns - at_ns : 0;
  uint64_t real_ns = (uint64_t)real->tv_sec * 1000000000ull + (uint64_t)real->tv_nsec;
  return real_ns > ago ? (real_ns - ago) / 1000000000ull : 0;
}

static uint64_t server_value(struct braid_server_stats *s, int metric, uint64_t now_ns,
                             const struct timespec *real) {
  switch (metric) {
    case 0: return (uint64_t)atomic_load(&s->up);
    case 1: return atomic_load(&s->failures);
    case 2: return atomic_load(&s->parts);
    case 3: return atomic_load(&s->result_bytes);
    case 4: return atomic_load(&s->rejoins);
    default: {
      uint64_t at = atomic_load(&s->last_rejoin_ns);
      return at ? telemetry_unix_s(at, now_ns, real) : 0;
    }
  }
}

static uint64_t telemetry_value(struct braid_rail_stats *s, int metric, uint64_t now_ns,
                                const struct timespec *real) {
  switch (metric) {
    case 0: return atomic_load(&s->bytes);
    case 1: return atomic_load(&s->chunks);
    case 2: return atomic_load(&s->resent);
    case 3: return atomic_load(&s->failovers);
    case 4: return atomic_load(&s->demotions);
    case 5: return (uint64_t)atomic_load(&s->state);
    case 6: return atomic_load(&s->est_bps);
    case 7: return atomic_load(&s->rejoins);
    default: {
      uint64_t at = atomic_load(&s->last_rejoin_ns);
      return at ? telemetry_unix_s(at, now_ns, real) : 0;
    }
  }
}

int braid_telemetry_write(const char *path) {
  char tmp[4096];
  FILE *f = braid_tmpfile_open(path, tmp, sizeof tmp);
  if (!f) return -1;
  pthread_mutex_lock(&telemetry_lock);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t now_ns = braid_now_ns();
  fprintf(f, "# HELP braid_metrics_time_seconds When this file was written\n"
             "# TYPE braid_metrics_time_seconds gauge\nbraid_metrics_time_seconds{pid=\"%d\"} %lld.%03ld\n",
          (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec / 1000000);
  for (int m = 0; m < TELEMETRY_METRICS; m++) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", telemetry_metrics[m][0], telemetry_metrics[m][2],
            telemetry_metrics[m][0], telemetry_metrics[m][1]);
    for (int i = 0; i < TELEMETRY_SLOTS; i++) {
      struct braid_rail_stats *s = &telemetry_slots[i];
      if (atomic_load(&s->in_use) != 1) continue;
      fprintf(f, "%s{pid=\"%d\",dev=\"%d\",peer=\"%s\",rail=\"%d\",nic=\"%s\"} %llu\n",
              telemetry_metrics[m][0], (int)getpid(), s->dev, s->peer, s->rail, s->nic,
              (unsigned long long)telemetry_value(s, m, now_ns, &ts));
    }
  }
  for (int m = 0; m < SERVER_METRICS; m++) {
    bool any = false;
    for (int i = 0; i < SERVER_SLOTS; i++) {
      struct braid_server_stats *s = &server_slots[i];
      if (atomic_load(&s->in_use) != 1) continue;
      if (!any)
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", server_metrics[m][0], server_metrics[m][2],
                server_metrics[m][0], server_metrics[m][1]);
      any = true;
      fprintf(f, "%s{pid=\"%d\",dev=\"%d\",rank=\"%d\",server=\"%s\"} %llu\n", server_metrics[m][0],
              (int)getpid(), s->dev, s->rank, s->server, (unsigned long long)server_value(s, m, now_ns, &ts));
    }
  }
  pthread_mutex_unlock(&telemetry_lock);
  return braid_tmpfile_commit(f, tmp, path, ferror(f));
}

bool braid_telemetry_on(void) { return *braid_param_str(BRAID_P_METRICS_FILE) != 0; }

void braid_telemetry_tick(uint64_t now_ns) {
  const char *path = braid_param_str(BRAID_P_METRICS_FILE);
  if (!*path) return;
  uint64_t next = atomic_load(&telemetry_next_ns);
  if (now_ns < next) return;
  uint64_t interval = (uint64_t)braid_param_int(BRAID_P_METRICS_INTERVAL_MS) * 1000000ull;
  if (!atomic_compare_exchange_strong(&telemetry_next_ns, &next, now_ns + interval)) return;
  char file[4096];
  const char *pp = strstr(path, "%p");
  if (pp) snprintf(file, sizeof file, "%.*s%d%s", (int)(pp - path), path, (int)getpid(), pp + 2);
  else snprintf(file, sizeof file, "%s", path);
  if (braid_telemetry_write(file) != 0)
    BRAID_WARN_ONCE("cannot write BRAID_METRICS_FILE %s: %m", file);
}

/* The tuner's read-only view (include/braid/snapshot.h). */
__attribute__((visibility("default"))) int braid_snapshot_v1(struct braid_snapshot_v1 *out,
                                                             uint32_t max_rails) {
  if (!out) return -1;
  out->version = BRAID_SNAPSHOT_VERSION_1;
  out->nrails = out->total = out->reserved = 0;
  out->taken_ns = braid_now_ns();
  pthread_mutex_lock(&telemetry_lock);
  for (int i = 0; i < TELEMETRY_SLOTS; i++) {
    struct braid_rail_stats *s = &telemetry_slots[i];
    if (atomic_load(&s->in_use) != 1) continue;
    if (out->total++ >= max_rails) continue;
    struct braid_snapshot_rail_v1 *r = &out->rail[out->nrails++];
    memset(r, 0, sizeof *r);
    r->dev = s->dev, r->rail = s->rail, r->state = atomic_load(&s->state);
    r->bytes = atomic_load(&s->bytes), r->failovers = atomic_load(&s->failovers);
    r->demotions = atomic_load(&s->demotions), r->est_bps = atomic_load(&s->est_bps);
    memcpy(r->peer, s->peer, sizeof r->peer);
    memcpy(r->nic, s->nic, sizeof r->nic);
  }
  pthread_mutex_unlock(&telemetry_lock);
  return 0;
}
