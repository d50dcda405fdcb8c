/* braid-perf: command line and environment. */
#include "opts.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dtype.h"
#include "mem.h"
#include "param.h"

static const char *const opts_usage =
    "usage: braid-perf OP [flags]     (OP: sendrecv | allreduce | allgather | reducescatter)\n"
    "Stands in for NCCL: loads a net plugin by NCCL's rules and drives it as NCCL's proxy does,\n"
    "verifying every result. Prints an nccl-tests table on rank 0.\n"
    "\n"
    "Ranks (note: -n is the number of ranks here, NOT iterations as in nccl-tests):\n"
    "  -n, --nranks-local N   fork N ranks on this machine (rendezvous on 127.0.0.1)\n"
    "  --rank R --nranks N --rendezvous HOST:PORT\n"
    "                         one rank of a multi-host run; rank 0 listens at HOST:PORT\n"
    "Sizes and iterations (as nccl-tests, except -i):\n"
    "  -b, --minbytes SIZE    smallest size (default 8; 0 allowed; K/M/G suffixes)\n"
    "  -e, --maxbytes SIZE    largest size (default 64M)\n"
    "  -f, --stepfactor F     multiply the size by F each step (default 2)\n"
    "  --step SIZE            add SIZE each step instead of -f\n"
    "  -w, --warmup_iters N   verified warm-up iterations (default 2)\n"
    "  -i, --iters N          timed iterations (default 10)\n"
    "  -d, --datatype T       int8 uint8 int32 uint32 int64 uint64 float(32) double (float64)\n"
    "  -o, --op OP            sum prod min max (default sum)\n"
    "Algorithm:\n"
    "  --algo ring|tree|collnet|CollNetDirect  allreduce algorithm (default ring; NCCL_ALGO);\n"
    "                         tree is NCCL's double binary tree (channel c uses tree c%2);\n"
    "                         collnet (or CollNetChain) is NCCL's CollNet chain, one rank per\n"
    "                         node, one head: the plugin's ncclCollNetPlugin_vN reduces\n"
    "                         (implies allreduce and the Simple protocol; NCCL_COLLNET_ENABLE\n"
    "                         is not needed). CollNetDirect: NCCL's CollNetDirect shape, each\n"
    "                         rank (node) has --heads heads, each with its own CollNet\n"
    "                         communicator (nranks = nodes, rank = node), on CollNet device\n"
    "                         (--dev + head) mod the device count; head h of channel c reduces\n"
    "                         chunk c*heads+h of every step, all heads at once.\n"
    "                         allgather/reducescatter with collnet or CollNetDirect: refused\n"
    "                         (braid's CollNet does allreduce only: its iallgather and\n"
    "                         ireducescatter are NULL, and NCCL's tuning never picks CollNet\n"
    "                         for those then; braid-perf never calls them)\n"
    "  --heads N              CollNetDirect heads per node, 1..8 (default: one per CollNet\n"
    "                         device, at most 8: NCCL's heads are the GPUs next to CollNet\n"
    "                         NICs, one per NIC on a node with a GPU per NIC)\n"
    "  --algo auto            per size, the choice NCCL would make with its tuner plugin:\n"
    "                         NCCL's cost model fills the table (see --link-gbs; CollNet\n"
    "                         as for --calibrate), the tuner plugin (NCCL_TUNER_PLUGIN,\n"
    "                         default braid) edits it and may set the channels, the lowest\n"
    "                         entry runs; the row shows it and NCCL's own pick. Every rank\n"
    "                         must choose the same (and have the same tuner inputs) or the\n"
    "                         run fails before any collective. Allreduce only\n"
    "  --algo nccl            the same without the tuner: NCCL's own model pick\n"
    "  --proto auto|LL|LL128|Simple   (default auto: by size, like NCCL's tuner; NCCL_PROTO;\n"
    "                         with --algo auto|nccl: the only protocol NCCL may choose)\n"
    "  --oneway               sendrecv: rank 0 sends to rank 1 only\n"
    "  -c, --channels N       channels, each with its own comms per peer (default 2)\n"
    "  --staged               sendrecv: copy through registered 8-slot staging buffers, as\n"
    "                         NCCL does for unregistered user buffers (the GPU's copies then\n"
    "                         run on this CPU); default: send from and receive into the user\n"
    "                         buffer, as NCCL's p2p does with registered buffers\n"
    "Memory (the Simple protocol's staging buffers and sendrecv's user buffers; LL, LL128\n"
    "and CollNet stay in host memory):\n"
    "  --mem host|cuda|dmabuf|udmabuf   (default host)\n"
    "                         host: malloc'ed memory, regMr(NCCL_PTR_HOST)\n"
    "                         cuda: GPU memory (the CUDA driver is loaded at run time; rank\n"
    "                         R uses GPU R mod the GPU count), regMr(NCCL_PTR_CUDA): the\n"
    "                         plugin must advertise NCCL_PTR_CUDA\n"
    "                         dmabuf: GPU memory exported as a dma-buf fd per registration,\n"
    "                         regMrDmaBuf(NCCL_PTR_CUDA, offset, fd), the fd closed right\n"
    "                         after the call: the plugin must advertise NCCL_PTR_DMABUF and\n"
    "                         have a regMrDmaBuf\n"
    "                         udmabuf: TEST ONLY: host memory exported as a dma-buf through\n"
    "                         /dev/udmabuf, regMrDmaBuf(NCCL_PTR_HOST, ...): real dma-buf fds\n"
    "                         on a machine without a GPU (needs NCCL_PTR_DMABUF too)\n"
    "                         memfd: TEST ONLY: host memory whose memfd is passed to\n"
    "                         regMrDmaBuf as if it were a dma-buf (NCCL_PTR_HOST): kernels\n"
    "                         without udmabuf; only a libibverbs that maps the fd takes it\n"
    "                         (test/vm/dmabuf_shim.c, BRAID_IBVERBS_LIB)\n"
    "                         GPU data is filled and checked with cuMemcpyHtoD/DtoH, and every\n"
    "                         Simple receive of size > 0 into GPU memory is flushed (iflush,\n"
    "                         its request tested until done), as NCCL does when it must flush\n"
    "Calibration (for the braid tuner's BRAID_TUNER_CALIB; allreduce):\n"
    "  --calibrate FILE       measure ring and tree with LL, LL128 and Simple, and CollNet\n"
    "                         (Simple) when it is enabled (NCCL_COLLNET_ENABLE=1, or\n"
    "                         BRAID_PS_SERVERS set) and sets up, at every size; rank 0 writes\n"
    "                         the medians and NCCL's model times to FILE (via FILE.tmp)\n"
    "  --repeats K            interleaved repeats per size: every algorithm once per repeat,\n"
    "                         the median is kept (default 3 with --calibrate, else 1)\n"
    "  --link-gbs X           network GB/s per node that NCCL's model assumes (default 12.5;\n"
    "                         --algo auto|nccl take it from BRAID_TUNER_CALIB's\n"
    "                         model_link_gbs/model_nchannels when the file records them)\n"
    "Plugin:\n"
    "  --plugin NAME|PATH     net plugin (default $NCCL_NET_PLUGIN, else \"braid\")\n"
    "  --net-version V        use ncclNetPlugin_vV or older (default: newest exported)\n"
    "  --dev D                plugin device (default 0)\n"
    "  --traffic-class N      the communicator's trafficClass (ncclConfig_t), as NCCL passes\n"
    "                         it: init's config on ncclNetPlugin_v11+, each connect's on v10;\n"
    "                         v7..v9 take none (default -1: undefined). braid takes 0..255\n"
    "Other:\n"
    "  --timeout S            fail when nothing moves for S seconds (default 60); a rank\n"
    "                         that exits fails the others 5 s later if the plugin has not\n"
    "                         reported it by then (NCCL itself leaves that to the plugin)\n"
    "  --json FILE            write one record per size to FILE (JSON array)\n"
    "  --check-all            give every timed iteration its own data and a poisoned output\n"
    "                         and check it (time excludes that); without it the timed loop\n"
    "                         reuses one input and only its last output is checked\n"
    "  --no-yield             spin without sched_yield() when idle\n"
    "  --print-params         print braid's BRAID_* parameters and exit\n"
    "  -h, --help             this text\n"
    "\n"
    "NCCL variables honoured: NCCL_NET_PLUGIN, NCCL_P2P_NET_CHUNKSIZE (131072),\n"
    "NCCL_BUFFSIZE (4194304; collective step = /8), NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE,\n"
    "NCCL_P2P_LL_THRESHOLD (16384), NCCL_NET_OPTIONAL_RECV_COMPLETION (1),\n"
    "NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS, NCCL_PROTO, NCCL_ALGO, NCCL_DEBUG,\n"
    "NCCL_DEBUG_SUBSYS (default INIT,BOOTSTRAP,ENV as NCCL: add NET to see net lines),\n"
    "NCCL_TUNER_PLUGIN, NCCL_COLLNET_ENABLE (--algo auto|nccl, --calibrate).\n"
    "Exit status: 0 all results right; 1 wrong results; 2 a plugin call or the run failed;\n"
    "3 the plugin does not take --mem's memory (ptrSupport, regMrDmaBuf); 77 this machine\n"
    "cannot provide it (no CUDA GPU or driver, no dma-buf export, no /dev/udmabuf).\n";

