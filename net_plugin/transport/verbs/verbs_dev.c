/* RDMA devices and rails for a verbs transport (see verbs_dev.h). */
#include "transport/verbs/verbs_dev.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "log.h"
#include "param.h"

/* ---- BRAID_IB_HCA ---- */

static int hca_fail(char *why, size_t whylen, const char *a, size_t len, const char *what) {
  snprintf(why, whylen, "entry \"%.*s\" %s", (int)len, a, what);
  return -1;
}

/* One entry, [a, a+len) with no surrounding spaces. */
static int hca_entry(const char *a, size_t len, struct braid_hca_entry *e, char *why, size_t whylen) {
  const char *colon = memchr(a, ':', len);
  size_t nlen = colon ? (size_t)(colon - a) : len;
  while (nlen > 0 && isspace((unsigned char)a[nlen - 1])) nlen--;
  if (nlen == 0) return hca_fail(why, whylen, a, len, "has no device name");
  if (nlen >= sizeof e->name) return hca_fail(why, whylen, a, len, "has a device name over 63 characters");
  for (size_t i = 0; i < nlen; i++) {
    unsigned char c = (unsigned char)a[i];
    if (c == '^' || c == '=')
      return hca_fail(why, whylen, a, len, "has '^' or '=' inside it (they may only start the whole list)");
    if (!isgraph(c)) return hca_fail(why, whylen, a, len, "has a space or control character in its device name");
  }
  memcpy(e->name, a, nlen);
  e->name[nlen] = 0;
  e->port = 0;
  if (!colon) return 0;
  const char *p = colon + 1, *end = a + len;
  while (p < end && isspace((unsigned char)*p)) p++;
  if (p == end) return hca_fail(why, whylen, a, len, "has no port after ':'");
  int port = 0;
  for (; p < end; p++) {
    if (!isdigit((unsigned char)*p) || (port = port * 10 + (*p - '0')) > 255)
      return hca_fail(why, whylen, a, len, "has a port that is not a number from 1 to 255");
  }
  if (port < 1) return hca_fail(why, whylen, a, len, "has port 0 (ports count from 1)");
  e->port = port;
  return 0;
}

int braid_hca_parse(const char *text, struct braid_hca_spec *s, char *why, size_t whylen) {
  memset(s, 0, sizeof *s);
  if (!text) return 0;
  const char *p = text;
  while (isspace((unsigned char)*p)) p++;
  if (*p == '^') s->exclude = true, p++;
  if (*p == '=') s->exact = true, p++;
  for (;;) {
    const char *comma = strchr(p, ',');
    const char *a = p, *b = comma ? comma : p + strlen(p);
    while (a < b && isspace((unsigned char)*a)) a++;
    while (b > a && isspace((unsigned char)b[-1])) b--;
    if (a < b) { /* empty entries (",,", a trailing ',') are skipped, as NCCL does */
      if (s->n == BRAID_HCA_MAX) {
        snprintf(why, whylen, "more than %d entries", BRAID_HCA_MAX);
        return -1;
      }
      if (hca_entry(a, (size_t)(b - a), &s->entry[s->n], why, whylen)) return -1;
      s->n++;
    }
    if (!comma) break;
    p = comma + 1;
  }
  if (s->n == 0 && (s->exclude || s->exact)) {
    snprintf(why, whylen, "no device names after '%s'", s->exclude ? (s->exact ? "^=" : "^") : "=");
    return -1;
  }
  return 0;
}

int braid_hca_find(const struct braid_hca_spec *s, const char *dev, int port) {
  for (int i = 0; i < s->n; i++) {
    const struct braid_hca_entry *e = &s->entry[i];
    bool name = s->exact ? !strcmp(dev, e->name) : !strncmp(dev, e->name, strlen(e->name));
    if (name && (e->port == 0 || e->port == port)) return i;
  }
  return -1;
}

