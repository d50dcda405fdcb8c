/* The socket stream transport's receive side: a stream's bytes read into a stage (headers and
 * small payloads) or, for the rest of a large payload, straight into place with the next header
 * behind it (one syscall per large frame); acknowledgements written whole across calls
 * (transport/socket/ack_out.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "comm/comm.h"
#include "transport/socket/sock_helper.h"
#include "transport/socket/sock_stream.h"

#define RX_DIRECT_MIN 1024 /* payload remainders at least this big are read straight in */

/* A stream broke: the data path decides (the connection fails, or the stream is dropped and a
 * frame it was reading is not counted).  -1 when the connection failed. */
static ssize_t rx_broken(struct braid_comm *c, struct braid_stream *s, const char *why) {
  struct braid_sock_stream *ss = s->tp;
  bool mid = ss->in_frame || ss->stage_len > ss->stage_off;
  if (braid_rx_broken(c, s, why, mid) < 0) return -1;
  ss->in_frame = false;
  return 0;
}

/* A read's n bytes (n > 0) counted: into the stage, or into the current frame's payload and the
 * next header behind it (as the read was set up: io_stage, io_want). */
static void rx_apply(struct braid_sock_stream *ss, size_t n) {
  ss->stall_since_ns = 0;
  if (ss->io_stage) {
    ss->stage_len += n;
    return;
  }
  size_t k = n < ss->io_want ? n : ss->io_want;
  if (!ss->cur.discard) ss->cur.dest += k; /* (a discard may have come meanwhile: same bytes) */
  ss->frame_left -= k;
  ss->stage_len = n - k;
}

void braid_sock_rx_settle(struct braid_stream *s) {
  struct braid_sock_stream *ss = s->tp;
  braid_sock_quiet(s);
  if (!ss->io_pending) return;
  ss->io_pending = false;
  if (ss->io_n > 0) rx_apply(ss, (size_t)ss->io_n);
}

/* Reads into dst (len bytes: the payload's, or the stage's room when stage) and then into tail
 * (the next frame's header, so one syscall per large frame), counting what came (rx_apply).
 * 1 when bytes came, 0 for "nothing now", -1 after failing c. */
static int rx_readv(struct braid_comm *c, struct braid_stream *s, void *dst, size_t len,
                    void *tail, size_t tail_len, bool stage) {
  struct braid_sock_stream *ss = s->tp;
  struct iovec iov[2] = {{dst, len}, {tail, tail_len}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = tail_len ? 2 : 1};
  for (;;) {
    ss->io_want = len;
    ss->io_stage = stage;
    braid_sock_io_enter(c, s);
    ssize_t n = recvmsg(s->fd, &mh, MSG_DONTWAIT);
    int err = errno;
    ss->io_n = n;
    ss->io_pending = true;
    braid_sock_io_leave(c, s);
    if (!ss->io_pending) return 1; /* counted meanwhile by a thread that looked at the frame */
    ss->io_pending = false;
    if (n > 0) {
      rx_apply(ss, (size_t)n);
      return 1;
    }
    if (n == 0) {
      s->eof = true;
      if (ss->in_frame || ss->stage_len > ss->stage_off)
        return (int)rx_broken(c, s, "peer closed the connection");
      return 0;
    }
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      char why[96];
      snprintf(why, sizeof why, "receive failed: %s", strerror(err));
      return (int)rx_broken(c, s, why);
    }
    bool mid = ss->in_frame || ss->stage_len > ss->stage_off;
    if (!mid || c->acks) return ss->stall_since_ns = 0, 0; /* with acks the sender decides */
    uint64_t now = braid_now_ns();
    if (!ss->stall_since_ns) ss->stall_since_ns = now;
    if (now - ss->stall_since_ns > c->timeout_ns) {
      braid_comm_fail(c, ncclRemoteError,
                      "no bytes for %llu ms in the middle of a message: the peer stopped "
                      "answering (BRAID_TIMEOUT_MS)",
                      (unsigned long long)(c->timeout_ns / 1000000));
      return -1;
    }
    return 0;
  }
}

