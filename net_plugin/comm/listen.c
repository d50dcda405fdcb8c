/* The receiving side of connection set-up: listen and accept, non-blocking, polled by NCCL.
 *
 * listen() opens the device's gate (comm/gate.h: a listening socket on every rail, a random
 * secret, the strangers' handshake) and puts rail 0's address and the secret in NCCL's handle;
 * the rail list (the other rails' addresses do not fit in the handle) goes to each connector on
 * its stream 0.  accept() takes the gate's next complete set-up connection, any number of times
 * while the listen comm is open.  A multi-stream socket connection keeps a reference to the gate
 * for its rejoins, so its rails' ports outlive the listen comm. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/gate.h"
#include "comm/life.h"
#include "comm/path.h"
#include "comm/hs.h"
#include "inputs.h"
#include "log.h"
#include "transport/transport.h"
#include "comm/setup.h"
#include "transport/socket/sock.h"

struct braid_listen {
  uint8_t kind;
  int dev;
  const struct braid_device *device;
  struct braid_gate *gate;
};

ncclResult_t braid_setup_listen(const struct braid_device *device, int dev, void *handle,
                                void **listen_comm) {
  *listen_comm = NULL;
  struct braid_listen *l = calloc(1, sizeof *l);
  if (!l) return ncclSystemError;
  l->kind = BRAID_COMM_LISTEN;
  l->dev = dev;
  l->device = device;
  int caps = braid_hs_caps();
  if (caps < 0 || !(l->gate = braid_gate_open(device, dev, caps))) {
    free(l);
    return caps < 0 ? ncclInvalidUsage : ncclSystemError;
  }
  struct braid_handle h = {0};
  h.addr = *braid_gate_addr(l->gate);
  if (braid_random(&h.listen_id, sizeof h.listen_id) != 0) {
    BRAID_WARN("listen on device %d failed: no randomness for the listen id", dev);
    braid_gate_unref(l->gate);
    free(l);
    return ncclSystemError;
  }
  memcpy(h.secret, braid_gate_secret(l->gate), sizeof h.secret);
  h.auth_caps = (uint8_t)braid_gate_caps(l->gate);
  h.tuner_fp = braid_tuner_fingerprint();
  enum braid_transport kind = braid_transport_kind();
  h.transport = (uint8_t)((kind == BRAID_TRANSPORT_OFI ? BRAID_HANDLE_OFI : 0) |
                          (kind == BRAID_TRANSPORT_VERBS ? BRAID_HANDLE_VERBS : 0) |
                          (braid_transport_forced() ? BRAID_HANDLE_FORCED : 0));
  braid_handle_encode(&h, handle);
  char a[64];
  BRAID_INFO(NCCL_NET, "listening on %s and %d more rails (device %d, %s)",
             braid_sockaddr_str((struct sockaddr *)&h.addr, a, sizeof a), device->nrails - 1, dev,
             device->name);
  *listen_comm = l;
  return ncclSuccess;
}

static ncclResult_t listen_finish(struct braid_listen *l, struct braid_gate_setup *c, void **recv_comm) {
  struct braid_comm *rc = braid_comm_new(BRAID_COMM_RECV, l->dev, c->nstreams);
  if (!rc) {
    for (int s = 0; s < c->nstreams; s++)
      if (c->fds[s] >= 0) close(c->fds[s]);
    return ncclSystemError;
  }
  memcpy(rc->peer, c->peer, sizeof rc->peer);
  rc->nrails = c->nrails;
  rc->nprimary = c->nprimary;
  for (int s = 0; s < c->nstreams; s++) {
    int r = s % c->nrails;
    rc->streams[s].fd = c->fds[s];
    rc->streams[s].rail = r;
    rc->streams[s].rail_name = (r < c->nprimary ? l->device->rail[r] : l->device->backup)->name;
  }
  rc->rejoin.conn_id = c->conn_id;
  rc->ofi = c->transport == BRAID_TRANSPORT_OFI;
  rc->cls = c->cls;
  braid_tclass_announce(&rc->cls, c->transport, false);
  if (c->transport == BRAID_TRANSPORT_VERBS) rc->path = &braid_verbs_path;
  memcpy(rc->rejoin.secret, braid_gate_secret(l->gate), sizeof rc->rejoin.secret);
  rc->rejoin.auth_mode = c->auth;
  if (c->nstreams > 1 && c->transport != BRAID_TRANSPORT_VERBS) { /* its broken streams rejoin here */
    struct braid_gate_member m = {.conn_id = c->conn_id, .nstreams = c->nstreams, .nrails = c->nrails,
                                  .nbackup = c->nrails - c->nprimary, .auth = c->auth};
    braid_gate_ref(l->gate);
    braid_gate_join(l->gate, &m);
    rc->rejoin.gate = l->gate;
  }
  if (c->count < c->nstreams)
    BRAID_WARN("connection from %s on device %d starts with %d of %d streams; the missing rails "
               "join when they can connect", rc->peer, l->dev, c->count, c->nstreams);
  ncclResult_t err = braid_comm_ready(rc);
  if (err) return braid_comm_free(rc), err;
  BRAID_INFO(NCCL_NET, "accepted connection from %s on device %d (%d rails, %d streams)", rc->peer,
             l->dev, rc->nrails, rc->nstreams);
  *recv_comm = rc;
  return ncclSuccess;
}

ncclResult_t braid_setup_accept(void *listen_comm, void **recv_comm) {
  struct braid_listen *l = listen_comm;
  *recv_comm = NULL;
  if (!l || l->kind != BRAID_COMM_LISTEN) {
    BRAID_WARN("accept() on an invalid listen comm %p", listen_comm);
    return ncclInvalidArgument;
  }
  struct braid_gate_setup c;
  return braid_gate_setup(l->gate, &c) ? listen_finish(l, &c, recv_comm) : ncclSuccess;
}

ncclResult_t braid_setup_close_listen(void *listen_comm) {
  struct braid_listen *l = listen_comm;
  if (!l) return ncclSuccess;
  if (l->kind != BRAID_COMM_LISTEN) {
    BRAID_WARN("closeListen() on an invalid listen comm %p", listen_comm);
    return ncclInvalidArgument;
  }
  braid_gate_setups_end(l->gate);
  braid_gate_unref(l->gate);
  l->kind = 0;
  free(l);
  return ncclSuccess;
}