bool braid_hca_match(const struct braid_hca_spec *s, const char *dev, int port) {
  if (s->n == 0) return true;
  return (braid_hca_find(s, dev, port) >= 0) != s->exclude;
}

/* ---- port properties ---- */

static int lowest_bit(int v) {
  for (int i = 0; i < 31; i++)
    if (v & (1 << i)) return i;
  return -1;
}

int braid_verbs_speed_mbps(int active_width, int active_speed) {
  /* active_width bits: 1x, 4x, 8x, 12x, 2x.  active_speed bits: SDR, DDR, QDR, FDR10, FDR, EDR,
   * HDR, NDR, XDR (per lane, Mbit/s, NCCL's figures). */
  static const int lanes[] = {1, 4, 8, 12, 2};
  static const int lane_mbps[] = {2500, 5000, 10000, 10000, 14000, 25000, 50000, 100000, 200000};
  int w = lowest_bit(active_width), s = lowest_bit(active_speed);
  if (w < 0 || w >= (int)(sizeof lanes / sizeof *lanes)) return 0;
  if (s < 0 || s >= (int)(sizeof lane_mbps / sizeof *lane_mbps)) return 0;
  return lanes[w] * lane_mbps[s];
}

int braid_verbs_gid_rank(const uint8_t gid[16], int roce_version) {
  static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const uint8_t zero[16];
  if (roce_version != 2 || !memcmp(gid, zero, 16)) return 0;
  if (!memcmp(gid, v4_prefix, 12)) return 2;
  if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) return 0; /* fe80::/10, link-local */
  return 1;
}

void braid_verbs_gid_str(const uint8_t gid[16], char *out, size_t len) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(AF_INET6, gid, buf, sizeof buf)) buf[0] = 0;
  snprintf(out, len, "%s", buf);
}

const char *braid_verbs_link_name(enum braid_link link) {
  return link == BRAID_LINK_IB ? "InfiniBand" : link == BRAID_LINK_ETH ? "Ethernet" : "unknown";
}

int braid_verbs_rails(struct braid_verbs_rail *out, int max, char *why, size_t whylen) {
  if (braid_params_load() != ncclSuccess) {
    snprintf(why, whylen, "invalid BRAID_* configuration (see the WARN above)");
    return -1;
  }
  const char *var = braid_param_from(BRAID_P_IB_HCA); /* NULL: neither is set */
  return braid_verbs_discover(braid_param_str(BRAID_P_IB_HCA), var,
                              (int)braid_param_int(BRAID_P_IB_GID_INDEX), out, max, why, whylen);
}

/* ---- libibverbs, loaded at run time: only real exported symbols (post/poll calls are inline,
 * through the context's ops table) ---- */

