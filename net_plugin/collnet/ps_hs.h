/* The head's side of the braid-ps handshake with one server (ps_offload/proto.h):
 *   connect -> HELLO sent -> CHALLENGE {nonce} -> AUTH (our proof) sent -> PROOF (the server's,
 *   checked) -> READY (tagged with frame authentication)
 * as a non-blocking state machine, stepped by CollNet connect for every server at once and by a
 * server's re-admission (collnet_rejoin.c) within a running communicator. */
#ifndef BRAID_COLLNET_PS_HS_H
#define BRAID_COLLNET_PS_HS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth.h"
#include "proto.h"
#include "topo/ifaces.h"

enum ps_hs_state {
  PS_HS_RETRY,      /* waiting to (re)connect at retry_at */
  PS_HS_CONNECTING, /* TCP connect under way: poll for POLLOUT */
  PS_HS_CHALLENGE,
  PS_HS_PROOF,
  PS_HS_READY_WAIT, /* authenticated; the session waits for every head */
  PS_HS_READY,      /* fd, auth and key are the connection's */
  PS_HS_FAILED      /* why says why */
};

struct ps_hs {
  /* Set by the caller before ps_hs_start. */
  const char *host, *port;              /* the server */
  uint8_t session[PS_SESSION_BYTES];    /* the session this head joins */
  uint32_t rank, nranks;
  int hold;                             /* hold-back completion (BRAID_PS_HOLD) */
  struct sockaddr_storage addr;         /* the server's address: resolved by the first start */
  socklen_t addrlen;                    /* (0: not yet; the caller may fill it from a cache) */
  /* The handshake's own. */
  enum ps_hs_state st;
  int fd;
  struct ps_transcript t; /* what both proofs and the key bind */
  int auth;               /* frame authentication on this connection */
  int echo_admit;         /* READY said PS_FLAG_ECHO_ADMIT */
  uint8_t key[PS_KEY_BYTES];
  uint8_t buf[PS_HDR_BYTES + PS_MAX_TEXT + PS_TAG_BYTES];
  size_t got;
  uint64_t retry_at;
  int tries; /* attempts turned away for load or closed unanswered: the back-off grows */
  char why[320];
};

/* Starts (or restarts) the TCP connect to the server, from the device's rail i % nrails (the
 * first of the server's address family from there). */
void ps_hs_start(struct ps_hs *h, int i, const struct braid_iface *const *rails, int nrails, uint64_t now);
/* One step: whatever the socket has, without blocking. */
void ps_hs_step(struct ps_hs *h, int i, const char *token, const struct braid_iface *const *rails,
                int nrails, uint64_t now);
/* Ends the handshake as failed (fmt has one %s, for detail); closes the socket. */
void ps_hs_fail(struct ps_hs *h, const char *fmt, const char *detail);

#endif
