/* Socket helper threads (BRAID_SOCKET_THREADS): a connection's socket I/O on threads of its own,
 * so that NCCL's proxy thread only posts and tests, and one connection's sockets, and the two
 * directions of a rank, use more than one core.
 *
 * A comm gets min(threads, streams) helpers; stream i belongs to helper i % helpers, which alone
 * makes system calls on its socket.  A helper runs the same data path as NCCL's calls
 * (stripe/tx.c, stripe/rx.c: placing chunks, reading acknowledgements, matching frames, sending
 * acknowledgements), holding the comm's lock (c->lock) for that bookkeeping and dropping it around
 * each system call, so the bytes move while the proxy and the other helpers go on.  When its
 * streams can do nothing it sleeps in poll() on them and on an eventfd the proxy writes when it
 * gives it work.  Threads 0 (the default on a machine with few cores) keeps every call on NCCL's
 * proxy thread, as before.
 *
 * The rule that keeps the threads apart: a helper marks its stream busy (under the lock) before
 * a system call and clears the mark after it; anyone else who holds the lock and changes what
 * the call reads or writes (a batch dropped after a rail failed, a frame turned into a discard
 * when its message completed elsewhere, a socket replaced by a rejoin) first waits for the mark
 * to clear (braid_sock_quiet), then settles the call's result itself (sock_stream.h). */
#ifndef BRAID_SOCK_HELPER_H
#define BRAID_SOCK_HELPER_H

#include <stdbool.h>

#include "nccl_plugin/common.h"

struct braid_comm;
struct braid_stream;

/* Helper threads per connection: BRAID_SOCKET_THREADS, or, when it is -1, the automatic choice
 * from the cores this process may use and its rails' nominal speed in bytes/s (logged once). */
int braid_sock_threads(double rails_Bps);

/* Starts c's helpers (c->threaded is set when there are any); ncclSuccess or the error. */
ncclResult_t braid_sock_helpers_start(struct braid_comm *c);
/* Stops and joins them (idempotent); called without the lock. */
void braid_sock_helpers_stop(struct braid_comm *c);

/* Whether the calling thread makes s's system calls: no helpers, or s's own. */
bool braid_sock_mine(const struct braid_stream *s);
/* Wakes s's helper if it sleeps (the caller holds the lock and gave it work). */
void braid_sock_wake(struct braid_stream *s);

/* Around a system call on s's socket: in s's helper the lock is dropped and s marked busy. */
void braid_sock_io_enter(struct braid_comm *c, struct braid_stream *s);
void braid_sock_io_leave(struct braid_comm *c, struct braid_stream *s);
/* The caller holds the lock: waits until no system call on s is under way. */
void braid_sock_quiet(struct braid_stream *s);

#endif
