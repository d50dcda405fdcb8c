/* A communicator's data path: the operations behind isend / irecv / test / regMr, one table per
 * kind of path.  comm/xfer.c (request slots and argument checks) and api/net.c (memory handles)
 * call only these; they never ask which transport a comm uses.
 *
 * Two paths exist because two protocols do:
 * - the stream path (stripe/stream_path.c): messages cut into framed chunks pushed on streams,
 *   matched by the receiver, acknowledged and re-sent on failure; its streams run over a stream
 *   transport (TCP sockets or libfabric endpoints).
 * - the verbs path (transport/verbs/verbs_path.c): the receiver's buffers advertised (CTS) and
 *   written into with RDMA, striped over the rails by the same scheduler (stripe/sched.h).
 * A new transport that moves bytes or messages on a stream is a stream transport; one that writes
 * into remote memory is a path like verbs. */
#ifndef BRAID_PATH_H
#define BRAID_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/common.h"

struct braid_comm;
struct braid_req;

/* What a registration is of: memory of type (NCCL_PTR_HOST, NCCL_PTR_CUDA, NCCL_PTR_DMABUF) at the
 * buffer's address, registered by address when fd is -1, else as the dma-buf fd at offset, mapped
 * at the buffer's address (NCCL passes NCCL_PTR_CUDA with the fd).  The fd is NCCL's and valid
 * only during the call. */
struct braid_mem_desc {
  int type;
  int fd;
  uint64_t offset;
};

struct braid_path_ops {
  const char *name;
  int max_recvs; /* the largest grouped receive the path takes */
  /* After set-up (streams connected, rails known): links started, data-path state built.  An
   * error is also recorded in c->err or logged. */
  ncclResult_t (*start)(struct braid_comm *c);
  /* Whether data may be posted: 1 yes, 0 not yet (NCCL retries the call), -1 failed (c->err). */
  int (*ready)(struct braid_comm *c);
  /* The path's own registration of [data, data+size), described by *desc, in *mem (reg NULL:
   * the path needs none, takes host memory only, and then isend/irecv take any memory).
   * deregister undoes it; it may run on another thread than the data path (NCCL's proxy service
   * thread).  Everything the registration needs from desc->fd happens inside the call. */
  ncclResult_t (*reg)(struct braid_comm *c, void *data, size_t size, const struct braid_mem_desc *desc,
                      void **mem);
  void (*dereg)(struct braid_comm *c, void *data, size_t size, void *mem);
  /* Post r (its fields filled by xfer.c).  *again: no room now, r is released and NCCL retries.
   * An error releases r; c->err, when set, is the comm's for good. */
  ncclResult_t (*isend)(struct braid_comm *c, struct braid_req *r, void *mem, bool *again);
  ncclResult_t (*irecv)(struct braid_comm *c, struct braid_req *r, void *mem, bool *again);
  /* Makes the data received into data (registered as mem, GPU memory) visible to the GPU: r
   * (a BRAID_REQ_FLUSH) completes through test once it is.  *none: nothing to do, r released.
   * NULL: the path never needs a flush. */
  ncclResult_t (*flush)(struct braid_comm *c, struct braid_req *r, void *data, void *mem, bool *none);
  /* Progress for r; sets r->done (and the sizes of a receive's slots) when it completed. */
  ncclResult_t (*test)(struct braid_comm *c, struct braid_req *r);
  /* Stops everything that could still write into memory (endpoints closed, queue pairs fenced);
   * then frees the path's state.  Both run once, in that order, at close. */
  void (*quiesce)(struct braid_comm *c);
  void (*free)(struct braid_comm *c);
  /* WARN lines on where the path stands (SIGUSR1, BRAID_WAIT_WARN_MS); true when the path's
   * description is complete (the requests are not listed). */
  bool (*describe)(struct braid_comm *c, uint64_t now);
};

extern const struct braid_path_ops braid_stream_path;
extern const struct braid_path_ops braid_verbs_path;

#endif