static void opts_die(const char *what, const char *val) {
  fprintf(stderr, "braid-perf: bad %s \"%s\" (try --help)\n", what, val ? val : "");
  exit(2);
}

/* "64M", "1K", "4194304" */
static size_t opts_size(const char *s, const char *what) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || v < 0) opts_die(what, s);
  switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end) opts_die(what, s);
  return (size_t)v;
}

static long opts_int(const char *s, const char *what, long lo, long hi) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo || v > hi) opts_die(what, s);
  return v;
}

static size_t opts_env_size(const char *name, size_t def) {
  const char *v = getenv(name);
  return v && *v ? opts_size(v, name) : def;
}

static long opts_env_int(const char *name, long def) {
  const char *v = getenv(name);
  return v && *v ? opts_int(v, name, -1000000000L, 1000000000L) : def;
}

void perf_opts_after_plugin_init(struct perf_opts *o) {
  o->p2p_chunk = opts_env_size("NCCL_P2P_NET_CHUNKSIZE", o->p2p_chunk);
  o->buffsize = opts_env_size("NCCL_BUFFSIZE", o->buffsize);
  if (o->buffsize < 8 * 4096 || o->p2p_chunk < 4096)
    opts_die("buffer size (NCCL_BUFFSIZE / NCCL_P2P_NET_CHUNKSIZE too small)", "");
}

