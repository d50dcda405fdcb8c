/* braid-ps: handshake, sessions, partitions and the reduction (see session.h). */
#include "session.h"
#include "secret.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "clock.h"
#include "conn.h"
#include "reduce.h"

#define DEFAULT_MAX_MEMORY (4ull << 30)
#define DEFAULT_JOIN_TIMEOUT_NS (60ull * 1000000000ull)
#define DEFAULT_HANDSHAKE_TIMEOUT_NS (5ull * 1000000000ull)
#define DEFAULT_LINGER_NS (1000000000ull)
#define TOMBSTONES 1024  /* closed session ids remembered, so that nobody rejoins them */
#define SMALL_FANOUT 64  /* members snapshotted on the stack up to this many ranks */

/* Per-rank state bits of a partition. */
#define RS_PUSHED 1u  /* header arrived, buffer allocated */
#define RS_ARRIVED 2u /* payload complete */
#define RS_DONE 4u    /* DONE received */
#define RS_GONE 8u    /* GONE received: that head completed the partition at a lost server */

struct ps_part {
  atomic_int refs; /* the session's table, a reader filling a buffer, each queued RESULT */
  struct ps_ctx *ctx;
  struct ps_part *next; /* table chain, under the session mutex */
  uint64_t seq;
  uint32_t part, len, nranks;
  uint8_t dtype, op;
  uint8_t weights[PS_MAX_SERVERS];
  uint8_t admit; /* rank 0's admission word (header flags), echoed with the weights */
  /* under the session mutex */
  uint32_t narrived, ndone, ngone;
  int reduced;
  int settled; /* a GONE came: every head holds the result; pushes are answered with RELEASE */
  uint8_t *rs;        /* [nranks] RS_* bits */
  void **bufs;        /* [nranks]; the result goes to bufs[0] */
  const void **srcs;  /* [nranks]; the reduction's view of bufs */
};

struct ps_session {
  atomic_int refs; /* the registry while open, each member connection */
  struct ps_ctx *ctx;
  struct ps_session *next; /* registry list, under the registry mutex */
  uint8_t id[PS_SESSION_BYTES];
  char idhex[9];
  uint32_t nranks;
  int hold;
  uint64_t t_created, t_ready, join_deadline;
  pthread_mutex_t mu;
  /* under mu (once closed, only the closing thread touches members and the table) */
  int closed, ready;
  uint32_t njoined;
  struct ps_conn **members;
  struct ps_part **buckets;
  size_t nbuckets, nparts;
  uint64_t ops, parts_done, bytes_in, bytes_out, seq_counted;
  int any_op;
};

struct ps_ctx {
  struct ps_ctx_opts o;
  char *token; /* braid_secret_alloc(token_size) */
  size_t token_size;
  _Atomic uint64_t mem;
  atomic_int pending; /* connections not authenticated (yet) */
  pthread_mutex_t strangers_mu; /* refusals of connections that proved nothing, summarised */
  int strangers;
  uint64_t strangers_logged_ns;
  char stranger_last[160];
  pthread_mutex_t reg_mu;
  struct ps_session *sessions;
  int nsessions;
  uint8_t tomb[TOMBSTONES][PS_SESSION_BYTES];
  size_t ntomb, tomb_next;
};

/* ---- Context ---- */

struct ps_ctx *ps_ctx_create(const struct ps_ctx_opts *o) {
  if (!o->token || !o->token[0] || !o->io || ps_auth_init() != 0) return NULL;
  struct ps_ctx *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return NULL;
  ctx->o = *o;
  ctx->token_size = strlen(o->token) + 1;
  ctx->token = braid_secret_alloc(ctx->token_size); /* out of core dumps and swap */
  if (!ctx->token || pthread_mutex_init(&ctx->reg_mu, NULL) != 0 ||
      pthread_mutex_init(&ctx->strangers_mu, NULL) != 0) {
    braid_secret_free(ctx->token, ctx->token_size);
    free(ctx);
    return NULL;
  }
  memcpy(ctx->token, o->token, ctx->token_size);
  ctx->o.token = ctx->token;
  if (!ctx->o.max_memory) ctx->o.max_memory = DEFAULT_MAX_MEMORY;
  if (!ctx->o.join_timeout_ns) ctx->o.join_timeout_ns = DEFAULT_JOIN_TIMEOUT_NS;
  if (!ctx->o.handshake_timeout_ns) ctx->o.handshake_timeout_ns = DEFAULT_HANDSHAKE_TIMEOUT_NS;
  if (!ctx->o.linger_ns) ctx->o.linger_ns = DEFAULT_LINGER_NS;
  if (!ctx->o.clock) ctx->o.clock = braid_now_ns;
  atomic_init(&ctx->mem, 0);
  atomic_init(&ctx->pending, 0);
  return ctx;
}

static void strangers_log(struct ps_ctx *ctx, uint64_t now, int flush);

