/* libsodium, opened at run time (dynlib.h): the functions braid uses, typed from sodium.h.
 *
 * Users: braid-ps authentication (ps_offload/auth.c: HMAC-SHA256, random nonces, BLAKE2b session
 * ids, Poly1305 frame tags under ChaCha20-derived keys) and the tuner's input fingerprint
 * (tuner_plugin/inputs.c: BLAKE2b).  libsodium.so.23
 * (1.0.18 and before) first, then libsodium.so.26 (1.0.19 on): these functions and the state
 * structs braid allocates for them are the same in both. */
#ifndef BRAID_SODIUM_LIB_H
#define BRAID_SODIUM_LIB_H

#include <sodium.h>

struct braid_sodium {
  __typeof__(sodium_init) *sodium_init;
  __typeof__(sodium_memcmp) *sodium_memcmp;
  __typeof__(randombytes_buf) *randombytes_buf;
  __typeof__(crypto_generichash_init) *crypto_generichash_init;
  __typeof__(crypto_generichash_update) *crypto_generichash_update;
  __typeof__(crypto_generichash_final) *crypto_generichash_final;
  __typeof__(crypto_auth_hmacsha256_init) *crypto_auth_hmacsha256_init;
  __typeof__(crypto_auth_hmacsha256_update) *crypto_auth_hmacsha256_update;
  __typeof__(crypto_auth_hmacsha256_final) *crypto_auth_hmacsha256_final;
  __typeof__(sodium_memzero) *sodium_memzero;
  __typeof__(crypto_stream_chacha20_ietf) *crypto_stream_chacha20_ietf;
  __typeof__(crypto_onetimeauth_poly1305_init) *crypto_onetimeauth_poly1305_init;
  __typeof__(crypto_onetimeauth_poly1305_update) *crypto_onetimeauth_poly1305_update;
  __typeof__(crypto_onetimeauth_poly1305_final) *crypto_onetimeauth_poly1305_final;
};

/* The library, loaded and sodium_init()ed on the first call (thread-safe, tried once per
 * process); NULL when it cannot be, and then braid_sodium_error() says why.  Logs nothing: each
 * user says what it loses. */
const struct braid_sodium *braid_sodium(void);

/* Why braid_sodium() returns NULL, "" when it does not (loads the library as braid_sodium()). */
const char *braid_sodium_error(void);

#endif
