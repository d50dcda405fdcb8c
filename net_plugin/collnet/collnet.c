/* CollNet set-up: init, devices, listen, the connect collective, registration, close.
 * Operations are in collnet_op.c; the protocol is ps_offload/proto.h. */
#include "collnet/collnet.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "collnet/collnet_int.h"
#include "collnet/ps_hs.h"
#include "topo/devices.h"
#include "log.h"
#include "topo/devtable.h"
#include "api/memtypes.h"
#include "api/props.h"
#include "comm/stage.h"
#include "version.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "reduce.h"
#include "transport/socket/sock.h"

#define LISTEN_MAGIC 0x4C535042u /* "BPSL" */
#define CMR_MAGIC 0x4D535042u    /* "BPSM" */
#define HANDLE_MAGIC 0x48535042u /* "BPSH" */

/* The 128-byte handle every head all-gathers: magic, version, the head's random nonce (the
 * session id is a hash of all of them), and the settings every head must share. */
#define H_NONCE 32
struct coll_handle {
  uint32_t magic, version;
  uint8_t nonce[H_NONCE];
  uint64_t part_bytes;
  uint32_t hold;
  uint8_t servers[8]; /* a hash of BRAID_PS_SERVERS: every head must name the same servers in the
                         same order (partition p of op s goes to the same index everywhere) */
};

struct server_list;

struct coll_listen {
  uint32_t magic;
  int dev;
  struct coll_handle h;
  const struct server_list *servers; /* the BRAID_PS_SERVERS the handle's hash names */
};

struct coll_mr {
  uint32_t magic;
  void *addr;
  size_t size;
  struct braid_stage *stage; /* GPU memory: its host copy (comm/stage.h) */
};

struct coll_ctx {
  uint32_t magic;
  uint64_t comm_id;
};

/* BRAID_PS_SERVERS parsed.  Immutable once published: init (on any thread) never rewrites a
 * list that another thread's connect reads (issue 19 item 5).  A process normally sees one spec;
 * one whose parameters are reloaded with another (the unit tests) gets a list per spec, all kept
 * to the end of the process, as a connect may still read an older one. */
struct server_list {
  const struct server_list *older;
  char host[PS_MAX_SERVERS][256];
  char port[PS_MAX_SERVERS][16];
  int n;
  char spec[];
};

static pthread_mutex_t servers_mu = PTHREAD_MUTEX_INITIALIZER;
static const struct server_list *servers_all; /* newest first */

/* "host:port,[v6addr]:port,..." into *servers (zeroed); -1 with a WARN naming the bad entry. */
static int parse_servers(const char *spec, struct server_list *servers) {
  servers->n = 0;
  const char *p = spec;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[300];
    if (len == 0 || len >= sizeof item) goto bad;
    memcpy(item, p, len);
    item[len] = 0;
    if (servers->n == PS_MAX_SERVERS) {
      BRAID_WARN("invalid configuration: BRAID_PS_SERVERS lists more than %d servers", PS_MAX_SERVERS);
      return -1;
    }
    char *host = item, *colon;
    if (item[0] == '[') {
      char *close = strchr(item, ']');
      if (!close || close[1] != ':') goto bad;
      *close = 0;
      host = item + 1;
      colon = close + 1;
    } else {
      colon = strrchr(item, ':');
      if (!colon) goto bad;
      *colon = 0;
    }
    char *port = colon + 1, *e = NULL;
    long v = strtol(port, &e, 10);
    if (!*host || e == port || *e || v < 1 || v > 65535 || strlen(host) >= sizeof servers->host[0]) goto bad;
    memcpy(servers->host[servers->n], host, strlen(host) + 1); /* length checked above */
    snprintf(servers->port[servers->n], sizeof servers->port[0], "%ld", v);
    servers->n++;
    p = end ? end + 1 : p + len;
    continue;
  bad:
    BRAID_WARN("invalid configuration: BRAID_PS_SERVERS entry \"%.*s\" is not host:port or [ipv6]:port",
               (int)len, p);
    return -1;
  }
  return servers->n > 0 ? 0 : -1;
}

