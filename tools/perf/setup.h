/* braid-perf: loading the plugin, init, properties and connection set-up for one rank. */
#ifndef PERF_SETUP_H
#define PERF_SETUP_H

#include "engine.h"
#include "opts.h"

struct rdv;

struct perf_net {
  struct netload nl;
  void *ctx;
  int ctx_valid;
  int dev, ndev;
  netload_props_t props;
  struct engine eng;
  uint64_t comm_id;       /* the commId passed to init (NCCL's commHash; CollNet gets it too) */
  int traffic_class;      /* --traffic-class: the communicator's trafficClass (-1: none) */
  struct collnet *coll;   /* --algo collnet: CollNet state (collnet.h), else NULL */
};

/* Opens the plugin (NCCL's name rules), calls init/devices/getProperties and checks the
 * properties as NCCL does. 0 on success; prints the failing call otherwise. */
int setup_plugin(struct perf_net *pn, const struct perf_opts *o, struct rdv *r, int rank);
/* Listens, all-gathers handles over the rendezvous, and polls connect/accept until every
 * connection the op needs on channels 0..nch-1 is up. */
int setup_connect(struct perf_net *pn, const struct perf_opts *o, int nch, struct rdv *r);
/* deregMr, closeSend/closeRecv, finalize, dlclose. */
int setup_teardown(struct perf_net *pn);
/* One line describing the plugin and device (rank 0 prints it). */
void setup_describe(const struct perf_net *pn, char *buf, size_t len);

#endif