void ps_ctx_destroy(struct ps_ctx *ctx) {
  if (!ctx) return;
  strangers_log(ctx, ps_ctx_now(ctx), 1);
  pthread_mutex_destroy(&ctx->reg_mu);
  pthread_mutex_destroy(&ctx->strangers_mu);
  braid_secret_free(ctx->token, ctx->token_size);
  free(ctx);
}

uint64_t ps_ctx_memory(struct ps_ctx *ctx) { return atomic_load(&ctx->mem); }
uint64_t ps_ctx_now(struct ps_ctx *ctx) { return ctx->o.clock(); }
uint64_t ps_ctx_linger(struct ps_ctx *ctx) { return ctx->o.linger_ns; }
const struct ps_io_ops *ps_ctx_io(struct ps_ctx *ctx) { return ctx->o.io; }

int ps_ctx_pending(struct ps_ctx *ctx) { return atomic_load(&ctx->pending); }

int ps_ctx_sessions(struct ps_ctx *ctx) {
  pthread_mutex_lock(&ctx->reg_mu);
  int n = ctx->nsessions;
  pthread_mutex_unlock(&ctx->reg_mu);
  return n;
}

/* Logs the strangers counted since the last line, if a second has passed (or flush and any). */
static void strangers_log(struct ps_ctx *ctx, uint64_t now, int flush) {
  pthread_mutex_lock(&ctx->strangers_mu);
  int n = 0;
  char last[sizeof ctx->stranger_last];
  uint64_t since = ctx->strangers_logged_ns;
  if (ctx->strangers && (flush || !since || now - since >= 1000000000ull)) {
    n = ctx->strangers;
    memcpy(last, ctx->stranger_last, sizeof last);
    ctx->strangers = 0;
    ctx->strangers_logged_ns = now;
  }
  pthread_mutex_unlock(&ctx->strangers_mu);
  if (n == 1) ps_logf(ctx, PS_LOG_INFO, "refused %s", last);
  else if (n > 1)
    ps_logf(ctx, PS_LOG_INFO, "refused %d connections that proved nothing in the last %.1f s (the last: %s)", n,
            since ? (double)(now - since) / 1e9 : 0.0, last);
}

void ps_ctx_stranger(struct ps_ctx *ctx, const char *peer, const char *why) {
  pthread_mutex_lock(&ctx->strangers_mu);
  ctx->strangers++;
  snprintf(ctx->stranger_last, sizeof ctx->stranger_last, "%s: %s", peer, why);
  pthread_mutex_unlock(&ctx->strangers_mu);
  strangers_log(ctx, ps_ctx_now(ctx), 0);
}

void ps_ctx_strangers_flush(struct ps_ctx *ctx) { strangers_log(ctx, ps_ctx_now(ctx), 0); }

void ps_logf(struct ps_ctx *ctx, int level, const char *fmt, ...) {
  if (!ctx->o.log || (level > PS_LOG_INFO && !ctx->o.verbose)) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ctx->o.log(ctx->o.log_arg, level, msg);
}

static int mem_take(struct ps_ctx *ctx, uint64_t n) {
  uint64_t cur = atomic_load(&ctx->mem);
  do {
    if (cur + n > ctx->o.max_memory) return -1;
  } while (!atomic_compare_exchange_weak(&ctx->mem, &cur, cur + n));
  return 0;
}

static void mem_give(struct ps_ctx *ctx, uint64_t n) { atomic_fetch_sub(&ctx->mem, n); }

/* ---- Partitions ---- */

/* What a partition's record costs, buffers aside: counted against max_memory like the buffers,
 * so that records without data (a GONE placeholder) cannot grow without bound either. */
static uint64_t part_overhead(uint32_t nranks) {
  return sizeof(struct ps_part) + (uint64_t)nranks * (1 + sizeof(void *) + sizeof(const void *));
}

/* A new partition record; NULL when out of memory, or (*over set) over the memory limit. */
static struct ps_part *part_new(struct ps_ctx *ctx, const struct ps_hdr *h, uint32_t nranks,
                                int *over) {
  *over = 0;
  if (mem_take(ctx, part_overhead(nranks)) != 0) {
    *over = 1;
    return NULL;
  }
  struct ps_part *p = calloc(1, sizeof *p);
  if (p) {
    p->rs = calloc(nranks, 1);
    p->bufs = calloc(nranks, sizeof *p->bufs);
    p->srcs = calloc(nranks, sizeof *p->srcs);
  }
  if (!p || !p->rs || !p->bufs || !p->srcs) {
    if (p) {
      free(p->rs);
      free(p->bufs);
      free(p->srcs);
    }
    free(p);
    mem_give(ctx, part_overhead(nranks));
    return NULL;
  }
  atomic_init(&p->refs, 1);
  p->ctx = ctx;
  p->seq = h->seq;
  p->part = h->part;
  p->len = h->len;
  p->nranks = nranks;
  p->dtype = h->dtype;
  p->op = h->op;
  return p;
}

void ps_part_get(struct ps_part *p) { atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); }

