/* Which transport carries braid's rails: BRAID_TRANSPORT=auto|socket|ofi|verbs, decided once
 * per process and announced in one INFO line.  auto: verbs when an RDMA device has an active
 * port, else libfabric when its best provider is a hardware one, else TCP sockets. */
#ifndef BRAID_TRANSPORT_H
#define BRAID_TRANSPORT_H

#include "nccl_plugin/common.h"

enum braid_transport { BRAID_TRANSPORT_SOCKET = 0, BRAID_TRANSPORT_OFI = 1, BRAID_TRANSPORT_VERBS = 2 };

/* Decides (first call) and returns through *t; ncclInvalidArgument for a bad value, or when ofi
 * is asked for and libfabric cannot give it (a WARN says why). */
ncclResult_t braid_transport_get(enum braid_transport *t);
/* The decision, for logs: "TCP sockets" or "libfabric <provider>". */
const char *braid_transport_name(void);
/* Whether BRAID_TRANSPORT named the transport (socket or ofi) rather than auto. */
int braid_transport_forced(void);
/* This process's transport (socket also when the choice failed). */
enum braid_transport braid_transport_kind(void);
/* "TCP sockets", "libfabric", "verbs", for messages about a mismatch. */
const char *braid_transport_word(enum braid_transport t);

#endif
