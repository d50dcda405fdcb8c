/* braid-trace-shape: the canonical summary of a parsed job (what README.md calls its shape). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape.h"

#define SUM_LINE 65536

void shape_text_add(struct shape_text *t, const char *fmt, ...) {
  char *s = malloc(SUM_LINE);
  if (!s) exit(2);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s, SUM_LINE, fmt, ap);
  va_end(ap);
  if (t->n == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 32;
    t->line = realloc(t->line, t->cap * sizeof *t->line);
    if (!t->line) exit(2);
  }
  t->line[t->n++] = s;
}

void shape_text_free(struct shape_text *t) {
  for (size_t i = 0; i < t->n; i++) free(t->line[i]);
  free(t->line);
  memset(t, 0, sizeof *t);
}

/* ---- pairing and matching ---- */

struct sum_match {
  uint64_t sends, recvs, unmatched_sends, unmatched_recvs, tag_mismatch;
  uint64_t recv_first, send_first, overlap; /* matched sends by posting order */
};

/* Send and recv comms with one connection handle are the two ends of one connection. */
static int sum_pair(struct shape_job *job) {
  int paired = 0;
  for (size_t i = 0; i < job->ncomms; i++) {
    struct shape_comm *s = &job->comms[i];
    if (s->kind != 's' || !s->hash) continue;
    for (size_t j = 0; j < job->ncomms; j++) {
      struct shape_comm *r = &job->comms[j];
      if (r->kind == 'r' && r->peer < 0 && r->hash == s->hash) {
        s->peer = (int)j, r->peer = (int)i;
        paired++;
        break;
      }
    }
  }
  return paired;
}

/* Segment start on one time line: monotonic when every trace is from one host, else wall time. */
static int64_t sum_base(const struct shape_job *job, int seg) {
  for (size_t i = 1; i < job->nsegs; i++)
    if (strcmp(job->segs[i].host, job->segs[0].host)) return job->segs[seg].epoch_ns;
  return job->segs[seg].mono_ns;
}

/* Sends match receives in posting order; a receive of n buffers takes the next n sends, each
 * landing in the buffer with its tag. */
static void sum_match_pair(const struct shape_job *job, const struct shape_comm *s,
                           const struct shape_comm *r, struct sum_match *m) {
  int64_t sb = sum_base(job, s->seg), rb = sum_base(job, r->seg);
  size_t j = 0;
  for (size_t k = 0; k < r->nposts; k++) {
    const struct shape_post *rp = &r->posts[k];
    if (j + (size_t)rp->n > s->nposts) {
      m->unmatched_recvs += r->nposts - k;
      break;
    }
    m->recvs++;
    for (int b = 0; b < rp->n; b++, j++) {
      const struct shape_post *sp = &s->posts[j];
      int stag = job->tags[sp->tags], found = 0;
      for (int q = 0; q < rp->n; q++) found |= job->tags[rp->tags + q] == stag;
      if (!found) m->tag_mismatch++;
      m->sends++;
      if (rb + rp->t1 <= sb + sp->t0) m->recv_first++;
      else if (sb + sp->t1 <= rb + rp->t0) m->send_first++;
      else m->overlap++;
    }
  }
  m->unmatched_sends += s->nposts - j;
}

/* ---- per-direction figures ---- */

static int sum_cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "sig1 xN sig2 xM" from one string per comm (sorted, counted). */
static void sum_sigs(char **sig, size_t n, char *out, size_t len) {
  qsort(sig, n, sizeof *sig, sum_cmp_str);
  size_t o = 0;
  snprintf(out, len, "-");
  for (size_t i = 0; i < n && o + 80 < len;) {
    size_t j = i;
    while (j < n && !strcmp(sig[i], sig[j])) j++;
    int w = snprintf(out + o, len - o, "%s[%s]x%zu", o ? " " : "", sig[i], j - i);
    if (w > 0) o += (size_t)w;
    i = j;
  }
}

#define SHAPE_NCCL_STEPS 8 /* NCCL's most requests in flight per connection */

