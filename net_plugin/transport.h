/* Which transport carries braid's rails: BRAID_TRANSPORT=auto|socket|ofi, decided once per
 * process and announced in one INFO line. */
#ifndef BRAID_TRANSPORT_H
#define BRAID_TRANSPORT_H

#include "nccl_plugin/common.h"

enum braid_transport { BRAID_TRANSPORT_SOCKET = 0, BRAID_TRANSPORT_OFI = 1 };

/* Decides (first call) and returns through *t; ncclInvalidArgument for a bad value, or when ofi
 * is asked for and libfabric cannot give it (a WARN says why). */
ncclResult_t braid_transport_get(enum braid_transport *t);
/* The decision, for logs: "TCP sockets" or "libfabric <provider>". */
const char *braid_transport_name(void);
/* Whether BRAID_TRANSPORT named the transport (socket or ofi) rather than auto. */
int braid_transport_forced(void);
/* Whether this process's transport is ofi (false also when the choice failed). */
int braid_transport_ofi(void);

#endif
