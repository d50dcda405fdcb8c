/* libfabric rails (see ofi.h). */
#include "transport/ofi/ofi.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "clock.h"
#include "log.h"
#include "nccl_plugin/common.h"
#include "nccl_plugin/net.h"
#include "param.h"

#define OFI_API FI_VERSION(1, 14)
#define HDR_SLOTS 64   /* posted header buffers per endpoint */
#define OPS 256        /* payload operations in flight per endpoint */
#define MR_SLOTS 64    /* registration cache entries per endpoint */
#define MAX_DOMAINS 16

/* ---- libfabric, loaded at run time (only these are real symbols; the rest are inline calls
 * through the objects' ops tables) ---- */

static struct {
  int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                 struct fi_info **);
  void (*freeinfo)(struct fi_info *);
  struct fi_info *(*dupinfo)(const struct fi_info *);
  int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
  const char *(*strerror)(int);
} fi;

/* The process's provider: the fi_info list of its domains, opened on first use. */
static struct {
  pthread_mutex_t lock;
  int state; /* 0 not probed, 1 usable, -1 not */
  char why[256];
  char prov[96];
  int hw;
  bool manual; /* the provider offered no automatic data progress (see make_hints) */
  bool rxm;    /* an ofi_rxm provider (braid_ofi_rxm) */
  char desc[160]; /* prov, and what it lacks */
  int ndomains;
  struct fi_info *info[MAX_DOMAINS]; /* one per domain (duplicated entries) */
  struct fid_fabric *fabric[MAX_DOMAINS];
  struct fid_domain *domain[MAX_DOMAINS];
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *const hw_order[] = {"efa", "cxi", "verbs;ofi_rxm", "psm3", "opx", "psm2"};
static const char *const sw_order[] = {"tcp;ofi_rxm", "tcp", "sockets"};

static int rank_of(const char *prov, int *hw) {
  for (size_t i = 0; i < sizeof hw_order / sizeof *hw_order; i++)
    if (!strcmp(prov, hw_order[i])) return *hw = 1, (int)i;
  for (size_t i = 0; i < sizeof sw_order / sizeof *sw_order; i++)
    if (!strcmp(prov, sw_order[i])) return *hw = 0, 10 + (int)i;
  *hw = 0;
  return -1; /* shm (one node only), udp;ofi_rxd and unknown ones: not chosen unless FI_PROVIDER */
}

/* Hints for fi_getinfo.  auto_progress: data progress FI_PROGRESS_AUTO, i.e. the provider moves
 * data without being called, as the kernel does for sockets.  braid needs that: a receiver's last
 * acknowledgement of a transfer is sent right before NCCL's test() reports the receive done, and
 * NCCL may not call into that connection again for a long time; with manual progress the
 * acknowledgement can wait in the provider (seen with tcp;ofi_rxm: the sender then waits
 * forever for it).  Providers that only offer manual progress are used without it. */
static struct fi_info *make_hints(bool auto_progress) {
  struct fi_info *h = fi.dupinfo(NULL);
  if (!h) return NULL;
  if (auto_progress) h->domain_attr->data_progress = FI_PROGRESS_AUTO;
  h->caps = FI_MSG | FI_TAGGED;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                            FI_MR_ENDPOINT;
  h->domain_attr->threading = FI_THREAD_SAFE;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  return h;
}

static int probe_locked(void) {
  void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!lib) {
    snprintf(g.why, sizeof g.why, "libfabric.so.1 not found (%s): apt-get install libfabric1", dlerror());
    return -1;
  }
  fi.getinfo = (int (*)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                        struct fi_info **))dlsym(lib, "fi_getinfo");
  fi.freeinfo = (void (*)(struct fi_info *))dlsym(lib, "fi_freeinfo");
  fi.dupinfo = (struct fi_info * (*)(const struct fi_info *)) dlsym(lib, "fi_dupinfo");
  fi.fabric = (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))dlsym(lib, "fi_fabric");
  fi.strerror = (const char *(*)(int))dlsym(lib, "fi_strerror");
  if (!fi.getinfo || !fi.freeinfo || !fi.dupinfo || !fi.fabric || !fi.strerror) {
    snprintf(g.why, sizeof g.why, "libfabric.so.1 lacks fi_getinfo and friends");
    return -1;
  }
  /* Host memory only (braid_ofi_hmem says why), so FI_HMEM is not asked for: a provider
   * granting it may require every buffer registered (FI_MR_HMEM). */
  struct fi_info *list = NULL;
  int rc = -FI_ENOMEM;
  for (int pass = 0; pass < 2 && !list; pass++) {
    struct fi_info *hints = make_hints(pass == 0);
    rc = hints ? fi.getinfo(OFI_API, NULL, NULL, 0, hints, &list) : -FI_ENOMEM;
    if (hints) fi.freeinfo(hints);
    if (rc) list = NULL;
    g.manual = pass == 1;
  }
  if (!list) {
    const char *p = getenv("FI_PROVIDER");
    snprintf(g.why, sizeof g.why, "no libfabric provider offers reliable datagram endpoints with "
             "tagged messages%s%s (fi_getinfo: %s)", p ? " for FI_PROVIDER=" : "", p ? p : "",
             fi.strerror(-rc));
    return -1;
  }
  /* The best provider: FI_PROVIDER's (libfabric already filtered), else by rank. */
  const char *forced = getenv("FI_PROVIDER");
  int best = 1 << 30, hw = 0;
  const char *choice = NULL;
  for (struct fi_info *i = list; i; i = i->next) {
    int h, r = rank_of(i->fabric_attr->prov_name, &h);
    if (forced && forced[0]) r = r < 0 ? 100 : r; /* the user's pick, whatever it is */
    if (r >= 0 && r < best) best = r, hw = h, choice = i->fabric_attr->prov_name;
  }
  if (!choice) {
    snprintf(g.why, sizeof g.why, "only providers braid does not use were found (first: %s); "
             "set FI_PROVIDER to force one", list->fabric_attr->prov_name);
    fi.freeinfo(list);
    return -1;
  }
  snprintf(g.prov, sizeof g.prov, "%s", choice);
  g.rxm = strstr(g.prov, "ofi_rxm") != NULL;
  snprintf(g.desc, sizeof g.desc, "%s%s", choice,
           g.manual ? " (manual progress only: a connection NCCL stops driving may wait)" : "");
  for (struct fi_info *i = list; i && g.ndomains < MAX_DOMAINS; i = i->next) {
    if (strcmp(i->fabric_attr->prov_name, g.prov)) continue;
    int dup = 0;
    for (int k = 0; k < g.ndomains; k++)
      dup |= !strcmp(g.info[k]->domain_attr->name, i->domain_attr->name);
    if (dup) continue;
    struct fi_info *one = fi.dupinfo(i);
    if (!one) break;
    g.info[g.ndomains++] = one;
  }
  fi.freeinfo(list);
  g.hw = hw;
  return g.ndomains ? 1 : -1;
}

