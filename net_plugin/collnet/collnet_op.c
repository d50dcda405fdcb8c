/* CollNet operations: iallreduce, test, and the progress engine that moves partitions to and
 * from the braid-ps servers (no thread: progress happens inside iallreduce and test).
 *
 * An operation is cut into partitions (ps_layout, assign.h); each goes to one server as a PUSH of this
 * head's input; the server answers every head with the RESULT (the reduction in rank order),
 * each head answers DONE, and once every head holds the result the server sends RELEASE.  Only
 * then is the partition complete here (hold-back), so until an operation completes every head
 * still has its input: a server lost at any point costs a re-send of its partitions to the next
 * server, never a wrong or missing result.  Results are written straight into the receive
 * buffer; an input that overlaps the receive buffer is copied first, since results may land
 * before the input is re-sent. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "collnet/collnet.h"
#include "collnet/collnet_int.h"
#include "log.h"
#include "reduce.h"

#define OP_MAGIC 0x4F535042u /* "BPSO" */

/* assign.h's probes wait this long for the weights they change to be in effect. */
_Static_assert(PS_PROBE_SETTLE_OPS >= PS_WINDOW + PS_RATE_MIN_OPS, "a probe's answer must see its weight");

static struct ps_op *slot(struct braid_collcomm *cc, uint64_t seq) { return &cc->ops[seq % PS_WINDOW]; }

/* ---------- output queue ---------- */

static int q_push(struct ps_queue *q, const struct ps_hdr *h, const char *data, size_t len) {
  if (q->len == q->cap) {
    size_t cap = q->cap ? 2 * q->cap : 64;
    struct ps_out *n = malloc(cap * sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < q->len; i++) n[i] = q->q[(q->head + i) % q->cap];
    free(q->q);
    q->q = n;
    q->cap = cap;
    q->head = 0;
  }
  struct ps_out *o = &q->q[(q->head + q->len) % q->cap];
  ps_hdr_encode(h, o->hdr);
  o->data = data;
  o->len = len;
  o->done = 0;
  o->sealed = 0;
  o->seq = h->seq;
  o->part = h->part;
  q->len++;
  return 0;
}

static void q_free(struct ps_queue *q) {
  free(q->q);
  memset(q, 0, sizeof *q);
}

/* A failed op poisons its collComm: NCCL aborts on the error anyway, and no later op may reuse
 * a slot whose frames (queued PUSHes, a RESULT being read) may still point into it. */
static void op_fail(struct ps_op *op) {
  op->failed = 1;
  op->cc->poisoned = 1;
}

/* Queues the PUSH of partition p of op on its server. */
static void push_part(struct braid_collcomm *cc, struct ps_op *op, uint32_t p) {
  struct ps_part *pt = &op->parts[p];
  struct ps_srv *s = &cc->srv[pt->server];
  struct ps_hdr h = {.type = PS_PUSH, .dtype = (uint8_t)op->dtype, .op = (uint8_t)op->op,
                     .len = (uint32_t)pt->len, .part = p, .seq = op->seq, .rank = (uint32_t)cc->rank};
  memcpy(h.weights, op->attach, PS_MAX_SERVERS);
  h.flags = op->attach_admit;
  pt->state = PART_QUEUED;
  pt->release_pending = 0;
  const char *in = op->stage ? op->stage : op->send;
  if (q_push(&s->data, &h, in + pt->off, pt->len) != 0) {
    BRAID_WARN("CollNet: out of memory queueing a partition");
    op_fail(op);
    return;
  }
  ps_rate_start(&cc->rate[pt->server], braid_now_ns());
  s->parts++;
  if (s->stats) atomic_fetch_add(&s->stats->parts, 1);
}

static void release_part(struct ps_op *op, struct ps_part *pt) {
  if (pt->state == PART_RELEASED) return;
  pt->state = PART_RELEASED;
  if (++op->ndone == op->nparts) op->complete = 1;
}

/* ---------- losing a server ---------- */