static enum perf_proto opts_proto(const char *s) {
  if (!strcasecmp(s, "auto")) return PERF_PROTO_AUTO;
  if (!strcasecmp(s, "LL")) return PERF_PROTO_LL;
  if (!strcasecmp(s, "LL128")) return PERF_PROTO_LL128;
  if (!strcasecmp(s, "Simple")) return PERF_PROTO_SIMPLE;
  opts_die("protocol (one of auto, LL, LL128, Simple)", s);
  return PERF_PROTO_AUTO;
}

static double opts_gbs(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v > 0) || v > 1e6) opts_die("--link-gbs (GB/s, > 0)", s);
  return v;
}

static void opts_defaults(struct perf_opts *o) {
  memset(o, 0, sizeof *o);
  o->op = PERF_SENDRECV;
  o->algo = PERF_ALGO_RING;
  o->proto = PERF_PROTO_AUTO;
  o->dtype = ncclFloat32;
  o->redop = ncclSum;
  o->min_bytes = 8;
  o->max_bytes = 64 << 20;
  o->factor = 2;
  o->warmup = 2;
  o->iters = 10;
  o->rank = -1;
  o->traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  o->plugin = getenv("NCCL_NET_PLUGIN") ? getenv("NCCL_NET_PLUGIN") : "braid";
  o->p2p_chunk = opts_env_size("NCCL_P2P_NET_CHUNKSIZE", 131072);
  o->buffsize = opts_env_size("NCCL_BUFFSIZE", 4 << 20);
  o->ll_buffsize = opts_env_size("NCCL_LL_BUFFSIZE", 8 * 512 * 8 * 16);       /* 512 KiB */
  o->ll128_buffsize = opts_env_size("NCCL_LL128_BUFFSIZE", 120 * 640 * 8 * 8); /* 4.7 MB */
  o->p2p_ll_threshold = opts_env_size("NCCL_P2P_LL_THRESHOLD", 16384);
  o->optional_recv = (int)opts_env_int("NCCL_NET_OPTIONAL_RECV_COMPLETION", 1) != 0;
  long lo = opts_env_int("NCCL_MIN_NCHANNELS", 0), hi = opts_env_int("NCCL_MAX_NCHANNELS", 0);
  o->nchannels = 2;
  if (hi > 0 && o->nchannels > hi) o->nchannels = (int)hi;
  if (lo > 0 && o->nchannels < lo) o->nchannels = (int)lo;
  if (getenv("NCCL_PROTO")) o->proto = opts_proto(getenv("NCCL_PROTO"));
  const char *algo = getenv("NCCL_ALGO");
  if (algo && !strcasecmp(algo, "tree")) o->algo = PERF_ALGO_TREE;
  if (algo && (!strcasecmp(algo, "collnet") || !strcasecmp(algo, "CollNetChain")))
    o->algo = PERF_ALGO_COLLNET;
  if (algo && !strcasecmp(algo, "CollNetDirect")) {
    o->algo = PERF_ALGO_COLLNET;
    o->collnet_direct = 1;
  }
  o->timeout_s = 60;
  o->yield_idle = 1;
  o->link_gbs = 12.5;
}

