/* braid-perf: tree allreduce over NCCL's double binary tree.
 *
 * Trees as NCCL's graph/trees.cc builds them: tree 0 is a binary tree over the ranks with rank 0
 * at the root; tree 1 is its mirror (even rank counts) or its shift by one (odd). Channel c uses
 * tree c % 2, so the default 2 channels use both trees, each carrying half the data (one channel
 * gives a single binary tree). On a channel the data moves in step-sized slices, pipelined:
 * slice s goes up (children's contributions reduced into this rank's, sent to the parent) and, once
 * the root has it, down again (received from the parent, written out, forwarded to children). */
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "plan.h"

/* NCCL's ncclGetBtree: rank 0 is the root with one child; bit tricks find parent/children. */
static void tree_btree(int n, int rank, int *up, int *d0, int *d1) {
  int bit;
  for (bit = 1; bit < n; bit <<= 1)
    if (bit & rank) break;
  if (rank == 0) {
    *up = -1;
    *d0 = -1;
    *d1 = n > 1 ? bit >> 1 : -1;
    return;
  }
  *up = (rank ^ bit) | (bit << 1);
  if (*up >= n) *up = rank ^ bit;
  int lowbit = bit >> 1;
  *d0 = lowbit == 0 ? -1 : rank - lowbit;
  int down1 = lowbit == 0 ? -1 : rank + lowbit;
  while (down1 >= n) {
    down1 = lowbit == 0 ? -1 : rank + lowbit;
    lowbit >>= 1;
  }
  *d1 = down1;
}

void tree_links(int n, int rank, int tree, int *up, int down[2]) {
  if (tree == 0) {
    tree_btree(n, rank, up, &down[0], &down[1]);
    return;
  }
  int u, d0, d1;
  if (n % 2 == 1) { /* shift by one */
    tree_btree(n, (rank - 1 + n) % n, &u, &d0, &d1);
    *up = u == -1 ? -1 : (u + 1) % n;
    down[0] = d0 == -1 ? -1 : (d0 + 1) % n;
    down[1] = d1 == -1 ? -1 : (d1 + 1) % n;
  } else { /* mirror */
    tree_btree(n, n - 1 - rank, &u, &d0, &d1);
    *up = u == -1 ? -1 : n - 1 - u;
    down[0] = d0 == -1 ? -1 : n - 1 - d0;
    down[1] = d1 == -1 ? -1 : n - 1 - d1;
  }
}

struct tree_chan {
  size_t start, len;              /* elements */
  uint64_t S;                     /* slices */
  int nchild;
  struct eng_conn *from_parent;   /* NULL at the root */
  unsigned char *arrived;         /* per slice: children contributions reduced so far */
};

struct tree_ctx {
  const struct plan_args *a;
  size_t slice;
  struct tree_chan ch[PERF_MAX_CHANNELS];
};

static size_t tree_slice(const struct tree_ctx *x, int ch, uint64_t s, size_t *start) {
  const struct tree_chan *t = &x->ch[ch];
  size_t of = (size_t)s * x->slice;
  *start = t->start + of;
  return of >= t->len ? 0 : (t->len - of < x->slice ? t->len - of : x->slice);
}

/* c->user: 1 for the link to the parent, 0 for a link to a child. */
static int tree_fill(void *ctx, struct eng_conn *c, uint64_t i, void *dst, size_t *len) {
  struct tree_ctx *x = ctx;
  const struct plan_args *a = x->a;
  struct tree_chan *t = &x->ch[c->chan];
  int reduced = t->arrived[i] == t->nchild;
  if (c->user ? !reduced : (t->from_parent ? t->from_parent->consumed <= i : !reduced)) return 1;
  size_t start, n = tree_slice(x, c->chan, i, &start);
  const char *src = (c->user && t->nchild == 0) ? a->in : a->out;
  *len = n * a->esize;
  memcpy(dst, src + start * a->esize, *len);
  return 0;
}

static size_t tree_expect(void *ctx, struct eng_conn *c, uint64_t i) {
  struct tree_ctx *x = ctx;
  size_t start;
  return tree_slice(x, c->chan, i, &start) * x->a->esize;
}

static void tree_consume(void *ctx, struct eng_conn *c, uint64_t i, const void *src, size_t len) {
  struct tree_ctx *x = ctx;
  const struct plan_args *a = x->a;
  struct tree_chan *t = &x->ch[c->chan];
  size_t start;
  tree_slice(x, c->chan, i, &start);
  char *out = a->out + start * a->esize;
  if (c->user) { /* broadcast from the parent: the final value */
    memcpy(out, src, len);
    return;
  }
  dt_reduce(a->dt, a->redop, out, t->arrived[i] ? out : a->in + start * a->esize, src,
            len / a->esize);
  t->arrived[i]++;
}

/* Sets up channel ch: its slice range, links and message counts. */
static void tree_plan(struct engine *e, struct tree_ctx *x, int ch) {
  const struct plan_args *a = x->a;
  struct tree_chan *t = &x->ch[ch];
  int up, down[2];
  plan_split(a->count, a->nch, ch, 16, &t->start, &t->len);
  t->S = (t->len + x->slice - 1) / x->slice;
  t->arrived = calloc(t->S ? t->S : 1, 1);
  tree_links(a->nranks, a->rank, ch % 2, &up, down);
  t->nchild = (down[0] >= 0) + (down[1] >= 0);
  t->from_parent = up >= 0 ? plan_conn(e, ch, up, 0) : NULL;
  int peers[3] = {up, down[0], down[1]};
  for (int k = 0; k < 3; k++) {
    if (peers[k] < 0) continue;
    for (int dir = 0; dir < 2; dir++) {
      struct eng_conn *c = plan_conn(e, ch, peers[k], dir);
      c->user = k == 0;
      c->total = t->S;
    }
  }
}

int tree_run(struct engine *e, const struct plan_args *a) {
  if (a->count == 0) return 0;
  if (a->nranks == 1) {
    memcpy(a->out, a->in, a->count * a->esize);
    return 0;
  }
  struct tree_ctx x = {.a = a, .slice = a->proto.step_data / a->esize};
  for (int ch = 0; ch < a->nch; ch++) tree_plan(e, &x, ch);
  struct eng_op op = {a->proto.proto, a->proto.slot_wire, a->proto.step_data, &x,
                      tree_fill, tree_expect, tree_consume, NULL};
  int rc = eng_run(e, &op);
  for (int ch = 0; ch < a->nch; ch++) free(x.ch[ch].arrived);
  return rc;
}
