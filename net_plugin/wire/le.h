/* Little-endian byte access for the wire formats (the sources in net_plugin/wire/): every
 * multi-byte integer braid puts on a socket or a queue pair goes through these, never through a
 * struct copied as it lies in memory, so the bytes are the same on every host. */
#ifndef BRAID_WIRE_LE_H
#define BRAID_WIRE_LE_H

#include <stdint.h>

static inline void braid_le_put16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void braid_le_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void braid_le_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t braid_le_get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t braid_le_get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t braid_le_get64(const uint8_t *p) {
  return (uint64_t)braid_le_get32(p) | (uint64_t)braid_le_get32(p + 4) << 32;
}

/* Whether n bytes from p are all zero (reserved bytes a decoder insists on). */
static inline int braid_le_zero(const uint8_t *p, unsigned n) {
  uint8_t acc = 0;
  for (unsigned i = 0; i < n; i++) acc |= p[i];
  return acc == 0;
}

#endif
