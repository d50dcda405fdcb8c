/* Live telemetry as advice for the next run (see advice.h).
 *
 * The advice file (BRAID_TUNER_ADVICE; %h: host name, %p: pid, %%: '%'), written once at
 * finalize through a temporary file and rename(), so a reader never sees half of it. Plain text,
 * one record per line, words separated by blanks, '#' to the end of a line is a comment:
 *
 *   braid-advice 1                    format and version; always the first line
 *   host <name>                       NCCL_HOSTID, else gethostname(): the node name `braid-tune health` writes
 *   seconds <S>                       from the first to the last snapshot
 *   samples <N>                       snapshots taken; 0: no telemetry (no rail lines follow)
 *   send_gbps <X>                     this process's send bandwidth, Gb/s (bits): the sum over
 *                                     its rails of each rail's median est_bps
 *   rail <dev> <nic> <peer> <median_gbps> <min_gbps> <slow_samples_in_a_row_max> <state>
 *
 * One rail line per (NCCL device, peer "addr:port", NIC) seen in any snapshot; entries of one
 * snapshot with the same key (two rails of a connection on one NIC) are added up. median_gbps
 * and min_gbps are over the snapshots in which the scheduler had an estimate (est_bps > 0;
 * 0 when it never had one); slow_samples_in_a_row_max is the longest run of consecutive
 * snapshots in which the rail's estimate was below half of the best rail of its connection
 * (same device and peer); state is the last one seen: active, degraded, probing, down or
 * unknown. Names are written with blanks, '#' and control characters replaced by '_'.
 *
 * A rail slow in SLOW_RUN (3) or more snapshots in a row gets one BRAID_WARN at finish, and the
 * same sentence as a "# slow:" comment in the file: "rail <nic> to <peer> delivered N% of its
 * connection's best rail for S s", N the mean share over its longest slow run and S the time
 * from the first to the last snapshot of that run.
 *
 * Why send_gbps sums medians of est_bps rather than dividing bytes by time: est_bps is the
 * throughput the scheduler measured while a rail was sending, so it does not depend on how busy
 * the application kept the network (bytes/elapsed makes a host that waited on compute, on a
 * straggler or on I/O look slow), and the median ignores start-up and the odd congested
 * snapshot. The bytes the rails' counters show are reported too, as a comment.
 *
 * Cost: braid_advice_tick is a relaxed load and store of a counter; one call in 1024 reads the
 * clock, and a snapshot (dlopen RTLD_NOLOAD, one call into the net plugin, dlclose) is taken at
 * most every BRAID_TUNER_ADVICE_INTERVAL_MS. */
#include "advice.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "param.h"
#include "tmpfile.h"

#define NET_LIB "libnccl-net-braid.so"
#define TICK_MASK 1023u          /* the clock is read once every 1024 ticks */
#define SNAP_RAILS_INIT 64       /* the snapshot buffer grows to what the plugin reports */
#define RAILS_MAX 1024           /* distinct rails kept; more are counted and ignored */
#define HIST_MAX 256             /* est_bps values kept per rail (evenly thinned beyond) */
#define SLOW_SHARE 0.5           /* slower than this share of the connection's best rail */
#define SLOW_RUN 3               /* ... in this many snapshots in a row: warned about */

struct rail {
  int32_t dev, state;
  char peer[64], nic[16];
  uint32_t samples;              /* snapshots it appeared in */
  uint64_t bytes_last, bytes_total;
  uint64_t est_min;              /* over snapshots with an estimate; 0: never had one */
  uint64_t hist[HIST_MAX];       /* est_bps, every stride-th snapshot with an estimate */
  uint32_t nhist, stride, skip;
  uint32_t run, run_max;         /* consecutive slow snapshots: current, longest */
  uint64_t run_first_ns, max_first_ns, max_last_ns;
  double run_share_sum, max_share; /* est/best summed over the current run; mean of longest */
  /* This snapshot's values (entries with the same key added up). */
  int seen;
  uint64_t cur_est, cur_bytes;
};

struct braid_advice {
  _Atomic uint64_t calls;
  _Atomic uint64_t next_ns;      /* the tick's next snapshot time */
  uint64_t interval_ns;
  uint64_t created_ns;
  uint64_t comm_id;
  int nranks, nnodes;
  pthread_mutex_t lock;          /* everything below */
  struct rail *rails;
  size_t nrails, cap;
  uint64_t rails_dropped;        /* rail entries ignored beyond RAILS_MAX */
  uint64_t samples, first_ns, last_ns;
  int found;                     /* a snapshot function was found at least once */
  struct braid_snapshot_v1 *snap;
  uint32_t snap_cap;
  char host[256];
  char path[4096];               /* expanded BRAID_TUNER_ADVICE, "" when unset */
};

