/* A connection's traffic class: what NCCL's per-communicator trafficClass (ncclConfig_t; handed to
 * the plugin by init's config from ncclNet_v11, by connect's config on v10) and braid's
 * BRAID_IB_TC / BRAID_IB_SL make of it on each transport.
 *
 * The connecting side decides, from its communicator's class and its environment, and its hello
 * carries the result (wire/hello.h); the accepting side applies what the hello says.  NCCL's IB
 * transport does the same (the connector's tc and sl travel in its connection metadata), and it
 * has to: NCCL 2.26/2.27 hand listen and accept no configuration at all, so only the connector
 * knows the class.  Both directions of a connection then share it (a lossless class needs the
 * ACKs and the peer's control messages in it as much as the data).
 *
 *   sockets  tc: trafficClass, the IP TOS byte (IPv6: traffic class) of every stream's socket, on
 *            both ends; unset: the system's default.  Over TCP the kernel owns the two ECN bits:
 *            the class's DSCP (its upper six bits) is what travels.
 *   verbs    as NCCL's net_ib: tc = BRAID_IB_TC (else NCCL_IB_TC) when set, else trafficClass,
 *            else 0: the GRH traffic class of every queue pair (RoCE v2: the IP TOS byte);
 *            sl = BRAID_IB_SL (else NCCL_IB_SL) when set, else trafficClass, else 0.  The set-up
 *            sockets carry tc.
 *   ofi      libfabric offers no IP or GRH class to ask for (transport/tclass.c says why): the
 *            set-up sockets carry tc, the data does not, and one WARN says so. */
#ifndef BRAID_TCLASS_H
#define BRAID_TCLASS_H

#include <stdbool.h>

#include "nccl_plugin/common.h"
#include "transport/transport.h"

#define BRAID_TCLASS_UNDEF (-1) /* NCCL_NET_TRAFFIC_CLASS_UNDEF: the communicator sets none */

struct braid_tclass {
  int tc; /* 0..255, or BRAID_TCLASS_UNDEF: leave the system's default */
  int sl; /* verbs' service level, 0..255 (a trafficClass, as NCCL's IB uses it), or UNDEF (0) */
};

/* The class a connection without one has. */
#define BRAID_TCLASS_NONE ((struct braid_tclass){BRAID_TCLASS_UNDEF, BRAID_TCLASS_UNDEF})

/* A trafficClass NCCL may hand over: -1 or 0..255 (one byte on every transport); anything else is
 * refused with a WARN naming where it came from (the call: "init", "connect"):
 * ncclInvalidArgument. */
ncclResult_t braid_tclass_check(int traffic_class, const char *where);

/* The class a connection over t uses, from the communicator's trafficClass and the values of
 * BRAID_IB_TC / BRAID_IB_SL (-1: unset), which only verbs reads.  Pure. */
struct braid_tclass braid_tclass_resolve(int traffic_class, enum braid_transport t, int ib_tc,
                                         int ib_sl);

/* braid_tclass_resolve with this process's BRAID_IB_TC and BRAID_IB_SL. */
struct braid_tclass braid_tclass_of(int traffic_class, enum braid_transport t);

/* One line per process and class (its values and transport): INFO saying what carries it, or
 * over ofi a WARN that the data cannot.  connector: this side decided (and knows where each value
 * came from), else it has the peer's.  Nothing for a connection without a class. */
void braid_tclass_announce(const struct braid_tclass *cls, enum braid_transport t, bool connector);

#endif