static void fail_all(struct braid_collcomm *cc, const char *why) {
  if (!cc->all_lost_warned) {
    cc->all_lost_warned = 1;
    BRAID_WARN("CollNet rank %d/%d: every braid-ps server is lost (last: %s); allreduce "
               "operations fail", cc->rank, cc->nranks, why);
  }
  for (int k = 0; k < PS_WINDOW; k++)
    if (cc->ops[k].used && !cc->ops[k].complete) op_fail(&cc->ops[k]);
}

void ps_client_lose(struct braid_collcomm *cc, int si, const char *why) {
  struct ps_srv *s = &cc->srv[si];
  if (s->lost) return;
  s->lost = 1;
  cc->lost |= 1u << si;
  if (s->stats) {
    atomic_store(&s->stats->up, 0);
    atomic_fetch_add(&s->stats->failures, 1);
  }
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  q_free(&s->data);
  q_free(&s->ctl);
  s->dst = NULL;
  ps_rejoin_lost(cc, si, braid_now_ns());
  /* Where each operation's partitions go: the next server that operation may use (one
   * re-admitted later is not a target for the operations before, on any head). */
  int any = ps_reroute(si, cc->lost, cc->nservers);
  int moved = 0, failed = 0, nowhere = 0;
  for (int k = 0; k < PS_WINDOW; k++) {
    struct ps_op *op = &cc->ops[k];
    if (!op->used || op->complete || op->failed) continue;
    int to = ps_reroute(si, ps_client_lost_for(cc, op->seq), cc->nservers);
    for (uint32_t p = 0; p < op->nparts; p++) {
      struct ps_part *pt = &op->parts[p];
      if (pt->server != si || pt->state == PART_RELEASED) continue;
      /* Without hold-back, another head may already have completed with a result we lack (its
       * input is gone), unless our own input never fully reached the server. */
      if (to < 0 || (!cc->hold && pt->state != PART_QUEUED)) {
        op_fail(op);
        if (to < 0) nowhere++; /* its only other servers came back after it was issued */
        else failed++;
        break;
      }
      pt->server = to;
      push_part(cc, op, p);
      moved++;
    }
  }
  cc->reroutes += (uint64_t)moved;
  if (any < 0) {
    fail_all(cc, why);
    return;
  }
  /* The partitions this head completed at the lost server: the server may have died with some
   * heads' RELEASE still on the way, and those heads re-send them to `to`, which must not wait
   * for our input (gone with the completed operation). */
  int gone = 0;
  struct ps_hdr g = {.type = PS_GONE, .rank = (uint32_t)cc->rank};
  for (int k = 0; cc->hold && k < PS_WINDOW; k++) {
    struct ps_op *op = &cc->ops[k];
    int to = op->magic == OP_MAGIC ? ps_reroute(si, ps_client_lost_for(cc, op->seq), cc->nservers) : -1;
    for (uint32_t p = 0; to >= 0 && !op->failed && p < op->nparts; p++) {
      struct ps_part *pt = &op->parts[p];
      if (pt->server != si || pt->state != PART_RELEASED) continue;
      pt->server = to;
      g.seq = op->seq, g.part = p;
      gone += q_push(&cc->srv[to].ctl, &g, NULL, 0) == 0;
    }
    struct ps_hist *hi = &cc->hist[k];
    to = hi->valid ? ps_reroute(si, ps_client_lost_for(cc, hi->seq), cc->nservers) : -1;
    for (uint32_t p = 0; to >= 0 && p < hi->nparts; p++) {
      if (hi->srv[p] != si) continue;
      hi->srv[p] = (int8_t)to;
      g.seq = hi->seq, g.part = p;
      gone += q_push(&cc->srv[to].ctl, &g, NULL, 0) == 0;
    }
  }
  BRAID_WARN("CollNet rank %d/%d: braid-ps server %s lost (%s); %d pending partition(s) re-sent to "
             "the next server each operation may use (%s for the newest; %d completed ones reported "
             "there)%s%s", cc->rank, cc->nranks, s->name, why, moved, cc->srv[any].name, gone,
             failed ? "; operations already completed elsewhere cannot be recovered without "
                      "BRAID_PS_HOLD=1 and fail" : "",
             nowhere ? "; operations issued while every other server was lost fail" : "");
}