static _Atomic(braid_snapshot_fn_v1) advice_source;

void braid_advice_set_source(braid_snapshot_fn_v1 fn) { atomic_store(&advice_source, fn); }

/* BRAID_TUNER_ADVICE with %h, %p and %% replaced; "" when it does not fit. */
static void expand_path(char *out, size_t n, const char *pattern, const char *host) {
  size_t o = 0;
  for (const char *p = pattern; *p && o < n; p++) {
    char buf[32];
    const char *add = NULL;
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p' || p[1] == '%')) {
      p++;
      snprintf(buf, sizeof buf, "%d", (int)getpid());
      add = *p == 'h' ? host : *p == 'p' ? buf : "%";
    }
    if (!add) {
      out[o++] = *p;
      continue;
    }
    size_t l = strlen(add);
    if (l >= n - o) {
      o = n;
      break;
    }
    memcpy(out + o, add, l);
    o += l;
  }
  if (o >= n) {
    out[0] = '\0';
    return;
  }
  out[o] = '\0';
}

struct braid_advice *braid_advice_create(uint64_t comm_id, int nranks, int nnodes) {
  struct braid_advice *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  if (pthread_mutex_init(&a->lock, NULL) != 0) {
    free(a);
    return NULL;
  }
  a->comm_id = comm_id;
  a->nranks = nranks;
  a->nnodes = nnodes;
  a->interval_ns = (uint64_t)braid_param_int(BRAID_P_TUNER_ADVICE_INTERVAL_MS) * 1000000ull;
  atomic_init(&a->calls, 0);
  a->created_ns = braid_now_ns();
  atomic_init(&a->next_ns, a->created_ns + a->interval_ns);
  /* NCCL's host identity: NCCL_HOSTID when set (several "hosts" on one machine), else the
   * host name. */
  const char *hostid = getenv("NCCL_HOSTID");
  if (hostid && *hostid)
    snprintf(a->host, sizeof a->host, "%s", hostid);
  else if (gethostname(a->host, sizeof a->host) != 0 || !a->host[0])
    snprintf(a->host, sizeof a->host, "unknown");
  a->host[sizeof a->host - 1] = '\0';
  const char *pattern = braid_param_str(BRAID_P_TUNER_ADVICE);
  if (*pattern) {
    expand_path(a->path, sizeof a->path, pattern, a->host);
    if (!a->path[0])
      BRAID_WARN("tuner: BRAID_TUNER_ADVICE=%s is too long once expanded; no advice file",
                 pattern);
  }
  return a;
}

/* The net plugin, if this process has it loaded (NULL otherwise). */
static void *net_lib(void) {
  void *lib = dlopen(NET_LIB, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) {
    const char *p = getenv("NCCL_NET_PLUGIN");
    if (p && strchr(p, '/')) lib = dlopen(p, RTLD_NOW | RTLD_NOLOAD);
  }
  if (!lib) (void)dlerror(); /* leave no error behind for others' dlerror() */
  return lib;
}

/* Calls fn into a->snap, growing the buffer once if the plugin knows more rails. */
static int call_source(struct braid_advice *a, braid_snapshot_fn_v1 fn) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (!a->snap) {
      uint32_t cap = a->snap_cap ? a->snap_cap : SNAP_RAILS_INIT;
      a->snap = malloc(sizeof *a->snap + (size_t)cap * sizeof a->snap->rail[0]);
      if (!a->snap) return -1;
      a->snap_cap = cap;
    }
    memset(a->snap, 0, sizeof *a->snap);
    if (fn(a->snap, a->snap_cap) != 0) return -1;
    if (a->snap->nrails > a->snap_cap) a->snap->nrails = a->snap_cap; /* distrust */
    if (a->snap->total <= a->snap->nrails || a->snap_cap >= RAILS_MAX || attempt) return 0;
    uint32_t total = a->snap->total;
    free(a->snap);
    a->snap = NULL;
    a->snap_cap = total > RAILS_MAX ? RAILS_MAX : total;
  }
  return 0;
}

/* Takes one snapshot into a->snap: 1 when one was taken, 0 when there is no source, -1 when the
 * source failed. */
