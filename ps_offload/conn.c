/* braid-ps: a head's connection: frame reader, output queue, closing (see conn.h). */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ps_out {
  struct ps_out *next;
  uint8_t hdr[PS_HDR_BYTES];
  const uint8_t *data; /* payload: own[] or a partition's result */
  size_t len;
  struct ps_part *part; /* a reference when data points into a partition */
  int mac;              /* followed by a tag (queued after ps_conn_start_auth) */
  int sealed;           /* tagged: its number, so its place in the stream, is fixed */
  uint8_t tag[PS_TAG_BYTES];
  uint8_t own[];
};

/* Bytes of o on the wire. */
static size_t out_bytes(const struct ps_out *o) { return PS_HDR_BYTES + o->len + (o->mac ? PS_TAG_BYTES : 0); }

#define IOV_MAX_BATCH 64

struct ps_conn *ps_conn_new(struct ps_ctx *ctx, int fd, void *io, const char *peer) {
  struct ps_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c);
    return NULL;
  }
  atomic_init(&c->refs, 1);
  atomic_init(&c->closing, 0);
  c->ctx = ctx;
  c->fd = fd;
  c->io = io;
  snprintf(c->peer, sizeof c->peer, "%s", peer ? peer : "?");
  c->state = PS_CONN_HELLO;
  ps_proto_conn_init(c);
  return c;
}

void ps_conn_get(struct ps_conn *c) { atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); }

static void out_free(struct ps_out *o) {
  if (o->part) ps_part_put(o->part);
  free(o);
}

/* Drops every queued frame, except a frame already partly written when keep_started. */
static void purge_locked(struct ps_conn *c, int keep_started) {
  struct ps_out *o = c->head;
  if (keep_started && o && c->head_off > 0) {
    o = o->next;
    c->head->next = NULL;
    c->tail = c->head;
    c->sealed_last = c->head->sealed ? c->head : NULL;
  } else {
    c->head = c->tail = NULL;
    c->head_off = 0;
    c->sealed_last = NULL;
  }
  c->ctl_last = NULL;
  while (o) {
    struct ps_out *next = o->next;
    /* Sealed, never started: the highest numbers given out; the next frame reuses them. */
    if (o->sealed && o->mac) c->tx_seq--;
    out_free(o);
    o = next;
  }
}

/* Tags a frame about to be written: fixes its number, so its place in the stream (under mu). */
static void seal_locked(struct ps_conn *c, struct ps_out *o) {
  o->sealed = 1;
  c->sealed_last = o;
  ps_mac_frame(c->key, PS_DIR_SERVER, c->tx_seq++, o->hdr, o->data, o->len, o->tag);
}

void ps_conn_put(struct ps_conn *c) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  purge_locked(c, 0); /* last reference: nobody else can hold mu */
  if (c->rpart) ps_part_put(c->rpart);
  ps_proto_conn_free(c);
  const struct ps_io_ops *io = ps_ctx_io(c->ctx);
  if (io && io->release) io->release(c);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static void set_want_write(struct ps_conn *c, int on) {
  if (c->want_write == on) return;
  c->want_write = on;
  const struct ps_io_ops *io = ps_ctx_io(c->ctx);
  if (io && io->want_write) io->want_write(c, on);
}

static void flush_locked(struct ps_conn *c) {
  const struct ps_io_ops *io = ps_ctx_io(c->ctx);
  while (c->head && !c->broken) {
    struct iovec iov[IOV_MAX_BATCH];
    int n = 0;
    size_t skip = c->head_off;
    for (struct ps_out *o = c->head; o && n + 3 <= IOV_MAX_BATCH; o = o->next, skip = 0) {
      if (o->mac && !o->sealed) {
        /* A RESULT behind the head is tagged only when it is next, so that control frames
         * queued meanwhile can still go ahead of it (they never pass a tagged frame). */
        if (o != c->head && o->len > PS_MAX_TEXT) break;
        seal_locked(c, o);
      }
      if (skip < PS_HDR_BYTES) iov[n++] = (struct iovec){o->hdr + skip, PS_HDR_BYTES - skip};
      size_t ds = skip > PS_HDR_BYTES ? skip - PS_HDR_BYTES : 0;
      if (ds < o->len) iov[n++] = (struct iovec){(void *)(o->data + ds), o->len - ds};
      if (o->mac) {
        size_t ts = skip > PS_HDR_BYTES + o->len ? skip - PS_HDR_BYTES - o->len : 0;
        iov[n++] = (struct iovec){o->tag + ts, PS_TAG_BYTES - ts};
      }
    }
    ssize_t w = io->writev(c, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      c->broken = 1;
      break;
    }
    if (w == 0) break; /* cannot happen with bytes to write; never spin on it */
    size_t left = (size_t)w;
    while (left > 0 && c->head) {
      struct ps_out *o = c->head;
      size_t remain = out_bytes(o) - c->head_off;
      if (left < remain) {
        c->head_off += left;
        left = 0;
      } else {
        left -= remain;
        if (o == c->ctl_last) c->ctl_last = NULL;
        if (o == c->sealed_last) c->sealed_last = NULL;
        c->head = o->next;
        if (!c->head) c->tail = NULL;
        c->head_off = 0;
        out_free(o);
      }
    }
  }
  if (c->broken) purge_locked(c, 0);
  if (c->head) {
    set_want_write(c, 1);
    return;
  }
  set_want_write(c, 0);
  if (atomic_load(&c->closing) && !c->shut && !c->broken) {
    c->shut = 1;
    if (io->shutdown) io->shutdown(c);
  }
}

