/* libFuzzer target: acknowledgement handling on the send side (net_plugin/stripe/tx.c's tx_ack, with the
 * rail scheduler sched.c and the socket stream transport, compiled in), driven through braid_tx_send / braid_tx_progress on a
 * comm of 2 to 4 socket streams (acknowledgements on).
 *
 * The input is a script: a configuration byte, then commands (an opcode byte and its argument
 * bytes; missing bytes read as zero): sends of fuzzer-chosen sizes and tags, progress (the clock
 * moving on), the receiver's acknowledgements, valid (a frame count between the last one and the
 * frames the harness has read whole on that stream, a "held below" mark anywhere up to the
 * sends posted), written whole or cut in two, and garbled ones (a flipped bit, a DATA frame, a
 * count beyond the frames the sender started, a count that goes back, a held mark beyond the
 * sends posted), and streams closing.  Checked, besides the sanitizers:
 * - every frame the sender writes decodes, belongs to a posted send (sequence, size, tag) and
 *   carries that send's bytes;
 * - a valid acknowledgement never fails the comm; a garbled one read on a live stream always
 *   does (at the progress call that reads it);
 * - after every call exactly the sends fully acknowledged are done: those whose frames, counted
 *   by the acknowledgements in stream order, cover every byte, or that lie below the held mark. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm.h"
#include "stripe/stripe.h"
#include "net_stubs.h"
#include "stripe/sched.h"
#include "transport/socket/sock_stream.h"
#include "wire/wire.h"

#include "fuzz_check.h"
#include "fuzz_script.h"

#define MAX_STREAMS 4
#define MAX_SENDS 48
#define MAX_FRAMES 4096 /* per stream; an input that makes more stops there (saturated) */

struct send {
  struct braid_req *r;
  char *data;
  size_t size;
  int tag;
  uint8_t *acked; /* per byte: covered by an acknowledged frame (size 0: [0] = any frame acked) */
};
static struct send sends[MAX_SENDS];
static int nsends;
static uint64_t held; /* the highest held-below mark acknowledged */

struct rframe {
  uint64_t seq, off, len;
};
struct hstream {
  int fd;
  bool closed;
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  size_t hdr_got;
  struct braid_frame cur; /* the frame whose payload is being read */
  uint64_t left, pos;
  bool in_payload;
  struct rframe *frames;
  int nframes;   /* read whole */
  int nacked;    /* frames covered by the acknowledgements sent */
  bool stalled;  /* the receiver reads nothing: the sender's socket fills, frames wait unwritten */
};
static struct hstream hs[MAX_STREAMS];

static struct braid_comm comm;
static struct braid_comm *c = &comm;
static int nstreams;
static bool garbled_sent; /* a garbled acknowledgement was sent (the comm may fail any time after) */
static bool saturated;    /* a stream's frame log is full: the input ends there */
static bool all_closed_ok;

