/* braid-sim: allreduce at scale on braid's own scheduler and PS assignment (docs/sim.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg.h"
#include "clock.h"
#include "coll.h"
#include "report.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: braid-sim [--config FILE] [--set KEY=VALUE]... [--scenario LIST] [--algo LIST]\n"
          "                 [--out DIR] [--print-config] [--quiet]\n"
          "Simulates an allreduce on a rail-optimized cluster with braid's own multi-rail scheduler\n"
          "(net_plugin/stripe/sched.c) and braid-ps's partition assignment (ps_offload/assign.c) driven by a\n"
          "simulated clock, and reports time, algbw, busbw, slowdown against healthy and (with sweep = 1)\n"
          "scaling efficiency from one node to all of them.  Model and assumptions: docs/sim.md.\n"
          "\n"
          "  --config FILE     'key = value' lines ('#' comments); keys below\n"
          "  --set KEY=VALUE   one key, after the file (repeatable)\n"
          "  --scenario LIST   comma-separated, or all [all]: healthy, slow-nics (slow_nics NICs at\n"
          "                    slow_nic_frac), rail-down (down_rail on every node), slow-node (node 0 at\n"
          "                    slow_node_frac), slow-server (server 0 at slow_server_frac); healthy is\n"
          "                    always run (the slowdown baseline)\n"
          "  --algo LIST       comma-separated, or all [all]: ring, tree, ps, braid-ring, braid-tree,\n"
          "                    braid-ps (braid-X: X with every node's connections striped over its\n"
          "                    rails by braid's scheduler)\n"
          "  --out DIR         write DIR/table.txt, DIR/results.csv, DIR/scaling.csv, DIR/busbw.png\n"
          "  --print-config    print the configuration in use (as a config file) and exit\n"
          "  --quiet           no table on stdout\n"
          "  --help            this text\n"
          "\n"
          "Config keys [default]:\n");
  sim_cfg_help(f);
  fprintf(f, "\nExit status: 0, 1 for a failed simulation or output, 2 for bad usage.\n");
}

/* Parses a comma list of names into a mask; -1 for an unknown name. */
static int parse_list(const char *s, bool scen, unsigned *mask) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  *mask = 0;
  for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (strcmp(t, "all") == 0) {
      *mask = scen ? (1u << SC_COUNT) - 1 : (1u << (2 * ALGO_COUNT)) - 1;
      continue;
    }
    int k = -1;
    if (scen) k = scenario_parse(t);
    else
      for (int a = 0; a < 2 * ALGO_COUNT; a++)
        if (strcmp(t, algo_name((enum algo)(a % ALGO_COUNT), a >= ALGO_COUNT)) == 0) k = a;
    if (k < 0) return -1;
    *mask |= 1u << k;
  }
  return *mask ? 0 : -1;
}

struct rows {
  struct row *v;
  size_t n, cap;
};

static int run_one(struct rows *out, const struct sim_cfg *cfg, int nodes, enum scenario sc, unsigned algos,
                   struct stripe_cache *cache, const struct rows *healthy) {
  struct cluster cl;
  if (cluster_build(&cl, cfg, nodes, sc, cache) != 0) {
    fprintf(stderr, "braid-sim: building the %s cluster failed\n", scenario_name(sc));
    return -1;
  }
  for (int a = 0; a < 2 * ALGO_COUNT; a++) {
    if (!(algos & (1u << a))) continue;
    if (out->n == out->cap) {
      size_t nc = out->cap ? 2 * out->cap : 32;
      struct row *nv = realloc(out->v, nc * sizeof *nv);
      if (!nv) {
        cluster_free(&cl);
        return -1;
      }
      out->v = nv, out->cap = nc;
    }
    struct row *w = &out->v[out->n];
    memset(w, 0, sizeof *w);
    w->sc = sc, w->algo = (enum algo)(a % ALGO_COUNT), w->braid = a >= ALGO_COUNT;
    w->gpus = (long)nodes * cfg->gpus;
    double t0 = braid_now_s();
    if (coll_run(&cl, w->algo, w->braid, &w->r) != 0) {
      fprintf(stderr, "braid-sim: %s on %s failed (out of memory?)\n", algo_name(w->algo, w->braid), scenario_name(sc));
      cluster_free(&cl);
      return -1;
    }
    w->wall_s = braid_now_s() - t0;
    w->healthy_s = sc == SC_HEALTHY ? w->r.time_s : INFINITY;
    for (size_t i = 0; healthy && i < healthy->n; i++)
      if (healthy->v[i].algo == w->algo && healthy->v[i].braid == w->braid && healthy->v[i].gpus == w->gpus)
        w->healthy_s = healthy->v[i].r.time_s;
    out->n++;
  }
  cluster_free(&cl);
  return 0;
}

