/* libFuzzer target: the receive path's message and byte-range logic (net_plugin/stripe/rx.c, compiled
 * in with the socket stream transport), driven through braid_rx_post / braid_rx_progress on a comm of 1 to 4 socket streams (one
 * stream: no acknowledgements, frames in order; several: acknowledgements, any chunk on any
 * stream, re-sends cut into other pieces, duplicates, late copies).
 *
 * The input is a script: a configuration byte, then commands (each an opcode byte and its
 * argument bytes; missing bytes read as zero).  The harness plays the sender (messages with a tag
 * and size, payload bytes a function of (message, offset); frames with valid checksummed headers
 * from braid_frame_encode, queued per stream and delivered a fuzzer-chosen number of bytes at a
 * time, so headers arrive cut anywhere), NCCL (receives of 1 to 3 buffers with tags and
 * capacities, posted at any point, before or after their message; test()), the network (a
 * stream closed; acknowledgements the socket takes only part of) and an attacker (a garbled
 * header, an ACK where DATA belongs, a frame whose size or tag contradicts its message, a message
 * out of order without acks).  Checked, besides the sanitizers:
 * - a completed receive's slots hold exactly the bytes sent for the message matched to them
 *   (every byte compared), report its size, and the k-th message with a tag goes to the k-th slot
 *   posted for that tag; a buffer handed back is freed at once (ASan sees any later write);
 * - the comm fails only for a cause the script gave it (a receive too small, the unexpected-bytes
 *   limit, a stream closed, an attacker's frame); once a garbled header or an out-of-order frame
 *   has been read, the comm has failed;
 * - every acknowledgement decodes, counts no more frames than were delivered whole on its stream,
 *   never goes back, and says "held" only for messages all of whose bytes were delivered;
 * - at the end, with every queued byte delivered and a receive for every message, each message
 *   whose bytes were all delivered (and whose predecessors were seen) completes. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/socket/ack_out.h"
#include "comm/comm.h"
#include "stripe/stripe.h"
#include "net_stubs.h"
#include "transport/socket/sock_stream.h"
#include "wire/wire.h"

#include "fuzz_check.h"
#include "fuzz_script.h"

#define MAX_STREAMS 4
#define MAX_MSGS 48
#define NTAGS 3
#define MAX_OUT 8          /* receives outstanding at once (NCCL posts at most 8) */
#define MAX_SLOT_RANK 128
#define MAX_FRAMES 1024    /* frames per stream and input */
#define BIG_CAP 24576      /* larger than any message */

/* ---------- the script ---------- */


/* ---------- the sender ---------- */

struct range {
  uint64_t lo, hi;
};
struct msg {
  size_t size;
  int tag;
  struct range *got; /* bytes delivered inside whole valid frames, merged */
  int ngot;
  bool seen;         /* a whole valid frame of it was delivered */
  bool verified;     /* completed into a receive, bytes checked */
};
static struct msg msgs[MAX_MSGS];
static int nmsgs;
static size_t noack_cursor_msg, noack_cursor_off; /* one stream: the next byte to frame */


static void range_add(struct msg *m, uint64_t lo, uint64_t hi) {
  int w = 0;
  for (int i = 0; i < m->ngot; i++) {
    if (m->got[i].hi < lo || m->got[i].lo > hi) {
      m->got[w++] = m->got[i];
      continue;
    }
    if (m->got[i].lo < lo) lo = m->got[i].lo;
    if (m->got[i].hi > hi) hi = m->got[i].hi;
  }
  m->got = realloc(m->got, (size_t)(w + 1) * sizeof *m->got);
  CHECK(m->got);
  m->got[w] = (struct range){lo, hi};
  m->ngot = w + 1;
}

static bool msg_delivered(const struct msg *m) {
  if (!m->seen) return false;
  if (m->size == 0) return true;
  return m->ngot == 1 && m->got[0].lo == 0 && m->got[0].hi == m->size;
}

/* A frame queued on a stream: its bytes end at `end` in the stream. */
struct qframe {
  uint64_t end;
  int64_t seq; /* -1: not a valid frame */
  uint64_t off, len;
};

