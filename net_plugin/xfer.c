/* The data path: isend / irecv / test over a connection's streams.
 *
 * Progress is made inside the calls themselves (no progress thread): on a busy node a thread
 * beside NCCL's polling proxy turns microseconds into milliseconds.  Sends are cut into frames
 * that streams pull in sequence order; the receiver matches messages to posted receives in
 * sequence order (tags pick the buffer inside a grouped receive) and reads payload straight into
 * the posted buffer.  A send that arrives while the oldest receives wait for other tags is
 * buffered, so one peer's early send can never block another's (as IB's FIFO guarantees). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "comm.h"
#include "log.h"

#define RX_DIRECT_MIN 1024 /* payload remainders at least this big are read straight in */

/* ---------- request pool ---------- */

static struct braid_req *req_alloc(struct braid_comm *c, enum braid_req_kind kind) {
  if (c->nfree == 0) return NULL;
  struct braid_req *r = &c->reqs[c->free_reqs[--c->nfree]];
  int index = r->index;
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->comm = c;
  r->index = index;
  return r;
}

static void req_release(struct braid_req *r) {
  struct braid_comm *c = r->comm;
  r->kind = BRAID_REQ_FREE;
  c->free_reqs[c->nfree++] = r->index;
}

/* ---------- send side ---------- */

/* Cuts the next frame from the oldest send that still has bytes to frame. */
static bool tx_pull(struct braid_comm *c, struct braid_txframe *f) {
  while (c->pend_count) {
    struct braid_req *r = c->pending[c->pend_head];
    size_t len = r->size - r->queued;
    if (len > c->chunk) len = c->chunk;
    struct braid_frame h = {.type = BRAID_FRAME_DATA, .len = (uint32_t)len, .seq = r->seq,
                            .offset = r->queued, .size = r->size, .tag = r->tag};
    braid_frame_encode(&h, f->hdr);
    f->req = r;
    f->payload = r->data + r->queued;
    f->len = len;
    r->queued += len;
    r->frames_out++;
    if (r->queued == r->size) {
      r->all_queued = true;
      c->pend_head = (c->pend_head + 1) % BRAID_SEND_REQS;
      c->pend_count--;
    }
    return true;
  }
  return false;
}

static void tx_frame_written(struct braid_txframe *f) {
  struct braid_req *r = f->req;
  r->sent += f->len;
  if (--r->frames_out == 0 && r->all_queued) r->done = true;
}

/* Writes as much of the stream's queue as the socket takes.  Returns 0, or an error. */
static ncclResult_t tx_stream(struct braid_comm *c, struct braid_stream *s) {
  for (;;) {
    size_t batch_bytes = 0;
    for (int i = 0; i < s->tx_count; i++) batch_bytes += s->tx[(s->tx_head + i) % BRAID_SEND_BATCH].len;
    while (s->tx_count < BRAID_SEND_BATCH && batch_bytes < c->chunk) {
      struct braid_txframe *f = &s->tx[(s->tx_head + s->tx_count) % BRAID_SEND_BATCH];
      if (!tx_pull(c, f)) break;
      s->tx_count++;
      batch_bytes += f->len;
    }
    if (s->tx_count == 0) return ncclSuccess;

    struct iovec iov[2 * BRAID_SEND_BATCH];
    int niov = 0;
    size_t total = 0, skip = s->tx_done;
    for (int i = 0; i < s->tx_count; i++) {
      struct braid_txframe *f = &s->tx[(s->tx_head + i) % BRAID_SEND_BATCH];
      const char *parts[2] = {(const char *)f->hdr, f->payload};
      size_t lens[2] = {BRAID_FRAME_HDR_BYTES, f->len};
      for (int k = 0; k < 2; k++) {
        size_t off = skip < lens[k] ? skip : lens[k];
        skip -= off;
        if (lens[k] == off) continue;
        iov[niov].iov_base = (void *)(parts[k] + off);
        iov[niov].iov_len = lens[k] - off;
        total += iov[niov++].iov_len;
      }
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
    ssize_t n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
      if (errno == EINTR) continue;
      return braid_comm_fail(c, ncclRemoteError, "send failed: %s", strerror(errno));
    }
    size_t left = (size_t)n;
    while (left > 0) {
      struct braid_txframe *f = &s->tx[s->tx_head];
      size_t rest = BRAID_FRAME_HDR_BYTES + f->len - s->tx_done;
      if (left < rest) {
        s->tx_done += left;
        left = 0;
        break;
      }
      left -= rest;
      s->tx_done = 0;
      tx_frame_written(f);
      s->tx_head = (s->tx_head + 1) % BRAID_SEND_BATCH;
      s->tx_count--;
    }
    if ((size_t)n < total) return ncclSuccess; /* socket full */
  }
}