/* --rendezvous HOST:PORT (the last ':' splits, so [v6]:port works without brackets too) */
static void opts_rendezvous(struct perf_opts *o, const char *s) {
  const char *colon = strrchr(s, ':');
  if (!colon || colon == s) opts_die("--rendezvous (HOST:PORT)", s);
  size_t hl = (size_t)(colon - s);
  if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') s++, hl -= 2;
  if (hl >= sizeof o->rdv_host) opts_die("--rendezvous host", s);
  memcpy(o->rdv_host, s, hl);
  o->rdv_host[hl] = '\0';
  o->rdv_port = (int)opts_int(colon + 1, "--rendezvous port", 1, 65535);
}

static void opts_op(struct perf_opts *o, const char *s) {
  static const char *const names[] = {"sendrecv", "allreduce", "allgather", "reducescatter"};
  for (int i = 0; i < 4; i++)
    if (!strcasecmp(s, names[i])) {
      o->op = (enum perf_op)i;
      return;
    }
  opts_die("operation", s);
}

const char *perf_op_name(enum perf_op op) {
  static const char *const names[] = {"sendrecv", "allreduce", "allgather", "reducescatter"};
  return names[op];
}

const char *perf_algo_name(enum perf_algo a) {
  static const char *const names[] = {"ring", "tree", "collnet", "auto", "nccl"};
  return names[a];
}

const char *perf_opts_algo_label(const struct perf_opts *o, enum perf_algo a) {
  return a == PERF_ALGO_COLLNET && o->collnet_direct ? "collnet_direct" : perf_algo_name(a);
}

