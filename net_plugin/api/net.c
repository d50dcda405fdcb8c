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

#include "api/memtypes.h"
#include "collnet/collnet.h"
#include "comm/comm.h"
#include "comm/life.h"
#include "comm/path.h"
#include "comm/stage.h"
#include "topo/devices.h"
#include "topo/devtable.h"
#include "comm/diag.h"
#include "topo/ifaces.h"
#include "log.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "comm/setup.h"
#include "transport/tclass.h"
#include "transport/transport.h"

const char braid_plugin_name[] = "braid";

#define CTX_MAGIC 0x42435458u
#define MR_MAGIC 0x42524D52u

struct braid_ctx {
  uint32_t magic;
  uint64_t comm_id;
  int traffic_class; /* NCCL's, for its communicator's connections (transport/tclass.h) */
};

struct braid_mr {
  uint32_t magic;
  int type;
  void *addr;
  size_t size;
  void *mem; /* the comm's path's registration (path.h reg), NULL when it needs none */
  struct braid_stage *stage; /* GPU memory on a path that carries host memory (comm/stage.h) */
};

ncclResult_t braid_net_init(void **ctx, uint64_t comm_id, int traffic_class,
                            ncclDebugLogger_t logger, const char *abi) {
  if (ctx) *ctx = NULL;
  braid_log_set_logger(logger);
  if (braid_tclass_check(traffic_class, "init")) return ncclInvalidArgument;
  int ndevs;
  ncclResult_t rc = braid_devtable_load(BRAID_VIEW_NET, &ndevs);
  if (rc) return rc;
  braid_diag_install();
  static atomic_flag announced = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&announced)) {
    char list[512] = "";
    size_t len = 0;
    for (int i = 0; i < ndevs && len < sizeof list; i++) {
      const struct braid_device *d = braid_devtable_get(BRAID_VIEW_NET, i);
      char a[64];
      len += (size_t)snprintf(list + len, sizeof list - len, "%s[%d]%s (%d rail%s, %s%s)",
                              i ? " " : "", i, d->name, d->nrails, d->nrails > 1 ? "s" : "",
                              braid_sockaddr_str((struct sockaddr *)&d->rail[0]->addr, a, sizeof a),
                              d->nrails > 1 ? ", ..." : "");
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

ncclResult_t braid_net_devices(int *ndev) { return braid_devtable_load(BRAID_VIEW_NET, ndev); }

ncclResult_t braid_net_make_vdevice(int *d, int ndevs, const int *devs, int max) {
  return braid_devtable_fuse(BRAID_VIEW_NET, d, ndevs, devs, max);
}

ncclResult_t braid_net_get_properties(int dev, struct braid_props *p) {
  const struct braid_device *d = braid_devtable_get(BRAID_VIEW_NET, dev);
  if (!d) return ncclInvalidArgument;
  braid_device_props(d, dev, p);
  p->ptr_support = braid_dev_ptr_support(dev);
  return ncclSuccess;
}

ncclResult_t braid_net_listen(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)ctx;
  *listen_comm = NULL;
  const struct braid_device *d = braid_devtable_get(BRAID_VIEW_NET, dev);
  if (!d) return ncclInvalidArgument;
  return braid_setup_listen(d, dev, handle, listen_comm);
}

ncclResult_t braid_net_connect(void *ctx, int dev, int traffic_class, void *handle, void **send_comm) {
  *send_comm = NULL;
  const struct braid_device *d = braid_devtable_get(BRAID_VIEW_NET, dev);
  if (!d) return ncclInvalidArgument;
  if (!handle) {
    BRAID_WARN("connect() with a NULL handle");
    return ncclInvalidArgument;
  }
  const struct braid_ctx *c = ctx;
  if (c && c->magic != CTX_MAGIC) {
    BRAID_WARN("connect() on an invalid context %p", ctx);
    return ncclInvalidArgument;
  }
  if (c) traffic_class = c->traffic_class; /* checked by init */
  else if (braid_tclass_check(traffic_class, "connect")) return ncclInvalidArgument;
  return braid_setup_connect(ctx, traffic_class, d, dev, handle, send_comm);
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

static const char *mem_type_name(int type) {
  return type == NCCL_PTR_HOST ? "host" : type == NCCL_PTR_CUDA ? "CUDA" : type == NCCL_PTR_DMABUF ? "dma-buf" : "unknown";
}

/* GPU memory on a connection whose path carries host memory only: staged (comm/stage.h), with
 * one WARN per process saying what that costs and why. */
static ncclResult_t net_stage(struct braid_comm *c, void *data, size_t size, const struct braid_mem_desc *d,
                              struct braid_mr *mr) {
  char why[320];
  mr->stage = braid_stage_new(data, size, why, sizeof why);
  if (!mr->stage) {
    BRAID_WARN("regMr of %zu bytes of %s memory at %p on a connection to %s over %s (host memory only): it "
               "cannot be staged through host memory: %s", size, mem_type_name(d->type), data, c->peer,
               c->path->name, why);
    return ncclSystemError;
  }
  BRAID_WARN_ONCE("device %d takes GPU memory (ptrSupport 0x%x), but its connection to %s runs over %s, which "
                  "carries host memory only (the peer has no RDMA port braid can use, or runs another "
                  "transport): braid stages GPU data through host memory on such connections, one copy each "
                  "way instead of GPUDirect RDMA; give every node the same transport (docs/transports.md)",
                  c->dev, braid_dev_ptr_support(c->dev), c->peer, c->path->name);
  return ncclSuccess;
}

/* Registration of d on comm: refused (WARN, ncclInvalidArgument) when the comm's device did not
 * advertise what it needs (a dma-buf fd: NCCL_PTR_DMABUF, whatever memory is behind it; else the
 * memory type).  GPU memory on a path that takes host memory only is staged. */
static ncclResult_t net_reg(void *comm, void *data, size_t size, const struct braid_mem_desc *d,
                            void **mhandle) {
  *mhandle = NULL;
  struct braid_comm *c = net_comm(comm, 0, d->fd >= 0 ? "regMrDmaBuf" : "regMr");
  if (!c) return ncclInvalidArgument;
  if (d->type != NCCL_PTR_HOST && d->type != NCCL_PTR_CUDA && d->type != NCCL_PTR_DMABUF) {
    BRAID_WARN("regMr of memory type %d: not a type NCCL defines (host 1, CUDA 2, dma-buf 4)", d->type);
    return ncclInvalidArgument;
  }
  int need = d->fd >= 0 ? NCCL_PTR_DMABUF : d->type;
  if (need != NCCL_PTR_HOST) {
    int ptr = braid_dev_ptr_support(c->dev);
    if (!(ptr & need)) {
      BRAID_WARN("%s of %s memory (%zu bytes at %p%s) on device %d, which advertised ptrSupport 0x%x "
                 "(see its INFO line)", d->fd >= 0 ? "regMrDmaBuf" : "regMr", mem_type_name(d->type), size, data,
                 d->fd >= 0 ? ", a dma-buf fd" : "", c->dev, ptr);
      return ncclInvalidArgument;
    }
  }
  struct braid_mr *mr = malloc(sizeof *mr);
  if (!mr) return ncclSystemError;
  *mr = (struct braid_mr){MR_MAGIC, d->type, data, size, NULL, NULL};
  if (!c->path->reg) {
    ncclResult_t rc = d->type == NCCL_PTR_HOST ? ncclSuccess : net_stage(c, data, size, d, mr);
    if (rc) {
      free(mr);
      return rc;
    }
  } else if (c->path->reg(c, data, size, d, &mr->mem)) {
    free(mr);
    BRAID_WARN("regMr of %zu bytes of %s memory at %p: the %s registration failed (see the WARN above)", size,
               mem_type_name(d->type), data, c->path->name);
    return ncclSystemError;
  }
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t braid_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle) {
  struct braid_mem_desc d = {.type = type, .fd = -1, .offset = 0};
  return net_reg(comm, data, size, &d, mhandle);
}

/* fd -1: a registration like regMr's (NCCL's net_ib does the same).  An fd >= 0 is a dma-buf of
 * memory of `type`: NCCL passes NCCL_PTR_CUDA for GPU memory it exported
 * (cuMemGetHandleForAddressRange), braid-perf's test-only udmabuf/memfd kinds NCCL_PTR_HOST;
 * NCCL_PTR_DMABUF is taken too.  The type decides the flush (iflush of host memory has nothing to
 * do); the device must advertise NCCL_PTR_DMABUF whatever the type. */
ncclResult_t braid_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                     void **mhandle) {
  *mhandle = NULL;
  if (fd < 0 && type == NCCL_PTR_DMABUF) {
    BRAID_WARN("regMrDmaBuf of dma-buf memory without a dma-buf fd (%d)", fd);
    return ncclInvalidArgument;
  }
  struct braid_mem_desc d = {.type = type, .fd = fd < 0 ? -1 : fd, .offset = offset};
  return net_reg(comm, data, size, &d, mhandle);
}

ncclResult_t braid_net_dereg_mr(void *comm, void *mhandle) {
  struct braid_mr *mr = mhandle;
  struct braid_comm *c = net_comm(comm, 0, "deregMr");
  if (!c) return ncclInvalidArgument;
  if (!mr || mr->magic != MR_MAGIC) {
    BRAID_WARN("deregMr() of an invalid memory handle %p", mhandle);
    return ncclInvalidArgument;
  }
  if (mr->stage) braid_stage_free(mr->stage);
  else c->path->dereg(c, mr->addr, mr->size, mr->mem);
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

/* The staging of a buffer registered as mhandle, or NULL. */
static struct braid_stage *net_staged(void *mhandle) {
  struct braid_mr *mr = mhandle;
  return mr && mr->magic == MR_MAGIC ? mr->stage : NULL;
}

ncclResult_t braid_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request) {
  *request = NULL;
  struct braid_comm *c = net_comm(send_comm, BRAID_COMM_SEND, "isend");
  void *mem;
  if (!c || !net_mem(c, mhandle, size, "isend", &mem)) return ncclInvalidArgument;
  struct braid_stage *st = net_staged(mhandle);
  if (st && size) {
    void *host = braid_stage_host(st, data, size);
    if (!host) {
      BRAID_WARN("isend of %zu bytes at %p: outside the buffer its memory handle registered", size, data);
      return ncclInvalidArgument;
    }
    if (braid_stage_in(st, data, size)) return braid_comm_fail(c, ncclUnhandledCudaError, "isend: %s", "GPU data could not be staged");
    data = host;
  }
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
  struct braid_stage *stages[BRAID_MAX_RECVS] = {0};
  void *host[BRAID_MAX_RECVS], *gpu[BRAID_MAX_RECVS];
  bool staged = false;
  for (int i = 0; mhandles && i < n && i < BRAID_MAX_RECVS; i++) {
    host[i] = gpu[i] = data[i];
    if (!(stages[i] = net_staged(mhandles[i]))) continue;
    if (!(host[i] = braid_stage_host(stages[i], data[i], sizes[i]))) {
      BRAID_WARN("irecv of %zu bytes at %p: outside the buffer its memory handle registered", sizes[i], data[i]);
      return ncclInvalidArgument;
    }
    staged = true;
  }
  if (staged) return braid_xfer_irecv(c, n, host, sizes, tags, mem, hint, stages, gpu, request);
  return braid_xfer_irecv(c, n, data, sizes, tags, mem, hint, NULL, NULL, request);
}

/* Only GPU memory needs a flush (NCCL asks only after GPUDirect receives); NCCL's net_ib reads
 * from the last buffer that received data, and so does braid. */
ncclResult_t braid_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request) {
  *request = NULL;
  struct braid_comm *c = net_comm(recv_comm, BRAID_COMM_RECV, "iflush");
  if (!c) return ncclInvalidArgument;
  if (n < 0 || n > BRAID_MAX_RECVS || (n > 0 && (!data || !sizes))) {
    BRAID_WARN("iflush of %d buffers (data %p, sizes %p)", n, (void *)data, (void *)sizes);
    return ncclInvalidArgument;
  }
  int last = -1;
  for (int i = 0; i < n; i++)
    if (sizes[i] > 0) last = i;
  if (last < 0) return ncclSuccess; /* nothing received */
  struct braid_mr *mr = mhandles ? mhandles[last] : NULL;
  if (!mr || mr->magic != MR_MAGIC) {
    BRAID_WARN("iflush of %d bytes with an invalid memory handle %p", sizes[last], (void *)mr);
    return ncclInvalidArgument;
  }
  /* host memory, or staged: test() copied it to GPU memory before the receive was done */
  if (mr->type == NCCL_PTR_HOST || mr->stage || braid_param_int(BRAID_P_IB_GDR_FLUSH_DISABLE)) return ncclSuccess;
  return braid_xfer_iflush(c, data[last], mr->mem, request);
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
