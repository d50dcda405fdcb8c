/* CollNet: a lost braid-ps server re-admitted within the running communicator (see
 * collnet_int.h, "re-admission").  No thread: the handshakes are stepped from the operations'
 * progress (and the idle progress), at most every millisecond each, without blocking but for the
 * server's address, resolved once (a host name: the first attempt's lookup), and, at an
 * admission, at most RJ_ADMIT_WAIT_NS for a READY on its way. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collnet/collnet_int.h"
#include "collnet/ps_hs.h"
#include "log.h"
#include "param.h"

#define RJ_WAIT_MIN_NS 100000000ull    /* first attempt 100 ms after the loss ... */
#define RJ_WAIT_MAX_NS 5000000000ull   /* ... doubling up to 5 s while it cannot be reached */
#define RJ_STEP_NS 1000000ull          /* a handshake under way is stepped at most this often */
#define RJ_CONNECT_NS 5000000000ull    /* connect to PROOF; then a bound on the wait for READY */
#define RJ_JOIN_NS 70000000000ull      /* (braid-ps closes a session not full within 60 s by default) */
#define RJ_ADMIT_WAIT_NS 200000000ull  /* at the admission, for a READY on its way */

struct ps_rejoin {
  struct ps_hs hs;
  char token[PS_TOKEN_MAX + 1];
  uint64_t started;
};

void ps_client_hs_init(struct braid_collcomm *cc, struct ps_hs *h, int i, const uint8_t session[PS_SESSION_BYTES]) {
  memset(h, 0, sizeof *h);
  h->fd = -1;
  h->host = cc->srv[i].host;
  h->port = cc->srv[i].port;
  memcpy(h->session, session, PS_SESSION_BYTES);
  h->rank = (uint32_t)cc->rank;
  h->nranks = (uint32_t)cc->nranks;
  h->hold = cc->hold;
  h->addr = cc->srv[i].addr;
  h->addrlen = cc->srv[i].addrlen;
}

void ps_client_adopt(struct braid_collcomm *cc, int i, struct ps_hs *h) {
  struct ps_srv *s = &cc->srv[i];
  s->fd = h->fd;
  h->fd = -1;
  s->auth = h->auth;
  memcpy(s->key, h->key, PS_KEY_BYTES);
  s->echo_admit = h->echo_admit;
  s->tx_seq = 0;
  s->rx_seq = 1; /* READY was frame 0 */
  s->igot = s->pgot = s->tgot = 0;
  s->dst = NULL;
}

uint32_t ps_client_lost_for(const struct braid_collcomm *cc, uint64_t seq) {
  uint32_t m = cc->lost;
  for (int i = 0; i < cc->nservers; i++)
    if (cc->srv[i].admit_seq > seq) m |= 1u << i;
  return m;
}

/* Generation g's session: the set-up's with g mixed into its last four bytes (g = 0: the
 * set-up's own), as unguessable as the set-up's. */
static void session_of(const struct braid_collcomm *cc, uint32_t gen, uint8_t out[PS_SESSION_BYTES]) {
  memcpy(out, cc->session, PS_SESSION_BYTES);
  for (int b = 0; b < 4; b++) out[PS_SESSION_BYTES - 4 + b] ^= (uint8_t)(gen >> (8 * b));
}

static void rj_free(struct ps_srv *s) {
  if (!s->rj) return;
  if (s->rj->hs.fd >= 0) close(s->rj->hs.fd);
  explicit_bzero(s->rj, sizeof *s->rj);
  free(s->rj);
  s->rj = NULL;
  s->standby = 0;
  s->announced = 0;
}

/* The attempt ended without a standing-by connection: the next after the back-off.  next_gen:
 * the session it joined is closed (it failed after joining, or the server says so). */
static void rj_retry(struct braid_collcomm *cc, int i, uint64_t now, int next_gen, const char *why) {
  struct ps_srv *s = &cc->srv[i];
  BRAID_INFO(NCCL_NET, "CollNet rank %d/%d: braid-ps server %s not back yet (session generation %u: %s); "
             "next try in %.1f s", cc->rank, cc->nranks, s->name, s->gen, why, (double)s->rj_wait / 1e9);
  rj_free(s);
  if (next_gen) s->gen++;
  s->rj_at = now + s->rj_wait;
  s->rj_wait = s->rj_wait * 2 > RJ_WAIT_MAX_NS ? RJ_WAIT_MAX_NS : s->rj_wait * 2;
}

void ps_rejoin_lost(struct braid_collcomm *cc, int i, uint64_t now) {
  struct ps_srv *s = &cc->srv[i];
  rj_free(s);
  s->gen++; /* the session it had is closed on the server (or it never had one) */
  s->rj_wait = RJ_WAIT_MIN_NS;
  s->rj_at = now + s->rj_wait;
  s->lost_seq = cc->seq;
  s->lost_ns = now;
}

