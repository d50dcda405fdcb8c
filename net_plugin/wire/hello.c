/* The stream handshake's messages (layouts in hello.h). */
#include "wire/hello.h"

#include <stdio.h>
#include <string.h>

#include "wire/le.h"

#define CHALLENGE_MAGIC 0x43445242u /* "BRDC" */
#define HELLO_MAGIC 0x48445242u     /* "BRDH" */
#define REPLY_MAGIC 0x41445242u     /* "BRDA" */
#define RAILLIST_MAGIC 0x52445242u  /* "BRDR" */

_Static_assert(8 + BRAID_NONCE_BYTES == BRAID_CHALLENGE_BYTES, "challenge layout");
_Static_assert(32 + BRAID_NONCE_BYTES == BRAID_HELLO_SIGNED &&
                   BRAID_HELLO_SIGNED + BRAID_PROOF_BYTES == BRAID_HELLO_BYTES, "hello layout");
_Static_assert(BRAID_REPLY_SIGNED + BRAID_PROOF_BYTES == BRAID_REPLY_BYTES, "reply layout");
_Static_assert(BRAID_RAILLIST_HDR == 8 && BRAID_RAILLIST_ENTRY == 2 + 16 &&
                   BRAID_RAILLIST_BYTES(BRAID_RAILLIST_MAX) == 296, "rail list layout");

void braid_challenge_encode(const struct braid_challenge *c, uint8_t out[BRAID_CHALLENGE_BYTES]) {
  memset(out, 0, BRAID_CHALLENGE_BYTES);
  braid_le_put32(out, CHALLENGE_MAGIC);
  braid_le_put16(out + 4, BRAID_WIRE_VERSION);
  memcpy(out + 8, c->nonce, BRAID_NONCE_BYTES);
}

int braid_challenge_decode(const uint8_t in[BRAID_CHALLENGE_BYTES], struct braid_challenge *c,
                           char *err, size_t errlen) {
  if (braid_le_get32(in) != CHALLENGE_MAGIC) return snprintf(err, errlen, "not a braid challenge"), -1;
  if (braid_le_get16(in + 4) != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "challenge from wire version %u, this library speaks %u",
                    braid_le_get16(in + 4), BRAID_WIRE_VERSION), -1;
  if (braid_le_get16(in + 6)) return snprintf(err, errlen, "challenge has unknown bits"), -1;
  memcpy(c->nonce, in + 8, BRAID_NONCE_BYTES);
  return 0;
}

void braid_hello_encode(const struct braid_hello *h, uint8_t out[BRAID_HELLO_BYTES]) {
  memset(out, 0, BRAID_HELLO_BYTES);
  braid_le_put32(out, HELLO_MAGIC);
  braid_le_put16(out + 4, BRAID_WIRE_VERSION);
  braid_le_put16(out + 6, h->stream);
  braid_le_put16(out + 8, h->per_rail);
  braid_le_put16(out + 10, h->nrails);
  braid_le_put16(out + 12, h->nbackup);
  braid_le_put16(out + 14, h->flags);
  braid_le_put64(out + 16, h->conn_id);
  out[24] = h->auth;
  out[25] = h->caps;
  out[26] = h->flags & BRAID_HELLO_TC ? h->tc : 0;
  out[27] = h->flags & BRAID_HELLO_SL ? h->sl : 0;
  memcpy(out + 32, h->nonce, BRAID_NONCE_BYTES);
  memcpy(out + BRAID_HELLO_SIGNED, h->proof, BRAID_PROOF_BYTES);
}

int braid_hello_decode(const uint8_t in[BRAID_HELLO_BYTES], struct braid_hello *h, char *err,
                       size_t errlen) {
  if (braid_le_get32(in) != HELLO_MAGIC) return snprintf(err, errlen, "not a braid hello"), -1;
  if (braid_le_get16(in + 4) != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "hello from wire version %u, this library speaks %u",
                    braid_le_get16(in + 4), BRAID_WIRE_VERSION), -1;
  h->stream = braid_le_get16(in + 6);
  h->per_rail = braid_le_get16(in + 8);
  h->nrails = braid_le_get16(in + 10);
  h->nbackup = braid_le_get16(in + 12);
  h->flags = braid_le_get16(in + 14);
  h->auth = in[24];
  h->caps = in[25];
  h->tc = in[26];
  h->sl = in[27];
  if ((h->flags & ~(BRAID_HELLO_REJOIN | BRAID_HELLO_OFI | BRAID_HELLO_VERBS | BRAID_HELLO_TC |
                    BRAID_HELLO_SL)) ||
      (h->flags & BRAID_HELLO_OFI && h->flags & BRAID_HELLO_VERBS))
    return snprintf(err, errlen, "hello has unknown flags 0x%x", h->flags), -1;
  if ((!(h->flags & BRAID_HELLO_TC) && h->tc) || (!(h->flags & BRAID_HELLO_SL) && h->sl))
    return snprintf(err, errlen, "hello has a traffic class byte without its flag (0x%x: %u, %u)",
                    h->flags, h->tc, h->sl), -1;
  if (h->auth > BRAID_AUTH_MAC || (h->caps & ~(BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED)) ||
      !braid_le_zero(in + 28, 4))
    return snprintf(err, errlen, "hello has unknown authentication bits (%u, 0x%x)", h->auth,
                    h->caps), -1;
  if (h->nbackup > 1 || h->nbackup >= h->nrails)
    return snprintf(err, errlen, "hello names %u backup rails of %u", h->nbackup, h->nrails), -1;
  if (h->per_rail == 0 || h->per_rail > BRAID_MAX_STREAMS || h->nrails == 0 ||
      h->nrails > BRAID_RAILLIST_MAX || h->stream >= h->per_rail * h->nrails)
    return snprintf(err, errlen, "hello names stream %u of %u per rail on %u rails", h->stream,
                    h->per_rail, h->nrails), -1;
  h->conn_id = braid_le_get64(in + 16);
  memcpy(h->nonce, in + 32, BRAID_NONCE_BYTES);
  memcpy(h->proof, in + BRAID_HELLO_SIGNED, BRAID_PROOF_BYTES);
  return 0;
}