int braid_ofi_probe(int *hw, char *why, size_t whylen) {
  pthread_mutex_lock(&g.lock);
  if (g.state == 0) g.state = probe_locked();
  int ok = g.state > 0;
  if (hw) *hw = g.hw;
  if (!ok && why) snprintf(why, whylen, "%s", g.why);
  pthread_mutex_unlock(&g.lock);
  return ok;
}

/* At unload (NCCL dlcloses the plugin): the domains, fabrics and provider descriptions go back to
 * libfabric, which stays loaded.  A domain still holding an endpoint left open on purpose (see
 * braid_ofi_ep_close) refuses, and is left. */
__attribute__((destructor)) static void ofi_unload(void) {
  if (g.state <= 0) return;
  for (int d = 0; d < g.ndomains; d++) {
    if (g.domain[d] && fi_close(&g.domain[d]->fid) == 0) g.domain[d] = NULL;
    if (!g.domain[d] && g.fabric[d] && fi_close(&g.fabric[d]->fid) == 0) g.fabric[d] = NULL;
    if (!g.domain[d] && !g.fabric[d]) fi.freeinfo(g.info[d]), g.info[d] = NULL;
  }
}

const char *braid_ofi_provider(void) { return g.state > 0 ? g.desc : ""; }

/* Keys for providers that take the application's (without FI_MR_PROV_KEY): unique per process. */
static uint64_t mr_key(void) {
  static _Atomic uint64_t next = 1;
  return atomic_fetch_add(&next, 1);
}

/* GPU memory on the chosen provider (see ofi.h).  Two real probes, no guess from the provider's
 * name: fi_getinfo for the provider with FI_HMEM (and FI_MR_HMEM), then a registration of a host
 * page through the CUDA interface (fi_mr_regattr, iface FI_HMEM_CUDA) on a domain of its own:
 * libfabric refuses with -FI_ENOSYS before looking at the memory when its CUDA interface is not
 * initialized (built without CUDA, as Debian's is, or no CUDA driver loaded). */
