/* libsodium, opened at run time (see sodium_lib.h). */
#include "sodium_lib.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "dynlib.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct braid_sodium fns;
static const struct braid_sodium *ready; /* &fns once usable; written only under once */
static char why[256];

static void load(void) {
  static const char *const names[] = {"libsodium.so.23", "libsodium.so.26", NULL};
  void *lib = braid_dynlib_open(names, why, sizeof why);
  if (!lib) return;
  bool missing = false;
#define LOAD(f) fns.f = (__typeof__(fns.f))braid_dynlib_sym(lib, "libsodium", #f, &missing, why, sizeof why)
  LOAD(sodium_init);
  LOAD(sodium_memcmp);
  LOAD(randombytes_buf);
  LOAD(crypto_generichash_init);
  LOAD(crypto_generichash_update);
  LOAD(crypto_generichash_final);
  LOAD(crypto_auth_hmacsha256_init);
  LOAD(crypto_auth_hmacsha256_update);
  LOAD(crypto_auth_hmacsha256_final);
  LOAD(sodium_memzero);
  LOAD(crypto_stream_chacha20_ietf);
  LOAD(crypto_onetimeauth_poly1305_init);
  LOAD(crypto_onetimeauth_poly1305_update);
  LOAD(crypto_onetimeauth_poly1305_final);
#undef LOAD
  if (missing) return; /* the library stays loaded, unused */
  if (fns.sodium_init() < 0) {
    snprintf(why, sizeof why, "sodium_init() failed (no entropy source?)");
    return;
  }
  ready = &fns;
}

const struct braid_sodium *braid_sodium(void) {
  pthread_once(&once, load);
  return ready;
}

const char *braid_sodium_error(void) {
  pthread_once(&once, load);
  return ready ? "" : why;
}