/* A new attempt: a handshake into generation gen's session. */
static void rj_start(struct braid_collcomm *cc, int i, uint64_t now) {
  struct ps_srv *s = &cc->srv[i];
  struct ps_rejoin *r = calloc(1, sizeof *r);
  if (!r) return rj_retry(cc, i, now, 0, "out of memory");
  r->hs.fd = -1;
  s->rj = r;
  if (braid_coll_token(r->token, sizeof r->token) <= 0) return rj_retry(cc, i, now, 0, "no token");
  uint8_t session[PS_SESSION_BYTES];
  session_of(cc, s->gen, session);
  ps_client_hs_init(cc, &r->hs, i, session);
  r->started = now;
  ps_hs_start(&r->hs, i, cc->rails, cc->nrails, now);
  if (!s->addrlen && r->hs.addrlen) s->addr = r->hs.addr, s->addrlen = r->hs.addrlen; /* resolved */
}

/* One step of server i's attempt; 1 when it stands by now. */
static int rj_step(struct braid_collcomm *cc, int i, uint64_t now) {
  struct ps_srv *s = &cc->srv[i];
  struct ps_hs *h = &s->rj->hs;
  enum ps_hs_state was = h->st;
  ps_hs_step(h, i, s->rj->token, cc->rails, cc->nrails, now);
  s->echo_admit = h->echo_admit;
  switch (h->st) {
  case PS_HS_READY:
    s->standby = 1;
    s->standby_seq = cc->seq;
    s->standby_ns = now;
    explicit_bzero(s->rj->token, sizeof s->rj->token);
    memset(&cc->rate[i], 0, sizeof cc->rate[i]); /* measured afresh: a full share first */
    BRAID_INFO(NCCL_NET, "CollNet rank %d/%d: braid-ps server %s is back (session generation %u, every "
               "head joined); it stands by for rank 0's admission", cc->rank, cc->nranks, s->name, s->gen);
    return 1;
  case PS_HS_FAILED:
    /* Refused because the session is closed (it did not fill within the server's join timeout):
     * the heads meet in the next generation's. */
    rj_retry(cc, i, now, was == PS_HS_READY_WAIT || strstr(h->why, "session already") != NULL, h->why);
    return 0;
  case PS_HS_RETRY: /* refused for load, closed unanswered, connect refused */
    rj_retry(cc, i, now, 0, h->why);
    return 0;
  default:
    if (now - s->rj->started > (h->st == PS_HS_READY_WAIT ? RJ_JOIN_NS : RJ_CONNECT_NS)) {
      int joined = h->st == PS_HS_READY_WAIT; /* closing it closes the session for every head */
      ps_hs_fail(h, "%s", joined ? "not every head joined" : "no answer");
      rj_retry(cc, i, now, joined, h->why);
    }
    return 0;
  }
}

/* A standing-by connection carries nothing until its admission but an ERROR as the server closes
 * the session (another head failed): anything readable, or its closing, ends the standby. */
