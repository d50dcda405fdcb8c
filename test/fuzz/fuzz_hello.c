/* libFuzzer target: braid_hello_decode on arbitrary bytes (zero-padded or truncated to the
 * 40-byte hello).  Whatever decodes must be a valid stream index, survive encode -> decode, and
 * re-encode to the input bytes (all but the 6 pad bytes at 10..15, which decode ignores). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

#define CHECK(c)                                                                     \
  do {                                                                               \
    if (!(c)) {                                                                      \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);          \
      abort();                                                                       \
    }                                                                                \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t buf[BRAID_HELLO_BYTES] = {0};
  memcpy(buf, data, size < sizeof buf ? size : sizeof buf);

  struct braid_hello h;
  char err[256];
  err[0] = 0;
  if (braid_hello_decode(buf, &h, err, sizeof err) != 0) {
    CHECK(err[0] && memchr(err, 0, sizeof err)); /* a rejection always says why */
    return 0;
  }
  CHECK(h.per_rail >= 1 && h.per_rail <= BRAID_MAX_STREAMS);
  CHECK(h.nrails >= 1 && h.nrails <= BRAID_RAILLIST_MAX);
  CHECK(h.stream < h.per_rail * h.nrails);

  uint8_t enc[BRAID_HELLO_BYTES];
  braid_hello_encode(&h, enc);
  CHECK(memcmp(enc, buf, 16) == 0);
  CHECK(memcmp(enc + 16, buf + 16, BRAID_HELLO_BYTES - 16) == 0);

  struct braid_hello h2;
  memset(&h2, 0, sizeof h2);
  CHECK(braid_hello_decode(enc, &h2, err, sizeof err) == 0);
  CHECK(h.stream == h2.stream && h.per_rail == h2.per_rail && h.nrails == h2.nrails && h.conn_id == h2.conn_id);
  CHECK(memcmp(h.secret, h2.secret, sizeof h.secret) == 0);
  return 0;
}