/* The list for spec, parsed on first use; NULL (with a WARN) when spec is invalid. */
static const struct server_list *servers_for(const char *spec) {
  pthread_mutex_lock(&servers_mu);
  const struct server_list *sl = servers_all;
  while (sl && strcmp(sl->spec, spec)) sl = sl->older;
  if (!sl) {
    size_t len = strlen(spec);
    struct server_list *n = calloc(1, sizeof *n + len + 1);
    if (!n) {
      BRAID_WARN("CollNet: out of memory parsing BRAID_PS_SERVERS");
    } else if (parse_servers(spec, n) != 0) {
      free(n);
    } else {
      memcpy(n->spec, spec, len + 1);
      n->older = servers_all;
      servers_all = sl = n;
    }
  }
  pthread_mutex_unlock(&servers_mu);
  return sl;
}

int braid_coll_token(char *buf, size_t n) {
  const char *file = braid_param_str(BRAID_P_PS_TOKEN_FILE);
  buf[0] = 0;
  if (!*file) {
    const char *t = braid_param_str(BRAID_P_PS_TOKEN);
    if (strlen(t) >= n) {
      BRAID_WARN("CollNet off: BRAID_PS_TOKEN is longer than %zu bytes", n - 1);
      return -1;
    }
    snprintf(buf, n, "%s", t);
    return *buf != 0;
  }
  FILE *f = fopen(file, "re");
  if (!f) {
    BRAID_WARN("CollNet off: BRAID_PS_TOKEN_FILE %s cannot be read: %s", file, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
    BRAID_WARN_ONCE("BRAID_PS_TOKEN_FILE %s is readable by other users (chmod 600)", file);
  bool ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  size_t len = ok ? strcspn(buf, "\r\n") : 0;
  if (ok && len == n - 1) {
    BRAID_WARN("CollNet off: the token in BRAID_PS_TOKEN_FILE %s is longer than %zu bytes", file, n - 2);
    return -1;
  }
  buf[len] = 0;
  return len > 0;
}

ncclResult_t braid_coll_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger, const char *abi) {
  if (ctx) *ctx = NULL;
  braid_log_set_logger(logger);
  ncclResult_t rc = braid_params_load();
  if (rc) return rc;
  const char *spec = braid_param_str(BRAID_P_PS_SERVERS);
  if (!*spec) {
    /* Normal when CollNet is not wanted; a warning when the user asked NCCL for it. */
    const char *want = getenv("NCCL_COLLNET_ENABLE");
    if (want && atoi(want) == 1)
      BRAID_WARN("CollNet off: NCCL_COLLNET_ENABLE=1 but BRAID_PS_SERVERS is not set (braid-ps "
                 "servers as host:port,...; see braid-ps --help)");
    else
      BRAID_INFO(NCCL_INIT | NCCL_NET, "CollNet off: BRAID_PS_SERVERS is not set");
    return ncclInvalidUsage;
  }
  const struct server_list *sl = servers_for(spec);
  if (!sl) return ncclInvalidArgument;
  const char *weighting = braid_param_str(BRAID_P_PS_WEIGHTING);
  if (strcmp(weighting, "adaptive") && strcmp(weighting, "equal")) {
    BRAID_WARN("invalid configuration: BRAID_PS_WEIGHTING=\"%s\" (use adaptive or equal)", weighting);
    return ncclInvalidArgument;
  }
  char token[PS_TOKEN_MAX + 1];
  int have = braid_coll_token(token, sizeof token);
  explicit_bzero(token, sizeof token);
  if (have < 0) return ncclInvalidArgument;
  if (!have) {
    BRAID_WARN("CollNet off: BRAID_PS_SERVERS is set but neither BRAID_PS_TOKEN nor BRAID_PS_TOKEN_FILE is "
               "(the job's token, the same one the braid-ps servers were started with)");
    return ncclInvalidArgument;
  }
  if (ps_auth_init() != 0) {
    /* The token is always required, so there is no unauthenticated CollNet to fall back to. */
    BRAID_WARN("CollNet off: BRAID_PS_TOKEN is set but braid-ps authentication (HMAC-SHA256 with "
               "libsodium) is unavailable: %s; CollNet never runs unauthenticated (apt-get install "
               "libsodium23)", ps_auth_error());
    return ncclSystemError;
  }
  if (ctx) {
    struct coll_ctx *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->magic = 0x43435458u;
    c->comm_id = comm_id;
    *ctx = c;
  }
  static atomic_flag announced = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&announced))
    BRAID_INFO(NCCL_INIT | NCCL_NET, "braid CollNet %s (%s): %d braid-ps server(s) %s, partitions of %lld bytes, "
               "hold-back %s, reduction on the servers", BRAID_VERSION, abi, sl->n, spec,
               (long long)braid_param_int(BRAID_P_PS_PARTITION_BYTES),
               braid_param_int(BRAID_P_PS_HOLD) ? "on" : "off");
  return ncclSuccess;
}

