/* hwloc, opened at run time (see hwloc_lib.h). */
#include "topo/hwloc_lib.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "dynlib.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct braid_hwloc fns;
static const struct braid_hwloc *ready; /* &fns once usable; written only under once */
static char why[256];

static void load(void) {
  static const char *const names[] = {"libhwloc.so.15", NULL};
  void *lib = braid_dynlib_open(names, why, sizeof why);
  if (!lib) return;
  bool missing = false;
  __typeof__(hwloc_get_api_version) *api =
      (__typeof__(api))braid_dynlib_sym(lib, names[0], "hwloc_get_api_version", &missing, why, sizeof why);
#define LOAD(f) fns.f = (__typeof__(fns.f))braid_dynlib_sym(lib, names[0], #f, &missing, why, sizeof why)
  LOAD(hwloc_topology_init);
  LOAD(hwloc_topology_destroy);
  LOAD(hwloc_topology_load);
  LOAD(hwloc_topology_set_xml);
  LOAD(hwloc_topology_set_components);
  LOAD(hwloc_topology_set_io_types_filter);
  LOAD(hwloc_topology_set_type_filter);
  LOAD(hwloc_get_nbobjs_by_depth);
  LOAD(hwloc_get_obj_by_depth);
#undef LOAD
  if (missing) return; /* the library stays loaded, unused */
  unsigned v = api();
  if (v >> 16 != HWLOC_API_VERSION >> 16) {
    snprintf(why, sizeof why, "%s is hwloc API %x.%x, braid was built for %x.x", names[0], v >> 16,
             v >> 8 & 0xff, (unsigned)HWLOC_API_VERSION >> 16);
    return;
  }
  ready = &fns;
}

const struct braid_hwloc *braid_hwloc(void) {
  pthread_once(&once, load);
  return ready;
}

const char *braid_hwloc_error(void) {
  pthread_once(&once, load);
  return ready ? "" : why;
}