int perf_opts_multi_algo(const struct perf_opts *o) {
  return o->calibrate || o->algo == PERF_ALGO_AUTO || o->algo == PERF_ALGO_NCCL;
}

int perf_opts_collnet_wanted(void) {
  const char *en = getenv("NCCL_COLLNET_ENABLE");
  if (en && *en) return atoi(en) == 1;
  return *braid_param_env(BRAID_P_PS_SERVERS) != 0;
}

const char *perf_proto_name(enum perf_proto p) {
  static const char *const names[] = {"LL", "LL128", "Simple", "auto"};
  return names[p];
}

/* --calibrate and --algo auto|nccl: allreduce only; --calibrate runs every algorithm and
 * protocol itself (NCCL_ALGO/NCCL_PROTO do not apply to it). */
static void opts_validate_multi(struct perf_opts *o, int algo_given, int proto_given) {
  if (!perf_opts_multi_algo(o)) {
    if (o->repeats < 1) o->repeats = 1;
    return;
  }
  const char *what = o->calibrate ? "--calibrate" : o->algo == PERF_ALGO_AUTO ? "--algo auto"
                                                                             : "--algo nccl";
  const char *bad = NULL;
  if (o->op != PERF_ALLREDUCE) bad = "runs allreduce only";
  else if (o->calibrate && algo_given) bad = "measures every algorithm: drop --algo";
  else if (o->calibrate && proto_given && o->proto != PERF_PROTO_AUTO)
    bad = "measures every protocol: drop --proto";
  else if (o->calibrate && o->nranks < 2) bad = "needs 2 or more ranks";
  if (bad) {
    fprintf(stderr, "braid-perf: %s %s (try --help)\n", what, bad);
    exit(2);
  }
  if (o->calibrate) {
    o->algo = PERF_ALGO_RING; /* unused: every algorithm runs */
    o->proto = PERF_PROTO_AUTO;
  }
  if (o->repeats < 1) o->repeats = o->calibrate ? 3 : 1;
}

/* Checks the combination of flags; exits with a message when it cannot run. */
static void opts_validate(struct perf_opts *o, int algo_given, int proto_given) {
  if (o->nranks_local <= 0 && o->rank < 0) o->nranks_local = 2;
  if (o->nranks_local > 0) o->nranks = o->nranks_local;
  else if (o->nranks <= 0 || o->rank >= o->nranks || !o->rdv_host[0])
    opts_die("multi-host flags (need --rank R --nranks N --rendezvous HOST:PORT)", "");
  if (o->nchannels < 1 || o->nchannels > PERF_MAX_CHANNELS) {
    fprintf(stderr, "braid-perf: channels must be 1..%d\n", PERF_MAX_CHANNELS);
    exit(2);
  }
  if (o->oneway && (o->op != PERF_SENDRECV || o->nranks < 2)) opts_die("--oneway (sendrecv, 2+ ranks)", "");
  opts_validate_multi(o, algo_given, proto_given);
  if (o->collnet_heads && !(o->algo == PERF_ALGO_COLLNET && o->collnet_direct))
    opts_die("--heads (needs --algo CollNetDirect)", "");
  if (o->algo == PERF_ALGO_COLLNET) { /* NCCL's CollNet: allreduce, Simple only */
    /* allgather and reducescatter go on to the plugin's table: collnet_setup refuses them with
     * a message saying whether the plugin has iallgather/ireducescatter at all */
    if (o->op == PERF_SENDRECV)
      opts_die("--algo collnet (allreduce only), operation", perf_op_name(o->op));
    if (o->proto != PERF_PROTO_AUTO && o->proto != PERF_PROTO_SIMPLE)
      opts_die("--algo collnet (Simple protocol only), protocol", perf_proto_name(o->proto));
    o->proto = PERF_PROTO_SIMPLE;
    if (o->mem != PERF_MEM_HOST)
      opts_die("--mem with --algo collnet (braid-perf's CollNet buffers are host memory), --mem",
               perf_mem_name(o->mem));
  }
  if (o->factor <= 1 && !o->step_bytes) opts_die("-f (must be > 1)", "");
  if (o->max_bytes < o->min_bytes) opts_die("-e (smaller than -b)", "");
  if (o->buffsize < 8 * 4096 || o->p2p_chunk < 4096 || o->ll_buffsize < 8 * 4096 ||
      o->ll128_buffsize < 8 * 4096)
    opts_die("buffer size (NCCL_*BUFFSIZE / CHUNKSIZE too small)", "");
}

