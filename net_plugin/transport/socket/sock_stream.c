/* The socket stream transport: the table (transport/stream.h) and each stream's state. */
#include "transport/socket/sock_stream.h"

#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "transport/socket/sock.h"
#include "transport/socket/sock_helper.h"

static ncclResult_t sock_start(struct braid_comm *c) {
  for (int i = 0; i < c->nstreams; i++)
    if (!(c->streams[i].tp = calloc(1, sizeof(struct braid_sock_stream)))) return ncclSystemError;
  /* With acks a send stream's unsent queue is kept short, so a slow rail's backlog stays short
   * in time (sock.h). */
  if (c->kind == BRAID_COMM_SEND && c->acks)
    for (int i = 0; i < c->nstreams; i++) braid_sock_short_queue(c->streams[i].fd);
  return ncclSuccess;
}

static void sock_close(struct braid_comm *c, struct braid_stream *s) {
  braid_sock_helpers_stop(c); /* (the first stream's close stops them all) */
  struct braid_sock_stream *ss = s->tp;
  if (!ss) return;
  free(ss->rescue);
  free(ss);
  s->tp = NULL;
}

/* Sockets register no memory. */
static void sock_forget(struct braid_comm *c, const void *addr, size_t len) {
  (void)c, (void)addr, (void)len;
}

void braid_sock_stream_renew(struct braid_comm *c, struct braid_stream *s) {
  (void)c;
  struct braid_sock_stream *ss = s->tp;
  braid_sock_quiet(s);
  ss->io_pending = false; /* a result from the old socket */
  ss->held = ss->hup = ss->tx_blocked = false;
  free(ss->rescue);
  ss->rescue = NULL;
  ss->ack_got = 0;
  ss->stage_off = ss->stage_len = 0;
  ss->in_frame = ss->cur.discard = false; /* a frame half read from the old socket is dropped */
  ss->cur.msg = NULL;
  braid_ack_out_reset(&ss->ack_out); /* the rest of an acknowledgement was for the old socket */
  ss->stall_since_ns = 0;
}

const struct braid_stream_ops braid_sock_stream_ops = {
    .name = "socket",
    .rejoin = true,
    .late_suspect = false,
    .start = sock_start,
    .started = braid_sock_helpers_start,
    .close = sock_close,
    .forget = sock_forget,
    .renew = braid_sock_stream_renew,
    .relink = NULL, /* the new socket is the link */
    .tx_poll = NULL, /* a frame written is a frame sent */
    .tx_write = braid_sock_tx_write,
    .tx_failed = braid_sock_tx_failed,
    .tx_settle = braid_sock_tx_settle,
    .read_ack = braid_sock_tx_read_ack,
    .poke = braid_sock_tx_poke,
    .path_dead = braid_sock_tx_path_dead,
    .rx = braid_sock_rx,
    .rx_frame = braid_sock_rx_frame,
    .ack_ready = braid_sock_rx_ack_ready,
    .ack_send = braid_sock_rx_ack_send,
    .rx_describe = braid_sock_rx_describe,
};
