/* A socket stream's state (s->tp), apart from the transport's operations (sock_stream.h) so that
 * the helper threads (sock_helper.c), which the operations call, can read it without the two
 * modules including each other (tools/check/layers.sh). */
#ifndef BRAID_SOCK_STATE_H
#define BRAID_SOCK_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catomic.h"
#include "transport/socket/ack_out.h"
#include "transport/stream.h"
#include "wire/wire.h"

#define BRAID_STAGE_BYTES 4096 /* receive staging: headers and small payloads */

/* A stream's socket state (s->tp). */
struct braid_sock_stream {
  /* send side */
  char *rescue; /* copy of a half-written frame's payload after its rail failed */
  uint8_t ack[BRAID_FRAME_HDR_BYTES]; /* an acknowledgement as it arrives */
  size_t ack_got;
  /* receive side */
  uint8_t stage[BRAID_STAGE_BYTES];
  size_t stage_off, stage_len;
  bool in_frame;
  struct braid_rx_frame cur; /* the frame being read (in_frame) */
  size_t frame_left;         /* its payload bytes still to read */
  uint64_t stall_since_ns;   /* when bytes in flight stopped moving, 0 when moving */
  struct braid_ack_out ack_out; /* an acknowledgement the socket took only part of */
  bool held;                    /* a frame waits for a receive (braid_rx_begin said hold) */
  /* helper threads (sock_helper.h) */
  struct braid_sock_helper *owner; /* the thread making the socket's system calls; NULL: any */
  BRAID_ATOMIC(bool) busy;    /* the owner is in a system call on the socket */
  bool io_pending;      /* that call's result, not yet settled into the state above: */
  ssize_t io_n;
  size_t io_want;       /* receive: bytes meant for the payload (the rest went to the stage) */
  bool io_stage;        /* receive: the read filled the stage */
  bool tx_blocked;      /* send: the owner waits for room in the socket */
  bool hup;             /* receive: held, and the peer hung up (the owner stops polling it) */
};

#endif
