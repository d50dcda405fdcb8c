/* braid-sim's configuration: the cluster, the collective and the faults, from `key = value`
 * lines (a file, or --set), every key with a default and a one-line description. */
#ifndef BRAID_SIM_CFG_H
#define BRAID_SIM_CFG_H

#include <stdio.h>

struct sim_cfg {
  /* cluster */
  int nodes, gpus, rails;
  double nic_gbps;          /* per NIC (one per rail per node), each direction */
  double nvlink_GBps;       /* per GPU, each direction */
  double net_lat_us;        /* per inter-node step: NIC, PCIe, software (NCCL proxy) */
  double switch_lat_us;     /* per switch crossed */
  double nvlink_lat_us;     /* per intra-node step */
  int tiers, nodes_per_leaf, leaves_per_pod;
  double oversub;           /* leaf downlink : uplink capacity */
  /* NCCL */
  int channels_per_rail;
  double ring_chunk_kib, tree_chunk_kib;
  /* CollNet-PS */
  int servers;
  double server_gbps;       /* per server, each direction (NICs and reduction) */
  double part_kib;          /* BRAID_PS_PARTITION_BYTES */
  int ps_ops;               /* operations simulated (weights adapt from one to the next) */
  /* braid */
  double braid_chunk_kib;   /* BRAID_CHUNK_BYTES */
  double braid_warmup_ms, braid_measure_ms;
  /* collective */
  double msg_mib;
  /* faults */
  int slow_nics;
  double slow_nic_frac;
  int down_rail;
  double slow_node_frac, slow_server_frac;
  /* report */
  int sweep;                /* scaling sweep from one node to `nodes` */
};

void sim_cfg_default(struct sim_cfg *c);
/* One `key = value` assignment; returns 0, or -1 with a message in err. */
int sim_cfg_set(struct sim_cfg *c, const char *key, const char *value, char *err, size_t errlen);
/* A file of assignments ('#' starts a comment); returns 0, or -1 with FILE:LINE: why in err. */
int sim_cfg_load(struct sim_cfg *c, const char *path, char *err, size_t errlen);
/* Checks ranges and consistency; returns 0, or -1 with err. */
int sim_cfg_check(const struct sim_cfg *c, char *err, size_t errlen);
/* Every key with its default and description (for --help), or the values in use (as a config
 * file). */
void sim_cfg_help(FILE *f);
void sim_cfg_print(const struct sim_cfg *c, FILE *f);

#endif
