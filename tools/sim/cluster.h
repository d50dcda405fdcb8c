/* The simulated cluster: a rail-optimized fabric (rail r of every node on rail r's switches),
 * link rates with a scenario's faults applied, latencies by switch distance, and braid's striped
 * rate per node (what braid's scheduler delivers over that node's rails, from railsim). */
#ifndef BRAID_SIM_CLUSTER_H
#define BRAID_SIM_CLUSTER_H

#include <stdbool.h>

#include <stdio.h>

#include "cfg.h"

enum scenario { SC_HEALTHY, SC_SLOW_NICS, SC_RAIL_DOWN, SC_SLOW_NODE, SC_SLOW_SERVER, SC_COUNT };

struct stripe_cache; /* stripe.c */

struct cluster {
  const struct sim_cfg *cfg;
  enum scenario sc;
  int nodes, gpus, rails, servers;
  double msg_bytes;   /* allreduce size per GPU */
  double nic_Bps;     /* nominal */
  double *nic;        /* [node * rails + rail], bytes/s each direction; 0: down */
  double *nvl;        /* [node], per GPU, bytes/s each direction */
  double *striped;    /* [node]: braid's delivered rate over the node's rails */
  double server[16];  /* bytes/s each direction */
  bool *node_faulty;  /* [node]: some rate differs from nominal */
  bool *rail_faulty;  /* [rail]: some node's NIC on it differs from nominal */
  bool any_rail_down;
};

/* Builds the cluster for `nodes` nodes (the config's other sizes) under a scenario; braid's
 * striped rates come from the rail simulator through `cache`.  Returns 0, or -1 (out of memory
 * or a rail simulation that failed). */
int cluster_build(struct cluster *cl, const struct sim_cfg *cfg, int nodes, enum scenario sc,
                  struct stripe_cache *cache);
void cluster_free(struct cluster *cl);

/* Switches crossed between two nodes on a rail, and one inter-node step's latency (s). */
int cluster_switches(const struct cluster *cl, int a, int b);
double cluster_net_lat(const struct cluster *cl, int a, int b);
/* A leaf's uplink capacity on one rail (bytes/s), and whether two nodes sit under one leaf. */
double cluster_uplink(const struct cluster *cl);
bool cluster_same_leaf(const struct cluster *cl, int a, int b);

const char *scenario_name(enum scenario sc);
int scenario_parse(const char *name); /* -1: unknown */

/* ---- braid's striping (stripe.c): the rate braid's scheduler delivers over a set of rails,
 * measured by running the rail simulator (railsim.c, driving net_plugin/stripe/sched.c) on a backlog
 * of chunks after a warm-up; a rail of rate 0 is down (failed at time 0).  Cached per rate
 * vector.  */
struct stripe_cache *stripe_cache_new(void);
void stripe_cache_free(struct stripe_cache *c);
/* Returns bytes/s, or a negative value on error. */
double stripe_Bps(struct stripe_cache *c, const struct sim_cfg *cfg, const double *rates, int n);
/* Rail simulations run so far, and each distinct one's rates and result (for the report). */
void stripe_print(const struct stripe_cache *c, FILE *f);
int stripe_runs(const struct stripe_cache *c);

#endif