enum {
  OPT_RANK = 256, OPT_NRANKS, OPT_RDV, OPT_ALGO, OPT_PROTO, OPT_ONEWAY, OPT_PLUGIN, OPT_NETV,
  OPT_DEV, OPT_TIMEOUT, OPT_JSON, OPT_CHECK_ALL, OPT_NO_YIELD, OPT_PARAMS, OPT_STEP,
  OPT_STAGED, OPT_CALIBRATE, OPT_REPEATS, OPT_LINK_GBS, OPT_HEADS, OPT_MEM, OPT_TCLASS
};

static const struct option opts_long[] = {
    {"nranks-local", required_argument, 0, 'n'}, {"minbytes", required_argument, 0, 'b'},
    {"maxbytes", required_argument, 0, 'e'},     {"stepfactor", required_argument, 0, 'f'},
    {"warmup_iters", required_argument, 0, 'w'}, {"iters", required_argument, 0, 'i'},
    {"datatype", required_argument, 0, 'd'},     {"op", required_argument, 0, 'o'},
    {"channels", required_argument, 0, 'c'},     {"help", no_argument, 0, 'h'},
    {"rank", required_argument, 0, OPT_RANK},    {"nranks", required_argument, 0, OPT_NRANKS},
    {"rendezvous", required_argument, 0, OPT_RDV}, {"algo", required_argument, 0, OPT_ALGO},
    {"proto", required_argument, 0, OPT_PROTO},  {"oneway", no_argument, 0, OPT_ONEWAY},
    {"plugin", required_argument, 0, OPT_PLUGIN}, {"net-version", required_argument, 0, OPT_NETV},
    {"dev", required_argument, 0, OPT_DEV},      {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"json", required_argument, 0, OPT_JSON},    {"check-all", no_argument, 0, OPT_CHECK_ALL},
    {"no-yield", no_argument, 0, OPT_NO_YIELD},  {"print-params", no_argument, 0, OPT_PARAMS},
    {"step", required_argument, 0, OPT_STEP},    {"staged", no_argument, 0, OPT_STAGED},
    {"calibrate", required_argument, 0, OPT_CALIBRATE},
    {"repeats", required_argument, 0, OPT_REPEATS},
    {"link-gbs", required_argument, 0, OPT_LINK_GBS},
    {"heads", required_argument, 0, OPT_HEADS},
    {"mem", required_argument, 0, OPT_MEM},
    {"traffic-class", required_argument, 0, OPT_TCLASS},
    {0, 0, 0, 0}};

