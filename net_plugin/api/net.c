/* Lifetime, devices and properties, and the checks every entry point makes before the data path.
 *
 * v11+ contexts are per communicator (several at once); v7-v10 share one process context.  There
 * are no background threads, so nothing outlives a dlclose; unfinished connects are freed by
 * finalize or, for v7-v10 (no finalize), by the library destructor. */
#include "api/net.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collnet/collnet.h"
#include "comm/comm.h"
#include "comm/path.h"
#include "topo/devices.h"
#include "comm/diag.h"
#include "topo/ifaces.h"
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "comm/setup.h"
#include "transport/transport.h"

const char braid_plugin_name[] = "braid";

#define CTX_MAGIC 0x42435458u
#define MR_MAGIC 0x42524D52u

struct braid_ctx {
  uint32_t magic;
  uint64_t comm_id;
  int traffic_class;
};

struct braid_mr {
  uint32_t magic;
  int type;
  void *addr;
  size_t size;
  void *mem; /* the comm's path's registration (path.h reg), NULL when it needs none */
};

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_iface net_ifaces[BRAID_MAX_IFACES];
static struct braid_device net_devs[BRAID_MAX_DEVS];
static int net_ndevs = -1; /* -1: not discovered yet; physical devices, then virtual ones */
static int net_nphys;

/* One WARN for a device whose rails sit below different PCI root ports (devices.h). */
static void net_warn_spread(const struct braid_device *d) {
  const struct braid_iface *far, *at = NULL;
  if (!braid_device_pci_spread(d, &far)) return;
  for (int r = 0; r < d->nrails && !at; r++)
    if (d->rail[r]->pci_path == d->pci_path) at = d->rail[r];
  BRAID_WARN("device %s spans PCI root ports: NCCL places the whole device at %s (%s), but rail "
             "%s is at %s, so NCCL's topology misjudges the path of that rail's traffic; group "
             "rails under one PCI switch (BRAID_RAILS), or on NCCL 2.24 or later use "
             "BRAID_RAILS_GROUPING=nic and let NCCL fuse them (NCCL_NET_FORCE_MERGE), which "
             "places a fused device at its NICs' common parent",
             d->name, at ? at->name : "?", d->pci_path, far->name, far->pci_path);
}

static ncclResult_t net_discover(void) {
  ncclResult_t rc = braid_params_load();
  if (rc) return rc;
  const char *striping = braid_param_str(BRAID_P_STRIPING);
  if (strcmp(striping, "adaptive") && strcmp(striping, "equal")) {
    BRAID_WARN("invalid configuration: BRAID_STRIPING=\"%s\" (use adaptive or equal)", striping);
    return ncclInvalidArgument;
  }
  enum braid_transport t;
  if ((rc = braid_transport_get(&t))) return rc;
  pthread_mutex_lock(&net_lock);
  if (net_ndevs < 0) {
    int n = braid_ifaces_select(braid_param_str(BRAID_P_SOCKET_IFNAME),
                                braid_param_str(BRAID_P_SOCKET_FAMILY), net_ifaces,
                                BRAID_MAX_IFACES);
    if (n > 0)
      n = braid_devices_group_topo(net_ifaces, n, braid_param_str(BRAID_P_RAILS),
                                   braid_param_str(BRAID_P_RAILS_GROUPING), NULL, net_devs,
                                   BRAID_MAX_DEVS);
    if (n > 0) net_ndevs = net_nphys = n;
    else rc = n < 0 ? ncclInvalidArgument : ncclSystemError;
    for (int d = 0; n > 1 && braid_param_int(BRAID_P_BACKUP_RAIL) && d < n; d++)
      if (net_devs[d].nrails == 1) net_devs[d].backup = net_devs[(d + 1) % n].rail[0];
    for (int d = 0; d < n; d++) net_warn_spread(&net_devs[d]);
  }
  pthread_mutex_unlock(&net_lock);
  if (rc == ncclSystemError) BRAID_WARN("no usable network interface found");
  return rc;
}

ncclResult_t braid_net_init(void **ctx, uint64_t comm_id, int traffic_class,
                            ncclDebugLogger_t logger, const char *abi) {
  if (ctx) *ctx = NULL;
  braid_log_set_logger(logger);
  ncclResult_t rc = net_discover();
  if (rc) return rc;
  braid_diag_install();
  static atomic_flag announced = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&announced)) {
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < net_ndevs && len < sizeof list; i++) {
      char a[64];
      len += (size_t)snprintf(list + len, sizeof list - len, "%s[%d]%s (%d rail%s, %s%s)",
                              i ? " " : "", i, net_devs[i].name, net_devs[i].nrails,
                              net_devs[i].nrails > 1 ? "s" : "",
                              braid_sockaddr_str((struct sockaddr *)&net_devs[i].rail[0]->addr, a, sizeof a),
                              net_devs[i].nrails > 1 ? ", ..." : "");
    }
    BRAID_INFO(NCCL_INIT | NCCL_NET, "braid %s loaded through %s; %s transport, %d streams per rail; devices: %s",
               BRAID_VERSION, abi, braid_transport_name(), (int)braid_param_int(BRAID_P_NSTREAMS), list);
  }
  if (ctx) {
    struct braid_ctx *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->magic = CTX_MAGIC;
    c->comm_id = comm_id;
    c->traffic_class = traffic_class;
    *ctx = c;
  }
  return ncclSuccess;
}

