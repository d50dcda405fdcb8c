/* braid-trace: a net plugin that forwards every call to another one (BRAID_TRACE_INNER) and logs
 * it.  abi.c exports the tables and calls our braid_net_* functions (net.h); these forward through
 * netload and append one line per call to the trace (writer.c documents the format).
 *
 * Every object handed to the caller is ours, wrapping the inner plugin's: contexts, comms, memory
 * handles and requests each carry a small id (x1, l1, c1, m1, r1 ...) given in order of creation,
 * so two runs' traces can be compared without the pointers in them. */
#ifndef BRAID_TRACE_H
#define BRAID_TRACE_H

#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"
#include "netload.h"

#define TRACE_MAGIC_CTX 0x54435458u  /* "TCTX" */
#define TRACE_MAGIC_COMM 0x54434F4Du /* "TCOM" */
#define TRACE_MAGIC_MR 0x544D5252u   /* "TMRR" */
#define TRACE_MAGIC_REQ 0x54524551u  /* "TREQ" */

struct trace_ctx {
  uint32_t magic;
  int id;      /* x<id> */
  void *inner; /* netload's context */
};

enum trace_comm_kind { TRACE_LISTEN = 'l', TRACE_SEND = 's', TRACE_RECV = 'r' };

struct trace_comm {
  uint32_t magic;
  enum trace_comm_kind kind;
  int id;        /* l<id> for listen comms, c<id> for send and recv comms */
  void *inner;
  uint64_t hash; /* of the handle: listen's output, connect's input; accept inherits listen's */
  int inflight;  /* isend/irecv requests posted, not yet done (under the writer's lock) */
  atomic_int accept_tries; /* listen comms: accept() calls that returned no comm yet */
  atomic_int post_busy;    /* isend/irecv calls that returned no request since the last post */
};

struct trace_mr {
  uint32_t magic;
  int id;
  void *inner;
};

enum trace_req_op { TRACE_OP_ISEND, TRACE_OP_IRECV, TRACE_OP_IFLUSH };

struct trace_req {
  uint32_t magic;
  enum trace_req_op op;
  int id;
  int n;           /* buffers (isend: 1) */
  int polls;       /* test() calls that returned done=0 */
  void *inner;
  struct trace_comm *comm;
  uint64_t t_post; /* ns, monotonic */
};

/* ---- inner plugin (inner.c) ---- */

/* The wrapped plugin, opened by the first call that needs it. */
extern struct netload trace_nl;
/* Opens BRAID_TRACE_INNER once (thread-safe); later calls return the first result. */
ncclResult_t trace_inner_open(void);
/* Process context for ABI v7..v10 callers, which pass no context (NULL until an init succeeds). */
struct trace_ctx *trace_default_ctx(void);
void trace_set_default_ctx(struct trace_ctx *ctx);

/* Validate an object from the caller; NULL (and a warning) when it is not one of ours. */
struct trace_ctx *trace_ctx_get(void *p, const char *what);
struct trace_comm *trace_comm_get(void *p, int kind, const char *what);

/* ---- ids and handles (ids.c) ---- */

enum trace_id_kind { TRACE_ID_CTX, TRACE_ID_LISTEN, TRACE_ID_COMM, TRACE_ID_MR, TRACE_ID_REQ,
                     TRACE_ID_COUNT };
int trace_next_id(enum trace_id_kind kind);
/* FNV-1a 64 of NCCL's 128-byte handle: pairs a connect with its listen across traces. */
uint64_t trace_handle_hash(const void *handle);
/* connect() is polled with the same handle, which plugins may rewrite as they go (braid and IB
 * keep their state machine there): the hash is taken before the first call for a handle and
 * remembered, with the number of calls, until the connect finishes. */
uint64_t trace_connect_begin(const void *handle, const void *owner, int *tries);
void trace_connect_end(const void *handle);
/* Forgets the pending connects of a context that is going away. */
void trace_connect_forget(const void *owner);

/* ---- the trace (writer.c) ---- */

/* One line being built: "<t_us> T<thread> <call>" then " key=value" pieces. */
struct trace_line {
  char buf[4096];
  size_t len;
};
void trace_line_begin(struct trace_line *l, const char *call, uint64_t t0);
void trace_line_add(struct trace_line *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Finishes the line with " inflight=<n>" (when comm is given: comm->inflight moves by delta
 * first) and " rc=<rc> dur_ns=<t1 - t0>", and writes it whole under the writer's lock, so counts
 * and line order agree.  flush: write the buffer out now (closes, finalize). */
void trace_emit(struct trace_line *l, ncclResult_t rc, uint64_t t0, uint64_t t1,
                struct trace_comm *comm, int delta, int flush);
void trace_flush(void);

#endif
