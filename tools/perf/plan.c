/* braid-perf: peers and channel split shared by the operations. */
#include "plan.h"

static void plan_add(int *list, int *n, int peer) {
  if (peer < 0) return;
  for (int i = 0; i < *n; i++)
    if (list[i] == peer) return;
  list[(*n)++] = peer;
}

void plan_peers(const struct perf_opts *o, int rank, int nranks, int chan, struct plan_peers *p) {
  p->nsend = p->nrecv = 0;
  if (o->op == PERF_SENDRECV && o->oneway) {
    if (rank == 0) plan_add(p->send, &p->nsend, 1 % nranks);
    if (rank == 1 % nranks) plan_add(p->recv, &p->nrecv, 0);
    return;
  }
  if (o->op != PERF_SENDRECV && nranks == 1) return; /* a 1-rank collective is a local copy */
  /* A run that chooses among algorithms connects both, as NCCL does: ring and tree share the
   * connection to a peer that is in both on a channel (NCCL's connIndex 0). */
  int multi = o->op == PERF_ALLREDUCE && perf_opts_multi_algo(o);
  int tree = multi || (o->op == PERF_ALLREDUCE && o->algo == PERF_ALGO_TREE);
  if (tree) {
    int up, down[2];
    tree_links(nranks, rank, chan % 2, &up, down);
    plan_add(p->send, &p->nsend, up);
    plan_add(p->recv, &p->nrecv, up);
    for (int k = 0; k < 2; k++) {
      plan_add(p->send, &p->nsend, down[k]);
      plan_add(p->recv, &p->nrecv, down[k]);
    }
    if (!multi) return;
  }
  plan_add(p->send, &p->nsend, (rank + 1) % nranks); /* ring; send/recv with 1 rank: itself */
  plan_add(p->recv, &p->nrecv, (rank + nranks - 1) % nranks);
}

void plan_split(size_t count, int nch, int c, size_t align, size_t *start, size_t *len) {
  size_t per = (count + (size_t)nch - 1) / (size_t)nch;
  per = (per + align - 1) / align * align;
  size_t s = per * (size_t)c;
  *start = s < count ? s : count;
  *len = s < count ? (count - s < per ? count - s : per) : 0;
}

struct eng_conn *plan_conn(struct engine *e, int chan, int peer, int is_send) {
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    if (c->chan == chan && c->peer == peer && c->is_send == is_send) return c;
  }
  return NULL;
}