/* Reads what the sender wrote on stream i: frames checked and recorded. */
static void read_frames(int i) {
  struct hstream *h = &hs[i];
  if (h->closed || h->stalled) return;
  uint8_t buf[8192];
  for (;;) {
    ssize_t n = recv(h->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return;
    for (ssize_t k = 0; k < n;) {
      if (!h->in_payload) {
        size_t t = BRAID_FRAME_HDR_BYTES - h->hdr_got;
        if (t > (size_t)(n - k)) t = (size_t)(n - k);
        memcpy(h->hdr + h->hdr_got, buf + k, t);
        h->hdr_got += t, k += (ssize_t)t;
        if (h->hdr_got < BRAID_FRAME_HDR_BYTES) continue;
        h->hdr_got = 0;
        char why[160];
        if (braid_frame_decode(h->hdr, &h->cur, why, sizeof why) != 0) {
          fprintf(stderr, "stream %d: the sender wrote a frame that does not decode: %s\n", i, why);
          CHECK(!"garbled frame from the sender");
        }
        CHECK(h->cur.type == BRAID_FRAME_DATA);
        CHECK(h->cur.seq < (uint64_t)nsends);
        const struct send *s = &sends[h->cur.seq];
        CHECK(h->cur.size == s->size && h->cur.tag == s->tag);
        h->left = h->cur.len, h->pos = h->cur.offset;
        h->in_payload = true;
      }
      uint64_t t = h->left < (uint64_t)(n - k) ? h->left : (uint64_t)(n - k);
      const struct send *s = &sends[h->cur.seq];
      if (!s->r->done) /* (a copy of a done send may go out after NCCL reused its buffer) */
        for (uint64_t b = 0; b < t; b++) CHECK(buf[k + (ssize_t)b] == content(h->cur.seq, h->pos + b));
      h->left -= t, h->pos += t, k += (ssize_t)t;
      if (h->left) continue;
      h->in_payload = false;
      if (h->nframes == MAX_FRAMES) saturated = true; /* (the harness's limit, not a finding) */
      else h->frames[h->nframes++] = (struct rframe){h->cur.seq, h->cur.offset, h->cur.len};
    }
  }
}

static bool model_done(const struct send *s, uint64_t seq) {
  if (seq < held) return true;
  if (s->size == 0) return s->acked[0];
  for (size_t b = 0; b < s->size; b++)
    if (!s->acked[b]) return false;
  return true;
}

static void check_state(void) {
  if (c->err) {
    if (garbled_sent) return;
    if (all_closed_ok && (strstr(fuzz_fail_msg, "has failed") || strstr(fuzz_fail_msg, "is down"))) return;
    fprintf(stderr, "the comm failed with no garbled acknowledgement sent: %s\n", fuzz_fail_msg);
    CHECK(!"unexpected failure");
  }
  if (garbled_sent) return;
  for (int q = 0; q < nsends; q++) {
    bool want = model_done(&sends[q], (uint64_t)q);
    if (sends[q].r->done != want) {
      fprintf(stderr, "send %d (%zu bytes): done %d, but fully acknowledged %d\n", q,
              sends[q].size, sends[q].r->done, want);
      CHECK(!"a send's completion does not match its acknowledgements");
    }
  }
}

static void progress(void) {
  fuzz_now_ns += 25000; /* acknowledgements are read at most every 20 us */
  braid_tx_progress(c);
  for (int i = 0; i < nstreams; i++) read_frames(i);
}

/* Writes an acknowledgement, the first cut bytes (0: none) with a progress call between. */
static void ack_write(int i, const uint8_t hdr[BRAID_FRAME_HDR_BYTES], size_t cut) {
  if (cut && cut < BRAID_FRAME_HDR_BYTES) {
    CHECK(send(hs[i].fd, hdr, cut, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)cut);
    progress();
    check_state(); /* (half an acknowledgement changes nothing) */
  } else {
    cut = 0;
  }
  CHECK(send(hs[i].fd, hdr + cut, BRAID_FRAME_HDR_BYTES - cut, MSG_DONTWAIT | MSG_NOSIGNAL) ==
        (ssize_t)(BRAID_FRAME_HDR_BYTES - cut));
}

static void valid_ack(int i, uint8_t a, uint8_t b, uint8_t cut) {
  struct hstream *h = &hs[i];
  if (h->closed || c->streams[i].dead || c->err) return;
  int n = h->nacked + a % (h->nframes - h->nacked + 1);
  uint64_t off = b == 0 ? 0 : b % ((uint64_t)nsends + 1);
  struct braid_frame f = {.type = BRAID_FRAME_ACK, .seq = (uint64_t)n, .offset = off};
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, hdr);
  ack_write(i, hdr, cut % 48);
  for (int k = h->nacked; k < n; k++) {
    struct rframe *fr = &h->frames[k];
    struct send *s = &sends[fr->seq];
    if (s->size == 0) s->acked[0] = 1;
    else memset(s->acked + fr->off, 1, fr->len);
  }
  h->nacked = n;
  if (off > held) held = off;
  progress();
  check_state();
}

static void garbled_ack(int i, uint8_t kind, uint8_t arg) {
  struct hstream *h = &hs[i];
  struct braid_stream *s = &c->streams[i];
  if (h->closed || s->dead || c->err) return;
  struct braid_frame f = {.type = BRAID_FRAME_ACK, .seq = s->frames_acked, .offset = 0};
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  switch (kind % 5) {
    case 0: /* a flipped bit */
      braid_frame_encode(&f, hdr);
      hdr[arg % sizeof hdr] ^= (uint8_t)(1u << (arg >> 5 & 7));
      break;
    case 1: /* a DATA frame on the acknowledgement path */
      f = (struct braid_frame){.type = BRAID_FRAME_DATA, .len = 1, .size = 1 + arg};
      braid_frame_encode(&f, hdr);
      break;
    case 2: /* more frames than the sender started */
      f.seq = s->frames_started + 1 + (arg & 0x80 ? arg & 0x7f : 0); /* the boundary half the time */
      braid_frame_encode(&f, hdr);
      break;
    case 3: /* a count that goes back */
      if (s->frames_acked == 0) return;
      f.seq = s->frames_acked - 1 - (arg & 0x80 ? (arg & 0x7f) % s->frames_acked : 0);
      braid_frame_encode(&f, hdr);
      break;
    default: /* a held mark beyond every send posted */
      f.offset = c->tx.next_seq + 1 + (arg & 0x80 ? arg & 0x7f : 0);
      braid_frame_encode(&f, hdr);
      break;
  }
  garbled_sent = true;
  ack_write(i, hdr, 0);
  progress();
  if (!c->err) {
    fprintf(stderr, "stream %d: garbled acknowledgement (kind %d) accepted\n", i, kind % 5);
    CHECK(!"garbled acknowledgement accepted");
  }
}