static void hmem_probe_locked(const char *prov, char *why, size_t whylen) {
  struct fi_info *list = NULL;
  int rc = -FI_ENOMEM;
  for (int pass = 0; pass < 2 && !list; pass++) { /* automatic progress first, as probe_locked */
    struct fi_info *hints = make_hints(pass == 0);
    if (!hints) break;
    hints->caps |= FI_HMEM;
    hints->domain_attr->mr_mode |= FI_MR_HMEM;
    free(hints->fabric_attr->prov_name);
    hints->fabric_attr->prov_name = strdup(prov);
    rc = hints->fabric_attr->prov_name ? fi.getinfo(OFI_API, NULL, NULL, 0, hints, &list) : -FI_ENOMEM;
    fi.freeinfo(hints);
    if (rc) list = NULL;
  }
  if (!list) {
    snprintf(why, whylen, "provider %s does not offer FI_HMEM (fi_getinfo: %s)", prov, fi.strerror(-rc));
    return;
  }
  struct fid_fabric *fab = NULL;
  struct fid_domain *dom = NULL;
  struct fid_mr *mr = NULL;
  static char page[64];
  rc = fi.fabric(list->fabric_attr, &fab, NULL);
  if (!rc) rc = fi_domain(fab, list, &dom, NULL);
  if (rc) {
    snprintf(why, whylen, "provider %s offers FI_HMEM, but its domain does not open (%s)", prov, fi.strerror(-rc));
  } else {
    struct iovec iov = {.iov_base = page, .iov_len = sizeof page};
    struct fi_mr_attr a = {.mr_iov = &iov, .iov_count = 1, .access = FI_SEND | FI_RECV,
                           .requested_key = mr_key(), .iface = FI_HMEM_CUDA};
    rc = fi_mr_regattr(dom, &a, 0, &mr);
    if (rc == -FI_ENOSYS)
      snprintf(why, whylen, "libfabric's CUDA interface is not available (registering through "
               "FI_HMEM_CUDA: %s; libfabric built without CUDA, or no CUDA driver)", fi.strerror(FI_ENOSYS));
    else
      snprintf(why, whylen, "provider %s offers FI_HMEM with CUDA, but braid's ofi rails stage "
               "payloads through host buffers (rxm bounce buffers, frame headers), so GPU memory "
               "is not carried", prov);
  }
  if (mr) fi_close(&mr->fid);
  if (dom) fi_close(&dom->fid);
  if (fab) fi_close(&fab->fid);
  fi.freeinfo(list);
}

int braid_ofi_hmem_of(const char *prov, char *why, size_t whylen) {
  pthread_mutex_lock(&g.lock);
  if (g.state <= 0) snprintf(why, whylen, "libfabric is not in use");
  else hmem_probe_locked(prov, why, whylen);
  pthread_mutex_unlock(&g.lock);
  return NCCL_PTR_HOST;
}

int braid_ofi_hmem(char *why, size_t whylen) {
  static char reason[320];
  static int done;
  pthread_mutex_lock(&g.lock);
  if (!done) {
    if (g.state <= 0) snprintf(reason, sizeof reason, "libfabric is not in use");
    else hmem_probe_locked(g.prov, reason, sizeof reason);
    done = 1;
  }
  snprintf(why, whylen, "%s", reason);
  pthread_mutex_unlock(&g.lock);
  return NCCL_PTR_HOST;
}


/* The domain for a rail: named like its interface, else rail % ndomains; opened once. */
static int domain_for(const char *rail_name, int rail, char *err, size_t errlen) {
  int d = -1;
  for (int k = 0; k < g.ndomains && rail_name; k++)
    if (!strcmp(g.info[k]->domain_attr->name, rail_name)) d = k;
  if (d < 0) d = rail % g.ndomains;
  if (g.domain[d]) return d;
  int rc = fi.fabric(g.info[d]->fabric_attr, &g.fabric[d], NULL);
  if (rc == 0) {
    rc = fi_domain(g.fabric[d], g.info[d], &g.domain[d], NULL);
    if (rc) fi_close(&g.fabric[d]->fid), g.fabric[d] = NULL;
  }
  if (rc) {
    snprintf(err, errlen, "opening %s domain %s: %s", g.prov, g.info[d]->domain_attr->name, fi.strerror(-rc));
    return -1;
  }
  return d;
}