/* ---------- progress ---------- */

static int flush_out(struct braid_collcomm *cc, int si) {
  struct ps_srv *s = &cc->srv[si];
  int moved = 0;
  for (;;) {
    /* A control frame goes first unless a PUSH is started (sealed: its number is taken). */
    struct ps_queue *q = s->ctl.len && (!s->data.len || !s->data.q[s->data.head].sealed) ? &s->ctl
                         : s->data.len ? &s->data : NULL;
    if (!q) break;
    struct ps_out *o = &q->q[q->head];
    if (!o->sealed) {
      o->sealed = 1;
      if (s->auth) ps_mac_frame(s->key, PS_DIR_HEAD, s->tx_seq++, o->hdr, o->data, o->len, o->tag);
    }
    size_t total = PS_HDR_BYTES + o->len + (s->auth ? PS_TAG_BYTES : 0);
    struct iovec iov[3];
    int n = 0;
    if (o->done < PS_HDR_BYTES) iov[n++] = (struct iovec){o->hdr + o->done, PS_HDR_BYTES - o->done};
    size_t dd = o->done > PS_HDR_BYTES ? o->done - PS_HDR_BYTES : 0;
    if (o->len > dd) iov[n++] = (struct iovec){(char *)o->data + dd, o->len - dd};
    if (s->auth) {
      size_t td = o->done > PS_HDR_BYTES + o->len ? o->done - PS_HDR_BYTES - o->len : 0;
      iov[n++] = (struct iovec){o->tag + td, PS_TAG_BYTES - td};
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(s->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      ps_client_lose(cc, si, strerror(errno));
      return 1;
    }
    moved = 1;
    o->done += (size_t)w;
    if (o->done < total) break;
    if (q == &s->data) {
      /* A fully written PUSH: the server has our input for it. */
      struct ps_op *op = slot(cc, o->seq);
      if (op->used && op->seq == o->seq && o->part < op->nparts && op->parts[o->part].server == si &&
          op->parts[o->part].state == PART_QUEUED) {
        op->parts[o->part].state = PART_PUSHED;
        if (op->parts[o->part].release_pending) release_part(op, &op->parts[o->part]);
      }
    }
    q->head = (q->head + 1) % q->cap;
    q->len--;
  }
  return moved;
}

static void queue_done(struct braid_collcomm *cc, int si, uint64_t seq, uint32_t part) {
  struct ps_hdr h = {.type = PS_DONE, .seq = seq, .part = part, .rank = (uint32_t)cc->rank};
  if (q_push(&cc->srv[si].ctl, &h, NULL, 0) != 0) ps_client_lose(cc, si, "out of memory");
}

/* The partition a RESULT/RELEASE names, checked against what we sent to this server. */
static struct ps_part *find_part(struct braid_collcomm *cc, int si, const struct ps_hdr *h,
                                 struct ps_op **opp) {
  struct ps_op *op = slot(cc, h->seq);
  if (!op->used || op->seq != h->seq || h->part >= op->nparts || op->failed) return NULL;
  struct ps_part *pt = &op->parts[h->part];
  if (pt->server != si) return NULL;
  *opp = op;
  return pt;
}

static void on_header(struct braid_collcomm *cc, int si) {
  struct ps_srv *s = &cc->srv[si];
  struct ps_hdr *h = &s->ih;
  char err[160];
  if (ps_hdr_decode(s->ib, h, err, sizeof err) != 0) {
    ps_client_lose(cc, si, err);
    return;
  }
  struct ps_op *op = NULL;
  struct ps_part *pt;
  switch (h->type) {
  case PS_RESULT:
    pt = find_part(cc, si, h, &op);
    if (!pt || pt->state == PART_RESULT || pt->state == PART_RELEASED || h->len != pt->len ||
        h->dtype != op->dtype || h->op != op->op) {
      snprintf(err, sizeof err, "RESULT for op %llu partition %u that does not match what was sent",
               (unsigned long long)h->seq, h->part);
      ps_client_lose(cc, si, err);
      return;
    }
    s->dst = op->recv + pt->off;
    s->pgot = 0;
    return;
  case PS_RELEASE:
    pt = find_part(cc, si, h, &op);
    /* Normally after our DONE; after a re-route also when another head completed the partition
     * at the lost server (GONE), which every head then holds the result of: we must too. */
    if (!pt || !cc->hold || pt->state == PART_RELEASED || !(pt->state == PART_RESULT || pt->had_result)) {
      snprintf(err, sizeof err, "RELEASE for op %llu partition %u before its result",
               (unsigned long long)h->seq, h->part);
      ps_client_lose(cc, si, err);
      return;
    }
    return; /* acted on once complete (and its tag verified) */
  case PS_ERROR:
    s->dst = s->text;
    s->pgot = 0;
    return;
  default:
    snprintf(err, sizeof err, "unexpected %s frame", ps_type_name(h->type));
    ps_client_lose(cc, si, err);
  }
}

/* A whole frame (header, payload, tag verified) from server si. */
static void on_frame(struct braid_collcomm *cc, int si) {
  struct ps_srv *s = &cc->srv[si];
  struct ps_hdr *h = &s->ih;
  s->igot = 0;
  s->dst = NULL;
  s->pgot = 0;
  s->tgot = 0;
  if (h->type == PS_RELEASE) {
    struct ps_op *op = NULL;
    struct ps_part *pt = find_part(cc, si, h, &op);
    if (!pt) return; /* checked at the header; cannot happen */
    if (pt->state != PART_RESULT) ps_rate_done(&cc->rate[si], braid_now_ns(), 0); /* no RESULT came */
    if (pt->state == PART_QUEUED) pt->release_pending = 1; /* our PUSH is still being written */
    else release_part(op, pt);
    return;
  }
  if (h->type == PS_ERROR) {
    char text[PS_MAX_TEXT + 1], why[PS_MAX_TEXT + 32];
    ps_text_decode((const uint8_t *)s->text, h->len, text, sizeof text);
    snprintf(why, sizeof why, "server error: %s", text);
    ps_client_lose(cc, si, why);
    return;
  }
  struct ps_op *op = NULL;
  struct ps_part *pt = find_part(cc, si, h, &op);
  if (!pt) return; /* checked at the header; cannot happen */
  pt->state = PART_RESULT;
  pt->had_result = 1;
  s->bytes_in += h->len;
  if (s->stats) atomic_fetch_add(&s->stats->result_bytes, h->len);
  ps_rate_done(&cc->rate[si], braid_now_ns(), h->len);
  memcpy(op->next_weights, h->weights, PS_MAX_SERVERS);
  op->next_admit = h->flags;
  op->have_next = 1;
  if (cc->hold) queue_done(cc, si, h->seq, h->part);
  else release_part(op, pt);
}

/* Where the next bytes from server si go: header, payload (RESULT: the receive buffer; ERROR:
 * its text), then with frame authentication the tag. */
static void *in_buf(struct ps_srv *s, size_t *len) {
  if (s->igot < PS_HDR_BYTES) {
    *len = PS_HDR_BYTES - s->igot;
    return s->ib + s->igot;
  }
  if (s->pgot < s->ih.len) {
    *len = s->ih.len - s->pgot;
    return s->dst + s->pgot;
  }
  *len = PS_TAG_BYTES - s->tgot;
  return s->itag + s->tgot;
}

/* n bytes arrived at in_buf's place. */
static void in_got(struct braid_collcomm *cc, int si, size_t n) {
  struct ps_srv *s = &cc->srv[si];
  if (s->igot < PS_HDR_BYTES) {
    s->igot += n;
    if (s->igot < PS_HDR_BYTES) return;
    on_header(cc, si);
    if (s->lost) return;
    s->pgot = s->tgot = 0;
    if (s->auth) {
      ps_mac_start(&s->rmac, s->key, PS_DIR_SERVER, s->rx_seq);
      ps_mac_update(&s->rmac, s->ib, PS_HDR_BYTES);
    }
    if (s->ih.len) return; /* its payload next */
  } else if (s->pgot < s->ih.len) {
    if (s->auth) ps_mac_update(&s->rmac, s->dst + s->pgot, n);
    s->pgot += n;
    if (s->pgot < s->ih.len) return;
  } else {
    s->tgot += n;
  }
  if (s->auth && s->tgot < PS_TAG_BYTES) return;
  if (s->auth) {
    if (!ps_mac_verify(&s->rmac, s->itag)) {
      char why[200];
      snprintf(why, sizeof why, "the server's frame %llu (%s op %llu partition %u) failed its "
               "authentication tag: modified, replayed or reordered in transit",
               (unsigned long long)s->rx_seq, ps_type_name(s->ih.type),
               (unsigned long long)s->ih.seq, s->ih.part);
      ps_client_lose(cc, si, why);
      return;
    }
    s->rx_seq++;
  }
  on_frame(cc, si);
}

static int read_in(struct braid_collcomm *cc, int si) {
  struct ps_srv *s = &cc->srv[si];
  int moved = 0;
  for (int rounds = 0; rounds < 64 && !s->lost; rounds++) {
    size_t len;
    void *buf = in_buf(s, &len);
    ssize_t n = recv(s->fd, buf, len, MSG_DONTWAIT);
    if (n == 0) {
      ps_client_lose(cc, si, "the server closed the connection");
      return 1;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      ps_client_lose(cc, si, strerror(errno));
      return 1;
    }
    moved = 1;
    in_got(cc, si, (size_t)n);
  }
  return moved;
}

static void progress(struct braid_collcomm *cc) {
  if (cc->lost) ps_rejoin_progress(cc, braid_now_ns());
  for (int rounds = 0; rounds < 16; rounds++) {
    int moved = 0;
    for (int i = 0; i < cc->nservers; i++) {
      if (cc->srv[i].lost) continue;
      moved |= flush_out(cc, i);
      if (!cc->srv[i].lost) moved |= read_in(cc, i);
    }
    if (!moved) break;
  }
}

/* Rank 0: one INFO line when the weights it hands out move by more than a tenth (at most one a
 * second), so a user can see a slow server being given less. */
static void log_weights(struct braid_collcomm *cc, uint64_t now) {
  int moved = 0;
  for (int i = 0; i < cc->nservers; i++) {
    int a = cc->my_weights[i], b = cc->logged_weights[i];
    if (abs(a - b) * 10 > (a > b ? a : b)) moved = 1;
  }
  if (!moved || now - cc->last_weights_log_ns < 1000000000ull) return;
  cc->last_weights_log_ns = now;
  memcpy(cc->logged_weights, cc->my_weights, sizeof cc->logged_weights);
  char line[PS_MAX_SERVERS * 48] = "";
  size_t o = 0;
  for (int i = 0; i < cc->nservers && o < sizeof line; i++) {
    double mbs = cc->rate[i].rate * 1e3; /* one decimal below 100 MB/s: a shaped link reads 0.6 */
    o += (size_t)snprintf(line + o, sizeof line - o, " %s=%d (%.*f MB/s%s)", cc->srv[i].name,
                          cc->my_weights[i], mbs < 100 ? 1 : 0, mbs, cc->rate[i].boost ? ", probing" : "");
  }
  BRAID_INFO(NCCL_NET, "CollNet weights from op %llu on:%s", (unsigned long long)(cc->seq + PS_WINDOW), line);
}

/* ---------- entry points ---------- */

static ncclResult_t iallreduce_locked(struct braid_collcomm *cc, void *send, void *recv,
                                      size_t count, int dtype, int op_, void **request) {
  size_t esize = braid_reduce_type_size(dtype);
  if (!esize || !braid_reduce_supported(dtype, op_)) {
    BRAID_WARN("CollNet iallreduce of data type %d with op %d, which braid-ps does not reduce", dtype, op_);
    return ncclInvalidArgument;
  }
  if (count && (!send || !recv)) {
    BRAID_WARN("CollNet iallreduce of %zu elements with a NULL buffer", count);
    return ncclInvalidArgument;
  }
  if (cc->lost == (1u << cc->nservers) - 1) {
    fail_all(cc, "none left");
    return ncclRemoteError;
  }
  progress(cc);
  if (cc->poisoned || cc->lost == (1u << cc->nservers) - 1) {
    if (!cc->poison_warned) {
      cc->poison_warned = 1;
      BRAID_WARN("CollNet rank %d/%d: an earlier allreduce failed (see above); this collComm takes "
                 "no more operations", cc->rank, cc->nranks);
    }
    return ncclRemoteError;
  }
  struct ps_op *op = slot(cc, cc->seq);
  if (op->used) return ncclSuccess; /* window full: NCCL retries this same call (seq unchanged) */
  uint64_t now = braid_now_ns();
  /* The weights for this op: rank 0's, attached to op seq - PS_WINDOW (every head has that op's
   * results by now), or equal weights for the first ops. */
  uint8_t w[PS_MAX_SERVERS], admit = 0;
  if (cc->seq < PS_WINDOW) {
    memset(w, 0, sizeof w);
    memset(w, 1, (size_t)cc->nservers);
  } else {
    memcpy(w, op->have_next ? op->next_weights : op->weights, sizeof w);
    /* (an op with no partitions had no results: the word stays as it is, on every head) */
    admit = op->have_next ? op->next_admit : cc->admit;
  }
  ps_rejoin_admit(cc, cc->seq, admit); /* a lost server rank 0 re-admits from this op */
  if (cc->rank == 0) { /* every op counts towards each server's measurement window (assign.h) */
    for (int i = 0; i < cc->nservers; i++) ps_rate_window(&cc->rate[i], now);
    /* Servers standing by get weights: the ops that use them are issued after their admission. */
    ps_weights(cc->rate, cc->nservers, cc->lost & ~ps_rejoin_standby(cc), cc->my_weights);
    if (cc->equal_weights)
      for (int i = 0; i < cc->nservers; i++) cc->my_weights[i] = cc->my_weights[i] ? 255 : 0;
    log_weights(cc, now);
  }
  size_t bytes = count * esize;
  /* Contiguous ranges per server in proportion to the weights, each cut into partitions of about
   * a quarter of the server's share (16 KiB to BRAID_PS_PARTITION_BYTES), on a 4 KiB grain that
   * is a multiple of the element size.  Every head computes the same layout. */
  int64_t laid = ps_layout_buf(w, cc->nservers, cc->seq, bytes, esize, cc->part_bytes, &cc->layout, &cc->layout_cap);
  if (laid < 0) {
    BRAID_WARN("CollNet: out of memory for the partitions of a %zu-byte allreduce", bytes);
    return ncclSystemError;
  }
  uint32_t nparts = (uint32_t)laid;
  if (nparts > (uint32_t)op->parts_cap) {
    struct ps_part *np = realloc(op->parts, nparts * sizeof *np);
    if (!np) {
      BRAID_WARN("CollNet: out of memory for %u partitions", nparts);
      return ncclSystemError;
    }
    op->parts = np;
    op->parts_cap = (int)nparts;
  }
  if (op->magic == OP_MAGIC && !op->failed) { /* keep where the retiring op's partitions went */
    struct ps_hist *hi = &cc->hist[op->seq % PS_WINDOW];
    if (op->nparts > hi->cap) {
      int8_t *n = realloc(hi->srv, op->nparts);
      if (n) hi->srv = n, hi->cap = op->nparts;
    }
    hi->valid = op->nparts <= hi->cap;
    hi->seq = op->seq;
    hi->nparts = op->nparts;
    for (uint32_t p = 0; hi->valid && p < op->nparts; p++) hi->srv[p] = (int8_t)op->parts[p].server;
  }
  free(op->stage);
  op->stage = NULL;
  const char *s0 = send;
  char *r0 = recv;
  if (bytes && s0 < r0 + bytes && r0 < s0 + bytes) { /* overlapping: keep a private copy */
    op->stage = malloc(bytes);
    if (!op->stage) {
      BRAID_WARN("CollNet: out of memory for a %zu-byte in-place copy", bytes);
      return ncclSystemError;
    }
    memcpy(op->stage, send, bytes);
  }
  op->magic = OP_MAGIC;
  op->cc = cc;
  op->used = 1;
  op->complete = nparts == 0;
  op->failed = 0;
  op->seq = cc->seq;
  op->send = send;
  op->recv = recv;
  op->bytes = bytes;
  op->dtype = dtype;
  op->op = op_;
  op->nparts = nparts;
  op->ndone = 0;
  op->have_next = 0;
  op->t_issue = now;
  memcpy(op->weights, w, sizeof w);
  op->admit = admit;
  if (cc->rank == 0) memcpy(op->attach, cc->my_weights, sizeof op->attach);
  else memset(op->attach, 0, sizeof op->attach);
  op->attach_admit = cc->rank == 0 ? cc->my_admit : 0;
  for (uint32_t p = 0; p < nparts; p++) {
    struct ps_part *pt = &op->parts[p];
    pt->off = cc->layout[p].off;
    pt->len = cc->layout[p].len;
    pt->had_result = 0;
    pt->server = ps_reroute(cc->layout[p].server, cc->lost, cc->nservers);
    if (pt->server < 0) { /* cannot happen: checked above that a server is left */
      op_fail(op);
      break;
    }
    push_part(cc, op, p);
  }
  cc->seq++;
  cc->nops++;
  cc->bytes += bytes;
  *request = op;
  progress(cc);
  return ncclSuccess;
}

static ncclResult_t test_locked(struct braid_collcomm *cc, struct ps_op *op, int *done, int *size) {
  if (!op->complete && !op->failed) progress(cc);
  if (op->failed) {
    op->used = 0;
    BRAID_WARN("CollNet rank %d/%d: allreduce op %llu (%zu bytes) failed: its braid-ps servers are lost",
               cc->rank, cc->nranks, (unsigned long long)op->seq, op->bytes);
    return ncclRemoteError;
  }
  if (!op->complete) return ncclSuccess;
  op->used = 0;
  if (op->out_mh && braid_coll_mr_done(op->out_mh, op->out_gpu, op->bytes)) {
    cc->poisoned = 1;
    BRAID_WARN("CollNet rank %d/%d: allreduce op %llu: its result could not be copied to GPU memory", cc->rank,
               cc->nranks, (unsigned long long)op->seq);
    return ncclUnhandledCudaError;
  }
  *done = 1;
  if (size) *size = (int)(op->bytes > 0x7fffffff ? 0x7fffffff : op->bytes);
  return ncclSuccess;
}

ncclResult_t braid_coll_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
                                   int dtype, int op, void *send_mh, void *recv_mh,
                                   void **request) {
  *request = NULL;
  struct braid_collcomm *cc = braid_collcomm_check(coll_comm, "iallreduce");
  if (!cc) return ncclInvalidArgument;
  /* Registered buffers are read and written where their handles say (GPU memory: its host copy,
   * the input copied in here, the result copied out when test() finds the op complete). */
  size_t bytes = count * braid_reduce_type_size(dtype);
  char *hsend = send, *hrecv = recv;
  if (bytes && send_mh && !(hsend = braid_coll_mr_host(send_mh, send, bytes, 1))) return ncclInvalidArgument;
  if (bytes && recv_mh && !(hrecv = braid_coll_mr_host(recv_mh, recv, bytes, 0))) return ncclInvalidArgument;
  pthread_mutex_lock(&cc->mu);
  ncclResult_t rc = iallreduce_locked(cc, hsend, hrecv, count, dtype, op, request);
  struct ps_op *o = *request;
  if (o) o->out_mh = hrecv != recv ? recv_mh : NULL, o->out_gpu = recv;
  pthread_mutex_unlock(&cc->mu);
  return rc;
}

