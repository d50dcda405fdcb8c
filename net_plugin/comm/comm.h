/* The objects behind NCCL's opaque listen/send/recv comms and requests. */
#ifndef BRAID_COMM_H
#define BRAID_COMM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "catomic.h"
#include "clock.h"
#include "nccl_plugin/common.h"
#include "topo/ifaces.h"
#include "transport/stream.h"
#include "transport/tclass.h"
#include "wire/wire.h"

#define BRAID_RECV_REQS 32            /* NCCL_NET_MAX_REQUESTS */
#define BRAID_RX_MAX_RANGES 8192      /* disjoint pieces of one message held at once (stripe/rx.c) */
#define BRAID_MAX_RECVS 8             /* largest grouped receive */
#define BRAID_SEND_REQS (BRAID_RECV_REQS * BRAID_MAX_RECVS)
#define BRAID_MSG_WINDOW 1024         /* receive-side messages tracked at once (power of 2) */
#define BRAID_SEND_BATCH 16           /* frames queued per stream (sockets: written by one writev) */

enum braid_comm_kind { BRAID_COMM_LISTEN = 0x4C, BRAID_COMM_SEND = 0x53, BRAID_COMM_RECV = 0x52 };
enum braid_req_kind { BRAID_REQ_FREE = 0, BRAID_REQ_SEND, BRAID_REQ_RECV, BRAID_REQ_FLUSH };

struct braid_comm;
struct braid_chunk;
struct braid_hs_conn;

struct braid_recv_slot {
  char *buf;
  size_t cap;
  int tag;
  int64_t msg;   /* matched message sequence, -1 while unmatched */
  size_t size;   /* bytes the matched send carries */
  bool done;
  struct braid_stage *stage; /* GPU memory staged (comm/stage.h): buf is the host copy of gpu */
  void *gpu;
};

struct braid_req {
  enum braid_req_kind kind;
  struct braid_comm *comm;
  int index; /* in the comm's pool */
  /* Set by whoever completes it under the comm's lock (c->lock: a socket helper thread, or the
   * proxy); test() reads it without the lock (xfer.c). */
  BRAID_ATOMIC(bool) done;
  bool warned;          /* BRAID_WAIT_WARN_MS reported */
  uint64_t posted_ns;
  /* send */
  const char *data;
  size_t size, queued; /* bytes cut into frames so far */
  int frames_out;      /* frames cut and not yet written (or, with acks, not yet acknowledged) */
  bool all_queued;
  int tag;
  uint64_t seq;
  int vreq;   /* verbs: the connection's request; -1 while waiting its turn (verbs_path.c) */
  void *vmem; /* verbs: its buffer's registration, for when it is handed to the connection */
  /* recv */
  int n, ndone;
  bool hinted; /* posted with NCCL's optional-completion hint */
  bool early;  /* verbs: handed over to the connection (braid_vc_detach); test() completes it */
  struct braid_recv_slot slot[BRAID_MAX_RECVS];
};

/* A send-side frame queued on a stream: header then payload.  With acks it belongs to a chunk,
 * kept until the receiver acknowledges it. */
struct braid_txframe {
  struct braid_req *req;     /* without acks */
  struct braid_chunk *chunk; /* with acks */
  uint8_t hdr[BRAID_FRAME_HDR_BYTES];
  const char *payload;
  size_t len;
};

/* With acks: a piece of a message on a stream, kept until acknowledged or re-sent elsewhere. */
struct braid_chunk {
  struct braid_chunk *next;
  struct braid_req *req;  /* NULL once the send completed (the receiver holds its message) */
  const char *data;       /* payload, in the request's buffer */
  uint64_t seq, size, offset;
  uint32_t len;
  int32_t tag;
  int rail;
  uint64_t sent_ns;
};

struct braid_chunk_fifo {
  struct braid_chunk *head, *tail;
  size_t count;
};

/* A message known to the receiver: matched to a slot, or buffered (unexpected: ahead of a
 * receive for its tag; early: its frames arrived before earlier messages were matched). */