void ps_part_put(struct ps_part *p) {
  if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1) return;
  for (uint32_t i = 0; i < p->nranks; i++) {
    if (!p->bufs[i]) continue;
    free(p->bufs[i]);
    mem_give(p->ctx, p->len);
  }
  mem_give(p->ctx, part_overhead(p->nranks));
  free(p->rs);
  free(p->bufs);
  free(p->srcs);
  free(p);
}

static size_t bucket_of(const struct ps_session *s, uint64_t seq, uint32_t part) {
  uint64_t k = (seq * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)part * 0xc2b2ae3d27d4eb4full);
  return (size_t)(k ^ (k >> 29)) & (s->nbuckets - 1);
}

static struct ps_part *table_find(struct ps_session *s, uint64_t seq, uint32_t part) {
  if (!s->nbuckets) return NULL;
  for (struct ps_part *p = s->buckets[bucket_of(s, seq, part)]; p; p = p->next)
    if (p->seq == seq && p->part == part) return p;
  return NULL;
}

static int table_insert(struct ps_session *s, struct ps_part *p) {
  if (s->nparts + 1 > s->nbuckets) { /* grow at load 1 */
    size_t nb = s->nbuckets ? s->nbuckets * 2 : 64;
    struct ps_part **b = calloc(nb, sizeof *b);
    if (!b) return -1;
    size_t old_nb = s->nbuckets;
    struct ps_part **old = s->buckets;
    s->buckets = b;
    s->nbuckets = nb;
    for (size_t i = 0; i < old_nb; i++) {
      for (struct ps_part *q = old[i], *next; q; q = next) {
        next = q->next;
        size_t k = bucket_of(s, q->seq, q->part);
        q->next = b[k];
        b[k] = q;
      }
    }
    free(old);
  }
  size_t k = bucket_of(s, p->seq, p->part);
  p->next = s->buckets[k];
  s->buckets[k] = p;
  s->nparts++;
  return 0;
}

static void table_remove(struct ps_session *s, struct ps_part *p) {
  for (struct ps_part **pp = &s->buckets[bucket_of(s, p->seq, p->part)]; *pp; pp = &(*pp)->next) {
    if (*pp == p) {
      *pp = p->next;
      p->next = NULL;
      s->nparts--;
      return;
    }
  }
}

/* ---- Sessions ---- */

static void session_put(struct ps_session *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
  pthread_mutex_destroy(&s->mu);
  free(s->members);
  free(s->buckets);
  free(s);
}

static struct ps_session *session_new(struct ps_ctx *ctx, const struct ps_hello *h, int hold) {
  struct ps_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->members = calloc(h->nranks, sizeof *s->members);
  if (!s->members || pthread_mutex_init(&s->mu, NULL) != 0) {
    free(s->members);
    free(s);
    return NULL;
  }
  atomic_init(&s->refs, 1); /* the registry's */
  s->ctx = ctx;
  memcpy(s->id, h->session, PS_SESSION_BYTES);
  snprintf(s->idhex, sizeof s->idhex, "%02x%02x%02x%02x", h->session[0], h->session[1],
           h->session[2], h->session[3]);
  s->nranks = h->nranks;
  s->hold = hold;
  s->t_created = ps_ctx_now(ctx);
  s->join_deadline = s->t_created + ctx->o.join_timeout_ns;
  return s;
}

/* Fills out[] with the members (each with a reference); under s->mu. */
static void members_snapshot(struct ps_session *s, struct ps_conn **out) {
  for (uint32_t r = 0; r < s->nranks; r++) {
    out[r] = s->members[r];
    if (out[r]) ps_conn_get(out[r]);
  }
}

static struct ps_conn **fanout_alloc(struct ps_session *s, struct ps_conn **small) {
  return s->nranks <= SMALL_FANOUT ? small : malloc(s->nranks * sizeof(struct ps_conn *));
}

static void fanout_free(struct ps_conn **v, struct ps_conn **small) {
  if (v != small) free(v);
}

/* Closes the session: ERROR (with reason) to every member, then closes them; frees every
 * partition; logs the statistics.  Idempotent, any thread, no lock held. */