static void opts_one(struct perf_opts *o, int c, const char *a) {
  switch (c) {
    case 'n': o->nranks_local = (int)opts_int(a, "-n", 1, 1024); break;
    case 'b': o->min_bytes = opts_size(a, "-b"); break;
    case 'e': o->max_bytes = opts_size(a, "-e"); break;
    case 'f': o->factor = strtod(a, NULL); break;
    case 'w': o->warmup = (int)opts_int(a, "-w", 0, 1000000); break;
    case 'i': o->iters = (int)opts_int(a, "-i", 1, 100000000); break;
    case 'd': if (dt_parse(a, &o->dtype)) opts_die("datatype", a); break;
    case 'o': if (dt_op_parse(a, &o->redop)) opts_die("reduction op", a); break;
    case 'c': o->nchannels = (int)opts_int(a, "--channels", 1, PERF_MAX_CHANNELS); break;
    case OPT_RANK: o->rank = (int)opts_int(a, "--rank", 0, 1 << 20); break;
    case OPT_NRANKS: o->nranks = (int)opts_int(a, "--nranks", 1, 1 << 20); break;
    case OPT_RDV: opts_rendezvous(o, a); break;
    case OPT_ALGO:
      if (!strcasecmp(a, "ring")) o->algo = PERF_ALGO_RING;
      else if (!strcasecmp(a, "tree")) o->algo = PERF_ALGO_TREE;
      else if (!strcasecmp(a, "collnet") || !strcasecmp(a, "CollNetChain"))
        o->algo = PERF_ALGO_COLLNET;
      else if (!strcasecmp(a, "CollNetDirect")) o->algo = PERF_ALGO_COLLNET;
      else if (!strcasecmp(a, "auto")) o->algo = PERF_ALGO_AUTO;
      else if (!strcasecmp(a, "nccl")) o->algo = PERF_ALGO_NCCL;
      else opts_die("--algo (ring, tree, collnet, CollNetDirect, auto or nccl)", a);
      o->collnet_direct = !strcasecmp(a, "CollNetDirect");
      break;
    case OPT_PROTO: o->proto = opts_proto(a); break;
    case OPT_ONEWAY: o->oneway = 1; break;
    case OPT_PLUGIN: o->plugin = a; break;
    case OPT_NETV: o->net_version = (int)opts_int(a, "--net-version", 7, 12); break;
    case OPT_DEV: o->dev = (int)opts_int(a, "--dev", 0, 1 << 20); break;
    /* any int NCCL would pass on, so a plugin's refusal can be tried too */
    case OPT_TCLASS: o->traffic_class = (int)opts_int(a, "--traffic-class", -1, INT_MAX); break;
    case OPT_TIMEOUT: o->timeout_s = (int)opts_int(a, "--timeout", 1, 86400); break;
    case OPT_JSON: o->json = a; break;
    case OPT_CHECK_ALL: o->check_all = 1; break;
    case OPT_NO_YIELD: o->yield_idle = 0; break;
    case OPT_STEP: o->step_bytes = opts_size(a, "--step"); break;
    case OPT_STAGED: o->staged = 1; break;
    case OPT_CALIBRATE: o->calibrate = a; break;
    case OPT_REPEATS: o->repeats = (int)opts_int(a, "--repeats", 1, 1000); break;
    case OPT_LINK_GBS: o->link_gbs = opts_gbs(a); break;
    case OPT_HEADS: o->collnet_heads = (int)opts_int(a, "--heads (1..8)", 1, 8); break;
    case OPT_MEM:
      if (perf_mem_parse(a, &o->mem)) opts_die("--mem (host, cuda, dmabuf, udmabuf or memfd)", a);
      break;
    case OPT_PARAMS: braid_params_print(stdout); exit(0);
    case 'h': fputs(opts_usage, stdout); exit(0);
    default: fputs(opts_usage, stderr); exit(2);
  }
}

void perf_opts_parse(struct perf_opts *o, int argc, char **argv) {
  opts_defaults(o);
  int c, have_op = 0, algo_given = 0, proto_given = 0;
  while ((c = getopt_long(argc, argv, "-n:b:e:f:w:i:d:o:c:h", opts_long, NULL)) != -1) {
    if (c == 1) { /* a positional argument: the operation */
      if (have_op++) opts_die("extra argument", optarg);
      opts_op(o, optarg);
      continue;
    }
    algo_given |= c == OPT_ALGO;
    proto_given |= c == OPT_PROTO;
    opts_one(o, c, optarg);
  }
  if (!have_op && (o->algo == PERF_ALGO_COLLNET || perf_opts_multi_algo(o))) o->op = PERF_ALLREDUCE;
  opts_validate(o, algo_given, proto_given);
}