struct braid_rxmsg {
  int64_t seq; /* -1 when the entry is unused */
  size_t size, got;
  int tag;
  char *dest;              /* slot buffer, or own */
  struct braid_req *req;   /* NULL while buffered */
  int slot;
  char *own;               /* owned buffer of a buffered message */
  bool early;              /* buffered before next_match reached it */
  uint64_t next_off;       /* without acks: where the next frame must start (frames come in order) */
  /* with acks: byte ranges held, so a re-sent chunk is accepted once (stripe/rx.c) */
  uint64_t (*ranges)[2];
  int nranges, cap_ranges;
};

/* A stream: one connection of the comm on one rail.  Its transport (c->sops, transport/stream.h)
 * keeps its own state behind tp; the rest is the data path's (tx.c, rx.c). */
struct braid_stream {
  int fd;   /* its TCP socket: the data's (sockets), or the set-up socket kept open beside it */
  int rail;
  /* rejoin (rejoin.c): a broken or missing stream reconnected */
  int join_fd, join_state;
  struct braid_hs_conn *join_hs; /* the attempt's handshake (hs.h) */
  uint64_t join_at_ns, join_backoff_ns;
  const char *rail_name; /* the local NIC, for logs */
  double rail_Bps;       /* its nominal speed */
  bool dead;               /* with acks: broken for good (error or reset); others carry on */
  void *tp;                /* the transport's own state (sock_stream.h, ofi_stream.h) */
  /* send side */
  struct braid_txframe tx[BRAID_SEND_BATCH];
  int tx_head, tx_count;
  size_t tx_done; /* the transport's progress on tx[tx_head], 0 before it starts (sockets: bytes
                     written; ofi: 1 once its header went) */
  struct braid_chunk_fifo unacked; /* with acks: chunks on this stream, in frame order */
  uint64_t frames_started, frames_acked, ignore_until;
  uint64_t ack_ns;         /* when an acknowledgement last covered new frames */
  /* receive side */
  bool eof;                /* the peer closed this stream */
  uint64_t frames_recvd, frames_ack_sent;
  uint64_t held_sent; /* the held_below this stream's last acknowledgement carried */
};

struct braid_sched;
struct braid_rail_stats;
struct braid_path_ops;

/* A send comm's stream path (stripe/tx.c). */
struct braid_tx_side {
  uint64_t next_seq;
  uint64_t peer_held_below; /* with acks: the receiver holds every message below this (ACK offset) */
  struct braid_req **pending; /* sends not yet fully queued, FIFO ring */
  int pend_head, pend_count;
  size_t pending_bytes;               /* with acks: not yet on a rail (incl. requeue) */
  struct braid_chunk_fifo requeue;    /* with acks: chunks of failed rails, to re-send */
  struct braid_chunk *chunk_free;     /* recycled chunk records */
  struct braid_sched *sched;          /* with acks */
  bool equal;                         /* BRAID_STRIPING=equal */
  uint32_t suspect;                   /* rails stalled, failed once their TCP path shows dead */
  unsigned rr;                        /* equal striping's turn */
  uint64_t next_tick_ns;
  uint64_t start_ns;                  /* when the scheduler started (event log times) */
  uint64_t last_ack_read_ns;          /* when acknowledgements were last read */
};

/* A receive comm's stream path (stripe/rx.c). */
struct braid_rx_side {
  uint64_t next_match;           /* lowest sequence not yet matched or buffered */
  uint64_t held_below;           /* every byte of every message below this is held */
  struct braid_rxmsg *msgs;      /* BRAID_MSG_WINDOW entries, by seq */
  struct braid_req *posted[BRAID_RECV_REQS]; /* receives with unmatched slots, posting order */
  int nposted;
  size_t unexpected_bytes, unexpected_max;
  int nunexpected; /* buffered messages not yet matched to a receive */
  char *sink;      /* scratch for discarded payload */
  uint64_t last_ack_ns;      /* when acknowledgements last went out */
};

/* Rejoin (comm/rejoin.c): both ends know the connection id and secret; the receiver holds its
 * listen handle's gate (comm/gate.h), where rejoining streams arrive, the sender where each rail
 * goes. */
struct braid_gate;
struct braid_rejoin_side {
  uint64_t conn_id;
  uint8_t secret[BRAID_SECRET_BYTES];
  int auth_mode; /* BRAID_AUTH_* agreed at set-up: rejoins prove themselves the same way */
  struct braid_gate *gate;
  uint64_t next_join_ns;
  struct sockaddr_storage rail_addr[16];
  const struct braid_iface *rail_ifc[16];
};

