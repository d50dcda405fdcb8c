/* braid-ps authentication (see auth.h). */
#include "auth.h"

#include <string.h>

#include "sodium_lib.h"

/* Without libsodium (ps_auth_init failed, a caller's bug to go on) every function fails closed:
 * no proof or tag compares equal, so nothing authenticates. */

_Static_assert(sizeof(crypto_onetimeauth_poly1305_state) <= sizeof(((struct ps_mac *)0)->st),
               "ps_mac too small for a Poly1305 state");

int ps_auth_init(void) { return braid_sodium() ? 0 : -1; }

const char *ps_auth_error(void) { return braid_sodium_error(); }

void ps_auth_random(void *buf, size_t n) {
  const struct braid_sodium *s = braid_sodium();
  if (s) s->randombytes_buf(buf, n);
  else memset(buf, 0, n);
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* HMAC-SHA256(token, label | 0 | T). */
static void transcript_hmac(const char *token, const char *label, const struct ps_transcript *t,
                            uint8_t out[32]) {
  const struct braid_sodium *s = braid_sodium();
  if (!s) {
    memset(out, 0, 32);
    return;
  }
  crypto_auth_hmacsha256_state st;
  s->crypto_auth_hmacsha256_init(&st, (const unsigned char *)token, strlen(token));
  s->crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label) + 1);
  s->crypto_auth_hmacsha256_update(&st, t->hello, PS_HELLO_BYTES);
  s->crypto_auth_hmacsha256_update(&st, &t->flags, 1);
  s->crypto_auth_hmacsha256_update(&st, t->server_nonce, PS_NONCE_BYTES);
  s->crypto_auth_hmacsha256_final(&st, out);
  s->sodium_memzero(&st, sizeof st);
}

void ps_auth_head_proof(const char *token, const struct ps_transcript *t,
                        uint8_t out[PS_PROOF_BYTES]) {
  transcript_hmac(token, "braid-ps v2 head", t, out);
}

void ps_auth_server_proof(const char *token, const struct ps_transcript *t,
                          uint8_t out[PS_PROOF_BYTES]) {
  transcript_hmac(token, "braid-ps v2 server", t, out);
}

void ps_auth_conn_key(const char *token, const struct ps_transcript *t, uint8_t key[PS_KEY_BYTES]) {
  transcript_hmac(token, "braid-ps v2 key", t, key);
}

int ps_auth_equal(const uint8_t a[PS_PROOF_BYTES], const uint8_t b[PS_PROOF_BYTES]) {
  const struct braid_sodium *s = braid_sodium();
  return s && s->sodium_memcmp(a, b, PS_PROOF_BYTES) == 0;
}

int ps_auth_equal_tag(const uint8_t a[PS_TAG_BYTES], const uint8_t b[PS_TAG_BYTES]) {
  const struct braid_sodium *s = braid_sodium();
  return s && s->sodium_memcmp(a, b, PS_TAG_BYTES) == 0;
}

void ps_auth_session_id(const uint8_t *const *nonces, int n, size_t nonce_bytes,
                        uint8_t out[PS_SESSION_BYTES]) {
  const struct braid_sodium *s = braid_sodium();
  if (!s) {
    memset(out, 0, PS_SESSION_BYTES);
    return;
  }
  crypto_generichash_state st;
  s->crypto_generichash_init(&st, (const unsigned char *)"braid-ps session", 16, PS_SESSION_BYTES);
  for (int i = 0; i < n; i++) s->crypto_generichash_update(&st, nonces[i], nonce_bytes);
  s->crypto_generichash_final(&st, out, PS_SESSION_BYTES);
}

/* ---- Frame tags ---- */

void ps_mac_start(struct ps_mac *m, const uint8_t key[PS_KEY_BYTES], int dir, uint64_t n) {
  const struct braid_sodium *s = braid_sodium();
  crypto_onetimeauth_poly1305_state *st = (crypto_onetimeauth_poly1305_state *)m->st;
  if (!s) {
    memset(m->st, 0, sizeof m->st);
    return;
  }
  uint8_t nonce[12], otk[32];
  put32(nonce, (uint32_t)dir);
  put32(nonce + 4, (uint32_t)n);
  put32(nonce + 8, (uint32_t)(n >> 32));
  s->crypto_stream_chacha20_ietf(otk, sizeof otk, nonce, key);
  s->crypto_onetimeauth_poly1305_init(st, otk);
  s->sodium_memzero(otk, sizeof otk);
}

void ps_mac_update(struct ps_mac *m, const void *p, size_t len) {
  const struct braid_sodium *s = braid_sodium();
  if (s && len) s->crypto_onetimeauth_poly1305_update((crypto_onetimeauth_poly1305_state *)m->st, p, len);
}

void ps_mac_final(struct ps_mac *m, uint8_t tag[PS_TAG_BYTES]) {
  const struct braid_sodium *s = braid_sodium();
  if (!s) {
    memset(tag, 0, PS_TAG_BYTES);
    return;
  }
  s->crypto_onetimeauth_poly1305_final((crypto_onetimeauth_poly1305_state *)m->st, tag);
}

int ps_mac_verify(struct ps_mac *m, const uint8_t tag[PS_TAG_BYTES]) {
  uint8_t want[PS_TAG_BYTES];
  ps_mac_final(m, want);
  return ps_auth_equal_tag(want, tag);
}

void ps_mac_frame(const uint8_t key[PS_KEY_BYTES], int dir, uint64_t n,
                  const uint8_t hdr[PS_HDR_BYTES], const void *payload, size_t len,
                  uint8_t tag[PS_TAG_BYTES]) {
  struct ps_mac m;
  ps_mac_start(&m, key, dir, n);
  ps_mac_update(&m, hdr, PS_HDR_BYTES);
  ps_mac_update(&m, payload, len);
  ps_mac_final(&m, tag);
}