static void session_close(struct ps_session *s, uint64_t seq, uint32_t part, const char *reason,
                          const struct ps_conn *culprit) {
  struct ps_ctx *ctx = s->ctx;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    pthread_mutex_unlock(&s->mu);
    return;
  }
  s->closed = 1;
  uint64_t now = ps_ctx_now(ctx);
  double secs = (double)(now - s->t_created) / 1e9;
  double active = s->ready ? (double)(now - s->t_ready) / 1e9 : 0;
  pthread_mutex_unlock(&s->mu);
  /* From here on, nobody else touches the members or the table (every path checks closed). */

  if (culprit) /* the cause, once; what follows from it (other members closing) is not logged */
    ps_logf(ctx, PS_LOG_INFO, "session %s rank %u (%s): %s", s->idhex, culprit->rank,
            culprit->peer, reason);
  else
    ps_logf(ctx, PS_LOG_INFO, "session %s: %s", s->idhex, reason);

  pthread_mutex_lock(&ctx->reg_mu);
  for (struct ps_session **pp = &ctx->sessions; *pp; pp = &(*pp)->next) {
    if (*pp == s) {
      *pp = s->next;
      ctx->nsessions--;
      break;
    }
  }
  memcpy(ctx->tomb[ctx->tomb_next], s->id, PS_SESSION_BYTES);
  ctx->tomb_next = (ctx->tomb_next + 1) % TOMBSTONES;
  if (ctx->ntomb < TOMBSTONES) ctx->ntomb++;
  pthread_mutex_unlock(&ctx->reg_mu);

  ps_logf(ctx, PS_LOG_INFO,
          "session %s closed: %u ranks (%u joined), %llu ops, %llu partitions, %.1f MB in, "
          "%.1f MB out, %.1f s, %.2f GB/s in while ready",
          s->idhex, s->nranks, s->njoined, (unsigned long long)s->ops,
          (unsigned long long)s->parts_done, (double)s->bytes_in / 1e6,
          (double)s->bytes_out / 1e6, secs, active > 0 ? (double)s->bytes_in / 1e9 / active : 0.0);

  char text[PS_MAX_TEXT + 1];
  if (culprit)
    snprintf(text, sizeof text, "braid-ps: session closed: rank %u: %s", culprit->rank, reason);
  else
    snprintf(text, sizeof text, "braid-ps: session closed: %s", reason);
  for (uint32_t r = 0; r < s->nranks; r++) {
    struct ps_conn *m = s->members[r];
    if (!m) continue;
    s->members[r] = NULL;
    ps_conn_close(m, PS_ERROR, seq, part, text);
    ps_conn_put(m);
  }
  for (size_t i = 0; i < s->nbuckets; i++) {
    struct ps_part *p = s->buckets[i];
    s->buckets[i] = NULL;
    while (p) {
      struct ps_part *next = p->next;
      ps_part_put(p);
      p = next;
    }
  }
  s->nparts = 0;
  session_put(s); /* the registry's reference */
}

void ps_ctx_close_all(struct ps_ctx *ctx, const char *why) {
  for (;;) {
    pthread_mutex_lock(&ctx->reg_mu);
    struct ps_session *s = ctx->sessions;
    if (s) atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&ctx->reg_mu);
    if (!s) return;
    session_close(s, 0, 0, why, NULL);
    session_put(s);
  }
}

/* ---- Handshake ---- */