struct hstream {
  int fd;              /* the harness's end */
  uint8_t *q;          /* bytes queued, from q_sent on not yet written */
  size_t q_len, q_cap;
  uint64_t q_sent;     /* bytes written into the socket */
  struct qframe *frames; /* MAX_FRAMES */
  int nframes, frames_whole; /* frames queued; frames delivered whole */
  bool closed;         /* shut down: nothing more is written */
  int64_t bad_at;      /* where an attacker's frame that must fail the comm starts, -1 */
  bool attacked;       /* some frame of the attacker's was queued here */
  /* acknowledgements read back */
  uint8_t ack[BRAID_FRAME_HDR_BYTES];
  size_t ack_got;
  uint64_t ack_frames, ack_held;
};
static struct hstream hs[MAX_STREAMS];

static void q_put(struct hstream *h, const void *p, size_t n) {
  if (h->q_len + n > h->q_cap) {
    size_t cap = h->q_cap ? h->q_cap : 4096;
    while (cap < h->q_len + n) cap *= 2;
    h->q = realloc(h->q, cap);
    CHECK(h->q);
    h->q_cap = cap;
  }
  memcpy(h->q + h->q_len, p, n);
  h->q_len += n;
}

static void q_frame(struct hstream *h, const struct braid_frame *f, int64_t seq) {
  if (h->closed || h->nframes == MAX_FRAMES) return;
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(f, hdr);
  q_put(h, hdr, sizeof hdr);
  uint8_t buf[256];
  for (uint64_t k = 0; k < f->len;) {
    size_t n = f->len - k < sizeof buf ? (size_t)(f->len - k) : sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = seq >= 0 ? content((uint64_t)seq, f->offset + k + i) : 0xEE;
    q_put(h, buf, n);
    k += n;
  }
  h->frames[h->nframes++] = (struct qframe){.end = h->q_len, .seq = seq, .off = f->offset, .len = f->len};
}

/* ---------- the comm under test ---------- */

static struct braid_comm comm;
static struct braid_comm *c = &comm;
static int nstreams;
static bool acks;

/* NCCL's side: receives outstanding, and which slot rank each slot of each tag has. */
struct out {
  struct braid_req *r;
  int rank[BRAID_MAX_RECVS]; /* k: the k-th slot posted for its tag */
};
static struct out outs[MAX_OUT];
static int nouts;
static int slots_posted[NTAGS];
static int64_t msg_of_rank[NTAGS][MAX_SLOT_RANK]; /* the k-th message created with a tag */
static int msgs_of_tag[NTAGS];
static bool cap_too_small; /* some slot is smaller than the message it pairs with */
static bool stream_closed;
static bool unexpected_limited;
static bool loose; /* an attacker's frame may have defined a message: pairing and bytes unchecked */

static size_t consumed(int i) {
  int pending = 0;
  if (ioctl(c->streams[i].fd, FIONREAD, &pending) != 0) pending = 0;
  const struct braid_sock_stream *ss = c->streams[i].tp;
  return hs[i].q_sent - (size_t)pending - (ss->stage_len - ss->stage_off);
}

/* The comm failed: was it allowed to? */
static void check_failure(void) {
  if (!c->err) return;
  bool attacked = false;
  for (int i = 0; i < nstreams; i++) attacked |= hs[i].attacked;
  if (attacked) return;
  if (c->err == ncclInvalidUsage && strstr(fuzz_fail_msg, "size mismatch")) {
    CHECK(cap_too_small);
    return;
  }
  if (strstr(fuzz_fail_msg, "ahead of their receives")) {
    CHECK(unexpected_limited || strstr(fuzz_fail_msg, "messages arrived"));
    return;
  }
  if (stream_closed && (strstr(fuzz_fail_msg, "closed") || strstr(fuzz_fail_msg, "no bytes for")))
    return;
  fprintf(stderr, "the comm failed on a valid script: %s\n", fuzz_fail_msg);
  CHECK(!"unexpected failure");
}

