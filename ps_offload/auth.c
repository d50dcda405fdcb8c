/* braid-ps authentication (see auth.h). */
#include "auth.h"

#include <string.h>

#include "sodium_lib.h"

/* Without libsodium (ps_auth_init failed, a caller's bug to go on) every function fails closed:
 * no proof compares equal, so nothing authenticates. */

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

static void hmac(const char *token, const uint8_t *msg, size_t n, uint8_t out[PS_PROOF_BYTES]) {
  const struct braid_sodium *s = braid_sodium();
  if (!s) {
    memset(out, 0, PS_PROOF_BYTES);
    return;
  }
  crypto_auth_hmacsha256_state st;
  s->crypto_auth_hmacsha256_init(&st, (const unsigned char *)token, strlen(token));
  s->crypto_auth_hmacsha256_update(&st, msg, n);
  s->crypto_auth_hmacsha256_final(&st, out);
}

void ps_auth_server_proof(const char *token, const uint8_t head_nonce[PS_NONCE_BYTES],
                          const uint8_t session[PS_SESSION_BYTES], uint8_t out[PS_PROOF_BYTES]) {
  uint8_t msg[12 + PS_NONCE_BYTES + PS_SESSION_BYTES];
  memcpy(msg, "braid-ps srv", 12);
  memcpy(msg + 12, head_nonce, PS_NONCE_BYTES);
  memcpy(msg + 12 + PS_NONCE_BYTES, session, PS_SESSION_BYTES);
  hmac(token, msg, sizeof msg, out);
}

void ps_auth_head_proof(const char *token, const uint8_t server_nonce[PS_NONCE_BYTES],
                        const uint8_t session[PS_SESSION_BYTES], uint32_t rank, uint32_t nranks,
                        uint8_t out[PS_PROOF_BYTES]) {
  uint8_t msg[12 + PS_NONCE_BYTES + PS_SESSION_BYTES + 8];
  memcpy(msg, "braid-ps cli", 12);
  memcpy(msg + 12, server_nonce, PS_NONCE_BYTES);
  memcpy(msg + 12 + PS_NONCE_BYTES, session, PS_SESSION_BYTES);
  put32(msg + 12 + PS_NONCE_BYTES + PS_SESSION_BYTES, rank);
  put32(msg + 16 + PS_NONCE_BYTES + PS_SESSION_BYTES, nranks);
  hmac(token, msg, sizeof msg, out);
}

int ps_auth_equal(const uint8_t a[PS_PROOF_BYTES], const uint8_t b[PS_PROOF_BYTES]) {
  const struct braid_sodium *s = braid_sodium();
  return s && s->sodium_memcmp(a, b, PS_PROOF_BYTES) == 0;
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
