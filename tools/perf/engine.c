/* braid-perf: the proxy-like progress engine. */
#include "engine.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "proto.h"
#include "rdv.h"

int eng_fail(struct engine *e, const char *call, ncclResult_t r, const struct eng_conn *c) {
  if (c)
    fprintf(stderr, "braid-perf: rank %d: plugin call %s (%s comm to rank %d, channel %d) "
            "failed: %s (%d)\n", e->rank, call, c->is_send ? "send" : "recv", c->peer, c->chan,
            netload_result_str(r), (int)r);
  else
    fprintf(stderr, "braid-perf: rank %d: plugin call %s failed: %s (%d)\n", e->rank, call,
            netload_result_str(r), (int)r);
  return -1;
}

/* The kind of protocol p's staging buffers: --mem's for SIMPLE, host for LL and LL128. */
static enum perf_mem eng_buf_kind(const struct engine *e, enum perf_proto p) {
  return p == PERF_PROTO_SIMPLE ? e->mem : PERF_MEM_HOST;
}

static int eng_buf_drop(struct engine *e, struct eng_conn *c, struct eng_buf *b) {
  int rc = 0;
  if (b->mh) {
    ncclResult_t r = netload_dereg_mr(e->nl, c->comm, b->mh);
    if (r != ncclSuccess) rc = eng_fail(e, "deregMr", r, c);
  }
  if (perf_buf_free(&b->mem)) rc = -1;
  memset(b, 0, sizeof *b);
  return rc;
}

/* Makes sure c has a registered buffer of ENG_STEPS slots of `slot` bytes for protocol p. */
static int eng_buf_ready(struct engine *e, struct eng_conn *c, enum perf_proto p, size_t slot) {
  struct eng_buf *b = &c->buf[p];
  if (b->mem.ptr && b->slot >= slot) return 0;
  if (eng_buf_drop(e, c, b)) return -1;
  enum perf_mem kind = eng_buf_kind(e, p);
  if (perf_buf_alloc(&b->mem, kind, slot * ENG_STEPS)) return -1;
  if (!perf_mem_is_gpu(kind)) memset(b->mem.ptr, 0, slot * ENG_STEPS); /* LL flags start clear */
  b->slot = slot;
  const char *call;
  ncclResult_t r = perf_buf_reg(e->nl, c->comm, &b->mem, b->mem.ptr, slot * ENG_STEPS, &b->mh, &call);
  return r == ncclSuccess ? 0 : eng_fail(e, call, r, c);
}

int eng_conn_release(struct engine *e, struct eng_conn *c) {
  int rc = 0;
  for (int p = 0; p < 3; p++)
    if (eng_buf_drop(e, c, &c->buf[p])) rc = -1;
  return rc;
}

static char *eng_slot(const struct eng_op *op, struct eng_conn *c, uint64_t i) {
  return c->buf[op->proto].mem.ptr + (i % ENG_STEPS) * c->buf[op->proto].slot;
}

/* GPU memory: what the GPU's copy (cuMemcpyHtoD/DtoH) does between the slot and host data. */
static int eng_slot_write(struct engine *e, const struct eng_op *op, struct eng_conn *c,
                          uint64_t i, const void *src, size_t len) {
  const struct eng_buf *b = &c->buf[op->proto];
  if (!perf_buf_write(&b->mem, (i % ENG_STEPS) * b->slot, src, len)) return 0;
  fprintf(stderr, "braid-perf: rank %d: filling send %llu to rank %d failed\n", e->rank,
          (unsigned long long)i, c->peer);
  return -1;
}

static int eng_slot_read(struct engine *e, const struct eng_op *op, struct eng_conn *c,
                         uint64_t i, void *dst, size_t len) {
  const struct eng_buf *b = &c->buf[op->proto];
  if (!perf_buf_read(&b->mem, (i % ENG_STEPS) * b->slot, dst, len)) return 0;
  fprintf(stderr, "braid-perf: rank %d: reading receive %llu from rank %d failed\n", e->rank,
          (unsigned long long)i, c->peer);
  return -1;
}

