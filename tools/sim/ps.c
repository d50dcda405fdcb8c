/* CollNet-PS allreduce through braid-ps servers, with braid-ps's own assignment (see coll.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "coll.h"
#include "flow.h"

/* Whether two nodes look the same to the PS (same NIC, NVLink and striped rates). */
static bool same_node(const struct cluster *cl, int a, int b) {
  int R = cl->rails;
  return cl->nvl[a] == cl->nvl[b] && cl->striped[a] == cl->striped[b] &&
         memcmp(&cl->nic[(size_t)a * (size_t)R], &cl->nic[(size_t)b * (size_t)R], (size_t)R * sizeof *cl->nic) == 0;
}

int coll_ps(const struct cluster *cl, bool braid, struct coll_result *res) {
  const struct sim_cfg *c = cl->cfg;
  int R = cl->rails, G = cl->gpus, Nn = cl->nodes, S = cl->servers;
  res->steps = 0;
  if (!braid && cl->any_rail_down) {
    res->time_s = INFINITY;
    res->simulated = res->of = 0;
    snprintf(res->note, sizeof res->note, "cannot run: the heads on the down rail fail (NCCL aborts)");
    return 0;
  }
  /* Node classes: nodes with the same rates are one class (a flow of multiplicity m). */
  int *cls_node = malloc((size_t)Nn * sizeof *cls_node);
  double *cls_mult = malloc((size_t)Nn * sizeof *cls_mult);
  if (!cls_node || !cls_mult) {
    free(cls_node), free(cls_mult);
    return -1;
  }
  int ncls = 0, healthy = -1;
  for (int n = 0; n < Nn; n++) {
    int k = 0;
    while (k < ncls && !same_node(cl, cls_node[k], n)) k++;
    if (k == ncls) {
      cls_node[ncls] = n;
      cls_mult[ncls++] = 0;
    }
    if (!cl->node_faulty[n] && healthy < 0) healthy = k;
    cls_mult[k]++;
  }
  int per = braid ? 1 : R; /* links per class and direction: one per rail, or braid's striped one */
  int nlinks = 2 * ncls * per + 2 * S;
  double *cap = malloc((size_t)nlinks * sizeof *cap);
  size_t nf = (size_t)ncls * (size_t)per * (size_t)S * 2;
  struct flow *f = calloc(nf, sizeof *f);
  if (!cap || !f) {
    free(cls_node), free(cls_mult), free(cap), free(f);
    return -1;
  }
  for (int k = 0; k < ncls; k++) {
    int n = cls_node[k];
    for (int r = 0; r < per; r++) {
      double v = braid ? cl->striped[n] : cl->nic[(size_t)n * (size_t)R + (size_t)r];
      /* past an oversubscribed leaf, a node's fair part of the uplink */
      v = fmin(v, cluster_uplink(cl) / c->nodes_per_leaf * (braid ? R : 1));
      cap[2 * (k * per + r)] = cap[2 * (k * per + r) + 1] = v * cls_mult[k];
    }
  }
  int srv0 = 2 * ncls * per;
  for (int s = 0; s < S; s++) cap[srv0 + 2 * s] = cap[srv0 + 2 * s + 1] = cl->server[s];

  /* Each rail's head holds 1/R of the node's sum after the NVLink reduce-scatter; it is laid out
   * over the servers by the client's own ps_layout (fp32 elements). */
  size_t head = (size_t)(cl->msg_bytes / R), max_part = (size_t)(c->part_kib * 1024), pb = 0;
  uint32_t npieces = 0, pcap = 0;
  struct ps_piece *pc = NULL;
  uint8_t w[PS_MAX_SERVERS];
  memset(w, 0, sizeof w);
  memset(w, 1, (size_t)S); /* before the first measurement: equal */
  struct ps_rate rate[PS_MAX_SERVERS];
  memset(rate, 0, sizeof rate);
  double t_net = 0, t_base = 0, bytes_to[PS_MAX_SERVERS]; /* t_base: when this op starts */
  int pieces_to[PS_MAX_SERVERS];
  for (int op = 0; op < c->ps_ops; op++) {
    int64_t laid = ps_layout_buf(w, S, (uint64_t)op, head, 4, max_part, &pc, &pcap);
    if (laid < 0) {
      free(cls_node), free(cls_mult), free(cap), free(f), free(pc);
      return -1;
    }
    npieces = (uint32_t)laid;
    memset(bytes_to, 0, sizeof bytes_to);
    memset(pieces_to, 0, sizeof pieces_to);
    pb = 0;
    for (uint32_t p = 0; p < npieces; p++) {
      bytes_to[pc[p].server] += (double)pc[p].len;
      pieces_to[pc[p].server]++;
      if (pc[p].len > pb) pb = pc[p].len;
    }
    size_t i = 0;
    for (int k = 0; k < ncls; k++)
      for (int r = 0; r < per; r++)
        for (int s = 0; s < S; s++)
          for (int dir = 0; dir < 2; dir++) { /* push, then pull (pipelined: concurrent) */
            struct flow *x = &f[i++];
            x->mult = cls_mult[k];
            x->bytes = bytes_to[s] * (braid ? R : 1);
            x->npath = 2;
            x->path[0] = dir ? srv0 + 2 * s + 1 : 2 * (k * per + r);
            x->path[1] = dir ? 2 * (k * per + r) + 1 : srv0 + 2 * s;
          }
    t_net = flow_run(nlinks, cap, f, nf);
    if (t_net < 0) {
      free(cls_node), free(cls_mult), free(cap), free(f), free(pc);
      return -1;
    }
    /* Rank 0 (node 0's head on rail 0) measures each server as the client does: the server's
     * partitions all outstanding from the op's start, completing evenly until its pull is done;
     * every op counts towards the windows, whose rates set the next op's weights (the client's
     * delay of PS_WINDOW ops is one op here). */
    int k0 = 0;
    for (int k = 0; k < ncls; k++)
      if (cls_node[k] == 0 || (healthy == k && !cl->node_faulty[0])) k0 = k;
    for (int s = 0; s < S; s++) {
      const struct flow *pull = &f[((size_t)k0 * (size_t)per * (size_t)S + (size_t)s) * 2 + 1];
      uint64_t t0 = (uint64_t)(t_base * 1e9);
      for (int j = 0; j < pieces_to[s]; j++) ps_rate_start(&rate[s], t0);
      for (int j = 0; j < pieces_to[s]; j++)
        ps_rate_done(&rate[s], t0 + (uint64_t)(pull->done_s * 1e9 * (j + 1) / pieces_to[s]),
                     (size_t)(bytes_to[s] / pieces_to[s]));
    }
    t_base += t_net;
    for (int s = 0; s < S; s++) ps_rate_window(&rate[s], (uint64_t)(t_base * 1e9));
    ps_weights(rate, S, 0, w);
    res->steps += (double)nf;
  }
  free(pc);
  /* Pipelined with the network: the NVLink reduce-scatter and all-gather, and the fill: one
   * partition's trip to a server and back, and the intra-node steps. */
  double worst_nvl = INFINITY;
  for (int n = 0; n < Nn; n++) worst_nvl = fmin(worst_nvl, cl->nvl[n]);
  double t_nvl = G > 1 ? 2.0 * (G - 1) / G * cl->msg_bytes / worst_nvl : 0;
  double lat = c->net_lat_us + c->switch_lat_us * (c->tiers == 1 ? 1 : 2 * c->tiers - 1);
  double fill = 2 * lat * 1e-6 + 2 * (double)pb / cl->nic_Bps + 2 * (G - 1) * c->nvlink_lat_us * 1e-6;
  res->time_s = fmax(t_net, t_nvl) + fill;
  res->simulated = ncls;
  res->of = Nn;
  double need = Nn * R * cl->nic_Bps / (c->server_gbps * 1e9 / 8);
  snprintf(res->note, sizeof res->note, "%d node classes for %d nodes; %d servers (M/B needs ~%.0f)%s", ncls, Nn, S,
           ceil(need), t_net > t_nvl ? "" : "; NVLink-bound");
  free(cls_node), free(cls_mult), free(cap), free(f);
  return 0;
}