void braid_reply_encode(const struct braid_reply *r, uint8_t out[BRAID_REPLY_BYTES]) {
  braid_le_put32(out, REPLY_MAGIC);
  braid_le_put16(out + 4, BRAID_WIRE_VERSION);
  braid_le_put16(out + 6, r->status);
  memcpy(out + BRAID_REPLY_SIGNED, r->proof, BRAID_PROOF_BYTES);
}

int braid_reply_decode(const uint8_t in[BRAID_REPLY_BYTES], struct braid_reply *r, char *err,
                       size_t errlen) {
  if (braid_le_get32(in) != REPLY_MAGIC) return snprintf(err, errlen, "not a braid reply"), -1;
  if (braid_le_get16(in + 4) != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "reply from wire version %u", braid_le_get16(in + 4)), -1;
  r->status = braid_le_get16(in + 6);
  if (r->status > BRAID_REPLY_MAX)
    return snprintf(err, errlen, "reply has unknown status %u", r->status), -1;
  memcpy(r->proof, in + BRAID_REPLY_SIGNED, BRAID_PROOF_BYTES);
  return 0;
}

/* One rail entry: the port as it lies in the sockaddr (network order), then the address. */
static void addr_put(uint8_t *p, const struct sockaddr_storage *a) {
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)a;
    memcpy(p, &s->sin_port, 2);
    memcpy(p + 2, &s->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)a;
    memcpy(p, &s->sin6_port, 2);
    memcpy(p + 2, &s->sin6_addr, 16);
  }
}

size_t braid_raillist_encode(const struct braid_raillist *l, uint8_t *out) {
  size_t len = BRAID_RAILLIST_BYTES((size_t)l->nrails);
  memset(out, 0, len);
  braid_le_put32(out, RAILLIST_MAGIC);
  out[4] = BRAID_WIRE_VERSION;
  out[5] = l->addr[0].ss_family == AF_INET ? 4 : 6;
  out[6] = (uint8_t)l->nrails;
  out[7] = (uint8_t)l->nbackup;
  for (int r = 0; r < l->nrails; r++)
    addr_put(out + BRAID_RAILLIST_HDR + (size_t)r * BRAID_RAILLIST_ENTRY, &l->addr[r]);
  return len;
}

int braid_raillist_len(const uint8_t *buf, char *err, size_t errlen) {
  if (braid_le_get32(buf) != RAILLIST_MAGIC) return snprintf(err, errlen, "not a braid rail list"), -1;
  if (buf[4] != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "rail list from wire version %u", buf[4]), -1;
  if (buf[5] != 4 && buf[5] != 6)
    return snprintf(err, errlen, "rail list has address family %u", buf[5]), -1;
  if (buf[6] < 1 || buf[6] > BRAID_RAILLIST_MAX)
    return snprintf(err, errlen, "rail list has %u rails (1 to %d)", buf[6], BRAID_RAILLIST_MAX), -1;
  if (buf[7] > 1 || buf[7] >= buf[6])
    return snprintf(err, errlen, "rail list has %u backup rails of %u", buf[7], buf[6]), -1;
  return (int)BRAID_RAILLIST_BYTES((size_t)buf[6]);
}

int braid_raillist_decode(const uint8_t *buf, size_t len, struct braid_raillist *l, char *err,
                          size_t errlen) {
  int need = braid_raillist_len(buf, err, errlen);
  if (need < 0) return -1;
  if (len < (size_t)need) return snprintf(err, errlen, "truncated rail list"), -1;
  memset(l, 0, sizeof *l);
  l->nrails = buf[6];
  l->nbackup = buf[7];
  for (int r = 0; r < l->nrails; r++) {
    const uint8_t *p = buf + BRAID_RAILLIST_HDR + (size_t)r * BRAID_RAILLIST_ENTRY;
    uint16_t port;
    memcpy(&port, p, 2);
    if (port == 0) return snprintf(err, errlen, "rail %d has port 0", r), -1;
    if (buf[5] == 4) {
      struct sockaddr_in *s = (struct sockaddr_in *)&l->addr[r];
      s->sin_family = AF_INET;
      s->sin_port = port;
      memcpy(&s->sin_addr, p + 2, 4);
    } else {
      struct sockaddr_in6 *s = (struct sockaddr_in6 *)&l->addr[r];
      s->sin6_family = AF_INET6;
      s->sin6_port = port;
      memcpy(&s->sin6_addr, p + 2, 16);
    }
  }
  return 0;
}
