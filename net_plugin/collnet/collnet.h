/* braid's CollNet: allreduce offloaded to braid-ps summation servers (ps_offload/).
 *
 * One implementation; collnet_abi.c adapts it to each ncclCollNet_vN_t.  To NCCL, CollNet is a
 * plugin of its own: its devices are its own view of the physical devices (topo/devtable.h), with
 * the virtual devices NCCL fuses through CollNet's makeVDevice, and its properties its own.  It
 * takes the memory the net's devices take (NCCL puts CollNet devices into its topology first, and
 * what they claim holds for the NIC's topology node, the net's connections included): GPU memory
 * is staged through host memory for braid-ps (comm/stage.h).  init never contacts a server: it fails, turning CollNet off for the
 * process, only when BRAID_PS_SERVERS is unset or invalid.  connect is the blocking collective of
 * all heads: it reaches every server, authenticates with BRAID_PS_TOKEN and waits until every head
 * has joined; it fails (NCCL then falls back for this communicator) when no server can be used.
 * Operations are matched across nodes by a per-collComm sequence number that a NULL request does
 * not consume. */
#ifndef BRAID_COLLNET_H
#define BRAID_COLLNET_H

#include <stddef.h>
#include <stdint.h>
#include "nccl_plugin/common.h"

ncclResult_t braid_coll_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger, const char *abi);
ncclResult_t braid_coll_finalize(void *ctx);
ncclResult_t braid_coll_devices(int *ndev);
struct braid_props;
ncclResult_t braid_coll_get_properties(int dev, struct braid_props *p);
ncclResult_t braid_coll_make_vdevice(int *d, int ndevs, const int *devs, int max);
ncclResult_t braid_coll_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t braid_coll_connect(void *handles[], int nranks, int rank, void *listen_comm,
                                void **coll_comm);
ncclResult_t braid_coll_reduce_support(int dtype, int op, int *supported);
ncclResult_t braid_coll_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle);
/* regMrDmaBuf: NCCL calls it for a device whose ptrSupport has NCCL_PTR_DMABUF (GPU memory, staged;
 * the fd is not kept); refused with a WARN on any other. */
ncclResult_t braid_coll_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type, uint64_t offset,
                                      int fd, void **mhandle);
ncclResult_t braid_coll_dereg_mr(void *coll_comm, void *mhandle);
ncclResult_t braid_coll_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
                                   int dtype, int op, void *send_mh, void *recv_mh, void **request);
ncclResult_t braid_coll_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request);
ncclResult_t braid_coll_test(void *request, int *done, int *size);
ncclResult_t braid_coll_close(void *coll_comm);
ncclResult_t braid_coll_close_listen(void *listen_comm);
/* Gives collComms with no operation outstanding a turn of progress (at most every millisecond);
 * called from the net plugin's test(). */
void braid_coll_idle_progress(void);

#endif
