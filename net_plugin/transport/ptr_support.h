/* Which memory a device takes (NCCL's ptrSupport), decided from what was probed: pure, no I/O,
 * so the unit tests walk every combination.  The probes are the transport's (verbs_gpu.h for
 * verbs, ofi.h's braid_ofi_hmem for libfabric); api/memtypes.c runs them once per device and logs the
 * answer.
 *
 * Verbs, as NCCL's net_ib decides it: NCCL_PTR_CUDA when a peer-memory module is loaded
 * (nvidia-peermem or the older nv_peer_mem: ibv_reg_mr then takes CUDA pointers), and
 * NCCL_PTR_DMABUF when ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) on the rail's device fails with an
 * errno other than EOPNOTSUPP / EPROTONOSUPPORT (the kernel knows dma-buf and only refused the
 * bad fd); a libibverbs without the symbol cannot.  A device of several rails (or a fused one)
 * gets a bit only when every rail has it: a buffer is registered on every rail.  A rail with no
 * RDMA port gives host memory only.  Sockets: host memory only. */
#ifndef BRAID_PTR_SUPPORT_H
#define BRAID_PTR_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "transport/transport.h"

#define BRAID_PTR_PROBE_RAILS 16
/* A rail's dma-buf probe: an errno (>= 0; 0 when the probe registration succeeded), or one of: */
#define BRAID_DMABUF_NO_SYMBOL (-1) /* libibverbs lacks ibv_reg_dmabuf_mr */
#define BRAID_DMABUF_NO_PORT (-2)   /* the rail has no RDMA port (nothing was probed) */

/* Whether a rail's probe says the kernel takes dma-buf registrations. */
bool braid_dmabuf_probe_ok(int probe);

struct braid_ptr_probe {
  enum braid_transport transport;
  bool peermem;    /* verbs: a peer-memory module is loaded (verbs_gpu.h) */
  int nrails;      /* verbs: rails of the device, 1 to BRAID_PTR_PROBE_RAILS */
  int dmabuf[BRAID_PTR_PROBE_RAILS]; /* verbs: each rail's probe (above) */
  const char *rail_name[BRAID_PTR_PROBE_RAILS]; /* verbs: for the reason; may be NULL */
  int ofi_ptr;     /* ofi: what braid_ofi_hmem answered, beyond HOST */
  const char *ofi_why;
};

/* NCCL_PTR_* bits (always NCCL_PTR_HOST), with the reason in why. */
int braid_ptr_support_decide(const struct braid_ptr_probe *p, char *why, size_t whylen);

/* What NCCL's own IB transport would do on this node, for a device braid serves over another
 * transport: rdma_ports (libibverbs sees active ports), peermem, any_dmabuf (a device took NCCL's
 * dma-buf probe).  1 when NCCL's transport would use GPUDirect RDMA there and braid's transport t
 * (chosen by BRAID_TRANSPORT when forced, else automatically) carries host memory only: msg is then
 * the WARN, with the settings that restore GPUDirect.  0 otherwise. */
int braid_gdr_lost(enum braid_transport t, bool forced, bool rdma_ports, bool peermem, bool any_dmabuf,
                   char *msg, size_t len);

#endif
