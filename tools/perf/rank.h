/* braid-perf: running ranks: forking local ones, and the life of one rank. */
#ifndef PERF_RANK_H
#define PERF_RANK_H

#include "opts.h"

/* -n N: binds the rendezvous on 127.0.0.1 first, forks N ranks, waits for them; a rank that
 * fails gets the others a grace period, then they are killed. Returns the exit status. */
int rank_fork_local(const struct perf_opts *o);
/* One rank (multi-host mode, or a forked child): rendezvous, plugin, connections, the sweep,
 * teardown. listen_fd is rank 0's rendezvous socket (or -1). Returns the exit status. */
int rank_main(const struct perf_opts *o, int rank, int nranks, int listen_fd, const char *host,
              int port);

#endif