/* Refuses a connection that is not (yet) a session member: REFUSE with the reason, then close. */
static void refuse(struct ps_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(struct ps_conn *c, const char *fmt, ...) {
  char reason[PS_MAX_TEXT + 1];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  if (c->state == PS_CONN_AUTH || c->state == PS_CONN_JOINED)
    ps_logf(c->ctx, PS_LOG_INFO, "refused %s (session %02x%02x%02x%02x rank %u/%u): %s", c->peer,
            c->hello.session[0], c->hello.session[1], c->hello.session[2], c->hello.session[3],
            c->hello.rank, c->hello.nranks, reason);
  else /* a stranger (nothing proven): one line a second for all of them */
    ps_ctx_stranger(c->ctx, c->peer, reason);
  ps_conn_close(c, PS_REFUSE, 0, 0, reason);
}

/* A member broke the protocol or failed: closes its session.  Not a member: refuses it. */
static void violation(struct ps_conn *c, uint64_t seq, uint32_t part, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void violation(struct ps_conn *c, uint64_t seq, uint32_t part, const char *fmt, ...) {
  char reason[PS_MAX_TEXT - 40];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  struct ps_session *s = c->session;
  if (!s) {
    refuse(c, "%s", reason);
    return;
  }
  session_close(s, seq, part, reason, c);
}

void ps_proto_conn_init(struct ps_conn *c) {
  c->hs_deadline = ps_ctx_now(c->ctx) + c->ctx->o.handshake_timeout_ns;
  atomic_store(&c->pending, 1);
  atomic_fetch_add(&c->ctx->pending, 1);
  ps_logf(c->ctx, PS_LOG_DEBUG, "connection from %s", c->peer);
}

static void not_pending(struct ps_conn *c) {
  if (!atomic_load(&c->pending)) return;
  atomic_store(&c->pending, 0);
  atomic_fetch_sub(&c->ctx->pending, 1);
}

/* HELLO: answered with a random nonce and nothing else; the head proves first. */
static void on_hello(struct ps_conn *c, const struct ps_hdr *h) {
  char err[256];
  if (ps_hello_decode(c->small, &c->hello, err, sizeof err) != 0) {
    refuse(c, "%s", err);
    return;
  }
  if (h->flags & ~PS_FLAG_KNOWN) {
    refuse(c, "unknown HELLO flags 0x%02x", h->flags);
    return;
  }
  if (c->ctx->o.require_frame_auth && !(h->flags & PS_FLAG_AUTH)) {
    refuse(c, "this braid-ps requires frame authentication (BRAID_PS_FRAME_AUTH=1 on the nodes)");
    return;
  }
  c->hello_flags = h->flags;
  ps_auth_random(c->server_nonce, sizeof c->server_nonce);
  c->state = PS_CONN_AUTH;
  struct ps_hdr out = {.type = PS_CHALLENGE, .len = PS_CHALLENGE_BYTES};
  ps_conn_send(c, &out, c->server_nonce);
}

static void transcript(const struct ps_conn *c, struct ps_transcript *t) {
  ps_hello_encode(&c->hello, t->hello);
  t->flags = c->hello_flags;
  memcpy(t->server_nonce, c->server_nonce, PS_NONCE_BYTES);
}

static int tombstoned(struct ps_ctx *ctx, const uint8_t *id) {
  for (size_t i = 0; i < ctx->ntomb; i++)
    if (memcmp(ctx->tomb[i], id, PS_SESSION_BYTES) == 0) return 1;
  return 0;
}

static void on_auth(struct ps_conn *c) {
  struct ps_ctx *ctx = c->ctx;
  struct ps_transcript t;
  transcript(c, &t);
  uint8_t want[PS_PROOF_BYTES];
  ps_auth_head_proof(ctx->token, &t, want);
  if (!ps_auth_equal(want, c->small)) {
    refuse(c, "authentication failed (wrong token?)");
    return;
  }
  /* The head knows the token: now the server proves it does too, and with frame authentication
   * everything after this PROOF (READY, or a REFUSE below) carries a tag. */
  not_pending(c);
  uint8_t proof[PS_PROOF_BYTES];
  ps_auth_server_proof(ctx->token, &t, proof);
  struct ps_hdr ph = {.type = PS_PROOF, .len = PS_SERVER_PROOF_BYTES};
  ps_conn_send(c, &ph, proof);
  if (c->hello_flags & PS_FLAG_AUTH) {
    uint8_t key[PS_KEY_BYTES];
    ps_auth_conn_key(ctx->token, &t, key);
    ps_conn_start_auth(c, key);
    explicit_bzero(key, sizeof key);
  }
  int hold = (c->hello_flags & PS_FLAG_HOLD) != 0;
  char why[160] = "";
  struct ps_session *s = NULL;
  int ready = 0;
  struct ps_conn *small[SMALL_FANOUT];
  struct ps_conn **fan = c->hello.nranks <= SMALL_FANOUT ? small
                                                         : malloc(c->hello.nranks * sizeof *fan);
  if (!fan) {
    refuse(c, "out of memory");
    return;
  }

  pthread_mutex_lock(&ctx->reg_mu);
  if (tombstoned(ctx, c->hello.session)) {
    snprintf(why, sizeof why, "session already closed");
  } else {
    for (s = ctx->sessions; s; s = s->next)
      if (memcmp(s->id, c->hello.session, PS_SESSION_BYTES) == 0) break;
    if (!s) {
      s = session_new(ctx, &c->hello, hold);
      if (s) {
        s->next = ctx->sessions;
        ctx->sessions = s;
        ctx->nsessions++;
      } else {
        snprintf(why, sizeof why, "out of memory");
      }
    }
  }
  if (s) {
    pthread_mutex_lock(&s->mu);
    uint32_t r = c->hello.rank;
    if (s->closed)
      snprintf(why, sizeof why, "session already closed");
    else if (s->ready)
      snprintf(why, sizeof why, "session already complete");
    else if (s->nranks != c->hello.nranks)
      snprintf(why, sizeof why, "session has %u ranks, HELLO says %u", s->nranks, c->hello.nranks);
    else if (s->hold != hold)
      snprintf(why, sizeof why, "hold-back flag %d differs from the session's (%d)", hold, s->hold);
    else if (s->members[r])
      snprintf(why, sizeof why, "rank %u already joined", r);
    if (!why[0]) {
      ps_conn_get(c);
      s->members[r] = c;
      s->njoined++;
      atomic_fetch_add(&s->refs, 1);
      c->session = s;
      c->rank = r;
      c->state = PS_CONN_JOINED;
      if (s->njoined == s->nranks) {
        s->ready = ready = 1;
        c->state = PS_CONN_READY;
        s->t_ready = ps_ctx_now(ctx);
        members_snapshot(s, fan);
      }
    }
    pthread_mutex_unlock(&s->mu);
  }
  pthread_mutex_unlock(&ctx->reg_mu);

  if (why[0]) {
    fanout_free(fan, small);
    refuse(c, "%s", why);
    return;
  }
  ps_logf(ctx, PS_LOG_DEBUG, "session %s rank %u/%u joined from %s%s", s->idhex, c->rank,
          s->nranks, c->peer, hold ? " (hold-back)" : "");
  if (!ready) {
    fanout_free(fan, small);
    return;
  }
  ps_logf(ctx, PS_LOG_INFO, "session %s ready: %u ranks%s", s->idhex, s->nranks,
          hold ? ", hold-back" : "");
  struct ps_hdr h = {.type = PS_READY, .flags = PS_FLAG_ECHO_ADMIT};
  for (uint32_t i = 0; i < s->nranks; i++) {
    ps_conn_send(fan[i], &h, NULL);
    ps_conn_put(fan[i]);
  }
  fanout_free(fan, small);
}

/* ---- Data ---- */

/* An error in a partition: ERROR to the session and close it. */
static int session_error(struct ps_conn *c, const struct ps_hdr *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int session_error(struct ps_conn *c, const struct ps_hdr *h, const char *fmt, ...) {
  char reason[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  violation(c, h->seq, h->part, "seq %llu part %u: %s", (unsigned long long)h->seq, h->part,
            reason);
  return -1;
}

static int push_header(struct ps_conn *c, const struct ps_hdr *h, uint8_t **dst,
                       struct ps_part **out) {
  struct ps_session *s = c->session;
  struct ps_ctx *ctx = c->ctx;
  if (h->rank != c->rank) return session_error(c, h, "PUSH for rank %u", h->rank);
  size_t tsz = braid_reduce_type_size(h->dtype);
  if (!tsz || !braid_reduce_supported(h->dtype, h->op))
    return session_error(c, h, "unsupported data type %u / op %u", h->dtype, h->op);
  if (h->len % tsz)
    return session_error(c, h, "%u bytes is not a whole number of %zu-byte elements", h->len, tsz);
  if (mem_take(ctx, h->len) != 0)
    return session_error(c, h, "memory limit: %llu of %llu bytes in use, PUSH of %u refused",
                         (unsigned long long)ps_ctx_memory(ctx),
                         (unsigned long long)ctx->o.max_memory, h->len);
  void *buf = malloc(h->len);
  if (!buf) {
    mem_give(ctx, h->len);
    return session_error(c, h, "out of memory (PUSH of %u bytes)", h->len);
  }

  const char *bad = NULL;
  struct ps_part *p = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    bad = "";
  } else if (!(p = table_find(s, h->seq, h->part))) {
    int over;
    p = part_new(ctx, h, s->nranks, &over);
    if (!p || table_insert(s, p) != 0) {
      if (p) ps_part_put(p);
      p = NULL;
      bad = over ? "memory limit: no room for a partition record" : "out of memory";
    }
  } else if ((!p->settled || p->len) && (p->len != h->len || p->dtype != h->dtype || p->op != h->op)) {
    /* (a settled partition's length too, once a PUSH set it: every buffer of the partition is
     * given back at its length, so one of another length would leave the difference counted) */
    bad = "PUSH differs from the partition's first PUSH (length, data type or op)";
  } else if (p->rs[c->rank] & (RS_PUSHED | RS_GONE)) {
    bad = "duplicate PUSH";
  }
  if (!bad) {
    if (p->settled && p->len == 0) { /* a GONE placeholder: account buffers by this length */
      p->len = h->len;
      p->dtype = h->dtype;
      p->op = h->op;
    }
    p->rs[c->rank] |= RS_PUSHED;
    p->bufs[c->rank] = buf;
    if (c->rank == 0) memcpy(p->weights, h->weights, PS_MAX_SERVERS), p->admit = h->flags;
    ps_part_get(p); /* the reader's */
  }
  pthread_mutex_unlock(&s->mu);
  if (bad) {
    free(buf);
    mem_give(ctx, h->len);
    if (bad[0]) return session_error(c, h, "%s", bad);
    return -1;
  }
  *dst = buf;
  *out = p;
  return 0;
}

static void send_all(struct ps_conn **fan, uint32_t n, const struct ps_hdr *h, struct ps_part *p) {
  for (uint32_t i = 0; i < n; i++) {
    if (!fan[i]) continue;
    if (p)
      ps_conn_send_result(fan[i], h, p, p->bufs[0]);
    else
      ps_conn_send(fan[i], h, NULL);
    ps_conn_put(fan[i]);
  }
}

static void push_arrived(struct ps_conn *c, const struct ps_hdr *h, struct ps_part *p) {
  struct ps_session *s = c->session;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    pthread_mutex_unlock(&s->mu);
    return;
  }
  p->rs[c->rank] |= RS_ARRIVED;
  p->narrived++;
  s->bytes_in += h->len;
  if (p->settled) { /* every head holds the result already: release this one, drop its input */
    free(p->bufs[c->rank]);
    p->bufs[c->rank] = NULL;
    mem_give(c->ctx, h->len);
    int gone = p->narrived + p->ngone == p->nranks;
    if (gone) table_remove(s, p);
    pthread_mutex_unlock(&s->mu);
    struct ps_hdr r = {.type = PS_RELEASE, .part = h->part, .seq = h->seq};
    ps_conn_send(c, &r, NULL);
    if (gone) ps_part_put(p); /* the table's reference */
    return;
  }
  int last = p->narrived == p->nranks;
  pthread_mutex_unlock(&s->mu);
  if (!last) return;

  /* Every input is in and nobody writes them any more: reduce, in rank order, no lock held. */
  for (uint32_t r = 0; r < p->nranks; r++) p->srcs[r] = p->bufs[r];
  size_t count = p->len / braid_reduce_type_size(p->dtype);
  if (braid_reduce(p->bufs[0], p->srcs, (int)p->nranks, count, p->dtype, p->op) != 0) {
    session_error(c, h, "reduction failed (data type %u / op %u)", p->dtype, p->op);
    return;
  }
  for (uint32_t r = 1; r < p->nranks; r++) { /* the inputs are no longer needed */
    free(p->bufs[r]);
    p->bufs[r] = NULL;
    mem_give(c->ctx, p->len);
  }

  struct ps_conn *small[SMALL_FANOUT], **fan = fanout_alloc(s, small);
  if (!fan) {
    session_error(c, h, "out of memory");
    return;
  }
  int drop = 0;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    pthread_mutex_unlock(&s->mu);
    fanout_free(fan, small);
    return;
  }
  p->reduced = 1;
  s->parts_done++;
  s->bytes_out += (uint64_t)p->len * p->nranks;
  if (!s->any_op || p->seq > s->seq_counted) {
    s->any_op = 1;
    s->seq_counted = p->seq;
    s->ops++;
  }
  if (!s->hold) { /* the RESULT frames hold the partition from here on */
    table_remove(s, p);
    drop = 1;
  }
  members_snapshot(s, fan);
  pthread_mutex_unlock(&s->mu);

  struct ps_hdr r = {.type = PS_RESULT, .dtype = p->dtype, .op = p->op, .flags = p->admit,
                     .len = p->len, .part = p->part, .seq = p->seq};
  memcpy(r.weights, p->weights, PS_MAX_SERVERS);
  send_all(fan, s->nranks, &r, p);
  fanout_free(fan, small);
  if (drop) ps_part_put(p); /* the table's reference */
}

/* DONE and GONE exist only with hold-back, and may release a partition to every member: checks
 * the first and returns the fan-out array for the second (NULL after closing the session). */
static struct ps_conn **hold_frame_fanout(struct ps_conn *c, const struct ps_hdr *h,
                                          struct ps_conn **small) {
  struct ps_session *s = c->session;
  if (!s->hold) {
    violation(c, h->seq, h->part, "%s in a session without hold-back", ps_type_name(h->type));
    return NULL;
  }
  struct ps_conn **fan = fanout_alloc(s, small);
  if (!fan) session_error(c, h, "out of memory");
  return fan;
}

static void on_done(struct ps_conn *c, const struct ps_hdr *h) {
  struct ps_session *s = c->session;
  struct ps_conn *small[SMALL_FANOUT], **fan = hold_frame_fanout(c, h, small);
  if (!fan) return;
  const char *bad = NULL;
  struct ps_part *p = NULL;
  int release = 0;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    bad = "";
  } else if (!(p = table_find(s, h->seq, h->part)) || !p->reduced) {
    bad = "DONE for a partition without a RESULT";
  } else if (p->rs[c->rank] & RS_DONE) {
    bad = "duplicate DONE";
  } else {
    p->rs[c->rank] |= RS_DONE;
    if (++p->ndone == p->nranks) {
      table_remove(s, p);
      members_snapshot(s, fan);
      release = 1;
    }
  }
  pthread_mutex_unlock(&s->mu);
  if (bad) {
    fanout_free(fan, small);
    if (bad[0]) session_error(c, h, "%s", bad);
    return;
  }
  if (release) {
    struct ps_hdr r = {.type = PS_RELEASE, .part = h->part, .seq = h->seq};
    send_all(fan, s->nranks, &r, NULL);
    ps_part_put(p); /* the table's reference */
  }
  fanout_free(fan, small);
}

