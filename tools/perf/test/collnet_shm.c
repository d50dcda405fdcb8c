/* collshm: a test-only CollNet plugin (ncclCollNetPlugin_v11) that allreduces between the
 * processes of one machine through POSIX shared memory, to test braid-perf --algo collnet
 * before a real CollNet client exists. It also exports a net table (ncclNetPlugin_v11) with one
 * device and no data path, because NCCL (and braid-perf) look CollNet up next to a net plugin.
 *
 * Protocol. listen writes a random nonce into the handle; connect (a blocking collective) maps
 * the segment "/braid-collshm-<rank 0's nonce>" that rank 0 creates, waits for every rank, and
 * rank 0 unlinks the name. Each iallreduce takes the next run of "pieces" of at most
 * CS_SLOT_BYTES; piece q lives in slot q % CS_NSLOT of every rank's slot array. A rank posts a
 * piece (copies its send data into its own slot, then publishes tag q+1) once every rank has
 * finished reading the slot's previous piece (consumed > q - CS_NSLOT), and reduces it into its
 * receive buffer, in rank order 0..n-1, once every rank has published it; then it bumps its
 * `consumed` count. Nothing moves between calls: iallreduce and test progress the comm's
 * requests in issue order. Sequence numbers come from the order of the calls, as with NCCL
 * every rank issues the same iallreduces in the same order; a NULL request consumes none.
 *
 * Older tables too, so braid-perf's --net-version exercises collload's adapters: net v8 and
 * CollNet v8 (int count, once-per-process init) and v10 (size_t count, no ctx).
 *
 * Test knobs (environment): COLLSHM_NULL_PERCENT (default 5): iallreduce returns a NULL request
 * this often at random; COLLSHM_DEVICES: CollNet device count (default 1); COLLSHM_UNSUPPORTED:
 * a type number reduceSupport says no to; COLLSHM_FAIL_CONNECT=1: connect fails;
 * COLLSHM_TIMEOUT: seconds connect waits for the other ranks (default 60).
 * Integer sums and products wrap (as hardware does); half, bf16 and fp8 are not supported. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "nccl_plugin/net.h"

#define CS_NSLOT 16
#define CS_SLOT_BYTES (512 * 1024)
#define CS_MAX_REQS 256
#define CS_SEG_MAGIC 0x6273686d636f6c6cull /* segment initialized */
#define CS_HANDLE_MAGIC 0x636f6c6c73686d31ull
#define CS_REQ_MAGIC 0x72657131u
#define CS_MR_MAGIC 0x6d723131u

#define CS_WARN(...) cs_warn(__LINE__, __VA_ARGS__)
#define CS_INFO(...)                                                                  \
  do {                                                                                \
    if (cs_log) cs_log(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, __func__, __LINE__, __VA_ARGS__); \
  } while (0)

static ncclDebugLogger_t cs_log;
static int cs_null_pct = 5;

/* A warning through NCCL's logger (stderr before init); usable as `return CS_WARN(...), -1`. */
__attribute__((format(printf, 2, 3))) static void cs_warn(int line, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (cs_log) cs_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, line, "%s", msg);
  else fprintf(stderr, "%s\n", msg);
}

/* ---- shared segment ------------------------------------------------------------------------ */

struct cs_hdr {
  _Atomic uint64_t magic;
  uint32_t nranks;
  _Atomic uint32_t arrived;
};

struct cs_rank { /* one per rank, 64-byte aligned */
  _Atomic uint64_t consumed;           /* pieces this rank has reduced (done reading) */
  char pad[56];
  _Atomic uint64_t tag[CS_NSLOT];      /* piece + 1 published in each slot */
};

#define CS_RANKS_OFF 4096
static size_t cs_data_off(int n) {
  return (CS_RANKS_OFF + (size_t)n * sizeof(struct cs_rank) + 4095) / 4096 * 4096;
}
static size_t cs_seg_bytes(int n) {
  return cs_data_off(n) + (size_t)n * CS_NSLOT * CS_SLOT_BYTES;
}

struct cs_handle {
  uint64_t magic, nonce;
  int32_t dev, pid;
};

struct cs_listen {
  uint64_t nonce;
  int dev;
};

