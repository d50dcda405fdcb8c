/* A connection's traffic class (see tclass.h). */
#include "transport/tclass.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "log.h"
#include "param.h"
#include "transport/ofi/ofi.h"

ncclResult_t braid_tclass_check(int traffic_class, const char *where) {
  if (traffic_class == BRAID_TCLASS_UNDEF || (traffic_class >= 0 && traffic_class <= 255))
    return ncclSuccess;
  BRAID_WARN("%s: NCCL's trafficClass %d (ncclConfig_t) is not a traffic class braid can apply: -1 "
             "(none) or 0..255, the IP TOS / GRH traffic class byte", where, traffic_class);
  return ncclInvalidArgument;
}

struct braid_tclass braid_tclass_resolve(int traffic_class, enum braid_transport t, int ib_tc,
                                         int ib_sl) {
  struct braid_tclass c = {traffic_class, BRAID_TCLASS_UNDEF};
  if (t != BRAID_TRANSPORT_VERBS) return c;
  /* NCCL's net_ib: the environment first, then the communicator's class, for both. */
  if (ib_tc >= 0) c.tc = ib_tc;
  c.sl = ib_sl >= 0 ? ib_sl : traffic_class;
  return c;
}

struct braid_tclass braid_tclass_of(int traffic_class, enum braid_transport t) {
  return braid_tclass_resolve(traffic_class, t, (int)braid_param_int(BRAID_P_IB_TC),
                              (int)braid_param_int(BRAID_P_IB_SL));
}

/* Classes already announced: one line each, whichever connection met it first. */
#define ANNOUNCED_MAX 64
static pthread_mutex_t announced_lock = PTHREAD_MUTEX_INITIALIZER;
static int announced[ANNOUNCED_MAX], nannounced;

static bool first_time(const struct braid_tclass *cls, enum braid_transport t) {
  int key = ((int)t << 18) | ((cls->tc + 1) << 9) | (cls->sl + 1);
  bool first = true;
  pthread_mutex_lock(&announced_lock);
  for (int i = 0; i < nannounced && first; i++) first = announced[i] != key;
  if (first && nannounced < ANNOUNCED_MAX) announced[nannounced++] = key;
  else if (first) first = false; /* a job with more classes than this has been told enough */
  pthread_mutex_unlock(&announced_lock);
  return first;
}

/* Where a verbs value came from, on the connecting side. */
static const char *origin(enum braid_param_id env, bool connector) {
  if (!connector) return "the connecting peer's";
  const char *var = braid_param_from(env);
  return var ? var : "NCCL's trafficClass";
}

void braid_tclass_announce(const struct braid_tclass *cls, enum braid_transport t, bool connector) {
  if ((cls->tc < 0 && cls->sl < 0) || !first_time(cls, t)) return;
  if (t == BRAID_TRANSPORT_VERBS) {
    char sl[96] = "0 (the default)";
    if (cls->sl >= 0)
      snprintf(sl, sizeof sl, "%d (%s%s)", cls->sl, origin(BRAID_P_IB_SL, connector),
               cls->sl > 15 ? "; service levels are 0..15, BRAID_IB_SL sets another" : "");
    char tc[64] = "0 (the default)";
    if (cls->tc >= 0) snprintf(tc, sizeof tc, "%d (%s)", cls->tc, origin(BRAID_P_IB_TC, connector));
    BRAID_INFO(NCCL_INIT | NCCL_NET, "traffic class: verbs queue pairs use GRH traffic class %s and "
               "service level %s on both ends; the set-up sockets' IP TOS is %s", tc, sl,
               cls->tc >= 0 ? "the traffic class" : "the default");
    return;
  }
  const char *from = connector ? "NCCL's trafficClass" : "the connecting peer's class";
  if (t == BRAID_TRANSPORT_SOCKET) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "traffic class %d (0x%02x, %s): the IP TOS / IPv6 traffic "
               "class of every stream's socket on both ends (TCP keeps the low two ECN bits its own)",
               cls->tc, cls->tc, from);
    return;
  }
  /* libfabric's tx_attr->tclass takes service classes (FI_TC_LOW_LATENCY, FI_TC_BULK_DATA, ...) or
   * a DSCP, and no provider braid runs on reads a DSCP from it: tcp reads tclass only to leave
   * Nagle on for FI_TC_BULK_DATA, efa only to pick its service level for FI_TC_LOW_LATENCY,
   * verbs not at all (libfabric 1.17 to 2.x).  tcp's sockets are its own: braid cannot mark them. */
  BRAID_WARN("traffic class %d (%s) is not carried over libfabric (%s): its providers take no IP "
             "or GRH traffic class (tx_attr->tclass names service classes, and tcp, verbs and efa "
             "read no DSCP from it); the data goes in the default class, only braid's set-up "
             "sockets carry the class. BRAID_TRANSPORT=socket or verbs applies it to the data",
             cls->tc, from, braid_ofi_provider());
}