ncclResult_t braid_coll_finalize(void *ctx) {
  struct coll_ctx *c = ctx;
  if (c && c->magic == 0x43435458u) {
    c->magic = 0;
    free(c);
  }
  return ncclSuccess;
}

ncclResult_t braid_coll_devices(int *ndev) { return braid_devtable_load(BRAID_VIEW_COLLNET, ndev); }

ncclResult_t braid_coll_make_vdevice(int *d, int ndevs, const int *devs, int max) {
  return braid_devtable_fuse(BRAID_VIEW_COLLNET, d, ndevs, devs, max);
}

/* What the net's devices take: NCCL fills one topology node per NIC for both plugins, CollNet's
 * first, and keeps the first "gdr" it is given, so a CollNet that claimed less would turn
 * GPUDirect RDMA off for the net's connections on the same NICs.  braid's operations read and
 * write host memory, so GPU memory registered with CollNet is staged (comm/stage.h).  A virtual
 * device takes what all of its physical devices take. */
static int coll_ptr_support(const struct braid_device *d, int dev) {
  if (!d->nchildren) return braid_dev_ptr_support(dev);
  int bits = ~0;
  for (int i = 0; i < d->nchildren; i++) bits &= braid_dev_ptr_support(d->children[i]);
  return bits | NCCL_PTR_HOST;
}

ncclResult_t braid_coll_get_properties(int dev, struct braid_props *p) {
  const struct braid_device *d = braid_devtable_get(BRAID_VIEW_COLLNET, dev);
  if (!d) return ncclInvalidArgument;
  braid_device_props(d, dev, p);
  p->ptr_support = coll_ptr_support(d, dev);
  return ncclSuccess;
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void handle_encode(const struct coll_handle *h, uint8_t *out) {
  memset(out, 0, 128);
  put32(out, h->magic);
  put32(out + 4, h->version);
  memcpy(out + 8, h->nonce, H_NONCE);
  put32(out + 40, (uint32_t)h->part_bytes);
  put32(out + 44, h->hold);
  memcpy(out + 48, h->servers, sizeof h->servers);
}

static int handle_decode(const uint8_t *in, struct coll_handle *h) {
  h->magic = get32(in);
  h->version = get32(in + 4);
  memcpy(h->nonce, in + 8, H_NONCE);
  h->part_bytes = get32(in + 40);
  h->hold = get32(in + 44);
  memcpy(h->servers, in + 48, sizeof h->servers);
  return h->magic == HANDLE_MAGIC && h->version == PS_VERSION ? 0 : -1;
}

ncclResult_t braid_coll_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)ctx;
  *listen_comm = NULL;
  int ndev = 0;
  if (braid_devtable_load(BRAID_VIEW_COLLNET, &ndev) != ncclSuccess || dev < 0 || dev >= ndev) {
    BRAID_WARN("CollNet listen on invalid device %d (%d devices)", dev, ndev);
    return ncclInvalidArgument;
  }
  const char *spec = braid_param_str(BRAID_P_PS_SERVERS);
  const struct server_list *sl = servers_for(spec);
  if (!sl) return ncclInvalidArgument;
  struct coll_listen *l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  l->magic = LISTEN_MAGIC;
  l->servers = sl;
  l->dev = dev;
  l->h.magic = HANDLE_MAGIC;
  l->h.version = PS_VERSION;
  ps_auth_random(l->h.nonce, H_NONCE);
  l->h.part_bytes = (uint64_t)braid_param_int(BRAID_P_PS_PARTITION_BYTES);
  l->h.hold = (uint32_t)braid_param_int(BRAID_P_PS_HOLD);
  const uint8_t *sp = (const uint8_t *)spec;
  uint8_t digest[PS_SESSION_BYTES];
  ps_auth_session_id(&sp, 1, strlen(spec), digest);
  memcpy(l->h.servers, digest, sizeof l->h.servers);
  handle_encode(&l->h, handle);
  *listen_comm = l;
  return ncclSuccess;
}

