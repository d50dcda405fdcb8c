/* The script the data-path fuzz targets read (their input): bytes taken in order, missing ones
 * read as zero; and the payload byte a message carries at each offset, so a receiver can check
 * every byte it got.  One copy per target (each is its own program). */
#ifndef BRAID_FUZZ_SCRIPT_H
#define BRAID_FUZZ_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

static const uint8_t *in_p;
static size_t in_n;

static inline uint8_t rd8(void) {
  if (!in_n) return 0;
  in_n--;
  return *in_p++;
}
static inline uint16_t rd16(void) {
  uint16_t v = rd8();
  return (uint16_t)(v | rd8() << 8);
}
static inline uint32_t rd32(void) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)rd8() << (8 * i);
  return v;
}

/* Message seq's byte at off. */
static inline uint8_t content(uint64_t seq, uint64_t off) {
  uint64_t x = (seq + 1) * 0x9E3779B97F4A7C15ull ^ off * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return (uint8_t)(x >> 32);
}

#endif
