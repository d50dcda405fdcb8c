/* braid's one implementation of the net plugin; abi.c adapts it to each ncclNet_vN_t. */
#ifndef BRAID_NET_H
#define BRAID_NET_H

#include <stddef.h>
#include <stdint.h>
#include "nccl_plugin/common.h"
#include "version.h"

#include "api/props.h"

/* The table name NCCL sees (and matches NCCL_NET against). */
extern const char braid_plugin_name[];

/* abi: "ncclNetPlugin_v11" etc., for the INFO line naming the version NCCL picked.
 * traffic_class: the communicator's (v11+ init's config; -1, NCCL_NET_TRAFFIC_CLASS_UNDEF, when
 * it sets none or the version passes none), kept in *ctx for its connects; a value outside
 * -1..255 fails the init (ncclInvalidArgument). */
ncclResult_t braid_net_init(void **ctx, uint64_t comm_id, int traffic_class,
                            ncclDebugLogger_t logger, const char *abi);
ncclResult_t braid_net_finalize(void *ctx);
ncclResult_t braid_net_devices(int *ndev);
ncclResult_t braid_net_get_properties(int dev, struct braid_props *p);
ncclResult_t braid_net_listen(void *ctx, int dev, void *handle, void **listen_comm);
/* traffic_class: what the call itself carries (v10's connect config), -1 when nothing does; a
 * context (v11+) brings its communicator's instead. */
ncclResult_t braid_net_connect(void *ctx, int dev, int traffic_class, void *handle, void **send_comm);
ncclResult_t braid_net_accept(void *listen_comm, void **recv_comm);
ncclResult_t braid_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
/* regMrDmaBuf: fd -1 registers as regMr does; else the fd (NCCL's, closed after the call) is
 * registered at offset, mapped at data, whatever memory type says is behind it (NCCL passes
 * NCCL_PTR_CUDA): the device must advertise NCCL_PTR_DMABUF. */
ncclResult_t braid_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
                                     int fd, void **mhandle);
ncclResult_t braid_net_dereg_mr(void *comm, void *mhandle);
ncclResult_t braid_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request);
/* *request on entry: NULL, or NCCL_NET_OPTIONAL_RECV_COMPLETION (NCCL 2.24+, v9+ only). */
ncclResult_t braid_net_irecv(void *recv_comm, int n, void **data, const size_t *sizes,
                             const int *tags, void **mhandles, void **request);
ncclResult_t braid_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                              void **request);
ncclResult_t braid_net_test(void *request, int *done, int *sizes);
ncclResult_t braid_net_close_send(void *send_comm);
ncclResult_t braid_net_close_recv(void *recv_comm);
ncclResult_t braid_net_close_listen(void *listen_comm);
/* NCCL fuses physical devices devs[0..ndevs) into a virtual one, written to *d (max: the ABI
 * version's NCCL_NET_MAX_DEVS_PER_NIC). */
ncclResult_t braid_net_make_vdevice(int *d, int ndevs, const int *devs, int max);
/* v11+ hints (peers, flows); accepted and logged, nothing depends on them yet. */
ncclResult_t braid_net_set_attr(void *ctx, int32_t max_peers, int32_t max_flows, uint32_t ops);

#endif