ncclResult_t braid_coll_close_listen(void *listen_comm) {
  struct coll_listen *l = listen_comm;
  if (!l || l->magic != LISTEN_MAGIC) {
    BRAID_WARN("CollNet closeListen of an invalid listen comm %p", listen_comm);
    return ncclInvalidArgument;
  }
  l->magic = 0;
  free(l);
  return ncclSuccess;
}

/* ---------- the connect collective ---------- */

static ncclResult_t run_handshakes(struct braid_collcomm *cc, const struct server_list *servers,
                                   const struct braid_iface *const *rails, int nrails) {
  char token[PS_TOKEN_MAX + 1];
  if (braid_coll_token(token, sizeof token) <= 0) {
    explicit_bzero(token, sizeof token);
    return ncclInvalidArgument;
  }
  struct ps_hs hs[PS_MAX_SERVERS];
  uint64_t now = braid_now_ns();
  for (int i = 0; i < cc->nservers; i++) cc->srv[i].host = servers->host[i], cc->srv[i].port = servers->port[i];
  uint64_t deadline = now + (uint64_t)braid_param_int(BRAID_P_PS_CONNECT_TIMEOUT_MS) * 1000000ull;
  uint64_t first_ready = 0;
  for (int i = 0; i < cc->nservers; i++) {
    ps_client_hs_init(cc, &hs[i], i, cc->session);
    ps_hs_start(&hs[i], i, rails, nrails, now);
  }
  for (;;) {
    int pending = 0;
    struct pollfd pfd[PS_MAX_SERVERS];
    int np = 0;
    now = braid_now_ns();
    for (int i = 0; i < cc->nservers; i++) {
      ps_hs_step(&hs[i], i, token, rails, nrails, now);
      if (hs[i].st == PS_HS_READY || hs[i].st == PS_HS_FAILED) continue;
      pending++;
      if (hs[i].fd >= 0)
        pfd[np++] = (struct pollfd){.fd = hs[i].fd, .events = hs[i].st == PS_HS_CONNECTING ? POLLOUT : POLLIN};
    }
    if (!pending) break;
    /* Once a server is ready, one that still refuses connections (down, or not started) gets a
     * short grace, not the whole deadline: the job starts on the others. */
    if (!first_ready)
      for (int i = 0; i < cc->nservers; i++)
        if (hs[i].st == PS_HS_READY) first_ready = now;
    for (int i = 0; first_ready && now - first_ready > 2000000000ull && i < cc->nservers; i++)
      if (hs[i].st == PS_HS_RETRY) ps_hs_fail(&hs[i], "%s", hs[i].why[0] ? hs[i].why : "unreachable");
    if (now >= deadline) {
      for (int i = 0; i < cc->nservers; i++)
        if (hs[i].st != PS_HS_READY && hs[i].st != PS_HS_FAILED) {
          char why[300];
          snprintf(why, sizeof why, "%s", hs[i].st == PS_HS_READY_WAIT
                                              ? "not every head joined within BRAID_PS_CONNECT_TIMEOUT_MS"
                                              : hs[i].why[0] ? hs[i].why : "no answer");
          ps_hs_fail(&hs[i], "%s", why);
        }
      break;
    }
    poll(pfd, (nfds_t)np, 20);
  }
  int ready = 0;
  for (int i = 0; i < cc->nservers; i++) {
    struct ps_srv *s = &cc->srv[i];
    snprintf(s->name, sizeof s->name, "%s:%s", servers->host[i], servers->port[i]);
    s->stats = braid_telemetry_add_server(cc->dev, cc->rank, s->name);
    if (s->stats) {
      atomic_store(&s->stats->up, hs[i].st == PS_HS_READY);
      atomic_store(&s->stats->failures, hs[i].st != PS_HS_READY);
    }
    if (hs[i].addrlen) s->addr = hs[i].addr, s->addrlen = hs[i].addrlen; /* for its rejoins */
    if (hs[i].st == PS_HS_READY) {
      ps_client_adopt(cc, i, &hs[i]);
      ready++;
    } else {
      s->fd = -1;
      s->lost = 1;
      cc->lost |= 1u << i;
      ps_rejoin_lost(cc, i, now); /* it may come up later */
      BRAID_WARN("CollNet rank %d/%d: braid-ps server %s not usable: %s; this communicator takes it "
                 "when it is back", cc->rank, cc->nranks, s->name, hs[i].why);
    }
  }
  explicit_bzero(hs, sizeof hs); /* the keys live on in cc->srv[] only */
  explicit_bzero(token, sizeof token);
  if (!ready) {
    BRAID_WARN("CollNet rank %d/%d: no braid-ps server usable (BRAID_PS_SERVERS=%s); NCCL falls "
               "back to its other algorithms for this communicator", cc->rank, cc->nranks,
               braid_param_str(BRAID_P_PS_SERVERS));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t braid_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
                                void **coll_comm) {
  *coll_comm = NULL;
  struct coll_listen *l = listen_comm;
  if (!l || l->magic != LISTEN_MAGIC) {
    BRAID_WARN("CollNet connect with an invalid listen comm %p", listen_comm);
    return ncclInvalidArgument;
  }
  if (!handles || nranks < 1 || nranks > PS_MAX_RANKS || rank < 0 || rank >= nranks) {
    BRAID_WARN("CollNet connect with rank %d of %d (at most %d heads)", rank, nranks, PS_MAX_RANKS);
    return ncclInvalidArgument;
  }
  const uint8_t **nonces = calloc((size_t)nranks, sizeof *nonces);
  struct coll_handle *hs = calloc((size_t)nranks, sizeof *hs);
  struct braid_collcomm *cc = calloc(1, sizeof *cc);
  ncclResult_t rc = ncclSuccess;
  if (!nonces || !hs || !cc) {
    rc = ncclSystemError;
    goto out;
  }
  for (int r = 0; r < nranks; r++) {
    if (!handles[r] || handle_decode(handles[r], &hs[r]) != 0) {
      if (handles[r] && hs[r].magic == HANDLE_MAGIC)
        BRAID_WARN("CollNet connect: head %d speaks braid-ps protocol %u, this head %u: every node "
                   "must run the same braid release", r, hs[r].version, PS_VERSION);
      else
        BRAID_WARN("CollNet connect: the handle of head %d is not a braid CollNet handle", r);
      rc = ncclInvalidArgument;
      goto out;
    }
    if (hs[r].part_bytes != l->h.part_bytes || hs[r].hold != l->h.hold) {
      BRAID_WARN("CollNet connect: head %d uses BRAID_PS_PARTITION_BYTES=%llu BRAID_PS_HOLD=%u, this "
                 "head %llu/%u: every node must use the same values", r,
                 (unsigned long long)hs[r].part_bytes, hs[r].hold,
                 (unsigned long long)l->h.part_bytes, l->h.hold);
      rc = ncclInvalidUsage;
      goto out;
    }
    if (memcmp(hs[r].servers, l->h.servers, sizeof l->h.servers) != 0) {
      BRAID_WARN("CollNet connect: head %d lists other braid-ps servers than this head "
                 "(BRAID_PS_SERVERS=%s): every node must list the same servers in the same order",
                 r, braid_param_str(BRAID_P_PS_SERVERS));
      rc = ncclInvalidUsage;
      goto out;
    }
    nonces[r] = hs[r].nonce;
  }
  if (memcmp(hs[rank].nonce, l->h.nonce, H_NONCE) != 0) {
    BRAID_WARN("CollNet connect: handle %d is not the one this head's listen produced", rank);
    rc = ncclInvalidArgument;
    goto out;
  }
  cc->magic = COLL_MAGIC;
  cc->rank = rank;
  cc->nranks = nranks;
  cc->dev = l->dev;
  cc->nservers = l->servers->n;
  cc->hold = (int)l->h.hold;
  cc->equal_weights = !strcmp(braid_param_str(BRAID_P_PS_WEIGHTING), "equal");
  cc->part_bytes = (size_t)l->h.part_bytes;
  cc->t_open = braid_now_ns();
  memset(cc->my_weights, 255, sizeof cc->my_weights);
  ps_auth_session_id(nonces, nranks, H_NONCE, cc->session);
  cc->nrails = braid_devtable_rails(BRAID_VIEW_COLLNET, l->dev, cc->rails, BRAID_MAX_RAILS);
  if (cc->nrails <= 0) {
    rc = ncclInvalidArgument;
    goto out;
  }
  rc = run_handshakes(cc, l->servers, cc->rails, cc->nrails);
  if (rc) goto out;
  char list[PS_MAX_SERVERS * 100] = "";
  size_t o = 0;
  for (int i = 0; i < cc->nservers && o < sizeof list; i++)
    o += (size_t)snprintf(list + o, sizeof list - o, "%s%s%s", i ? ", " : "", cc->srv[i].name,
                          cc->srv[i].lost ? " (lost)" : "");
  BRAID_INFO(NCCL_INIT | NCCL_NET, "CollNet rank %d/%d on device %d: session %02x%02x%02x%02x, servers %s",
             rank, nranks, l->dev, cc->session[0], cc->session[1], cc->session[2], cc->session[3], list);
  pthread_mutex_init(&cc->mu, NULL);
  ps_client_register(cc, 1);
  *coll_comm = cc;
  cc = NULL;
out:
  if (cc) {
    for (int i = 0; i < PS_MAX_SERVERS; i++)
      if (cc->srv[i].fd > 0) close(cc->srv[i].fd);
    free(cc);
  }
  free(nonces);
  free(hs);
  return rc;
}

ncclResult_t braid_coll_reduce_support(int dtype, int op, int *supported) {
  /* Always success: an error here hangs the other heads (NCCL ignores CollNet set-up results). */
  if (supported) *supported = braid_reduce_supported(dtype, op);
  return ncclSuccess;
}

struct braid_collcomm *braid_collcomm_check(void *p, const char *what) {
  struct braid_collcomm *cc = p;
  if (!cc || cc->magic != COLL_MAGIC) {
    BRAID_WARN("CollNet %s on an invalid collComm %p", what, p);
    return NULL;
  }
  return cc;
}

/* A registration of memory of type (a dma-buf fd when fd >= 0) on cc's device: host memory as it
 * is, GPU memory staged, when the device claims it. */
static ncclResult_t coll_reg(struct braid_collcomm *cc, void *data, size_t size, int type, int fd, void **mhandle) {
  *mhandle = NULL;
  int need = fd >= 0 ? NCCL_PTR_DMABUF : type;
  const struct braid_device *d = braid_devtable_get(BRAID_VIEW_COLLNET, cc->dev);
  int ptr = d ? coll_ptr_support(d, cc->dev) : NCCL_PTR_HOST;
  if ((type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) || !(ptr & need)) {
    BRAID_WARN("CollNet %s of %zu bytes of memory type %d%s on device %d, which advertised ptrSupport 0x%x",
               fd >= 0 ? "regMrDmaBuf" : "regMr", size, type, fd >= 0 ? " (a dma-buf fd)" : "", cc->dev, ptr);
    return ncclInvalidArgument;
  }
  struct coll_mr *m = calloc(1, sizeof *m);
  if (!m) return ncclSystemError;
  char why[320];
  if (type != NCCL_PTR_HOST && !(m->stage = braid_stage_new(data, size, why, sizeof why))) {
    BRAID_WARN("CollNet regMr of %zu bytes of GPU memory at %p: it cannot be staged through host memory for "
               "braid-ps: %s", size, data, why);
    free(m);
    return ncclSystemError;
  }
  m->magic = CMR_MAGIC;
  m->addr = data;
  m->size = size;
  *mhandle = m;
  return ncclSuccess;
}

ncclResult_t braid_coll_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle) {
  *mhandle = NULL;
  struct braid_collcomm *cc = braid_collcomm_check(coll_comm, "regMr");
  return cc ? coll_reg(cc, data, size, type, -1, mhandle) : ncclInvalidArgument;
}

