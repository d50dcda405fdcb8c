/* The ofi stream transport: the table (transport/stream.h) and each stream's state. */
#include "transport/ofi/ofi_stream.h"

#include <stdlib.h>

#include "comm/comm.h"
#include "transport/socket/sock.h"

static ncclResult_t ofi_start(struct braid_comm *c) {
  for (int i = 0; i < c->nstreams; i++)
    if (!(c->streams[i].tp = calloc(1, sizeof(struct braid_ofi_stream)))) return ncclSystemError;
  if (braid_ofi_rxm() && c->chunk > BRAID_OFI_RXM_FRAME_MAX) c->chunk = BRAID_OFI_RXM_FRAME_MAX;
  ncclResult_t rc = braid_ofi_link_start(c);
  if (rc) return rc;
  /* With acks a send stream's set-up socket, which carries the pokes, keeps a short unsent queue
   * like a socket stream's (sock.h). */
  if (c->kind == BRAID_COMM_SEND && c->acks)
    for (int i = 0; i < c->nstreams; i++) braid_sock_short_queue(c->streams[i].fd);
  return ncclSuccess;
}

/* The endpoint first (nothing it posted may land in the buffers freed after it), then the
 * stream's buffers; a bounce buffer the provider may still write into was kept (dropped from the
 * stream by braid_ofi_link_close). */
static void ofi_close(struct braid_comm *c, struct braid_stream *s) {
  struct braid_ofi_stream *st = s->tp;
  if (!st) return;
  braid_ofi_link_close(c, s);
  pthread_mutex_lock(&c->ofi_lock); /* deregMr's forget reads s->tp under it */
  s->tp = NULL;
  pthread_mutex_unlock(&c->ofi_lock);
  for (int k = 0; k < BRAID_OFI_RX_DEPTH; k++) free(st->rx[k].bounce);
  free(st);
}

const struct braid_stream_ops braid_ofi_stream_ops = {
    .name = "ofi",
    .rejoin = true, /* a lost stream comes back on a new socket and a new endpoint */
    .late_suspect = true,
    .start = ofi_start,
    .close = ofi_close,
    .forget = braid_ofi_link_forget,
    .renew = braid_ofi_link_renew,
    .relink = braid_ofi_link_relink,
    .tx_poll = braid_ofi_tx_poll,
    .tx_write = braid_ofi_tx_write,
    .tx_failed = braid_ofi_tx_failed,
    .read_ack = braid_ofi_tx_read_ack,
    .poke = braid_ofi_tx_poke,
    .path_dead = braid_ofi_tx_path_dead,
    .rx = braid_ofi_rx,
    .rx_frame = braid_ofi_rx_frame,
    .ack_ready = braid_ofi_rx_ack_ready,
    .ack_send = braid_ofi_rx_ack_send,
    .rx_describe = braid_ofi_rx_describe,
};