/* ---- endpoints ---- */

enum op_kind { OP_FREE = 0, OP_HDR_RECV, OP_SEND, OP_RECV };

struct op {
  struct fi_context2 fc; /* first: libfabric hands back its address */
  enum op_kind kind;
  bool app; /* a receive into the application's memory (braid_ofi_recv_payload) */
  void *ctx;
  size_t len;
  int mr; /* cache entry pinned by the op, -1 none */
};

struct mr_entry {
  uintptr_t base;
  size_t len;
  struct fid_mr *mr;
  int pinned; /* ops using it */
  bool stale; /* its memory was released: never hit again, closed once unpinned */
  uint64_t used;
};

static void mr_close(struct mr_entry *m) {
  if (m->mr) fi_close(&m->mr->fid);
  *m = (struct mr_entry){0};
}

struct braid_ofi_ep {
  pthread_mutex_t lock; /* the registration cache and op slots: forget may come from another thread */
  int d; /* domain index */
  struct fi_info *info;
  struct fid_ep *ep;
  struct fid_cq *cq;
  struct fid_av *av;
  fi_addr_t peer;
  bool connected;
  bool failed;
  char why[256];
  size_t inject_max;
  bool mr_local, mr_endpoint;
  bool force_mr;
  /* headers: posted receive slots, consumed in arrival order */
  uint8_t hdr_buf[HDR_SLOTS][BRAID_OFI_HDR_BYTES];
  struct op hdr_op[HDR_SLOTS];
  int hdr_ready[HDR_SLOTS]; /* slot indices in arrival order */
  int hdr_head, hdr_count;
  struct fid_mr *hdr_mr;
  void *hdr_desc;
  /* payload operations */
  struct op ops[OPS];
  int nops;
  /* registration cache */
  struct mr_entry mrc[MR_SLOTS];
  uint64_t mr_clock, mr_regs, mr_hits;
};

static void ep_fail(struct braid_ofi_ep *e, const char *what, int rc) {
  if (!e->failed) snprintf(e->why, sizeof e->why, "%.180s: %.60s", what, fi.strerror(rc < 0 ? -rc : rc));
  e->failed = true;
}

const char *braid_ofi_error(const struct braid_ofi_ep *e) { return e->why; }

static int post_hdr_recv(struct braid_ofi_ep *e, int slot) {
  struct op *o = &e->hdr_op[slot];
  o->kind = OP_HDR_RECV;
  o->mr = -1;
  ssize_t rc = -FI_EAGAIN;
  for (int tries = 0; tries < 100000 && rc == -FI_EAGAIN; tries++) {
    rc = fi_recv(e->ep, e->hdr_buf[slot], BRAID_OFI_HDR_BYTES, e->hdr_desc, FI_ADDR_UNSPEC, o);
    if (rc == -FI_EAGAIN) (void)fi_cq_read(e->cq, NULL, 0); /* drive progress, then retry */
  }
  if (rc) return ep_fail(e, "posting a header receive", (int)rc), -1;
  return 0;
}

