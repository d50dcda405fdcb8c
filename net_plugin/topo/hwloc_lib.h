/* hwloc, opened at run time (dynlib.h): the functions topo.c uses, typed from hwloc.h.
 *
 * libhwloc.so.15 is hwloc 2.x; braid needs 2.1 or newer (hwloc_topology_set_components), and a
 * library whose API major differs from the headers' is refused (hwloc's objects would not have
 * the layout braid reads).  hwloc.h's inline helpers call the library directly, so topo.c uses
 * only these pointers. */
#ifndef BRAID_HWLOC_LIB_H
#define BRAID_HWLOC_LIB_H

#include <hwloc.h>

struct braid_hwloc {
  __typeof__(hwloc_topology_init) *hwloc_topology_init;
  __typeof__(hwloc_topology_destroy) *hwloc_topology_destroy;
  __typeof__(hwloc_topology_load) *hwloc_topology_load;
  __typeof__(hwloc_topology_set_xml) *hwloc_topology_set_xml;
  __typeof__(hwloc_topology_set_components) *hwloc_topology_set_components;
  __typeof__(hwloc_topology_set_io_types_filter) *hwloc_topology_set_io_types_filter;
  __typeof__(hwloc_topology_set_type_filter) *hwloc_topology_set_type_filter;
  __typeof__(hwloc_get_nbobjs_by_depth) *hwloc_get_nbobjs_by_depth;
  __typeof__(hwloc_get_obj_by_depth) *hwloc_get_obj_by_depth;
};

/* The library, loaded on the first call (thread-safe, tried once per process); NULL when it
 * cannot be, and then braid_hwloc_error() says why.  Logs nothing. */
const struct braid_hwloc *braid_hwloc(void);

/* Why braid_hwloc() returns NULL, "" when it does not (loads the library as braid_hwloc()). */
const char *braid_hwloc_error(void);

#endif