enum cs_state { CS_FREE, CS_ACTIVE, CS_COMPLETE };

struct cs_req {
  uint32_t magic;
  int state, flush;
  int queued;                         /* in the comm's order ring */
  struct cs_comm *comm;
  const char *send;
  char *recv;
  size_t bytes;
  ncclDataType_t dt;
  ncclRedOp_t op;
  uint64_t p0, np, posted, reduced;   /* pieces [p0, p0+np) */
};

struct cs_comm {
  int rank, nranks;
  char name[64];
  int unlinked;
  char *seg;
  size_t seg_bytes;
  struct cs_hdr *hdr;
  uint64_t next_piece;
  int nregs;
  unsigned seed;
  struct cs_req reqs[CS_MAX_REQS];
  int order[CS_MAX_REQS];             /* active requests in issue order (a ring) */
  int head, count;
};

static struct cs_rank *cs_rank_of(struct cs_comm *c, int k) {
  return (struct cs_rank *)(c->seg + CS_RANKS_OFF) + k;
}
static char *cs_slot(struct cs_comm *c, int k, uint64_t piece) {
  return c->seg + cs_data_off(c->nranks) +
         ((size_t)k * CS_NSLOT + (size_t)(piece % CS_NSLOT)) * CS_SLOT_BYTES;
}

/* ---- types and reduction ------------------------------------------------------------------- */

static size_t cs_type_size(ncclDataType_t dt) {
  switch ((int)dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  }
  return 0; /* half, bf16, fp8: not supported here */
}

/* d[i] = d[i] op s[i]; integer sum/prod in the unsigned type U (wrapping, never undefined). */
#define CS_RED(NAME, T, U)                                                        \
  static void NAME(int op, void *dv, const void *sv, size_t n) {                  \
    T *d = dv;                                                                    \
    const T *s = sv;                                                              \
    switch (op) {                                                                 \
      case ncclSum: for (size_t i = 0; i < n; i++) d[i] = (T)((U)d[i] + (U)s[i]); break; \
      case ncclProd: for (size_t i = 0; i < n; i++) d[i] = (T)((U)d[i] * (U)s[i]); break; \
      case ncclMax: for (size_t i = 0; i < n; i++) d[i] = d[i] > s[i] ? d[i] : s[i]; break; \
      default: for (size_t i = 0; i < n; i++) d[i] = d[i] < s[i] ? d[i] : s[i]; break; \
    }                                                                             \
  }
CS_RED(cs_red_i8, int8_t, uint32_t)
CS_RED(cs_red_u8, uint8_t, uint32_t)
CS_RED(cs_red_i32, int32_t, uint32_t)
CS_RED(cs_red_u32, uint32_t, uint32_t)
CS_RED(cs_red_i64, int64_t, uint64_t)
CS_RED(cs_red_u64, uint64_t, uint64_t)
CS_RED(cs_red_f32, float, float)
CS_RED(cs_red_f64, double, double)

static void cs_reduce(ncclDataType_t dt, int op, void *d, const void *s, size_t bytes) {
  switch ((int)dt) {
    case ncclInt8: cs_red_i8(op, d, s, bytes); break;
    case ncclUint8: cs_red_u8(op, d, s, bytes); break;
    case ncclInt32: cs_red_i32(op, d, s, bytes / 4); break;
    case ncclUint32: cs_red_u32(op, d, s, bytes / 4); break;
    case ncclInt64: cs_red_i64(op, d, s, bytes / 8); break;
    case ncclUint64: cs_red_u64(op, d, s, bytes / 8); break;
    case ncclFloat32: cs_red_f32(op, d, s, bytes / 4); break;
    case ncclFloat64: cs_red_f64(op, d, s, bytes / 8); break;
    default: break;
  }
}

/* ---- progress ------------------------------------------------------------------------------ */

static size_t cs_piece_len(const struct cs_req *r, uint64_t i) {
  size_t off = (size_t)i * CS_SLOT_BYTES;
  return r->bytes - off < CS_SLOT_BYTES ? r->bytes - off : CS_SLOT_BYTES;
}

