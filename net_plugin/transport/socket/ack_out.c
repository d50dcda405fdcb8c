/* Acknowledgement frames written whole across calls on a non-blocking socket. */
#include "transport/socket/ack_out.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"

ssize_t (*braid_ack_send)(int fd, const void *buf, size_t len, int flags) = send;

bool braid_ack_out_flush(struct braid_ack_out *o, int fd) {
  while (o->off < o->len) {
    ssize_t n = braid_ack_send(fd, o->frame + o->off, o->len - o->off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false; /* full, or broken: the stream's reads find out */
    o->off += (size_t)n;
  }
  o->off = o->len = 0;
  return true;
}

bool braid_ack_out_send(struct braid_ack_out *o, int fd, const uint8_t hdr[BRAID_FRAME_HDR_BYTES]) {
  memcpy(o->frame, hdr, BRAID_FRAME_HDR_BYTES);
  o->off = 0;
  o->len = BRAID_FRAME_HDR_BYTES;
  if (braid_ack_out_flush(o, fd)) return true;
  if (o->off > 0) return true;
  o->len = 0; /* nothing went out: drop it */
  return false;
}

/* Waits for room in fd until deadline_ns; false once it has passed. */
static bool ack_out_wait_room(int fd, uint64_t deadline_ns) {
  uint64_t now = braid_now_ns();
  if (now >= deadline_ns) return false;
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int ms = (int)((deadline_ns - now + 999999) / 1000000);
  return poll(&p, 1, ms) >= 0 || errno == EINTR;
}

bool braid_ack_out_finish(struct braid_ack_out *o, int fd, uint64_t deadline_ns) {
  while (!braid_ack_out_flush(o, fd))
    if (!ack_out_wait_room(fd, deadline_ns)) return false;
  return true;
}

bool braid_ack_out_send_now(struct braid_ack_out *o, int fd, const uint8_t hdr[BRAID_FRAME_HDR_BYTES],
                            uint64_t deadline_ns) {
  while (!braid_ack_out_send(o, fd, hdr))
    if (!ack_out_wait_room(fd, deadline_ns)) return false;
  braid_ack_out_finish(o, fd, deadline_ns);
  return true;
}

void braid_ack_out_reset(struct braid_ack_out *o) { o->off = o->len = 0; }
