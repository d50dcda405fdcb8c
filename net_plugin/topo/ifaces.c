#include "topo/ifaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

bool braid_ifname_match(const char *spec, const char *name) {
  if (!spec || !*spec) return true;
  bool exclude = false, exact = false;
  if (*spec == '^') exclude = true, spec++;
  if (*spec == '=') exact = true, spec++;
  bool hit = false;
  while (*spec && !hit) {
    const char *end = strchr(spec, ',');
    size_t len = end ? (size_t)(end - spec) : strlen(spec);
    if (len > 0) {
      if (exact) hit = strlen(name) == len && !strncmp(name, spec, len);
      else hit = !strncmp(name, spec, len);
    }
    spec += len + (end ? 1 : 0);
  }
  return exclude ? !hit : hit;
}

static bool ifaces_default_excluded(const char *name) {
  return !strncmp(name, "lo", 2) || !strncmp(name, "docker", 6) || !strncmp(name, "virbr", 5);
}

static void ifaces_read_sysfs(struct braid_iface *ifc) {
  char path[PATH_MAX], real[PATH_MAX];
  snprintf(path, sizeof path, "/sys/class/net/%s/device", ifc->name);
  ifc->pci_path[0] = 0;
  if (realpath(path, real) && strlen(real) < sizeof ifc->pci_path) strcpy(ifc->pci_path, real);
  snprintf(path, sizeof path, "/sys/class/net/%s/speed", ifc->name);
  ifc->speed_mbps = 0;
  FILE *f = fopen(path, "r");
  if (f) {
    int s = 0;
    if (fscanf(f, "%d", &s) == 1 && s > 0) ifc->speed_mbps = s;
    fclose(f);
  }
}

/* Collects up interfaces of `fam` that pass `pass`; one entry per interface (its first address). */
static int ifaces_collect(struct ifaddrs *list, int fam, const char *spec, bool defaults,
                          bool want_loopback, struct braid_iface *out, int n, int max) {
  for (struct ifaddrs *a = list; a && n < max; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != fam || !(a->ifa_flags & IFF_UP)) continue;
    bool lo = (a->ifa_flags & IFF_LOOPBACK) != 0;
    if (want_loopback != lo) continue;
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)a->ifa_addr)->sin6_addr))
      continue;
    if (defaults ? (!lo && ifaces_default_excluded(a->ifa_name))
                 : !braid_ifname_match(spec, a->ifa_name))
      continue;
    bool dup = false;
    for (int i = 0; i < n; i++) dup |= !strcmp(out[i].name, a->ifa_name);
    if (dup || strlen(a->ifa_name) >= IF_NAMESIZE) continue;
    struct braid_iface *ifc = &out[n++];
    memset(ifc, 0, sizeof *ifc);
    strcpy(ifc->name, a->ifa_name);
    ifc->ifindex = (int)if_nametoindex(a->ifa_name);
    ifc->addrlen = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    memcpy(&ifc->addr, a->ifa_addr, ifc->addrlen);
    ifc->loopback = lo;
    ifaces_read_sysfs(ifc);
  }
  return n;
}

int braid_ifaces_select(const char *spec, const char *family, struct braid_iface *out, int max) {
  int fams[2] = {AF_INET, AF_INET6}, nfam = 2;
  if (family && *family) {
    if (!strcmp(family, "AF_INET")) nfam = 1;
    else if (!strcmp(family, "AF_INET6")) fams[0] = AF_INET6, nfam = 1;
    else {
      BRAID_WARN("invalid configuration: socket family \"%s\" (use AF_INET or AF_INET6)", family);
      return -1;
    }
  }
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) {
    BRAID_WARN("getifaddrs failed: %m");
    return -1;
  }
  int n = 0;
  bool explicit_spec = spec && *spec;
  for (int f = 0; f < nfam && n == 0; f++) {
    if (explicit_spec) {
      n = ifaces_collect(list, fams[f], spec, false, false, out, 0, max);
      n = ifaces_collect(list, fams[f], spec, false, true, out, n, max);
    } else {
      n = ifaces_collect(list, fams[f], NULL, true, false, out, 0, max);
      if (n == 0) n = ifaces_collect(list, fams[f], NULL, true, true, out, 0, max);
    }
  }
  freeifaddrs(list);
  if (n == 0 && explicit_spec)
    BRAID_WARN("no up interface matches \"%s\" (BRAID_SOCKET_IFNAME / NCCL_SOCKET_IFNAME)", spec);
  return n;
}

