/* NCCL's cost model (see model.h). Each step below names the refinement of NCCL's model it
 * reproduces; the numbers are NCCL's published defaults. */
#include "model.h"

#include <string.h>

#define A_TREE NCCL_ALGO_TREE
#define A_RING NCCL_ALGO_RING
#define A_CND NCCL_ALGO_COLLNET_DIRECT
#define A_CNC NCCL_ALGO_COLLNET_CHAIN
#define A_NVLS NCCL_ALGO_NVLS
#define A_NVLST NCCL_ALGO_NVLS_TREE
#define A_PAT NCCL_ALGO_PAT
#define P_LL NCCL_PROTO_LL
#define P_LL128 NCCL_PROTO_LL128
#define P_SIMPLE NCCL_PROTO_SIMPLE

enum { F_BCAST = 0, F_REDUCE = 1, F_ALLGATHER = 2, F_REDSCAT = 3, F_ALLREDUCE = 4 };

/* Kernel work items batched per launch (1 KiB of 96-byte work descriptors). */
#define WORK_BATCH_COLLS 10

void braid_model_default_constants(ncclTunerConstants_v5_t *c) {
  static const ncclTunerConstants_v5_t d = {
      .baseLatencies = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0},
                        {0, 0, 0}, {8.0, 8.0, 8.0}},
      .hwLatencies =
          {/* NVLink */
           {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25},
            {0, 0, 4.0}},
           /* PCI */
           {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0},
            {0, 0, 4.0}},
           /* network */
           {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9},
            {0, 0, 14}}},
      .llMaxBws = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0},
                   {282.0, 90.0, 70.0}},
      .perChMaxRingLL128Bws = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7},
                               {73.4, 34.6, 73.4}},
      .perChMaxTreeLL128Bws = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0},
                               {55.6, 31.67, 20.0}},
      .perChMaxTreeBws = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0},
                          {70.0, 42.8, 24.0}},
      .perChMaxNVLSTreeBws = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5},
                              {0.0, 96.0, 43.8}},
  };
  *c = d;
}

void braid_fabric_default(struct braid_fabric *f, int nnodes, int ppn, double link_gbs,
                          int nchannels) {
  memset(f, 0, sizeof *f);
  f->nnodes = nnodes < 1 ? 1 : nnodes;
  f->nranks = f->nnodes * (ppn < 1 ? 1 : ppn);
  f->nchannels = nchannels < 1 ? 1 : nchannels;
  f->bw_inter = link_gbs / f->nchannels;
  f->bw_intra = f->nnodes == f->nranks ? f->bw_inter : 20.0; /* NVLink per channel */
  f->intra_nvlink = 1;
  f->compcap = 90;
  f->ll128 = 1;
}

static int log2_floor(long long v) {
  int l = 0;
  while (v > 1) v >>= 1, l++;
  return l;
}

static double dmin(double a, double b) { return a < b ? a : b; }
static double dmax(double a, double b) { return a > b ? a : b; }

/* Which (coll, algo, proto) NCCL models at all. */
static int modeled(int coll, int a, int p, const struct braid_fabric *f) {
  if ((coll == F_BCAST || coll == F_REDUCE) && a != A_RING) return 0;
  if ((coll == F_ALLGATHER || coll == F_REDSCAT) && a != A_PAT && a != A_RING && a != A_NVLS &&
      a != A_CND)
    return 0;
  if (coll == F_ALLREDUCE && a == A_PAT) return 0;
  if ((a == A_NVLS || a == A_NVLST) && p != P_SIMPLE) return 0;
  if (a == A_PAT) {
    int pat = f->compcap >= 60 && f->nnodes == f->nranks;
    if (p != P_SIMPLE || !pat) return 0;
  }
  return 1;
}