static void sum_direction(struct shape_job *job, char kind, int verbose, struct shape_text *out) {
  const char *dir = kind == 's' ? "send" : "recv";
  struct shape_hist depth = {0}, values = {0}, distinct = {0};
  char **sig = calloc(job->ncomms + 1, sizeof *sig);
  char *buf = malloc(SUM_LINE), *buf2 = malloc(SUM_LINE);
  if (!sig || !buf || !buf2) exit(2);
  size_t nsig = 0;
  uint64_t maxdepth = 0;
  for (size_t i = 0; i < job->ncomms; i++) {
    struct shape_comm *c = &job->comms[i];
    if (c->kind != kind) continue;
    shape_hist_add(&depth, (uint64_t)c->depth, 1);
    if ((uint64_t)c->depth > maxdepth) maxdepth = (uint64_t)c->depth;
    struct shape_hist mine = {0};
    uint64_t bufs = 0;
    for (size_t k = 0; k < c->nposts; k++)
      for (int b = 0; b < c->posts[k].n; b++, bufs++)
        shape_hist_add(&mine, (uint64_t)(uint32_t)job->tags[c->posts[k].tags + b], 1);
    for (size_t t = 0; t < mine.n; t++) shape_hist_add(&values, mine.key[t], 1);
    shape_hist_add(&distinct, mine.n, 1);
    shape_hist_free(&mine);
    char s[128];
    snprintf(s, sizeof s, "%zumsg/%llubuf/%lluB", c->nposts, (unsigned long long)bufs,
             (unsigned long long)c->bytes);
    sig[nsig++] = strdup(s);
  }
  /* How deep a pipeline got depends on timing (a 3-rank ring reached 5 in one run and 6 in the
   * next), so the shape keeps only its class: one at a time, pipelined within NCCL's cap of
   * NCCL_STEPS (8) in flight, or beyond it; the exact figures are informational. */
  shape_text_add(out, "%s depth: %s", dir,
                 maxdepth <= 1 ? "1" : maxdepth <= SHAPE_NCCL_STEPS ? "2-8" : "over-8");
  shape_hist_format(&depth, buf, SUM_LINE);
  if (verbose) shape_text_add(out, "# %s depth: max=%llu per comm: %s", dir,
                              (unsigned long long)maxdepth, buf);
  shape_hist_format_keys(&values, buf, SUM_LINE);
  shape_hist_format(&distinct, buf2, SUM_LINE);
  shape_text_add(out, "%s tags: values=%s distinct-per-comm=%s", dir, buf, buf2);
  sum_sigs(sig, nsig, buf, SUM_LINE);
  shape_text_add(out, "%s per-comm: %s", dir, buf);
  for (size_t i = 0; i < nsig; i++) free(sig[i]);
  free(sig);
  free(buf);
  free(buf2);
  shape_hist_free(&depth);
  shape_hist_free(&values);
  shape_hist_free(&distinct);
}

/* The share of matched sends whose receive was already posted when the send was posted, in
 * classes that repeat from run to run: "all" (a transport that holds sends until the receive is
 * posted, as IB does), "none" (a caller that posts receives only after the data was sent), or
 * "some" (two processes racing, as on TCP: from a third to nine tenths of the sends, run after
 * run).  -v prints the counts. */
static const char *sum_share(uint64_t part, uint64_t whole) {
  if (!whole) return "-";
  return part == whole ? "all" : part ? "some" : "none";
}

void shape_summarize(struct shape_job *job, int verbose, struct shape_text *out) {
  char *buf = malloc(SUM_LINE);
  if (!buf) exit(2);
  size_t nsend = 0, nrecv = 0;
  for (size_t i = 0; i < job->ncomms; i++) job->comms[i].kind == 's' ? nsend++ : nrecv++;
  int paired = sum_pair(job);
  struct sum_match m = {0};
  for (size_t i = 0; i < job->ncomms; i++) {
    struct shape_comm *s = &job->comms[i];
    if (s->kind == 's' && s->peer >= 0) sum_match_pair(job, s, &job->comms[s->peer], &m);
  }

  shape_text_add(out, "braid-trace-shape: 1");
  shape_text_add(out, "comms: send=%zu recv=%zu paired=%d", nsend, nrecv, paired);
  shape_hist_format(&job->send_sizes, buf, SUM_LINE);
  shape_text_add(out, "send sizes: %s", buf);
  sum_direction(job, 's', verbose, out);
  shape_hist_format(&job->recv_posted, buf, SUM_LINE);
  shape_text_add(out, "recv posted: %s", buf);
  shape_hist_format(&job->recv_received, buf, SUM_LINE);
  shape_text_add(out, "recv received: %s", buf);
  shape_hist_format(&job->recv_n, buf, SUM_LINE);
  shape_text_add(out, "recv n: %s", buf);
  shape_text_add(out, "recv optional-completion: %llu", (unsigned long long)job->opt_recvs);
  sum_direction(job, 'r', verbose, out);
  shape_hist_format(&job->regmr_sizes, buf, SUM_LINE);
  shape_text_add(out, "regmr sizes: %s", buf);
  shape_text_add(out, "iflush: %llu", (unsigned long long)job->iflushes);
  shape_text_add(out, "match: sends=%llu recvs=%llu unmatched-sends=%llu unmatched-recvs=%llu "
                 "tag-mismatch=%llu", (unsigned long long)m.sends, (unsigned long long)m.recvs,
                 (unsigned long long)m.unmatched_sends, (unsigned long long)m.unmatched_recvs,
                 (unsigned long long)m.tag_mismatch);
  shape_text_add(out, "order: recv-posted-first=%s", sum_share(m.recv_first, m.sends));
  shape_text_add(out, "errors: %llu", (unsigned long long)job->errors);

  if (verbose) {
    shape_text_add(out, "# traces: %zu (lines %llu, unreadable %llu)", job->nsegs,
                   (unsigned long long)job->lines, (unsigned long long)job->bad_lines);
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < SHAPE_NCALLS; i++)
      o += (size_t)snprintf(buf + o, SUM_LINE - o, " %s=%llu", shape_call_names[i],
                            (unsigned long long)job->calls[i]);
    shape_text_add(out, "# calls:%s", buf);
    shape_text_add(out, "# order: recv-first=%llu send-first=%llu overlapping=%llu (%.0f%% recv first)",
                   (unsigned long long)m.recv_first, (unsigned long long)m.send_first,
                   (unsigned long long)m.overlap, m.sends ? 100.0 * (double)m.recv_first / (double)m.sends : 0.0);
    if (job->errors) shape_text_add(out, "# first error: %s", job->first_error);
  }
  free(buf);
}