/* The fd is NCCL's and closed after the call: staging copies by address, as the fd maps it. */
ncclResult_t braid_coll_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                                      int fd, void **mhandle) {
  (void)offset;
  *mhandle = NULL;
  struct braid_collcomm *cc = braid_collcomm_check(coll_comm, "regMrDmaBuf");
  return cc ? coll_reg(cc, data, size, type, fd < 0 ? -1 : fd, mhandle) : ncclInvalidArgument;
}

ncclResult_t braid_coll_dereg_mr(void *coll_comm, void *mhandle) {
  struct coll_mr *m = mhandle;
  if (!braid_collcomm_check(coll_comm, "deregMr")) return ncclInvalidArgument;
  if (!m || m->magic != CMR_MAGIC) {
    BRAID_WARN("CollNet deregMr of an invalid handle %p", mhandle);
    return ncclInvalidArgument;
  }
  braid_stage_free(m->stage);
  m->magic = 0;
  free(m);
  return ncclSuccess;
}

char *braid_coll_mr_host(void *mh, void *p, size_t len, int input) {
  struct coll_mr *m = mh;
  if (!m || m->magic != CMR_MAGIC) {
    BRAID_WARN("CollNet iallreduce with an invalid memory handle %p", mh);
    return NULL;
  }
  if (!m->stage) return p;
  char *host = braid_stage_host(m->stage, p, len);
  if (!host) {
    BRAID_WARN("CollNet iallreduce of %zu bytes at %p: outside the buffer its memory handle registered", len, p);
    return NULL;
  }
  return input && braid_stage_in(m->stage, p, len) ? NULL : host;
}

