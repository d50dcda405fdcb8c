/* braid-perf: the rendezvous side channel (TCP, star around rank 0).
 *
 * Used to all-gather the plugins' listen handles, to exchange results and for barriers. Every
 * wait is bounded by the timeout given to rdv_join; a rank that dies shows up as EOF on its
 * socket, which rdv_peer_lost() reports without blocking (the progress engine polls it). */
#ifndef PERF_RDV_H
#define PERF_RDV_H

#include <stddef.h>

struct rdv {
  int rank, nranks;
  int *fds;        /* rank 0: fds[k] talks to rank k (fds[0] = -1); other ranks: fds[0] */
  int timeout_ms;
  int lost_rank;   /* rank whose socket closed, after rdv_peer_lost() said so */
  double lost_at;  /* when rdv_peer_silent() first saw it (monotonic seconds), 0 before */
};

/* Binds and listens on host:port (port 0: any; the chosen port is returned in *port).
 * Returns the socket or -1 with a message on stderr. */
int rdv_listen(const char *host, int *port);
/* Connects the star. Rank 0 passes its listening socket (which this closes); other ranks pass -1
 * and connect to host:port, retrying until the timeout. 0 on success. */
int rdv_join(struct rdv *r, int listen_fd, const char *host, int port, int rank, int nranks,
             int timeout_s);
/* all[k*len..] receives rank k's `mine`, on every rank. 0 on success. */
int rdv_allgather(struct rdv *r, const void *mine, void *all, size_t len);
int rdv_barrier(struct rdv *r);
/* 1 when a peer's socket has closed or failed (that rank is gone); never blocks. */
int rdv_peer_lost(struct rdv *r);
/* Seconds braid-perf keeps driving the plugin after a peer is gone, so that the plugin's own
 * error comes first: NCCL watches no peer during a transfer, the net plugin is what notices. */
#define RDV_LOST_GRACE_S 5
/* 1 once a peer has been gone for RDV_LOST_GRACE_S (now: monotonic seconds) while the plugin
 * reported nothing; 0 before, including while the grace runs. */
int rdv_peer_silent(struct rdv *r, double now);
void rdv_close(struct rdv *r);

#endif