/* GONE: this head completed (seq, part) at a server it lost, so every head holds its result.
 * Heads that re-send the partition here are released (now, or when their push arrives) instead
 * of waiting for an input that will never come.  The entry is dropped once every head is
 * accounted for (pushed or GONE). */
static void on_gone(struct ps_conn *c, const struct ps_hdr *h) {
  struct ps_session *s = c->session;
  struct ps_conn *small[SMALL_FANOUT], **fan = hold_frame_fanout(c, h, small);
  if (!fan) return;
  const char *bad = NULL;
  struct ps_part *p = NULL;
  int gone = 0, first = 0;
  pthread_mutex_lock(&s->mu);
  if (s->closed) {
    bad = "";
  } else if (!(p = table_find(s, h->seq, h->part))) {
    struct ps_hdr t = {.seq = h->seq, .part = h->part}; /* no data: a placeholder */
    int over;
    p = part_new(c->ctx, &t, s->nranks, &over);
    if (!p || table_insert(s, p) != 0) {
      if (p) ps_part_put(p);
      p = NULL;
      bad = over ? "memory limit: no room for a GONE placeholder (too many partitions held)"
                 : "out of memory";
    }
  } else if (p->reduced) {
    bad = "GONE for a partition every head pushed here";
  } else if (p->rs[c->rank] & (RS_PUSHED | RS_GONE)) {
    bad = "GONE after a PUSH or GONE of the same head";
  }
  if (!bad) {
    p->rs[c->rank] |= RS_GONE;
    p->ngone++;
    first = !p->settled;
    p->settled = 1;
    if (first) {
      members_snapshot(s, fan);
      for (uint32_t r = 0; r < s->nranks; r++) {
        if (p->rs[r] & RS_ARRIVED) { /* its input is no longer needed; it gets RELEASE below */
          free(p->bufs[r]);
          p->bufs[r] = NULL;
          mem_give(c->ctx, p->len);
        } else if (fan[r]) { /* not here yet, or still arriving: released when it arrives */
          ps_conn_put(fan[r]);
          fan[r] = NULL;
        }
      }
    }
    gone = p->narrived + p->ngone == p->nranks;
    if (gone) table_remove(s, p);
  }
  pthread_mutex_unlock(&s->mu);
  if (bad) {
    fanout_free(fan, small);
    if (bad[0]) session_error(c, h, "%s", bad);
    return;
  }
  if (first) {
    struct ps_hdr r = {.type = PS_RELEASE, .part = h->part, .seq = h->seq};
    send_all(fan, s->nranks, &r, NULL);
  }
  fanout_free(fan, small);
  if (gone) ps_part_put(p); /* the table's reference */
}

