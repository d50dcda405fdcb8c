/* PCI locality of NICs and GPUs, from hwloc (opened at run time, hwloc_lib.h): the only braid
 * file that talks to hwloc.
 *
 * A NIC is near a GPU when their closest common ancestor in the PCI tree is a PCI bridge: a
 * switch port or a root port with a switch below it (NCCL's PIX or PXB), not merely the host
 * bridge (PHB) nor the CPU.  GPUs are NVIDIA (vendor 0x10de) PCI devices of class 0x0300 or
 * 0x0302. */
#ifndef BRAID_TOPO_H
#define BRAID_TOPO_H

#include <stdint.h>

#include "topo/ifaces.h"

/* The PCI bus id of the last "dddd:bb:dd.f" component of a sysfs path, packed as
 * domain << 24 | bus << 16 | device << 8 | function (so packed ids sort in PCI order);
 * -1 when the path has none. */
int64_t braid_topo_busid(const char *path);

/* "dddd:bb:dd.f" of a packed bus id; buf holds at least 16 bytes. */
const char *braid_topo_busid_str(int64_t id, char *buf, size_t len);

/* For each of the n interfaces, near[i] is the packed bus id of the GPU nearest to it in the PCI
 * tree (ties: the first GPU in PCI order), or -1 when no GPU is near it, it has no PCI device, or
 * hwloc does not know its device.  xml: an hwloc XML topology to read (tests), NULL for this
 * machine's (hwloc honours HWLOC_XMLFILE then).  Returns the number of GPUs in the topology, or
 * -1 when hwloc could not load it or libhwloc.so.15 is not installed (one INFO line says why, the
 * latter once per process; near[] is all -1). */
int braid_topo_nearest_gpus(const char *xml, const struct braid_iface *ifc, int n, int64_t *near);

#endif