static ncclResult_t tx_progress(struct braid_comm *c) {
  for (int i = 0; i < c->nstreams && !c->err; i++) tx_stream(c, &c->streams[i]);
  return c->err;
}

ncclResult_t braid_xfer_isend(struct braid_comm *c, void *data, size_t size, int tag,
                              void **request) {
  *request = NULL;
  if (c->err) return c->err;
  if (size > BRAID_MSG_MAX_BYTES) {
    BRAID_WARN("isend of %zu bytes exceeds maxP2pBytes (%llu)", size,
               (unsigned long long)BRAID_MSG_MAX_BYTES);
    return ncclInvalidArgument;
  }
  if (size > 0 && !data) {
    BRAID_WARN("isend of %zu bytes from a NULL buffer", size);
    return ncclInvalidArgument;
  }
  struct braid_req *r = req_alloc(c, BRAID_REQ_SEND);
  if (!r) return ncclSuccess; /* all requests in flight: NCCL retries */
  r->data = data;
  r->size = size;
  r->tag = tag;
  r->seq = c->next_seq++;
  c->pending[(c->pend_head + c->pend_count++) % BRAID_SEND_REQS] = r;
  tx_progress(c);
  *request = r;
  return ncclSuccess;
}

/* ---------- receive side ---------- */

static struct braid_rxmsg *rx_msg(struct braid_comm *c, uint64_t seq) {
  return &c->msgs[seq & (BRAID_MSG_WINDOW - 1)];
}

static void rx_posted_remove(struct braid_comm *c, int i) {
  memmove(&c->posted[i], &c->posted[i + 1], (size_t)(c->nposted - i - 1) * sizeof c->posted[0]);
  c->nposted--;
}

static bool req_all_matched(const struct braid_req *r) {
  for (int i = 0; i < r->n; i++)
    if (r->slot[i].msg < 0) return false;
  return true;
}

/* A message has all its bytes: hand it to its slot, or keep it until a receive is posted. */
static void rx_msg_complete(struct braid_comm *c, struct braid_rxmsg *m) {
  struct braid_req *r = m->req;
  if (!r) return; /* unexpected: waits for irecv */
  if (m->unexpected) {
    if (m->size) memcpy(r->slot[m->slot].buf, m->unexpected, m->size);
    free(m->unexpected);
    m->unexpected = NULL;
    c->unexpected_bytes -= m->size;
  }
  r->slot[m->slot].done = true;
  if (++r->ndone == r->n) r->done = true;
  m->seq = -1;
}

/* Ties message m to slot i of r; checks the size. */
static ncclResult_t rx_bind(struct braid_comm *c, struct braid_req *r, int i,
                            struct braid_rxmsg *m) {
  struct braid_recv_slot *sl = &r->slot[i];
  if (m->size > sl->cap)
    return braid_comm_fail(c, ncclInvalidUsage,
                           "peer sent %zu bytes (tag %d) to a receive of %zu bytes: "
                           "send/receive size mismatch", m->size, m->tag, sl->cap);
  sl->msg = m->seq;
  sl->size = m->size;
  m->req = r;
  m->slot = i;
  return ncclSuccess;
}

/* First frame of message f.seq == next_match: find its receive, or buffer it, or hold it. */
static ncclResult_t rx_match(struct braid_comm *c, const struct braid_frame *f,
                             struct braid_rxmsg **out) {
  *out = NULL;
  struct braid_rxmsg *m = rx_msg(c, f->seq);
  if (m->seq >= 0) return ncclSuccess; /* window full: hold until older messages finish */
  for (int g = 0; g < c->nposted; g++) {
    struct braid_req *r = c->posted[g];
    for (int i = 0; i < r->n; i++) {
      if (r->slot[i].msg >= 0 || r->slot[i].tag != f->tag) continue;
      *m = (struct braid_rxmsg){.seq = (int64_t)f->seq, .size = f->size, .tag = f->tag,
                                .dest = r->slot[i].buf};
      ncclResult_t rc = rx_bind(c, r, i, m);
      if (rc) return m->seq = -1, rc;
      if (req_all_matched(r)) rx_posted_remove(c, g);
      c->next_match++;
      return *out = m, ncclSuccess;
    }
  }
  if (c->nposted == 0) return ncclSuccess; /* nobody waits: hold (TCP back-pressure) */
  /* Receives wait for other tags: buffer this one so theirs can arrive behind it. */
  if (c->unexpected_bytes + f->size > c->unexpected_max || c->nunexpected >= BRAID_MSG_WINDOW / 2)
    return braid_comm_fail(c, ncclRemoteError,
                           "peer sent a message with tag %d while receives wait for other tags, "
                           "and %zu bytes are already buffered (BRAID_MAX_UNEXPECTED_BYTES)",
                           f->tag, c->unexpected_bytes);
  char *buf = malloc(f->size ? f->size : 1);
  if (!buf) return braid_comm_fail(c, ncclSystemError, "out of memory buffering %llu bytes",
                                   (unsigned long long)f->size);
  *m = (struct braid_rxmsg){.seq = (int64_t)f->seq, .size = f->size, .tag = f->tag, .dest = buf,
                            .unexpected = buf};
  c->unexpected_bytes += f->size;
  c->nunexpected++;
  c->next_match++;
  return *out = m, ncclSuccess;
}