/* Whether NCCL's enable rules (and NCCL_ALGO/NCCL_PROTO) leave (algo, proto) on. */
static int enabled(int a, int p, const struct braid_fabric *f) {
  if (f->algo_enable && !(f->algo_enable & (1u << a))) return 0;
  if (f->proto_enable && !(f->proto_enable & (1u << p))) return 0;
  if (p == P_LL128 && !f->ll128) return 0;
  if (f->nnodes == 1 && a == A_NVLST) return 0;
  if (!f->collnet && (a == A_CND || a == A_CNC || (a == A_NVLS && f->nnodes > 1))) return 0;
  if (!f->nvswitch && a == A_CND) return 0;
  if ((a == A_NVLS || a == A_NVLST) && !f->nvls) return 0;
  return 1;
}

static double bus_bw(const ncclTunerConstants_v5_t *c, const struct braid_fabric *f, int coll,
                     int a, int p) {
  int nn = f->nnodes, nr = f->nranks, nch = f->nchannels;
  int cc = f->compcap >= 100 ? NCCL_BLACKWELL_COMPCAP_IDX
           : f->compcap >= 90 ? NCCL_HOPPER_COMPCAP_IDX
           : f->compcap >= 80 ? NCCL_AMPERE_COMPCAP_IDX
                              : NCCL_VOLTA_COMPCAP_IDX;
  int scale = nn <= 2 ? nn - 1 : 2;
  int ll_idx = nn == 1 ? cc : f->cpu_amd ? 1 : 0;
  double ll_max = c->llMaxBws[ll_idx][scale];
  double ppn = (double)nr / nn;
  int collnet = a == A_CND || a == A_CNC;
  double bw = nn <= 2 || collnet ? f->bw_intra : f->bw_inter;
  if (a == A_NVLS || a == A_NVLST) {
    if (nch < 2) return 0;
    static const double eff[NCCL_NUM_COMPCAPS] = {0, 0, .85, .74};
    double intra = f->bw_intra * eff[cc] * (nch - 1) / nch;
    intra *= coll == F_ALLREDUCE ? 2.0 : (ppn - 1) / ppn;
    double inter = f->bw_inter * ((nn <= 2 && a == A_NVLST) ? 2 : 1);
    bw = dmin(intra, inter);
    if (a == A_NVLST) bw = dmin(bw, c->perChMaxNVLSTreeBws[cc][scale]);
  }
  double bus = nch * bw;
  /* NCCL's per-protocol refinements. */
  if (a == A_RING && p == P_LL) bus = dmin(ll_max, bus * .5);
  if (a == A_RING && p == P_LL128) bus = dmin(bus * .92, nch * c->perChMaxRingLL128Bws[cc][scale]);
  if (a == A_TREE && coll == F_ALLREDUCE) bus = dmin(bus * .92, nch * c->perChMaxTreeBws[cc][scale]);
  if (a == A_TREE && p == P_LL) bus = dmin(bus / 3.8, ll_max);
  if (a == A_TREE && p == P_LL128)
    bus = dmin(bus * (nn == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * c->perChMaxTreeLL128Bws[cc][scale]);
  if (a == A_PAT) bus *= .75;
  if (collnet && p != P_SIMPLE) bus = 0;
  if (a == A_CND && p == P_SIMPLE) {
    if (coll == F_ALLGATHER || coll == F_REDSCAT) {
      bus = ppn * dmin(f->bw_intra, f->bw_inter * 0.9);
    } else {
      double gpu_per_nic = ppn / nch;
      gpu_per_nic -= (gpu_per_nic - 1) / 2;
      bus /= gpu_per_nic;
      if (f->compcap >= 90) bus *= .85;
    }
  }
  /* AllGather/ReduceScatter over CollNet or NVLS across nodes needs the CollNet plugin's
   * iallgather/ireducescatter, which braid's CollNet leaves NULL (NCCL zeroes these entries
   * for a NULL one, graph/tuning.cc; docs/collnet.md). */
  if ((a == A_NVLS || a == A_CND) && p == P_SIMPLE && (coll == F_ALLGATHER || coll == F_REDSCAT) &&
      nn > 1)
    bus = 0;
  /* Bus bandwidth to algorithm bandwidth. */
  if (!(a != A_RING && (coll == F_ALLGATHER || coll == F_REDSCAT))) {
    int nsteps = coll == F_ALLREDUCE ? 2 * (nr - 1) : coll == F_REDSCAT || coll == F_ALLGATHER ? nr - 1 : nr;
    double ratio = a == A_RING || a == A_NVLS || a == A_NVLST ? (double)nr / nsteps : .5;
    bus *= ratio;
  }
  return bus;
}

static double latency(const ncclTunerConstants_v5_t *c, const struct braid_fabric *f, int coll,
                      int a, int p) {
  int nn = f->nnodes, nr = f->nranks;
  int intra_hw = f->intra_nvlink ? NCCL_HW_NVLINK : NCCL_HW_PCI;
  int hw = nn == 1 ? intra_hw : NCCL_HW_NET;
  double ppn = (double)nr / nn;
  int local = nr / nn; /* integer ranks per node, as NCCL computes it */
  double lat = c->baseLatencies[a][p];
  double intra = c->hwLatencies[intra_hw][a][p];
  /* One GPU per node exposes the whole network latency: NCCL then uses the tree's. */
  double inter = ppn == 1 ? c->hwLatencies[NCCL_HW_NET][A_TREE][p] : c->hwLatencies[NCCL_HW_NET][a][p];
  inter += f->lat_inter;
  if (p == P_SIMPLE) inter += f->lat_inter; /* the flush */
  int nsteps = coll == F_ALLREDUCE ? 2 * (nr - 1) : coll == F_REDSCAT || coll == F_ALLGATHER ? nr - 1 : nr;
  switch (a) {
    case A_RING:
      if (coll == F_REDUCE || coll == F_BCAST) {
        lat += c->hwLatencies[hw][a][p]; /* channels follow the same path */
      } else {
        double overhead = 0;
        if (nn > 1) {
          overhead = f->net_overhead_us > 0 ? f->net_overhead_us : 1.0;
          if (p == P_SIMPLE) overhead *= 3;
        }
        intra = dmax(intra, overhead);
        int inter_steps = nn == 1 ? 0 : coll == F_ALLREDUCE ? 2 * (nn - 1) : nn - 1;
        lat += (nsteps - inter_steps) * intra + inter_steps * inter;
      }
      break;
    case A_TREE:
      if (coll == F_ALLREDUCE) lat += 2 * ((local - 1) * intra + log2_floor(nn) * inter);
      break;
    case A_CND:
      lat += 2 * ((local - 1 < 1 ? local - 1 : 1) * intra + (local - 1) * 0.4) + inter;
      break;
    case A_CNC:
      lat += 2 * (local - 1) * intra + inter;
      break;
    case A_NVLS:
      lat = intra + (nn > 1 ? inter : 0);
      break;
    case A_NVLST:
      lat += intra + 2 * log2_floor(nn) * inter;
      break;
    case A_PAT:
      if (coll == F_ALLGATHER || coll == F_REDSCAT)
        lat += log2_floor(nn) * (inter / 3.5) + nr * 2.8;
      break;
    default:
      break;
  }
  return lat;
}

void braid_model_build(struct braid_model *m, const ncclTunerConstants_v5_t *c,
                       const struct braid_fabric *f) {
  memset(m, 0, sizeof *m);
  m->nranks = f->nranks < 1 ? 1 : f->nranks;
  m->nnodes = f->nnodes < 1 ? 1 : f->nnodes;
  m->nchannels = f->nchannels < 1 ? 1 : f->nchannels;
  m->compcap = f->compcap;
  if (m->nranks <= 1) return;
  struct braid_fabric g = *f;
  g.nranks = m->nranks, g.nnodes = m->nnodes, g.nchannels = m->nchannels;
  for (int coll = 0; coll < BRAID_MODEL_FUNCS; coll++)
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++) {
        if (!modeled(coll, a, p, &g) || !enabled(a, p, &g)) continue;
        m->bw[coll][a][p] = (float)bus_bw(c, &g, coll, a, p);
        m->lat[coll][a][p] = (float)latency(c, &g, coll, a, p);
      }
}