struct braid_ofi_ep *braid_ofi_ep_open(const char *rail_name, int rail, char *err, size_t errlen) {
  if (!braid_ofi_probe(NULL, err, errlen)) return NULL;
  pthread_mutex_lock(&g.lock);
  int d = domain_for(rail_name, rail, err, errlen);
  pthread_mutex_unlock(&g.lock);
  if (d < 0) return NULL;
  struct braid_ofi_ep *e = calloc(1, sizeof *e);
  if (!e) return snprintf(err, errlen, "out of memory"), NULL;
  pthread_mutex_init(&e->lock, NULL);
  e->d = d;
  e->info = g.info[d];
  e->mr_local = (e->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
  e->mr_endpoint = (e->info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
  e->inject_max = e->info->tx_attr->inject_size;
  struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE,
                           .size = OPS + HDR_SLOTS + 64};
  struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 4};
  const char *step = "endpoint";
  int rc = fi_endpoint(g.domain[d], e->info, &e->ep, NULL);
  if (!rc) step = "completion queue", rc = fi_cq_open(g.domain[d], &cqa, &e->cq, NULL);
  if (!rc) step = "address vector", rc = fi_av_open(g.domain[d], &ava, &e->av, NULL);
  if (!rc) step = "binding the completion queue", rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
  if (!rc) step = "binding the address vector", rc = fi_ep_bind(e->ep, &e->av->fid, 0);
  if (!rc) step = "enabling the endpoint", rc = fi_enable(e->ep);
  if (!rc && (e->mr_local || e->mr_endpoint)) {
    step = "registering header buffers";
    rc = fi_mr_reg(g.domain[d], e->hdr_buf, sizeof e->hdr_buf, FI_SEND | FI_RECV, 0, mr_key(), 0, &e->hdr_mr, NULL);
    if (!rc && e->mr_endpoint) rc = fi_mr_bind(e->hdr_mr, &e->ep->fid, 0);
    if (!rc && e->mr_endpoint) rc = fi_mr_enable(e->hdr_mr);
    if (!rc) e->hdr_desc = fi_mr_desc(e->hdr_mr);
  }
  if (rc) {
    snprintf(err, errlen, "%s %s on %s: %s", g.prov, step, e->info->domain_attr->name, fi.strerror(-rc));
    braid_ofi_ep_close(e);
    return NULL;
  }
  for (int i = 0; i < HDR_SLOTS; i++)
    if (post_hdr_recv(e, i)) {
      snprintf(err, errlen, "%s", e->why);
      braid_ofi_ep_close(e);
      return NULL;
    }
  return e;
}

size_t braid_ofi_ep_name(const struct braid_ofi_ep *e, uint8_t *out, size_t cap) {
  size_t len = cap;
  if (fi_getname((fid_t)&e->ep->fid, out, &len) != 0 || len > cap) return 0;
  return len;
}

int braid_ofi_ep_connect(struct braid_ofi_ep *e, const uint8_t *name, size_t len, char *err,
                         size_t errlen) {
  size_t want = e->info->src_addrlen;
  if (!len || (want && len != want)) {
    snprintf(err, errlen, "the peer's %s address has %zu bytes, not %zu", g.prov, len, want);
    return -1;
  }
  int n = fi_av_insert(e->av, name, 1, &e->peer, 0, NULL);
  if (n != 1) {
    snprintf(err, errlen, "the peer's %s address does not insert (%s)", g.prov,
             n < 0 ? fi.strerror(-n) : "rejected");
    return -1;
  }
  e->connected = true;
  return 0;
}

static ssize_t ofi_cancel(fid_t fid, void *ctx) { return fi_cancel(fid, ctx); }
ssize_t (*braid_ofi_cancel_hook)(fid_t fid, void *ctx) = ofi_cancel;

static int ep_app_recvs(const struct braid_ofi_ep *e) {
  int n = 0;
  for (int i = 0; i < OPS; i++) n += e->ops[i].kind == OP_RECV && e->ops[i].app;
  return n;
}

/* Reaps e's completions (the cancellations') until none is under way, or none into the
 * application's memory when app_only, or ms have passed. */
static void ep_drain(struct braid_ofi_ep *e, long ms, bool app_only) {
  uint64_t t0 = braid_now_ns();
  do {
    struct braid_ofi_done d[8];
    e->failed = false; /* errors here are the cancellations */
    (void)braid_ofi_progress(e, d, 8);
  } while ((app_only ? ep_app_recvs(e) : e->nops) && (braid_now_ns() - t0) / 1000000 < (uint64_t)ms);
}