ncclResult_t braid_net_finalize(void *ctx) {
  struct braid_ctx *c = ctx;
  if (!c) return ncclSuccess; /* init failed before building it: nothing to free */
  if (c->magic != CTX_MAGIC) {
    BRAID_WARN("finalize() on an invalid context %p", ctx);
    return ncclInvalidArgument;
  }
  braid_setup_abandon(c);
  c->magic = 0;
  free(c);
  return ncclSuccess;
}

__attribute__((destructor)) static void net_unload(void) {
  braid_setup_abandon(NULL);
  braid_diag_uninstall();
}

ncclResult_t braid_net_devices(int *ndev) {
  ncclResult_t rc = net_discover();
  *ndev = rc ? 0 : net_ndevs;
  return rc;
}

static const struct braid_device *net_device(int dev) {
  if (net_ndevs < 0 || dev < 0 || dev >= net_ndevs) {
    BRAID_WARN("invalid device index %d (%d devices)", dev, net_ndevs < 0 ? 0 : net_ndevs);
    return NULL;
  }
  return &net_devs[dev];
}

int braid_net_device_rails(int dev, const struct braid_iface **out, int max) {
  const struct braid_device *d = net_device(dev);
  if (!d) return -1;
  int n = d->nrails < max ? d->nrails : max;
  for (int i = 0; i < n; i++) out[i] = d->rail[i];
  return n;
}

ncclResult_t braid_net_get_properties(int dev, struct braid_props *p) {
  const struct braid_device *d = net_device(dev);
  if (!d) return ncclInvalidArgument;
  memset(p, 0, sizeof *p);
  p->name = d->name;
  p->pci_path = d->pci_path;
  p->guid = (uint64_t)dev;
  p->ptr_support = NCCL_PTR_HOST;
  p->speed = d->speed_mbps;
  p->port = 0;
  p->max_comms = 65536;
  p->max_recvs = braid_transport_kind() == BRAID_TRANSPORT_VERBS ? 1 : (int)braid_param_int(BRAID_P_MAX_RECVS);
  p->net_device_type = 0; /* NCCL_NET_DEVICE_HOST */
  p->ndevs = d->nchildren ? d->nchildren : 1;
  for (int i = 0; i < p->ndevs; i++) p->devs[i] = d->nchildren ? d->children[i] : dev;
  p->max_p2p_bytes = BRAID_MSG_MAX_BYTES;
  p->max_coll_bytes = 512ull << 20;
  p->max_multi_request_size = 1;
  p->rail_id = -1;
  p->plane_id = -1;
  return ncclSuccess;
}

ncclResult_t braid_net_make_vdevice(int *d, int ndevs, const int *devs, int max) {
  if (ndevs > max) {
    BRAID_WARN("makeVDevice of %d devices (this ABI version allows %d)", ndevs, max);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&net_lock);
  char why[128];
  ncclResult_t rc = ncclSuccess;
  if (net_ndevs < 0 || net_ndevs == BRAID_MAX_DEVS) {
    snprintf(why, sizeof why, "no room for another device");
    rc = ncclInternalError;
  } else if (braid_devices_fuse(net_devs, net_nphys, devs, ndevs, &net_devs[net_ndevs], why,
                                sizeof why) != 0) {
    rc = ncclInvalidArgument;
  } else {
    *d = net_ndevs++;
    BRAID_INFO(NCCL_INIT | NCCL_NET, "virtual device %d = %s (%d rails, %d Mbps)", *d,
               net_devs[*d].name, net_devs[*d].nrails, net_devs[*d].speed_mbps);
  }
  pthread_mutex_unlock(&net_lock);
  if (rc) BRAID_WARN("makeVDevice failed: %s", why);
  return rc;
}

ncclResult_t braid_net_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)ctx;
  *listen_comm = NULL;
  const struct braid_device *d = net_device(dev);
  if (!d) return ncclInvalidArgument;
  return braid_setup_listen(d, dev, handle, listen_comm);
}

ncclResult_t braid_net_connect(void *ctx, int dev, void *handle, void **send_comm) {
  *send_comm = NULL;
  const struct braid_device *d = net_device(dev);
  if (!d) return ncclInvalidArgument;
  if (!handle) {
    BRAID_WARN("connect() with a NULL handle");
    return ncclInvalidArgument;
  }
  return braid_setup_connect(ctx, d, dev, handle, send_comm);
}

ncclResult_t braid_net_accept(void *listen_comm, void **recv_comm) {
  return braid_setup_accept(listen_comm, recv_comm);
}

