/* The GPUDirect flush of one verbs rail: an RC queue pair connected to itself, in the protection
 * domain of the rail's endpoint (so the user's registrations work on it), on a completion queue
 * of its own.  A flush is an RDMA READ of a few bytes from a received buffer into a registered
 * host scratch: the NIC's read of GPU memory comes after every write it placed there before, so
 * its completion says those writes are visible to the GPU (NCCL's net_ib does the same).
 *
 * One thread per flush (the connection's owner); not thread-safe. */
#ifndef BRAID_VERBS_FLUSH_H
#define BRAID_VERBS_FLUSH_H

#include <stdbool.h>
#include <stdint.h>

#include "transport/verbs/verbs_ep.h"

#define BRAID_VERBS_FLUSH_BYTES 4 /* read per flush */
#define BRAID_VERBS_FLUSH_DEPTH 16 /* reads in flight */

struct braid_verbs_flush;

/* Opens the loopback QP beside ep.  0, or -1 with a WARN. */
int braid_verbs_flush_open(struct braid_verbs_ep *ep, struct braid_verbs_flush **out);
/* Posts a read of BRAID_VERBS_FLUSH_BYTES (fewer when mr is shorter) at addr, inside mr.  0
 * posted, 1 no room (poll first), -1 with a WARN (outside mr, failed flush, refused post). */
int braid_verbs_flush_post(struct braid_verbs_flush *f, const struct braid_verbs_mr *mr, const void *addr,
                           uint64_t cookie);
/* Completed reads into ev (BRAID_VERBS_EV_READ_DONE, or BRAID_VERBS_EV_ERROR with why): how
 * many, or -1 when the CQ cannot be polled.  After an error the flush is failed. */
int braid_verbs_flush_poll(struct braid_verbs_flush *f, struct braid_verbs_ev *ev, int max);
/* Moves the QP to ERR, waits (bounded) for its reads, frees everything. */
void braid_verbs_flush_close(struct braid_verbs_flush *f);

#endif