/* Posts r's next piece when its slot is free everywhere; 1 when posted. */
static int cs_post(struct cs_comm *c, struct cs_req *r) {
  uint64_t q = r->p0 + r->posted;
  for (int k = 0; k < c->nranks; k++)
    if (atomic_load_explicit(&cs_rank_of(c, k)->consumed, memory_order_acquire) + CS_NSLOT <= q)
      return 0;
  memcpy(cs_slot(c, c->rank, q), r->send + (size_t)r->posted * CS_SLOT_BYTES,
         cs_piece_len(r, r->posted));
  atomic_store_explicit(&cs_rank_of(c, c->rank)->tag[q % CS_NSLOT], q + 1, memory_order_release);
  r->posted++;
  return 1;
}

/* Reduces r's next piece when every rank has published it; 1 when reduced. */
static int cs_reduce_piece(struct cs_comm *c, struct cs_req *r) {
  uint64_t q = r->p0 + r->reduced;
  for (int k = 0; k < c->nranks; k++)
    if (atomic_load_explicit(&cs_rank_of(c, k)->tag[q % CS_NSLOT], memory_order_acquire) != q + 1)
      return 0;
  size_t len = cs_piece_len(r, r->reduced);
  char *dst = r->recv + (size_t)r->reduced * CS_SLOT_BYTES;
  memmove(dst, cs_slot(c, 0, q), len); /* rank order: ((r0 op r1) op r2) ... */
  for (int k = 1; k < c->nranks; k++) cs_reduce(r->dt, r->op, dst, cs_slot(c, k, q), len);
  atomic_store_explicit(&cs_rank_of(c, c->rank)->consumed, q + 1, memory_order_release);
  r->reduced++;
  return 1;
}

/* Moves every active request as far as it can, in issue order. */
static void cs_progress(struct cs_comm *c) {
  int can_post = 1, can_reduce = 1;
  for (int i = 0; i < c->count; i++) {
    struct cs_req *r = &c->reqs[c->order[(c->head + i) % CS_MAX_REQS]];
    if (r->state != CS_ACTIVE) continue;
    while (can_post && r->posted < r->np) can_post = cs_post(c, r);
    while (can_reduce && r->reduced < r->posted) can_reduce = cs_reduce_piece(c, r);
    if (r->reduced < r->np) can_reduce = 0; /* pieces are consumed in order */
    else r->state = CS_COMPLETE;
  }
  while (c->count && c->reqs[c->order[c->head]].state != CS_ACTIVE) {
    c->reqs[c->order[c->head]].queued = 0;
    c->head = (c->head + 1) % CS_MAX_REQS;
    c->count--;
  }
}

static struct cs_req *cs_req_new(struct cs_comm *c) {
  if (c->count == CS_MAX_REQS) return NULL;
  for (int i = 0; i < CS_MAX_REQS; i++)
    if (c->reqs[i].state == CS_FREE && c->reqs[i].magic != CS_REQ_MAGIC && !c->reqs[i].queued) {
      struct cs_req *r = &c->reqs[i];
      memset(r, 0, sizeof *r);
      r->magic = CS_REQ_MAGIC;
      r->comm = c;
      return r;
    }
  return NULL;
}

/* ---- set-up -------------------------------------------------------------------------------- */

static void cs_nap(void) {
  struct timespec ts = {0, 100 * 1000};
  nanosleep(&ts, NULL);
}

static int cs_env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static ncclResult_t cs_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  cs_log = log;
  cs_null_pct = cs_env_int("COLLSHM_NULL_PERCENT", 5);
  uint64_t *c = malloc(sizeof *c);
  if (!c) return ncclSystemError;
  *c = comm_id;
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t cs_finalize(void *ctx) {
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t cs_devices(int *n) {
  *n = cs_env_int("COLLSHM_DEVICES", 1);
  return ncclSuccess;
}

static void cs_fill_props(int dev, ncclNetProperties_v11_t *p) {
  memset(p, 0, sizeof *p);
  p->name = "collshm0";
  p->pciPath = NULL;
  p->guid = (uint64_t)dev;
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = 100000;
  p->latency = 0;
  p->maxComms = 1024;
  p->maxRecvs = 1;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
  p->maxMultiRequestSize = 1;
}

static ncclResult_t cs_props(int dev, ncclNetProperties_v11_t *p) {
  if (dev != 0) return ncclInvalidArgument;
  cs_fill_props(dev, p);
  return ncclSuccess;
}

static ncclResult_t cs_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  static _Atomic uint32_t counter;
  (void)ctx;
  struct cs_listen *l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  l->nonce = ((uint64_t)getpid() << 40) ^ ((uint64_t)ts.tv_nsec << 8) ^ (uint64_t)ts.tv_sec ^
             ((uint64_t)atomic_fetch_add(&counter, 1) << 32);
  l->dev = dev;
  struct cs_handle h = {CS_HANDLE_MAGIC, l->nonce, dev, (int32_t)getpid()};
  memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof h);
  *listen_comm = l;
  return ncclSuccess;
}

