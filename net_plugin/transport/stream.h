/* A stream transport: how one stream's frames travel.  Two fill it in: TCP sockets
 * (transport/socket/sock_stream.h: the frames on the stream's socket) and libfabric
 * (transport/ofi/ofi_stream.h: each frame a header message and a tagged payload on the stream's
 * endpoint, the socket kept open beside it to show that the peer is there); a unit test adds one
 * in memory (test/unit/stream_double_test.cc).
 *
 * The data path above it is the same for every transport: the send side (stripe/tx.c) cuts
 * messages into frames (wire.h) on a stream's batch (s->tx[]), counts acknowledgements, re-sends
 * the chunks of a failed rail; the receive side (stripe/rx.c) matches the frames that arrive to
 * receives and acknowledges them.  It reaches a transport only through the comm's table
 * (c->sops: every stream of a comm has the same transport), and a transport keeps what is its own
 * per stream behind s->tp.  A transport reaches the data path back only through the calls at the
 * end of this header.
 *
 * A broken stream: on the send side a call says so (-1 or an errno, the reason in why/whylen) and
 * tx.c decides what follows (the connection fails, or the rail's chunks go elsewhere); on the
 * receive side the transport reports it through braid_rx_broken, then fences the stream. */
#ifndef BRAID_STREAM_H
#define BRAID_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/common.h"
#include "wire/wire.h"

struct braid_comm;
struct braid_stream;
struct braid_req;
struct braid_rxmsg;

/* The receive side's scratch for discarded payloads (c->sink) is this big: a transport reads a
 * discarded payload into it in pieces of at most this many bytes. */
#define BRAID_RX_SINK_BYTES 65536

/* A frame being received: where rx.c put it (braid_rx_begin).  The transport keeps it until the
 * payload is in place, then hands it to braid_rx_end. */
struct braid_rx_frame {
  struct braid_frame frame;
  struct braid_rxmsg *msg; /* its message; NULL when discarded */
  char *dest;              /* where its payload goes (NULL when discarded); sockets move it on as
                              bytes land */
  bool discard;            /* a duplicate or late copy: received into c->sink and dropped */
};

struct braid_stream_ops {
  const char *name; /* "socket", "ofi" */
  /* A broken stream reconnects on a new socket (comm/rejoin.c, sender side). */
  bool rejoin;
  /* The data path's own state is out of sight (the provider's connections): the scheduler's LATE
   * verdict already makes a rail suspect, and poke and path_dead tell whether its path is dead. */
  bool late_suspect;

  /* ---- life ---- */
  /* The comm's streams are connected (fds, rails set; c->acks known): each stream's state is
   * made (s->tp) and the transport's link started.  ncclSuccess or the error set-up fails with. */
  ncclResult_t (*start)(struct braid_comm *c);
  /* Optional: the data path is set up as well (tx.c, rx.c): the transport's own threads may
   * start calling into it (the socket helpers, sock_helper.h). */
  ncclResult_t (*started)(struct braid_comm *c);
  /* The comm is closing: nothing s posted lands after this (before the data path frees the
   * buffers its operations might use), and s->tp is freed.  s->fd stays (the comm closes it). */
  void (*close)(struct braid_comm *c, struct braid_stream *s);
  /* The memory [addr, addr+len) is being released: registrations of it are dropped. */
  void (*forget)(struct braid_comm *c, const void *addr, size_t len);
  /* Rejoin (comm/rejoin.c), both ends.  renew: s is about to take a new socket; what the
   * transport held of the old one is dropped (a frame half received with it), before s->fd is
   * closed.  relink (optional): s has its new socket; the transport's own link starts again (its
   * new endpoint's address sent).  0, or -1 when it cannot (the rejoin fails, s stays dead). */
  void (*renew)(struct braid_comm *c, struct braid_stream *s);
  int (*relink)(struct braid_comm *c, struct braid_stream *s);