void ps_conn_flush(struct ps_conn *c) {
  pthread_mutex_lock(&c->mu);
  flush_locked(c);
  pthread_mutex_unlock(&c->mu);
}

static void enqueue_locked(struct ps_conn *c, struct ps_out *o) {
  o->next = NULL;
  if (c->tail)
    c->tail->next = o;
  else
    c->head = o;
  c->tail = o;
}

/* Control frames (READY, RELEASE, ...) go ahead of queued RESULTs, after earlier control frames
 * and after a frame already partly written: an operation's release never waits behind later
 * operations' data.  (A RELEASE never overtakes its own RESULT: it exists only once every head,
 * this one included, has received that RESULT.) */
static void enqueue_ctl_locked(struct ps_conn *c, struct ps_out *o) {
  struct ps_out *after = c->ctl_last;
  if (c->sealed_last) { /* never ahead of a tagged frame: the numbers go out in order */
    for (struct ps_out *q = c->head; q; q = q->next) {
      if (q == after || !after) {
        after = c->sealed_last;
        break;
      }
      if (q == c->sealed_last) break; /* ctl_last comes after the tagged prefix */
    }
  }
  if (!after && c->head && c->head_off > 0) after = c->head;
  if (after) {
    o->next = after->next;
    after->next = o;
    if (c->tail == after) c->tail = o;
  } else {
    o->next = c->head;
    c->head = o;
    if (!c->tail) c->tail = o;
  }
  c->ctl_last = o;
}

static struct ps_out *out_new(struct ps_conn *c, const struct ps_hdr *h, const void *payload,
                              size_t copy) {
  struct ps_out *o = malloc(sizeof *o + copy);
  if (!o) return NULL;
  ps_hdr_encode(h, o->hdr);
  if (copy) memcpy(o->own, payload, copy);
  o->data = o->own;
  o->len = copy;
  o->part = NULL;
  o->mac = c->tx_auth;
  o->sealed = 0;
  return o;
}

void ps_conn_start_auth(struct ps_conn *c, const uint8_t key[PS_KEY_BYTES]) {
  memcpy(c->key, key, PS_KEY_BYTES);
  c->rx_auth = 1;
  c->rx_seq = 0;
  pthread_mutex_lock(&c->mu);
  c->tx_auth = 1;
  c->tx_seq = 0;
  pthread_mutex_unlock(&c->mu);
}

void ps_conn_send(struct ps_conn *c, const struct ps_hdr *h, const void *payload) {
  pthread_mutex_lock(&c->mu);
  if (!atomic_load(&c->closing) && !c->broken) {
    struct ps_out *o = out_new(c, h, payload, h->len);
    if (o) {
      enqueue_ctl_locked(c, o);
      flush_locked(c);
    } else {
      c->broken = 1; /* out of memory: the stream cannot go on */
      purge_locked(c, 0);
    }
  }
  pthread_mutex_unlock(&c->mu);
}

void ps_conn_send_result(struct ps_conn *c, const struct ps_hdr *h, struct ps_part *p,
                         const uint8_t *data) {
  pthread_mutex_lock(&c->mu);
  if (!atomic_load(&c->closing) && !c->broken) {
    struct ps_out *o = out_new(c, h, NULL, 0);
    if (o) {
      ps_part_get(p);
      o->part = p;
      o->data = data;
      o->len = h->len;
      enqueue_locked(c, o);
      flush_locked(c);
    } else {
      c->broken = 1;
      purge_locked(c, 0);
    }
  }
  pthread_mutex_unlock(&c->mu);
}