bool braid_ofi_ep_close(struct braid_ofi_ep *e) {
  if (!e) return true;
  /* Never close an endpoint with operations under way (closing one with a receive in progress
   * crashes libfabric 1.17's rxm): cancel them and drive the endpoint for up to 200 ms.  What is
   * still stuck then (a transfer on a path that died) keeps the endpoint, and braid's memory it
   * may write, alive for good, except a receive into the application's memory, which NCCL frees
   * once this returns: that one is waited for up to BRAID_TIMEOUT_MS, and if the provider still
   * holds it the process stops with a clear error rather than let it write into freed memory. */
  if (e->nops) {
    for (int i = 0; i < OPS; i++)
      if (e->ops[i].kind != OP_FREE) (void)braid_ofi_cancel_hook(&e->ep->fid, &e->ops[i]);
    ep_drain(e, 200, false);
    if (ep_app_recvs(e)) {
      long ms = (long)braid_param_int(BRAID_P_TIMEOUT_MS);
      BRAID_WARN("a %s endpoint still has %d receives into NCCL's buffers under way 200 ms after "
                 "cancelling them: waiting up to %ld ms more (BRAID_TIMEOUT_MS)", g.prov,
                 ep_app_recvs(e), ms);
      ep_drain(e, ms, true);
      if (ep_app_recvs(e)) {
        BRAID_WARN("the %s provider did not give back %d receives into NCCL's buffers within %ld "
                   "ms of cancelling them; stopping the process rather than let it write into "
                   "memory NCCL frees after this close", g.prov, ep_app_recvs(e), ms);
        fprintf(stderr, "NET/braid: libfabric receives into freed memory could not be cancelled: "
                        "aborting\n");
        abort();
      }
    }
    if (e->nops) {
      BRAID_WARN("a %s endpoint still has %d operations under way after 200 ms: left open (its "
                 "memory is kept) rather than closed under them", g.prov, e->nops);
      return false;
    }
  }
  /* The endpoint first: its posted operations are gone with it, then what they used.  A
   * provider that refuses (registrations still bound to it) gets them closed first; one that
   * still refuses keeps its objects (leaked, with a WARN): freeing memory it may write to would
   * be worse. */
  int rc = e->ep ? fi_close(&e->ep->fid) : 0;
  if (rc == -FI_EBUSY) {
    for (int i = 0; i < MR_SLOTS; i++) mr_close(&e->mrc[i]);
    if (e->hdr_mr) fi_close(&e->hdr_mr->fid), e->hdr_mr = NULL;
    rc = fi_close(&e->ep->fid);
  }
  if (rc) {
    BRAID_WARN("closing a %s endpoint failed (%s): its memory is kept, not freed", g.prov,
               fi.strerror(-rc));
    return false;
  }
  if (e->av) fi_close(&e->av->fid);
  if (e->cq) fi_close(&e->cq->fid);
  for (int i = 0; i < MR_SLOTS; i++) mr_close(&e->mrc[i]);
  if (e->hdr_mr) fi_close(&e->hdr_mr->fid);
  pthread_mutex_destroy(&e->lock);
  free(e);
  return true;
}

bool braid_ofi_rxm(void) { return g.rxm; }

void braid_ofi_ep_force_registration(struct braid_ofi_ep *e) { e->force_mr = true; }

void braid_ofi_ep_mr_counts(const struct braid_ofi_ep *e, uint64_t *regs, uint64_t *hits) {
  *regs = e->mr_regs;
  *hits = e->mr_hits;
}

/* The descriptor for [buf, buf+len): NULL when the provider needs none; a cached or new
 * registration (pinned for the op) otherwise.  -EAGAIN when the cache is full of pinned entries. */
static int mr_get(struct braid_ofi_ep *e, const void *buf, size_t len, void **desc, int *slot) {
  *desc = NULL;
  *slot = -1;
  if (!(e->mr_local || e->force_mr) || !len) return 0;
  uintptr_t a = (uintptr_t)buf;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = a & ~(page - 1), hi = (a + len + page - 1) & ~(page - 1);
  int victim = -1;
  for (int i = 0; i < MR_SLOTS; i++) {
    struct mr_entry *m = &e->mrc[i];
    if (m->mr && !m->stale && m->base <= a && a + len <= m->base + m->len) {
      m->pinned++, m->used = ++e->mr_clock, e->mr_hits++;
      *desc = fi_mr_desc(m->mr), *slot = i;
      return 0;
    }
    if (!m->mr) {
      if (victim < 0 || e->mrc[victim].mr) victim = i;
    } else if (!m->pinned && (victim < 0 || (e->mrc[victim].mr && (m->stale || m->used < e->mrc[victim].used)))) {
      victim = i;
    }
  }
  if (victim < 0) return -EAGAIN;
  struct mr_entry *m = &e->mrc[victim];
  mr_close(m);
  struct fid_mr *mr = NULL;
  int rc = fi_mr_reg(g.domain[e->d], (void *)lo, hi - lo, FI_SEND | FI_RECV, 0, mr_key(), 0, &mr, NULL);
  if (!rc && e->mr_endpoint) rc = fi_mr_bind(mr, &e->ep->fid, 0);
  if (!rc && e->mr_endpoint) rc = fi_mr_enable(mr);
  if (rc) {
    if (mr) fi_close(&mr->fid);
    ep_fail(e, "registering memory", rc);
    return -EIO;
  }
  *m = (struct mr_entry){.base = lo, .len = hi - lo, .mr = mr, .pinned = 1, .used = ++e->mr_clock};
  e->mr_regs++;
  *desc = fi_mr_desc(mr), *slot = victim;
  return 0;
}

