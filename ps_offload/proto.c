/* braid-ps wire protocol: encoding and checked decoding (see proto.h). */
#include "proto.h"

#include <stdio.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static uint32_t fnv1a(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static const char *const names[] = {"?",      "HELLO",  "CHALLENGE", "AUTH",    "READY", "REFUSE",
                                    "PUSH",   "RESULT", "DONE",      "RELEASE", "ERROR", "GONE",
                                    "PROOF"};

const char *ps_type_name(int type) {
  return type >= 1 && type <= PS_TYPE_MAX ? names[type] : "unknown";
}

void ps_hdr_encode(const struct ps_hdr *h, uint8_t out[PS_HDR_BYTES]) {
  put32(out, PS_MAGIC);
  out[4] = h->type;
  out[5] = h->dtype;
  out[6] = h->op;
  out[7] = h->flags;
  put32(out + 8, h->len);
  put32(out + 12, h->part);
  put64(out + 16, h->seq);
  memcpy(out + 24, h->weights, PS_MAX_SERVERS);
  put32(out + 40, h->rank);
  put32(out + 44, fnv1a(out, 44));
}

#define FAIL(...) return snprintf(err, errlen, __VA_ARGS__), -1

int ps_hdr_decode(const uint8_t in[PS_HDR_BYTES], struct ps_hdr *h, char *err, size_t errlen) {
  if (get32(in) != PS_MAGIC) FAIL("not a braid-ps frame (magic 0x%08x)", get32(in));
  if (get32(in + 44) != fnv1a(in, 44)) FAIL("frame header checksum mismatch");
  memset(h, 0, sizeof *h);
  h->type = in[4];
  h->dtype = in[5];
  h->op = in[6];
  h->flags = in[7];
  h->len = get32(in + 8);
  h->part = get32(in + 12);
  h->seq = get64(in + 16);
  memcpy(h->weights, in + 24, PS_MAX_SERVERS);
  h->rank = get32(in + 40);
  uint32_t want;
  switch (h->type) {
  case PS_HELLO: want = PS_HELLO_BYTES; break;
  case PS_CHALLENGE: want = PS_CHALLENGE_BYTES; break;
  case PS_AUTH: want = PS_AUTH_BYTES; break;
  case PS_PROOF: want = PS_SERVER_PROOF_BYTES; break;
  case PS_READY: case PS_DONE: case PS_RELEASE: case PS_GONE: want = 0; break;
  case PS_PUSH: case PS_RESULT:
    if (h->len == 0 || h->len > PS_MAX_PAYLOAD)
      FAIL("%s frame of %u bytes (allowed 1..%u)", ps_type_name(h->type), h->len, PS_MAX_PAYLOAD);
    if (h->dtype > 11 || h->op > 3)
      FAIL("%s frame with data type %u / op %u", ps_type_name(h->type), h->dtype, h->op);
    if (h->rank >= PS_MAX_RANKS) FAIL("%s frame from rank %u", ps_type_name(h->type), h->rank);
    return 0;
  case PS_REFUSE: case PS_ERROR:
    if (h->len > PS_MAX_TEXT) FAIL("%s text of %u bytes", ps_type_name(h->type), h->len);
    return 0;
  default: FAIL("unknown frame type %u", h->type);
  }
  if (h->len != want) FAIL("%s frame of %u bytes (expected %u)", ps_type_name(h->type), h->len, want);
  return 0;
}

void ps_hello_encode(const struct ps_hello *h, uint8_t out[PS_HELLO_BYTES]) {
  put32(out, h->version);
  memcpy(out + 4, h->session, PS_SESSION_BYTES);
  put32(out + 4 + PS_SESSION_BYTES, h->rank);
  put32(out + 8 + PS_SESSION_BYTES, h->nranks);
  memcpy(out + 12 + PS_SESSION_BYTES, h->nonce, PS_NONCE_BYTES);
}

int ps_hello_decode(const uint8_t in[PS_HELLO_BYTES], struct ps_hello *h, char *err,
                    size_t errlen) {
  h->version = get32(in);
  memcpy(h->session, in + 4, PS_SESSION_BYTES);
  h->rank = get32(in + 4 + PS_SESSION_BYTES);
  h->nranks = get32(in + 8 + PS_SESSION_BYTES);
  memcpy(h->nonce, in + 12 + PS_SESSION_BYTES, PS_NONCE_BYTES);
  if (h->version != PS_VERSION)
    FAIL("protocol version %u, this braid-ps speaks %u%s: run the same braid release on the nodes "
         "and the servers", h->version, PS_VERSION,
         h->version < PS_VERSION ? " (authenticated handshake and frames)" : "");
  if (h->nranks < 1 || h->nranks > PS_MAX_RANKS) FAIL("session of %u ranks (allowed 1..%u)", h->nranks, PS_MAX_RANKS);
  if (h->rank >= h->nranks) FAIL("rank %u of a session of %u", h->rank, h->nranks);
  return 0;
}

void ps_text_decode(const uint8_t *in, size_t n, char *out, size_t outlen) {
  size_t j = 0;
  for (size_t i = 0; i < n && j + 1 < outlen; i++) out[j++] = (in[i] >= 32 && in[i] < 127) ? (char)in[i] : '?';
  if (outlen) out[j] = 0;
}