struct braid_comm {
  /* what it is */
  uint8_t kind;
  int dev;
  ncclResult_t err; /* sticky: once set, every call on the comm fails with it */
  char peer[64];    /* peer address for logs */
  int nrails;   /* rails in use; stream s runs on rail s % nrails */
  int nprimary; /* rails of the device itself; the rest are borrowed backups */
  int nstreams;
  bool acks;    /* several streams: chunks acknowledged, re-sent when a stream fails */
  bool ofi;     /* the streams' data goes over libfabric endpoints (ofi_stream.h) */
  struct braid_tclass cls; /* its traffic class, both ends (transport/tclass.h) */
  /* how its data moves */
  const struct braid_path_ops *path; /* (path.h) */
  void *path_state;                   /* the path's own state (the verbs path's) */
  pthread_mutex_t ofi_lock; /* streams' endpoint pointers: closing vs deregMr's forget */
  /* Socket helper threads (transport/socket/sock_helper.h): with threaded set, everything below
   * is the comm's lock's: NCCL's calls (xfer.c) and the helpers hold it; helpers drop it around
   * their system calls. */
  pthread_mutex_t lock;
  bool threaded;
  uint64_t proxy_next_ns;   /* the proxy's next progress pass while nothing completes (xfer.c) */
  void *helpers;            /* the socket transport's threads (sock_helper.c) */
  const struct braid_stream_ops *sops; /* the streams' transport (stream path only) */
  struct braid_stream *streams;
  /* its requests (xfer.c) */
  struct braid_req *reqs;
  int nreqs;
  int *free_reqs, nfree;
  uint64_t timeout_ns;
  size_t chunk;                       /* largest frame (the stream path) */
  struct braid_tx_side tx;            /* send comms, stream path (stripe/tx.c) */
  struct braid_rx_side rx;            /* receive comms, stream path (stripe/rx.c) */
  struct braid_rejoin_side rejoin;    /* who may reconnect a stream, and how (comm/rejoin.c) */
  /* telemetry (stripe/telemetry.h) */
  bool metrics;                       /* BRAID_METRICS_FILE set when the connection was made */
  struct braid_rail_stats *stats[16]; /* per rail, NULL when not reported */
  struct {                            /* diagnosis (diag.c) */
    unsigned generation;
    uint64_t test_calls;
  } diag;
};

/* NCCL's calls hold the comm's lock where helper threads share it (c->threaded). */
static inline void braid_comm_lock(struct braid_comm *c) {
  if (c->threaded) pthread_mutex_lock(&c->lock);
}
static inline void braid_comm_unlock(struct braid_comm *c) {
  if (c->threaded) pthread_mutex_unlock(&c->lock);
}

/* Marks the comm failed (first cause wins) and logs one WARN naming the peer. */
ncclResult_t braid_comm_fail(struct braid_comm *c, ncclResult_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Request pool (xfer.c). */
struct braid_req *braid_req_alloc(struct braid_comm *c, enum braid_req_kind kind);
void braid_req_release(struct braid_req *r);

/* Data path entry points (xfer.c).  mem: the buffers' registration by the comm's path (path.h
 * reg; NULL when the path needs none). */
ncclResult_t braid_xfer_isend(struct braid_comm *c, void *data, size_t size, int tag, void *mem,
                              void **request);
/* hint: NCCL's optional-completion hint came with the receive (see xfer.c for where it is
 * taken).  stages: NULL, or per buffer its staging (comm/stage.h) when data[i] is the host copy
 * of gpu[i]: test() copies what arrived to GPU memory before reporting the receive done. */
struct braid_stage;
ncclResult_t braid_xfer_irecv(struct braid_comm *c, int n, void **data, const size_t *sizes,
                              const int *tags, void *mem, bool hint, struct braid_stage *const *stages,
                              void *const *gpu, void **request);
/* iflush of data (registered by the path as mem): *request NULL when nothing needs doing. */
ncclResult_t braid_xfer_iflush(struct braid_comm *c, void *data, void *mem, void **request);
ncclResult_t braid_xfer_test(void *request, int *done, int *sizes);

#endif
