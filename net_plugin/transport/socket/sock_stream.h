/* The socket stream transport (transport/stream.h): a stream's frames, header and payload, on its
 * TCP socket (s->fd), in order; acknowledgements come back on the same socket.
 * sock_stream.c: the table and each stream's state (sock_state.h); sock_tx.c: the send side;
 * sock_rx.c: the receive side. */
#ifndef BRAID_SOCK_STREAM_H
#define BRAID_SOCK_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/socket/sock_state.h"
#include "transport/stream.h"
#include "wire/wire.h"

extern const struct braid_stream_ops braid_sock_stream_ops;

/* s's socket is about to be replaced (rejoin.c, before closing the old one): nothing half-read
 * or half-written on the old one carries over (a frame half read from it is dropped). */
void braid_sock_stream_renew(struct braid_comm *c, struct braid_stream *s);

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