/* Starts frame f on stream s.  Returns 1 when started, 0 to hold it, <0 after failing c. */
static int rx_begin(struct braid_comm *c, struct braid_stream *s, const struct braid_frame *f) {
  struct braid_rxmsg *m = NULL;
  if (f->seq < c->next_match) {
    m = rx_msg(c, f->seq);
    if (m->seq != (int64_t)f->seq || f->size != m->size || f->tag != m->tag ||
        m->got + f->len > m->size) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: frame for message %llu does not fit it",
                      (unsigned long long)f->seq);
      return -1;
    }
  } else if (f->seq == c->next_match) {
    if (rx_match(c, f, &m) != ncclSuccess) return -1;
    if (!m) return 0;
  } else {
    if (c->nstreams == 1) {
      braid_comm_fail(c, ncclRemoteError, "garbled stream: message %llu arrived before %llu",
                      (unsigned long long)f->seq, (unsigned long long)c->next_match);
      return -1;
    }
    return 0; /* an earlier message's first frame is on another stream */
  }
  s->in_frame = true;
  s->frame = *f;
  s->frame_msg = m;
  s->frame_dest = m->dest + f->offset;
  s->frame_left = f->len;
  return 1;
}

static void rx_end(struct braid_comm *c, struct braid_stream *s) {
  struct braid_rxmsg *m = s->frame_msg;
  s->in_frame = false;
  m->got += s->frame.len;
  if (m->got == m->size) rx_msg_complete(c, m);
}

/* Reads into dst and then into tail (the next frame's header, so one syscall per large frame);
 * returns bytes, 0 for "nothing now", -1 after failing c. */
static ssize_t rx_readv(struct braid_comm *c, struct braid_stream *s, void *dst, size_t len,
                        void *tail, size_t tail_len) {
  struct iovec iov[2] = {{dst, len}, {tail, tail_len}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = tail_len ? 2 : 1};
  for (;;) {
    ssize_t n = recvmsg(s->fd, &mh, MSG_DONTWAIT);
    if (n > 0) {
      s->stall_since_ns = 0;
      return n;
    }
    if (n == 0) {
      s->eof = true;
      if (s->in_frame || s->stage_len > s->stage_off) {
        braid_comm_fail(c, ncclRemoteError, "peer closed the connection in the middle of a message");
        return -1;
      }
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      bool mid = s->in_frame || s->stage_len > s->stage_off;
      if (!mid) return s->stall_since_ns = 0, 0;
      uint64_t now = braid_now_ns();
      if (!s->stall_since_ns) s->stall_since_ns = now;
      if (now - s->stall_since_ns > c->timeout_ns) {
        braid_comm_fail(c, ncclRemoteError,
                        "no bytes for %llu ms in the middle of a message: the peer stopped "
                        "answering (BRAID_TIMEOUT_MS)",
                        (unsigned long long)(c->timeout_ns / 1000000));
        return -1;
      }
      return 0;
    }
    braid_comm_fail(c, ncclRemoteError, "receive failed: %s", strerror(errno));
    return -1;
  }
}

/* read: whether to call recv() (irecv only places what is already staged: the syscall would
 * delay the send NCCL posts next, and the following test() reads anyway). */
