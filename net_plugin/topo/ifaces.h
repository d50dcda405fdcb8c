/* Which network interfaces braid uses, chosen as NCCL_SOCKET_IFNAME users expect. */
#ifndef BRAID_IFACES_H
#define BRAID_IFACES_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "sockaddr.h"

#define BRAID_MAX_IFACES 32

struct braid_iface {
  char name[IF_NAMESIZE];
  int ifindex;
  struct sockaddr_storage addr; /* the interface's address, port 0 */
  socklen_t addrlen;
  char pci_path[256]; /* resolved /sys/class/net/NAME/device, "" for virtual NICs */
  int speed_mbps;     /* from sysfs; 0 when unknown */
  bool loopback;
};

/* Does `name` pass an NCCL_SOCKET_IFNAME-style spec?  A spec is a comma-separated list of
 * prefixes; a leading '^' turns it into an exclude list; a leading '=' (after any '^') makes the
 * entries exact names.  An empty spec matches everything. */
bool braid_ifname_match(const char *spec, const char *name);

/* Fills out[] with the interfaces to use, in a stable order, and returns how many (0 if none);
 * -1 with a WARN when the configuration is invalid.  spec: BRAID_SOCKET_IFNAME or its fallback,
 * family: "", "AF_INET" or "AF_INET6". */
int braid_ifaces_select(const char *spec, const char *family, struct braid_iface *out, int max);


#endif
