/* Socket addresses as text for logs, shared by the plugin and braid-ps. */
#ifndef BRAID_SOCKADDR_H
#define BRAID_SOCKADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* "addr:port" / "[addr]:port" (or "(family N)") into buf; returns buf. */
const char *braid_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