/* ---- Entry points from conn.c ---- */

int ps_proto_header(struct ps_conn *c, const uint8_t raw[PS_HDR_BYTES], struct ps_hdr *h,
                    uint8_t **dst, struct ps_part **part) {
  char err[128];
  *dst = NULL;
  *part = NULL;
  if (ps_hdr_decode(raw, h, err, sizeof err) != 0) {
    violation(c, 0, 0, "malformed frame: %s", err);
    return -1;
  }
  if (c->state == PS_CONN_JOINED) { /* READY may have been sent by another thread since */
    pthread_mutex_lock(&c->session->mu);
    if (c->session->ready) c->state = PS_CONN_READY;
    pthread_mutex_unlock(&c->session->mu);
  }
  switch (c->state) {
  case PS_CONN_HELLO:
  case PS_CONN_AUTH: {
    int want = c->state == PS_CONN_HELLO ? PS_HELLO : PS_AUTH;
    if (h->type != want) {
      refuse(c, "expected %s, got %s", ps_type_name(want), ps_type_name(h->type));
      return -1;
    }
    *dst = c->small; /* ps_hdr_decode checked the size */
    return 0;
  }
  case PS_CONN_JOINED:
    violation(c, h->seq, h->part, "%s frame before READY", ps_type_name(h->type));
    return -1;
  case PS_CONN_READY:
    if (h->type == PS_PUSH) return push_header(c, h, dst, part);
    if (h->type == PS_DONE || h->type == PS_GONE) return 0;
    violation(c, h->seq, h->part, "unexpected %s frame", ps_type_name(h->type));
    return -1;
  }
  return -1;
}

