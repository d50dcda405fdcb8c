/* Rejoin: a stream that broke for good (reset, user timeout) or never connected at set-up is
 * reconnected later, so its rail comes back instead of staying down for the connection's life.
 *
 * The receiver takes rejoining streams from its listen handle's gate (comm/gate.h: it outlives the
 * listen comm, and proves each stream as set-up does);
 * the sender reconnects from the rail's own NIC with a hello carrying the connection id, the
 * stream index and BRAID_HELLO_REJOIN, backing off between attempts.  Both ends then restart the
 * stream's frame counts from zero; the rail is probed and re-admitted by the scheduler. */
#ifndef BRAID_REJOIN_H
#define BRAID_REJOIN_H

#include "comm/comm.h"

/* Sender: advances reconnects of dead streams (cheap when none is dead). */
void braid_rejoin_connect(struct braid_comm *c, uint64_t now);
/* Receiver: accepts rejoining streams (runs about every 50 ms). */
void braid_rejoin_accept(struct braid_comm *c, uint64_t now);
/* Frees what both sides hold for rejoins. */
void braid_rejoin_free(struct braid_comm *c);

#endif