  /* ---- send side (tx.c) ---- */
  /* Optional (NULL: a write is a completion).  The link's state, then the completions of earlier
   * writes (braid_tx_written): 1 ready, 0 not ready yet (nothing may be written), -1 broken. */
  int (*tx_poll)(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
                 size_t whylen);
  /* Writes as much of s's batch (tx[tx_head], tx_count frames) as the transport takes now,
   * advancing tx_head/tx_count/tx_done, counting frames_started as each frame starts out and
   * reporting frames out whole (braid_tx_written).  0, or an errno after a hard error. */
  int (*tx_write)(struct braid_comm *c, struct braid_stream *s);
  /* s's rail failed (s->dead: the stream broke for good, else only stalled): what to do with a
   * frame partly out (tx_done != 0).  Returns how many frames stay at the head of the batch (0 or
   * 1: one that must still go out whole, its chunk detached); the rest of the batch is dropped. */
  int (*tx_failed)(struct braid_comm *c, struct braid_stream *s);
  /* Optional (NULL: nothing writes s's batch but the caller): a write of s's batch that another
   * thread may have under way is over and counted (tx_head/tx_count/tx_done).  Called before a
   * send with a chunk on s completes: NCCL may reuse its buffer once test() says done. */
  void (*tx_settle)(struct braid_comm *c, struct braid_stream *s);
  /* The next acknowledgement from the receiver into hdr: 1 one came, 0 none now, -1 broken. */
  int (*read_ack)(struct braid_comm *c, struct braid_stream *s,
                  uint8_t hdr[BRAID_FRAME_HDR_BYTES], char *why, size_t whylen);
  /* s's rail is suspect: keep evidence of its path coming (late_suspect transports).  0, or -1
   * when that broke s. */
  int (*poke)(struct braid_comm *c, struct braid_stream *s, uint64_t now, char *why,
              size_t whylen);
  /* Whether s's path shows dead (a suspect rail is failed then). */
  bool (*path_dead)(struct braid_comm *c, struct braid_stream *s, uint64_t now);

  /* ---- receive side (rx.c) ---- */
  /* Receives what arrived on s: frames started with braid_rx_begin, their payloads placed,
   * ended with braid_rx_end, in the order they came.  read: whether to ask the system for more
   * (irecv only places what is already in), else only what has already arrived. */
  void (*rx)(struct braid_comm *c, struct braid_stream *s, bool read);
  /* The k-th frame begun on s and not yet ended (0 the oldest), NULL past the last: rx.c turns a
   * frame whose message completed meanwhile into a discard. */
  struct braid_rx_frame *(*rx_frame)(struct braid_stream *s, int k);
  /* Whether an acknowledgement may start on s now: one the transport took only part of has gone
   * out whole (idle: waiting for room until deadline_ns). */
  bool (*ack_ready)(struct braid_comm *c, struct braid_stream *s, bool idle, uint64_t deadline_ns);
  /* Sends an acknowledgement (idle: NCCL may not call again, so it goes out before the call
   * returns, waiting for room until deadline_ns).  true when it is committed, false when it did
   * not go (a later, fresher one will). */
  bool (*ack_send)(struct braid_comm *c, struct braid_stream *s,
                   const uint8_t hdr[BRAID_FRAME_HDR_BYTES], bool idle, uint64_t deadline_ns);
  /* What the receive state shows, for diagnostics (comm/diag.c). */
  void (*rx_describe)(const struct braid_stream *s, char *buf, size_t len);
};

/* ---------- the data path, for the transports ---------- */

/* tx.c: len payload bytes of r are out (a frame whole in the socket, or its payload's send
 * complete): without acknowledgements a send completes when all its frames are.  r may be NULL
 * with acknowledgements. */
void braid_tx_written(struct braid_comm *c, struct braid_req *r, size_t len);

/* rx.c: a frame header arrived.  1 when the frame starts (*fr filled: where its payload goes); 0
 * to hold it (the header stays: offered again on a later call); -1 after failing c (a garbled
 * header or one that does not fit). */
int braid_rx_begin(struct braid_comm *c, const uint8_t hdr[BRAID_FRAME_HDR_BYTES],
                   struct braid_rx_frame *fr);
/* rx.c: fr's payload is in place (or dropped); fr is no longer among s's frames (rx_frame). */
void braid_rx_end(struct braid_comm *c, struct braid_stream *s, const struct braid_rx_frame *fr);
/* rx.c: s broke (why; mid: a frame was under way).  Without acknowledgements c fails: -1.  With
 * them s is dropped (dead; the sender re-sends its data on the other rails): 0.  The transport
 * fences s after this. */
int braid_rx_broken(struct braid_comm *c, struct braid_stream *s, const char *why, bool mid);

#endif
