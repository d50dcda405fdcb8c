/* The head's side of the braid-ps handshake (see ps_hs.h). */
#include "collnet/ps_hs.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "param.h"
#include "transport/socket/sock.h"

void ps_hs_fail(struct ps_hs *h, const char *fmt, const char *detail) {
  snprintf(h->why, sizeof h->why, fmt, detail);
  if (h->fd >= 0) close(h->fd);
  h->fd = -1;
  h->st = PS_HS_FAILED;
}

/* Turned away before anything was proven (a server busy with a flood of strangers evicts the
 * oldest and refuses for load; one restarting closes): tried again after 100 ms, doubling up to
 * 1 s, until the connect's deadline. */
static void hs_retry(struct ps_hs *h, const char *why) {
  snprintf(h->why, sizeof h->why, "%s", why);
  if (h->fd >= 0) close(h->fd);
  h->fd = -1;
  h->got = 0;
  uint64_t wait = 100000000ull << (h->tries < 4 ? h->tries : 4);
  h->retry_at = braid_now_ns() + (wait < 1000000000ull ? wait : 1000000000ull);
  h->tries++;
  h->st = PS_HS_RETRY;
}

static int hs_send(struct ps_hs *h, const struct ps_hdr *hdr, const void *payload) {
  uint8_t frame[PS_HDR_BYTES + PS_HELLO_BYTES];
  ps_hdr_encode(hdr, frame);
  memcpy(frame + PS_HDR_BYTES, payload, hdr->len);
  ssize_t n = send(h->fd, frame, PS_HDR_BYTES + hdr->len, MSG_NOSIGNAL);
  return n == (ssize_t)(PS_HDR_BYTES + hdr->len) ? 0 : -1;
}

/* Reads one whole frame into h->buf; 1 when complete, 0 when more is needed, -1 on error. */
static int hs_read(struct ps_hs *h, struct ps_hdr *hdr) {
  for (;;) {
    size_t want = PS_HDR_BYTES;
    if (h->got >= PS_HDR_BYTES) {
      char err[128];
      if (ps_hdr_decode(h->buf, hdr, err, sizeof err) != 0) {
        ps_hs_fail(h, "bad frame from the server: %s", err);
        return -1;
      }
      if (hdr->type != PS_CHALLENGE && hdr->type != PS_PROOF && hdr->type != PS_READY &&
          hdr->type != PS_REFUSE && hdr->type != PS_ERROR) {
        ps_hs_fail(h, "unexpected %s frame during the handshake", ps_type_name(hdr->type));
        return -1;
      }
      /* at most PS_MAX_TEXT for these types: fits buf; tagged once the server has proven */
      want = PS_HDR_BYTES + hdr->len + (h->auth && h->st == PS_HS_READY_WAIT ? PS_TAG_BYTES : 0);
      if (h->got == want) {
        h->got = 0;
        return 1;
      }
    }
    ssize_t n = recv(h->fd, h->buf + h->got, want - h->got, 0);
    if (n > 0) {
      h->got += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (h->st == PS_HS_CHALLENGE) /* nothing proven yet: a busy server evicted it, or one restarting */
      hs_retry(h, n == 0 ? "the server closed the connection before its challenge" : strerror(errno));
    else
      ps_hs_fail(h, "%s", n == 0 ? "the server closed the connection during the handshake" : strerror(errno));
    return -1;
  }
}

static int resolve(const char *host, const char *port, struct sockaddr_storage *ss, socklen_t *len,
                   char *err, size_t errlen) {
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int r = getaddrinfo(host, port, &hints, &res);
  if (r != 0 || !res) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(r));
    return -1;
  }
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

static void tune_ps_socket(int fd) {
  braid_sock_tune(fd);
  braid_sock_short_queue(fd); /* DONE frames must not wait behind megabytes in the kernel */
  braid_sock_set_timeout(fd, braid_param_int(BRAID_P_PS_TIMEOUT_MS));
}

