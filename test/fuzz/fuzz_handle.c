/* libFuzzer target: braid_handle_decode on arbitrary bytes (zero-padded or truncated to the
 * 128-byte NCCL handle).  Whatever decodes must survive encode -> decode unchanged, re-encoding
 * must reproduce every input byte that decode reads (so a field cannot be lost symmetrically in
 * both directions), and the re-encoded handle must keep the stage area zeroed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t buf[BRAID_HANDLE_BYTES] = {0};
  memcpy(buf, data, size < sizeof buf ? size : sizeof buf);

  struct braid_handle h;
  char err[256];
  err[0] = 0;
  if (braid_handle_decode(buf, &h, err, sizeof err) != 0) {
    CHECK(err[0] && memchr(err, 0, sizeof err)); /* a rejection always says why */
    return 0;
  }
  CHECK(h.addr.ss_family == AF_INET || h.addr.ss_family == AF_INET6);
  in_port_t port = h.addr.ss_family == AF_INET ? ((struct sockaddr_in *)&h.addr)->sin_port
                                               : ((struct sockaddr_in6 *)&h.addr)->sin6_port;
  CHECK(port != 0); /* a handle never names port 0 */

  uint8_t enc[BRAID_HANDLE_BYTES];
  memset(enc, 0xa5, sizeof enc);
  braid_handle_encode(&h, enc);
  for (size_t i = BRAID_HANDLE_STAGE_OFF; i < sizeof enc; i++) CHECK(enc[i] == 0);
  /* magic(4) version(1) family(1) port(2) addr(4 or 16) | secret(16) id(8) at 24..47 */
  size_t addr_end = h.addr.ss_family == AF_INET ? 12 : 24;
  CHECK(memcmp(enc, buf, addr_end) == 0);
  CHECK(memcmp(enc + 24, buf + 24, 24) == 0);

  struct braid_handle h2;
  CHECK(braid_handle_decode(enc, &h2, err, sizeof err) == 0);
  /* decode clears the whole struct first, so the two are comparable byte for byte. */
  CHECK(memcmp(&h, &h2, sizeof h) == 0);
  /* The encoded form is canonical: encoding again gives the same bytes. */
  uint8_t enc2[BRAID_HANDLE_BYTES];
  braid_handle_encode(&h2, enc2);
  CHECK(memcmp(enc, enc2, sizeof enc) == 0);
  return 0;
}
