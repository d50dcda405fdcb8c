/* braid-ps: one head's connection, independent of sockets.
 *
 * A connection is read by exactly one thread, its owner (the worker it was given to), and written
 * by any thread.
 *
 * Input: the owner asks ps_conn_rbuf() where the next bytes go (a frame header, then the frame's
 * payload straight into its final place: a PUSH's payload lands in the partition's buffer for
 * that rank, then with frame authentication its tag), reads into it, and reports the count with
 * ps_conn_received(), which hands every complete header and frame to the protocol (session.c).
 * A frame with a tag reaches the protocol only once the tag verified (its header earlier, so
 * that its payload has a place to go: a header's effects are only ever an allocation or the
 * session's close).
 *
 * Output: a queue of frames under the connection's mutex.  With frame authentication, a frame's
 * tag and number are fixed when it is about to be handed to the socket ("sealed": the head, and
 * small frames batched behind it); frames queued later never overtake a sealed one, so the
 * numbers go out in order.  Any thread may queue a frame and
 * write what the socket takes at once; what is left is written by the owner when the socket is
 * writable again (ps_io_ops.want_write asks for that).  A RESULT frame points at the partition's
 * result buffer (and holds a reference on the partition) instead of copying it.
 *
 * Closing: ps_conn_close() (any thread) drops whatever is queued and not yet started, queues a
 * last REFUSE or ERROR frame, writes it, then shuts the socket down for writing, so the peer sees
 * the frame and then end-of-stream.  The owner keeps reading (and discarding) until the peer
 * closes too or a short linger passes, then lets go of the connection (ps_conn_done()).  The
 * socket itself is released (ps_io_ops.release) when the last reference goes. */
#ifndef BRAID_PS_CONN_H
#define BRAID_PS_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "proto.h"
#include "session.h"

struct ps_out; /* a queued frame (conn.c) */
struct ps_part;

enum ps_conn_state {
  PS_CONN_HELLO,  /* waiting for HELLO */
  PS_CONN_AUTH,   /* CHALLENGE sent, waiting for AUTH */
  PS_CONN_JOINED, /* authenticated member of a session that is not complete yet */
  PS_CONN_READY,  /* READY sent: data frames */
};

struct ps_conn {
  atomic_int refs;
  struct ps_ctx *ctx;
  int fd;       /* for the I/O layer; the protocol never touches it */
  void *io;     /* for the I/O layer */
  char peer[64];

  /* ---- The owner thread only ---- */
  enum ps_conn_state state;
  uint64_t hs_deadline; /* the handshake must be done by then (ns, ctx clock) */
  struct ps_hello hello;
  uint8_t hello_flags;
  uint8_t server_nonce[PS_NONCE_BYTES];
  atomic_int pending;       /* counted in the context's unauthenticated connections (the owner
                               writes it; the acceptor reads it, to evict the oldest) */
  /* frame authentication: key set before tx_auth (under mu), read by writers under mu */
  uint8_t key[PS_KEY_BYTES];
  int rx_auth;              /* frames from the head carry tags from here on */
  uint64_t rx_seq;          /* number of the next tagged frame from the head */
  struct ps_mac rmac;       /* the tag of the frame being read */
  uint8_t rtag[PS_TAG_BYTES];
  size_t rtag_got;
  int in_tag;               /* reading the tag of c->hdr's frame */
  struct ps_session *session; /* set at join; the connection holds a reference */
  uint32_t rank;
  /* reader */
  uint8_t hdr_buf[PS_HDR_BYTES];
  size_t hdr_got;
  struct ps_hdr hdr;        /* the frame whose payload is being read */
  uint8_t *dst;             /* where its payload goes; NULL while reading a header */
  size_t need, got;         /* payload bytes in all, so far */
  struct ps_part *rpart;    /* the partition dst points into (a reference), or NULL */
  uint8_t small[PS_HELLO_BYTES > PS_CHALLENGE_BYTES ? PS_HELLO_BYTES : PS_CHALLENGE_BYTES];
  uint8_t sink[4096];       /* what a closing connection still receives is dropped here */
  int peer_eof;

  /* ---- Output, under mu ---- */
  pthread_mutex_t mu;
  struct ps_out *head, *tail;
  struct ps_out *ctl_last;  /* the last control frame queued ahead of data frames, or NULL */
  size_t head_off;          /* bytes of the head frame already written */
  struct ps_out *sealed_last; /* the last frame of the tagged prefix of the queue, or NULL */
  int tx_auth;              /* frames queued from here on carry tags */
  uint64_t tx_seq;          /* number of the next tagged frame to the head */
  int want_write;           /* asked the I/O layer for writability */
  int shut;                 /* shut down for writing */
  int broken;               /* a write failed: nothing more can be sent */
  uint64_t close_deadline;
  atomic_int closing;       /* set once, by ps_conn_close (readable without mu) */
};

/* A new connection with one reference (the owner's). */
struct ps_conn *ps_conn_new(struct ps_ctx *ctx, int fd, void *io, const char *peer);
void ps_conn_get(struct ps_conn *c);
void ps_conn_put(struct ps_conn *c);

/* Input (owner thread). */
void *ps_conn_rbuf(struct ps_conn *c, size_t *len);
void ps_conn_received(struct ps_conn *c, size_t n);
/* The peer closed (why == NULL) or the socket failed. */
void ps_conn_eof(struct ps_conn *c, const char *why);
/* Timeouts; call every ~100 ms. */
void ps_conn_tick(struct ps_conn *c);
/* 1 when the owner may let go of the connection (closing and flushed, or hopeless). */
int ps_conn_done(struct ps_conn *c);

/* Output (any thread).  Frames queued to a closing connection are dropped. */
/* A frame whose payload (len bytes, at most PS_MAX_TEXT or a handshake frame's) is copied. */
void ps_conn_send(struct ps_conn *c, const struct ps_hdr *h, const void *payload);
/* A RESULT frame whose payload is the partition's result (takes a reference on it). */
void ps_conn_send_result(struct ps_conn *c, const struct ps_hdr *h, struct ps_part *p,
                         const uint8_t *data);
/* Writes what the socket takes now (call on writability, or after queueing). */
void ps_conn_flush(struct ps_conn *c);
/* Frames queued from now on carry tags under key (sent and received); the owner thread, once. */
void ps_conn_start_auth(struct ps_conn *c, const uint8_t key[PS_KEY_BYTES]);
/* Closes the connection after a last REFUSE or ERROR frame (type 0: none); idempotent. */
void ps_conn_close(struct ps_conn *c, int type, uint64_t seq, uint32_t part, const char *text);

#endif