void ps_hs_start(struct ps_hs *h, int i, const struct braid_iface *const *rails, int nrails,
                     uint64_t now) {
  char err[300];
  if (!h->addrlen && resolve(h->host, h->port, &h->addr, &h->addrlen, err, sizeof err) != 0) {
    h->addrlen = 0;
    ps_hs_fail(h, "%s", err);
    return;
  }
  const struct sockaddr_storage ss = h->addr;
  const socklen_t len = h->addrlen;
  const struct braid_iface *ifc = NULL;
  for (int k = 0; k < nrails && !ifc; k++)
    if (rails[(i + k) % nrails]->addr.ss_family == ss.ss_family) ifc = rails[(i + k) % nrails];
  h->fd = ifc ? braid_sock_open(ifc) : socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (h->fd < 0) {
    ps_hs_fail(h, "cannot open a socket: %s", strerror(errno));
    return;
  }
  tune_ps_socket(h->fd);
  if (connect(h->fd, (const struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
    snprintf(h->why, sizeof h->why, "connect: %s", strerror(errno));
    close(h->fd);
    h->fd = -1;
    h->st = PS_HS_RETRY;
    h->retry_at = now + 200000000ull;
    return;
  }
  h->st = PS_HS_CONNECTING;
}

void ps_hs_step(struct ps_hs *h, int i, const char *token,
                    const struct braid_iface *const *rails, int nrails, uint64_t now) {
  struct ps_hdr hdr;
  switch (h->st) {
  case PS_HS_RETRY:
    if (now >= h->retry_at) ps_hs_start(h, i, rails, nrails, now);
    return;
  case PS_HS_CONNECTING: {
    int c = braid_sock_connected(h->fd);
    if (c == 0) return;
    if (c < 0) {
      snprintf(h->why, sizeof h->why, "connect: %s", strerror(errno));
      close(h->fd);
      h->fd = -1;
      h->st = PS_HS_RETRY; /* the server may not be up yet: retry until the deadline */
      h->retry_at = now + 200000000ull;
      return;
    }
    struct ps_hello hello = {.version = PS_VERSION, .rank = h->rank, .nranks = h->nranks};
    memcpy(hello.session, h->session, PS_SESSION_BYTES);
    ps_auth_random(hello.nonce, PS_NONCE_BYTES);
    ps_hello_encode(&hello, h->t.hello);
    h->auth = braid_param_int(BRAID_P_PS_FRAME_AUTH) != 0;
    h->t.flags = (uint8_t)((h->hold ? PS_FLAG_HOLD : 0) | (h->auth ? PS_FLAG_AUTH : 0));
    struct ps_hdr hh = {.type = PS_HELLO, .len = PS_HELLO_BYTES, .flags = h->t.flags,
                        .rank = h->rank};
    if (hs_send(h, &hh, h->t.hello) != 0) ps_hs_fail(h, "sending HELLO: %s", strerror(errno));
    else h->st = PS_HS_CHALLENGE;
    return;
  }
  case PS_HS_CHALLENGE:
  case PS_HS_PROOF:
  case PS_HS_READY_WAIT: {
    int r = hs_read(h, &hdr);
    if (r <= 0) return;
    int tagged = h->auth && h->st == PS_HS_READY_WAIT;
    if (tagged) { /* READY (or a late REFUSE/ERROR) is the server's frame 0 */
      uint8_t tag[PS_TAG_BYTES];
      ps_mac_frame(h->key, PS_DIR_SERVER, 0, h->buf, h->buf + PS_HDR_BYTES, hdr.len, tag);
      if (!ps_auth_equal_tag(tag, h->buf + PS_HDR_BYTES + hdr.len)) {
        ps_hs_fail(h, "the server's %s frame failed its authentication tag (modified in transit?)",
                ps_type_name(hdr.type));
        return;
      }
    }
    if (hdr.type == PS_REFUSE || hdr.type == PS_ERROR) {
      char text[PS_MAX_TEXT + 1], why[PS_MAX_TEXT + 16];
      ps_text_decode(h->buf + PS_HDR_BYTES, hdr.len, text, sizeof text);
      snprintf(why, sizeof why, "refused: %s", text);
      if (hdr.type == PS_REFUSE && (hdr.flags & PS_FLAG_BUSY) && h->st == PS_HS_CHALLENGE) hs_retry(h, why);
      else ps_hs_fail(h, "%s", why);
      return;
    }
    if (h->st == PS_HS_CHALLENGE && hdr.type == PS_CHALLENGE) {
      /* We prove first; the server proves only to a head that knows the token. */
      memcpy(h->t.server_nonce, h->buf + PS_HDR_BYTES, PS_NONCE_BYTES);
      uint8_t proof[PS_PROOF_BYTES];
      ps_auth_head_proof(token, &h->t, proof);
      struct ps_hdr ah = {.type = PS_AUTH, .len = PS_AUTH_BYTES, .rank = h->rank};
      if (hs_send(h, &ah, proof) != 0) ps_hs_fail(h, "sending AUTH: %s", strerror(errno));
      else h->st = PS_HS_PROOF;
      return;
    }
    if (h->st == PS_HS_PROOF && hdr.type == PS_PROOF) {
      uint8_t want[PS_PROOF_BYTES];
      ps_auth_server_proof(token, &h->t, want);
      if (!ps_auth_equal(want, h->buf + PS_HDR_BYTES)) {
        ps_hs_fail(h, "%s", "the server does not know the job's token (BRAID_PS_TOKEN differs, or "
                         "something else answered for it)");
        return;
      }
      if (h->auth) ps_auth_conn_key(token, &h->t, h->key);
      h->st = PS_HS_READY_WAIT;
      return;
    }
    if (h->st == PS_HS_READY_WAIT && hdr.type == PS_READY) {
      h->echo_admit = (hdr.flags & PS_FLAG_ECHO_ADMIT) != 0;
      h->st = PS_HS_READY;
      return;
    }
    ps_hs_fail(h, "unexpected %s frame during the handshake", ps_type_name(hdr.type));
    return;
  }
  default:
    return;
  }
}