int braid_coll_mr_done(void *mh, void *p, size_t len) {
  struct coll_mr *m = mh;
  return m && m->magic == CMR_MAGIC && m->stage ? braid_stage_out(m->stage, p, len) : 0;
}

ncclResult_t braid_coll_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request) {
  (void)data, (void)size, (void)mhandle;
  *request = NULL; /* host memory, or staged and copied to GPU memory before test() said done */
  return braid_collcomm_check(coll_comm, "iflush") ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t braid_coll_close(void *coll_comm) {
  struct braid_collcomm *cc = braid_collcomm_check(coll_comm, "closeColl");
  if (!cc) return ncclInvalidArgument;
  double secs = (double)(braid_now_ns() - cc->t_open) / 1e9;
  char per[PS_MAX_SERVERS * 96] = "";
  size_t o = 0;
  for (int i = 0; i < cc->nservers && o < sizeof per; i++)
    o += (size_t)snprintf(per + o, sizeof per - o, " %s:%llu parts%s", cc->srv[i].name,
                          (unsigned long long)cc->srv[i].parts, cc->srv[i].lost ? "(lost)" : "");
  BRAID_INFO(NCCL_NET, "CollNet rank %d/%d closed after %.1f s: %llu allreduce ops, %.1f MB, %llu "
             "re-routed partitions;%s", cc->rank, cc->nranks, secs, (unsigned long long)cc->nops,
             (double)cc->bytes / 1e6, (unsigned long long)cc->reroutes, per);
  ps_client_register(cc, 0); /* after this nothing else touches cc */
  pthread_mutex_lock(&cc->mu);
  ps_client_teardown(cc);
  cc->magic = 0;
  pthread_mutex_unlock(&cc->mu);
  pthread_mutex_destroy(&cc->mu);
  free(cc);
  return ncclSuccess;
}
