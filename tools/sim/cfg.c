/* braid-sim's configuration keys (see cfg.h). */
#include "cfg.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum type { T_INT, T_DBL };

struct key {
  const char *name;
  enum type type;
  size_t off;
  const char *def;
  double min, max;
  const char *doc;
};

#define K(n, t, d, lo, hi, doc) {#n, t, offsetof(struct sim_cfg, n), d, lo, hi, doc}
static const struct key keys[] = {
    K(nodes, T_INT, "1280", 1, 1 << 20, "GPU nodes"),
    K(gpus, T_INT, "8", 1, 64, "GPUs per node"),
    K(rails, T_INT, "8", 1, 16, "rails: NICs per node, one per rail, rail r on its own switches"),
    K(nic_gbps, T_DBL, "400", 1e-3, 1e6, "NIC rate, Gbit/s each direction"),
    K(nvlink_GBps, T_DBL, "360", 1e-3, 1e6, "NVLink rate per GPU, GB/s each direction (achievable, H100: ~360 of 450)"),
    K(net_lat_us, T_DBL, "4", 0, 1e6, "latency of one inter-node step, us (NIC, PCIe, NCCL proxy), switches excluded"),
    K(switch_lat_us, T_DBL, "0.6", 0, 1e6, "latency per switch crossed, us"),
    K(nvlink_lat_us, T_DBL, "1", 0, 1e6, "latency of one intra-node (NVLink) step, us"),
    K(tiers, T_INT, "2", 1, 3, "switch tiers per rail: 1 one switch, 2 leaf/spine, 3 leaf/spine/core"),
    K(nodes_per_leaf, T_INT, "32", 1, 1 << 20, "nodes under one leaf switch (per rail)"),
    K(leaves_per_pod, T_INT, "32", 1, 1 << 20, "leaves per pod (tiers = 3)"),
    K(oversub, T_DBL, "1", 1, 1000, "leaf oversubscription, downlink:uplink (1: non-blocking)"),
    K(channels_per_rail, T_INT, "2", 1, 8, "NCCL channels per NIC (channels = this x rails)"),
    K(ring_chunk_kib, T_DBL, "2048", 1, 1 << 20, "NCCL ring chunk (Simple: 4 steps of 512 KiB), KiB"),
    K(tree_chunk_kib, T_DBL, "512", 1, 1 << 20, "NCCL tree chunk, KiB"),
    K(servers, T_INT, "16", 1, 16, "braid-ps servers (CollNet-PS), at most PS_MAX_SERVERS = 16"),
    K(server_gbps, T_DBL, "800", 1e-3, 1e7, "braid-ps server rate, Gbit/s each direction (NICs and reduction)"),
    K(part_kib, T_DBL, "256", 4, 16384, "BRAID_PS_PARTITION_BYTES, KiB (the client's size rule applies below it)"),
    K(ps_ops, T_INT, "12", 1, 100, "CollNet-PS operations simulated; the last is reported (weights adapt once 8 have run)"),
    K(braid_chunk_kib, T_DBL, "512", 4, 65536, "BRAID_CHUNK_BYTES, KiB: braid's chunk on a rail"),
    K(braid_warmup_ms, T_DBL, "300", 0, 1e6, "braid: rail simulation before measuring (scheduler settles), ms"),
    K(braid_measure_ms, T_DBL, "100", 1, 1e6, "braid: rail simulation measured, ms"),
    K(msg_mib, T_DBL, "1024", 1.0 / 1024, 1 << 20, "allreduce size per GPU, MiB"),
    K(slow_nics, T_INT, "5", 0, 1 << 20, "scenario slow-nics: this many NICs (on distinct nodes, at most one per node; rails spread)"),
    K(slow_nic_frac, T_DBL, "0.1", 1e-6, 1, "... at this fraction of their rate"),
    K(down_rail, T_INT, "0", 0, 15, "scenario rail-down: this rail is down on every node"),
    K(slow_node_frac, T_DBL, "0.5", 1e-6, 1, "scenario slow-node: node 0's NICs and NVLink at this fraction"),
    K(slow_server_frac, T_DBL, "0.25", 1e-6, 1, "scenario slow-server: server 0 at this fraction"),
    K(sweep, T_INT, "1", 0, 1, "1: also sweep the GPU count (8, 16, ... , nodes x gpus) for scaling"),
};
#define NKEYS (sizeof keys / sizeof keys[0])

static int set1(struct sim_cfg *c, const struct key *k, const char *v, char *err, size_t n) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  while (*end == ' ' || *end == '\t') end++;
  if (end == v || *end || errno || !isfinite(x)) {
    snprintf(err, n, "%s: not a number: '%s'", k->name, v);
    return -1;
  }
  if (x < k->min || x > k->max) {
    snprintf(err, n, "%s: %s is out of range [%g, %g]", k->name, v, k->min, k->max);
    return -1;
  }
  if (k->type == T_INT) {
    if (x != floor(x)) {
      snprintf(err, n, "%s: not an integer: '%s'", k->name, v);
      return -1;
    }
    *(int *)((char *)c + k->off) = (int)x;
  } else {
    *(double *)((char *)c + k->off) = x;
  }
  return 0;
}

void sim_cfg_default(struct sim_cfg *c) {
  char err[128];
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < NKEYS; i++) set1(c, &keys[i], keys[i].def, err, sizeof err);
}

int sim_cfg_set(struct sim_cfg *c, const char *key, const char *value, char *err, size_t errlen) {
  for (size_t i = 0; i < NKEYS; i++)
    if (strcmp(keys[i].name, key) == 0) return set1(c, &keys[i], value, err, errlen);
  snprintf(err, errlen, "unknown key '%s' (braid-sim --help lists them)", key);
  return -1;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
  return s;
}

int sim_cfg_load(struct sim_cfg *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char line[512], why[256];
  int no = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    no++;
    char *h = strchr(line, '#');
    if (h) *h = 0;
    char *s = trim(line);
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      snprintf(err, errlen, "%s:%d: expected 'key = value'", path, no);
      rc = -1;
      break;
    }
    *eq = 0;
    if (sim_cfg_set(c, trim(s), trim(eq + 1), why, sizeof why) != 0) {
      snprintf(err, errlen, "%s:%d: %s", path, no, why);
      rc = -1;
    }
  }
  fclose(f);
  return rc;
}

int sim_cfg_check(const struct sim_cfg *c, char *err, size_t errlen) {
  if (c->down_rail >= c->rails) {
    snprintf(err, errlen, "down_rail %d: there are only %d rails", c->down_rail, c->rails);
    return -1;
  }
  if ((double)c->nodes * c->gpus > 1 << 20) {
    snprintf(err, errlen, "at most 1048576 GPUs");
    return -1;
  }
  return 0;
}

void sim_cfg_help(FILE *f) {
  for (size_t i = 0; i < NKEYS; i++) fprintf(f, "  %-18s [%6s] %s\n", keys[i].name, keys[i].def, keys[i].doc);
}

void sim_cfg_print(const struct sim_cfg *c, FILE *f) {
  for (size_t i = 0; i < NKEYS; i++) {
    const char *p = (const char *)c + keys[i].off;
    if (keys[i].type == T_INT) fprintf(f, "%s = %d\n", keys[i].name, *(const int *)p);
    else fprintf(f, "%s = %g\n", keys[i].name, *(const double *)p);
  }
}
