/* libFuzzer target: the braid-ps protocol engine (session.c + conn.c), without sockets or threads.
 *
 * The input is a script of commands for up to four fake head connections: raw bytes, or frames
 * the harness builds from the fuzzer's fields (a HELLO for one of two sessions, with or without
 * frame authentication, an AUTH with the right proof for the server's nonce or a wrong one, PUSH
 * with payload, DONE, GONE; tagged once the head has authenticated with frame authentication; a
 * replayed or bit-flipped tagged frame), delivered in chunks of fuzzer-chosen sizes; peer
 * disconnects; the clock moving on (handshake and join timeouts); sockets that take everything,
 * part, nothing (EAGAIN) or fail.  Every frame the server writes must decode, its PROOF must
 * verify and, with frame authentication, every later frame must carry the right tag in order
 * (partial writes, control frames queued ahead of RESULTs, closes with frames still queued); at
 * the end every connection and session must be gone, every partition byte given back, and the
 * sanitizers must be quiet (leaks included). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "conn.h"
#include "proto.h"
#include "session.h"

#include "fuzz_check.h"

#define NSLOT 4
#define MAX_CONNS 48 /* connections opened per input, at most */
#define TOKEN "fuzz-token-0123456789"

enum wmode { W_ALL, W_PART, W_FULL, W_FAIL };

struct fake {
  struct ps_conn *c; /* the owner's reference, NULL when the slot is empty */
  int released, want, shut;
  enum wmode mode;
  size_t part_budget;
  /* output parser */
  uint8_t hdr[PS_HDR_BYTES];
  size_t hdr_got, skip, tag_got;
  int in_type, in_tag;
  uint8_t pl[PS_PROOF_BYTES]; /* CHALLENGE or PROOF payload */
  size_t pl_got;
  int have_nonce;
  int rx_auth;                /* the server's frames carry tags (after its PROOF) */
  uint64_t rx_seq;
  struct ps_mac rmac;
  uint8_t tag[PS_TAG_BYTES];
  /* what the harness said in its first HELLO and AUTH */
  int hello_sent, auth_sent, tx_auth;
  struct ps_transcript t;
  uint8_t key[PS_KEY_BYTES];
  uint64_t tx_seq;
  uint8_t last[PS_HDR_BYTES + 512 + PS_TAG_BYTES]; /* the last tagged frame sent, for replays */
  size_t last_len;
  uint32_t rank, nranks;
};

static struct fake fakes[MAX_CONNS];
static int nfakes;
static struct fake *slot[NSLOT];
static uint64_t fake_now;

static uint64_t fake_clock(void) { return fake_now; }

/* A whole server frame (tag checked) of type f->in_type is in. */
static void output_frame(struct fake *f) {
  if (f->in_type == PS_CHALLENGE) {
    memcpy(f->t.server_nonce, f->pl, PS_NONCE_BYTES);
    f->have_nonce = 1;
  } else if (f->in_type == PS_PROOF) {
    uint8_t want[PS_PROOF_BYTES];
    ps_auth_server_proof(TOKEN, &f->t, want);
    CHECK(f->auth_sent && ps_auth_equal(want, f->pl)); /* only after our right AUTH */
    f->rx_auth = (f->t.flags & PS_FLAG_AUTH) != 0;
  }
}

static void consume_output(struct fake *f, const uint8_t *p, size_t n) {
  while (n) {
    if (f->skip) { /* payload */
      size_t k = n < f->skip ? n : f->skip;
      if ((f->in_type == PS_CHALLENGE || f->in_type == PS_PROOF) && f->pl_got + k <= sizeof f->pl) {
        memcpy(f->pl + f->pl_got, p, k);
        f->pl_got += k;
      }
      if (f->in_tag) ps_mac_update(&f->rmac, p, k);
      f->skip -= k;
      p += k;
      n -= k;
      if (!f->skip && !f->in_tag) output_frame(f);
      continue;
    }
    if (f->in_tag) { /* the tag after a frame */
      size_t k = PS_TAG_BYTES - f->tag_got;
      if (k > n) k = n;
      memcpy(f->tag + f->tag_got, p, k);
      f->tag_got += k;
      p += k;
      n -= k;
      if (f->tag_got < PS_TAG_BYTES) continue;
      CHECK(ps_mac_verify(&f->rmac, f->tag)); /* the server's frames are tagged, in order */
      f->rx_seq++;
      f->in_tag = 0;
      output_frame(f);
      continue;
    }
    size_t k = PS_HDR_BYTES - f->hdr_got;
    if (k > n) k = n;
    memcpy(f->hdr + f->hdr_got, p, k);
    f->hdr_got += k;
    p += k;
    n -= k;
    if (f->hdr_got < PS_HDR_BYTES) continue;
    f->hdr_got = 0;
    struct ps_hdr h;
    char err[128];
    CHECK(ps_hdr_decode(f->hdr, &h, err, sizeof err) == 0); /* the server writes valid frames */
    CHECK(h.type == PS_CHALLENGE || h.type == PS_PROOF || h.type == PS_READY ||
          h.type == PS_REFUSE || h.type == PS_RESULT || h.type == PS_RELEASE || h.type == PS_ERROR);
    f->in_type = h.type;
    f->pl_got = 0;
    f->skip = h.len;
    if (f->rx_auth) {
      f->in_tag = 1;
      f->tag_got = 0;
      ps_mac_start(&f->rmac, f->key, PS_DIR_SERVER, f->rx_seq);
      ps_mac_update(&f->rmac, f->hdr, PS_HDR_BYTES);
    }
    if (!f->skip && !f->in_tag) output_frame(f);
  }
}

