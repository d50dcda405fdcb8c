/* braid-ps wire protocol: what a CollNet head (the net plugin) and a braid-ps server say to each
 * other.  Shared by the plugin and the daemon; every integer is little-endian on the wire.
 *
 * Connection (one TCP connection per head per server, opened by the head in CollNet connect).
 * Version 2: the head proves first, and the server answers nothing keyed by the token before it
 * has (no offline guessing oracle for a stranger); see auth.h for the exact MAC inputs.
 *   head   -> server  HELLO     {version, session[16], rank, nranks, head_nonce[32]}; header
 *                     flags: PS_FLAG_HOLD, PS_FLAG_AUTH (frame authentication, below)
 *   server -> head    CHALLENGE {server_nonce[32]}                (nothing else)
 *   head   -> server  AUTH      {head_proof[32]}
 *                     head_proof = HMAC-SHA256(token, "braid-ps v2 head" | T), where the
 *                     transcript T = HELLO payload | HELLO flags | server_nonce
 *   server -> head    PROOF     {server_proof[32]} = HMAC-SHA256(token, "braid-ps v2 server" | T),
 *                     sent only after head_proof verified; or REFUSE {reason} and a close
 *   server -> head    READY     once every rank 0..nranks-1 of the session has authenticated
 *                     (flags: PS_FLAG_ECHO_ADMIT), or REFUSE {reason text} (rank taken, nranks
 *                     mismatch, ...)
 *   The token never crosses the wire.  The session id is derived by every head from the CollNet
 *   handles of all heads (so all heads of one communicator name the same session, and nobody
 *   else can guess it).  A version-1 head (HELLO version 1) gets REFUSE naming both versions.
 *
 * Frame authentication (HELLO flag PS_FLAG_AUTH, the head's BRAID_PS_FRAME_AUTH): every frame
 * after PROOF (server -> head: READY and on) and after AUTH (head -> server) is followed by a
 * PS_TAG_BYTES tag: Poly1305 over the header and payload, keyed by a one-time key derived from
 * the connection's key K = HMAC-SHA256(token, "braid-ps v2 key" | T), the direction and the
 * frame's number in that direction (counted from 0, never sent).  A modified, dropped, replayed
 * or reordered frame fails its tag; the receiver drops the connection (see auth.h).  Without
 * the flag, frames after the handshake are not authenticated (docs/security.md).
 *
 * Data, per operation `seq` (the head's per-collComm iallreduce count) and partition `part`:
 *   head   -> server  PUSH    {seq, part, dtype, op, rank, weights[16], flags} + len bytes of input
 *   server -> head    RESULT  {seq, part, dtype, op, weights[16], flags} + len bytes: the reduction
 *                     of every rank's input in rank order 0..n-1; weights and flags are rank 0's
 *                     PUSH's (flags: rank 0's admission word, (session generation mod 16) << 4 |
 *                     server, with which it re-admits a lost server; see the net plugin's
 *                     collnet_int.h)
 *   head   -> server  DONE    {seq, part}: this head holds the result
 *   server -> head    RELEASE {seq, part}: every head holds it; the head may complete the op
 *   (With hold-back off — BRAID_PS_HOLD=0 — heads complete on RESULT and never send DONE; the
 *   server frees the partition once its RESULT frames are queued.)
 *   server -> head    ERROR   {seq, part} + reason text; then the server closes the session.
 *   head   -> server  GONE    {seq, part}: sent to a replacement server after losing one: this
 *                     head already completed that partition (it got RELEASE, so every head holds
 *                     the result).  The replacement then answers every head that re-sends the
 *                     partition with RELEASE instead of waiting for this head's input.
 *
 * Failure: a server closes every connection of a session as soon as one of them fails or breaks
 * the protocol, so every head of the session sees the server gone and re-routes the partitions
 * it had there (see assign.h).  A head talks to a server it lost again only in a new session (the
 * heads reconnect; rank 0 re-admits it at an operation every head agrees on).  A server
 * can die while its RELEASE frames of one partition are on their way, so that some heads
 * completed the partition and others did not: the latter re-send it to the replacement, the
 * former tell the replacement GONE for every partition they completed there in their last
 * 2 x PS_WINDOW operations, and the replacement releases the others. */