static struct {
  int (*fork_init)(void);
  struct ibv_device **(*get_device_list)(int *);
  void (*free_device_list)(struct ibv_device **);
  const char *(*get_device_name)(struct ibv_device *);
  struct ibv_context *(*open_device)(struct ibv_device *);
  int (*close_device)(struct ibv_context *);
  int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
  /* The exported ibv_query_port takes the old, shorter attribute struct; verbs.h's macro of the
   * same name is an inline that prefers the context's extended op (see port_query). */
  int (*query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
  int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
} ibv;

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static int lib_state; /* 0 not tried, 1 loaded, -1 not usable */
static void *lib_handle; /* libibverbs.so.1 once loaded */
static char lib_why[256];

static void *(*test_resolver)(const char *name); /* braid_verbs_test_resolver's */
static unsigned lib_generation;

static void *lookup(void *lib, const char *name) {
  if (test_resolver) return test_resolver(name);
  void *p = dlvsym(lib, name, "IBVERBS_1.1"); /* the version NCCL binds too */
  return p ? p : dlsym(lib, name);
}

static void *sym(void *lib, const char *name, bool *missing) {
  void *p = lookup(lib, name);
  if (!p && !*missing) {
    *missing = true;
    snprintf(lib_why, sizeof lib_why, "libibverbs.so.1 lacks %s (rdma-core too old?)", name);
  }
  return p;
}

static int lib_load(void) {
  /* BRAID_IBVERBS_LIB (tests only): a library that wraps libibverbs, such as the soft-RoCE
   * guest's dma-buf shim (test/vm/dmabuf_shim.c); its dependencies answer what it lacks. */
  const char *name = braid_param_str(BRAID_P_IBVERBS_LIB);
  bool other = name[0] != 0;
  if (!other) name = "libibverbs.so.1";
  void *lib = test_resolver ? NULL : dlopen(name, RTLD_NOW);
  if (!lib && !test_resolver) {
    snprintf(lib_why, sizeof lib_why, "%s cannot be loaded (%s)%s", name, dlerror(),
             other ? " (BRAID_IBVERBS_LIB)" : ": apt-get install libibverbs1 ibverbs-providers");
    return -1;
  }
  if (other && lib) BRAID_WARN("libibverbs functions from %s (BRAID_IBVERBS_LIB, for tests only)", name);
  lib_handle = lib;
  bool missing = false;
#define LOAD(field, name) ibv.field = (__typeof__(ibv.field))sym(lib, name, &missing)
  LOAD(fork_init, "ibv_fork_init");
  LOAD(get_device_list, "ibv_get_device_list");
  LOAD(free_device_list, "ibv_free_device_list");
  LOAD(get_device_name, "ibv_get_device_name");
  LOAD(open_device, "ibv_open_device");
  LOAD(close_device, "ibv_close_device");
  LOAD(query_device, "ibv_query_device");
  LOAD(query_port, "ibv_query_port");
  LOAD(query_gid, "ibv_query_gid");
#undef LOAD
  if (missing) return -1; /* the library stays loaded: dlclose of libibverbs is never safe */
  /* Before any device is opened: memory registered later stays intact in forked children. */
  int rc = ibv.fork_init();
  if (rc) BRAID_INFO(NCCL_INIT | NCCL_NET, "ibv_fork_init failed (%s); a forked child must not touch registered memory",
                     strerror(rc < 0 ? -rc : rc));
  return 1;
}

static bool lib_ready(char *why, size_t whylen) {
  pthread_mutex_lock(&lib_lock);
  if (lib_state == 0) lib_state = lib_load();
  bool ok = lib_state > 0;
  if (!ok) snprintf(why, whylen, "%s", lib_why);
  pthread_mutex_unlock(&lib_lock);
  return ok;
}

static const char no_devices[] = "no RDMA devices (ibv_get_device_list found none: no RDMA NIC, "
                                 "its kernel driver not loaded, or ibverbs-providers missing)";

int braid_verbs_probe(char *why, size_t whylen) {
  if (!lib_ready(why, whylen)) return 0;
  int n = 0;
  struct ibv_device **list = ibv.get_device_list(&n);
  if (list) ibv.free_device_list(list);
  if (!list || n <= 0) {
    snprintf(why, whylen, "%s", no_devices);
    return 0;
  }
  BRAID_INFO(NCCL_INIT | NCCL_NET, "libibverbs: %d RDMA device(s)", n);
  return 1;
}

/* ibv_query_port as verbs.h's inline does it: the extended op with the full struct when the
 * provider has one, else the exported symbol (which fills the older prefix of the struct). */
int braid_verbs_port_query(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a) {
  memset(a, 0, sizeof *a);
  struct verbs_context *vctx = verbs_get_ctx_op(c, query_port);
  if (vctx) return vctx->query_port(c, port, a, sizeof *a);
  return ibv.query_port(c, port, (struct _compat_ibv_port_attr *)(void *)a);
}

void braid_verbs_test_resolver(void *(*resolve)(const char *name)) {
  pthread_mutex_lock(&lib_lock);
  test_resolver = resolve;
  lib_state = 0; /* loaded again, from the resolver or libibverbs, at the next use */
  lib_generation++;
  pthread_mutex_unlock(&lib_lock);
}

unsigned braid_verbs_generation(void) {
  pthread_mutex_lock(&lib_lock);
  unsigned g = lib_generation;
  pthread_mutex_unlock(&lib_lock);
  return g;
}

void *braid_verbs_sym(const char *name) {
  char why[8];
  return lib_ready(why, sizeof why) ? lookup(lib_handle, name) : NULL;
}

struct ibv_context *braid_verbs_open(const char *dev) {
  char why[8];
  if (!lib_ready(why, sizeof why)) return NULL;
  int n = 0;
  struct ibv_device **list = ibv.get_device_list(&n);
  struct ibv_context *c = NULL;
  for (int i = 0; list && i < n && !c; i++) {
    const char *name = ibv.get_device_name(list[i]);
    if (name && !strcmp(name, dev)) c = ibv.open_device(list[i]);
  }
  if (list) ibv.free_device_list(list);
  return c;
}

void braid_verbs_close(struct ibv_context *c) {
  if (c) ibv.close_device(c);
}

/* 1 or 2 from sysfs's "IB/RoCE v1" / "RoCE v2"; 0 when unknown or the entry is empty. */
static int roce_version(const char *dev, int port, int idx) {
  char path[192], buf[32];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, idx);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  if (strstr(buf, "RoCE v2")) return 2;
  if (strstr(buf, "v1")) return 1;
  return 0;
}

