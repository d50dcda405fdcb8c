/* A communicator's life (see life.h). */
#include "comm/life.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/path.h"
#include "comm/rejoin.h"
#include "log.h"
#include "param.h"
#include "stripe/telemetry.h"
#include "transport/socket/sock.h"

struct braid_comm *braid_comm_new(enum braid_comm_kind kind, int dev, int nstreams) {
  struct braid_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  pthread_mutex_init(&c->ofi_lock, NULL);
  pthread_mutex_init(&c->lock, NULL);
  c->kind = (uint8_t)kind;
  c->path = &braid_stream_path; /* set-up names the verbs path where both ends chose verbs */
  c->dev = dev;
  c->cls = BRAID_TCLASS_NONE; /* set-up gives it the class its connector chose */
  c->nstreams = nstreams;
  c->nreqs = kind == BRAID_COMM_SEND ? BRAID_SEND_REQS : BRAID_RECV_REQS;
  c->streams = calloc((size_t)nstreams, sizeof *c->streams);
  c->reqs = calloc((size_t)c->nreqs, sizeof *c->reqs);
  c->free_reqs = calloc((size_t)c->nreqs, sizeof *c->free_reqs);
  if (kind == BRAID_COMM_SEND) c->tx.pending = calloc(BRAID_SEND_REQS, sizeof *c->tx.pending);
  else c->rx.msgs = calloc(BRAID_MSG_WINDOW, sizeof *c->rx.msgs);
  if (!c->streams || !c->reqs || !c->free_reqs || (!c->tx.pending && !c->rx.msgs)) {
    braid_comm_free(c);
    return NULL;
  }
  for (int i = 0; i < nstreams; i++) c->streams[i].fd = c->streams[i].join_fd = -1;
  for (int i = 0; i < c->nreqs; i++) {
    c->reqs[i].index = i;
    c->free_reqs[i] = c->nreqs - 1 - i;
  }
  c->nfree = c->nreqs;
  if (c->rx.msgs)
    for (int i = 0; i < BRAID_MSG_WINDOW; i++) c->rx.msgs[i].seq = -1;
  c->timeout_ns = (uint64_t)braid_param_int(BRAID_P_TIMEOUT_MS) * 1000000ull;
  c->chunk = (size_t)braid_param_int(BRAID_P_CHUNK_BYTES) & ~(size_t)127;
  c->rx.unexpected_max = (size_t)braid_param_int(BRAID_P_MAX_UNEXPECTED_BYTES);
  return c;
}

ncclResult_t braid_comm_ready(struct braid_comm *c) {
  c->acks = c->nstreams > 1;
  for (int i = 0; i < c->nstreams; i++) {
    if (c->streams[i].fd >= 0) braid_sock_tune(c->streams[i].fd);
    else c->streams[i].dead = true; /* did not connect at set-up: rejoins later */
  }
  c->metrics = braid_telemetry_on();
  if (c->kind == BRAID_COMM_SEND)
    for (int r = 0; r < c->nrails && r < 16; r++)
      c->stats[r] = braid_telemetry_add(c->dev, r, c->peer, c->streams[r].rail_name);
  return c->path->start(c);
}

/* One INFO line per send connection at close: what each rail carried, and its failures. */
static void comm_summary(struct braid_comm *c) {
  uint64_t total = 0;
  for (int r = 0; r < c->nrails && r < 16; r++)
    if (c->stats[r]) total += atomic_load(&c->stats[r]->bytes);
  char line[768];
  size_t len = 0;
  for (int r = 0; r < c->nrails && r < 16 && len < sizeof line; r++) {
    struct braid_rail_stats *s = c->stats[r];
    if (!s) continue;
    uint64_t b = atomic_load(&s->bytes);
    len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %.1f MB (%.0f%%), %llu failovers, %llu demotions",
                            r ? "; " : "", s->nic, b / 1e6, total ? 100.0 * (double)b / (double)total : 0.0,
                            (unsigned long long)atomic_load(&s->failovers),
                            (unsigned long long)atomic_load(&s->demotions));
  }
  if (total) BRAID_INFO(NCCL_NET, "closed connection to %s (device %d): %s", c->peer, c->dev, line);
}

void braid_comm_free(struct braid_comm *c) {
  if (!c) return;
  /* Endpoints and helper threads first: nothing they posted may land in the buffers freed below,
   * and no other thread touches the comm after this. */
  c->path->quiesce(c);
  if (c->kind == BRAID_COMM_SEND) comm_summary(c);
  for (int r = 0; r < 16; r++) braid_telemetry_remove(c->stats[r]);
  braid_rejoin_free(c);
  c->path->free(c);
  for (int i = 0; c->streams && i < c->nstreams; i++)
    if (c->streams[i].fd >= 0) close(c->streams[i].fd);
  pthread_mutex_destroy(&c->ofi_lock);
  pthread_mutex_destroy(&c->lock);
  free(c->streams);
  free(c->reqs);
  free(c->free_reqs);
  free(c->tx.pending);
  free(c->rx.msgs);
  c->kind = 0;
  free(c);
}