/* Posts ready sends into free slots, then tests the oldest. 1: progress, 0: none, -1: error. */
static int eng_send(struct engine *e, const struct eng_op *op, struct eng_conn *c) {
  int progress = 0;
  while (c->posted < c->total && c->posted - c->completed < ENG_STEPS) {
    uint64_t i = c->posted;
    char *slot = eng_slot(op, c, i);
    void *mh = c->buf[op->proto].mh;
    if (op->direct) {
      slot = op->direct(op->ctx, c, i, &c->fill_len);
      mh = c->user_mh;
      c->filled = 1;
    } else if (!c->filled) {
      int simple = op->proto == PERF_PROTO_SIMPLE, in_place = simple && !perf_mem_is_gpu(e->mem);
      if (op->fill(op->ctx, c, i, in_place ? slot : e->scratch, &c->fill_len)) break;
      if (!simple) proto_encode(op->proto, slot, e->scratch, c->fill_len, c->seq + i);
      else if (!in_place && eng_slot_write(e, op, c, i, e->scratch, c->fill_len)) return -1;
      c->filled = 1;
      progress = 1;
    }
    void *req = NULL;
    size_t wire = proto_wire_len(op->proto, c->fill_len);
    ncclResult_t r = netload_isend(e->nl, c->comm, slot, wire, e->rank, mh, NULL, &req);
    if (r != ncclSuccess) return eng_fail(e, "isend", r, c);
    if (!req) {
      e->null_sends++;
      break; /* no credit yet: NCCL retries the same send on its next pass */
    }
    c->req[i % ENG_STEPS] = req;
    c->posted++;
    c->filled = 0;
    progress = 1;
  }
  while (c->completed < c->posted) {
    int done = 0, size = 0;
    ncclResult_t r = netload_test(e->nl, c->req[c->completed % ENG_STEPS], &done, &size);
    if (r != ncclSuccess) return eng_fail(e, "test", r, c);
    if (!done) break;
    c->completed++;
    progress = 1;
  }
  return progress;
}

/* Posts receives into free slots.  NCCL 2.24+ presets *request to the optional-completion hint
 * for LL/LL128 when it posts a single receive and NCCL_NET_OPTIONAL_RECV_COMPLETION is not 0
 * (default 1); its shims for v7/v8 plugins clear it again (netload does too).  It still tests
 * every request it got, and stops calling once all are done (the LL flags tell it the rest). */