static bool gid_query(struct ibv_context *c, int port, int idx, uint8_t gid[16]) {
  union ibv_gid g;
  static const uint8_t zero[16];
  if (ibv.query_gid(c, (uint8_t)port, idx, &g)) return false;
  memcpy(gid, g.raw, 16);
  return memcmp(gid, zero, 16) != 0;
}

bool braid_verbs_gid(struct ibv_context *c, int port, int idx, uint8_t gid[16]) {
  char why[8];
  return lib_ready(why, sizeof why) && gid_query(c, port, idx, gid);
}

/* Fills r's GID; false (with a WARN) when the configured index cannot be used. */
static bool rail_gid(struct ibv_context *c, const struct ibv_port_attr *pa, int env_index,
                     struct braid_verbs_rail *r) {
  if (env_index >= 0) {
    r->gid_from_env = true;
    r->gid_index = env_index;
    if (env_index >= pa->gid_tbl_len || !gid_query(c, r->port, env_index, r->gid)) {
      BRAID_WARN("%s:%d: GID index %d (BRAID_IB_GID_INDEX / NCCL_IB_GID_INDEX) is %s; port skipped",
                 r->dev, r->port, env_index,
                 env_index >= pa->gid_tbl_len ? "beyond the port's GID table" : "empty");
      return false;
    }
    r->roce = r->link == BRAID_LINK_ETH ? roce_version(r->dev, r->port, env_index) : 0;
    return true;
  }
  r->gid_index = 0;
  if (r->link == BRAID_LINK_ETH) {
    int best = -1;
    uint8_t gid[16];
    for (int i = 0; i < pa->gid_tbl_len && best < 2; i++) {
      if (!gid_query(c, r->port, i, gid)) continue;
      int rank = braid_verbs_gid_rank(gid, roce_version(r->dev, r->port, i));
      if (rank > 0 && rank > best) best = rank, r->gid_index = i;
    }
    if (best < 0)
      BRAID_INFO(NCCL_INIT | NCCL_NET, "%s:%d has no RoCE v2 GID with an IP address; GID index 0",
                 r->dev, r->port);
  }
  if (!gid_query(c, r->port, r->gid_index, r->gid)) memset(r->gid, 0, sizeof r->gid);
  r->roce = r->link == BRAID_LINK_ETH ? roce_version(r->dev, r->port, r->gid_index) : 0;
  return true;
}

