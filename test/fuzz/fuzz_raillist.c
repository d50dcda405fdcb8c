/* libFuzzer target: the rail list a listener sends on stream 0 (braid_raillist_*). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t buf[BRAID_RAILLIST_BYTES(BRAID_RAILLIST_MAX)] = {0};
  size_t n = size < sizeof buf ? size : sizeof buf;
  memcpy(buf, data, n);
  char err[256];
  struct braid_raillist l;
  if (n < BRAID_RAILLIST_HDR) return 0;
  int need = braid_raillist_len(buf, err, sizeof err);
  if (need < 0) return 0;
  CHECK(need <= (int)sizeof buf);
  if (braid_raillist_decode(buf, n, &l, err, sizeof err) != 0) return 0;
  CHECK(l.nrails >= 1 && l.nrails <= BRAID_RAILLIST_MAX);
  uint8_t enc[sizeof buf];
  size_t len = braid_raillist_encode(&l, enc);
  CHECK(len == (size_t)need);
  struct braid_raillist l2;
  CHECK(braid_raillist_decode(enc, len, &l2, err, sizeof err) == 0);
  CHECK(l2.nrails == l.nrails);
  for (int r = 0; r < l.nrails; r++) CHECK(memcmp(&l.addr[r], &l2.addr[r], sizeof l.addr[r]) == 0);
  return 0;
}
