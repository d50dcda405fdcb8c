/* The listen handle (layout in handle.h). */
#include "wire/handle.h"

#include <stdio.h>
#include <string.h>

#include "wire/le.h"

#define HANDLE_MAGIC 0x31445242u /* "BRD1" */

enum { OFF_MAGIC = 0, OFF_VERSION = 4, OFF_FAMILY = 5, OFF_PORT = 6, OFF_ADDR = 8, OFF_SECRET = 24,
       OFF_ID = 40, OFF_FP = 48, OFF_TRANSPORT = 56, OFF_CAPS = 57 };
_Static_assert(OFF_SECRET + BRAID_SECRET_BYTES == OFF_ID && OFF_CAPS + 1 == BRAID_HANDLE_USED_BYTES,
               "handle layout");
_Static_assert(BRAID_HANDLE_USED_BYTES <= BRAID_HANDLE_STAGE_OFF &&
                   BRAID_HANDLE_STAGE_OFF < BRAID_HANDLE_BYTES && BRAID_HANDLE_BYTES == 128,
               "the handle fits NCCL's 128 bytes, the stage area after it");

void braid_handle_encode(const struct braid_handle *h, void *buf) {
  uint8_t *p = buf;
  memset(p, 0, BRAID_HANDLE_BYTES);
  braid_le_put32(p + OFF_MAGIC, HANDLE_MAGIC);
  p[OFF_VERSION] = BRAID_WIRE_VERSION;
  if (h->addr.ss_family == AF_INET) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)&h->addr;
    p[OFF_FAMILY] = 4;
    memcpy(p + OFF_PORT, &s->sin_port, 2); /* already in network order */
    memcpy(p + OFF_ADDR, &s->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&h->addr;
    p[OFF_FAMILY] = 6;
    memcpy(p + OFF_PORT, &s->sin6_port, 2);
    memcpy(p + OFF_ADDR, &s->sin6_addr, 16);
  }
  memcpy(p + OFF_SECRET, h->secret, BRAID_SECRET_BYTES);
  braid_le_put64(p + OFF_ID, h->listen_id);
  braid_le_put64(p + OFF_FP, h->tuner_fp);
  p[OFF_TRANSPORT] = h->transport;
  p[OFF_CAPS] = h->auth_caps;
}

int braid_handle_decode(const void *buf, struct braid_handle *h, char *err, size_t errlen) {
  const uint8_t *p = buf;
  memset(h, 0, sizeof *h);
  if (braid_le_get32(p + OFF_MAGIC) != HANDLE_MAGIC) {
    snprintf(err, errlen, "not a braid handle (magic 0x%08x)", braid_le_get32(p + OFF_MAGIC));
    return -1;
  }
  if (p[OFF_VERSION] != BRAID_WIRE_VERSION) {
    snprintf(err, errlen, "handle from braid wire version %u, this library speaks %u", p[OFF_VERSION],
             BRAID_WIRE_VERSION);
    return -1;
  }
  uint16_t port;
  memcpy(&port, p + OFF_PORT, 2);
  if (port == 0) {
    snprintf(err, errlen, "handle has port 0");
    return -1;
  }
  if (p[OFF_FAMILY] == 4) {
    struct sockaddr_in *s = (struct sockaddr_in *)&h->addr;
    s->sin_family = AF_INET;
    s->sin_port = port;
    memcpy(&s->sin_addr, p + OFF_ADDR, 4);
  } else if (p[OFF_FAMILY] == 6) {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&h->addr;
    s->sin6_family = AF_INET6;
    s->sin6_port = port;
    memcpy(&s->sin6_addr, p + OFF_ADDR, 16);
  } else {
    snprintf(err, errlen, "handle has unknown address family %u", p[OFF_FAMILY]);
    return -1;
  }
  memcpy(h->secret, p + OFF_SECRET, BRAID_SECRET_BYTES);
  h->listen_id = braid_le_get64(p + OFF_ID);
  h->tuner_fp = braid_le_get64(p + OFF_FP);
  h->transport = p[OFF_TRANSPORT];
  h->auth_caps = p[OFF_CAPS];
  if (h->auth_caps & ~(BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED)) {
    snprintf(err, errlen, "handle has unknown authentication bits 0x%x", h->auth_caps);
    return -1;
  }
  if ((h->transport & ~(BRAID_HANDLE_OFI | BRAID_HANDLE_FORCED | BRAID_HANDLE_VERBS)) ||
      (h->transport & BRAID_HANDLE_OFI && h->transport & BRAID_HANDLE_VERBS)) {
    snprintf(err, errlen, "handle has unknown transport bits 0x%x", h->transport);
    return -1;
  }
  return 0;
}
