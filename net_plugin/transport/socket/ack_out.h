/* An acknowledgement frame on its way out of a receive stream's non-blocking socket (sock_rx.c).
 * The socket may take only part of the 40 bytes; the rest goes out first on a later call, so no
 * other frame ever starts inside an unfinished one (issue 19 item 5). */
#ifndef BRAID_ACK_OUT_H
#define BRAID_ACK_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire/wire.h"

struct braid_ack_out {
  uint8_t frame[BRAID_FRAME_HDR_BYTES];
  size_t off, len; /* bytes written, bytes in frame (0: empty) */
};

/* Writes what is left of an unfinished frame; true when none is left (a new one may start). */
bool braid_ack_out_flush(struct braid_ack_out *o, int fd);

/* Starts hdr on an empty o and writes what the socket takes.  True when the frame is committed
 * (all or part written; the rest is flushed first by later calls), false when the socket took
 * none of it (o stays empty: the caller sends a fresher acknowledgement later). */
bool braid_ack_out_send(struct braid_ack_out *o, int fd, const uint8_t hdr[BRAID_FRAME_HDR_BYTES]);

/* For a receiver NCCL may not call again (no receive pending) while the sender waits for this
 * frame: finishes an unfinished one, waiting for room in the socket until deadline_ns
 * (braid_now_ns).  True when none is left unfinished. */
bool braid_ack_out_finish(struct braid_ack_out *o, int fd, uint64_t deadline_ns);

/* braid_ack_out_send, then waits as braid_ack_out_finish does: for a frame that must go out
 * before this call returns.  True when the frame is committed (and then, unless the deadline
 * passed, out whole). */
bool braid_ack_out_send_now(struct braid_ack_out *o, int fd, const uint8_t hdr[BRAID_FRAME_HDR_BYTES],
                            uint64_t deadline_ns);

/* Forgets an unfinished frame (its socket was replaced). */
void braid_ack_out_reset(struct braid_ack_out *o);

/* send(2); a unit test puts a stand-in that writes less here (test/unit/ack_out_test.cc). */
extern ssize_t (*braid_ack_send)(int fd, const void *buf, size_t len, int flags);

#endif
