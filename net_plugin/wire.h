/* Everything braid puts on the wire or in NCCL's handle, with explicit little-endian encoding.
 *
 * - The listen handle (in NCCL's 128-byte buffer): listener address and a random per-listen
 *   secret.  Bytes 64..127 are the connector's private stage area (see setup.c).
 * - The hello (first bytes of every data stream, connector -> listener): secret, connection id,
 *   stream index and count.  A connection that does not present the secret is dropped.
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
#define BRAID_WIRE_VERSION 1

struct braid_handle {
  struct sockaddr_storage addr; /* listener address and port */
  uint8_t secret[BRAID_SECRET_BYTES];
  uint64_t listen_id; /* random, names the listener in logs */
  uint64_t tuner_fp;  /* the listener's tuner-inputs fingerprint (tuner_plugin/inputs.h) */
  uint8_t transport;  /* the listener's: BRAID_HANDLE_OFI or _VERBS, BRAID_HANDLE_FORCED (BRAID_TRANSPORT set) */
};

#define BRAID_HANDLE_OFI 1
#define BRAID_HANDLE_FORCED 2
#define BRAID_HANDLE_VERBS 4

/* Writes h into buf (BRAID_HANDLE_BYTES), zeroing the stage area. */
void braid_handle_encode(const struct braid_handle *h, void *buf);
/* Parses buf; 0 on success, -1 with a reason in err for a malformed handle. */
int braid_handle_decode(const void *buf, struct braid_handle *h, char *err, size_t errlen);

#define BRAID_HELLO_BYTES 40
#define BRAID_MAX_STREAMS 16

/* A connection uses per_rail streams on each of min(connector's, listener's) rails; stream s
 * runs on rail s % rails. */
struct braid_hello {
  uint8_t secret[BRAID_SECRET_BYTES];
  uint64_t conn_id;
  uint16_t stream;
  uint16_t per_rail; /* streams per rail, 1..BRAID_MAX_STREAMS */
  uint16_t nrails;   /* the connector's rails, 1..BRAID_RAILLIST_MAX */
  uint16_t nbackup;  /* of which backup rails (0 or 1) */
  uint16_t flags;    /* BRAID_HELLO_REJOIN: replaces a broken or missing stream of conn_id */
};

#define BRAID_HELLO_REJOIN 1
#define BRAID_HELLO_OFI 2   /* the connector carries data over libfabric (BRAID_TRANSPORT) */
#define BRAID_HELLO_VERBS 4 /* ... over verbs */

void braid_hello_encode(const struct braid_hello *h, uint8_t out[BRAID_HELLO_BYTES]);
int braid_hello_decode(const uint8_t in[BRAID_HELLO_BYTES], struct braid_hello *h, char *err,
                       size_t errlen);

/* The listener's rail list, sent on stream 0 right after its hello is accepted (it does not fit in
 * the handle): magic(4) version(1) family(1) nrails(1) nbackup(1), then port(2) addr(16) per
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