static ncclResult_t cs_close_listen(void *listen_comm) {
  free(listen_comm);
  return ncclSuccess;
}

/* Rank 0 creates and sizes the segment; the others wait for it, then everybody waits for all. */
static int cs_map(struct cs_comm *c, double deadline) {
  size_t want = cs_seg_bytes(c->nranks);
  int fd = -1;
  if (c->rank == 0) {
    fd = shm_open(c->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return CS_WARN("collshm: %s: %s", c->name, strerror(errno)), -1;
    if (ftruncate(fd, (off_t)want)) {
      CS_WARN("collshm: %s: %zu bytes: %s", c->name, want, strerror(errno));
      return close(fd), -1;
    }
  } else {
    for (;;) {
      struct stat st;
      fd = shm_open(c->name, O_RDWR, 0600);
      if (fd >= 0 && fstat(fd, &st) == 0 && (size_t)st.st_size == want) break;
      if (fd >= 0) close(fd);
      if (braid_now_s() > deadline)
        return CS_WARN("collshm: rank %d: %s never appeared", c->rank, c->name), -1;
      cs_nap();
    }
  }
  c->seg = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (c->seg == MAP_FAILED) return c->seg = NULL, CS_WARN("collshm: mmap: %s", strerror(errno)), -1;
  c->seg_bytes = want;
  c->hdr = (struct cs_hdr *)c->seg;
  if (c->rank == 0) {
    c->hdr->nranks = (uint32_t)c->nranks;
    atomic_store_explicit(&c->hdr->magic, CS_SEG_MAGIC, memory_order_release);
  }
  while (atomic_load_explicit(&c->hdr->magic, memory_order_acquire) != CS_SEG_MAGIC) {
    if (braid_now_s() > deadline) return CS_WARN("collshm: %s never initialized", c->name), -1;
    cs_nap();
  }
  if ((int)c->hdr->nranks != c->nranks)
    return CS_WARN("collshm: rank %d: %d ranks, but the segment has %u", c->rank, c->nranks,
                   c->hdr->nranks), -1;
  atomic_fetch_add(&c->hdr->arrived, 1);
  while ((int)atomic_load(&c->hdr->arrived) < c->nranks) {
    if (braid_now_s() > deadline) return CS_WARN("collshm: rank %d: only %u of %d ranks arrived",
                                                 c->rank, atomic_load(&c->hdr->arrived), c->nranks), -1;
    cs_nap();
  }
  if (c->rank == 0 && shm_unlink(c->name) == 0) c->unlinked = 1; /* everyone has it mapped */
  return 0;
}

static void cs_comm_free(struct cs_comm *c) {
  if (c->seg) munmap(c->seg, c->seg_bytes);
  if (c->rank == 0 && !c->unlinked && c->name[0]) shm_unlink(c->name);
  free(c);
}

static ncclResult_t cs_connect(void *handles[], int nranks, int rank, void *listen_comm,
                               void **coll_comm) {
  *coll_comm = NULL;
  if (!listen_comm || !handles || nranks < 1 || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  struct cs_handle h0;
  for (int k = 0; k < nranks; k++) {
    struct cs_handle h;
    if (handles[k]) memcpy(&h, handles[k], sizeof h); /* no alignment assumed */
    if (k == 0) h0 = h;
    if (!handles[k] || h.magic != CS_HANDLE_MAGIC) {
      CS_WARN("collshm: handle of rank %d is not a collshm handle", k);
      return ncclInvalidArgument;
    }
  }
  if (cs_env_int("COLLSHM_FAIL_CONNECT", 0)) {
    CS_WARN("collshm: rank %d: connect fails (COLLSHM_FAIL_CONNECT)", rank);
    return ncclSystemError;
  }
  struct cs_comm *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  c->rank = rank;
  c->nranks = nranks;
  c->seed = (unsigned)(getpid() * 2654435761u) ^ (unsigned)rank;
  snprintf(c->name, sizeof c->name, "/braid-collshm-%016llx",
           (unsigned long long)h0.nonce);
  if (cs_map(c, braid_now_s() + cs_env_int("COLLSHM_TIMEOUT", 60))) {
    cs_comm_free(c);
    return ncclSystemError;
  }
  CS_INFO("collshm: rank %d of %d connected through %s (%zu bytes)", rank, nranks, c->name,
          c->seg_bytes);
  *coll_comm = c;
  return ncclSuccess;
}

static ncclResult_t cs_reduce_support(ncclDataType_t dt, ncclRedOp_t op, int *supported) {
  *supported = cs_type_size(dt) != 0 && (int)op >= 0 && (int)op < 4 &&
               (int)dt != cs_env_int("COLLSHM_UNSUPPORTED", -1);
  return ncclSuccess;
}

/* ---- memory -------------------------------------------------------------------------------- */

struct cs_mr {
  uint32_t magic;
  struct cs_comm *comm;
  const char *data;
  size_t size;
};

static ncclResult_t cs_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  *mhandle = NULL;
  if (!comm || type != NCCL_PTR_HOST) {
    CS_WARN("collshm: regMr of type %d (host memory only)", type);
    return ncclInvalidArgument;
  }
  struct cs_mr *m = calloc(1, sizeof *m);
  if (!m) return ncclSystemError;
  *m = (struct cs_mr){CS_MR_MAGIC, comm, data, size};
  ((struct cs_comm *)comm)->nregs++;
  *mhandle = m;
  return ncclSuccess;
}

static ncclResult_t cs_dereg_mr(void *comm, void *mhandle) {
  struct cs_mr *m = mhandle;
  if (!m || m->magic != CS_MR_MAGIC || m->comm != comm) return ncclInvalidArgument;
  m->magic = 0;
  ((struct cs_comm *)comm)->nregs--;
  free(m);
  return ncclSuccess;
}

/* The registration covers [p, p + n). */
static int cs_covers(const struct cs_mr *m, const struct cs_comm *c, const void *p, size_t n) {
  const char *q = p;
  return m && m->magic == CS_MR_MAGIC && m->comm == c && q >= m->data && n <= m->size &&
         (size_t)(q - m->data) <= m->size - n;
}

/* ---- data path ----------------------------------------------------------------------------- */

static ncclResult_t cs_iallreduce(void *comm, void *send, void *recv, size_t count,
                                  ncclDataType_t dt, ncclRedOp_t op, void *smh, void *rmh,
                                  void **request) {
  struct cs_comm *c = comm;
  size_t es = cs_type_size(dt), bytes = count * es;
  *request = NULL;
  if (!c || !es || (int)op < 0 || (int)op > 3) return ncclInvalidArgument;
  if (!cs_covers(smh, c, send, bytes) || !cs_covers(rmh, c, recv, bytes)) {
    CS_WARN("collshm: iallreduce of %zu bytes: send %p or recv %p outside its registration",
            bytes, send, recv);
    return ncclInvalidArgument;
  }
  cs_progress(c);
  if ((int)(rand_r(&c->seed) % 100) < cs_null_pct) return ncclSuccess; /* retry later */
  struct cs_req *r = cs_req_new(c);
  if (!r) return ncclSuccess; /* every request in use: retry later */
  r->state = CS_ACTIVE;
  r->send = send, r->recv = recv, r->bytes = bytes, r->dt = dt, r->op = op;
  r->p0 = c->next_piece;
  r->np = (bytes + CS_SLOT_BYTES - 1) / CS_SLOT_BYTES;
  c->next_piece += r->np;
  c->order[(c->head + c->count++) % CS_MAX_REQS] = (int)(r - c->reqs);
  r->queued = 1;
  cs_progress(c);
  *request = r;
  return ncclSuccess;
}

static ncclResult_t cs_iflush(void *comm, void *data, int size, void *mhandle, void **request) {
  struct cs_comm *c = comm;
  *request = NULL;
  if (!c || size < 0 || !cs_covers(mhandle, c, data, (size_t)size)) return ncclInvalidArgument;
  struct cs_req *r = cs_req_new(c);
  if (!r) return ncclSuccess;
  r->state = CS_COMPLETE; /* host memory: nothing to flush */
  r->flush = 1;
  *request = r;
  return ncclSuccess;
}

static ncclResult_t cs_test(void *request, int *done, int *size) {
  struct cs_req *r = request;
  if (!r || r->magic != CS_REQ_MAGIC || r->state == CS_FREE) return ncclInvalidArgument;
  if (r->state == CS_ACTIVE) cs_progress(r->comm);
  *done = r->state == CS_COMPLETE;
  if (!*done) return ncclSuccess;
  if (size) *size = r->bytes > INT_MAX ? INT_MAX : (int)r->bytes;
  r->state = CS_FREE;
  r->magic = 0;
  return ncclSuccess;
}

static ncclResult_t cs_close_coll(void *comm) {
  struct cs_comm *c = comm;
  if (!c) return ncclInvalidArgument;
  int busy = 0;
  for (int i = 0; i < CS_MAX_REQS; i++) busy += c->reqs[i].magic == CS_REQ_MAGIC;
  if (busy || c->nregs) {
    CS_WARN("collshm: closeColl with %d request(s) and %d registration(s) left", busy, c->nregs);
    return ncclInvalidUsage;
  }
  cs_comm_free(c);
  return ncclSuccess;
}

/* ---- the net table: one device, no data path ----------------------------------------------- */

static ncclResult_t cs_net_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *cfg,
                                ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)cfg, (void)prof;
  return cs_init(ctx, comm_id, log);
}
static ncclResult_t cs_net_devices(int *n) { return *n = 1, ncclSuccess; }
static ncclResult_t cs_net_listen(void *ctx, int dev, void *h, void **l) {
  (void)ctx, (void)dev, (void)h;
  *l = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_connect(void *ctx, int dev, void *h, void **s,
                                   ncclNetDeviceHandle_v11_t **d) {
  (void)ctx, (void)dev, (void)h, (void)d;
  *s = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_accept(void *l, void **r, ncclNetDeviceHandle_v11_t **d) {
  (void)l, (void)d;
  *r = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_reg(void *c, void *d, size_t n, int t, void **m) {
  (void)c, (void)d, (void)n, (void)t;
  *m = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_comm(void *c) { return (void)c, ncclInternalError; }
static ncclResult_t cs_net_dereg(void *c, void *m) { return (void)c, (void)m, ncclInternalError; }
static ncclResult_t cs_net_isend(void *c, void *d, size_t n, int tag, void *m, void *ph,
                                 void **req) {
  (void)c, (void)d, (void)n, (void)tag, (void)m, (void)ph;
  *req = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_irecv(void *c, int n, void **d, size_t *s, int *t, void **m, void **ph,
                                 void **req) {
  (void)c, (void)n, (void)d, (void)s, (void)t, (void)m, (void)ph;
  *req = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_iflush(void *c, int n, void **d, int *s, void **m, void **req) {
  (void)c, (void)n, (void)d, (void)s, (void)m;
  *req = NULL;
  return ncclInternalError;
}
static ncclResult_t cs_net_test(void *req, int *done, int *sizes) {
  (void)req, (void)sizes;
  *done = 0;
  return ncclInternalError;
}

__attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    "collshm", cs_net_init, cs_net_devices, cs_props, cs_net_listen, cs_net_connect,
    cs_net_accept, cs_net_reg, NULL, cs_net_dereg, cs_net_isend, cs_net_irecv, cs_net_iflush,
    cs_net_test, cs_net_comm, cs_net_comm, cs_net_comm, NULL, NULL, NULL, cs_finalize, NULL};

__attribute__((visibility("default"))) const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    "collshm", cs_init, cs_devices, cs_props, cs_listen, cs_connect, cs_reduce_support,
    cs_reg_mr, NULL, cs_dereg_mr, cs_iallreduce, NULL, NULL, cs_iflush, cs_test, cs_close_coll,
    cs_close_listen, NULL, cs_finalize};

/* ---- older versions: the same plugin behind the v8 and v10 signatures ---------------------- */

static ncclResult_t cs_init_old(ncclDebugLogger_t log) {
  cs_log = log;
  cs_null_pct = cs_env_int("COLLSHM_NULL_PERCENT", 5);
  return ncclSuccess;
}

/* The members v8 and v10 props share with v11. */
#define CS_OLD_PROPS(p, q)                                                     \
  do {                                                                         \
    memset(p, 0, sizeof *p);                                                   \
    p->name = q.name, p->pciPath = q.pciPath, p->guid = q.guid;                \
    p->ptrSupport = q.ptrSupport, p->speed = q.speed, p->port = q.port;        \
    p->latency = q.latency, p->maxComms = q.maxComms, p->maxRecvs = q.maxRecvs; \
    p->netDeviceType = q.netDeviceType;                                        \
  } while (0)

static ncclResult_t cs_props_v8(int dev, ncclNetProperties_v8_t *p) {
  ncclNetProperties_v11_t q;
  if (dev != 0) return ncclInvalidArgument;
  cs_fill_props(dev, &q);
  CS_OLD_PROPS(p, q);
  return ncclSuccess;
}

static ncclResult_t cs_props_v10(int dev, ncclNetProperties_v10_t *p) {
  ncclNetProperties_v11_t q;
  if (dev != 0) return ncclInvalidArgument;
  cs_fill_props(dev, &q);
  CS_OLD_PROPS(p, q);
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = q.maxP2pBytes;
  p->maxCollBytes = q.maxCollBytes;
  return ncclSuccess;
}

static ncclResult_t cs_listen_old(int dev, void *handle, void **listen_comm) {
  return cs_listen(NULL, dev, handle, listen_comm);
}

static ncclResult_t cs_iallreduce_v8(void *comm, void *send, void *recv, int count,
                                     ncclDataType_t dt, ncclRedOp_t op, void *smh, void *rmh,
                                     void **request) {
  if (count < 0) return *request = NULL, ncclInvalidArgument;
  return cs_iallreduce(comm, send, recv, (size_t)count, dt, op, smh, rmh, request);
}

static ncclResult_t cs_net_listen_old(int dev, void *h, void **l) {
  return cs_net_listen(NULL, dev, h, l);
}
static ncclResult_t cs_net_connect_old(int dev, void *h, void **s, ncclNetDeviceHandle_v8_t **d) {
  return cs_net_connect(NULL, dev, h, s, d);
}
static ncclResult_t cs_net_isend_v8(void *c, void *d, int n, int tag, void *m, void **req) {
  return cs_net_isend(c, d, (size_t)n, tag, m, NULL, req);
}
static ncclResult_t cs_net_irecv_v8(void *c, int n, void **d, int *s, int *t, void **m,
                                    void **req) {
  (void)s;
  return cs_net_irecv(c, n, d, NULL, t, m, NULL, req);
}

__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    "collshm", cs_init_old, cs_net_devices, cs_props_v8, cs_net_listen_old, cs_net_connect_old,
    cs_net_accept, cs_net_reg, NULL, cs_net_dereg, cs_net_isend_v8, cs_net_irecv_v8,
    cs_net_iflush, cs_net_test, cs_net_comm, cs_net_comm, cs_net_comm, NULL, NULL};

__attribute__((visibility("default"))) const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    "collshm", cs_init_old, cs_devices, cs_props_v8, cs_listen_old, cs_connect,
    cs_reduce_support, cs_reg_mr, NULL, cs_dereg_mr, cs_iallreduce_v8, NULL, NULL, cs_iflush,
    cs_test, cs_close_coll, cs_close_listen};

__attribute__((visibility("default"))) const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
    "collshm", cs_init_old, cs_devices, cs_props_v10, cs_listen_old, cs_connect,
    cs_reduce_support, cs_reg_mr, NULL, cs_dereg_mr, cs_iallreduce, NULL, NULL, cs_iflush,
    cs_test, cs_close_coll, cs_close_listen, NULL};