static const char *port_state_name(int s) {
  static const char *const names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return s >= 0 && s < 6 ? names[s] : "unknown";
}

static void append(char *buf, size_t len, const char *fmt, const char *dev, int port, const char *note) {
  size_t used = strlen(buf);
  if (used + 1 < len) snprintf(buf + used, len - used, fmt, used ? ", " : "", dev, port, note);
}

struct scan {
  const struct braid_hca_spec *spec;
  const char *var;
  int gid_index;
  struct braid_verbs_rail *out;
  int max, n;
  int selected, inactive;
  int hits[BRAID_HCA_MAX];
  char found[512]; /* every port seen, for messages */
  char down[256];  /* selected ports that are not active */
};

static void scan_port(struct scan *sc, struct ibv_context *c, const char *dev, int port) {
  struct ibv_port_attr pa;
  if (braid_verbs_port_query(c, (uint8_t)port, &pa)) {
    BRAID_WARN("%s:%d: ibv_query_port failed; port skipped", dev, port);
    return;
  }
  bool active = pa.state == IBV_PORT_ACTIVE;
  append(sc->found, sizeof sc->found, "%s%s:%d%s", dev, port, active ? "" : " (not active)");
  int hit = braid_hca_find(sc->spec, dev, port);
  if (hit >= 0) sc->hits[hit]++;
  if (!braid_hca_match(sc->spec, dev, port)) return;
  sc->selected++;
  if (!active) {
    sc->inactive++;
    append(sc->down, sizeof sc->down, "%s%s:%d%s", dev, port, "");
    /* Named on purpose: say so loudly; merely present (a spare port, no cable): INFO. */
    if (sc->spec->n > 0 && !sc->spec->exclude)
      BRAID_WARN("%s:%d is selected by %s but its port is %s, not ACTIVE; skipped", dev, port,
                 sc->var, port_state_name(pa.state));
    else
      BRAID_INFO(NCCL_INIT | NCCL_NET, "%s:%d: port %s, not ACTIVE; skipped", dev, port,
                 port_state_name(pa.state));
    return;
  }
  if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND && pa.link_layer != IBV_LINK_LAYER_ETHERNET &&
      pa.link_layer != IBV_LINK_LAYER_UNSPECIFIED) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "%s:%d: link layer %d is neither InfiniBand nor Ethernet; skipped",
               dev, port, pa.link_layer);
    return;
  }
  if (sc->n == sc->max) {
    BRAID_WARN_ONCE("more than %d verbs rails; %s:%d and later ones ignored", sc->max, dev, port);
    return;
  }
  struct braid_verbs_rail *r = &sc->out[sc->n];
  memset(r, 0, sizeof *r);
  snprintf(r->dev, sizeof r->dev, "%s", dev);
  r->port = port;
  r->link = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? BRAID_LINK_ETH : BRAID_LINK_IB;
  r->mtu = pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096 ? 128 << pa.active_mtu : 0;
  r->speed_mbps = braid_verbs_speed_mbps(pa.active_width, pa.active_speed);
  if (!rail_gid(c, &pa, sc->gid_index, r)) return;
  char gid[INET6_ADDRSTRLEN];
  braid_verbs_gid_str(r->gid, gid, sizeof gid);
  BRAID_INFO(NCCL_INIT | NCCL_NET, "verbs rail %d: %s:%d %s, MTU %d, %d Mbit/s, GID %d %s%s%s", sc->n,
             dev, port, braid_verbs_link_name(r->link), r->mtu, r->speed_mbps, r->gid_index, gid,
             r->roce ? (r->roce == 2 ? " RoCE v2" : " RoCE v1") : "", r->gid_from_env ? " (set)" : "");
  sc->n++;
}

