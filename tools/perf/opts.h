/* braid-perf: command-line options and the NCCL_* variables that set their defaults. */
#ifndef PERF_OPTS_H
#define PERF_OPTS_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/common.h"

#define PERF_MAX_CHANNELS 32

enum perf_op { PERF_SENDRECV, PERF_ALLREDUCE, PERF_ALLGATHER, PERF_REDUCESCATTER };
/* PERF_ALGO_COLLNET: NCCL's CollNet with one rank per node (allreduce; collnet.c): the chain, or
 * with perf_opts.collnet_direct the CollNetDirect shape (several heads per node).
 * PERF_ALGO_AUTO and PERF_ALGO_NCCL choose one of the others per size (tune.c): through the
 * tuner plugin, or by NCCL's own model alone. */
enum perf_algo { PERF_ALGO_RING, PERF_ALGO_TREE, PERF_ALGO_COLLNET, PERF_ALGO_AUTO, PERF_ALGO_NCCL };
/* PERF_PROTO_AUTO picks per size, as NCCL's tuner does (see proto.c). */
enum perf_proto { PERF_PROTO_LL, PERF_PROTO_LL128, PERF_PROTO_SIMPLE, PERF_PROTO_AUTO };
/* --mem: where the buffers the plugin moves data in live (mem.h). */
enum perf_mem { PERF_MEM_HOST, PERF_MEM_CUDA, PERF_MEM_DMABUF, PERF_MEM_UDMABUF, PERF_MEM_MEMFD };

struct perf_opts {
  enum perf_op op;
  enum perf_algo algo;
  enum perf_proto proto;
  ncclDataType_t dtype;
  ncclRedOp_t redop;
  int oneway;
  size_t min_bytes, max_bytes;
  double factor;        /* -f; 0 means use step_bytes */
  size_t step_bytes;    /* --step: additive size step (nccl-tests -i; here -i is iterations) */
  int warmup, iters;
  int nranks_local;     /* -n N: fork N ranks here; 0 = multi-host mode */
  int rank, nranks;     /* multi-host mode */
  char rdv_host[256];
  int rdv_port;
  const char *plugin;   /* --plugin, else NCCL_NET_PLUGIN, else "braid" */
  int net_version;      /* --net-version: newest ncclNetPlugin_vN to use (0 = newest) */
  int traffic_class;    /* --traffic-class: ncclConfig_t's trafficClass (-1: undefined) */
  int dev;              /* plugin device index */
  int nchannels;
  size_t p2p_chunk;     /* NCCL_P2P_NET_CHUNKSIZE */
  size_t buffsize;      /* NCCL_BUFFSIZE (Simple); step = buffsize / NCCL_STEPS */
  size_t ll_buffsize, ll128_buffsize;
  size_t p2p_ll_threshold;
  int optional_recv;    /* NCCL_NET_OPTIONAL_RECV_COMPLETION */
  int timeout_s;
  const char *json;
  int check_all;        /* --check-all: own data, poisoned output, checked: every timed
                           iteration (untimed) */
  int yield_idle;
  int staged;           /* sendrecv through staging slots instead of user buffers */
  enum perf_mem mem;    /* --mem: host, cuda, dmabuf (cuda exported as a dma-buf), udmabuf, memfd */
  const char *calibrate; /* --calibrate FILE: measure every algorithm, write a calibration */
  int repeats;          /* --repeats: interleaved repeats per size, median kept (>= 1) */
  double link_gbs;      /* --link-gbs: network GB/s per node for NCCL's model */
  int collnet_direct;   /* --algo CollNetDirect (algo is PERF_ALGO_COLLNET): heads per node */
  int collnet_heads;    /* --heads: CollNetDirect heads per node (0: one per CollNet device) */
};

/* Parses argv; exits on --help, --print-params, or a bad flag. */
void perf_opts_parse(struct perf_opts *o, int argc, char **argv);

/* NCCL reads NCCL_P2P_NET_CHUNKSIZE and NCCL_BUFFSIZE after its net plugin's init, so a plugin
 * may set defaults for them (braid does over libfabric): read them again then. */
void perf_opts_after_plugin_init(struct perf_opts *o);

/* 1 when the run chooses among algorithms (--calibrate, --algo auto|nccl): ring and tree are
 * both connected then, and CollNet is set up when it is enabled (perf_opts_collnet_wanted). */
int perf_opts_multi_algo(const struct perf_opts *o);
/* Whether a multi-algorithm run tries CollNet: NCCL_COLLNET_ENABLE when set, else whether
 * BRAID_PS_SERVERS is set (braid's CollNet needs servers). */
int perf_opts_collnet_wanted(void);

const char *perf_op_name(enum perf_op op);
const char *perf_proto_name(enum perf_proto p);
const char *perf_algo_name(enum perf_algo a);
/* The name a report gives algorithm a of this run: perf_algo_name, but "collnet_direct" for
 * CollNet with --algo CollNetDirect. */
const char *perf_opts_algo_label(const struct perf_opts *o, enum perf_algo a);

#endif
