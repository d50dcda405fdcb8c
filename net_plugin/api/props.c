/* The properties every device has, whichever plugin lists it (see props.h). */
#include "api/props.h"

#include <string.h>

#include "wire/frame.h"
#include "nccl_plugin/net.h"
#include "param.h"
#include "topo/devices.h"
#include "transport/transport.h"

void braid_device_props(const struct braid_device *d, int dev, struct braid_props *p) {
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
}

