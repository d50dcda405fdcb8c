/* Socket addresses as text for logs (see sockaddr.h). */
#include "sockaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

const char *braid_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
    port = ntohs(s4->sin_port);
    snprintf(buf, len, "%s:%d", host, port);
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
    port = ntohs(s6->sin6_port);
    snprintf(buf, len, "[%s]:%d", host, port);
  } else {
    snprintf(buf, len, "(family %d)", sa->sa_family);
  }
  return buf;
}
