/* braid-perf: send/recv as NCCL's p2p over the network (nccl-tests' sendrecv).
 *
 * Every rank sends to the next and receives from the previous (with --oneway only rank 0 sends
 * to rank 1). The buffer is split over channels in contiguous parts, NCCL-style, each part sent
 * in pieces of NCCL_P2P_NET_CHUNKSIZE (SIMPLE) or one LL slot; channels get at least one piece
 * each, so small messages use fewer channels. A 0-byte send is one 0-byte message.
 * Simple pieces go straight from / into the registered user buffers (NCCL's p2p path for
 * registered buffers); --staged copies through the 8-slot staging buffers instead. With --mem
 * other than host the user buffers are plan_args' in_mem/out_mem, registered as mem.h says. */
#include <string.h>

#include "plan.h"

struct p2p_ctx {
  const struct plan_args *a;
  size_t start[PERF_MAX_CHANNELS], len[PERF_MAX_CHANNELS];
};

static size_t p2p_piece(const struct p2p_ctx *x, int chan, uint64_t i, size_t *off) {
  size_t step = x->a->proto.step_data, len = x->len[chan];
  *off = x->start[chan] + (size_t)i * step;
  size_t done = (size_t)i * step;
  return done >= len ? 0 : (len - done < step ? len - done : step);
}

static int p2p_fill(void *ctx, struct eng_conn *c, uint64_t i, void *dst, size_t *len) {
  struct p2p_ctx *x = ctx;
  size_t off;
  *len = p2p_piece(x, c->chan, i, &off);
  memcpy(dst, x->a->in + off, *len);
  return 0;
}

static size_t p2p_expect(void *ctx, struct eng_conn *c, uint64_t i) {
  size_t off;
  return p2p_piece(ctx, c->chan, i, &off);
}

static void p2p_consume(void *ctx, struct eng_conn *c, uint64_t i, const void *src, size_t len) {
  struct p2p_ctx *x = ctx;
  size_t off;
  p2p_piece(x, c->chan, i, &off);
  memcpy(x->a->out + off, src, len);
}

static char *p2p_direct(void *ctx, struct eng_conn *c, uint64_t i, size_t *len) {
  struct p2p_ctx *x = ctx;
  size_t off;
  *len = p2p_piece(x, c->chan, i, &off);
  const struct perf_buf *m = c->is_send ? x->a->in_mem : x->a->out_mem;
  if (m) return m->ptr + off;
  return c->is_send ? (char *)x->a->in + off : x->a->out + off;
}

/* Registers (reg != 0) or deregisters the user buffers on every connection the op uses. */
static int p2p_register(struct engine *e, const struct plan_args *a, int reg) {
  int rc = 0;
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    if (reg && c->total) {
      const struct perf_buf *m = c->is_send ? a->in_mem : a->out_mem;
      struct perf_buf host = {.kind = PERF_MEM_HOST, .fd = -1};
      if (!m) {
        host.ptr = host.base = c->is_send ? (char *)a->in : a->out;
        m = &host;
      }
      const char *call;
      ncclResult_t r = perf_buf_reg(e->nl, c->comm, m, m->ptr, a->count ? a->count : 1,
                                    &c->user_mh, &call);
      if (r != ncclSuccess) return eng_fail(e, call, r, c);
    } else if (!reg && c->user_mh) {
      ncclResult_t r = netload_dereg_mr(e->nl, c->comm, c->user_mh);
      if (r != ncclSuccess) rc = eng_fail(e, "deregMr", r, c);
      c->user_mh = NULL;
    }
  }
  return rc;
}

/* Sets the message counts of this rank's connections on every channel. */
static void p2p_plan(struct engine *e, struct p2p_ctx *x) {
  const struct plan_args *a = x->a;
  size_t bytes = a->count, step = a->proto.step_data;
  size_t pieces = (bytes + step - 1) / step;
  int nused = pieces < (size_t)a->nch ? (int)(pieces ? pieces : 1) : a->nch;
  for (int ch = 0; ch < a->nch; ch++) {
    x->start[ch] = x->len[ch] = 0;
    if (ch < nused) plan_split(bytes, nused, ch, 64, &x->start[ch], &x->len[ch]);
    uint64_t msgs = (x->len[ch] + step - 1) / step;
    if (bytes == 0 && ch == 0) msgs = 1;
    struct plan_peers p;
    plan_peers(a->o, a->rank, a->nranks, ch, &p);
    for (int k = 0; k < p.nsend; k++) plan_conn(e, ch, p.send[k], 1)->total = msgs;
    for (int k = 0; k < p.nrecv; k++) plan_conn(e, ch, p.recv[k], 0)->total = msgs;
  }
}

int p2p_direct_used(const struct plan_args *a) {
  return a->proto.proto == PERF_PROTO_SIMPLE && !a->o->staged;
}

int p2p_run(struct engine *e, const struct plan_args *a) {
  struct p2p_ctx x = {.a = a};
  p2p_plan(e, &x);
  struct eng_op op = {a->proto.proto, a->proto.slot_wire, a->proto.step_data, &x,
                      p2p_fill, p2p_expect, p2p_consume, NULL};
  if (!p2p_direct_used(a)) return eng_run(e, &op);
  op.direct = p2p_direct;
  if (p2p_register(e, a, 1)) return p2p_register(e, a, 0), -1;
  int rc = eng_run(e, &op);
  return p2p_register(e, a, 0) ? -1 : rc;
}
