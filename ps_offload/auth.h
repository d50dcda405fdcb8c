/* braid-ps authentication: challenge-response on the job token, a key per connection and frame
 * tags, with libsodium, which is opened at run time (common/sodium_lib.h): without it nothing
 * authenticates, and the CollNet client and braid-ps refuse to start rather than run
 * unauthenticated.
 *
 * Both sides hold the job's token (BRAID_PS_TOKEN); it never crosses the wire.  The handshake
 * (proto.h) binds a transcript T = HELLO payload (version, session, rank, nranks, head nonce) |
 * HELLO flags | server nonce.  The head proves first, HMAC-SHA256(token, "braid-ps v2 head" | T);
 * only then does the server prove, HMAC-SHA256(token, "braid-ps v2 server" | T).  So a stranger
 * who connects gets a random nonce and a refusal, nothing computed from the token; a proof can be
 * neither replayed on another connection (fresh nonces on both sides) nor moved to another
 * session, rank, session size or flag set (all in T).
 *
 * Frame tags: K = HMAC-SHA256(token, "braid-ps v2 key" | T), one per connection.  Frame number n
 * (counted per direction from 0, never sent) sent by direction d gets the Poly1305 tag of its
 * header and payload under the one-time key ChaCha20-IETF(K, nonce = d (u32 LE) | n (u64 LE))
 * [0..31], the construction of RFC 8439's AEAD without encryption.  A changed bit, a dropped,
 * replayed or reordered frame fails its tag. */
#ifndef BRAID_PS_AUTH_H
#define BRAID_PS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define PS_TOKEN_MAX 4096 /* bytes of a job's token, at most (braid-ps and the heads) */

#ifdef __cplusplus
extern "C" {
#endif

/* Loads and initialises libsodium; 0, or -1 when it cannot (ps_auth_error() says why: not
 * installed, too old, no entropy).  Safe to call many times from many threads.  Until it has
 * returned 0 the functions below fail closed: zeros out, ps_auth_equal never true. */
int ps_auth_init(void);
const char *ps_auth_error(void);
void ps_auth_random(void *buf, size_t n);

/* The handshake transcript T (see above). */
struct ps_transcript {
  uint8_t hello[PS_HELLO_BYTES]; /* ps_hello_encode() of the HELLO */
  uint8_t flags;                 /* the HELLO header's flags */
  uint8_t server_nonce[PS_NONCE_BYTES];
};

void ps_auth_head_proof(const char *token, const struct ps_transcript *t,
                        uint8_t out[PS_PROOF_BYTES]);
void ps_auth_server_proof(const char *token, const struct ps_transcript *t,
                          uint8_t out[PS_PROOF_BYTES]);
void ps_auth_conn_key(const char *token, const struct ps_transcript *t, uint8_t key[PS_KEY_BYTES]);

/* Constant-time comparisons: 1 when equal. */
int ps_auth_equal(const uint8_t a[PS_PROOF_BYTES], const uint8_t b[PS_PROOF_BYTES]);
int ps_auth_equal_tag(const uint8_t a[PS_TAG_BYTES], const uint8_t b[PS_TAG_BYTES]);

/* The session id of a CollNet communicator: a hash of every head's handle nonce, in rank order. */
void ps_auth_session_id(const uint8_t *const *nonces, int n, size_t nonce_bytes,
                        uint8_t out[PS_SESSION_BYTES]);

/* ---- Frame tags ---- */

enum { PS_DIR_HEAD = 1, PS_DIR_SERVER = 2 }; /* who sends the frame */

/* An incremental tag (a Poly1305 state, opaque here). */
struct ps_mac {
  uint8_t st[256] __attribute__((aligned(16)));
};

void ps_mac_start(struct ps_mac *m, const uint8_t key[PS_KEY_BYTES], int dir, uint64_t n);
void ps_mac_update(struct ps_mac *m, const void *p, size_t len);
void ps_mac_final(struct ps_mac *m, uint8_t tag[PS_TAG_BYTES]);
/* 1 when the tag of what was fed equals tag (constant time). */
int ps_mac_verify(struct ps_mac *m, const uint8_t tag[PS_TAG_BYTES]);
/* The tag of a whole frame: header (PS_HDR_BYTES, encoded) and payload. */
void ps_mac_frame(const uint8_t key[PS_KEY_BYTES], int dir, uint64_t n,
                  const uint8_t hdr[PS_HDR_BYTES], const void *payload, size_t len,
                  uint8_t tag[PS_TAG_BYTES]);

#ifdef __cplusplus
}
#endif

#endif