static int take_snapshot(struct braid_advice *a) {
  braid_snapshot_fn_v1 fn = atomic_load(&advice_source);
  void *lib = NULL;
  if (!fn) {
    lib = net_lib();
    if (!lib) return 0;
    fn = (braid_snapshot_fn_v1)dlsym(lib, BRAID_SNAPSHOT_SYMBOL_V1);
    if (!fn) {
      (void)dlerror();
      dlclose(lib);
      return 0;
    }
  }
  a->found = 1;
  int rc = call_source(a, fn);
  if (lib) dlclose(lib);
  return rc < 0 ? -1 : 1;
}

static struct rail *find_rail(struct braid_advice *a, const struct braid_snapshot_rail_v1 *s) {
  for (size_t i = 0; i < a->nrails; i++) {
    struct rail *r = &a->rails[i];
    if (r->dev == s->dev && strncmp(r->peer, s->peer, sizeof r->peer) == 0 &&
        strncmp(r->nic, s->nic, sizeof r->nic) == 0)
      return r;
  }
  if (a->nrails == RAILS_MAX) return NULL;
  if (a->nrails == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 16;
    struct rail *v = realloc(a->rails, cap * sizeof *v);
    if (!v) return NULL;
    a->rails = v;
    a->cap = cap;
  }
  struct rail *r = &a->rails[a->nrails++];
  memset(r, 0, sizeof *r);
  r->dev = s->dev;
  memcpy(r->peer, s->peer, sizeof r->peer);
  r->peer[sizeof r->peer - 1] = '\0';
  memcpy(r->nic, s->nic, sizeof r->nic);
  r->nic[sizeof r->nic - 1] = '\0';
  r->stride = 1;
  return r;
}

/* Keeps every stride-th estimate; when full, drops every other kept one and doubles the stride,
 * so the history stays an even sample of the whole run. */
static void hist_add(struct rail *r, uint64_t est) {
  if (r->skip) {
    r->skip--;
    return;
  }
  if (r->nhist == HIST_MAX) {
    for (uint32_t i = 0; i < HIST_MAX / 2; i++) r->hist[i] = r->hist[2 * i];
    r->nhist = HIST_MAX / 2;
    r->stride *= 2;
  }
  r->hist[r->nhist++] = est;
  r->skip = r->stride - 1;
}

static void slow_update(struct rail *r, uint64_t best, uint64_t now) {
  int slow = r->seen && r->cur_est > 0 && best > 0 && r->cur_est < (double)best * SLOW_SHARE;
  if (!slow) {
    r->run = 0;
    return;
  }
  if (r->run++ == 0) r->run_first_ns = now, r->run_share_sum = 0;
  r->run_share_sum += (double)r->cur_est / (double)best;
  if (r->run >= r->run_max) {
    r->run_max = r->run;
    r->max_first_ns = r->run_first_ns;
    r->max_last_ns = now;
    r->max_share = r->run_share_sum / r->run;
  }
}

/* Folds a->snap into the rails. */
static void record(struct braid_advice *a) {
  const struct braid_snapshot_v1 *s = a->snap;
  uint64_t now = s->taken_ns ? s->taken_ns : braid_now_ns();
  if (!a->samples) a->first_ns = now;
  if (now > a->last_ns) a->last_ns = now;
  a->samples++;
  for (size_t i = 0; i < a->nrails; i++) a->rails[i].seen = 0;
  for (uint32_t i = 0; i < s->nrails; i++) {
    const struct braid_snapshot_rail_v1 *e = &s->rail[i];
    struct rail *r = find_rail(a, e);
    if (!r) {
      a->rails_dropped++;
      continue;
    }
    if (!r->seen) r->seen = 1, r->cur_est = r->cur_bytes = 0, r->state = e->state;
    if (e->state > r->state) r->state = e->state;
    r->cur_est += e->est_bps;
    r->cur_bytes += e->bytes;
  }
  for (size_t i = 0; i < a->nrails; i++) {
    struct rail *r = &a->rails[i];
    if (!r->seen) continue;
    r->samples++;
    /* A counter that went back belongs to a new connection with the same key. */
    r->bytes_total += r->cur_bytes >= r->bytes_last ? r->cur_bytes - r->bytes_last : r->cur_bytes;
    r->bytes_last = r->cur_bytes;
    if (r->cur_est > 0) {
      if (!r->est_min || r->cur_est < r->est_min) r->est_min = r->cur_est;
      hist_add(r, r->cur_est);
    }
  }
  for (size_t i = 0; i < a->nrails; i++) {
    struct rail *r = &a->rails[i];
    uint64_t best = 0;
    int others = 0;
    for (size_t j = 0; r->seen && j < a->nrails; j++) {
      const struct rail *o = &a->rails[j];
      if (j == i || !o->seen || o->dev != r->dev || strcmp(o->peer, r->peer) != 0) continue;
      others = 1;
      if (o->cur_est > best) best = o->cur_est;
    }
    slow_update(r, others ? best : 0, now);
  }
}

