/* Which memory a device takes, from the probes' results (see ptr_support.h). */
#include "transport/ptr_support.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nccl_plugin/net.h"

bool braid_dmabuf_probe_ok(int probe) {
  return probe >= 0 && probe != EOPNOTSUPP && probe != EPROTONOSUPPORT;
}

static void rail_probe_str(int probe, char *out, size_t len) {
  if (probe == BRAID_DMABUF_NO_SYMBOL) snprintf(out, len, "libibverbs lacks ibv_reg_dmabuf_mr");
  else if (probe == BRAID_DMABUF_NO_PORT) snprintf(out, len, "no RDMA port");
  else if (probe == 0) snprintf(out, len, "the probe registration succeeded");
  else snprintf(out, len, "%s%s", braid_dmabuf_probe_ok(probe) ? "probe refused the fd: " : "", strerror(probe));
}

static int verbs_decide(const struct braid_ptr_probe *p, char *why, size_t whylen) {
  if (p->nrails < 1 || p->nrails > BRAID_PTR_PROBE_RAILS) {
    snprintf(why, whylen, "verbs: %d rails probed: host memory only", p->nrails);
    return NCCL_PTR_HOST;
  }
  int bad = -1; /* the first rail without dma-buf */
  int noport = -1; /* the first rail without an RDMA port */
  for (int r = 0; r < p->nrails; r++) {
    if (noport < 0 && p->dmabuf[r] == BRAID_DMABUF_NO_PORT) noport = r;
    if (bad < 0 && !braid_dmabuf_probe_ok(p->dmabuf[r])) bad = r;
  }
  if (noport >= 0) {
    snprintf(why, whylen, "verbs: rail %s has no RDMA port: host memory only",
             p->rail_name[noport] ? p->rail_name[noport] : "?");
    return NCCL_PTR_HOST;
  }
  int bits = NCCL_PTR_HOST | (p->peermem ? NCCL_PTR_CUDA : 0) | (bad < 0 ? NCCL_PTR_DMABUF : 0);
  char dm[160];
  if (bad < 0) {
    snprintf(dm, sizeof dm, "dma-buf on %s", p->nrails > 1 ? "every rail" : "the rail");
  } else {
    char b[96];
    rail_probe_str(p->dmabuf[bad], b, sizeof b);
    snprintf(dm, sizeof dm, "no dma-buf (rail %s: %s)", p->rail_name[bad] ? p->rail_name[bad] : "?", b);
  }
  snprintf(why, whylen, "verbs: %s, %s: %s", p->peermem ? "a peer-memory module is loaded" :
           "no peer-memory module (nvidia-peermem)", dm,
           bits == NCCL_PTR_HOST ? "host memory only" : bits & NCCL_PTR_CUDA ?
           (bits & NCCL_PTR_DMABUF ? "host, CUDA and dma-buf memory" : "host and CUDA memory") :
           "host and dma-buf memory");
  return bits;
}

int braid_ptr_support_decide(const struct braid_ptr_probe *p, char *why, size_t whylen) {
  switch (p->transport) {
  case BRAID_TRANSPORT_VERBS:
    return verbs_decide(p, why, whylen);
  case BRAID_TRANSPORT_OFI:
    snprintf(why, whylen, "libfabric: %s%s", p->ofi_why ? p->ofi_why : "not probed",
             p->ofi_ptr ? "" : ": host memory only");
    return NCCL_PTR_HOST | p->ofi_ptr;
  case BRAID_TRANSPORT_SOCKET:
  default:
    snprintf(why, whylen, "TCP sockets: host memory only");
    return NCCL_PTR_HOST;
  }
}

int braid_gdr_lost(enum braid_transport t, bool forced, bool rdma_ports, bool peermem, bool any_dmabuf,
                   char *msg, size_t len) {
  if (t == BRAID_TRANSPORT_VERBS || !rdma_ports || !(peermem || any_dmabuf)) return 0;
  snprintf(msg, len,
           "GPUDirect RDMA is off: NCCL's own IB transport would register GPU memory on this node's "
           "RDMA ports (%s), but braid carries this job over %s (%s), which stages every GPU byte "
           "through host memory. To restore GPUDirect set BRAID_TRANSPORT=verbs (braid over the RDMA "
           "ports), or unset NCCL_NET_PLUGIN (NCCL's own IB transport)",
           peermem && any_dmabuf ? "nvidia-peermem is loaded and the NIC takes dma-buf"
           : peermem ? "nvidia-peermem is loaded" : "the NIC takes dma-buf",
           braid_transport_word(t), forced ? "BRAID_TRANSPORT set" : "chosen automatically: no RDMA port was usable for braid's verbs transport, see BRAID_IB_HCA");
  return 1;
}