#ifndef BRAID_PS_PROTO_H
#define BRAID_PS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PS_MAGIC 0x31535042u /* "BPS1" */
#define PS_VERSION 2 /* 2: head proves first, frame authentication */
#define PS_HDR_BYTES 48
#define PS_SESSION_BYTES 16
#define PS_NONCE_BYTES 32
#define PS_PROOF_BYTES 32
#define PS_TAG_BYTES 16 /* the tag after each frame with frame authentication */
#define PS_KEY_BYTES 32
#define PS_MAX_SERVERS 16
#define PS_MAX_RANKS 4096
/* Largest payload of any frame: a partition (BRAID_PS_PARTITION_BYTES is at most this). */
#define PS_MAX_PAYLOAD (16u << 20)
#define PS_MAX_TEXT 256
/* HELLO header `flags` bit 0: the heads use hold-back completion (DONE / RELEASE); every member
 * of a session must send the same value, or the server refuses the late one. */
#define PS_FLAG_HOLD 0x01u
/* HELLO header `flags` bit 1: frames after the handshake carry tags (per connection). */
#define PS_FLAG_AUTH 0x02u
#define PS_FLAG_KNOWN (PS_FLAG_HOLD | PS_FLAG_AUTH)
/* On a REFUSE before authentication: refused for load (too many connections in the handshake,
 * from that address or in all), not for anything the head did: it tries again. */
#define PS_FLAG_BUSY 0x04u
/* On READY: this server echoes rank 0's PUSH flags (the admission word) on every RESULT, so the
 * heads may re-admit a lost server through it (a server without it echoes 0: rank 0 then never
 * re-admits while it holds such a server). */
#define PS_FLAG_ECHO_ADMIT 0x08u

enum ps_type {
  PS_HELLO = 1,
  PS_CHALLENGE = 2,
  PS_AUTH = 3,
  PS_READY = 4,
  PS_REFUSE = 5,
  PS_PUSH = 6,
  PS_RESULT = 7,
  PS_DONE = 8,
  PS_RELEASE = 9,
  PS_ERROR = 10,
  PS_GONE = 11,
  PS_PROOF = 12,
  PS_TYPE_MAX = 12
};

/* Every frame starts with this header (PS_HDR_BYTES on the wire):
 *   0 magic u32 | 4 type u8 | 5 dtype u8 | 6 op u8 | 7 flags u8 | 8 len u32 | 12 part u32 |
 *   16 seq u64 | 24 weights u8[16] | 40 rank u32 | 44 check u32 (FNV-1a of bytes 0..43)
 * Fields a type does not use are zero. */
struct ps_hdr {
  uint8_t type, dtype, op, flags;
  uint32_t len;  /* payload bytes after the header */
  uint32_t part;
  uint64_t seq;
  uint8_t weights[PS_MAX_SERVERS];
  uint32_t rank;
};

/* Payload sizes of the fixed-size frames. */
#define PS_HELLO_BYTES (4 + PS_SESSION_BYTES + 4 + 4 + PS_NONCE_BYTES)
#define PS_CHALLENGE_BYTES PS_NONCE_BYTES
#define PS_AUTH_BYTES PS_PROOF_BYTES
#define PS_SERVER_PROOF_BYTES PS_PROOF_BYTES

struct ps_hello {
  uint32_t version;
  uint8_t session[PS_SESSION_BYTES];
  uint32_t rank, nranks;
  uint8_t nonce[PS_NONCE_BYTES];
};

void ps_hdr_encode(const struct ps_hdr *h, uint8_t out[PS_HDR_BYTES]);
/* Checks magic, checksum, type, and the payload length the type allows (fixed sizes for
 * handshake frames (HELLO, CHALLENGE, AUTH, PROOF), 1..PS_MAX_PAYLOAD for PUSH/RESULT, 0 for DONE/RELEASE/READY, at most
 * PS_MAX_TEXT for REFUSE/ERROR).  0, or -1 with a reason in err. */
int ps_hdr_decode(const uint8_t in[PS_HDR_BYTES], struct ps_hdr *h, char *err, size_t errlen);

void ps_hello_encode(const struct ps_hello *h, uint8_t out[PS_HELLO_BYTES]);
/* Checks version (a version-1 head gets a message saying so), 1 <= nranks <= PS_MAX_RANKS and rank < nranks. */
int ps_hello_decode(const uint8_t in[PS_HELLO_BYTES], struct ps_hello *h, char *err,
                    size_t errlen);

/* Copies a REFUSE/ERROR text payload into a NUL-terminated, printable string. */
void ps_text_decode(const uint8_t *in, size_t n, char *out, size_t outlen);

const char *ps_type_name(int type);

#endif
