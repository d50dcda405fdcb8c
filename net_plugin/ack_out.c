/* Acknowledgement frames written whole across calls on a non-blocking socket. */
#include "ack_out.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

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

void braid_ack_out_reset(struct braid_ack_out *o) { o->off = o->len = 0; }