/* Every attacker's frame that must fail the comm and has been read has failed it. */
static void check_detected(void) {
  for (int i = 0; i < nstreams; i++)
    if (hs[i].bad_at >= 0 && consumed(i) > (size_t)hs[i].bad_at && !c->err) {
      fprintf(stderr, "stream %d: a garbled or out-of-order frame at byte %lld was read and "
              "accepted\n", i, (long long)hs[i].bad_at);
      CHECK(!"malformed frame silently accepted");
    }
}

static void read_acks(void) {
  for (int i = 0; i < nstreams; i++) {
    struct hstream *h = &hs[i];
    for (;;) {
      ssize_t n = recv(h->fd, h->ack + h->ack_got, sizeof h->ack - h->ack_got, MSG_DONTWAIT);
      if (n <= 0) break;
      h->ack_got += (size_t)n;
      if (h->ack_got < sizeof h->ack) continue;
      h->ack_got = 0;
      CHECK(acks); /* one stream: nothing comes back */
      struct braid_frame f;
      char why[160];
      if (braid_frame_decode(h->ack, &f, why, sizeof why) != 0) {
        fprintf(stderr, "stream %d: acknowledgement does not decode: %s\n", i, why);
        CHECK(!"garbled acknowledgement");
      }
      CHECK(f.type == BRAID_FRAME_ACK);
      CHECK(f.seq >= h->ack_frames);               /* cumulative */
      CHECK(f.seq <= (uint64_t)h->frames_whole);   /* only frames delivered whole */
      CHECK(f.offset >= h->ack_held || f.offset == 0);
      for (uint64_t q = h->ack_held; q < f.offset && !loose; q++) {
        CHECK(q < (uint64_t)nmsgs);
        if (!msg_delivered(&msgs[q])) {
          fprintf(stderr, "stream %d: acknowledgement says message %llu is held, but not all "
                  "of its bytes were delivered\n", i, (unsigned long long)q);
          CHECK(!"held claimed too early");
        }
      }
      h->ack_frames = f.seq;
      if (f.offset > h->ack_held) h->ack_held = f.offset;
    }
  }
}

/* Writes up to n bytes of stream i's queue (what the socket takes). */
static void deliver(int i, size_t n) {
  struct hstream *h = &hs[i];
  while (n && h->q_sent < h->q_len && !h->closed) {
    size_t k = h->q_len - h->q_sent < n ? h->q_len - h->q_sent : n;
    ssize_t w = send(h->fd, h->q + h->q_sent, k, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w <= 0) break;
    h->q_sent += (size_t)w;
    n -= (size_t)w;
  }
  while (h->frames_whole < h->nframes && h->frames[h->frames_whole].end <= h->q_sent) {
    const struct qframe *f = &h->frames[h->frames_whole++];
    if (f->seq < 0) continue;
    struct msg *m = &msgs[f->seq];
    m->seen = true;
    if (f->len) range_add(m, f->off, f->off + f->len);
  }
}

static void release_out(int k) {
  struct braid_req *r = outs[k].r;
  for (int i = 0; i < r->n; i++) free(r->slot[i].buf);
  r->kind = BRAID_REQ_FREE;
  outs[k] = outs[--nouts];
}

/* NCCL's test() on every outstanding receive: done ones checked and handed back. */
static void test_all(void) {
  for (int k = 0; k < nouts;) {
    struct braid_req *r = outs[k].r;
    if (!r->done) {
      k++;
      continue;
    }
    CHECK(r->ndone == r->n);
    for (int i = 0; i < r->n; i++) {
      struct braid_recv_slot *sl = &r->slot[i];
      int rank = outs[k].rank[i];
      CHECK(sl->done);
      CHECK(sl->size <= sl->cap);
      if (loose) continue;
      CHECK(rank < msgs_of_tag[sl->tag]);
      int64_t seq = msg_of_rank[sl->tag][rank];
      if (sl->msg != seq)
        fprintf(stderr, "slot %d (tag %d, rank %d) got message %lld, want %lld\n", i, sl->tag,
                rank, (long long)sl->msg, (long long)seq);
      CHECK(sl->msg == seq); /* per tag, messages go to receives in order */
      struct msg *m = &msgs[seq];
      CHECK(sl->size == m->size);
      CHECK(m->size <= sl->cap);
      for (size_t b = 0; b < m->size; b++)
        if ((uint8_t)sl->buf[b] != content((uint64_t)seq, b)) {
          fprintf(stderr, "message %lld byte %zu: got 0x%02x, sent 0x%02x\n", (long long)seq, b,
                  (uint8_t)sl->buf[b], content((uint64_t)seq, b));
          CHECK(!"a completed receive holds other bytes than were sent");
        }
      CHECK(!m->verified);
      m->verified = true;
    }
    release_out(k);
  }
}

