/* braid-stat: shows the rails of a braid metrics file (BRAID_METRICS_FILE) as a table.
 *   braid-stat FILE... [--watch SECONDS]
 * With --watch, also the throughput of each rail since the previous refresh. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 1024
#define NMETRICS 15 /* 0-8 a rail's, 9-14 a braid-ps server's */

struct row {
  char key[256]; /* pid/dev/peer/rail/nic labels */
  unsigned long long v[NMETRICS];
  unsigned long long prev_bytes;
};

static const char *const metric_names[NMETRICS] = {
    "braid_rail_bytes_total", "braid_rail_chunks_total", "braid_rail_resent_chunks_total",
    "braid_rail_failovers_total", "braid_rail_demotions_total", "braid_rail_state",
    "braid_rail_estimate_bits_per_second", "braid_rail_rejoins_total",
    "braid_rail_last_rejoin_timestamp_seconds", "braid_ps_server_up", "braid_ps_server_failures_total",
    "braid_ps_server_partitions_total", "braid_ps_server_result_bytes_total",
    "braid_ps_server_rejoins_total", "braid_ps_server_last_rejoin_timestamp_seconds"};
static const char *const state_names[] = {"active", "degraded", "probing", "down"};

static struct row rows[MAX_ROWS];
static int nrows;

static struct row *row_for(const char *key) {
  for (int i = 0; i < nrows; i++)
    if (!strcmp(rows[i].key, key)) return &rows[i];
  if (nrows == MAX_ROWS) return NULL;
  struct row *r = &rows[nrows++];
  memset(r, 0, sizeof *r);
  snprintf(r->key, sizeof r->key, "%s", key);
  return r;
}

/* Parses one file; returns 0 or -1. */
static int read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    char *brace = strchr(line, '{'), *end = strrchr(line, '}');
    if (!brace || !end || end < brace) continue;
    int m = -1;
    for (int i = 0; i < NMETRICS; i++)
      if ((size_t)(brace - line) == strlen(metric_names[i]) && !strncmp(line, metric_names[i], (size_t)(brace - line))) m = i;
    if (m < 0) continue;
    *end = 0;
    struct row *r = row_for(brace + 1);
    if (r) r->v[m] = strtoull(end + 1, NULL, 10);
  }
  fclose(f);
  return 0;
}

static void label(const char *key, const char *name, char *out, size_t len) {
  char pat[32];
  snprintf(pat, sizeof pat, "%s=\"", name);
  const char *p = strstr(key, pat);
  out[0] = 0;
  if (!p) return;
  p += strlen(pat);
  const char *q = strchr(p, '"');
  snprintf(out, len, "%.*s", q ? (int)(q - p) : 0, p);
}

static bool is_server(const struct row *r) { return strstr(r->key, "server=\"") != NULL; }

/* The braid-ps servers each CollNet head sees, if the files have any. */
static void print_servers(void) {
  bool header = false;
  for (int i = 0; i < nrows; i++) {
    struct row *r = &rows[i];
    if (!is_server(r)) continue;
    if (!header)
      printf("\n%-7s %-3s %-5s %-32s %-5s %8s %10s %14s %7s %s\n", "pid", "dev", "rank", "braid-ps server",
             "state", "failures", "partitions", "result bytes", "rejoins", "last rejoin");
    header = true;
    char pid[16], dev[8], rank[16], server[128];
    label(r->key, "pid", pid, sizeof pid), label(r->key, "dev", dev, sizeof dev);
    label(r->key, "rank", rank, sizeof rank), label(r->key, "server", server, sizeof server);
    char last[32] = "-";
    if (r->v[14]) {
      long long ago = (long long)time(NULL) - (long long)r->v[14];
      snprintf(last, sizeof last, "%llds ago", ago < 0 ? 0 : ago);
    }
    printf("%-7s %-3s %-5s %-32s %-5s %8llu %10llu %14llu %7llu %s\n", pid, dev, rank, server,
           r->v[9] ? "up" : "lost", r->v[10], r->v[11], r->v[12], r->v[13], last);
  }
}

static void print_table(double interval) {
  printf("%-7s %-3s %-24s %-4s %-8s %-9s %12s %10s %10s %8s %9s %7s %s\n", "pid", "dev", "peer", "rail",
         "nic", "state", "bytes", "est Mb/s", interval > 0 ? "now Mb/s" : "", "failover", "demotions",
         "rejoins", "last rejoin");
  time_t now_s = time(NULL);
  for (int i = 0; i < nrows; i++) {
    struct row *r = &rows[i];
    if (is_server(r)) continue;
    char pid[16], dev[8], peer[64], rail[8], nic[32];
    label(r->key, "pid", pid, sizeof pid), label(r->key, "dev", dev, sizeof dev);
    label(r->key, "peer", peer, sizeof peer), label(r->key, "rail", rail, sizeof rail);
    label(r->key, "nic", nic, sizeof nic);
    char now[32] = "";
    if (interval > 0) snprintf(now, sizeof now, "%.1f", (double)(r->v[0] - r->prev_bytes) * 8e-6 / interval);
    char last[32] = "-";
    if (r->v[8]) {
      long long ago = (long long)now_s - (long long)r->v[8];
      snprintf(last, sizeof last, "%llds ago", ago < 0 ? 0 : ago);
    }
    printf("%-7s %-3s %-24s %-4s %-8s %-9s %12llu %10.1f %10s %8llu %9llu %7llu %s\n", pid, dev, peer, rail,
           nic, r->v[5] < 4 ? state_names[r->v[5]] : "?", r->v[0], (double)r->v[6] * 1e-6, now,
           r->v[3], r->v[4], r->v[7], last);
    r->prev_bytes = r->v[0];
  }
  print_servers();
}

int main(int argc, char **argv) {
  double watch = 0;
  int nfiles = 0;
  const char *files[64];
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--watch") && i + 1 < argc) watch = atof(argv[++i]);
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: braid-stat FILE... [--watch SECONDS]\n"
             "Shows the rails in braid metrics files (BRAID_METRICS_FILE, Prometheus text):\n"
             "state, bytes delivered, the scheduler's throughput estimate, failovers,\n"
             "demotions, rejoins and the time since the last rejoin per rail and peer; with\n"
             "--watch, refreshes and adds the rate since the previous refresh.  Then, where\n"
             "CollNet ran, each braid-ps server as each head sees it: up or lost, times lost,\n"
             "partitions pushed and result bytes returned.\n");
      return 0;
    } else if (nfiles < 64) files[nfiles++] = argv[i];
  }
  if (!nfiles) {
    fprintf(stderr, "braid-stat: no metrics file given (see --help)\n");
    return 2;
  }
  for (;;) {
    nrows = watch > 0 ? nrows : 0;
    for (int i = 0; i < nrows; i++) memset(rows[i].v, 0, sizeof rows[i].v);
    int ok = 0;
    for (int i = 0; i < nfiles; i++) ok += read_file(files[i]) == 0;
    if (!ok) {
      fprintf(stderr, "braid-stat: cannot read %s\n", files[0]);
      if (!watch) return 1;
    }
    print_table(watch);
    if (watch <= 0) return 0;
    fflush(stdout);
    usleep((useconds_t)(watch * 1e6));
    printf("\n");
  }
}
