/* NCCL's latency/bandwidth cost model, written from its description (NCCL 2.28's tuning), so
 * that a cost table can be filled the way NCCL fills it where NCCL is not running (braid-perf
 * --algo auto, braid-tune explain) and so that the tuner can split a time into its latency and
 * bandwidth parts.
 *
 *   time(coll, algo, proto, n) = lat * latCount + n / (1000 * bw)        (µs; bw in GB/s)
 *
 * lat and bw come from the tuner constants (NCCL passes its defaults, possibly edited, to a v5+
 * tuner's init) and from what NCCL's topology search found: per-channel bandwidths inside and
 * between nodes, the channel count, the intra-node link kind. Everything here is pure. */
#ifndef BRAID_TUNER_MODEL_H
#define BRAID_TUNER_MODEL_H

#include <stddef.h>

#include "nccl_plugin/tuner.h"

#define BRAID_MODEL_FUNCS 5 /* broadcast, reduce, allgather, reducescatter, allreduce */

/* What NCCL's topology search would report for a communicator. */
struct braid_fabric {
  int nranks, nnodes;
  int nchannels;            /* channels of every algorithm's graph */
  double bw_intra, bw_inter; /* GB/s per channel */
  double lat_inter;         /* extra per-hop network latency, µs (NCCL's graph latencyInter) */
  int intra_nvlink;         /* GPUs of a node talk over NVLink (else PCI) */
  int compcap;              /* smallest compute capability, e.g. 90 */
  int cpu_amd;              /* AMD hosts: NCCL's LL limit for several nodes differs */
  double net_overhead_us;   /* per-step network post overhead; <= 0: NCCL's default 1 µs */
  int collnet;              /* CollNet enabled and a CollNet plugin present */
  int nvswitch;             /* NVSwitch present (CollNet Direct needs it) */
  int nvls;                 /* NVLS usable */
  int ll128;                /* LL128 allowed by NCCL's path rules */
  unsigned algo_enable;     /* bit a: NCCL_ALGO allows algorithm a; 0 means all */
  unsigned proto_enable;    /* bit p: NCCL_PROTO allows protocol p; 0 means all */
};

struct braid_model {
  int nranks, nnodes, nchannels, compcap;
  float lat[BRAID_MODEL_FUNCS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]; /* µs */
  float bw[BRAID_MODEL_FUNCS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];  /* GB/s; 0 = unusable */
};

/* NCCL's default tuner constants (what it passes to init before any tuner edits them). */
void braid_model_default_constants(ncclTunerConstants_v5_t *c);

/* A fabric of nnodes hosts with ppn GPUs each (nranks = nnodes * ppn), link_gbs GB/s of network
 * per node spread over nchannels channels, Hopper GPUs on NVLink, no CollNet/NVLS: the starting
 * point braid-perf and braid-tune edit. */
void braid_fabric_default(struct braid_fabric *f, int nnodes, int ppn, double link_gbs,
                          int nchannels);

void braid_model_build(struct braid_model *m, const ncclTunerConstants_v5_t *c,
                       const struct braid_fabric *f);

/* NCCL's predicted time in µs, or NCCL_ALGO_PROTO_IGNORE when NCCL would not use (algo, proto)
 * for coll. pipe_ops < 1 counts as 1. */
float braid_model_time(const struct braid_model *m, int coll, int algo, int proto, size_t nbytes,
                       int pipe_ops);

/* The latency part of that time, µs (0 for an unusable entry). */
float braid_model_latency(const struct braid_model *m, int coll, int algo, int proto,
                          size_t nbytes, int pipe_ops);

/* Fills a flat float[num_algo][NCCL_NUM_PROTOCOLS] table as NCCL does before asking a tuner:
 * IGNORE everywhere, then the time of every usable entry; with one rank only Ring/Simple = 0.
 * num_algo 6 reproduces NCCL 2.22's table (no PAT). */
void braid_model_fill(const struct braid_model *m, int coll, size_t nbytes, int pipe_ops,
                      float *table, int num_algo);

/* NCCL's selection over a filled (and possibly tuner-edited) table: the lowest entry >= 0,
 * ties to the lower algorithm then the lower protocol. Returns 0, or -1 when nothing is
 * selectable (NCCL fails the collective then). */
int braid_model_pick(const float *table, int num_algo, int num_proto, int *algo, int *proto);

#endif