static void progress(bool read) {
  if (!c->err) braid_rx_progress(c, read);
  read_acks();
  check_failure();
  check_detected();
  test_all();
}

static struct braid_req *req_alloc(void) {
  for (int i = 0; i < c->nreqs; i++)
    if (c->reqs[i].kind == BRAID_REQ_FREE) {
      struct braid_req *r = &c->reqs[i];
      memset(r, 0, sizeof *r);
      r->kind = BRAID_REQ_RECV;
      r->comm = c;
      r->index = i;
      return r;
    }
  return NULL;
}

/* irecv of n slots; cap SIZE_MAX: big enough for anything; SIZE_MAX - 2 + d (d = -1, 0, 1):
 * the size of the message this slot pairs with, plus d (big when that message is not known yet). */
static void post(int n, const int *tags, const size_t *caps) {
  if (c->err || nouts == MAX_OUT) return;
  for (int i = 0; i < n; i++)
    if (slots_posted[tags[i]] == MAX_SLOT_RANK) return;
  struct braid_req *r = req_alloc();
  CHECK(r);
  struct out *o = &outs[nouts++];
  o->r = r;
  r->n = n;
  for (int i = 0; i < n; i++) {
    size_t cap = caps[i];
    int rank0 = slots_posted[tags[i]];
    if (cap >= SIZE_MAX - 3 && cap != SIZE_MAX && rank0 < msgs_of_tag[tags[i]]) {
      size_t want = msgs[msg_of_rank[tags[i]][rank0]].size;
      cap = want + (cap - (SIZE_MAX - 2));
      if (cap == SIZE_MAX) cap = 0; /* (0 - 1) */
    } else if (cap >= SIZE_MAX - 3) {
      cap = BIG_CAP;
    }
    char *buf = malloc(cap ? cap : 1);
    CHECK(buf);
    memset(buf, 0xA5, cap);
    r->slot[i] = (struct braid_recv_slot){.buf = buf, .cap = cap, .tag = tags[i], .msg = -1};
    o->rank[i] = slots_posted[tags[i]]++;
    int rank = o->rank[i];
    if (rank < msgs_of_tag[tags[i]] && msgs[msg_of_rank[tags[i]][rank]].size > cap) cap_too_small = true;
  }
  braid_rx_post(c, r);
  read_acks();
  check_failure();
  check_detected();
  test_all();
}

static void new_msg(int tag, size_t size) {
  if (nmsgs == MAX_MSGS || msgs_of_tag[tag] == MAX_SLOT_RANK) return;
  struct msg *m = &msgs[nmsgs];
  *m = (struct msg){.size = size, .tag = tag};
  int rank = msgs_of_tag[tag]++;
  msg_of_rank[tag][rank] = nmsgs;
  /* a receive already posted for this rank: its capacity may be too small */
  for (int k = 0; k < nouts; k++)
    for (int i = 0; i < outs[k].r->n; i++)
      if (outs[k].r->slot[i].tag == tag && outs[k].rank[i] == rank && outs[k].r->slot[i].cap < size)
        cap_too_small = true;
  nmsgs++;
}

static size_t pick_size(uint8_t cls, uint16_t v) {
  switch (cls % 4) {
    case 0: return 0;
    case 1: return 1 + v % 64;
    case 2: return 1 + v % 3000;
    default: return 1 + v % 20000;
  }
}

static void frame_of(int s, int64_t seq, uint64_t off, uint64_t len) {
  struct msg *m = &msgs[seq];
  struct braid_frame f = {.type = BRAID_FRAME_DATA, .len = (uint32_t)len, .seq = (uint64_t)seq,
                          .offset = off, .size = m->size, .tag = m->tag};
  q_frame(&hs[s], &f, seq);
}

