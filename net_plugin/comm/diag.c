#include "comm/diag.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "log.h"
#include "comm/path.h"
#include "param.h"
#include "stripe/sched.h"

static atomic_uint diag_generation;

static void diag_signal(int sig) {
  (void)sig;
  atomic_fetch_add(&diag_generation, 1); /* lock-free: async-signal-safe */
}

void braid_diag_install(void) {
  static atomic_flag done = ATOMIC_FLAG_INIT;
  if (atomic_flag_test_and_set(&done)) return;
  struct sigaction old;
  if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL) return;
  struct sigaction sa = {.sa_handler = diag_signal, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
}

void braid_diag_uninstall(void) {
  struct sigaction old;
  if (sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == diag_signal) {
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
  }
}

/* Where each stream stands (socket and ofi transports): what a stuck connection waits for. */
void braid_diag_streams(struct braid_comm *c, uint64_t now) {
  if (c->kind == BRAID_COMM_SEND && c->tx.sched) {
    BRAID_WARN("  send side: %zu bytes queued for a rail (%zu chunks to re-send or place), suspect "
               "rails 0x%x", c->tx.pending_bytes, c->tx.requeue.count, c->tx.suspect);
    for (int r = 0; r < c->nrails; r++) {
      const struct braid_sched_rail *sr = &c->tx.sched->rail[r];
      BRAID_WARN("  rail %d: %s, %.0f Mbit/s, %zu bytes in flight, last ack %.0f ms ago",
                 r, braid_sched_state_name(sr->state), sr->est_Bps * 8e-6, sr->inflight,
                 (double)(now - sr->last_progress_ns) / 1e6);
    }
  }
  for (int i = 0; i < c->nstreams; i++) {
    const struct braid_stream *s = &c->streams[i];
    if (c->kind == BRAID_COMM_SEND)
      BRAID_WARN("  stream %d (rail %d)%s: %d frames queued, %zu chunks unacknowledged, frames "
                 "started %llu, acknowledged %llu, ignored up to %llu", i, s->rail,
                 s->dead ? " dead" : "", s->tx_count, s->unacked.count,
                 (unsigned long long)s->frames_started, (unsigned long long)s->frames_acked,
                 (unsigned long long)s->ignore_until);
    else {
      char state[160] = "";
      if (c->sops && s->tp) c->sops->rx_describe(s, state, sizeof state);
      BRAID_WARN("  stream %d (rail %d)%s: %s, frames received %llu, acknowledged %llu", i, s->rail,
                 s->dead ? " dead" : s->eof ? " closed" : "", state,
                 (unsigned long long)s->frames_recvd, (unsigned long long)s->frames_ack_sent);
    }
  }
  if (c->kind != BRAID_COMM_SEND)
    BRAID_WARN("  receive side: next message to match %llu, %d receives waiting for a message, "
               "%d messages buffered (%zu bytes)", (unsigned long long)c->rx.next_match, c->rx.nposted,
               c->rx.nunexpected, c->rx.unexpected_bytes);
}

static void diag_dump(struct braid_comm *c, const char *why, uint64_t now) {
  int pending = 0;
  for (int i = 0; i < c->nreqs; i++) pending += c->reqs[i].kind != BRAID_REQ_FREE && !c->reqs[i].done;
  BRAID_WARN("%s: %s connection with %s (device %d, %d rails): %d pending requests%s", why,
             c->kind == BRAID_COMM_SEND ? "send" : "receive", c->peer, c->dev, c->nrails, pending,
             c->err ? " (connection failed)" : "");
  if (c->path->describe(c, now)) return;
  int shown = 0;
  for (int i = 0; i < c->nreqs && shown < 8; i++) {
    struct braid_req *r = &c->reqs[i];
    if (r->kind == BRAID_REQ_FREE || r->done) continue;
    shown++;
    double age_ms = (double)(now - r->posted_ns) / 1e6;
    if (r->kind == BRAID_REQ_SEND)
      BRAID_WARN("  send #%llu tag %d: %zu bytes, %d chunks unacknowledged, waiting %.0f ms",
                 (unsigned long long)r->seq, r->tag, r->size, r->frames_out, age_ms);
    else
      BRAID_WARN("  receive of %d buffer(s)%s, %d complete, first tag %d capacity %zu, waiting %.0f "
                 "ms (no data from the peer yet: it has not sent)", r->n,
                 r->hinted ? " (NCCL's optional-completion hint)" : "", r->ndone, r->slot[0].tag,
                 r->slot[0].cap, age_ms);
  }
}

void braid_diag_check(struct braid_comm *c, struct braid_req *r) {
  unsigned gen = atomic_load_explicit(&diag_generation, memory_order_relaxed);
  if (gen != c->diag.generation) {
    c->diag.generation = gen;
    diag_dump(c, "SIGUSR1", braid_now_ns());
  }
  if ((++c->diag.test_calls & 1023) || r->warned) return;
  int64_t limit_ms = braid_param_int(BRAID_P_WAIT_WARN_MS);
  uint64_t now = braid_now_ns();
  if (limit_ms > 0 && now - r->posted_ns > (uint64_t)limit_ms * 1000000ull) {
    r->warned = true;
    diag_dump(c, "a request has waited longer than BRAID_WAIT_WARN_MS", now);
  }
}
