/* braid-ps: the protocol side of the server (handshake, sessions, partitions, reduction),
 * separated from sockets and threads so that it can be unit-tested and fuzzed.
 *
 * A session is the set of heads of one CollNet communicator, named by the 16-byte id of HELLO.
 * It is created by the first head that authenticates, becomes ready when all nranks ranks have
 * authenticated (READY to every member), and is closed (every member connection closed, its
 * memory freed) when any member fails or breaks the protocol, when it does not fill up within the
 * join timeout, or when the server stops.  A closed session's id is remembered, so a head cannot
 * rejoin it.
 *
 * A partition (seq, part) of a session holds one input buffer per rank, allocated when that
 * rank's PUSH header arrives (counted against max_memory, as is the partition's own record,
 * placeholders for heads that completed it elsewhere (GONE) included); the last arriving input triggers the
 * reduction, in rank order, into rank 0's buffer, which the RESULT frames then point at.
 *
 * Locking: a registry mutex guards the session table (join and close only); each session has a
 * mutex for its member list and partition table (held briefly); the reduction and all I/O run
 * outside both.  Lock order: registry, then session, then a connection's output mutex. */
#ifndef BRAID_PS_SESSION_H
#define BRAID_PS_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "proto.h"

struct ps_conn;
struct ps_ctx;
struct ps_session;
struct ps_part;

/* What the protocol needs from the I/O layer; every call may come from any thread, with the
 * connection's output mutex held (so they must not call back into conn.c). */
struct ps_io_ops {
  /* Gather write on a non-blocking socket: bytes written, or -1 with errno (EAGAIN: full). */
  ssize_t (*writev)(struct ps_conn *c, const struct iovec *iov, int n);
  /* Start (on) or stop calling ps_conn_flush() when the socket becomes writable. */
  void (*want_write)(struct ps_conn *c, int on);
  /* Nothing more will be written: the peer sees end-of-stream after what was sent. */
  void (*shutdown)(struct ps_conn *c);
  /* The last reference to the connection is gone (called without any lock). */
  void (*release)(struct ps_conn *c);
};

enum { PS_LOG_INFO = 0, PS_LOG_DEBUG = 1 }; /* DEBUG: per-connection events (--verbose) */
typedef void ps_log_fn(void *arg, int level, const char *msg);

struct ps_ctx_opts {
  const char *token;             /* the job token; required */
  uint64_t max_memory;           /* partition buffers, all sessions together (0: 4 GiB) */
  uint64_t join_timeout_ns;      /* a session must fill up within this (0: 60 s) */
  uint64_t handshake_timeout_ns; /* connection to AUTH verified (0: 5 s) */
  int require_frame_auth;        /* refuse heads that do not tag their frames (PS_FLAG_AUTH) */
  uint64_t linger_ns;            /* a closing connection waits this long for the peer (0: 1 s) */
  const struct ps_io_ops *io;
  ps_log_fn *log;                /* NULL: silent */
  void *log_arg;
  int verbose;
  uint64_t (*clock)(void);       /* monotonic ns (NULL: braid_now_ns); the fuzzer fakes it */
};

struct ps_ctx *ps_ctx_create(const struct ps_ctx_opts *o);
/* Closes every session that is still open (their connections are closed through the io ops). */
void ps_ctx_close_all(struct ps_ctx *ctx, const char *why);
/* Frees the context; every connection must be gone. */
void ps_ctx_destroy(struct ps_ctx *ctx);
/* Bytes of partition buffers allocated now. */
uint64_t ps_ctx_memory(struct ps_ctx *ctx);
/* Sessions open now. */
int ps_ctx_sessions(struct ps_ctx *ctx);
/* Connections that have not proven the token (yet), closing ones included. */
int ps_ctx_pending(struct ps_ctx *ctx);
uint64_t ps_ctx_now(struct ps_ctx *ctx);
uint64_t ps_ctx_linger(struct ps_ctx *ctx);
const struct ps_io_ops *ps_ctx_io(struct ps_ctx *ctx);

/* A connection that proved nothing was refused (peer, why): counted, and logged in one line a
 * second for all of them. */
void ps_ctx_stranger(struct ps_ctx *ctx, const char *peer, const char *why);
/* The count of the last second, when it was not logged yet (the acceptor calls it every second). */
void ps_ctx_strangers_flush(struct ps_ctx *ctx);
/* Formats and logs a line (no newline needed). */
void ps_logf(struct ps_ctx *ctx, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Called by conn.c (the connection's owner thread) ---- */

/* A new connection: starts its handshake clock. */
void ps_proto_conn_init(struct ps_conn *c);
/* A frame header arrived on c (raw bytes).  0: decoded into *h, and its h->len payload bytes go
 * to *dst (*part: NULL, or a partition reference the caller drops with ps_part_put once the
 * payload is in); -1: refused, c is closing. */
int ps_proto_header(struct ps_conn *c, const uint8_t raw[PS_HDR_BYTES], struct ps_hdr *h,
                    uint8_t **dst, struct ps_part **part);
/* The payload of the frame whose header was last given to ps_proto_header is complete. */
void ps_proto_frame(struct ps_conn *c, const struct ps_hdr *h, struct ps_part *part);
/* A tagged frame (number n from the head) failed its tag: drops c, and its session. */
void ps_proto_bad_tag(struct ps_conn *c, const struct ps_hdr *h, uint64_t n);
/* c failed (peer closed, socket error): closes its session, if any. */
void ps_proto_lost(struct ps_conn *c, const char *why);
/* Timeouts of c's handshake and of its session's join. */
void ps_proto_tick(struct ps_conn *c);
/* c is being freed: drops its session reference. */
void ps_proto_conn_free(struct ps_conn *c);

void ps_part_get(struct ps_part *p);
void ps_part_put(struct ps_part *p);

#endif
