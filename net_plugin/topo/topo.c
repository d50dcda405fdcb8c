#include "topo/topo.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "topo/hwloc_lib.h"
#include "log.h"

#define TOPO_MAX_GPUS 64
#define TOPO_MAX_DEPTH 64

static int topo_hex(const char *s, int ndigits, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < ndigits; i++) {
    char c = s[i];
    int d = c >= '0' && c <= '9' ? c - '0'
          : c >= 'a' && c <= 'f' ? c - 'a' + 10
          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v << 4 | (unsigned)d;
  }
  *out = v;
  return 0;
}

/* "dddd:bb:dd.f", exactly 12 characters. */
static int64_t topo_parse_busid(const char *s, size_t len) {
  unsigned dom, bus, dev, fn;
  if (len != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return -1;
  if (topo_hex(s, 4, &dom) || topo_hex(s + 5, 2, &bus) || topo_hex(s + 8, 2, &dev) ||
      topo_hex(s + 11, 1, &fn) || dev > 0x1f || fn > 7)
    return -1;
  return (int64_t)dom << 24 | (int64_t)bus << 16 | (int64_t)dev << 8 | (int64_t)fn;
}

int64_t braid_topo_busid(const char *path) {
  size_t end = path ? strlen(path) : 0;
  while (end > 0) {
    size_t start = end;
    while (start > 0 && path[start - 1] != '/') start--;
    int64_t id = topo_parse_busid(path + start, end - start);
    if (id >= 0) return id;
    end = start > 0 ? start - 1 : 0;
  }
  return -1;
}

const char *braid_topo_busid_str(int64_t id, char *buf, size_t len) {
  snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)(id >> 24 & 0xffff), (unsigned)(id >> 16 & 0xff),
           (unsigned)(id >> 8 & 0xff), (unsigned)(id & 0xff));
  return buf;
}

static int64_t topo_obj_busid(hwloc_obj_t o) {
  return (int64_t)o->attr->pcidev.domain << 24 | (int64_t)o->attr->pcidev.bus << 16 |
         (int64_t)o->attr->pcidev.dev << 8 | (int64_t)o->attr->pcidev.func;
}

static int topo_is_gpu(hwloc_obj_t o) {
  return o->attr->pcidev.vendor_id == 0x10de &&
         (o->attr->pcidev.class_id == 0x0300 || o->attr->pcidev.class_id == 0x0302);
}

/* A PCI-to-PCI bridge (switch or root port); the host bridge is upstream of the whole tree. */
static int topo_is_pci_bridge(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

/* hwloc, or NULL (after one INFO line per process saying what that costs). */
static const struct braid_hwloc *topo_lib(void) {
  const struct braid_hwloc *hw = braid_hwloc();
  static atomic_flag said = ATOMIC_FLAG_INIT;
  if (!hw && !atomic_flag_test_and_set(&said))
    BRAID_INFO(NCCL_INIT | NCCL_NET, "%s: no PCI placement information, so NICs are not grouped "
               "by their nearest GPU: a device per PCI NIC (BRAID_RAILS groups rails by hand; "
               "apt-get install libhwloc15)", braid_hwloc_error());
  return hw;
}

static hwloc_topology_t topo_load(const struct braid_hwloc *hw, const char *xml) {
  hwloc_topology_t t;
  if (hw->hwloc_topology_init(&t) < 0) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "hwloc: cannot initialise a topology (%s); a device per PCI NIC",
               strerror(errno));
    return NULL;
  }
  /* PCI devices and bridges only: no OS devices, none of the GPU backends (they would initialise
   * CUDA, NVML or OpenCL inside NCCL's init), and not the libpciaccess one (the linux backend
   * reads the PCI tree from sysfs; libpciaccess's state outlives the topology, a leak). */
  hw->hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL);
  hw->hwloc_topology_set_type_filter(t, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
  static const char *const skip[] = {"pci", "cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"};
  for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
    (void)hw->hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
  errno = 0;
  if ((xml && hw->hwloc_topology_set_xml(t, xml) < 0) || hw->hwloc_topology_load(t) < 0) {
    BRAID_INFO(NCCL_INIT | NCCL_NET, "hwloc: cannot load the %s%s topology (%s); a device per PCI NIC",
               xml ? "XML " : "machine's", xml ? xml : "", errno ? strerror(errno) : "unknown error");
    hw->hwloc_topology_destroy(t);
    return NULL;
  }
  return t;
}

/* Hops from nic up to the closest PCI bridge it shares with gpu, or -1 when they share none. */
static int topo_switch_hops(hwloc_obj_t const *chain, int nchain, hwloc_obj_t gpu) {
  for (hwloc_obj_t a = gpu->parent; a; a = a->parent)
    for (int h = 0; h < nchain; h++)
      if (chain[h] == a) return topo_is_pci_bridge(a) ? h : -1;
  return -1;
}

int braid_topo_nearest_gpus(const char *xml, const struct braid_iface *ifc, int n, int64_t *near) {
  for (int i = 0; i < n; i++) near[i] = -1;
  const struct braid_hwloc *hw = topo_lib();
  hwloc_topology_t t = hw ? topo_load(hw, xml) : NULL;
  if (!t) return -1;
  /* hwloc.h's hwloc_get_next_pcidev and hwloc_get_pcidev_by_busid, through the loaded library. */
  unsigned npci = hw->hwloc_get_nbobjs_by_depth(t, HWLOC_TYPE_DEPTH_PCI_DEVICE);
  hwloc_obj_t gpu[TOPO_MAX_GPUS];
  int ngpu = 0, nall = 0;
  for (unsigned k = 0; k < npci; k++) {
    hwloc_obj_t o = hw->hwloc_get_obj_by_depth(t, HWLOC_TYPE_DEPTH_PCI_DEVICE, k);
    if (!o || !topo_is_gpu(o)) continue;
    nall++;
    if (ngpu == TOPO_MAX_GPUS) continue;
    int j = ngpu++; /* insertion sort: PCI order, whatever hwloc's */
    while (j > 0 && topo_obj_busid(gpu[j - 1]) > topo_obj_busid(o)) gpu[j] = gpu[j - 1], j--;
    gpu[j] = o;
  }
  for (int i = 0; i < n && ngpu > 0; i++) {
    int64_t id = ifc[i].pci_path[0] ? braid_topo_busid(ifc[i].pci_path) : -1;
    if (id < 0) continue;
    hwloc_obj_t nic = NULL;
    for (unsigned k = 0; k < npci && !nic; k++) {
      hwloc_obj_t o = hw->hwloc_get_obj_by_depth(t, HWLOC_TYPE_DEPTH_PCI_DEVICE, k);
      if (o && topo_obj_busid(o) == id) nic = o;
    }
    if (!nic) continue;
    hwloc_obj_t chain[TOPO_MAX_DEPTH];
    int nchain = 0;
    for (hwloc_obj_t a = nic->parent; a && nchain < TOPO_MAX_DEPTH; a = a->parent) chain[nchain++] = a;
    int best = -1;
    for (int g = 0; g < ngpu; g++) {
      int hops = topo_switch_hops(chain, nchain, gpu[g]);
      if (hops >= 0 && (best < 0 || hops < best)) best = hops, near[i] = topo_obj_busid(gpu[g]);
    }
  }
  hw->hwloc_topology_destroy(t);
  return nall;
}
