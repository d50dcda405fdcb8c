/* The stream handshake: what the two ends of every data stream (and every rejoin) say before any
 * data, on the stream's TCP socket.  The logic (proofs, modes, rejoin) is comm/hs.h; these are
 * its bytes.  The version is the handle's BRAID_WIRE_VERSION (wire/handle.h), carried again by
 * every message below.  Integers little-endian unless said otherwise; reserved bytes are zero.
 *
 * Challenge, listener -> connector, as soon as a stream is accepted (BRAID_CHALLENGE_BYTES = 24):
 *    0  magic    u32  0x43445242 ("BRDC")
 *    4  version  u16  BRAID_WIRE_VERSION
 *    6  zero     u16  (checked)
 *    8  nonce    16   fresh random
 *
 * Hello, connector -> listener, the answer (BRAID_HELLO_BYTES = 80):
 *    0  magic    u32  0x48445242 ("BRDH")
 *    4  version  u16  BRAID_WIRE_VERSION
 *    6  stream   u16  below per_rail * nrails
 *    8  per_rail u16  streams per rail, 1..BRAID_MAX_STREAMS
 *   10  nrails   u16  1..BRAID_RAILLIST_MAX
 *   12  nbackup  u16  0 or 1, below nrails
 *   14  flags    u16  BRAID_HELLO_* bits
 *   16  conn_id  u64
 *   24  auth     u8   BRAID_AUTH_*
 *   25  caps     u8   BRAID_CAPS_* (wire/handle.h)
 *   26  tc       u8   the connection's traffic class (transport/tclass.h) with BRAID_HELLO_TC,
 *                     else zero (checked)
 *   27  sl       u8   its verbs service level with BRAID_HELLO_SL, else zero (checked)
 *   28  zero     4    (checked)
 *   32  nonce    16   the connector's
 *   48  proof    32   over bytes 0..47 (BRAID_HELLO_SIGNED) and the challenge (comm/hs.c)
 *
 * Reply, listener -> connector (BRAID_REPLY_BYTES = 40):
 *    0  magic    u32  0x41445242 ("BRDA")
 *    4  version  u16  BRAID_WIRE_VERSION
 *    6  status   u16  enum braid_reply_status
 *    8  proof    32   over bytes 0..7 (BRAID_REPLY_SIGNED), and more (comm/hs.c)
 *
 * Rail list, listener -> connector on stream 0 right after an OK reply (it does not fit in the
 * handle) (BRAID_RAILLIST_BYTES(nrails) = 8 + 18 * nrails):
 *    0  magic    u32  0x52445242 ("BRDR")
 *    4  version  u8   BRAID_WIRE_VERSION
 *    5  family   u8   4 or 6, for every rail
 *    6  nrails   u8   1..BRAID_RAILLIST_MAX
 *    7  nbackup  u8   0 or 1, below nrails; backup rails are the last entries
 *    8  per rail, 18 bytes: port u16 BIG-endian (network order, never 0), addr 16 (IPv4 in the
 *       first 4, then zero) */
#ifndef BRAID_WIRE_HELLO_H
#define BRAID_WIRE_HELLO_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "wire/handle.h"

#define BRAID_MAX_STREAMS 16
#define BRAID_NONCE_BYTES 16
#define BRAID_PROOF_BYTES 32 /* HMAC-SHA256 */

#define BRAID_CHALLENGE_BYTES 24
struct braid_challenge {
  uint8_t nonce[BRAID_NONCE_BYTES];
};
void braid_challenge_encode(const struct braid_challenge *c, uint8_t out[BRAID_CHALLENGE_BYTES]);
int braid_challenge_decode(const uint8_t in[BRAID_CHALLENGE_BYTES], struct braid_challenge *c,
                           char *err, size_t errlen);

/* A connection uses per_rail streams on each of its rails; stream s runs on rail s % rails.  At
 * set-up nrails/nbackup are the connector's device (the listener takes min(its, ours)); in a
 * rejoin they are the connection's own. */
