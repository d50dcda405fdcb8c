/* Socket set-up shared by listen, connect and accept. */
#ifndef BRAID_SOCK_H
#define BRAID_SOCK_H

#include <stdint.h>
#include "ifaces.h"

/* A non-blocking TCP socket of the interface's family, bound to the interface (device and
 * address) so its traffic leaves by that NIC even when NICs share a subnet.  -1 on error. */
int braid_sock_open(const struct braid_iface *ifc);
/* Data-socket options: no Nagle, keepalive and a user timeout derived from BRAID_TIMEOUT_MS. */
void braid_sock_tune(int fd);
/* Random bytes for secrets and ids. */
void braid_random(void *buf, size_t len);

#endif
