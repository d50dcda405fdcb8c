/* The stream path's two sides: the send side (tx.c: messages cut into chunks, placed on rails by
 * the scheduler, acknowledged, re-sent) and the receive side (rx.c: frames matched to receives
 * and acknowledged), above a stream transport (transport/stream.h).  stream_path.c is their only
 * caller in the plugin; the fuzzers drive them directly. */
#ifndef BRAID_STRIPE_H
#define BRAID_STRIPE_H

#include <stdbool.h>

#include "comm/comm.h"

ncclResult_t braid_tx_init(struct braid_comm *c);
ncclResult_t braid_tx_send(struct braid_comm *c, struct braid_req *r);
ncclResult_t braid_tx_progress(struct braid_comm *c);
void braid_tx_free(struct braid_comm *c);

ncclResult_t braid_rx_init(struct braid_comm *c);
ncclResult_t braid_rx_post(struct braid_comm *c, struct braid_req *r);
ncclResult_t braid_rx_progress(struct braid_comm *c, bool read);
void braid_rx_free(struct braid_comm *c);

#endif