static ssize_t io_writev(struct ps_conn *c, const struct iovec *iov, int n) {
  struct fake *f = c->io;
  CHECK(!f->shut);
  if (f->mode == W_FULL) return errno = EAGAIN, -1;
  if (f->mode == W_FAIL) return errno = EPIPE, -1;
  size_t budget = f->mode == W_PART ? f->part_budget : SIZE_MAX, done = 0;
  if (f->mode == W_PART && budget == 0) return errno = EAGAIN, -1;
  for (int i = 0; i < n && done < budget; i++) {
    size_t k = iov[i].iov_len;
    if (k > budget - done) k = budget - done;
    consume_output(f, iov[i].iov_base, k);
    done += k;
  }
  if (f->mode == W_PART) f->part_budget -= done;
  return (ssize_t)done;
}

static void io_want_write(struct ps_conn *c, int on) { ((struct fake *)c->io)->want = on; }
static void io_shutdown(struct ps_conn *c) { ((struct fake *)c->io)->shut = 1; }
static void io_release(struct ps_conn *c) {
  struct fake *f = c->io;
  CHECK(!f->released);
  f->released = 1;
}

static const struct ps_io_ops fake_io = {io_writev, io_want_write, io_shutdown, io_release};

static void quiet_log(void *arg, int level, const char *msg) {
  (void)arg;
  (void)level;
  CHECK(memchr(msg, 0, 512) != NULL);
}

/* ---- input reader ---- */

struct in {
  const uint8_t *p;
  size_t n;
};