/* Without acks: the next len bytes of the in-order byte stream. */
static void noack_frame(uint64_t len) {
  if (noack_cursor_msg >= (size_t)nmsgs || hs[0].bad_at >= 0) return;
  struct msg *m = &msgs[noack_cursor_msg];
  uint64_t left = m->size - noack_cursor_off;
  if (len > left) len = left;
  if (!len && left) len = 1;
  frame_of(0, (int64_t)noack_cursor_msg, noack_cursor_off, len);
  noack_cursor_off += len;
  if (noack_cursor_off == m->size) noack_cursor_msg++, noack_cursor_off = 0;
}

/* An attacker's frame on stream s. */
static void attack(int s, uint8_t kind, uint8_t arg) {
  struct hstream *h = &hs[s];
  if (h->closed || h->bad_at >= 0) return;
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  int64_t at = (int64_t)h->q_len;
  bool must_fail = true;
  struct braid_frame f = {.type = BRAID_FRAME_DATA, .len = 16, .seq = 0, .offset = 0, .size = 16};
  switch (kind % 5) {
    case 0: /* a valid frame header with one bit flipped */
      braid_frame_encode(&f, hdr);
      hdr[arg % sizeof hdr] ^= (uint8_t)(1u << (arg >> 5 & 7));
      q_put(h, hdr, sizeof hdr);
      break;
    case 1: /* an acknowledgement on the data path */
      f = (struct braid_frame){.type = BRAID_FRAME_ACK, .seq = arg};
      braid_frame_encode(&f, hdr);
      q_put(h, hdr, sizeof hdr);
      break;
    case 2: { /* a frame whose size or tag contradicts its message's */
      if (!nmsgs) return;
      int64_t seq = arg % nmsgs;
      struct msg *m = &msgs[seq];
      f.seq = (uint64_t)seq;
      f.size = m->size + (arg & 1 ? 1 : 0);
      f.tag = m->tag + (arg & 1 ? 0 : 7);
      f.len = f.size ? 1 : 0;
      q_frame(h, &f, -1);
      must_fail = false; /* a late copy of a completed message is dropped unread */
      loose = true;
      break;
    }
    case 3: /* one stream: a message ahead of its turn; several: a message far ahead */
      f.seq = (uint64_t)nmsgs + 1 + arg % 4;
      f.size = 8, f.len = 8, f.tag = 0;
      q_frame(h, &f, -1);
      must_fail = !acks;
      loose = true;
      break;
    default: { /* arbitrary header bytes */
      for (size_t i = 0; i < sizeof hdr; i++) hdr[i] = rd8();
      struct braid_frame g;
      char why[160];
      if (braid_frame_decode(hdr, &g, why, sizeof why) == 0) return; /* (sealed by chance: skip) */
      q_put(h, hdr, sizeof hdr);
      break;
    }
  }
  h->attacked = true;
  if (h->nframes < MAX_FRAMES && (kind % 5 == 0 || kind % 5 == 1 || kind % 5 == 4))
    h->frames[h->nframes++] = (struct qframe){.end = h->q_len, .seq = -1};
  if (must_fail) h->bad_at = at;
}

static ssize_t ack_send_budget = -1; /* < 0: no limit */
static ssize_t short_ack_send(int fd, const void *buf, size_t len, int flags) {
  if (ack_send_budget >= 0 && len > (size_t)ack_send_budget) len = (size_t)ack_send_budget;
  if (!len) return errno = EAGAIN, -1;
  return send(fd, buf, len, flags);
}

