/* libFuzzer target: the stream handshake's decoders (braid_hello_decode, braid_challenge_decode,
 * braid_reply_decode) on arbitrary bytes (zero-padded or truncated to the 80-byte hello; the
 * challenge and reply read its first 24 and 40 bytes).  Whatever decodes must be valid (a stream
 * index below its shape, known authentication and status values), and re-encode to exactly the
 * input bytes: no byte of a hello is ignored (reserved bytes must be zero), so nothing unproven
 * can ride along. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t buf[BRAID_HELLO_BYTES] = {0};
  memcpy(buf, data, size < sizeof buf ? size : sizeof buf);
  char err[256];

  struct braid_challenge c;
  err[0] = 0;
  if (braid_challenge_decode(buf, &c, err, sizeof err) == 0) {
    uint8_t enc[BRAID_CHALLENGE_BYTES];
    braid_challenge_encode(&c, enc);
    CHECK(memcmp(enc, buf, sizeof enc) == 0);
  } else {
    CHECK(err[0] && memchr(err, 0, sizeof err));
  }

  struct braid_reply r;
  err[0] = 0;
  if (braid_reply_decode(buf, &r, err, sizeof err) == 0) {
    CHECK(r.status <= BRAID_REPLY_MAX);
    uint8_t enc[BRAID_REPLY_BYTES];
    braid_reply_encode(&r, enc);
    CHECK(memcmp(enc, buf, sizeof enc) == 0);
  } else {
    CHECK(err[0] && memchr(err, 0, sizeof err));
  }

  struct braid_hello h;
  err[0] = 0;
  if (braid_hello_decode(buf, &h, err, sizeof err) != 0) {
    CHECK(err[0] && memchr(err, 0, sizeof err)); /* a rejection always says why */
    return 0;
  }
  CHECK(h.per_rail >= 1 && h.per_rail <= BRAID_MAX_STREAMS);
  CHECK(h.nrails >= 1 && h.nrails <= BRAID_RAILLIST_MAX);
  CHECK(h.stream < h.per_rail * h.nrails);
  CHECK(h.nbackup <= 1 && h.nbackup < h.nrails);
  CHECK(h.auth <= BRAID_AUTH_MAC && !(h.caps & ~(BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED)));

  uint8_t enc[BRAID_HELLO_BYTES];
  braid_hello_encode(&h, enc);
  CHECK(memcmp(enc, buf, sizeof enc) == 0);

  struct braid_hello h2;
  memset(&h2, 0, sizeof h2);
  CHECK(braid_hello_decode(enc, &h2, err, sizeof err) == 0);
  CHECK(h.stream == h2.stream && h.per_rail == h2.per_rail && h.nrails == h2.nrails && h.conn_id == h2.conn_id);
  CHECK(memcmp(h.nonce, h2.nonce, sizeof h.nonce) == 0 && memcmp(h.proof, h2.proof, sizeof h.proof) == 0);
  return 0;
}
