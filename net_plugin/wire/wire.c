#include "wire/wire.h"

#include <stdio.h>
#include <string.h>

#define HANDLE_MAGIC 0x31445242u /* "BRD1" */
#define HELLO_MAGIC 0x48445242u  /* "BRDH" */
#define CHALLENGE_MAGIC 0x43445242u /* "BRDC" */
#define REPLY_MAGIC 0x41445242u     /* "BRDA" */
#define FRAME_MAGIC 0xB7ADu

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Handle: magic(4) version(1) family(1) port(2, network order) addr(16) secret(16) id(8)
 * tuner_fp(8) transport(1) auth_caps(1). */
void braid_handle_encode(const struct braid_handle *h, void *buf) {
  uint8_t *p = buf;
  memset(p, 0, BRAID_HANDLE_BYTES);
  put32(p, HANDLE_MAGIC);
  p[4] = BRAID_WIRE_VERSION;
  if (h->addr.ss_family == AF_INET) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)&h->addr;
    p[5] = 4;
    memcpy(p + 6, &s->sin_port, 2);
    memcpy(p + 8, &s->sin_addr, 4);
  } else {
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&h->addr;
    p[5] = 6;
    memcpy(p + 6, &s->sin6_port, 2);
    memcpy(p + 8, &s->sin6_addr, 16);
  }
  memcpy(p + 24, h->secret, BRAID_SECRET_BYTES);
  put64(p + 40, h->listen_id);
  put64(p + 48, h->tuner_fp);
  p[56] = h->transport;
  p[57] = h->auth_caps;
}

int braid_handle_decode(const void *buf, struct braid_handle *h, char *err, size_t errlen) {
  const uint8_t *p = buf;
  memset(h, 0, sizeof *h);
  if (get32(p) != HANDLE_MAGIC) {
    snprintf(err, errlen, "not a braid handle (magic 0x%08x)", get32(p));
    return -1;
  }
  if (p[4] != BRAID_WIRE_VERSION) {
    snprintf(err, errlen, "handle from braid wire version %u, this library speaks %u", p[4],
             BRAID_WIRE_VERSION);
    return -1;
  }
  uint16_t port;
  memcpy(&port, p + 6, 2);
  if (port == 0) {
    snprintf(err, errlen, "handle has port 0");
    return -1;
  }
  if (p[5] == 4) {
    struct sockaddr_in *s = (struct sockaddr_in *)&h->addr;
    s->sin_family = AF_INET;
    s->sin_port = port;
    memcpy(&s->sin_addr, p + 8, 4);
  } else if (p[5] == 6) {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&h->addr;
    s->sin6_family = AF_INET6;
    s->sin6_port = port;
    memcpy(&s->sin6_addr, p + 8, 16);
  } else {
    snprintf(err, errlen, "handle has unknown address family %u", p[5]);
    return -1;
  }
  memcpy(h->secret, p + 24, BRAID_SECRET_BYTES);
  h->listen_id = get64(p + 40);
  h->tuner_fp = get64(p + 48);
  h->transport = p[56];
  h->auth_caps = p[57];
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

void braid_challenge_encode(const struct braid_challenge *c, uint8_t out[BRAID_CHALLENGE_BYTES]) {
  memset(out, 0, BRAID_CHALLENGE_BYTES);
  put32(out, CHALLENGE_MAGIC);
  put16(out + 4, BRAID_WIRE_VERSION);
  memcpy(out + 8, c->nonce, BRAID_NONCE_BYTES);
}

int braid_challenge_decode(const uint8_t in[BRAID_CHALLENGE_BYTES], struct braid_challenge *c,
                           char *err, size_t errlen) {
  if (get32(in) != CHALLENGE_MAGIC) return snprintf(err, errlen, "not a braid challenge"), -1;
  if (get16(in + 4) != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "challenge from wire version %u, this library speaks %u",
                    get16(in + 4), BRAID_WIRE_VERSION), -1;
  if (get16(in + 6)) return snprintf(err, errlen, "challenge has unknown bits"), -1;
  memcpy(c->nonce, in + 8, BRAID_NONCE_BYTES);
  return 0;
}

/* Hello: magic(4) version(2) stream(2) per_rail(2) nrails(2) nbackup(2) flags(2) conn_id(8)
 * auth(1) caps(1) zero(6) nonce(16) | proof(32). */
void braid_hello_encode(const struct braid_hello *h, uint8_t out[BRAID_HELLO_BYTES]) {
  memset(out, 0, BRAID_HELLO_BYTES);
  put32(out, HELLO_MAGIC);
  put16(out + 4, BRAID_WIRE_VERSION);
  put16(out + 6, h->stream);
  put16(out + 8, h->per_rail);
  put16(out + 10, h->nrails);
  put16(out + 12, h->nbackup);
  put16(out + 14, h->flags);
  put64(out + 16, h->conn_id);
  out[24] = h->auth;
  out[25] = h->caps;
  memcpy(out + 32, h->nonce, BRAID_NONCE_BYTES);
  memcpy(out + BRAID_HELLO_SIGNED, h->proof, BRAID_PROOF_BYTES);
}

int braid_hello_decode(const uint8_t in[BRAID_HELLO_BYTES], struct braid_hello *h, char *err,
                       size_t errlen) {
  if (get32(in) != HELLO_MAGIC) return snprintf(err, errlen, "not a braid hello"), -1;
  if (get16(in + 4) != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "hello from wire version %u, this library speaks %u",
                    get16(in + 4), BRAID_WIRE_VERSION), -1;
  h->stream = get16(in + 6);
  h->per_rail = get16(in + 8);
  h->nrails = get16(in + 10);
  h->nbackup = get16(in + 12);
  h->flags = get16(in + 14);
  h->auth = in[24];
  h->caps = in[25];
  if ((h->flags & ~(BRAID_HELLO_REJOIN | BRAID_HELLO_OFI | BRAID_HELLO_VERBS)) ||
      (h->flags & BRAID_HELLO_OFI && h->flags & BRAID_HELLO_VERBS))
    return snprintf(err, errlen, "hello has unknown flags 0x%x", h->flags), -1;
  if (h->auth > BRAID_AUTH_MAC || (h->caps & ~(BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED)) ||
      get32(in + 26) || get16(in + 30))
    return snprintf(err, errlen, "hello has unknown authentication bits (%u, 0x%x)", h->auth,
                    h->caps), -1;
  if (h->nbackup > 1 || h->nbackup >= h->nrails)
    return snprintf(err, errlen, "hello names %u backup rails of %u", h->nbackup, h->nrails), -1;
  if (h->per_rail == 0 || h->per_rail > BRAID_MAX_STREAMS || h->nrails == 0 ||
      h->nrails > BRAID_RAILLIST_MAX || h->stream >= h->per_rail * h->nrails)
    return snprintf(err, errlen, "hello names stream %u of %u per rail on %u rails", h->stream,
                    h->per_rail, h->nrails), -1;
  h->conn_id = get64(in + 16);
  memcpy(h->nonce, in + 32, BRAID_NONCE_BYTES);
  memcpy(h->proof, in + BRAID_HELLO_SIGNED, BRAID_PROOF_BYTES);
  return 0;
}

void braid_reply_encode(const struct braid_reply *r, uint8_t out[BRAID_REPLY_BYTES]) {
  put32(out, REPLY_MAGIC);
  put16(out + 4, BRAID_WIRE_VERSION);
  put16(out + 6, r->status);
  memcpy(out + BRAID_REPLY_SIGNED, r->proof, BRAID_PROOF_BYTES);
}

int braid_reply_decode(const uint8_t in[BRAID_REPLY_BYTES], struct braid_reply *r, char *err,
                       size_t errlen) {
  if (get32(in) != REPLY_MAGIC) return snprintf(err, errlen, "not a braid reply"), -1;
  if (get16(in + 4) != BRAID_WIRE_VERSION)
    return snprintf(err, errlen, "reply from wire version %u", get16(in + 4)), -1;
  r->status = get16(in + 6);
  if (r->status > BRAID_REPLY_MAX)
    return snprintf(err, errlen, "reply has unknown status %u", r->status), -1;
  memcpy(r->proof, in + BRAID_REPLY_SIGNED, BRAID_PROOF_BYTES);
  return 0;
}

#define RAILLIST_MAGIC 0x52445242u /* "BRDR" */

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
  put32(out, RAILLIST_MAGIC);
  out[4] = BRAID_WIRE_VERSION;
  out[5] = l->addr[0].ss_family == AF_INET ? 4 : 6;
  out[6] = (uint8_t)l->nrails;
  out[7] = (uint8_t)l->nbackup;
  for (int r = 0; r < l->nrails; r++)
    addr_put(out + BRAID_RAILLIST_HDR + (size_t)r * BRAID_RAILLIST_ENTRY, &l->addr[r]);
  return len;
}