/* NCCL's measured efficiency of tree allreduce by size (per 64 B * 2^i), per protocol. */
static const float tree_correction[NCCL_NUM_PROTOCOLS][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

static int valid(const struct braid_model *m, int coll, int algo, int proto) {
  return coll >= 0 && coll < BRAID_MODEL_FUNCS && algo >= 0 && algo < NCCL_NUM_ALGORITHMS &&
         proto >= 0 && proto < NCCL_NUM_PROTOCOLS && m->bw[coll][algo][proto] > 0;
}

float braid_model_latency(const struct braid_model *m, int coll, int algo, int proto,
                          size_t nbytes, int pipe_ops) {
  if (!valid(m, coll, algo, proto)) return 0;
  double lat = m->lat[coll][algo][proto];
  if (pipe_ops < 1) pipe_ops = 1;
  /* The ring's plateau once every rank's share of a channel passes 64 bytes. */
  if (algo == A_RING && proto == P_SIMPLE && m->nnodes > 1 && coll == F_ALLREDUCE &&
      nbytes / ((size_t)m->nchannels * (size_t)m->nranks) >= 64)
    lat *= m->compcap < 80 ? 1.9 : 1.4;
  int count = algo == A_RING ? pipe_ops : (pipe_ops + WORK_BATCH_COLLS - 1) / WORK_BATCH_COLLS;
  return (float)(lat * count);
}

float braid_model_time(const struct braid_model *m, int coll, int algo, int proto, size_t nbytes,
                       int pipe_ops) {
  if (!valid(m, coll, algo, proto)) return (float)NCCL_ALGO_PROTO_IGNORE;
  double bw = m->bw[coll][algo][proto];
  int log_size = nbytes >> 6 ? log2_floor((long long)(nbytes >> 6)) : -1;
  if (algo == A_TREE && coll == F_ALLREDUCE && log_size >= 0 && log_size < 23)
    bw *= tree_correction[proto][log_size];
  return (float)(braid_model_latency(m, coll, algo, proto, nbytes, pipe_ops) +
                 (double)nbytes / (1000.0 * bw));
}

void braid_model_fill(const struct braid_model *m, int coll, size_t nbytes, int pipe_ops,
                      float *table, int num_algo) {
  if (num_algo > NCCL_NUM_ALGORITHMS) num_algo = NCCL_NUM_ALGORITHMS;
  for (int i = 0; i < num_algo * NCCL_NUM_PROTOCOLS; i++) table[i] = (float)NCCL_ALGO_PROTO_IGNORE;
  if (m->nranks <= 1) {
    table[A_RING * NCCL_NUM_PROTOCOLS + P_SIMPLE] = 0.0f;
    return;
  }
  for (int a = 0; a < num_algo; a++)
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
      table[a * NCCL_NUM_PROTOCOLS + p] = braid_model_time(m, coll, a, p, nbytes, pipe_ops);
}

int braid_model_pick(const float *table, int num_algo, int num_proto, int *algo, int *proto) {
  float best = 3600000000.0f;
  int ba = -1, bp = -1;
  for (int a = 0; a < num_algo; a++)
    for (int p = 0; p < num_proto; p++) {
      float t = table[a * num_proto + p];
      if (t == (float)NCCL_ALGO_PROTO_IGNORE || t < 0) continue;
      if (t < best) best = t, ba = a, bp = p;
    }
  if (ba < 0) return -1;
  *algo = ba;
  *proto = bp;
  return 0;
}