static struct braid_comm *net_comm(void *comm, int kind, const char *what) {
  struct braid_comm *c = comm;
  if (!c || (kind ? c->kind != kind : (c->kind != BRAID_COMM_SEND && c->kind != BRAID_COMM_RECV))) {
    BRAID_WARN("%s() on an invalid comm %p", what, comm);
    return NULL;
  }
  return c;
}

ncclResult_t braid_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  *mhandle = NULL;
  if (!net_comm(comm, 0, "regMr")) return ncclInvalidArgument;
  if (type != NCCL_PTR_HOST) {
    BRAID_WARN("regMr of memory type %d: braid registers host memory only (ptrSupport HOST)", type);
    return ncclInvalidArgument;
  }
  struct braid_comm *c = comm;
  struct braid_mr *mr = malloc(sizeof *mr);
  if (!mr) return ncclSystemError;
  *mr = (struct braid_mr){MR_MAGIC, type, data, size, NULL};
  if (c->path->reg && c->path->reg(c, data, size, &mr->mem)) {
    free(mr);
    BRAID_WARN("regMr of %zu bytes at %p: the %s registration failed (see the WARN above)", size, data,
               c->path->name);
    return ncclSystemError;
  }
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t braid_net_dereg_mr(void *comm, void *mhandle) {
  struct braid_mr *mr = mhandle;
  struct braid_comm *c = net_comm(comm, 0, "deregMr");
  if (!c) return ncclInvalidArgument;
  if (!mr || mr->magic != MR_MAGIC) {
    BRAID_WARN("deregMr() of an invalid memory handle %p", mhandle);
    return ncclInvalidArgument;
  }
  c->path->dereg(c, mr->addr, mr->size, mr->mem);
  mr->magic = 0;
  free(mr);
  return ncclSuccess;
}

/* The path's registration of a buffer of size bytes, for a path that registers memory (verbs:
 * on every rail); NULL for the others, or for an empty buffer without a handle.  false (with a
 * WARN) for a missing or invalid handle. */
static bool net_mem(const struct braid_comm *c, void *mhandle, size_t size, const char *what, void **mem) {
  struct braid_mr *mr = mhandle;
  *mem = NULL;
  if (!c->path->reg) return true;
  if (mr && mr->magic == MR_MAGIC && mr->mem) *mem = mr->mem;
  else if (size) {
    BRAID_WARN("%s of %zu bytes over %s with an invalid memory handle %p", what, size, c->path->name, mhandle);
    return false;
  }
  return true;
}

ncclResult_t braid_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request) {
  *request = NULL;
  struct braid_comm *c = net_comm(send_comm, BRAID_COMM_SEND, "isend");
  void *mem;
  if (!c || !net_mem(c, mhandle, size, "isend", &mem)) return ncclInvalidArgument;
  return braid_xfer_isend(c, data, size, tag, mem, request);
}

ncclResult_t braid_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                             const int *tags, void **mhandles, void **request) {
  /* NCCL 2.24+ may preset the optional-completion hint: read it before anything is written. */
  bool hint = *request == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  *request = NULL; /* the hint is no request: never handed back */
  struct braid_comm *c = net_comm(recv_comm, BRAID_COMM_RECV, "irecv");
  void *mem = NULL;
  if (!c || (n >= 1 && !net_mem(c, mhandles ? mhandles[0] : NULL, sizes[0], "irecv", &mem)))
    return ncclInvalidArgument;
  return braid_xfer_irecv(c, n, data, sizes, tags, mem, hint, request);
}

ncclResult_t braid_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = NULL; /* host memory: nothing to make visible */
  return net_comm(recv_comm, BRAID_COMM_RECV, "iflush") ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t braid_net_test(void *request, int *done, int *sizes) {
  braid_coll_idle_progress(); /* collComms this node finished with still notice lost servers */
  return braid_xfer_test(request, done, sizes);
}

ncclResult_t braid_net_close_send(void *send_comm) {
  if (!send_comm) return ncclSuccess;
  struct braid_comm *c = net_comm(send_comm, BRAID_COMM_SEND, "closeSend");
  if (!c) return ncclInvalidArgument;
  braid_comm_free(c);
  return ncclSuccess;
}

ncclResult_t braid_net_close_recv(void *recv_comm) {
  if (!recv_comm) return ncclSuccess;
  struct braid_comm *c = net_comm(recv_comm, BRAID_COMM_RECV, "closeRecv");
  if (!c) return ncclInvalidArgument;
  braid_comm_free(c);
  return ncclSuccess;
}

ncclResult_t braid_net_close_listen(void *listen_comm) {
  return braid_setup_close_listen(listen_comm);
}

ncclResult_t braid_net_set_attr(void *ctx, int32_t max_peers, int32_t max_flows, uint32_t ops) {
  (void)ctx;
  BRAID_TRACE(NCCL_NET, "setNetAttr: peers %d flows %d ops 0x%x", max_peers, max_flows, ops);
  return ncclSuccess;
}
