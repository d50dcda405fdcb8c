/* The frame header (layout in frame.h). */
#include "wire/frame.h"

#include <stdio.h>

#include "wire/le.h"

#define FRAME_MAGIC 0xB7ADu

enum { OFF_MAGIC = 0, OFF_TYPE = 2, OFF_FLAGS = 3, OFF_LEN = 4, OFF_SEQ = 8, OFF_OFFSET = 16,
       OFF_SIZE = 24, OFF_TAG = 32, OFF_CHECK = 36 };
_Static_assert(OFF_CHECK + 4 == BRAID_FRAME_HDR_BYTES, "frame header layout");

static uint32_t frame_check(const uint8_t *p) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < OFF_CHECK; i += 4) h = (h ^ braid_le_get32(p + i)) * 0xFF51AFD7ED558CCDull;
  return (uint32_t)(h ^ h >> 32);
}

void braid_frame_encode(const struct braid_frame *f, uint8_t out[BRAID_FRAME_HDR_BYTES]) {
  braid_le_put16(out + OFF_MAGIC, FRAME_MAGIC);
  out[OFF_TYPE] = f->type;
  out[OFF_FLAGS] = f->flags;
  braid_le_put32(out + OFF_LEN, f->len);
  braid_le_put64(out + OFF_SEQ, f->seq);
  braid_le_put64(out + OFF_OFFSET, f->offset);
  braid_le_put64(out + OFF_SIZE, f->size);
  braid_le_put32(out + OFF_TAG, (uint32_t)f->tag);
  braid_le_put32(out + OFF_CHECK, frame_check(out));
}

int braid_frame_decode(const uint8_t in[BRAID_FRAME_HDR_BYTES], struct braid_frame *f, char *err,
                       size_t errlen) {
  if (braid_le_get16(in + OFF_MAGIC) != FRAME_MAGIC)
    return snprintf(err, errlen, "bad frame magic 0x%04x", braid_le_get16(in + OFF_MAGIC)), -1;
  if (braid_le_get32(in + OFF_CHECK) != frame_check(in))
    return snprintf(err, errlen, "frame header checksum mismatch"), -1;
  f->type = in[OFF_TYPE];
  f->flags = in[OFF_FLAGS];
  f->len = braid_le_get32(in + OFF_LEN);
  f->seq = braid_le_get64(in + OFF_SEQ);
  f->offset = braid_le_get64(in + OFF_OFFSET);
  f->size = braid_le_get64(in + OFF_SIZE);
  f->tag = (int32_t)braid_le_get32(in + OFF_TAG);
  if (f->type == BRAID_FRAME_ACK) {
    if (f->len || f->size || f->tag)
      return snprintf(err, errlen, "inconsistent ack frame"), -1;
    return 0;
  }
  if (f->type == BRAID_FRAME_CREDIT) {
    if (f->len || f->offset || f->size || f->tag)
      return snprintf(err, errlen, "inconsistent credit frame"), -1;
    return 0;
  }
  if (f->type != BRAID_FRAME_DATA) return snprintf(err, errlen, "unknown frame type %u", f->type), -1;
  if (f->len > BRAID_FRAME_MAX_LEN || f->size > BRAID_MSG_MAX_BYTES || f->offset > f->size ||
      f->len > f->size - f->offset || (f->len == 0 && f->size != 0))
    return snprintf(err, errlen, "inconsistent frame (len %u offset %llu size %llu)", f->len,
                    (unsigned long long)f->offset, (unsigned long long)f->size), -1;
  return 0;
}
