/* A communicator's life: allocated by set-up (comm/connect.c, comm/listen.c), made ready once its
 * streams are connected (its path started, telemetry registered), freed at close (the path
 * quiesced first, so nothing lands in freed memory).  comm.h holds the types every layer shares;
 * this module sits above the layers a comm's life involves. */
#ifndef BRAID_LIFE_H
#define BRAID_LIFE_H

#include "comm/comm.h"

struct braid_comm *braid_comm_new(enum braid_comm_kind kind, int dev, int nstreams);
/* After the streams' fds, rails and names are set: sockets tuned, data path state built. */
ncclResult_t braid_comm_ready(struct braid_comm *c);
void braid_comm_free(struct braid_comm *c);

#endif
