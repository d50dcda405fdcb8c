/* The ofi transport's wire: the endpoint-address message.  Once a stream's handshake
 * (wire/hello.h, with BRAID_HELLO_OFI) has authenticated it, each end opens a libfabric endpoint
 * for the stream and sends its address on the stream's socket; the data then goes between the
 * endpoints, in frames (wire/frame.h).
 *
 * Layout (BRAID_OFI_NAME_HDR_BYTES + len bytes, at most BRAID_OFI_NAME_MSG_MAX = 258):
 *    0  len   u16  little-endian, 1..BRAID_OFI_NAME_MAX (256)
 *    2  name  len bytes: the endpoint's address as fi_getname gives it, opaque to braid (the
 *             provider checks it when it is inserted)
 *
 * Version: none of its own, no magic (one would change the bytes older builds expect): the
 * message comes at a fixed point of a stream whose handshake agreed on BRAID_WIRE_VERSION
 * (wire/handle.h), which is its version. */
#ifndef BRAID_WIRE_OFI_H
#define BRAID_WIRE_OFI_H

#include <stddef.h>
#include <stdint.h>

#define BRAID_OFI_NAME_MAX 256
#define BRAID_OFI_NAME_HDR_BYTES 2
#define BRAID_OFI_NAME_MSG_MAX (BRAID_OFI_NAME_HDR_BYTES + BRAID_OFI_NAME_MAX)

/* Writes the message for the len-byte address name into out (BRAID_OFI_NAME_MSG_MAX); returns
 * its length, or 0 when len is not 1..BRAID_OFI_NAME_MAX. */
size_t braid_ofi_name_encode(const uint8_t *name, size_t len, uint8_t *out);
/* The message's first BRAID_OFI_NAME_HDR_BYTES: the whole message's length, or -1 with a reason
 * (an empty address, one longer than BRAID_OFI_NAME_MAX). */
int braid_ofi_name_len(const uint8_t *hdr, char *err, size_t errlen);
/* A whole message of len bytes: the address's length, *name pointing at it inside in, or -1 with
 * a reason (the header's, or len not what the header says). */
int braid_ofi_name_decode(const uint8_t *in, size_t len, const uint8_t **name, char *err,
                          size_t errlen);

#endif