int braid_verbs_discover(const char *hca, const char *hca_var, int gid_index,
                         struct braid_verbs_rail *out, int max, char *why, size_t whylen) {
  struct braid_hca_spec spec;
  const char *var = hca_var ? hca_var : "the HCA filter";
  char err[200];
  if (braid_hca_parse(hca, &spec, err, sizeof err)) {
    snprintf(why, whylen, "invalid configuration: %s=\"%s\": %s", var, hca, err);
    BRAID_WARN("%s", why);
    return -1;
  }
  if (!braid_verbs_probe(why, whylen)) {
    BRAID_WARN("no verbs rails: %s", why);
    return 0;
  }
  int ndev = 0;
  struct ibv_device **list = ibv.get_device_list(&ndev);
  if (!list || ndev <= 0) {
    if (list) ibv.free_device_list(list);
    snprintf(why, whylen, "%s", no_devices);
    BRAID_WARN("no verbs rails: %s", why);
    return 0;
  }
  struct scan sc = {.spec = &spec, .var = var, .gid_index = gid_index, .out = out, .max = max};
  for (int d = 0; d < ndev; d++) {
    const char *dev = ibv.get_device_name(list[d]);
    if (!dev) continue;
    struct ibv_context *c = ibv.open_device(list[d]);
    struct ibv_device_attr da;
    if (!c || ibv.query_device(c, &da)) {
      BRAID_WARN("%s: cannot %s it; device skipped", dev, c ? "query" : "open");
      if (c) ibv.close_device(c);
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt; p++) scan_port(&sc, c, dev, p);
    ibv.close_device(c);
  }
  ibv.free_device_list(list);
  for (int i = 0; i < spec.n && sc.selected && !spec.exclude; i++) {
    if (sc.hits[i]) continue;
    char port[8] = "";
    if (spec.entry[i].port) snprintf(port, sizeof port, ":%d", spec.entry[i].port);
    BRAID_WARN("%s entry \"%s%s\" matches no device port (found: %s)", var, spec.entry[i].name,
               port, sc.found);
  }
  if (sc.n > 0) return sc.n;
  if (!sc.selected)
    snprintf(why, whylen, "%s=\"%s\" selects none of the ports found: %s", var, hca, sc.found);
  else if (sc.inactive == sc.selected)
    snprintf(why, whylen, "no selected port is ACTIVE (%s)", sc.down);
  else
    snprintf(why, whylen, "no usable port among those selected (see the WARNs above; found: %s)", sc.found);
  BRAID_WARN("no verbs rails: %s", why);
  return 0;
}

/* ---- which rail an interface is ---- */

/* Whether the file at path holds exactly name (one line). */
static bool file_is(const char *path, const char *name) {
  char buf[64] = "";
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(buf, sizeof buf, f) != NULL;
  fclose(f);
  buf[strcspn(buf, "\n")] = 0;
  return ok && !strcmp(buf, name);
}

int braid_verbs_rail_of_netdev(const char *ifname, struct braid_verbs_rail *out, char *why, size_t whylen) {
  struct braid_verbs_rail all[32];
  int n = braid_verbs_rails(all, 32, why, whylen);
  if (n <= 0) return -1;
  for (int i = 0; i < n; i++) {
    char p[512];
    /* RoCE: the netdev of the rail's GID; InfiniBand: the IPoIB interface of the same device */
    int len = snprintf(p, sizeof p, "/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d",
                       all[i].dev, all[i].port, all[i].gid_index);
    bool match = len > 0 && len < (int)sizeof p && file_is(p, ifname);
    if (!match) {
      len = snprintf(p, sizeof p, "/sys/class/net/%s/device/infiniband/%s", ifname, all[i].dev);
      match = len > 0 && len < (int)sizeof p && access(p, F_OK) == 0;
    }
    if (match) {
      *out = all[i];
      return 0;
    }
  }
  snprintf(why, whylen, "no RDMA port selected by BRAID_IB_HCA / NCCL_IB_HCA belongs to interface %s", ifname);
  return -1;
}
