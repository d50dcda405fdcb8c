/* Device properties in braid's one representation, shared by the net plugin (api/net.c) and
 * CollNet (collnet/), each of which decides its own memory types. */
#ifndef BRAID_PROPS_H
#define BRAID_PROPS_H

#include <stddef.h>
#include <stdint.h>

/* Device properties in one representation (a superset of every ABI version's). */
struct braid_props {
  const char *name, *pci_path;
  uint64_t guid;
  int ptr_support, reg_is_global, force_flush, speed, port;
  float latency;
  int max_comms, max_recvs, net_device_type, net_device_version;
  int ndevs, devs[8];
  size_t max_p2p_bytes, max_coll_bytes;
  int max_multi_request_size;
  int16_t rail_id, plane_id;
};

struct braid_device;
/* The properties every device has whichever plugin lists it, as device dev: memory is host only
 * here (each plugin decides its own ptrSupport). */
void braid_device_props(const struct braid_device *d, int dev, struct braid_props *p);

#endif
