/* The memory each device takes, probed and logged once per device (see memtypes.h). */
#include "api/memtypes.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nccl_plugin/net.h"
#include "topo/devices.h"
#include "topo/devtable.h"
#include "transport/ofi/ofi.h"
#include "transport/ptr_support.h"
#include "transport/transport.h"
#include "transport/verbs/verbs_dev.h"
#include "transport/verbs/verbs_gpu.h"

#define CACHED 256 /* devices remembered (physical and fused); the rest are probed each time */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int cache[CACHED]; /* bits + 1; 0: not decided yet */

/* A rail's dma-buf probe: NCCL's probe on the rail's RDMA device (run for each rail of each
 * NCCL device when that device is first asked about; braid_dev_ptr_support caches the answer). */
static int rail_probe(const char *ifname) {
  struct braid_verbs_rail r;
  char why[256];
  if (braid_verbs_rail_of_netdev(ifname, &r, why, sizeof why)) return BRAID_DMABUF_NO_PORT;
  return braid_verbs_dmabuf_probe(r.dev);
}

/* Over sockets or libfabric, once per process: would NCCL's own IB transport have used GPUDirect
 * here?  Then say so, with the setting that restores it (ptr_support.h, braid_gdr_lost). */
static void gdr_lost_check(void) {
  static bool done;
  if (done || braid_transport_kind() == BRAID_TRANSPORT_VERBS) return;
  done = true;
  char why[256];
  if (!braid_verbs_probe(why, sizeof why)) return; /* no RDMA device: nothing NCCL's IB could use */
  struct braid_verbs_rail rails[16];
  const char *hca = getenv("NCCL_IB_HCA"); /* the ports NCCL's IB transport would use */
  int n = braid_verbs_discover(hca, "NCCL_IB_HCA", -1, rails, 16, why, sizeof why);
  bool dmabuf = false;
  for (int r = 0; r < n && !dmabuf; r++) {
    dmabuf = braid_dmabuf_probe_ok(braid_verbs_dmabuf_probe(rails[r].dev));
  }
  char msg[640];
  if (braid_gdr_lost(braid_transport_kind(), braid_transport_forced(), n > 0, braid_verbs_peermem(""), dmabuf,
                     msg, sizeof msg))
    BRAID_WARN("%s", msg);
}

static int decide(const struct braid_device *d, char *why, size_t whylen) {
  struct braid_ptr_probe p = {.transport = braid_transport_kind()};
  if (p.transport == BRAID_TRANSPORT_OFI) p.ofi_ptr = braid_ofi_hmem(why, whylen) & ~NCCL_PTR_HOST, p.ofi_why = why;
  if (p.transport == BRAID_TRANSPORT_VERBS) {
    p.peermem = braid_verbs_peermem("");
    p.nrails = d->nrails < BRAID_PTR_PROBE_RAILS ? d->nrails : BRAID_PTR_PROBE_RAILS;
    for (int r = 0; r < p.nrails; r++) {
      p.rail_name[r] = d->rail[r]->name;
      p.dmabuf[r] = rail_probe(d->rail[r]->name);
    }
  }
  char buf[384];
  int bits = braid_ptr_support_decide(&p, buf, sizeof buf);
  snprintf(why, whylen, "%s", buf);
  return bits;
}

int braid_dev_ptr_support(int dev) {
  const struct braid_device *d = braid_devtable_get(BRAID_VIEW_NET, dev);
  if (!d) return NCCL_PTR_HOST;
  pthread_mutex_lock(&lock);
  int bits = dev >= 0 && dev < CACHED ? cache[dev] - 1 : -1;
  if (bits < 0) {
    char why[384];
    gdr_lost_check();
    bits = decide(d, why, sizeof why);
    static bool socket_said;
    bool quiet = braid_transport_kind() == BRAID_TRANSPORT_SOCKET && socket_said;
    if (!quiet) BRAID_INFO(NCCL_INIT | NCCL_NET, "%s: ptrSupport 0x%x (%s)",
                           braid_transport_kind() == BRAID_TRANSPORT_SOCKET ? "every device" : d->name, bits, why);
    socket_said |= braid_transport_kind() == BRAID_TRANSPORT_SOCKET;
    if (dev >= 0 && dev < CACHED) cache[dev] = bits + 1;
  }
  pthread_mutex_unlock(&lock);
  return bits;
}