static int standby_broken(struct ps_srv *s) {
  char b;
  ssize_t n = recv(s->rj->hs.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || n > 0 || (errno != EAGAIN && errno != EINTR);
}

void ps_rejoin_progress(struct braid_collcomm *cc, uint64_t now) {
  for (int i = 0; i < cc->nservers; i++) {
    struct ps_srv *s = &cc->srv[i];
    if (!s->lost || now < s->rj_at) continue;
    s->rj_at = now + RJ_STEP_NS;
    if (s->standby) {
      if (standby_broken(s)) {
        BRAID_INFO(NCCL_NET, "CollNet rank %d/%d: braid-ps server %s closed its new session before it "
                   "was used again; joining the next", cc->rank, cc->nranks, s->name);
        ps_rejoin_lost(cc, i, now);
      }
      continue;
    }
    if (!s->rj) rj_start(cc, i, now);
    if (s->rj) rj_step(cc, i, now);
  }
}

/* At the admission: a handshake whose READY is still on its way is waited for (every head
 * joined, or rank 0 would not have admitted the server), a bounded while. */
static void admit_wait(struct braid_collcomm *cc, int i) {
  struct ps_srv *s = &cc->srv[i];
  uint64_t t0 = braid_now_ns(), now = t0;
  while (s->rj && !s->standby && now - t0 < RJ_ADMIT_WAIT_NS &&
         (s->rj->hs.st == PS_HS_PROOF || s->rj->hs.st == PS_HS_READY_WAIT)) {
    struct pollfd p = {.fd = s->rj->hs.fd, .events = POLLIN};
    poll(&p, 1, 10);
    now = braid_now_ns();
    s->rj->started = now; /* no attempt deadline here: this wait's own */
    rj_step(cc, i, now);
  }
}

void ps_rejoin_admit(struct braid_collcomm *cc, uint64_t seq, uint8_t admit) {
  if (admit == cc->admit) return;
  cc->admit = admit;
  int i = admit & 15;
  unsigned gen4 = admit >> 4;
  if (i >= cc->nservers) {
    BRAID_WARN("CollNet rank %d/%d: rank 0 re-admits braid-ps server %d of %d: ignored (the heads "
               "list different servers?)", cc->rank, cc->nranks, i, cc->nservers);
    return;
  }
  struct ps_srv *s = &cc->srv[i];
  if (!s->lost) {
    BRAID_WARN("CollNet rank %d/%d: rank 0 re-admits braid-ps server %s from op %llu, which this head "
               "has in use: ignored", cc->rank, cc->nranks, s->name, (unsigned long long)seq);
    return;
  }
  s->admit_seq = seq; /* whatever happens here: every head reroutes as if it were used from seq */
  int mine = (s->gen & 15) == gen4; /* the session rank 0 saw ready is the one this head is in */
  if (mine) admit_wait(cc, i);
  uint64_t now = braid_now_ns();
  if (!mine || !s->standby) {
    /* This head's connection to that session broke (so the server closed it for every head, and
     * they lose the server again), or its READY did not come: then it is closed here, which
     * makes the server close the session, rather than have the other heads wait for this
     * head's input.  Either way every head meets again in the next generation. */
    int member = mine && s->rj && (s->rj->hs.st == PS_HS_PROOF || s->rj->hs.st == PS_HS_READY_WAIT);
    BRAID_WARN("CollNet rank %d/%d: braid-ps server %s is used again from op %llu (session generation "
               "%u mod 16), but this head %s; it stays lost and rejoins later", cc->rank, cc->nranks,
               s->name, (unsigned long long)seq, gen4,
               member ? "got no READY" : mine ? "has no connection to it" : "is in another generation");
    if (member) rj_retry(cc, i, now, 1, "no READY at the admission");
    return;
  }
  ps_client_adopt(cc, i, &s->rj->hs);
  rj_free(s);
  s->lost = 0;
  cc->lost &= ~(1u << i);
  s->rejoins++;
  memset(&cc->rate[i], 0, sizeof cc->rate[i]);
  braid_telemetry_server_rejoined(s->stats, now);
  BRAID_WARN("CollNet rank %d/%d: braid-ps server %s re-admitted from op %llu (lost at op %llu, %.1f s "
             "before; stood by from op %llu, %llu ops, %.2f s)", cc->rank, cc->nranks, s->name,
             (unsigned long long)seq, (unsigned long long)s->lost_seq, (double)(now - s->lost_ns) / 1e9,
             (unsigned long long)s->standby_seq, (unsigned long long)(seq - s->standby_seq),
             (double)(now - s->standby_ns) / 1e9);
}

uint32_t ps_rejoin_standby(struct braid_collcomm *cc) {
  uint32_t announced = 0;
  for (int i = 0; i < cc->nservers; i++)
    if (cc->srv[i].lost && cc->srv[i].standby && cc->srv[i].announced) announced |= 1u << i;
  /* One admission at a time: the next once the last is in effect. */
  if (cc->my_admit != cc->admit || announced) return announced;
  /* Every server it holds must echo the word, or heads would read different words. */
  for (int i = 0; i < cc->nservers; i++)
    if (!cc->srv[i].lost && !cc->srv[i].echo_admit) return 0;
  for (int i = 0; i < cc->nservers; i++) {
    struct ps_srv *s = &cc->srv[i];
    if (!s->lost || !s->standby || !s->echo_admit) continue;
    uint8_t word = (uint8_t)((s->gen & 15) << 4 | (unsigned)i);
    if (word == cc->admit) {
      /* The same word as the admission in effect (the same server, 16 generations on): it could
       * not be told apart, so this session is given up and the heads meet in the next. */
      rj_retry(cc, i, braid_now_ns(), 1, "its admission word is the one in effect");
      continue;
    }
    s->announced = 1;
    cc->my_admit = word;
    BRAID_INFO(NCCL_NET, "CollNet rank 0/%d: braid-ps server %s is used again from op %llu", cc->nranks,
               s->name, (unsigned long long)(cc->seq + PS_WINDOW));
    return 1u << i;
  }
  return 0;
}

void ps_rejoin_teardown(struct braid_collcomm *cc) {
  for (int i = 0; i < cc->nservers; i++) rj_free(&cc->srv[i]);
}