/* Payload of the current frame: from the stage, straight into place, or into the sink. */
static int rx_payload(struct braid_comm *c, struct braid_stream *s, bool read) {
  struct braid_sock_stream *ss = s->tp;
  size_t avail = ss->stage_len - ss->stage_off;
  char *dst = ss->cur.discard ? c->rx.sink : ss->cur.dest;
  size_t want = ss->cur.discard && ss->frame_left > BRAID_RX_SINK_BYTES ? BRAID_RX_SINK_BYTES : ss->frame_left;
  if (avail) {
    size_t k = avail < want ? avail : want;
    if (!ss->cur.discard) memcpy(dst, ss->stage + ss->stage_off, k), ss->cur.dest += k;
    ss->stage_off += k, ss->frame_left -= k;
    return 1;
  }
  ss->stage_off = ss->stage_len = 0;
  if (!read || want < RX_DIRECT_MIN) return 0; /* small remainder: through the stage */
  return rx_readv(c, s, dst, want, ss->stage, BRAID_FRAME_HDR_BYTES, false) > 0 ? 1 : -1;
}

/* read: whether to call recv() (irecv only places what is already staged: the syscall would
 * delay the send NCCL posts next, and the following test() reads anyway). */
void braid_sock_rx(struct braid_comm *c, struct braid_stream *s, bool read) {
  struct braid_sock_stream *ss = s->tp;
  if (!braid_sock_mine(s)) {
    /* Its owner reads.  irecv (read false) may have posted what a held frame waits for. */
    if (!read && ss->held) braid_sock_wake(s);
    return;
  }
  ss->held = false;
  while (!c->err && !s->eof && !s->dead) {
    if (ss->in_frame) {
      if (ss->frame_left == 0) {
        ss->in_frame = false;
        braid_rx_end(c, s, &ss->cur);
        continue;
      }
      int rc = rx_payload(c, s, read);
      if (rc > 0) continue;
      if (rc < 0) break;
    } else if (ss->stage_len - ss->stage_off >= BRAID_FRAME_HDR_BYTES) {
      int rc = braid_rx_begin(c, ss->stage + ss->stage_off, &ss->cur);
      if (rc <= 0) {
        ss->held = rc == 0;
        break;
      }
      ss->in_frame = true;
      ss->frame_left = ss->cur.frame.len;
      ss->stage_off += BRAID_FRAME_HDR_BYTES;
      continue;
    }
    /* Need more bytes in the stage: compact, then read. */
    if (!read) break;
    size_t avail = ss->stage_len - ss->stage_off;
    if (ss->stage_off) {
      memmove(ss->stage, ss->stage + ss->stage_off, avail);
      ss->stage_off = 0, ss->stage_len = avail;
    }
    if (rx_readv(c, s, ss->stage + ss->stage_len, BRAID_STAGE_BYTES - ss->stage_len, NULL, 0, true) <= 0)
      break;
  }
}

struct braid_rx_frame *braid_sock_rx_frame(struct braid_stream *s, int k) {
  struct braid_sock_stream *ss = s->tp;
  if (k == 0) braid_sock_rx_settle(s); /* the caller may turn it into a discard */
  return k == 0 && ss->in_frame ? &ss->cur : NULL;
}

/* An acknowledgement the socket took only part of goes out whole before any other. */
bool braid_sock_rx_ack_ready(struct braid_comm *c, struct braid_stream *s, bool idle,
                             uint64_t deadline_ns) {
  (void)c;
  struct braid_sock_stream *ss = s->tp;
  if (!braid_sock_mine(s)) return false; /* its owner sends them (a few bytes: holding the lock) */
  return idle ? braid_ack_out_finish(&ss->ack_out, s->fd, deadline_ns)
              : braid_ack_out_flush(&ss->ack_out, s->fd);
}

/* Part of it may go out: the rest is flushed first on the next calls (framing kept). */
bool braid_sock_rx_ack_send(struct braid_comm *c, struct braid_stream *s,
                            const uint8_t hdr[BRAID_FRAME_HDR_BYTES], bool idle,
                            uint64_t deadline_ns) {
  (void)c;
  struct braid_sock_stream *ss = s->tp;
  return idle ? braid_ack_out_send_now(&ss->ack_out, s->fd, hdr, deadline_ns)
              : braid_ack_out_send(&ss->ack_out, s->fd, hdr);
}

void braid_sock_rx_describe(const struct braid_stream *s, char *buf, size_t len) {
  const struct braid_sock_stream *ss = s->tp;
  snprintf(buf, len, "%s", ss->in_frame ? "in a frame" : "between frames");
}