static struct op *op_get(struct braid_ofi_ep *e) {
  if (e->nops == OPS) return NULL;
  for (int i = 0; i < OPS; i++)
    if (e->ops[i].kind == OP_FREE) return &e->ops[i];
  return NULL;
}


void braid_ofi_ep_forget(struct braid_ofi_ep *e, const void *addr, size_t len) {
  uintptr_t a = (uintptr_t)addr;
  pthread_mutex_lock(&e->lock);
  for (int i = 0; i < MR_SLOTS; i++) {
    struct mr_entry *m = &e->mrc[i];
    if (!m->mr || a + len <= m->base || m->base + m->len <= a) continue;
    if (m->pinned) m->stale = true;
    else mr_close(m);
  }
  pthread_mutex_unlock(&e->lock);
}

static void op_put(struct braid_ofi_ep *e, struct op *o) {
  if (o->mr >= 0 && --e->mrc[o->mr].pinned == 0 && e->mrc[o->mr].stale) mr_close(&e->mrc[o->mr]);
  o->kind = OP_FREE;
  e->nops--;
}

int braid_ofi_send_hdr(struct braid_ofi_ep *e, const uint8_t hdr[BRAID_OFI_HDR_BYTES]) {
  if (e->failed || !e->connected) return -EIO;
  if (BRAID_OFI_HDR_BYTES > e->inject_max) {
    snprintf(e->why, sizeof e->why, "the provider injects at most %zu bytes", e->inject_max);
    e->failed = true;
    return -EIO;
  }
  /* A header is tiny and often the last thing a call sends (an acknowledgement the peer waits
   * for, after which nobody may drive this endpoint for a while): on "not now", drive the
   * endpoint's progress (without reaping completions) and retry, for up to a millisecond. */
  ssize_t rc = fi_inject(e->ep, hdr, BRAID_OFI_HDR_BYTES, e->peer);
  for (int tries = 0; rc == -FI_EAGAIN && tries < 1000; tries++) {
    (void)fi_cq_read(e->cq, NULL, 0);
    rc = fi_inject(e->ep, hdr, BRAID_OFI_HDR_BYTES, e->peer);
  }
  if (rc == 0) return 0;
  if (rc == -FI_EAGAIN) return -EAGAIN;
  ep_fail(e, "sending a frame header", (int)rc);
  return -EIO;
}

static int post_payload(struct braid_ofi_ep *e, bool send, void *buf, size_t len, uint64_t tag,
                        void *ctx, bool app) {
  if (e->failed || !e->connected) return -EIO;
  pthread_mutex_lock(&e->lock);
  struct op *o = op_get(e);
  void *desc = NULL;
  int slot = -1, rc = o ? mr_get(e, buf, len, &desc, &slot) : -EAGAIN;
  if (!rc) {
    *o = (struct op){.kind = send ? OP_SEND : OP_RECV, .app = app && !send, .ctx = ctx, .len = len, .mr = slot};
    e->nops++;
  }
  pthread_mutex_unlock(&e->lock);
  if (rc) return rc;
  ssize_t r = send ? fi_tsend(e->ep, buf, len, desc, e->peer, tag, o)
                   : fi_trecv(e->ep, buf, len, desc, e->peer, tag, 0, o);
  if (r == 0) return 0;
  pthread_mutex_lock(&e->lock);
  op_put(e, o);
  pthread_mutex_unlock(&e->lock);
  if (r == -FI_EAGAIN) return -EAGAIN;
  ep_fail(e, send ? "sending a payload" : "posting a payload receive", (int)r);
  return -EIO;
}

int braid_ofi_send_payload(struct braid_ofi_ep *e, const void *buf, size_t len, uint64_t tag,
                           void *ctx) {
  return post_payload(e, true, (void *)buf, len, tag, ctx, false);
}

int braid_ofi_recv_payload(struct braid_ofi_ep *e, void *buf, size_t len, uint64_t tag, void *ctx,
                           bool app) {
  return post_payload(e, false, buf, len, tag, ctx, app);
}