static int eng_recv_post(struct engine *e, const struct eng_op *op, struct eng_conn *c) {
  int progress = 0;
  while (c->posted < c->total && c->posted - c->consumed < ENG_STEPS) {
    uint64_t i = c->posted;
    void *data = eng_slot(op, c, i), *mh = c->buf[op->proto].mh;
    size_t size = op->slot_wire;
    if (op->direct) {
      data = op->direct(op->ctx, c, i, &size);
      mh = c->user_mh;
    }
    int tag = c->peer, n = 1; /* one receive per call: never grouped */
    int hint = e->optional_recv && op->proto != PERF_PROTO_SIMPLE && n == 1;
    void *req = hint ? (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION : NULL;
    ncclResult_t r = netload_irecv(e->nl, c->comm, n, &data, &size, &tag, &mh, NULL, &req);
    if (r != ncclSuccess) return eng_fail(e, "irecv", r, c);
    if (req == (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION) {
      fprintf(stderr, "braid-perf: rank %d: irecv (recv comm from rank %d, channel %d) handed "
              "back the optional-completion hint as its request\n", e->rank, c->peer, c->chan);
      return -1;
    }
    if (!req) {
      e->null_recvs++;
      break;
    }
    hint &= e->nl->version >= 9; /* what the plugin saw */
    e->hint_posts += hint;
    c->req[i % ENG_STEPS] = req;
    c->hinted[i % ENG_STEPS] = hint;
    c->posted++;
    progress = 1;
  }
  return progress;
}

static int eng_size_mismatch(struct engine *e, struct eng_conn *c, uint64_t i, int got,
                             size_t want) {
  fprintf(stderr, "braid-perf: rank %d: receive %llu from rank %d (channel %d): test() reported "
          "%d bytes, the sender sent %zu\n", e->rank, (unsigned long long)i, c->peer, c->chan,
          got, want);
  return -1;
}

/* NCCL's flush after a receive into GPU memory (transport/net.cc recvProxyProgress): Simple
 * protocol, received size > 0, the buffer in device memory; NCCL then tests the request, NULL
 * meaning nothing to wait for.  (NCCL calls it only when it needs one: GPUs before sm_90, or
 * forceFlush, or NCCL_NET_FORCE_FLUSH=1; braid-perf flushes every such receive.) */
static int eng_flush(struct engine *e, const struct eng_op *op, struct eng_conn *c, uint64_t i,
                     int size) {
  if (op->proto != PERF_PROTO_SIMPLE || size <= 0 || !perf_mem_is_gpu(e->mem)) return 0;
  void *data = eng_slot(op, c, i), *mh = c->buf[op->proto].mh, *req = NULL;
  if (op->direct) {
    size_t len;
    data = op->direct(op->ctx, c, i, &len);
    mh = c->user_mh;
  }
  ncclResult_t r = netload_iflush(e->nl, c->comm, 1, &data, &size, &mh, &req);
  if (r != ncclSuccess) return eng_fail(e, "iflush", r, c);
  e->flushes++;
  e->flush_reqs += req != NULL;
  c->flush[i % ENG_STEPS] = req;
  return 0;
}

/* Tests the oldest receives (and their flushes) and hands arrived data to the op, in order. */
static int eng_recv_done(struct engine *e, const struct eng_op *op, struct eng_conn *c) {
  int progress = 0;
  while (c->completed < c->posted) {
    uint64_t k = c->completed;
    int done = 0, size = 0; /* NCCL zeroes sizes before test */
    ncclResult_t r;
    if (!c->flush[k % ENG_STEPS]) {
      r = netload_test(e->nl, c->req[k % ENG_STEPS], &done, &size);
      if (r != ncclSuccess) return eng_fail(e, "test", r, c);
      if (!done) break;
      c->got[k % ENG_STEPS] = size;
      /* done, but not with the message's size: completed early, as the hint allows */
      e->early_recvs += c->hinted[k % ENG_STEPS] &&
                        (size_t)size != proto_wire_len(op->proto, op->expect(op->ctx, c, k));
      progress = 1;
      if (eng_flush(e, op, c, k, size)) return -1;
    }
    if (c->flush[k % ENG_STEPS]) {
      r = netload_test(e->nl, c->flush[k % ENG_STEPS], &done, NULL);
      if (r != ncclSuccess) return eng_fail(e, "test (iflush request)", r, c);
      if (!done) break;
      c->flush[k % ENG_STEPS] = NULL;
      progress = 1;
    }
    c->completed++;
  }
  while (c->consumed < c->completed) {
    uint64_t i = c->consumed;
    size_t want = op->expect(op->ctx, c, i), wire = proto_wire_len(op->proto, want);
    int got = c->got[i % ENG_STEPS];
    char *slot = eng_slot(op, c, i);
    if (!c->hinted[i % ENG_STEPS] && (size_t)got != wire) return eng_size_mismatch(e, c, i, got, wire);
    if (op->direct) {
      /* landed in place */
    } else if (op->proto == PERF_PROTO_SIMPLE && perf_mem_is_gpu(e->mem)) {
      if (eng_slot_read(e, op, c, i, e->scratch, want)) return -1;
      op->consume(op->ctx, c, i, e->scratch, want);
    } else if (op->proto == PERF_PROTO_SIMPLE) {
      op->consume(op->ctx, c, i, slot, want);
    } else {
      /* LL/LL128: the data counts once its flags are there, whatever test() said. */
      if (!proto_decode(op->proto, e->scratch, slot, want, c->seq + i)) {
        if (c->hinted[i % ENG_STEPS]) break; /* completed early, as allowed: keep polling */
        fprintf(stderr, "braid-perf: rank %d: receive %llu from rank %d (channel %d): test() said "
                "done but the %s data is incomplete\n", e->rank, (unsigned long long)i, c->peer,
                c->chan, perf_proto_name(op->proto));
        return -1;
      }
      op->consume(op->ctx, c, i, e->scratch, want);
    }
    c->consumed++;
    progress = 1;
  }
  return progress;
}

static void eng_dump(struct engine *e, const char *why) {
  fprintf(stderr, "braid-perf: rank %d: %s; connection states:\n", e->rank, why);
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    if (!c->total) continue;
    fprintf(stderr, "  %s rank %d ch %d: %llu msgs, posted %llu, completed %llu, consumed %llu%s\n",
            c->is_send ? "send to  " : "recv from", c->peer, c->chan,
            (unsigned long long)c->total, (unsigned long long)c->posted,
            (unsigned long long)c->completed,
            (unsigned long long)(c->is_send ? c->completed : c->consumed),
            c->filled ? " (isend gave NULL, retrying)" : "");
  }
}

/* Per-op set-up: staging buffers, scratch space, counters. */
static int eng_prepare(struct engine *e, const struct eng_op *op) {
  int host_side = op->proto != PERF_PROTO_SIMPLE || (perf_mem_is_gpu(e->mem) && !op->direct);
  if (host_side && e->scratch_bytes < op->step_data) {
    free(e->scratch);
    e->scratch = malloc(op->step_data);
    e->scratch_bytes = e->scratch ? op->step_data : 0;
    if (!e->scratch) return -1;
  }
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    c->posted = c->completed = c->consumed = 0;
    c->filled = 0;
    if (c->total && !op->direct && eng_buf_ready(e, c, op->proto, op->slot_wire)) return -1;
  }
  return 0;
}

