/* netload: load an NCCL net plugin by NCCL's rules and call any of its versions (v7..v12)
 * through one set of normalized, newest-style (v11/v12) signatures.
 *
 * Used by braid-perf (a stand-in for NCCL) and by wrapper plugins (braid-trace) that load the
 * real plugin underneath. Every netload_* call is ONE call of the plugin: nothing here loops,
 * sleeps, or keeps state besides what an older version needs to look like a newer one
 * (the per-comm ctx and v10's per-connect config). Polling connect/accept until the comm is
 * non-NULL is the caller's job, exactly as in NCCL's proxy: call again with the SAME handle buffer.
 *
 * Does not include nccl.h and does not link libnccl: types come from include/nccl_plugin/. */
#ifndef BRAID_NETLOAD_H
#define BRAID_NETLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/net.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NETLOAD_MIN_VERSION 7
#define NETLOAD_MAX_VERSION 12

/* Largest n accepted by netload_irecv/netload_iflush (NCCL's maxRecvs is at most 8). */
#define NETLOAD_MAX_RECVS 64

/* Normalized properties: the v12 layout. Fields an older plugin has no room for are filled with
 * NCCL's compatibility defaults: regIsGlobal 0, forceFlush 0, vProps {1, {dev}},
 * maxP2pBytes MAX_NET_SIZE (1 GiB), maxCollBytes MAX_COLLNET_SIZE (512 MiB),
 * maxMultiRequestSize 1, railId/planeId NCCL_NET_ID_UNDEF. */
typedef ncclNetProperties_v12_t netload_props_t;
typedef ncclNetCommConfig_v12_t netload_config_t;
typedef ncclNetVDeviceProps_v12_t netload_vprops_t;
typedef ncclNetAttr_v12_t netload_attr_t;
typedef ncclNetDeviceHandle_v12_t netload_devhandle_t;

struct netload {
  void *lib;          /* dlopen handle */
  int version;        /* 7..12: the ncclNetPlugin_vN symbol in use */
  char path[512];     /* the name dlopen succeeded with */
  const char *name;   /* the table's name field (e.g. "braid") */
  union {
    const void *any;
    const ncclNet_v7_t *v7;
    const ncclNet_v8_t *v8;
    const ncclNet_v9_t *v9;
    const ncclNet_v10_t *v10;
    const ncclNet_v11_t *v11;
    const ncclNet_v12_t *v12;
  } net;
  int init_refs;      /* v7..v10: init is once per process; counts netload_init calls */
};

/* Opens the plugin. `name` is an NCCL_NET_PLUGIN value: NULL means "libnccl-net.so"; a name is
 * dlopen'ed as given (RTLD_NOW|RTLD_LOCAL), then, when that fails and it has no '/' and is not
 * "lib*.so", as "libnccl-net-<name>.so". A comma-separated list is tried in order. A
 * case-insensitive prefix of "STATIC_PLUGIN" opens the main program, as NCCL does. The newest
 * ncclNetPlugin_vN with N <= max_version (0: no limit) is used. On failure returns
 * ncclInvalidUsage (not found) or ncclSystemError and writes every attempt to err. */
ncclResult_t netload_open(struct netload *nl, const char *name, int max_version, char *err,
                          size_t errlen);
/* dlclose()s the library. Call after the last finalize. */
void netload_close(struct netload *nl);

/* "ncclSystemError" etc. */
const char *netload_result_str(ncclResult_t r);

/* init: v11/v12 call the plugin's per-communicator init; *ctx is the plugin's context.
 * v7..v10: the plugin's init runs on the first call only (once per process, as NCCL does);
 * *ctx is a netload-owned context that stores `config` (passed to v10's connect).
 * config may be NULL (trafficClass undefined). profiler may be NULL. */
ncclResult_t netload_init(struct netload *nl, void **ctx, uint64_t comm_id,
                          const netload_config_t *config, ncclDebugLogger_t logger,
                          ncclProfilerCallback_t profiler);
/* finalize: v11/v12 call the plugin's finalize(ctx); older versions free netload's context. */
ncclResult_t netload_finalize(struct netload *nl, void *ctx);

ncclResult_t netload_devices(struct netload *nl, int *ndev);

/* Any version's property struct, and its conversion to the normalized one (fields the version
 * lacks get NCCL's compatibility defaults).  Shared with collload (CollNet's properties). */
