/* The listen handle: what NCCL carries out of band from the listener to the connector (its
 * 128-byte ncclNetHandle), and the start of a braid connection's set-up.  The stream handshake
 * that follows on the data network is wire/hello.h.
 *
 * Layout (BRAID_HANDLE_BYTES = 128; integers little-endian unless said otherwise):
 *    0  magic      u32  0x31445242 ("BRD1")
 *    4  version    u8   BRAID_WIRE_VERSION: the version of the whole set-up protocol (this
 *                       handle, wire/hello.h's messages, and what the transports exchange after
 *                       the handshake: wire/ofi.h, wire/verbs.h)
 *    5  family     u8   4 (IPv4) or 6 (IPv6)
 *    6  port       u16  BIG-endian (network order, as in sockaddr), never 0
 *    8  addr       16   the IPv4 address in bytes 8..11 (then zero), or the IPv6 address
 *   24  secret     16   random per listen (the handshake's key)
 *   40  listen_id  u64  random, names the listener in logs
 *   48  tuner_fp   u64  the listener's tuner-inputs fingerprint (tuner_plugin/inputs.h)
 *   56  transport  u8   BRAID_HANDLE_* bits
 *   57  auth_caps  u8   the listener's BRAID_CAPS_* bits
 *   58  zero       6    (not checked)
 *   64  stage      64   the connector's private stage area (comm/setup.h): zeroed by encode,
 *                       ignored by decode
 * Decode checks magic, version, family, port != 0 and that no unknown transport or caps bit is
 * set. */
#ifndef BRAID_WIRE_HANDLE_H
#define BRAID_WIRE_HANDLE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define BRAID_WIRE_VERSION 4 /* 2: challenge-response stream handshake; 3: ofi_rxm receivers grant
                                 credits (wire/frame.h BRAID_FRAME_CREDIT), senders wait for them;
                                 4: verbs rails rejoin (wire/verbs.h REJOIN, FENCE's generation) */

#define BRAID_HANDLE_BYTES 128
#define BRAID_HANDLE_USED_BYTES 58 /* bytes 0..57 above */
#define BRAID_HANDLE_STAGE_OFF 64  /* connector-private bytes start here */
#define BRAID_SECRET_BYTES 16

/* caps: this node can MAC (libsodium loaded); this node requires it (BRAID_NET_AUTH=required).
 * The handle carries the listener's, the hello (wire/hello.h) the connector's. */
#define BRAID_CAPS_MAC 1
#define BRAID_CAPS_REQUIRED 2

/* transport: the listener carries data over libfabric or verbs; FORCED: BRAID_TRANSPORT set. */
#define BRAID_HANDLE_OFI 1
#define BRAID_HANDLE_FORCED 2
#define BRAID_HANDLE_VERBS 4

struct braid_handle {
  struct sockaddr_storage addr; /* listener address and port */
  uint8_t secret[BRAID_SECRET_BYTES];
  uint64_t listen_id; /* random, names the listener in logs */
  uint64_t tuner_fp;  /* the listener's tuner-inputs fingerprint (tuner_plugin/inputs.h) */
  uint8_t transport;  /* the listener's: BRAID_HANDLE_OFI or _VERBS, BRAID_HANDLE_FORCED (BRAID_TRANSPORT set) */
  uint8_t auth_caps;  /* the listener's BRAID_CAPS_* */
};

/* Writes h into buf (BRAID_HANDLE_BYTES), zeroing the stage area. */
void braid_handle_encode(const struct braid_handle *h, void *buf);
/* Parses buf; 0 on success, -1 with a reason in err for a malformed handle. */
int braid_handle_decode(const void *buf, struct braid_handle *h, char *err, size_t errlen);

#endif