/* One pass over every connection: receives first, then sends, then completions. */
static int eng_pass(struct engine *e, const struct eng_op *op, int *pending) {
  int progress = 0, rc;
  *pending = 0;
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    if (!c->is_send && c->total && (rc = eng_recv_post(e, op, c))) {
      if (rc < 0) return -1;
      progress = 1;
    }
  }
  for (int k = 0; k < e->nconns; k++) {
    struct eng_conn *c = e->conns[k];
    if (!c->total) continue;
    rc = c->is_send ? eng_send(e, op, c) : eng_recv_done(e, op, c);
    if (rc < 0) return -1;
    progress |= rc;
    *pending |= (c->is_send ? c->completed : c->consumed) < c->total;
  }
  return progress;
}

int eng_run(struct engine *e, const struct eng_op *op) {
  if (eng_prepare(e, op)) return -1;
  double last = braid_now_s(), last_check = last;
  int rc = 0, pending = 1;
  while (pending) {
    int progress = eng_pass(e, op, &pending);
    if (progress < 0) { rc = -1; break; }
    if (progress || !pending) {
      last = braid_now_s();
      continue;
    }
    double now = braid_now_s();
    if (now - last > e->timeout_s) {
      char why[96];
      snprintf(why, sizeof why, "no progress for %d s (--timeout)", e->timeout_s);
      eng_dump(e, why);
      rc = -1;
      break;
    }
    if (now - last_check > 0.01) {
      last_check = now;
      if (e->rdv && rdv_peer_silent(e->rdv, now)) {
        char why[128];
        snprintf(why, sizeof why, "rank %d is gone (exited or failed); the plugin reported nothing in %d s",
                 e->rdv->lost_rank, RDV_LOST_GRACE_S);
        eng_dump(e, why);
        rc = -1;
        break;
      }
    }
    if (e->yield_idle) sched_yield();
  }
  for (int k = 0; k < e->nconns; k++) {
    e->conns[k]->seq += e->conns[k]->total;
    e->conns[k]->total = 0;
  }
  return rc;
}
