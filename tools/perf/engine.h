/* braid-perf: the proxy-like progress engine.
 *
 * One thread drives every connection of a rank, as NCCL's proxy thread does: each pass over the
 * connections posts receives into free slots (NCCL_STEPS = 8 per connection, receives posted
 * before sends), posts sends whose data is ready (isend returning a NULL request is retried on
 * the next pass), tests the oldest request of each connection, and hands completed receives to
 * the operation in order. The operation (p2p.c, ring.c, tree.c) supplies the data through three
 * callbacks and never touches the plugin. Every wait is bounded: no progress for the timeout, or
 * a rank lost on the rendezvous, ends the run with a message. */
#ifndef PERF_ENGINE_H
#define PERF_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "../netload/netload.h"
#include "mem.h"
#include "opts.h"

#define ENG_STEPS 8 /* NCCL_STEPS */

struct rdv;

/* A registered staging buffer of ENG_STEPS slots (NCCL's per-protocol connection buffer): of
 * --mem's kind for SIMPLE, host memory for LL and LL128 (mem.h). */
struct eng_buf {
  struct perf_buf mem;  /* mem.ptr: the slots */
  size_t slot;  /* wire bytes per slot */
  void *mh;
};

/* One direction of one connection to one peer on one channel. */
struct eng_conn {
  int peer, chan, is_send;
  void *comm;
  struct eng_buf buf[3];   /* indexed by enum perf_proto (LL, LL128, SIMPLE) */
  uint64_t seq;            /* messages over the connection's lifetime: LL flag values */
  int user;                /* free for the operation (e.g. child index) */
  /* per operation */
  uint64_t total, posted, completed, consumed;
  int filled;              /* the next send's slot holds data (isend gave NULL; retry) */
  size_t fill_len;         /* data bytes of that send */
  void *req[ENG_STEPS];
  int got[ENG_STEPS];      /* bytes test() reported */
  int hinted[ENG_STEPS];   /* irecv was posted with the optional-completion hint */
  void *flush[ENG_STEPS];  /* the receive is done; its iflush request is still pending */
  void *user_mh;           /* registration of the user buffer for eng_op.direct */
};

/* What an operation tells the engine. Message indices i count from 0 per connection per op. */
struct eng_op {
  enum perf_proto proto;   /* never PERF_PROTO_AUTO here */
  size_t slot_wire;        /* wire bytes per slot (what irecv posts) */
  size_t step_data;        /* most data bytes in one message */
  void *ctx;
  /* Writes send message i of c to dst (<= step_data bytes), sets *len; returns 1 when its
   * inputs are not ready yet (the engine asks again later), 0 when filled. */
  int (*fill)(void *ctx, struct eng_conn *c, uint64_t i, void *dst, size_t *len);
  /* Data bytes receive message i of c will carry. */
  size_t (*expect)(void *ctx, struct eng_conn *c, uint64_t i);
  /* Receive message i of c has arrived (in order); src holds `len` data bytes. */
  void (*consume)(void *ctx, struct eng_conn *c, uint64_t i, const void *src, size_t len);
  /* Optional (SIMPLE only): message i of c goes straight from / into the user's registered
   * buffer (c->user_mh, of --mem's kind), as NCCL's p2p does with registered user buffers:
   * returns its address and sets *len to its data bytes.  fill/consume are then not called; no
   * staging copy. */
  char *(*direct)(void *ctx, struct eng_conn *c, uint64_t i, size_t *len);
};

struct engine {
  struct netload *nl;
  struct rdv *rdv;
  int rank;
  int timeout_s;
  int optional_recv;       /* NCCL_NET_OPTIONAL_RECV_COMPLETION */
  int yield_idle;
  enum perf_mem mem;       /* --mem: the SIMPLE staging buffers' kind (and the user buffers') */
  struct eng_conn **conns;
  int nconns;
  char *scratch;           /* LL/LL128 encode/decode area; SIMPLE's host side for GPU memory */
  size_t scratch_bytes;
  uint64_t null_sends, null_recvs, hint_posts; /* statistics */
  uint64_t early_recvs; /* hinted receives test() completed with another size than sent */
  uint64_t flushes, flush_reqs; /* iflush calls, and those that returned a request to test */
};

/* Runs one operation until every connection with total > 0 has moved all its messages.
 * The caller sets c->total on the connections the op uses (others must be 0).
 * Returns 0, or -1 after printing why (plugin error, size mismatch, timeout, rank lost). */
int eng_run(struct engine *e, const struct eng_op *op);

/* Deregisters and frees every staging buffer of c (before closeSend/closeRecv). */
int eng_conn_release(struct engine *e, struct eng_conn *c);

/* Prints a failed plugin call and returns -1. */
int eng_fail(struct engine *e, const char *call, ncclResult_t r, const struct eng_conn *c);

#endif