union netload_raw_props {
  ncclNetProperties_v7_t v7;
  ncclNetProperties_v8_t v8;
  ncclNetProperties_v9_t v9;
  ncclNetProperties_v10_t v10;
  ncclNetProperties_v11_t v11;
  ncclNetProperties_v12_t v12;
};
void netload_props_convert(int version, const union netload_raw_props *q, int dev,
                           netload_props_t *p);
/* NCCL's compatibility defaults for device dev. */
void netload_props_defaults(netload_props_t *p, int dev);
/* props is fully written (see netload_props_t for defaults of fields an old version lacks). */
ncclResult_t netload_get_properties(struct netload *nl, int dev, netload_props_t *props);

ncclResult_t netload_listen(struct netload *nl, void *ctx, int dev, void *handle,
                            void **listen_comm);
/* One connect attempt: *send_comm stays NULL while in progress; call again with the same handle.
 * dev_comm may be NULL. */
ncclResult_t netload_connect(struct netload *nl, void *ctx, int dev, void *handle,
                             void **send_comm, netload_devhandle_t **dev_comm);
ncclResult_t netload_accept(struct netload *nl, void *listen_comm, void **recv_comm,
                            netload_devhandle_t **dev_comm);

/* v7 takes an int size: sizes above INT_MAX give ncclInvalidArgument without calling it. */
ncclResult_t netload_reg_mr(struct netload *nl, void *comm, void *data, size_t size, int type,
                            void **mhandle);
/* ncclInvalidUsage when the plugin has no regMrDmaBuf. */
ncclResult_t netload_reg_mr_dmabuf(struct netload *nl, void *comm, void *data, size_t size,
                                   int type, uint64_t offset, int fd, void **mhandle);
ncclResult_t netload_dereg_mr(struct netload *nl, void *comm, void *mhandle);

/* v7/v8 take int sizes: a size above INT_MAX gives ncclInvalidArgument without a call.
 * phandle(s) are dropped for v7..v9. *request keeps whatever the caller preset (NCCL presets
 * NULL, or NCCL_NET_OPTIONAL_RECV_COMPLETION for irecv) and is passed through unchanged, except
 * that irecv clears the hint for v7/v8 plugins, as NCCL's compatibility shims do. */
ncclResult_t netload_isend(struct netload *nl, void *send_comm, void *data, size_t size, int tag,
                           void *mhandle, void *phandle, void **request);
ncclResult_t netload_irecv(struct netload *nl, void *recv_comm, int n, void **data,
                           size_t *sizes, int *tags, void **mhandles, void **phandles,
                           void **request);
ncclResult_t netload_iflush(struct netload *nl, void *recv_comm, int n, void **data, int *sizes,
                            void **mhandles, void **request);
ncclResult_t netload_test(struct netload *nl, void *request, int *done, int *sizes);

ncclResult_t netload_close_send(struct netload *nl, void *send_comm);
ncclResult_t netload_close_recv(struct netload *nl, void *recv_comm);
ncclResult_t netload_close_listen(struct netload *nl, void *listen_comm);

/* Optional entry points: ncclInvalidUsage when this version/plugin has none (check first with
 * netload_has()). makeVDevice takes v12's 8-device props; v9..v11 accept at most 4. */
ncclResult_t netload_get_device_mr(struct netload *nl, void *comm, void *mhandle, void **dptr);
ncclResult_t netload_irecv_consumed(struct netload *nl, void *recv_comm, int n, void *request);
ncclResult_t netload_make_vdevice(struct netload *nl, int *d, netload_vprops_t *props);
ncclResult_t netload_set_net_attr(struct netload *nl, void *ctx, netload_attr_t *attr);

enum netload_fn {
  NETLOAD_FN_REG_MR_DMABUF,
  NETLOAD_FN_GET_DEVICE_MR,
  NETLOAD_FN_IRECV_CONSUMED,
  NETLOAD_FN_MAKE_VDEVICE,
  NETLOAD_FN_FINALIZE,
  NETLOAD_FN_SET_NET_ATTR
};
/* Whether the loaded table has a non-NULL pointer for fn. */
int netload_has(const struct netload *nl, enum netload_fn fn);

#ifdef __cplusplus
}
#endif

#endif