static ncclResult_t rx_stream(struct braid_comm *c, struct braid_stream *s, bool read) {
  while (!c->err && !s->eof) {
    size_t avail = s->stage_len - s->stage_off;
    if (s->in_frame) {
      if (s->frame_left == 0) {
        rx_end(c, s);
        continue;
      }
      if (avail) {
        size_t k = avail < s->frame_left ? avail : s->frame_left;
        memcpy(s->frame_dest, s->stage + s->stage_off, k);
        s->stage_off += k, s->frame_dest += k, s->frame_left -= k;
        continue;
      }
      s->stage_off = s->stage_len = 0;
      if (!read) break;
      if (s->frame_left >= RX_DIRECT_MIN) {
        size_t want = s->frame_left;
        ssize_t n = rx_readv(c, s, s->frame_dest, want, s->stage, BRAID_FRAME_HDR_BYTES);
        if (n <= 0) break;
        size_t k = (size_t)n < want ? (size_t)n : want;
        s->frame_dest += k, s->frame_left -= k;
        s->stage_len = (size_t)n - k;
        continue;
      }
    } else if (avail >= BRAID_FRAME_HDR_BYTES) {
      struct braid_frame f;
      char why[160];
      if (braid_frame_decode(s->stage + s->stage_off, &f, why, sizeof why) != 0) {
        braid_comm_fail(c, ncclRemoteError, "garbled frame from peer: %s", why);
        break;
      }
      int rc = rx_begin(c, s, &f);
      if (rc <= 0) break;
      s->stage_off += BRAID_FRAME_HDR_BYTES;
      continue;
    }
    /* Need more bytes in the stage: compact, then read. */
    if (!read) break;
    if (s->stage_off) {
      memmove(s->stage, s->stage + s->stage_off, avail);
      s->stage_off = 0, s->stage_len = avail;
    }
    ssize_t n = rx_readv(c, s, s->stage + s->stage_len, BRAID_STAGE_BYTES - s->stage_len, NULL, 0);
    if (n <= 0) break;
    s->stage_len += (size_t)n;
  }
  return c->err;
}

static ncclResult_t rx_progress(struct braid_comm *c, bool read) {
  int eofs = 0;
  for (int i = 0; i < c->nstreams && !c->err; i++) {
    rx_stream(c, &c->streams[i], read);
    eofs += c->streams[i].eof;
  }
  if (!c->err && eofs == c->nstreams && c->nposted + (c->nfree < c->nreqs) > 0) {
    /* Every stream closed while receives are outstanding: nothing more can arrive. */
    for (int i = 0; i < c->nreqs; i++)
      if (c->reqs[i].kind == BRAID_REQ_RECV && !c->reqs[i].done)
        return braid_comm_fail(c, ncclRemoteError, "peer closed the connection with receives pending");
  }
  return c->err;
}

ncclResult_t braid_xfer_irecv(struct braid_comm *c, int n, void **data, const size_t *sizes,
                              const int *tags, void **request) {
  *request = NULL;
  if (c->err) return c->err;
  if (n < 1 || n > BRAID_MAX_RECVS) {
    BRAID_WARN("irecv of %d buffers (supported: 1 to %d)", n, BRAID_MAX_RECVS);
    return ncclInvalidArgument;
  }
  struct braid_req *r = req_alloc(c, BRAID_REQ_RECV);
  if (!r) return ncclSuccess;
  r->n = n;
  for (int i = 0; i < n; i++)
    r->slot[i] = (struct braid_recv_slot){.buf = data[i], .cap = sizes[i], .tag = tags[i], .msg = -1};
  /* Sends that arrived before this receive, oldest first. */
  for (uint64_t q = c->next_match - (c->next_match < BRAID_MSG_WINDOW ? c->next_match : BRAID_MSG_WINDOW);
       c->nunexpected && q < c->next_match; q++) {
    struct braid_rxmsg *m = rx_msg(c, q);
    if (m->seq != (int64_t)q || m->req) continue;
    for (int i = 0; i < n; i++) {
      if (r->slot[i].msg >= 0 || r->slot[i].tag != m->tag) continue;
      if (rx_bind(c, r, i, m)) return c->err;
      c->nunexpected--;
      if (m->got == m->size) rx_msg_complete(c, m);
      break;
    }
  }
  if (!req_all_matched(r)) c->posted[c->nposted++] = r;
  rx_progress(c, false);
  *request = r;
  return ncclSuccess;
}

ncclResult_t braid_xfer_test(void *request, int *done, int *sizes) {
  struct braid_req *r = request;
  *done = 0;
  if (!r || r->kind == BRAID_REQ_FREE) {
    BRAID_WARN("test() on an invalid or already completed request %p", request);
    return ncclInvalidArgument;
  }
  struct braid_comm *c = r->comm;
  if (!r->done) {
    if (r->kind == BRAID_REQ_SEND) tx_progress(c);
    else rx_progress(c, true);
  }
  if (!r->done) return c->err;
  *done = 1;
  if (sizes) {
    if (r->kind == BRAID_REQ_SEND) sizes[0] = (int)r->size;
    else
      for (int i = 0; i < r->n; i++) sizes[i] = (int)r->slot[i].size;
  }
  req_release(r);
  return ncclSuccess;
}