static void do_send(size_t size, int tag) {
  if (nsends == MAX_SENDS || c->err) return;
  struct send *s = &sends[nsends];
  s->size = size, s->tag = tag;
  s->data = malloc(size ? size : 1);
  s->acked = calloc(size ? size : 1, 1);
  s->r = calloc(1, sizeof *s->r);
  CHECK(s->data && s->acked && s->r);
  for (size_t b = 0; b < size; b++) s->data[b] = (char)content((uint64_t)nsends, b);
  struct braid_req *r = s->r;
  r->kind = BRAID_REQ_SEND;
  r->comm = c;
  r->data = s->data;
  r->size = size;
  r->tag = tag;
  r->seq = c->tx.next_seq++;
  nsends++;
  braid_tx_send(c, r);
  for (int i = 0; i < nstreams; i++) read_frames(i);
  check_state();
}

static void setup(uint8_t cfg) {
  memset(c, 0, sizeof *c);
  nstreams = 2 + cfg % 3;
  c->kind = BRAID_COMM_SEND;
  snprintf(c->peer, sizeof c->peer, "fuzz");
  c->nstreams = c->nrails = c->nprimary = nstreams;
  c->acks = true;
  c->timeout_ns = 10000000000ull;
  static const size_t chunk[4] = {4096, 1024, 16384, 128};
  c->chunk = chunk[cfg >> 2 & 3];
  c->streams = calloc((size_t)nstreams, sizeof *c->streams);
  CHECK(c->streams);
  for (int i = 0; i < nstreams; i++) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (cfg & 0x20) { /* small socket buffers: frames wait in the sender's batches */
      int sz = 4096;
      setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
      setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    }
    c->streams[i].fd = sv[0];
    c->streams[i].rail = i;
    c->streams[i].rail_name = "fuzz";
    c->streams[i].rail_Bps = (cfg & 0x10) && i ? 1e8 : 1.25e9;
    struct rframe *fr = hs[i].frames ? hs[i].frames : malloc(MAX_FRAMES * sizeof *fr);
    CHECK(fr);
    hs[i] = (struct hstream){.fd = sv[1], .frames = fr};
  }
  c->sops = &braid_sock_stream_ops;
  CHECK(c->sops->start(c) == ncclSuccess);
  CHECK(braid_tx_init(c) == ncclSuccess);
}

static void teardown(void) {
  braid_tx_free(c);
  for (int i = 0; i < nstreams; i++) {
    c->sops->close(c, &c->streams[i]);
    close(c->streams[i].fd);
    if (!hs[i].closed) close(hs[i].fd);
  }
  free(c->streams);
  for (int q = 0; q < nsends; q++) {
    free(sends[q].data);
    free(sends[q].acked);
    free(sends[q].r);
  }
  nsends = 0;
  held = 0;
  garbled_sent = all_closed_ok = saturated = false;
  fuzz_fail_msg[0] = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in_p = data, in_n = size;
  setup(rd8());
  while (in_n && !saturated && !(c->err && garbled_sent)) {
    uint8_t op = rd8();
    switch (op % 9) {
      case 0: { /* isend */
        uint8_t cls = rd8(), tag = rd8();
        uint16_t v = rd16();
        size_t sz = cls % 4 == 0 ? 0 : cls % 4 == 1 ? 1 + v % 200 : cls % 4 == 2 ? 1 + v % 5000 : 1 + v % 40000;
        do_send(sz, tag % 4);
        break;
      }
      case 1:
      case 2: /* test() */
        progress();
        check_state();
        break;
      case 3:
      case 4: { /* a valid acknowledgement */
        uint8_t sel = rd8(), a = rd8(), b = rd8(), cut = rd8();
        valid_ack(sel % nstreams, a, b, cut);
        break;
      }
      case 5: { /* a garbled one */
        uint8_t sel = rd8(), kind = rd8(), arg = rd8();
        garbled_ack(sel % nstreams, kind, arg);
        break;
      }
      case 6: { /* a stream closes */
        int i = rd8() % nstreams;
        if (!hs[i].closed) {
          close(hs[i].fd);
          hs[i].closed = true;
          all_closed_ok = true;
          for (int k = 0; k < nstreams; k++) all_closed_ok &= hs[k].closed;
          progress();
          check_state();
        }
        break;
      }
      case 7: { /* the receiver stops or resumes reading a stream */
        int i = rd8() % nstreams;
        hs[i].stalled = !hs[i].stalled;
        progress();
        check_state();
        break;
      }
      default: /* the clock jumps */
        fuzz_now_ns += (uint64_t)rd8() * 1000000;
        progress();
        check_state();
        break;
    }
  }
  teardown();
  return 0;
}