static void setup(uint8_t cfg) {
  memset(c, 0, sizeof *c);
  nstreams = 1 + (cfg & 3);
  acks = nstreams > 1;
  c->kind = BRAID_COMM_RECV;
  snprintf(c->peer, sizeof c->peer, "fuzz");
  c->nstreams = c->nrails = c->nprimary = nstreams;
  c->acks = acks;
  c->timeout_ns = 10000000000ull;
  static const size_t lim[4] = {1u << 20, 1u << 20, 30000, 2000};
  c->rx.unexpected_max = lim[cfg >> 2 & 3];
  unexpected_limited = c->rx.unexpected_max < (1u << 20);
  c->streams = calloc((size_t)nstreams, sizeof *c->streams);
  c->reqs = calloc(BRAID_RECV_REQS, sizeof *c->reqs);
  c->rx.msgs = calloc(BRAID_MSG_WINDOW, sizeof *c->rx.msgs);
  CHECK(c->streams && c->reqs && c->rx.msgs);
  c->nreqs = BRAID_RECV_REQS;
  for (int i = 0; i < BRAID_MSG_WINDOW; i++) c->rx.msgs[i].seq = -1;
  for (int i = 0; i < nstreams; i++) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    c->streams[i].fd = sv[0];
    c->streams[i].rail = i;
    struct qframe *fr = hs[i].frames ? hs[i].frames : malloc(MAX_FRAMES * sizeof *fr);
    CHECK(fr);
    hs[i] = (struct hstream){.fd = sv[1], .bad_at = -1, .frames = fr};
  }
  c->sops = &braid_sock_stream_ops;
  CHECK(c->sops->start(c) == ncclSuccess);
  CHECK(braid_rx_init(c) == ncclSuccess);
  braid_ack_send = short_ack_send;
  ack_send_budget = -1;
}

static void teardown(void) {
  for (int i = 0; i < nstreams; i++) {
    c->sops->close(c, &c->streams[i]);
    close(c->streams[i].fd);
    close(hs[i].fd);
    free(hs[i].q);
  }
  while (nouts) release_out(0);
  braid_rx_free(c);
  free(c->streams);
  free(c->reqs);
  free(c->rx.msgs);
  for (int i = 0; i < nmsgs; i++) free(msgs[i].got);
  nmsgs = 0;
  noack_cursor_msg = noack_cursor_off = 0;
  memset(slots_posted, 0, sizeof slots_posted);
  memset(msgs_of_tag, 0, sizeof msgs_of_tag);
  cap_too_small = stream_closed = loose = false;
  fuzz_fail_msg[0] = 0;
}

