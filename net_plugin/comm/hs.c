/* The data streams' handshake (see hs.h). */
#include "comm/hs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "param.h"
#include "transport/socket/sock.h"
#include "sodium_lib.h"

static const char *caps_word(int caps) {
  switch (caps & (BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED)) {
    case BRAID_CAPS_MAC: return "can authenticate";
    case BRAID_CAPS_MAC | BRAID_CAPS_REQUIRED: return "requires authentication (BRAID_NET_AUTH=required)";
    case BRAID_CAPS_REQUIRED: return "requires authentication but has no libsodium";
    default: return "cannot authenticate (no libsodium, or BRAID_NET_AUTH=plain)";
  }
}

int braid_hs_caps(void) {
  const char *v = braid_param_str(BRAID_P_NET_AUTH);
  bool plain = !strcmp(v, "plain"), required = !strcmp(v, "required") || !*v; /* "": the default */
  if (!plain && !required && *v && strcmp(v, "auto")) {
    BRAID_WARN("BRAID_NET_AUTH=\"%s\": use auto, required or plain", v);
    return -1;
  }
  if (plain) return 0;
  if (braid_sodium()) return BRAID_CAPS_MAC | (required ? BRAID_CAPS_REQUIRED : 0);
  if (required) {
    BRAID_WARN("BRAID_NET_AUTH=required%s, but libsodium cannot be loaded (%s): no connection can be "
               "authenticated; apt-get install libsodium23, or set BRAID_NET_AUTH=auto on every node to let "
               "connections prove the secret in clear (docs/security.md)",
               braid_param_from(BRAID_P_NET_AUTH) ? "" : " (the default)", braid_sodium_error());
    return -1;
  }
  return 0;
}

int braid_hs_mode(int a, int b) {
  if (a & b & BRAID_CAPS_MAC) return BRAID_AUTH_MAC;
  if ((a | b) & BRAID_CAPS_REQUIRED) return BRAID_AUTH_NONE;
  return BRAID_AUTH_PLAIN;
}

int braid_hs_challenge(uint8_t out[BRAID_CHALLENGE_BYTES]) {
  struct braid_challenge c;
  if (braid_random(c.nonce, sizeof c.nonce) != 0) return -1;
  braid_challenge_encode(&c, out);
  return 0;
}

/* HMAC-SHA256(secret, label | parts...); NULL-terminated list of (pointer, length). */
struct piece {
  const uint8_t *p;
  size_t n;
};
static void mac(const uint8_t secret[BRAID_SECRET_BYTES], const char *label,
                const struct piece *parts, uint8_t out[BRAID_PROOF_BYTES]) {
  const struct braid_sodium *s = braid_sodium(); /* callers checked: MAC mode needs it */
  crypto_auth_hmacsha256_state st;
  s->crypto_auth_hmacsha256_init(&st, secret, BRAID_SECRET_BYTES);
  s->crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, strlen(label) + 1);
  for (; parts->p; parts++) s->crypto_auth_hmacsha256_update(&st, parts->p, parts->n);
  s->crypto_auth_hmacsha256_final(&st, out);
}

static bool same(const uint8_t *a, const uint8_t *b, size_t n) {
  uint8_t d = 0;
  for (size_t i = 0; i < n; i++) d |= a[i] ^ b[i];
  return d == 0;
}

static void hello_proof(const uint8_t secret[BRAID_SECRET_BYTES], int auth,
                        const uint8_t chal[BRAID_CHALLENGE_BYTES],
                        const uint8_t hello[BRAID_HELLO_BYTES], uint8_t out[BRAID_PROOF_BYTES]) {
  memset(out, 0, BRAID_PROOF_BYTES);
  if (auth == BRAID_AUTH_PLAIN) memcpy(out, secret, BRAID_SECRET_BYTES);
  if (auth != BRAID_AUTH_MAC) return;
  const struct piece parts[] = {{chal, BRAID_CHALLENGE_BYTES}, {hello, BRAID_HELLO_SIGNED}, {NULL, 0}};
  mac(secret, "braid hello", parts, out);
}

static void reply_proof(const uint8_t secret[BRAID_SECRET_BYTES],
                        const uint8_t chal[BRAID_CHALLENGE_BYTES],
                        const uint8_t hello[BRAID_HELLO_BYTES], const uint8_t *reply,
                        const uint8_t *list, size_t list_len, uint8_t out[BRAID_PROOF_BYTES]) {
  const struct piece parts[] = {{chal, BRAID_CHALLENGE_BYTES}, {hello, BRAID_HELLO_BYTES},
                                {reply, BRAID_REPLY_SIGNED}, {list ? list : reply, list ? list_len : 0},
                                {NULL, 0}};
  mac(secret, "braid reply", parts, out);
}

int braid_hs_hello(const uint8_t secret[BRAID_SECRET_BYTES], int mode, int caps,
                   const uint8_t chal[BRAID_CHALLENGE_BYTES], struct braid_hello *h,
                   uint8_t out[BRAID_HELLO_BYTES], char *why, size_t whylen) {
  struct braid_challenge c;
  if (braid_challenge_decode(chal, &c, why, whylen) != 0) return -1;
  h->auth = (uint8_t)mode;
  h->caps = (uint8_t)caps;
  if (braid_random(h->nonce, sizeof h->nonce) != 0)
    return snprintf(why, whylen, "no randomness for a nonce"), -1;
  memset(h->proof, 0, sizeof h->proof);
  braid_hello_encode(h, out);
  hello_proof(secret, mode, chal, out, h->proof);
  memcpy(out + BRAID_HELLO_SIGNED, h->proof, BRAID_PROOF_BYTES);
  return 0;
}

