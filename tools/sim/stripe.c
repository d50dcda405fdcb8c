/* braid's striped rate over a set of rails, from the rail simulator (see cluster.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "railsim.h"

#define STRIPE_CACHE 64

struct stripe_entry {
  int n;
  double rates[BRAID_SCHED_MAX_RAILS];
  double Bps;
};

struct stripe_cache {
  struct stripe_entry e[STRIPE_CACHE];
  int n, runs;
};

struct stripe_cache *stripe_cache_new(void) { return calloc(1, sizeof(struct stripe_cache)); }
void stripe_cache_free(struct stripe_cache *c) { free(c); }
int stripe_runs(const struct stripe_cache *c) { return c->runs; }

static double simulate(const struct sim_cfg *cfg, const double *rates, int n) {
  struct rs_config rc;
  rs_config_default(&rc);
  rc.nrails = n;
  double sum = 0;
  struct rs_action acts[BRAID_SCHED_MAX_RAILS];
  size_t nacts = 0;
  for (int r = 0; r < n; r++) {
    /* A down rail: nominal rate, failed before the first chunk (the transport finds out). */
    rc.rate_Bps[r] = rates[r] > 0 ? rates[r] : cfg->nic_gbps * 1e9 / 8;
    if (rates[r] > 0) sum += rates[r];
    else acts[nacts++] = (struct rs_action){0, r, RS_FAIL, 0};
  }
  if (sum <= 0) return 0;
  double nominal[BRAID_SCHED_MAX_RAILS];
  for (int r = 0; r < n; r++) nominal[r] = cfg->nic_gbps * 1e9 / 8; /* the plugin's prior: NIC speeds */
  rc.nominal_Bps = nominal;
  rc.actions = acts;
  rc.nactions = nacts;
  rc.chunk = (size_t)(cfg->braid_chunk_kib * 1024);
  rc.prop_ns = (uint64_t)((cfg->net_lat_us + cfg->switch_lat_us) * 1e3 / 2); /* one way */
  uint64_t warm = (uint64_t)(cfg->braid_warmup_ms * 1e6), meas = (uint64_t)(cfg->braid_measure_ms * 1e6);
  /* A backlog of 8-chunk messages for warm-up plus measurement, at the sum of the rates. */
  size_t msg = 8 * rc.chunk;
  size_t nmsgs = (size_t)(sum * (double)(warm + meas + 4 * rc.bin_ns) / 1e9 / (double)msg) + 1;
  size_t *sizes = malloc(nmsgs * sizeof *sizes);
  if (!sizes) return -1;
  for (size_t i = 0; i < nmsgs; i++) sizes[i] = msg;
  rc.msgs = sizes;
  rc.nmsgs = nmsgs;
  rc.end_ns = 10 * (warm + meas) + RS_SEC;
  struct rs_result res;
  double Bps = -1;
  if (rs_simulate(&rc, &res) == 0) {
    uint64_t t0 = warm / rc.bin_ns * rc.bin_ns, t1 = rs_steady_end(&res);
    if (res.complete && res.lost_chunks == 0 && t1 > t0) Bps = rs_Bps(&res, t0, t1, -1);
    rs_result_free(&res);
  }
  free(sizes);
  return Bps;
}

double stripe_Bps(struct stripe_cache *c, const struct sim_cfg *cfg, const double *rates, int n) {
  for (int i = 0; i < c->n; i++)
    if (c->e[i].n == n && memcmp(c->e[i].rates, rates, (size_t)n * sizeof *rates) == 0) return c->e[i].Bps;
  double Bps = simulate(cfg, rates, n);
  c->runs++;
  if (Bps >= 0 && c->n < STRIPE_CACHE) {
    struct stripe_entry *e = &c->e[c->n++];
    e->n = n;
    memcpy(e->rates, rates, (size_t)n * sizeof *rates);
    e->Bps = Bps;
  }
  return Bps;
}

void stripe_print(const struct stripe_cache *c, FILE *f) {
  for (int i = 0; i < c->n; i++) {
    const struct stripe_entry *e = &c->e[i];
    double sum = 0;
    fprintf(f, "  rails [");
    for (int r = 0; r < e->n; r++) {
      fprintf(f, "%s%.4g", r ? " " : "", e->rates[r] / 1e9);
      sum += e->rates[r];
    }
    if (sum > 0) fprintf(f, "] GB/s -> %.4g GB/s delivered (%.1f%% of the up rails' sum)\n", e->Bps / 1e9, 100 * e->Bps / sum);
    else fprintf(f, "] GB/s -> no rail up\n");
  }
}
