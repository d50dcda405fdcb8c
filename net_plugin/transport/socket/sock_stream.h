/* The socket stream transport (transport/stream.h): a stream's frames, header and payload, on its
 * TCP socket (s->fd), in order; acknowledgements come back on the same socket.
 * sock_stream.c: the table and each stream's state; sock_tx.c: the send side; sock_rx.c: the
 * receive side. */
#ifndef BRAID_SOCK_STREAM_H
#define BRAID_SOCK_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catomic.h"
#include "transport/socket/ack_out.h"
#include "transport/stream.h"
#include "wire/wire.h"

#define BRAID_STAGE_BYTES 4096 /* receive staging: headers and small payloads */

extern const struct braid_stream_ops braid_sock_stream_ops;

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

/* s's socket is about to be replaced (rejoin.c, before closing the old one): nothing half-read
 * or half-written on the old one carries over (a frame half read from it is dropped). */
void braid_sock_stream_renew(struct braid_stream *s);

/* Another thread's system call on s, finished but not yet counted, is counted now (the caller
 * holds the comm's lock and is about to look at or change s's batch or current frame). */
void braid_sock_tx_settle(struct braid_comm *c, struct braid_stream *s);
void braid_sock_rx_settle(struct braid_stream *s);

/* sock_tx.c: the send side's operations. */
int braid_sock_tx_write(struct braid_comm *c, struct braid_stream *s);
int braid_sock_tx_failed(struct braid_comm *c, struct braid_stream *s);
int braid_sock_tx_read_ack(struct braid_comm *c, struct braid_stream *s,
                           uint8_t hdr[BRAID_FRAME_HDR_BYTES], char *why, size_t whylen);
int braid_sock_tx_poke(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                       size_t whylen);
bool braid_sock_tx_path_dead(struct braid_comm *c, struct braid_stream *s, uint64_t now);

/* sock_rx.c: the receive side's operations. */
void braid_sock_rx(struct braid_comm *c, struct braid_stream *s, bool read);
struct braid_rx_frame *braid_sock_rx_frame(struct braid_stream *s, int k);
bool braid_sock_rx_ack_ready(struct braid_comm *c, struct braid_stream *s, bool idle,
                             uint64_t deadline_ns);
bool braid_sock_rx_ack_send(struct braid_comm *c, struct braid_stream *s,
                            const uint8_t hdr[BRAID_FRAME_HDR_BYTES], bool idle,
                            uint64_t deadline_ns);
void braid_sock_rx_describe(const struct braid_stream *s, char *buf, size_t len);

#endif
