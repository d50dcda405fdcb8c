/* NCCL's tree allreduce: double binary tree over nodes, chain within a node (see coll.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"
#include "flow.h"

/* Binary tree over positions 0..n-1 (NCCL's btree): position p with lowest set bit b hangs under
 * (p ^ b) | (b << 1), or p ^ b when that is past the end; 0 is the root. */
static int tree_parent(int p, int n) {
  if (p == 0) return -1;
  int b = p & -p;
  int up = (p ^ b) | (b << 1);
  return up < n ? up : p ^ b;
}

/* Tree t's node at position p: tree 1 is tree 0 shifted by one node, so that the inner nodes of
 * one are leaves of the other. */
static int tree_node(int t, int p, int n) { return t == 0 ? p : (p + 1) % n; }

struct links {
  int R, nodes, G, leaves, braid;
  int nic_tx, nic_rx, up, down, nvl, total;
};

static void layout(struct links *L, const struct cluster *cl, bool braid) {
  L->R = cl->rails, L->nodes = cl->nodes, L->G = cl->gpus, L->braid = braid;
  L->leaves = (cl->nodes + cl->cfg->nodes_per_leaf - 1) / cl->cfg->nodes_per_leaf;
  int per = braid ? 1 : L->R; /* braid: one striped link per node and direction */
  L->nic_tx = 0;
  L->nic_rx = L->nodes * per;
  L->up = 2 * L->nodes * per;
  L->down = L->up + L->leaves * per;
  L->nvl = L->down + L->leaves * per;
  L->total = L->nvl + L->nodes * L->G;
}

static int nic(const struct links *L, int base, int node, int r) { return base + node * (L->braid ? 1 : L->R) + (L->braid ? 0 : r); }
static int leafl(const struct links *L, int base, int leaf, int r) { return base + leaf * (L->braid ? 1 : L->R) + (L->braid ? 0 : r); }

int coll_tree(const struct cluster *cl, bool braid, struct coll_result *res) {
  const struct sim_cfg *c = cl->cfg;
  int R = cl->rails, G = cl->gpus, Nn = cl->nodes, C = c->channels_per_rail * R;
  res->of = C;
  res->simulated = 0;
  res->steps = 0;
  if (!braid && cl->any_rail_down && Nn > 1) {
    res->time_s = INFINITY;
    snprintf(res->note, sizeof res->note, "cannot run: the trees on the down rail fail (NCCL aborts)");
    return 0;
  }
  struct links L;
  layout(&L, cl, braid);
  double *cap = malloc((size_t)L.total * sizeof *cap);
  size_t maxf = (size_t)C * (2 * (size_t)Nn + 2 * (size_t)Nn * (size_t)G);
  struct flow *f = malloc(maxf * sizeof *f);
  int *owner = malloc(maxf * sizeof *owner);
  if (!cap || !f || !owner) {
    free(cap), free(f), free(owner);
    return -1;
  }
  for (int n = 0; n < Nn; n++)
    for (int r = 0; r < (braid ? 1 : R); r++)
      cap[nic(&L, L.nic_tx, n, r)] = cap[nic(&L, L.nic_rx, n, r)] = braid ? cl->striped[n] : cl->nic[(size_t)n * (size_t)R + (size_t)r];
  for (int l = 0; l < L.leaves; l++)
    for (int r = 0; r < (braid ? 1 : R); r++)
      cap[leafl(&L, L.up, l, r)] = cap[leafl(&L, L.down, l, r)] = cluster_uplink(cl) * (braid ? R : 1);
  for (int n = 0; n < Nn; n++)
    for (int g = 0; g < G; g++) cap[L.nvl + n * G + g] = cl->nvl[n];

  size_t nf = 0;
  for (int ch = 0; ch < C; ch++) {
    int t = (ch / R) % 2, r = ch % R;
    for (int p = 1; p < Nn; p++) { /* up (reduce) and down (broadcast) on each edge */
      int a = tree_node(t, p, Nn), b = tree_node(t, tree_parent(p, Nn), Nn);
      int la = a / c->nodes_per_leaf, lb = b / c->nodes_per_leaf;
      bool cross = !cluster_same_leaf(cl, a, b);
      for (int dir = 0; dir < 2; dir++) {
        int s = dir ? b : a, d = dir ? a : b, ls = dir ? lb : la, ld = dir ? la : lb;
        struct flow *x = &f[nf];
        x->mult = 1;
        x->npath = 0;
        x->path[x->npath++] = nic(&L, L.nic_tx, s, r);
        x->path[x->npath++] = nic(&L, L.nic_rx, d, r);
        if (cross) {
          x->path[x->npath++] = leafl(&L, L.up, ls, r);
          x->path[x->npath++] = leafl(&L, L.down, ld, r);
        }
        owner[nf++] = ch;
      }
    }
    for (int n = 0; n < Nn; n++) /* the chain through the node's GPUs, both ways */
      for (int g = 0; g + 1 < G; g++)
        for (int dir = 0; dir < 2; dir++) {
          struct flow *x = &f[nf];
          x->mult = 1;
          x->npath = 1;
          x->path[0] = L.nvl + n * G + (dir ? g + 1 : g);
          owner[nf++] = ch;
        }
  }
  if (flow_maxmin(L.total, cap, f, nf) != 0) {
    free(cap), free(f), free(owner);
    return -1;
  }
  double *crate = malloc((size_t)C * sizeof *crate);
  if (!crate) {
    free(cap), free(f), free(owner);
    return -1;
  }
  for (int ch = 0; ch < C; ch++) crate[ch] = INFINITY;
  for (size_t i = 0; i < nf; i++)
    if (f[i].rate < crate[owner[i]]) crate[owner[i]] = f[i].rate;

  /* Per channel: the pipeline of chunks, and one chunk's critical path up and down. */
  double D = cl->msg_bytes / C, worst = 0;
  double nchunks = ceil(D / (c->tree_chunk_kib * 1024));
  double sc = D / nchunks;
  for (int ch = 0; ch < C; ch++) {
    int t = (ch / R) % 2;
    if (!(crate[ch] > 0)) {
      worst = INFINITY;
      continue;
    }
    double step = sc / crate[ch];
    double chain = (G - 1) * (c->nvlink_lat_us * 1e-6 + step);
    double path_max = 0;
    for (int p = 0; p < Nn; p++) { /* from position p to the root, then back */
      double path = chain;
      for (int q = p; q != 0; q = tree_parent(q, Nn)) {
        int a = tree_node(t, q, Nn), b = tree_node(t, tree_parent(q, Nn), Nn);
        path += cluster_net_lat(cl, a, b) + step + chain;
      }
      if (path > path_max) path_max = path;
    }
    double tc = 2 * path_max + (nchunks - 1) * step;
    if (tc > worst) worst = tc;
  }
  res->simulated = C;
  res->steps = (double)nf;
  res->time_s = worst;
  snprintf(res->note, sizeof res->note, "every channel: %zu flows at max-min fair rates", nf);
  free(cap), free(f), free(owner), free(crate);
  return 0;
}
