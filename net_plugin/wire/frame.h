/* The frame header: the socket and ofi transports' data streams, after the handshake
 * (wire/hello.h).  One header per chunk of a message, so the receiver places each chunk straight
 * into the posted buffer; with several streams, acknowledgements are headers too; over libfabric's
 * ofi_rxm providers the receiver grants credits in headers (transport/ofi/ofi_rx.c).  No version
 * field: a stream's frames are those of the BRAID_WIRE_VERSION its handshake agreed on.
 *
 * Layout (BRAID_FRAME_HDR_BYTES = 40; integers little-endian):
 *    0  magic   u16  0xB7AD
 *    2  type    u8   BRAID_FRAME_DATA, BRAID_FRAME_ACK or BRAID_FRAME_CREDIT
 *    3  flags   u8
 *    4  len     u32  payload bytes following the header (DATA: at most BRAID_FRAME_MAX_LEN)
 *    8  seq     u64  DATA: message sequence number on the connection; ACK: frames of this
 *                    stream received in full so far; CREDIT: frames the sender may have started
 *                    on this stream (the receiver has posted a receive for the payload of each
 *                    one below this number)
 *   16  offset  u64  DATA: of this chunk within the message; ACK: the receiver holds every byte
 *                    of every message below this sequence number (0: not said); CREDIT: 0
 *   24  size    u64  DATA: the whole message's size (at most BRAID_MSG_MAX_BYTES); else 0
 *   32  tag     i32  DATA: NCCL's tag (two's complement); else 0
 *   36  check   u32  over bytes 0..35: h = 0x9E3779B97F4A7C15, then for each of the nine u32s
 *                    x: h = (h ^ x) * 0xFF51AFD7ED558CCD (mod 2^64); check = low 32 bits of
 *                    h ^ (h >> 32)
 * Decode checks magic, checksum and consistency (DATA: offset + len <= size, len > 0 unless the
 * message is empty; ACK: len, size and tag zero; CREDIT: len, offset, size and tag zero). */
#ifndef BRAID_WIRE_FRAME_H
#define BRAID_WIRE_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define BRAID_FRAME_HDR_BYTES 40
#define BRAID_FRAME_MAX_LEN (64u << 20) /* largest chunk any sender may frame */
#define BRAID_MSG_MAX_BYTES (1ull << 30) /* maxP2pBytes: test() reports sizes as int */

enum braid_frame_type { BRAID_FRAME_DATA = 1, BRAID_FRAME_ACK = 2, BRAID_FRAME_CREDIT = 3 };

struct braid_frame {
  uint8_t type;
  uint8_t flags;
  uint32_t len;    /* payload bytes following the header */
  uint64_t seq;    /* message sequence number on this connection */
  uint64_t offset; /* of this chunk within the message */
  uint64_t size;   /* whole message size */
  int32_t tag;
};

void braid_frame_encode(const struct braid_frame *f, uint8_t out[BRAID_FRAME_HDR_BYTES]);
/* Checks magic, checksum and internal consistency (len, offset+len <= size <= max). */
int braid_frame_decode(const uint8_t in[BRAID_FRAME_HDR_BYTES], struct braid_frame *f, char *err,
                       size_t errlen);

#endif