int braid_hs_reply_check(const uint8_t secret[BRAID_SECRET_BYTES],
                         const struct braid_hs_conn *hs, const uint8_t *list, size_t list_len,
                         char *why, size_t whylen) {
  struct braid_reply r;
  if (braid_reply_decode(hs->reply, &r, why, whylen) != 0) return -1;
  if (r.status != BRAID_REPLY_OK)
    return snprintf(why, whylen, "the listener refused the stream: %s (its log says more)",
                    braid_hs_status_word(r.status)), r.status;
  if (hs->auth != BRAID_AUTH_MAC) return 0; /* PLAIN: nothing the listener could prove */
  uint8_t want[BRAID_PROOF_BYTES];
  reply_proof(secret, hs->chal, hs->hello, hs->reply, list, list_len, want);
  if (braid_sodium()->sodium_memcmp(want, r.proof, sizeof want) != 0)
    return snprintf(why, whylen, "the listener's reply carries a wrong proof (not the listener "
                    "of this handle: a stray or forged reply)"), -1;
  return 0;
}

int braid_hs_hello_check(const uint8_t secret[BRAID_SECRET_BYTES], int caps, int expect,
                         const uint8_t chal[BRAID_CHALLENGE_BYTES],
                         const uint8_t hello[BRAID_HELLO_BYTES], struct braid_hello *h, char *why,
                         size_t whylen) {
  if (braid_hello_decode(hello, h, why, whylen) != 0) return BRAID_REPLY_STREAM;
  int mode = expect >= 0 ? expect : braid_hs_mode(caps, h->caps);
  if (h->auth == BRAID_AUTH_NONE && mode == BRAID_AUTH_NONE)
    return snprintf(why, whylen, "authentication modes disagree: this node %s, the peer %s; set "
                    "BRAID_NET_AUTH alike and install libsodium23 on every node",
                    caps_word(caps), caps_word(h->caps)), BRAID_REPLY_AUTH;
  if (h->auth != mode)
    return snprintf(why, whylen, "hello %s where %s is expected (a stray or forged connection)",
                    h->auth == BRAID_AUTH_MAC ? "authenticated" : h->auth == BRAID_AUTH_PLAIN ?
                    "with the secret in clear" : "refusing", mode == BRAID_AUTH_MAC ?
                    "an authenticated one" : mode == BRAID_AUTH_PLAIN ? "one with the secret" :
                    "a refusal"), BRAID_REPLY_AUTH;
  uint8_t want[BRAID_PROOF_BYTES];
  hello_proof(secret, mode, chal, hello, want);
  bool ok = mode == BRAID_AUTH_MAC ? braid_sodium()->sodium_memcmp(want, h->proof, sizeof want) == 0
                                   : same(want, h->proof, sizeof want);
  if (!ok)
    return snprintf(why, whylen, "wrong proof (a stray, replayed or misdirected connection)"),
           BRAID_REPLY_PROOF;
  if (mode == BRAID_AUTH_PLAIN)
    BRAID_WARN_ONCE("accepted a data stream whose hello carried the connection secret in clear "
                    "(this node %s, the peer %s): anyone who reads the data network can attach "
                    "streams; install libsodium23 on every node, or set BRAID_NET_AUTH=required",
                    caps_word(caps), caps_word(h->caps));
  return BRAID_REPLY_OK;
}

size_t braid_hs_reply(const uint8_t secret[BRAID_SECRET_BYTES], int status,
                      const uint8_t chal[BRAID_CHALLENGE_BYTES],
                      const uint8_t hello[BRAID_HELLO_BYTES], const uint8_t *list,
                      size_t list_len, uint8_t *out) {
  struct braid_reply r = {.status = (uint16_t)status};
  braid_reply_encode(&r, out);
  if (status == BRAID_REPLY_OK && list) memcpy(out + BRAID_REPLY_BYTES, list, list_len);
  if (status == BRAID_REPLY_OK && hello[24] == BRAID_AUTH_MAC) {
    reply_proof(secret, chal, hello, out, list, list_len, r.proof);
    memcpy(out + BRAID_REPLY_SIGNED, r.proof, BRAID_PROOF_BYTES);
  }
  return BRAID_REPLY_BYTES + (status == BRAID_REPLY_OK && list ? list_len : 0);
}

const char *braid_hs_status_word(int status) {
  switch (status) {
    case BRAID_REPLY_OK: return "accepted";
    case BRAID_REPLY_AUTH: return "the nodes' BRAID_NET_AUTH or libsodium disagree";
    case BRAID_REPLY_PROOF: return "wrong proof of the handle's secret";
    case BRAID_REPLY_TRANSPORT: return "the nodes' BRAID_TRANSPORT disagree";
    default: return "not a stream it expects";
  }
}

int braid_hs_recv(int fd, uint8_t *buf, size_t len, size_t *got) {
  while (*got < len) {
    ssize_t n = recv(fd, buf + *got, len - *got, MSG_DONTWAIT);
    if (n > 0) *got += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    else return -1;
  }
  return 1;
}

int braid_hs_send(int fd, const uint8_t *buf, size_t len, size_t *sent) {
  while (*sent < len) {
    ssize_t n = send(fd, buf + *sent, len - *sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) *sent += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    else return -1;
  }
  return 1;
}