ncclResult_t braid_coll_test(void *request, int *done, int *size) {
  struct ps_op *op = request;
  *done = 0;
  if (!op || op->magic != OP_MAGIC || !op->used) {
    BRAID_WARN("CollNet test of an invalid or finished request %p", request);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&op->cc->mu);
  ncclResult_t rc = test_locked(op->cc, op, done, size);
  pthread_mutex_unlock(&op->cc->mu);
  if (braid_telemetry_on()) braid_telemetry_tick(braid_now_ns()); /* the servers' metrics too */
  return rc;
}

/* ---------- progress while NCCL has no CollNet operation outstanding ----------
 *
 * NCCL drives a collComm only while it has CollNet operations pending.  A head that completed
 * its part must still notice a lost server and report what it completed there (GONE), or a head
 * that missed the server's last RELEASE waits for it forever; so the net plugin's own progress
 * (every test() of every send/receive comm, which NCCL keeps calling while this node waits for
 * any peer) also gives idle collComms a turn, at most every millisecond. */
#define IDLE_MAX 64
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static struct braid_collcomm *idle_list[IDLE_MAX];
static _Atomic int idle_n;
static _Atomic uint64_t idle_last_ns;

void ps_client_register(struct braid_collcomm *cc, int on) {
  pthread_mutex_lock(&idle_mu);
  int n = atomic_load(&idle_n);
  if (on && n < IDLE_MAX) idle_list[n++] = cc;
  for (int i = 0; !on && i < n; i++)
    if (idle_list[i] == cc) idle_list[i] = idle_list[--n];
  atomic_store(&idle_n, n);
  pthread_mutex_unlock(&idle_mu);
}