void ps_proto_frame(struct ps_conn *c, const struct ps_hdr *h, struct ps_part *part) {
  switch (h->type) {
  case PS_HELLO: on_hello(c, h); break;
  case PS_AUTH: on_auth(c); break;
  case PS_PUSH: push_arrived(c, h, part); break;
  case PS_DONE: on_done(c, h); break;
  case PS_GONE: on_gone(c, h); break;
  default: break;
  }
}

void ps_proto_bad_tag(struct ps_conn *c, const struct ps_hdr *h, uint64_t n) {
  violation(c, h->seq, h->part,
            "frame %llu (%s) failed its authentication tag: modified, replayed, dropped or "
            "reordered in transit, or not from this head",
            (unsigned long long)n, ps_type_name(h->type));
}

void ps_proto_lost(struct ps_conn *c, const char *why) {
  if (c->session) {
    violation(c, 0, 0, "%s", why);
  } else {
    ps_logf(c->ctx, PS_LOG_DEBUG, "%s: %s during the handshake", c->peer, why);
    ps_conn_close(c, 0, 0, 0, NULL);
  }
}

void ps_proto_tick(struct ps_conn *c) {
  struct ps_ctx *ctx = c->ctx;
  uint64_t now = ps_ctx_now(ctx);
  if (c->state == PS_CONN_HELLO || c->state == PS_CONN_AUTH) {
    if (now >= c->hs_deadline)
      refuse(c, "handshake not finished within %.1f s", (double)ctx->o.handshake_timeout_ns / 1e9);
    return;
  }
  if (c->state != PS_CONN_JOINED) return;
  struct ps_session *s = c->session;
  pthread_mutex_lock(&s->mu);
  int expired = !s->ready && !s->closed && now >= s->join_deadline;
  uint32_t joined = s->njoined;
  if (s->ready) c->state = PS_CONN_READY;
  pthread_mutex_unlock(&s->mu);
  if (expired) {
    char why[128];
    snprintf(why, sizeof why, "join timeout: %u of %u ranks joined within %.1f s", joined,
             s->nranks, (double)ctx->o.join_timeout_ns / 1e9);
    session_close(s, 0, 0, why, NULL);
  }
}

void ps_proto_conn_free(struct ps_conn *c) {
  not_pending(c);
  if (c->session) session_put(c->session);
  c->session = NULL;
}
