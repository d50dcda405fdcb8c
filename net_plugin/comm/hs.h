/* The data streams' handshake (wire/hello.h: challenge, hello, reply), shared by set-up (connect.c,
 * listen.c) and rejoin (rejoin.c).  docs/security.md says what it guarantees.
 *
 *   listener  -> connector  challenge: a fresh random nonce
 *   connector -> listener   hello: connection id, stream, shape, its own nonce, and
 *                           proof = HMAC-SHA256(secret, "braid hello" | challenge | hello)
 *   listener  -> connector  reply: status, and (status OK, connector's proof verified)
 *                           proof = HMAC-SHA256(secret, "braid reply" | challenge | hello | reply
 *                           | the rail list on stream 0)
 *
 * Neither side sends data before it checked the other's proof (in constant time), so the handle's
 * secret never crosses the data network, and a recorded hello fails against the next nonce.
 * Without libsodium on either node (BRAID_NET_AUTH=auto) the proof is the secret itself (PLAIN,
 * logged once); BRAID_NET_AUTH=required refuses that, on both ends, with a reply that says why. */
#ifndef BRAID_HS_H
#define BRAID_HS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/handle.h"
#include "wire/hello.h"

/* One stream's handshake, connector side. */
struct braid_hs_conn {
  uint8_t chal[BRAID_CHALLENGE_BYTES];
  size_t chal_got;
  uint8_t hello[BRAID_HELLO_BYTES];
  size_t hello_sent;
  uint8_t reply[BRAID_REPLY_BYTES];
  size_t reply_got;
  int auth; /* BRAID_AUTH_* of the hello */
};

/* This node's BRAID_CAPS_* (BRAID_NET_AUTH and whether libsodium loads); -1 with a WARN when
 * BRAID_NET_AUTH is invalid, or is required and libsodium cannot be loaded. */
int braid_hs_caps(void);
/* The mode two nodes use: MAC when both can, NONE when either requires it and not both can,
 * PLAIN otherwise. */
int braid_hs_mode(int caps_a, int caps_b);

/* A fresh challenge; -1 (WARN) when no randomness is available. */
int braid_hs_challenge(uint8_t out[BRAID_CHALLENGE_BYTES]);

/* Connector: the hello answering chal (h: conn_id, stream, shape, flags; auth and caps are set
 * here, mode = auth to use).  -1 with why when chal is malformed or no randomness. */
int braid_hs_hello(const uint8_t secret[BRAID_SECRET_BYTES], int mode, int caps,
                   const uint8_t chal[BRAID_CHALLENGE_BYTES], struct braid_hello *h,
                   uint8_t out[BRAID_HELLO_BYTES], char *why, size_t whylen);
/* Connector: checks the listener's reply (and list, the rail list that followed it on stream 0,
 * else NULL).  0 when OK and proven; else the refusal (BRAID_REPLY_*) or -1 for a malformed or
 * unproven reply, with why. */
int braid_hs_reply_check(const uint8_t secret[BRAID_SECRET_BYTES],
                         const struct braid_hs_conn *hs, const uint8_t *list, size_t list_len,
                         char *why, size_t whylen);

/* Listener: decodes and checks a hello answering chal.  expect: the mode the connection must use
 * (a rejoin: the one agreed at set-up), or -1 to derive it from caps and the hello's caps.
 * Returns BRAID_REPLY_OK or a refusal, with why; h is filled when the hello decoded. */
int braid_hs_hello_check(const uint8_t secret[BRAID_SECRET_BYTES], int caps, int expect,
                         const uint8_t chal[BRAID_CHALLENGE_BYTES],
                         const uint8_t hello[BRAID_HELLO_BYTES], struct braid_hello *h, char *why,
                         size_t whylen);
/* Listener: the reply (its proof only when status is OK and the hello was checked) followed by
 * list (stream 0's rail list, or NULL).  Writes into out and returns the length. */
size_t braid_hs_reply(const uint8_t secret[BRAID_SECRET_BYTES], int status,
                      const uint8_t chal[BRAID_CHALLENGE_BYTES],
                      const uint8_t hello[BRAID_HELLO_BYTES], const uint8_t *list,
                      size_t list_len, uint8_t *out);

/* A refusal in words, for logs. */
const char *braid_hs_status_word(int status);

/* Non-blocking I/O of a fixed-size message: 1 when all of it moved, 0 not yet, -1 when the
 * socket closed or failed. */
int braid_hs_recv(int fd, uint8_t *buf, size_t len, size_t *got);
int braid_hs_send(int fd, const uint8_t *buf, size_t len, size_t *sent);

#endif