void braid_coll_idle_progress(void) {
  if (!atomic_load_explicit(&idle_n, memory_order_relaxed)) return;
  uint64_t now = braid_now_ns(), last = atomic_load_explicit(&idle_last_ns, memory_order_relaxed);
  if (now - last < 1000000ull || !atomic_compare_exchange_strong(&idle_last_ns, &last, now)) return;
  pthread_mutex_lock(&idle_mu);
  int n = atomic_load(&idle_n);
  for (int i = 0; i < n; i++) {
    struct braid_collcomm *cc = idle_list[i];
    if (pthread_mutex_trylock(&cc->mu) != 0) continue; /* its own thread is in it */
    if (!cc->poisoned) progress(cc);
    pthread_mutex_unlock(&cc->mu);
  }
  pthread_mutex_unlock(&idle_mu);
}

void ps_client_teardown(struct braid_collcomm *cc) {
  ps_rejoin_teardown(cc);
  for (int i = 0; i < cc->nservers; i++) {
    braid_telemetry_remove_server(cc->srv[i].stats);
    cc->srv[i].stats = NULL;
    if (cc->srv[i].fd >= 0) close(cc->srv[i].fd);
    cc->srv[i].fd = -1;
    q_free(&cc->srv[i].data);
    q_free(&cc->srv[i].ctl);
  }
  free(cc->layout);
  cc->layout = NULL;
  cc->layout_cap = 0;
  for (int k = 0; k < PS_WINDOW; k++) {
    free(cc->hist[k].srv);
    free(cc->ops[k].parts);
    free(cc->ops[k].stage);
    cc->ops[k].magic = 0;
  }
}