void braid_ofi_cancel(struct braid_ofi_ep *e, void *ctx) {
  for (int i = 0; i < OPS; i++)
    if (e->ops[i].kind == OP_RECV && e->ops[i].ctx == ctx) (void)fi_cancel(&e->ep->fid, &e->ops[i]);
}

int braid_ofi_outstanding(const struct braid_ofi_ep *e) { return e->nops; }

static int hdr_slot_of(struct braid_ofi_ep *e, struct op *o) {
  long i = o - e->hdr_op;
  return i >= 0 && i < HDR_SLOTS ? (int)i : -1;
}

/* One completion (or error) for op o. */
static int complete(struct braid_ofi_ep *e, struct op *o, size_t len, enum braid_ofi_status st,
                    struct braid_ofi_done *out, int *n) {
  int slot = hdr_slot_of(e, o);
  if (slot >= 0) {
    if (st != BRAID_OFI_OK || len != BRAID_OFI_HDR_BYTES) {
      if (!e->failed) snprintf(e->why, sizeof e->why, "a frame header of %zu bytes, not %d", len, BRAID_OFI_HDR_BYTES);
      e->failed = true;
      return -1;
    }
    e->hdr_ready[(e->hdr_head + e->hdr_count++) % HDR_SLOTS] = slot;
    return 0;
  }
  if (o < e->ops || o >= e->ops + OPS || o->kind == OP_FREE) {
    if (!e->failed) snprintf(e->why, sizeof e->why, "a completion braid did not post");
    e->failed = true;
    return -1;
  }
  out[(*n)++] = (struct braid_ofi_done){.ctx = o->ctx, .len = o->kind == OP_RECV ? len : o->len, .status = st};
  pthread_mutex_lock(&e->lock);
  op_put(e, o);
  pthread_mutex_unlock(&e->lock);
  return 0;
}

int braid_ofi_progress(struct braid_ofi_ep *e, struct braid_ofi_done *out, int max) {
  int n = 0;
  while (n < max && !e->failed) {
    struct fi_cq_tagged_entry ent[8];
    size_t want = (size_t)(max - n) < 8 ? (size_t)(max - n) : 8;
    ssize_t got = fi_cq_read(e->cq, ent, want);
    if (got == -FI_EAGAIN) break;
    if (got == -FI_EAVAIL) {
      struct fi_cq_err_entry ee;
      memset(&ee, 0, sizeof ee);
      if (fi_cq_readerr(e->cq, &ee, 0) != 1) {
        ep_fail(e, "reading a completion error", FI_EIO);
        break;
      }
      struct op *o = ee.op_context;
      bool ours = o && o >= e->ops && o < e->ops + OPS && o->kind != OP_FREE;
      if (ours && ee.err == FI_ECANCELED) {
        complete(e, o, 0, BRAID_OFI_CANCELED, out, &n);
      } else if (ours && ee.err == FI_ETRUNC && o->kind == OP_RECV) {
        complete(e, o, o->len, BRAID_OFI_TRUNCATED, out, &n);
      } else {
        char prov[160] = "";
        if (ee.prov_errno) fi_cq_strerror(e->cq, ee.prov_errno, ee.err_data, prov, sizeof prov);
        char what[256];
        snprintf(what, sizeof what, "%.40s %s failed%s%.150s", g.prov,
                 !ours ? "an operation" : o->kind == OP_SEND ? "a payload send" : "a payload receive",
                 prov[0] ? ": " : "", prov);
        ep_fail(e, what, ee.err);
        if (ours) complete(e, o, 0, BRAID_OFI_FAILED, out, &n);
      }
      continue;
    }
    if (got < 0) {
      ep_fail(e, "reading the completion queue", (int)got);
      break;
    }
    for (ssize_t i = 0; i < got; i++)
      if (complete(e, ent[i].op_context, ent[i].len, BRAID_OFI_OK, out, &n)) break;
  }
  return e->failed ? -1 : n;
}

const uint8_t *braid_ofi_hdr_peek(struct braid_ofi_ep *e) {
  return e->hdr_count ? e->hdr_buf[e->hdr_ready[e->hdr_head]] : NULL;
}

void braid_ofi_hdr_consume(struct braid_ofi_ep *e) {
  if (!e->hdr_count) return;
  int slot = e->hdr_ready[e->hdr_head];
  e->hdr_head = (e->hdr_head + 1) % HDR_SLOTS;
  e->hdr_count--;
  post_hdr_recv(e, slot);
}