void ps_conn_close(struct ps_conn *c, int type, uint64_t seq, uint32_t part, const char *text) {
  pthread_mutex_lock(&c->mu);
  if (atomic_load(&c->closing)) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  atomic_store(&c->closing, 1);
  c->close_deadline = ps_ctx_now(c->ctx) + ps_ctx_linger(c->ctx);
  purge_locked(c, 1); /* a frame already partly written is finished, so the last one parses */
  if (type && !c->broken) {
    struct ps_hdr h = {.type = (uint8_t)type, .seq = seq, .part = part};
    size_t n = text ? strlen(text) : 0;
    h.len = (uint32_t)(n > PS_MAX_TEXT ? PS_MAX_TEXT : n);
    struct ps_out *o = out_new(c, &h, text, h.len);
    if (o) enqueue_locked(c, o);
  }
  flush_locked(c);
  pthread_mutex_unlock(&c->mu);
}

int ps_conn_done(struct ps_conn *c) {
  if (!atomic_load(&c->closing)) return 0;
  pthread_mutex_lock(&c->mu);
  int done = c->broken || c->peer_eof || ps_ctx_now(c->ctx) >= c->close_deadline;
  pthread_mutex_unlock(&c->mu);
  return done;
}

/* ---- Input ---- */

static void drop_reader(struct ps_conn *c) {
  if (c->rpart) ps_part_put(c->rpart);
  c->rpart = NULL;
  c->dst = NULL;
  c->hdr_got = 0;
  c->in_tag = 0;
}

void *ps_conn_rbuf(struct ps_conn *c, size_t *len) {
  if (atomic_load(&c->closing)) {
    drop_reader(c);
    *len = sizeof c->sink;
    return c->sink;
  }
  if (c->in_tag) {
    *len = PS_TAG_BYTES - c->rtag_got;
    return c->rtag + c->rtag_got;
  }
  if (c->dst) {
    *len = c->need - c->got;
    return c->dst + c->got;
  }
  *len = PS_HDR_BYTES - c->hdr_got;
  return c->hdr_buf + c->hdr_got;
}

/* c->hdr's frame is complete, tag included: hands it to the protocol. */
static void frame_done(struct ps_conn *c) {
  struct ps_part *p = c->rpart;
  c->rpart = NULL;
  c->dst = NULL;
  if (c->in_tag) {
    c->in_tag = 0;
    if (!ps_mac_verify(&c->rmac, c->rtag)) {
      ps_proto_bad_tag(c, &c->hdr, c->rx_seq);
      if (p) ps_part_put(p);
      return;
    }
    c->rx_seq++;
  }
  ps_proto_frame(c, &c->hdr, p);
  if (p) ps_part_put(p);
}

/* The payload (if any) of c->hdr's frame is in: its tag next, or the frame is complete. */
static void payload_done(struct ps_conn *c) {
  if (c->rx_auth) {
    c->in_tag = 1;
    c->rtag_got = 0;
    return;
  }
  frame_done(c);
}

void ps_conn_received(struct ps_conn *c, size_t n) {
  if (atomic_load(&c->closing) || n == 0) return;
  if (c->in_tag) {
    c->rtag_got += n;
    if (c->rtag_got == PS_TAG_BYTES) frame_done(c);
    return;
  }
  if (c->dst) {
    if (c->rx_auth) ps_mac_update(&c->rmac, c->dst + c->got, n);
    c->got += n;
    if (c->got < c->need) return;
    c->dst = NULL; /* rpart stays until the frame is done */
    payload_done(c);
    return;
  }
  c->hdr_got += n;
  if (c->hdr_got < PS_HDR_BYTES) return;
  c->hdr_got = 0;
  uint8_t *dst = NULL;
  struct ps_part *p = NULL;
  int tagged = c->rx_auth; /* a frame read before the key exists has no tag (HELLO, AUTH) */
  if (ps_proto_header(c, c->hdr_buf, &c->hdr, &dst, &p) != 0) return;
  if (tagged) {
    ps_mac_start(&c->rmac, c->key, PS_DIR_HEAD, c->rx_seq);
    ps_mac_update(&c->rmac, c->hdr_buf, PS_HDR_BYTES);
  }
  c->rpart = p;
  if (c->hdr.len == 0) {
    payload_done(c);
    return;
  }
  c->dst = dst;
  c->need = c->hdr.len;
  c->got = 0;
}

void ps_conn_eof(struct ps_conn *c, const char *why) {
  if (!atomic_load(&c->closing)) ps_proto_lost(c, why ? why : "connection closed by the peer");
  drop_reader(c);
  pthread_mutex_lock(&c->mu);
  c->peer_eof = 1;
  pthread_mutex_unlock(&c->mu);
  /* a lost connection that was never closed by the protocol (cannot happen, but be safe) */
  ps_conn_close(c, 0, 0, 0, NULL);
}

void ps_conn_tick(struct ps_conn *c) {
  if (!atomic_load(&c->closing)) ps_proto_tick(c);
}
