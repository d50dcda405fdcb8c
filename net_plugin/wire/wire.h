/* Everything braid puts on the wire or in NCCL's handle, with explicit little-endian encoding.
 *
 * - The listen handle (in NCCL's 128-byte buffer): listener address and a random per-listen
 *   secret.  Bytes 64..127 are the connector's private stage area (see setup.c).
 * - The stream handshake (every data stream, and every rejoin, before any data; hs.h): the
 *   listener's challenge (a fresh nonce), the connector's hello (connection id, stream, the
 *   connection's shape, its own nonce and a proof that it knows the handle's secret: an HMAC over
 *   both nonces and the hello, never the secret itself), and the listener's reply (a status and
 *   its own proof, over the rail list too on stream 0).
 * - The frame header: one per chunk of a message.  Chunks carry (message sequence, offset,
 *   length, message size, tag) so the receiver places each one straight into the posted buffer. */
#ifndef BRAID_WIRE_H
#define BRAID_WIRE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define BRAID_HANDLE_BYTES 128
#define BRAID_HANDLE_STAGE_OFF 64 /* connector-private bytes start here */
#define BRAID_SECRET_BYTES 16
#define BRAID_WIRE_VERSION 2 /* 2: challenge-response stream handshake */

struct braid_handle {
  struct sockaddr_storage addr; /* listener address and port */
  uint8_t secret[BRAID_SECRET_BYTES];
  uint64_t listen_id; /* random, names the listener in logs */
  uint64_t tuner_fp;  /* the listener's tuner-inputs fingerprint (tuner_plugin/inputs.h) */
  uint8_t transport;  /* the listener's: BRAID_HANDLE_OFI or _VERBS, BRAID_HANDLE_FORCED (BRAID_TRANSPORT set) */
  uint8_t auth_caps;  /* the listener's BRAID_CAPS_* (hs.h) */
};

#define BRAID_HANDLE_OFI 1
#define BRAID_HANDLE_FORCED 2
#define BRAID_HANDLE_VERBS 4

/* Writes h into buf (BRAID_HANDLE_BYTES), zeroing the stage area. */
void braid_handle_encode(const struct braid_handle *h, void *buf);
/* Parses buf; 0 on success, -1 with a reason in err for a malformed handle. */
int braid_handle_decode(const void *buf, struct braid_handle *h, char *err, size_t errlen);

#define BRAID_MAX_STREAMS 16
#define BRAID_NONCE_BYTES 16
#define BRAID_PROOF_BYTES 32 /* HMAC-SHA256 */

/* Listener -> connector, as soon as a stream is accepted: magic(4) version(2) zero(2) nonce(16). */
#define BRAID_CHALLENGE_BYTES 24
struct braid_challenge {
  uint8_t nonce[BRAID_NONCE_BYTES];
};
void braid_challenge_encode(const struct braid_challenge *c, uint8_t out[BRAID_CHALLENGE_BYTES]);
int braid_challenge_decode(const uint8_t in[BRAID_CHALLENGE_BYTES], struct braid_challenge *c,
                           char *err, size_t errlen);

/* Connector -> listener, the answer to the challenge.  A connection uses per_rail streams on each
 * of its rails; stream s runs on rail s % rails.  At set-up nrails/nbackup are the connector's
 * device (the listener takes min(its, ours)); in a rejoin they are the connection's own. */
#define BRAID_HELLO_BYTES 80
struct braid_hello {
  uint64_t conn_id;
  uint16_t stream;
  uint16_t per_rail; /* streams per rail, 1..BRAID_MAX_STREAMS */
  uint16_t nrails;   /* 1..BRAID_RAILLIST_MAX */
  uint16_t nbackup;  /* of which backup rails (0 or 1) */
  uint16_t flags;    /* BRAID_HELLO_REJOIN: replaces a broken or missing stream of conn_id */
  uint8_t auth;      /* BRAID_AUTH_*: how proof was made */
  uint8_t caps;      /* the connector's BRAID_CAPS_* */
  uint8_t nonce[BRAID_NONCE_BYTES];
  uint8_t proof[BRAID_PROOF_BYTES];
};

#define BRAID_HELLO_REJOIN 1
#define BRAID_HELLO_OFI 2   /* the connector carries data over libfabric (BRAID_TRANSPORT) */
#define BRAID_HELLO_VERBS 4 /* ... over verbs */

/* auth: MAC: proof = HMAC-SHA256(secret, ...) (hs.c); PLAIN: proof = the secret, zero-padded (a
 * node without libsodium, BRAID_NET_AUTH=auto); NONE: no proof, the connector refuses because one
 * side requires authentication the other cannot do (the listener logs why). */
#define BRAID_AUTH_NONE 0
#define BRAID_AUTH_PLAIN 1
#define BRAID_AUTH_MAC 2
/* caps: this node can MAC (libsodium loaded); this node requires it (BRAID_NET_AUTH=required). */
#define BRAID_CAPS_MAC 1
#define BRAID_CAPS_REQUIRED 2

void braid_hello_encode(const struct braid_hello *h, uint8_t out[BRAID_HELLO_BYTES]);
int braid_hello_decode(const uint8_t in[BRAID_HELLO_BYTES], struct braid_hello *h, char *err,
                       size_t errlen);
#define BRAID_HELLO_SIGNED 48 /* the hello's bytes before its proof */

/* Listener -> connector, the answer to the hello: magic(4) version(2) status(2) proof(32); on
 * stream 0 with status OK the rail list follows. */
#define BRAID_REPLY_BYTES 40
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
#define BRAID_REPLY_SIGNED 8

/* The listener's rail list, sent on stream 0 right after its reply (it does not fit in the handle): magic(4) version(1) family(1) nrails(1) nbackup(1), then port(2) addr(16) per
 * rail, backup rails last. */
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

#define BRAID_FRAME_HDR_BYTES 40
#define BRAID_FRAME_MAX_LEN (64u << 20) /* largest chunk any sender may frame */
#define BRAID_MSG_MAX_BYTES (1ull << 30) /* maxP2pBytes: test() reports sizes as int */

/* DATA: a chunk of a message.  ACK (with several streams, receiver -> sender on the same
 * stream): seq = frames of this stream received in full so far, offset = the receiver holds
 * every byte of every message below this sequence number (0: not said), len 0. */
enum braid_frame_type { BRAID_FRAME_DATA = 1, BRAID_FRAME_ACK = 2 };

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
