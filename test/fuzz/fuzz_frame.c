/* libFuzzer target: braid_frame_decode on arbitrary bytes (zero-padded or truncated to the
 * 40-byte header).  Whatever decodes must satisfy the documented invariants and survive
 * encode -> decode; since every header byte is covered by the checksum, re-encoding must also
 * reproduce the input exactly.
 *
 * A custom mutator re-seals half of the mutated headers (valid magic and checksum over the
 * mutated fields), so the fuzzer reaches the consistency checks behind the checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

#include "fuzz_check.h"

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint64_t rd(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t buf[BRAID_FRAME_HDR_BYTES] = {0};
  memcpy(buf, data, size < sizeof buf ? size : sizeof buf);

  struct braid_frame f;
  char err[256];
  err[0] = 0;
  if (braid_frame_decode(buf, &f, err, sizeof err) != 0) {
    CHECK(err[0] && memchr(err, 0, sizeof err)); /* a rejection always says why */
    return 0;
  }
  CHECK(f.type == BRAID_FRAME_DATA || f.type == BRAID_FRAME_ACK || f.type == BRAID_FRAME_CREDIT);
  if (f.type == BRAID_FRAME_ACK) {
    CHECK(f.len == 0 && f.size == 0 && f.tag == 0); /* offset: the receiver's held mark */
  } else if (f.type == BRAID_FRAME_CREDIT) {
    CHECK(f.len == 0 && f.offset == 0 && f.size == 0 && f.tag == 0);
  } else {
    CHECK(f.len <= BRAID_FRAME_MAX_LEN);
    CHECK(f.size <= BRAID_MSG_MAX_BYTES);
    CHECK(f.offset <= f.size);
    CHECK(f.offset + f.len <= f.size);
    CHECK(f.len > 0 || f.size == 0);
  }

  uint8_t enc[BRAID_FRAME_HDR_BYTES];
  braid_frame_encode(&f, enc);
  CHECK(memcmp(enc, buf, sizeof enc) == 0);
  struct braid_frame g;
  memset(&g, 0, sizeof g);
  CHECK(braid_frame_decode(enc, &g, err, sizeof err) == 0);
  CHECK(f.type == g.type && f.flags == g.flags && f.len == g.len && f.seq == g.seq);
  CHECK(f.offset == g.offset && f.size == g.size && f.tag == g.tag);
  return 0;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if ((seed & 1) || max_size < BRAID_FRAME_HDR_BYTES) return size;
  if (size < BRAID_FRAME_HDR_BYTES) {
    memset(data + size, 0, BRAID_FRAME_HDR_BYTES - size);
    size = BRAID_FRAME_HDR_BYTES;
  }
  struct braid_frame f;
  f.type = data[2];
  f.flags = data[3];
  f.len = (uint32_t)rd(data + 4, 4);
  f.seq = rd(data + 8, 8);
  f.offset = rd(data + 16, 8);
  f.size = rd(data + 24, 8);
  f.tag = (int32_t)(uint32_t)rd(data + 32, 4);
  if (seed & 2) f.type = BRAID_FRAME_DATA;
  braid_frame_encode(&f, data);
  return size;
}
