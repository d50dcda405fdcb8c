/* A listen handle's door: the listening sockets on every rail of a device, and everything that
 * knocks on them.
 *
 * One gate per listen(): the handle names its rail 0 address and its secret.  Every incoming
 * TCP connection is a stranger until it proves the secret: it is sent a challenge at once and
 * must answer with a hello (comm/hs.h) within a short deadline.  A proven hello is routed:
 * - a set-up stream to the listen comm's accept(), grouped by connection id, while the listen
 *   comm is open (NCCL accepts once per listen comm; other consumers accept several connections
 *   on one, and every stream count gets the same answer);
 * - a rejoin (a broken stream of an accepted connection reconnecting) to the receive comm that
 *   registered that connection, which takes it at its next turn.
 * The gate lives while the listen comm or a registered receive comm holds it, so the rails'
 * ports stay open for rejoins after NCCL closes the listen comm.
 *
 * Strangers cost little: pending connections are bounded (the oldest is evicted for a new one),
 * so are those from one source address (the newest is refused), each call accepts a bounded
 * number, and dropped connections are summarised in one WARN a second, not one each. */
#ifndef BRAID_GATE_H
#define BRAID_GATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "topo/devices.h"
#include "transport/tclass.h"
#include "transport/transport.h"
#include "wire/handle.h"

#define BRAID_GATE_PENDING 128   /* strangers waiting for their hello */
#define BRAID_GATE_PER_SOURCE 32 /* of them from one address (a rail's streams come from one) */
#define BRAID_GATE_SETUPS 8      /* set-up connections with streams still to come */
#define BRAID_GATE_MAX_STREAMS (16 * BRAID_MAX_RAILS)

struct braid_gate;

/* A set-up connection handed to accept(): its streams' sockets, by stream index (-1: missing). */
struct braid_gate_setup {
  uint64_t conn_id;
  enum braid_transport transport; /* the connector's choice (its hellos) */
  int auth;                       /* BRAID_AUTH_* of its hellos */
  struct braid_tclass cls;        /* the traffic class its hellos name (transport/tclass.h) */
  int nstreams, count, nrails, nprimary;
  int fds[BRAID_GATE_MAX_STREAMS];
  char peer[64];
};

/* An accepted connection whose broken streams may rejoin through the gate: its shape. */
struct braid_gate_member {
  uint64_t conn_id;
  int nstreams, nrails, nbackup;
  int auth;
};

/* Listening sockets on every rail of device dev (and its backup rail), a fresh secret, this
 * node's BRAID_CAPS_* (caps); NULL with a WARN.  The caller holds the one reference. */
struct braid_gate *braid_gate_open(const struct braid_device *device, int dev, int caps);
void braid_gate_ref(struct braid_gate *g);
/* Drops a reference; the last one closes every socket. */
void braid_gate_unref(struct braid_gate *g);

/* What the handle carries. */
const struct sockaddr_storage *braid_gate_addr(const struct braid_gate *g);
/* Rail r's listening address (r below the device's rails and backup), NULL past them. */
const struct sockaddr_storage *braid_gate_rail_addr(const struct braid_gate *g, int r);
const uint8_t *braid_gate_secret(const struct braid_gate *g);
int braid_gate_caps(const struct braid_gate *g);

/* accept(): 1 and *out when a set-up connection is complete (or started without rails that did
 * not come in time); 0 not yet. */
int braid_gate_setup(struct braid_gate *g, struct braid_gate_setup *out);
/* The listen comm closed: set-up streams are refused from now on, unfinished ones dropped. */
void braid_gate_setups_end(struct braid_gate *g);

/* A receive comm's connection: rejoins for it are taken from now on (braid_gate_leave: no
 * longer; its queued ones are closed). */
void braid_gate_join(struct braid_gate *g, const struct braid_gate_member *m);
void braid_gate_leave(struct braid_gate *g, uint64_t conn_id);
/* A proven rejoin of conn_id's stream *stream on socket *fd (the caller's now); 1 when there
 * is one, 0 when not. */
int braid_gate_rejoin(struct braid_gate *g, uint64_t conn_id, int *stream, int *fd);

#endif
