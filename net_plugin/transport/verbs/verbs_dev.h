/* RDMA devices for a verbs transport: libibverbs, loaded at run time, and the rails it offers.
 *
 * libibverbs.so.1 is opened with dlopen on first use, never linked, so the plugin loads (and the
 * other transports run) on machines without it; ibv_fork_init() is called once, before any
 * device is opened, as NCCL does (training jobs fork data loaders).
 *
 * A rail is one (device, active port).  BRAID_IB_HCA (else NCCL_IB_HCA) selects them with
 * NCCL's syntax: a comma-separated list of device-name prefixes ("mlx5"), '^' first excludes the
 * listed ones instead, '=' first (after any '^') makes the names exact, and "name:port" limits
 * an entry to one port ("mlx5_0:1,mlx5_1:1").  Unlike NCCL, spaces around entries are ignored
 * and malformed entries ("mlx5_0:x", ":1", "mlx5_0:") are rejected with the reason instead of
 * silently matching nothing.  Unset: every active port.
 *
 * Each rail's GID index is BRAID_IB_GID_INDEX (else NCCL_IB_GID_INDEX) when set; otherwise on
 * RoCE the first RoCE v2 GID holding an IPv4-mapped address, else the first RoCE v2 GID with a
 * routable IPv6 address, else 0; on InfiniBand 0. */
#ifndef BRAID_VERBS_DEV_H
#define BRAID_VERBS_DEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BRAID_VERBS_NAME_MAX 64 /* IBV_SYSFS_NAME_MAX, with the NUL */
#define BRAID_HCA_MAX 32        /* entries in a spec (NCCL's MAX_IB_DEVS) */
#define BRAID_VERBS_MAX_RAILS 64

/* ---- BRAID_IB_HCA: pure, no verbs needed ---- */

struct braid_hca_entry {
  char name[BRAID_VERBS_NAME_MAX];
  int port; /* 0: every port */
};

struct braid_hca_spec {
  bool exclude; /* '^': the entries name what is NOT used */
  bool exact;   /* '=': names are exact, not prefixes */
  int n;        /* 0: no filter */
  struct braid_hca_entry entry[BRAID_HCA_MAX];
};

/* Parses text (NULL or blank: no filter).  0, or -1 with the reason in why. */
int braid_hca_parse(const char *text, struct braid_hca_spec *out, char *why, size_t whylen);
/* The first entry that names (dev, port), ignoring '^'; -1 when none does. */
int braid_hca_find(const struct braid_hca_spec *s, const char *dev, int port);
/* Does the spec select port `port` of device `dev`? */
bool braid_hca_match(const struct braid_hca_spec *s, const char *dev, int port);

/* Mbit/s of a port from ibv_port_attr's active_width and active_speed codes (the lowest bit set
 * of each counts, as in NCCL); 0 when either code is unknown. */
int braid_verbs_speed_mbps(int active_width, int active_speed);

/* How good a GID is for RoCE traffic: 2 RoCE v2 with an IPv4-mapped address, 1 RoCE v2 with a
 * routable (not link-local) IPv6 address, 0 anything else (v1, empty, link-local). */
int braid_verbs_gid_rank(const uint8_t gid[16], int roce_version);

/* A GID as text (inet_ntop's IPv6 form: "::ffff:10.0.0.1", "fe80::..."). */
void braid_verbs_gid_str(const uint8_t gid[16], char *out, size_t len);

/* ---- devices (libibverbs) ---- */

enum braid_link { BRAID_LINK_IB = 1, BRAID_LINK_ETH = 2 };

struct braid_verbs_rail {
  char dev[BRAID_VERBS_NAME_MAX];
  int port;
  enum braid_link link;
  int mtu;          /* active MTU, bytes */
  int speed_mbps;   /* 0 when the port's width or speed code is unknown */
  int gid_index;
  uint8_t gid[16];  /* that GID */
  int roce;         /* 1 or 2 for a RoCE v1/v2 GID; 0 on IB or when the kernel does not say */
  bool gid_from_env; /* gid_index came from BRAID_IB_GID_INDEX / NCCL_IB_GID_INDEX */
};

const char *braid_verbs_link_name(enum braid_link link); /* "InfiniBand", "Ethernet" */

/* Loads libibverbs (once) and lists the devices.  1 when at least one RDMA device exists, 0 with
 * the reason in why (libibverbs missing, no devices).  Logs nothing above INFO. */
int braid_verbs_probe(char *why, size_t whylen);

/* Fills out[] with the rails hca selects (hca_var names the variable it came from, for
 * messages; gid_index < 0: choose automatically) and returns how many; 0 with the reason in why
 * and a WARN when there are none (libibverbs missing, no devices, nothing selected, no active
 * port); -1 with a WARN when hca is malformed. */
int braid_verbs_discover(const char *hca, const char *hca_var, int gid_index,
                         struct braid_verbs_rail *out, int max, char *why, size_t whylen);

/* braid_verbs_discover with BRAID_IB_HCA / NCCL_IB_HCA and BRAID_IB_GID_INDEX /
 * NCCL_IB_GID_INDEX; -1 also when the parameters do not load. */
int braid_verbs_rails(struct braid_verbs_rail *out, int max, char *why, size_t whylen);

/* The rail (among braid_verbs_rails') that belongs to network interface ifname: the port whose
 * GID is on it (RoCE), or a port of its device (InfiniBand with IPoIB).  0, or -1 with the reason
 * in why. */
int braid_verbs_rail_of_netdev(const char *ifname, struct braid_verbs_rail *out, char *why, size_t whylen);

/* ---- for the endpoint layer (verbs_ep.c) ---- */

struct ibv_context;
struct ibv_port_attr;
/* An exported libibverbs symbol (IBVERBS_1.1 first), from the library braid_verbs_probe loaded;
 * NULL when it is not loaded or lacks the symbol. */
void *braid_verbs_sym(const char *name);
/* ibv_query_port with the full attribute struct (the context's extended op when it has one). */
int braid_verbs_port_query(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a);
/* The GID at index idx of the port: false when it cannot be read or is all zero. */
bool braid_verbs_gid(struct ibv_context *c, int port, int idx, uint8_t gid[16]);
/* Opens the device named dev; NULL when libibverbs is not loaded or no such device opens. */
struct ibv_context *braid_verbs_open(const char *dev);
void braid_verbs_close(struct ibv_context *c);

/* FOR TESTS ONLY (test/unit/verbs_mock.*): every libibverbs symbol is taken from resolve(name)
 * instead of libibverbs.so.1, which is then not loaded; NULL goes back to libibverbs.  Nothing
 * in the plugin calls it.  Objects built on the previous library must be gone first.  The
 * generation counts the installs: the endpoint layer reloads its symbols when it changes. */
void braid_verbs_test_resolver(void *(*resolve)(const char *name));
unsigned braid_verbs_generation(void);

#endif