static uint8_t u8(struct in *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

/* ---- the owner's side ---- */

static void open_slot(struct ps_ctx *ctx, int s) {
  if (nfakes >= MAX_CONNS) {
    slot[s] = NULL;
    return;
  }
  struct fake *f = &fakes[nfakes++];
  memset(f, 0, sizeof *f);
  char peer[32];
  snprintf(peer, sizeof peer, "fake:%d", nfakes);
  f->c = ps_conn_new(ctx, -1, f, peer);
  CHECK(f->c);
  slot[s] = f;
}

/* What the worker does after every event: let go of a finished connection. */
static void settle(struct ps_ctx *ctx, int s) {
  struct fake *f = slot[s];
  if (!f || !f->c || !ps_conn_done(f->c)) return;
  ps_conn_put(f->c);
  f->c = NULL;
  open_slot(ctx, s);
}

static void feed(struct ps_ctx *ctx, int s, const uint8_t *p, size_t n, size_t chunk) {
  if (!chunk) chunk = 1;
  struct ps_conn *c = slot[s] ? slot[s]->c : NULL;
  while (n && c && slot[s] && slot[s]->c == c) { /* stops when the connection was let go */
    size_t len;
    uint8_t *dst = ps_conn_rbuf(c, &len);
    CHECK(dst && len > 0);
    size_t k = n < len ? n : len;
    if (k > chunk) k = chunk;
    memcpy(dst, p, k);
    ps_conn_received(c, k);
    p += k;
    n -= k;
    settle(ctx, s);
  }
}

/* A frame as the head builds it: tagged once it authenticated with frame authentication; flip
 * (non-zero) changes one bit of it after the tag was computed. */
static void send_frame(struct ps_ctx *ctx, int s, struct ps_hdr *h, const uint8_t *payload,
                       size_t chunk, unsigned flip) {
  struct fake *f = slot[s];
  uint8_t buf[PS_HDR_BYTES + 512 + PS_TAG_BYTES];
  ps_hdr_encode(h, buf);
  size_t n = h->len <= 512 ? h->len : 0;
  if (n) memcpy(buf + PS_HDR_BYTES, payload, n);
  size_t total = PS_HDR_BYTES + n;
  if (f->tx_auth) {
    ps_mac_frame(f->key, PS_DIR_HEAD, f->tx_seq++, buf, buf + PS_HDR_BYTES, n, buf + total);
    total += PS_TAG_BYTES;
    memcpy(f->last, buf, total);
    f->last_len = total;
  }
  if (flip) buf[flip % total] ^= (uint8_t)(1u << (flip % 8));
  feed(ctx, s, buf, total, chunk);
}

static void run(struct ps_ctx *ctx, struct in *in) {
  static const uint8_t sessions[2][PS_SESSION_BYTES] = {{1, 2, 3}, {9, 8, 7}};
  uint8_t payload[512];
  while (in->n) {
    uint8_t cmd = u8(in);
    int s = cmd & (NSLOT - 1);
    struct fake *f = slot[s];
    if (!f || !f->c) return; /* out of connections */
    size_t chunk = 1 + (u8(in) % 64);
    switch ((cmd >> 2) % 13) {
    case 0: { /* raw bytes */
      size_t n = u8(in);
      if (n > in->n) n = in->n;
      feed(ctx, s, in->p, n, chunk);
      in->p += n;
      in->n -= n;
      break;
    }
    case 1: { /* HELLO */
      uint8_t a = u8(in), b = u8(in);
      struct ps_hello hello = {.version = (a & 0x80) ? PS_VERSION + (b & 4 ? -1 : 1) : PS_VERSION};
      memcpy(hello.session, sessions[a & 1], PS_SESSION_BYTES);
      hello.nranks = 1 + ((a >> 1) & 3);
      hello.rank = (a >> 3) & 3;
      ps_auth_random(hello.nonce, sizeof hello.nonce);
      uint8_t raw[PS_HELLO_BYTES];
      ps_hello_encode(&hello, raw);
      struct ps_hdr h = {.type = PS_HELLO, .len = PS_HELLO_BYTES, .flags = (uint8_t)(b & 7)};
      if (!f->hello_sent) { /* the server answers the first one only */
        f->hello_sent = 1;
        memcpy(f->t.hello, raw, PS_HELLO_BYTES);
        f->t.flags = h.flags;
        f->rank = hello.rank;
        f->nranks = hello.nranks;
      }
      send_frame(ctx, s, &h, raw, chunk, 0);
      break;
    }
    case 2: { /* AUTH, right or wrong */
      uint8_t a = u8(in);
      uint8_t proof[PS_PROOF_BYTES] = {0};
      if (f->have_nonce) ps_auth_head_proof((a & 1) ? "wrong" : TOKEN, &f->t, proof);
      struct ps_hdr h = {.type = PS_AUTH, .len = PS_AUTH_BYTES};
      int first = !f->auth_sent && f->have_nonce && !(a & 1);
      if (first) { /* before sending: the PROOF comes back while it is fed */
        f->auth_sent = 1;
        ps_auth_conn_key(TOKEN, &f->t, f->key);
      }
      send_frame(ctx, s, &h, proof, chunk, 0);
      if (first) f->tx_auth = (f->t.flags & PS_FLAG_AUTH) != 0; /* tagged from here on */
      break;
    }
    case 3: { /* PUSH */
      uint8_t a = u8(in), b = u8(in), l = u8(in);
      struct ps_hdr h = {.type = PS_PUSH, .seq = a & 3, .part = (a >> 2) & 3,
                         .dtype = (uint8_t)(b % 12), .op = (uint8_t)((b >> 4) & 3),
                         .rank = (a & 0x40) ? ((a >> 4) & 3) : f->rank, .len = 1u + l};
      for (int i = 0; i < PS_MAX_SERVERS; i++) h.weights[i] = (uint8_t)(a + i);
      for (uint32_t i = 0; i < h.len; i++) payload[i] = u8(in);
      send_frame(ctx, s, &h, payload, chunk, 0);
      break;
    }
    case 4: { /* DONE */
      uint8_t a = u8(in);
      struct ps_hdr h = {.type = PS_DONE, .seq = a & 3, .part = (a >> 2) & 3};
      send_frame(ctx, s, &h, NULL, chunk, 0);
      break;
    }
    case 5: /* the peer disconnects; a new connection takes the slot */
      ps_conn_eof(f->c, (chunk & 1) ? NULL : "reset");
      settle(ctx, s);
      break;
    case 6: /* time passes */
      fake_now += (uint64_t)chunk * 50000000ull;
      for (int i = 0; i < NSLOT; i++) {
        if (!slot[i] || !slot[i]->c) continue;
        ps_conn_tick(slot[i]->c);
        settle(ctx, i);
      }
      break;
    case 7: /* the socket's appetite changes; writable again if it can take something */
      f->mode = (enum wmode)(chunk & 3);
      f->part_budget = chunk * 7;
      if (f->want && f->mode != W_FULL) ps_conn_flush(f->c);
      settle(ctx, s);
      break;
    case 8: /* a RELEASE/RESULT storm: every slot becomes fully writable */
      for (int i = 0; i < NSLOT; i++) {
        if (!slot[i] || !slot[i]->c) continue;
        slot[i]->mode = W_ALL;
        if (slot[i]->want) ps_conn_flush(slot[i]->c);
        settle(ctx, i);
      }
      break;
    case 9: { /* every slot pushes the same partition (its own rank), whole frames */
      uint8_t a = u8(in), b = u8(in), l = u8(in);
      struct ps_hdr h = {.type = PS_PUSH, .seq = a & 3, .part = (a >> 2) & 3,
                         .dtype = (uint8_t)(b % 12), .op = (uint8_t)((b >> 4) & 3), .len = 1u + l};
      for (uint32_t i = 0; i < h.len; i++) payload[i] = (uint8_t)(a * i + b);
      for (int i = 0; i < NSLOT; i++) {
        if (!slot[i] || !slot[i]->c) continue;
        h.rank = slot[i]->rank;
        send_frame(ctx, i, &h, payload, chunk, 0);
      }
      break;
    }
    case 10: { /* every slot says DONE for the same partition */
      uint8_t a = u8(in);
      struct ps_hdr h = {.type = PS_DONE, .seq = a & 3, .part = (a >> 2) & 3};
      for (int i = 0; i < NSLOT; i++)
        if (slot[i] && slot[i]->c) send_frame(ctx, i, &h, NULL, chunk, 0);
      break;
    }
    case 11: { /* GONE; or, on the path: a PUSH with a bit flipped after its tag */
      uint8_t a = u8(in), b = u8(in);
      if (b & 1) {
        struct ps_hdr h = {.type = PS_GONE, .seq = a & 7, .part = (a >> 3) & 7};
        send_frame(ctx, s, &h, NULL, chunk, 0);
      } else {
        struct ps_hdr h = {.type = PS_PUSH, .seq = a & 3, .part = (a >> 2) & 3, .dtype = 7,
                           .rank = f->rank, .len = 8};
        memset(payload, a, 8);
        send_frame(ctx, s, &h, payload, chunk, 1u + b);
      }
      break;
    }
    case 12: /* on the path: the last tagged frame again */
      if (f->last_len) feed(ctx, s, f->last, f->last_len, chunk);
      break;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fake_now = 1000000000ull;
  nfakes = 0;
  struct ps_ctx_opts o = {
      .token = TOKEN,
      .max_memory = 2048,
      .join_timeout_ns = 2000000000ull,
      .handshake_timeout_ns = 1000000000ull,
      .linger_ns = 500000000ull,
      .io = &fake_io,
      .log = quiet_log,
      .verbose = 1,
      .clock = fake_clock,
  };
  struct ps_ctx *ctx = ps_ctx_create(&o);
  CHECK(ctx);
  for (int s = 0; s < NSLOT; s++) open_slot(ctx, s);
  struct in in = {data, size};
  run(ctx, &in);

  /* Teardown: every peer goes away, the owner lets go of everything. */
  for (int s = 0; s < NSLOT; s++) {
    struct fake *f = slot[s];
    if (!f || !f->c) continue;
    ps_conn_eof(f->c, NULL);
    CHECK(ps_conn_done(f->c));
    ps_conn_put(f->c);
    f->c = NULL;
  }
  CHECK(ps_ctx_sessions(ctx) == 0);
  CHECK(ps_ctx_memory(ctx) == 0);
  for (int i = 0; i < nfakes; i++) CHECK(fakes[i].released); /* no reference left behind */
  ps_ctx_destroy(ctx);
  return 0;
}