static FILE *open_out(const char *dir, const char *name, char *path, size_t n) {
  snprintf(path, n, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) fprintf(stderr, "braid-sim: %s: %s\n", path, strerror(errno));
  return f;
}

int main(int argc, char **argv) {
  struct sim_cfg cfg;
  sim_cfg_default(&cfg);
  char err[512];
  const char *out = NULL;
  unsigned scen = (1u << SC_COUNT) - 1, algos = (1u << (2 * ALGO_COUNT)) - 1;
  bool print = false, quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--print-config") == 0) {
      print = true;
    } else if (strcmp(a, "--quiet") == 0) {
      quiet = true;
    } else if (v && strcmp(a, "--config") == 0) {
      if (sim_cfg_load(&cfg, v, err, sizeof err) != 0) {
        fprintf(stderr, "braid-sim: %s\n", err);
        return 2;
      }
      i++;
    } else if (v && strcmp(a, "--set") == 0) {
      char kv[256];
      snprintf(kv, sizeof kv, "%s", v);
      char *eq = strchr(kv, '=');
      if (!eq) {
        fprintf(stderr, "braid-sim: --set %s: expected KEY=VALUE\n", v);
        return 2;
      }
      *eq = 0;
      if (sim_cfg_set(&cfg, kv, eq + 1, err, sizeof err) != 0) {
        fprintf(stderr, "braid-sim: --set: %s\n", err);
        return 2;
      }
      i++;
    } else if (v && strcmp(a, "--scenario") == 0) {
      if (parse_list(v, true, &scen) != 0) {
        fprintf(stderr, "braid-sim: --scenario %s: unknown name (see --help)\n", v);
        return 2;
      }
      i++;
    } else if (v && strcmp(a, "--algo") == 0) {
      if (parse_list(v, false, &algos) != 0) {
        fprintf(stderr, "braid-sim: --algo %s: unknown name (see --help)\n", v);
        return 2;
      }
      i++;
    } else if (v && strcmp(a, "--out") == 0) {
      out = v;
      i++;
    } else {
      fprintf(stderr, "braid-sim: bad argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (sim_cfg_check(&cfg, err, sizeof err) != 0) {
    fprintf(stderr, "braid-sim: %s\n", err);
    return 2;
  }
  if (print) {
    sim_cfg_print(&cfg, stdout);
    return 0;
  }
  scen |= 1u << SC_HEALTHY;
  struct stripe_cache *cache = stripe_cache_new();
  struct rows rows = {0}, healthy = {0}, sweep = {0};
  int rc = cache ? 0 : 1;
  double t0 = braid_now_s();
  /* Healthy first: every other scenario's slowdown is against it. */
  for (int s = 0; rc == 0 && s < SC_COUNT; s++)
    if (scen & (1u << s)) rc = run_one(s == SC_HEALTHY ? &healthy : &rows, &cfg, cfg.nodes, (enum scenario)s, algos, cache, &healthy);
  double t_main = braid_now_s() - t0;
  /* The sweep: one node, then doubling, then all of them; healthy and (if asked) slow NICs. */
  for (int n = 1; rc == 0 && cfg.sweep && n <= cfg.nodes; n = n * 2 > cfg.nodes && n < cfg.nodes ? cfg.nodes : n * 2) {
    struct sim_cfg c = cfg;
    if (c.slow_nics > n) c.slow_nics = n;
    for (int s = 0; rc == 0 && s < SC_COUNT; s++)
      if ((s == SC_HEALTHY || s == SC_SLOW_NICS) && (scen & (1u << s)))
        rc = run_one(&sweep, &c, n, (enum scenario)s, algos, cache, NULL);
  }
  double t_all = braid_now_s() - t0;
  /* The table: healthy rows then the others. */
  struct row *all = rc == 0 ? malloc((healthy.n + rows.n + 1) * sizeof *all) : NULL;
  if (rc == 0 && !all) rc = 1;
  if (rc == 0) {
    memcpy(all, healthy.v, healthy.n * sizeof *all);
    if (rows.n) memcpy(all + healthy.n, rows.v, rows.n * sizeof *all);
    size_t nall = healthy.n + rows.n;
    char head[512];
    snprintf(head, sizeof head,
             "braid-sim: allreduce of %g MiB per GPU, %d nodes x %d GPUs, %d rails x %g Gb/s, %d switch tier(s);"
             " %.2f s for the table, %.2f s in all; %d rail simulation(s) of braid's scheduler\n",
             cfg.msg_mib, cfg.nodes, cfg.gpus, cfg.rails, cfg.nic_gbps, cfg.tiers, t_main, t_all, stripe_runs(cache));
    if (!quiet) {
      fputs(head, stdout);
      report_text(stdout, all, nall);
      printf("\nbraid's scheduler over a node's rails (rail simulation, steady state after %g ms):\n", cfg.braid_warmup_ms);
      stripe_print(cache, stdout);
      if (sweep.n) {
        printf("\nscaling (efficiency: busbw / busbw at %d GPUs):\n", cfg.gpus);
        report_scaling_text(stdout, sweep.v, sweep.n);
      }
    }
    if (out) {
      char path[1024];
      if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "braid-sim: %s: %s\n", out, strerror(errno));
        rc = 1;
      }
      FILE *f = rc == 0 ? open_out(out, "table.txt", path, sizeof path) : NULL;
      if (f) {
        fputs(head, f);
        report_text(f, all, nall);
        fprintf(f, "\nbraid's scheduler over a node's rails (rail simulation, steady state after %g ms):\n", cfg.braid_warmup_ms);
        stripe_print(cache, f);
        if (sweep.n) {
          fprintf(f, "\nscaling (efficiency: busbw / busbw at %d GPUs):\n", cfg.gpus);
          report_scaling_text(f, sweep.v, sweep.n);
        }
        fprintf(f, "\nconfiguration:\n");
        sim_cfg_print(&cfg, f);
        rc |= fclose(f) != 0;
      } else rc = 1;
      if (rc == 0 && (f = open_out(out, "results.csv", path, sizeof path))) {
        report_csv(f, all, nall);
        rc |= fclose(f) != 0;
      } else rc = 1;
      if (rc == 0 && sweep.n && (f = open_out(out, "scaling.csv", path, sizeof path))) {
        report_scaling_csv(f, sweep.v, sweep.n);
        rc |= fclose(f) != 0;
      }
      if (rc == 0) {
        snprintf(path, sizeof path, "%s/busbw.png", out);
        char title[160];
        snprintf(title, sizeof title, "braid-sim: allreduce %g MiB per GPU, %d GPUs per node, %d x %g Gb/s rails",
                 cfg.msg_mib, cfg.gpus, cfg.rails, cfg.nic_gbps);
        const struct row *pv = sweep.n ? sweep.v : all;
        size_t pn = sweep.n ? sweep.n : nall;
        if (report_png(path, pv, pn, title, err, sizeof err) != 0) {
          fprintf(stderr, "braid-sim: %s\n", err);
          rc = 1;
        }
      }
    }
  }
  free(all);
  free(rows.v), free(healthy.v), free(sweep.v);
  if (cache) stripe_cache_free(cache);
  return rc ? 1 : 0;
}
