/* braid-ps authentication: challenge-response on the job token with libsodium, which is opened
 * at run time (common/sodium_lib.h): without it nothing authenticates, and the CollNet client and
 * braid-ps refuse to start rather than run unauthenticated.
 *
 * Both sides hold the job's token (BRAID_PS_TOKEN); it never crosses the wire.  Each side sends a
 * fresh random nonce and the other proves knowledge of the token with HMAC-SHA256 over the
 * nonce, the session id and (for the head) its rank and the session size, so a proof can be
 * neither replayed on another connection nor moved to another session or rank. */
#ifndef BRAID_PS_AUTH_H
#define BRAID_PS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Loads and initialises libsodium; 0, or -1 when it cannot (ps_auth_error() says why: not
 * installed, too old, no entropy).  Safe to call many times from many threads.  Until it has
 * returned 0 the functions below fail closed: zeros out, ps_auth_equal never true. */
int ps_auth_init(void);
const char *ps_auth_error(void);
void ps_auth_random(void *buf, size_t n);

/* The server's proof for a head's nonce. */
void ps_auth_server_proof(const char *token, const uint8_t head_nonce[PS_NONCE_BYTES],
                          const uint8_t session[PS_SESSION_BYTES], uint8_t out[PS_PROOF_BYTES]);
/* The head's proof for a server's nonce. */
void ps_auth_head_proof(const char *token, const uint8_t server_nonce[PS_NONCE_BYTES],
                        const uint8_t session[PS_SESSION_BYTES], uint32_t rank, uint32_t nranks,
                        uint8_t out[PS_PROOF_BYTES]);
/* Constant-time comparison: 1 when equal. */
int ps_auth_equal(const uint8_t a[PS_PROOF_BYTES], const uint8_t b[PS_PROOF_BYTES]);

/* The session id of a CollNet communicator: a hash of every head's handle nonce, in rank order. */
void ps_auth_session_id(const uint8_t *const *nonces, int n, size_t nonce_bytes,
                        uint8_t out[PS_SESSION_BYTES]);

#endif