/* Takes and records a snapshot; the caller holds a->lock. */
static void sample_locked(struct braid_advice *a) {
  int rc = take_snapshot(a);
  if (rc > 0) record(a);
  else if (rc < 0) BRAID_WARN_ONCE("tuner: braid's telemetry snapshot failed; advice is partial");
}

void braid_advice_sample_now(struct braid_advice *a) {
  if (!a) return;
  pthread_mutex_lock(&a->lock);
  sample_locked(a);
  pthread_mutex_unlock(&a->lock);
}

__attribute__((noinline)) static void tick_slow(struct braid_advice *a) {
  uint64_t now = braid_now_ns();
  uint64_t next = atomic_load_explicit(&a->next_ns, memory_order_relaxed);
  if (now < next) return;
  atomic_store_explicit(&a->next_ns, now + a->interval_ns, memory_order_relaxed);
  if (pthread_mutex_trylock(&a->lock) != 0) return;
  sample_locked(a);
  pthread_mutex_unlock(&a->lock);
}

void braid_advice_tick(struct braid_advice *a) {
  if (!a) return;
  /* One thread per communicator: a load and a store, no read-modify-write. */
  uint64_t n = atomic_load_explicit(&a->calls, memory_order_relaxed) + 1;
  atomic_store_explicit(&a->calls, n, memory_order_relaxed);
  if (__builtin_expect((n & TICK_MASK) == 0, 0)) tick_slow(a);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Median of the kept estimates, bits/s (0 when none). */
static double rail_median(const struct rail *r) {
  if (!r->nhist) return 0;
  uint64_t v[HIST_MAX];
  memcpy(v, r->hist, r->nhist * sizeof v[0]);
  qsort(v, r->nhist, sizeof v[0], cmp_u64);
  uint32_t m = r->nhist / 2;
  return r->nhist % 2 ? (double)v[m] : ((double)v[m - 1] + (double)v[m]) / 2;
}

static const char *state_name(int32_t s) {
  switch (s) {
    case 0: return "active";
    case 1: return "degraded";
    case 2: return "probing";
    case 3: return "down";
  }
  return "unknown";
}

/* A name as one word: blanks, '#' and control characters become '_'; "" becomes "-". */
static const char *word(char *buf, size_t n, const char *s) {
  size_t i = 0;
  for (; s[i] && i + 1 < n; i++) {
    unsigned char c = (unsigned char)s[i];
    buf[i] = c <= ' ' || c == '#' || c == 0x7f ? '_' : (char)c;
  }
  buf[i] = '\0';
  return i ? buf : "-";
}

static int rail_is_slow(const struct rail *r) { return r->run_max >= SLOW_RUN; }

/* The sentence the warning and the file share. */
static void slow_sentence(const struct rail *r, char *buf, size_t n) {
  char nic[sizeof r->nic], peer[sizeof r->peer];
  snprintf(buf, n, "rail %s to %s delivered %.0f%% of its connection's best rail for %.0f s "
           "(%u snapshots in a row)",
           word(nic, sizeof nic, r->nic), word(peer, sizeof peer, r->peer), r->max_share * 100,
           (double)(r->max_last_ns - r->max_first_ns) / 1e9, r->run_max);
}

static double send_bps(const struct braid_advice *a) {
  double sum = 0;
  for (size_t i = 0; i < a->nrails; i++) sum += rail_median(&a->rails[i]);
  return sum;
}

static double span_s(const struct braid_advice *a) {
  return a->samples ? (double)(a->last_ns - a->first_ns) / 1e9 : 0;
}

int braid_advice_write(const struct braid_advice *a, FILE *f) {
  if (!a || !f) return -1;
  char host[sizeof a->host], nic[32], peer[80], sentence[256];
  double secs = span_s(a);
  uint64_t bytes = 0;
  for (size_t i = 0; i < a->nrails; i++) bytes += a->rails[i].bytes_total;
  fprintf(f, "braid-advice 1\n");
  fprintf(f, "# What braid's live telemetry saw in this process (commId 0x%llx, %d ranks on %d "
             "nodes); `braid-tune health` merges these files into a BRAID_TUNER_HEALTH file.\n",
          (unsigned long long)a->comm_id, a->nranks, a->nnodes);
  fprintf(f, "host %s\n", word(host, sizeof host, a->host));
  fprintf(f, "seconds %.3f\n", secs);
  fprintf(f, "samples %llu\n", (unsigned long long)a->samples);
  fprintf(f, "# send_gbps: the sum over rails of each rail's median est_bps, Gb/s (bits)\n");
  fprintf(f, "send_gbps %.3f\n", send_bps(a) / 1e9);
  if (!a->found)
    fprintf(f, "# no telemetry: braid's net plugin (%s) was not loaded in this process\n",
            NET_LIB);
  else if (!a->nrails)
    fprintf(f, "# no rails: braid's net plugin reported no send connections\n");
  double alive = (double)(braid_now_ns() - a->created_ns) / 1e9;
  if (a->samples)
    fprintf(f, "# sent %llu bytes in all (the rails' counters): %.3f Gb/s over the %.1f s since "
               "the tuner started; depends on the workload\n",
            (unsigned long long)bytes, alive > 0 ? (double)bytes * 8 / alive / 1e9 : 0.0, alive);
  if (a->rails_dropped)
    fprintf(f, "# %llu rail entries beyond the first %d rails were ignored\n",
            (unsigned long long)a->rails_dropped, RAILS_MAX);
  if (a->nrails)
    fprintf(f, "# rail dev nic peer median_gbps min_gbps slow_samples_in_a_row_max state\n");
  for (size_t i = 0; i < a->nrails; i++) {
    const struct rail *r = &a->rails[i];
    fprintf(f, "rail %d %s %s %.3f %.3f %u %s\n", (int)r->dev, word(nic, sizeof nic, r->nic),
            word(peer, sizeof peer, r->peer), rail_median(r) / 1e9, (double)r->est_min / 1e9,
            r->run_max, state_name(r->state));
  }
  for (size_t i = 0; i < a->nrails; i++) {
    if (!rail_is_slow(&a->rails[i])) continue;
    slow_sentence(&a->rails[i], sentence, sizeof sentence);
    fprintf(f, "# slow: %s\n", sentence);
  }
  return ferror(f) ? -1 : 0;
}

/* Writes the advice to a->path through a temporary file and rename(). */
static int write_file(const struct braid_advice *a) {
  char tmp[sizeof a->path + 32];
  FILE *f = braid_tmpfile_open(a->path, tmp, sizeof tmp);
  if (!f) return -1;
  int rc = braid_advice_write(a, f);
  return braid_tmpfile_commit(f, tmp, a->path, rc);
}

void braid_advice_finish(struct braid_advice *a) {
  if (!a) return;
  pthread_mutex_lock(&a->lock);
  sample_locked(a);
  char sentence[256];
  for (size_t i = 0; i < a->nrails; i++) {
    if (!rail_is_slow(&a->rails[i])) continue;
    slow_sentence(&a->rails[i], sentence, sizeof sentence);
    BRAID_WARN("tuner: %s", sentence);
  }
  if (!a->found)
    BRAID_INFO(NCCL_TUNING, "tuner: advice: no telemetry was available (braid's net plugin %s "
                            "is not loaded in this process)%s%s",
               NET_LIB, a->path[0] ? "; writing an empty advice file " : "", a->path);
  if (a->path[0] && write_file(a) != 0)
    BRAID_WARN("tuner: cannot write the advice file %s (BRAID_TUNER_ADVICE): %s", a->path,
               strerror(errno));
  else if (a->found)
    BRAID_INFO(NCCL_TUNING,
               "tuner: advice: %llu snapshots over %.1f s, %zu rails, send %.2f Gb/s%s%s",
               (unsigned long long)a->samples, span_s(a), a->nrails, send_bps(a) / 1e9,
               a->path[0] ? "; written to " : " (BRAID_TUNER_ADVICE unset: no file)", a->path);
  pthread_mutex_unlock(&a->lock);
  pthread_mutex_destroy(&a->lock);
  free(a->snap);
  free(a->rails);
  free(a);
}