/* Everything queued goes out, every message gets a receive: what was delivered completes. */
static void drain(void) {
  bool attacked = false;
  for (int i = 0; i < nstreams; i++) attacked |= hs[i].attacked;
  ack_send_budget = -1;
  for (int round = 0; round < 400 && !c->err; round++) {
    for (int i = 0; i < nstreams; i++) deliver(i, SIZE_MAX);
    for (int t = 0; t < NTAGS; t++)
      while (slots_posted[t] < msgs_of_tag[t] && nouts < MAX_OUT && !c->err) {
        int tags[1] = {t};
        size_t caps[1] = {SIZE_MAX};
        post(1, tags, caps);
      }
    progress(true);
    bool queued = false;
    for (int i = 0; i < nstreams; i++) queued |= !hs[i].closed && hs[i].q_sent < hs[i].q_len;
    if (!queued && round > 4) {
      bool more = false;
      for (int q = 0; q < nmsgs; q++) more |= !msgs[q].verified;
      if (!more) break;
      if (round > 8) break; /* nothing moves: the rest is checked below */
    }
  }
  if (c->err || attacked) return;
  /* Progress is guaranteed for a message all of whose bytes were delivered once every earlier
   * message has been seen (matching is in sequence order), given a receive for it, which a
   * receive for every earlier message with its tag precedes. */
  for (int q = 0; q < nmsgs; q++) {
    if (!msgs[q].seen) break;
    if (!msg_delivered(&msgs[q]) || msgs[q].verified) continue;
    /* posted receives cover it? (MAX_OUT may have kept it from being posted yet) */
    int rank = -1;
    for (int k = 0; k < msgs_of_tag[msgs[q].tag]; k++)
      if (msg_of_rank[msgs[q].tag][k] == q) rank = k;
    if (rank >= slots_posted[msgs[q].tag]) continue;
    bool slot_done = false; /* (a grouped receive completes once all its slots have) */
    for (int k = 0; k < nouts; k++)
      for (int i = 0; i < outs[k].r->n; i++)
        if (outs[k].r->slot[i].tag == msgs[q].tag && outs[k].rank[i] == rank)
          slot_done = outs[k].r->slot[i].done;
    if (slot_done) continue;
    fprintf(stderr, "message %d (tag %d, %zu bytes) was delivered whole and has a receive, but "
            "never completed\n", q, msgs[q].tag, msgs[q].size);
    CHECK(!"delivered message never completed");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in_p = data, in_n = size;
  setup(rd8());
  while (in_n) {
    uint8_t op = rd8();
    switch (op % 12) {
      case 0: { /* a new message */
        uint8_t t = rd8(), cls = rd8();
        new_msg(t % NTAGS, pick_size(cls, rd16()));
        break;
      }
      case 1: { /* one frame */
        uint8_t sel = rd8();
        uint16_t a = rd16(), b = rd16();
        if (!acks) {
          noack_frame(1 + b % 8192);
          break;
        }
        if (!nmsgs) break;
        int64_t seq = sel % 2 ? nmsgs - 1 - (sel >> 1) % nmsgs : (sel >> 1) % nmsgs;
        struct msg *m = &msgs[seq];
        int s = (sel >> 4) % nstreams;
        if (hs[s].bad_at >= 0) break;
        uint64_t off = m->size ? a % m->size : 0;
        uint64_t len = m->size ? 1 + b % (m->size - off) : 0;
        frame_of(s, seq, off, len);
        break;
      }
      case 2: { /* a whole message, in pieces of one size over the streams (a send, a re-send) */
        uint8_t sel = rd8(), piece = rd8();
        if (!acks) {
          noack_frame(1 + (uint64_t)piece * 64);
          break;
        }
        if (!nmsgs) break;
        int64_t seq = nmsgs - 1 - sel % nmsgs;
        struct msg *m = &msgs[seq];
        uint64_t p = 1 + (uint64_t)piece * 97, off = 0;
        if (p < m->size / 32) p = m->size / 32; /* at most 32 pieces */
        int s = (sel >> 5) % nstreams;
        do {
          uint64_t len = m->size - off < p ? m->size - off : p;
          if (hs[s].bad_at < 0) frame_of(s, seq, off, len);
          off += len;
          s = (s + 1) % nstreams;
        } while (off < m->size);
        break;
      }
      case 3: { /* deliver bytes of one stream */
        uint8_t sel = rd8(), amt = rd8();
        deliver(sel % nstreams, amt == 0 ? SIZE_MAX : (size_t)amt * (sel & 0x80 ? 97 : 1));
        break;
      }
      case 4: /* deliver everything */
        for (int i = 0; i < nstreams; i++) deliver(i, SIZE_MAX);
        break;
      case 5: { /* irecv */
        uint8_t n = 1 + rd8() % 3;
        int tags[3];
        size_t caps[3];
        for (int i = 0; i < n; i++) {
          uint8_t t = rd8(), cp = rd8();
          tags[i] = t % NTAGS;
          caps[i] = !(cp & 0x80) ? SIZE_MAX : cp & 0x40 ? (size_t)(cp & 0x3f) * 160 : SIZE_MAX - 3 + cp % 3;
        }
        post(n, tags, caps);
        break;
      }
      case 6:
      case 7: /* test() */
        progress(true);
        break;
      case 8: /* progress without reading (irecv's own pass) */
        progress(false);
        break;
      case 9: { /* the network: a stream closes, or acknowledgements are cut short */
        uint8_t sel = rd8();
        if (sel & 1) {
          ack_send_budget = sel & 2 ? -1 : 1 + (sel >> 2) % 40; /* (none at all: rx waits 20 ms) */
        } else if (acks || (sel & 0x80)) {
          int s = (sel >> 1) % nstreams;
          if (!hs[s].closed) {
            shutdown(hs[s].fd, SHUT_WR);
            hs[s].closed = true;
            stream_closed = true;
          }
        }
        break;
      }
      case 10: { /* the clock */
        fuzz_now_ns += (uint64_t)rd8() * 20000;
        break;
      }
      default: { /* an attacker's frame */
        uint8_t sel = rd8(), kind = rd8(), arg = rd8();
        attack(sel % nstreams, kind, arg);
        break;
      }
    }
  }
  drain();
  teardown();
  return 0;
}
