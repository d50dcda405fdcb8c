/* NCCL's ring allreduce, chunk-faithful on one ring per distinct set of hop rates (see coll.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "coll.h"

double ring_recurrence(int n, const double *rate, const double *lat, double bytes, double chunk,
                       double *steps) {
  *steps = 0;
  if (n < 2) return 0;
  double *free_at = calloc((size_t)n, sizeof *free_at); /* hop i's link is free */
  double *arr = calloc((size_t)n, sizeof *arr);         /* last step's data reached rank i+1 */
  double *tx = malloc((size_t)n * sizeof *tx);
  if (!free_at || !arr || !tx) {
    free(free_at), free(arr), free(tx);
    return -1;
  }
  /* NCCL's loop: nranks x chunk bytes per loop, the last loop's chunk cut to fit. */
  double left = bytes, done = 0;
  while (left > 0) {
    double s = left >= n * chunk ? chunk : ceil(left / n);
    left -= n * s;
    for (int i = 0; i < n; i++) tx[i] = rate[i] > 0 ? s / rate[i] : INFINITY;
    /* Step 0 sends the rank's own chunk; steps 1 .. 2n-3 each forward what arrived in the step
     * before (reduce-scatter, then all-gather). */
    for (int i = 0; i < n; i++) {
      free_at[i] += tx[i];
      arr[i] = free_at[i] + lat[i];
    }
    for (int k = 1; k < 2 * (n - 1); k++) {
      double wrap = arr[n - 1]; /* rank 0 receives from rank n-1 */
      for (int i = n - 1; i >= 1; i--) {
        double start = free_at[i] > arr[i - 1] ? free_at[i] : arr[i - 1];
        free_at[i] = start + tx[i];
        arr[i] = free_at[i] + lat[i];
      }
      double start = free_at[0] > wrap ? free_at[0] : wrap;
      free_at[0] = start + tx[0];
      arr[0] = free_at[0] + lat[0];
    }
    *steps += 2.0 * (n - 1) * n;
  }
  for (int i = 0; i < n; i++)
    if (arr[i] > done) done = arr[i];
  free(free_at), free(arr), free(tx);
  return done;
}

/* Hop rates and latencies of the ring of channels on rail r (braid: of every channel). */
static void hops(const struct cluster *cl, bool braid, int r, double *rate, double *lat) {
  const struct sim_cfg *c = cl->cfg;
  int G = cl->gpus, R = cl->rails, C = c->channels_per_rail * R, N = cl->nodes * G;
  for (int i = 0; i < N; i++) {
    int node = i / G, g = i % G;
    if (g < G - 1 || cl->nodes == 1) { /* NVLink: every channel passes through every GPU */
      rate[i] = cl->nvl[node] / C;
      lat[i] = c->nvlink_lat_us * 1e-6;
      continue;
    }
    int next = (node + 1) % cl->nodes;
    double a, b, up = cluster_same_leaf(cl, node, next) ? INFINITY : cluster_uplink(cl);
    if (braid) { /* all channels share the node's striped rate */
      a = cl->striped[node] / C, b = cl->striped[next] / C;
      up = up * R / C;
    } else {
      a = cl->nic[(size_t)node * (size_t)R + (size_t)r] / c->channels_per_rail;
      b = cl->nic[(size_t)next * (size_t)R + (size_t)r] / c->channels_per_rail;
      up /= c->channels_per_rail;
    }
    rate[i] = fmin(fmin(a, b), up);
    lat[i] = cluster_net_lat(cl, node, next);
  }
}

int coll_ring(const struct cluster *cl, bool braid, struct coll_result *res) {
  const struct sim_cfg *c = cl->cfg;
  int R = cl->rails, C = c->channels_per_rail * R, N = cl->nodes * cl->gpus;
  double *rate = malloc((size_t)N * sizeof *rate), *lat = malloc((size_t)N * sizeof *lat);
  if (!rate || !lat) {
    free(rate), free(lat);
    return -1;
  }
  res->of = C;
  res->simulated = 0;
  res->steps = 0;
  double worst = 0;
  int healthy_done = 0;
  if (!braid && cl->any_rail_down && cl->nodes > 1) {
    snprintf(res->note, sizeof res->note, "cannot run: the rings on the down rail fail (NCCL aborts)");
    worst = INFINITY;
  } else {
    /* One ring per rail with a fault, one for all the healthy rails (braid: all are alike). */
    for (int r = 0; r < (braid ? 1 : R); r++) {
      if (!braid && !cl->rail_faulty[r] && healthy_done++) continue;
      hops(cl, braid, r, rate, lat);
      double steps, t = ring_recurrence(N, rate, lat, cl->msg_bytes / C, c->ring_chunk_kib * 1024, &steps);
      if (t < 0) {
        free(rate), free(lat);
        return -1;
      }
      res->simulated++;
      res->steps += steps;
      if (t > worst) worst = t;
    }
    snprintf(res->note, sizeof res->note, "%d of %d channel rings simulated chunk by chunk (%s)",
             res->simulated, C, braid ? "all alike over braid" : "one healthy + each faulty rail's");
  }
  res->time_s = worst;
  free(rate), free(lat);
  return 0;
}
