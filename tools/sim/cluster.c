/* The simulated cluster (see cluster.h). */
#include "cluster.h"

#include <stdlib.h>
#include <string.h>

static const char *const names[SC_COUNT] = {"healthy", "slow-nics", "rail-down", "slow-node", "slow-server"};

const char *scenario_name(enum scenario sc) { return names[sc]; }

int scenario_parse(const char *name) {
  for (int i = 0; i < SC_COUNT; i++)
    if (strcmp(name, names[i]) == 0) return i;
  return -1;
}

int cluster_build(struct cluster *cl, const struct sim_cfg *cfg, int nodes, enum scenario sc,
                  struct stripe_cache *cache) {
  memset(cl, 0, sizeof *cl);
  cl->cfg = cfg;
  cl->sc = sc;
  cl->nodes = nodes;
  cl->gpus = cfg->gpus;
  cl->rails = cfg->rails;
  cl->servers = cfg->servers;
  cl->msg_bytes = cfg->msg_mib * 1048576.0;
  cl->nic_Bps = cfg->nic_gbps * 1e9 / 8;
  int R = cl->rails;
  cl->nic = malloc((size_t)nodes * (size_t)R * sizeof *cl->nic);
  cl->nvl = malloc((size_t)nodes * sizeof *cl->nvl);
  cl->striped = malloc((size_t)nodes * sizeof *cl->striped);
  cl->node_faulty = calloc((size_t)nodes, 1);
  cl->rail_faulty = calloc((size_t)R, 1);
  if (!cl->nic || !cl->nvl || !cl->striped || !cl->node_faulty || !cl->rail_faulty) {
    cluster_free(cl);
    return -1;
  }
  for (size_t i = 0; i < (size_t)nodes * (size_t)R; i++) cl->nic[i] = cl->nic_Bps;
  for (int n = 0; n < nodes; n++) cl->nvl[n] = cfg->nvlink_GBps * 1e9;
  for (int s = 0; s < cl->servers; s++) cl->server[s] = cfg->server_gbps * 1e9 / 8;

  switch (sc) {
  case SC_HEALTHY: break;
  case SC_SLOW_NICS: { /* spread over the nodes and the rails */
    int k = cfg->slow_nics < nodes ? cfg->slow_nics : nodes;
    for (int i = 0; i < k; i++) {
      int n = (int)((long long)i * nodes / k), r = i % R;
      cl->nic[(size_t)n * (size_t)R + (size_t)r] *= cfg->slow_nic_frac;
    }
    break;
  }
  case SC_RAIL_DOWN:
    for (int n = 0; n < nodes; n++) cl->nic[(size_t)n * (size_t)R + (size_t)cfg->down_rail] = 0;
    cl->any_rail_down = true;
    break;
  case SC_SLOW_NODE:
    for (int r = 0; r < R; r++) cl->nic[r] *= cfg->slow_node_frac;
    cl->nvl[0] *= cfg->slow_node_frac;
    break;
  case SC_SLOW_SERVER: cl->server[0] *= cfg->slow_server_frac; break;
  case SC_COUNT: break;
  }
  for (int n = 0; n < nodes; n++) {
    const double *v = &cl->nic[(size_t)n * (size_t)R];
    for (int r = 0; r < R; r++)
      if (v[r] != cl->nic_Bps) cl->node_faulty[n] = cl->rail_faulty[r] = true;
    if (cl->nvl[n] != cfg->nvlink_GBps * 1e9) cl->node_faulty[n] = true;
    /* The striped rate depends only on the rail rates: healthy nodes share one rail simulation. */
    cl->striped[n] = stripe_Bps(cache, cfg, v, R);
    if (cl->striped[n] < 0) {
      cluster_free(cl);
      return -1;
    }
  }
  return 0;
}

void cluster_free(struct cluster *cl) {
  free(cl->nic);
  free(cl->nvl);
  free(cl->striped);
  free(cl->node_faulty);
  free(cl->rail_faulty);
  cl->nic = cl->nvl = cl->striped = NULL;
  cl->node_faulty = cl->rail_faulty = NULL;
}

int cluster_switches(const struct cluster *cl, int a, int b) {
  const struct sim_cfg *c = cl->cfg;
  if (c->tiers == 1 || a / c->nodes_per_leaf == b / c->nodes_per_leaf) return 1;
  if (c->tiers == 2) return 3;
  int pa = a / c->nodes_per_leaf / c->leaves_per_pod, pb = b / c->nodes_per_leaf / c->leaves_per_pod;
  return pa == pb ? 3 : 5;
}

double cluster_net_lat(const struct cluster *cl, int a, int b) {
  return (cl->cfg->net_lat_us + cl->cfg->switch_lat_us * cluster_switches(cl, a, b)) * 1e-6;
}

double cluster_uplink(const struct cluster *cl) {
  return cl->cfg->nodes_per_leaf * cl->nic_Bps / cl->cfg->oversub;
}

bool cluster_same_leaf(const struct cluster *cl, int a, int b) {
  return cl->cfg->tiers == 1 || a / cl->cfg->nodes_per_leaf == b / cl->cfg->nodes_per_leaf;
}
