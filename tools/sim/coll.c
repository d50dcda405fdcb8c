/* Allreduce dispatch and bandwidth figures (see coll.h). */
#include <math.h>
#include <stdio.h>

#include "coll.h"

const char *algo_name(enum algo a, bool braid) {
  static const char *const plain[ALGO_COUNT] = {"ring", "tree", "ps"};
  static const char *const over[ALGO_COUNT] = {"braid-ring", "braid-tree", "braid-ps"};
  return braid ? over[a] : plain[a];
}

int coll_run(const struct cluster *cl, enum algo a, bool braid, struct coll_result *res) {
  int rc;
  res->note[0] = 0;
  bool cut_off = false; /* braid: some node with no rail up at all */
  for (int n = 0; n < cl->nodes; n++) cut_off |= cl->striped[n] <= 0;
  if (braid && cut_off && (cl->nodes > 1 || a == ALGO_PS)) {
    *res = (struct coll_result){.time_s = INFINITY};
    snprintf(res->note, sizeof res->note, "cannot run: a node has no rail up");
    return 0;
  }
  switch (a) {
  case ALGO_RING: rc = coll_ring(cl, braid, res); break;
  case ALGO_TREE: rc = coll_tree(cl, braid, res); break;
  case ALGO_PS: rc = coll_ps(cl, braid, res); break;
  default: return -1;
  }
  if (rc != 0) return rc;
  double n = (double)cl->nodes * cl->gpus;
  res->algbw_Bps = isfinite(res->time_s) && res->time_s > 0 ? cl->msg_bytes / res->time_s : 0;
  res->busbw_Bps = n > 1 ? res->algbw_Bps * 2 * (n - 1) / n : res->algbw_Bps;
  return 0;
}