#define BRAID_HELLO_BYTES 80
#define BRAID_HELLO_SIGNED 48 /* the hello's bytes before its proof */
struct braid_hello {
  uint64_t conn_id;
  uint16_t stream;
  uint16_t per_rail; /* streams per rail, 1..BRAID_MAX_STREAMS */
  uint16_t nrails;   /* 1..BRAID_RAILLIST_MAX */
  uint16_t nbackup;  /* of which backup rails (0 or 1) */
  uint16_t flags;    /* BRAID_HELLO_REJOIN: replaces a broken or missing stream of conn_id */
  uint8_t auth;      /* BRAID_AUTH_*: how proof was made */
  uint8_t caps;      /* the connector's BRAID_CAPS_* */
  uint8_t tc, sl;    /* with BRAID_HELLO_TC / BRAID_HELLO_SL; else zero */
  uint8_t nonce[BRAID_NONCE_BYTES];
  uint8_t proof[BRAID_PROOF_BYTES];
};

#define BRAID_HELLO_REJOIN 1
#define BRAID_HELLO_OFI 2   /* the connector carries data over libfabric (BRAID_TRANSPORT) */
#define BRAID_HELLO_VERBS 4 /* ... over verbs */
/* A set-up hello names the traffic class the connector chose for the connection (NCCL's
 * trafficClass, BRAID_IB_TC, BRAID_IB_SL: transport/tclass.h); the listener applies it to its
 * end.  Without the bits, the default.  Added within wire version 2: a listener built before
 * them refuses such a hello ("unknown flags"), so a job that sets a class needs this braid on
 * every node; one that sets none talks to any.  Rejoin hellos carry none (the listener keeps
 * the connection's). */
#define BRAID_HELLO_TC 8  /* tc is set */
#define BRAID_HELLO_SL 16 /* sl is set */

/* auth: MAC: proof = HMAC-SHA256(secret, ...) (hs.c); PLAIN: proof = the secret, zero-padded (a
 * node without libsodium, BRAID_NET_AUTH=auto); NONE: no proof, the connector refuses because one
 * side requires authentication the other cannot do (the listener logs why). */
#define BRAID_AUTH_NONE 0
#define BRAID_AUTH_PLAIN 1
#define BRAID_AUTH_MAC 2

void braid_hello_encode(const struct braid_hello *h, uint8_t out[BRAID_HELLO_BYTES]);
int braid_hello_decode(const uint8_t in[BRAID_HELLO_BYTES], struct braid_hello *h, char *err,
                       size_t errlen);

#define BRAID_REPLY_BYTES 40
#define BRAID_REPLY_SIGNED 8
enum braid_reply_status {
  BRAID_REPLY_OK = 0,
  BRAID_REPLY_AUTH = 1,      /* the two nodes' BRAID_NET_AUTH / libsodium do not agree */
  BRAID_REPLY_PROOF = 2,     /* wrong proof */
  BRAID_REPLY_TRANSPORT = 3, /* BRAID_TRANSPORT differs */
  BRAID_REPLY_STREAM = 4,    /* not a stream the listener expects */
  BRAID_REPLY_MAX = 4
};
struct braid_reply {
  uint16_t status;
  uint8_t proof[BRAID_PROOF_BYTES];
};
void braid_reply_encode(const struct braid_reply *r, uint8_t out[BRAID_REPLY_BYTES]);
int braid_reply_decode(const uint8_t in[BRAID_REPLY_BYTES], struct braid_reply *r, char *err,
                       size_t errlen);

#define BRAID_RAILLIST_MAX 16
#define BRAID_RAILLIST_HDR 8
#define BRAID_RAILLIST_ENTRY 18
#define BRAID_RAILLIST_BYTES(n) (BRAID_RAILLIST_HDR + (n) * BRAID_RAILLIST_ENTRY)

struct braid_raillist {
  int nrails;
  int nbackup; /* the last nbackup entries are backup rails (0 or 1) */
  struct sockaddr_storage addr[BRAID_RAILLIST_MAX];
};

/* Returns the encoded length. */
size_t braid_raillist_encode(const struct braid_raillist *l, uint8_t *out);
/* Parses the fixed header of buf (len >= BRAID_RAILLIST_HDR): returns the full length the list
 * needs, or -1 with a reason when the header is malformed. */
int braid_raillist_len(const uint8_t *buf, char *err, size_t errlen);
int braid_raillist_decode(const uint8_t *buf, size_t len, struct braid_raillist *l, char *err,
                          size_t errlen);

#endif
