/* The ofi endpoint-address message (layout in ofi.h). */
#include "wire/ofi.h"

#include <stdio.h>
#include <string.h>

#include "wire/le.h"

_Static_assert(BRAID_OFI_NAME_HDR_BYTES == 2 && BRAID_OFI_NAME_MAX <= UINT16_MAX &&
                   BRAID_OFI_NAME_MSG_MAX == 258, "endpoint-address message layout");

size_t braid_ofi_name_encode(const uint8_t *name, size_t len, uint8_t *out) {
  if (len < 1 || len > BRAID_OFI_NAME_MAX) return 0;
  braid_le_put16(out, (uint16_t)len);
  memcpy(out + BRAID_OFI_NAME_HDR_BYTES, name, len);
  return BRAID_OFI_NAME_HDR_BYTES + len;
}

int braid_ofi_name_len(const uint8_t *hdr, char *err, size_t errlen) {
  unsigned len = braid_le_get16(hdr);
  if (len == 0) return snprintf(err, errlen, "an empty endpoint address"), -1;
  if (len > BRAID_OFI_NAME_MAX)
    return snprintf(err, errlen, "an endpoint address of %u bytes (at most %d)", len, BRAID_OFI_NAME_MAX), -1;
  return BRAID_OFI_NAME_HDR_BYTES + (int)len;
}

int braid_ofi_name_decode(const uint8_t *in, size_t len, const uint8_t **name, char *err,
                          size_t errlen) {
  if (len < BRAID_OFI_NAME_HDR_BYTES)
    return snprintf(err, errlen, "an endpoint-address message of %zu bytes", len), -1;
  int need = braid_ofi_name_len(in, err, errlen);
  if (need < 0) return -1;
  if (len != (size_t)need)
    return snprintf(err, errlen, "an endpoint-address message of %zu bytes for a %d-byte address",
                    len, need - BRAID_OFI_NAME_HDR_BYTES), -1;
  *name = in + BRAID_OFI_NAME_HDR_BYTES;
  return need - BRAID_OFI_NAME_HDR_BYTES;
}