int braid_raillist_len(const uint8_t *buf, char *err, size_t errlen) {
  if (get32(buf) != RAILLIST_MAGIC) return snprintf(err, errlen, "not a braid rail list"), -1;
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

/* Frame header: magic(2) type(1) flags(1) len(4) seq(8) offset(8) size(8) tag(4) check(4). */
static uint32_t frame_check(const uint8_t *p) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 36; i += 4) h = (h ^ get32(p + i)) * 0xFF51AFD7ED558CCDull;
  return (uint32_t)(h ^ h >> 32);
}

void braid_frame_encode(const struct braid_frame *f, uint8_t out[BRAID_FRAME_HDR_BYTES]) {
  put16(out, FRAME_MAGIC);
  out[2] = f->type;
  out[3] = f->flags;
  put32(out + 4, f->len);
  put64(out + 8, f->seq);
  put64(out + 16, f->offset);
  put64(out + 24, f->size);
  put32(out + 32, (uint32_t)f->tag);
  put32(out + 36, frame_check(out));
}

int braid_frame_decode(const uint8_t in[BRAID_FRAME_HDR_BYTES], struct braid_frame *f, char *err,
                       size_t errlen) {
  if (get16(in) != FRAME_MAGIC)
    return snprintf(err, errlen, "bad frame magic 0x%04x", get16(in)), -1;
  if (get32(in + 36) != frame_check(in))
    return snprintf(err, errlen, "frame header checksum mismatch"), -1;
  f->type = in[2];
  f->flags = in[3];
  f->len = get32(in + 4);
  f->seq = get64(in + 8);
  f->offset = get64(in + 16);
  f->size = get64(in + 24);
  f->tag = (int32_t)get32(in + 32);
  if (f->type == BRAID_FRAME_ACK) {
    if (f->len || f->size || f->tag)
      return snprintf(err, errlen, "inconsistent ack frame"), -1;
    return 0;
  }
  if (f->type != BRAID_FRAME_DATA) return snprintf(err, errlen, "unknown frame type %u", f->type), -1;
  if (f->len > BRAID_FRAME_MAX_LEN || f->size > BRAID_MSG_MAX_BYTES || f->offset > f->size ||
      f->len > f->size - f->offset || (f->len == 0 && f->size != 0))
    return snprintf(err, errlen, "inconsistent frame (len %u offset %llu size %llu)", f->len,
                    (unsigned long long)f->offset, (unsigned long long)f->size), -1;
  return 0;
}
