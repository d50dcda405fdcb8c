/* braid-trace-shape: parsing trace files (format: writer.c, README.md) into a shape_job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape.h"

const char *const shape_call_names[SHAPE_NCALLS] = {
    "load",   "init",  "finalize", "devices", "props",      "set_attr",   "listen",
    "connect", "accept", "regmr",  "deregmr", "isend",      "irecv",      "iflush",
    "test",   "close_send", "close_recv", "close_listen"};

#define READ_MAX_KV 32

struct read_kv {
  const char *k[READ_MAX_KV], *v[READ_MAX_KV];
  int n;
};

static void *read_grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return p;
  size_t cap2 = *cap ? *cap : 16;
  while (cap2 < need) cap2 *= 2;
  void *q = realloc(p, cap2 * elem);
  if (!q) {
    fprintf(stderr, "braid-trace-shape: out of memory\n");
    exit(2);
  }
  memset((char *)q + *cap * elem, 0, (cap2 - *cap) * elem);
  *cap = cap2;
  return q;
}

static const char *kv_get(const struct read_kv *kv, const char *key) {
  for (int i = 0; i < kv->n; i++)
    if (!strcmp(kv->k[i], key)) return kv->v[i];
  return NULL;
}

static long long kv_int(const struct read_kv *kv, const char *key, long long dflt) {
  const char *v = kv_get(kv, key);
  return v && *v && *v != '-' ? strtoll(v, NULL, 0) : dflt;
}

/* "c12" / "r7" -> 12 / 7; "-" or missing -> 0. */
static size_t kv_id(const struct read_kv *kv, const char *key) {
  const char *v = kv_get(kv, key);
  return v && v[0] && v[0] != '-' ? (size_t)strtoull(v + 1, NULL, 10) : 0;
}

/* "123.456" (µs) -> ns. */
static int64_t read_time(const char *s) {
  char *end;
  int64_t us = strtoll(s, &end, 10), ns = 0;
  if (*end == '.') {
    int digits = 0;
    for (const char *p = end + 1; *p >= '0' && *p <= '9' && digits < 3; p++, digits++)
      ns = ns * 10 + (*p - '0');
    for (; digits < 3; digits++) ns *= 10;
  }
  return us * 1000 + ns;
}

static int read_header(struct shape_job *job, char *line, const char *path) {
  job->segs = realloc(job->segs, (job->nsegs + 1) * sizeof *job->segs);
  if (!job->segs) exit(2);
  struct shape_seg *s = &job->segs[job->nsegs++];
  memset(s, 0, sizeof *s);
  snprintf(s->file, sizeof s->file, "%s", path);
  for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n")) {
    if (!strncmp(tok, "host=", 5)) snprintf(s->host, sizeof s->host, "%s", tok + 5);
    else if (!strncmp(tok, "mono_ns=", 8)) s->mono_ns = strtoll(tok + 8, NULL, 10);
    else if (!strncmp(tok, "epoch_ns=", 9)) s->epoch_ns = strtoll(tok + 9, NULL, 10);
  }
  return 0;
}

static struct shape_comm *read_new_comm(struct shape_job *job, struct shape_seg *seg, size_t id,
                                        char kind, const char *hash) {
  if (!id) return NULL;
  job->comms = read_grow(job->comms, &job->comms_cap, job->ncomms + 1, sizeof *job->comms);
  struct shape_comm *c = &job->comms[job->ncomms++];
  memset(c, 0, sizeof *c);
  c->seg = (int)(seg - job->segs);
  c->id = (int)id;
  c->kind = kind;
  c->hash = hash ? strtoull(hash, NULL, 16) : 0;
  c->peer = -1;
  seg->comm_of = read_grow(seg->comm_of, &seg->ncomm_of, id + 1, sizeof *seg->comm_of);
  seg->comm_of[id] = (int)job->ncomms; /* index + 1 */
  return c;
}

static struct shape_comm *read_comm(struct shape_job *job, struct shape_seg *seg, size_t id) {
  return id && id < seg->ncomm_of && seg->comm_of[id] ? &job->comms[seg->comm_of[id] - 1] : NULL;
}

static void read_add_req(struct shape_seg *seg, size_t id, int comm, char op) {
  if (!id) return;
  seg->reqs = read_grow(seg->reqs, &seg->nreqs, id + 1, sizeof *seg->reqs);
  seg->reqs[id].comm = comm + 1;
  seg->reqs[id].op = op;
}

/* Parses "a,b,c" into out (at most max values); returns the count. */
static int read_list(const char *s, uint64_t *out, int max) {
  int n = 0;
  while (s && *s && *s != '-' && n < max) {
    char *end;
    out[n++] = strtoull(s, &end, 10);
    s = *end == ',' ? end + 1 : NULL;
  }
  return n;
}

static void read_post(struct shape_job *job, struct shape_comm *c, int64_t t0, int64_t dur,
                      int n, uint64_t size, const uint64_t *tags) {
  c->posts = read_grow(c->posts, &c->cap, c->nposts + 1, sizeof *c->posts);
  struct shape_post *p = &c->posts[c->nposts++];
  p->t0 = t0;
  p->t1 = t0 + dur;
  p->n = n;
  p->size = size;
  p->tags = (int)job->ntags;
  job->tags = read_grow(job->tags, &job->tags_cap, job->ntags + (size_t)n, sizeof *job->tags);
  for (int i = 0; i < n; i++) job->tags[job->ntags++] = (int)tags[i];
  if (++c->inflight > c->depth) c->depth = c->inflight;
}

/* One call line of segment seg. */
static void read_call(struct shape_job *job, struct shape_seg *seg, const char *call,
                      int64_t t0, const struct read_kv *kv) {
  int64_t dur = kv_int(kv, "dur_ns", 0);
  int ok = kv_int(kv, "rc", 0) == 0;
  uint64_t v[64], tags[64];
  if (!strcmp(call, "connect") || !strcmp(call, "accept")) {
    read_new_comm(job, seg, kv_id(kv, "comm"), call[0] == 'c' ? 's' : 'r', kv_get(kv, "handle"));
  } else if (!strcmp(call, "isend")) {
    struct shape_comm *c = read_comm(job, seg, kv_id(kv, "comm"));
    size_t req = kv_id(kv, "req");
    if (!c || !req || !ok) return;
    uint64_t size = (uint64_t)kv_int(kv, "size", 0), tag = (uint64_t)kv_int(kv, "tag", 0);
    shape_hist_add(&job->send_sizes, size, 1);
    read_post(job, c, t0, dur, 1, size, &tag);
    read_add_req(seg, req, (int)(c - job->comms), 's');
  } else if (!strcmp(call, "irecv")) {
    struct shape_comm *c = read_comm(job, seg, kv_id(kv, "comm"));
    size_t req = kv_id(kv, "req");
    if (!c || !req || !ok) return;
    int n = read_list(kv_get(kv, "sizes"), v, 64);
    if (read_list(kv_get(kv, "tags"), tags, 64) != n) n = 0;
    for (int i = 0; i < n; i++) shape_hist_add(&job->recv_posted, v[i], 1);
    shape_hist_add(&job->recv_n, (uint64_t)n, 1);
    if (kv_int(kv, "opt", 0)) job->opt_recvs++;
    read_post(job, c, t0, dur, n, 0, tags);
    read_add_req(seg, req, (int)(c - job->comms), 'r');
  } else if (!strcmp(call, "iflush")) {
    job->iflushes++;
    struct shape_comm *c = read_comm(job, seg, kv_id(kv, "comm"));
    if (c) read_add_req(seg, kv_id(kv, "req"), (int)(c - job->comms), 'f');
  } else if (!strcmp(call, "test")) {
    size_t req = kv_id(kv, "req");
    if (!req || req >= seg->nreqs || !seg->reqs[req].comm || !kv_int(kv, "done", 0)) return;
    struct shape_comm *c = &job->comms[seg->reqs[req].comm - 1];
    char op = seg->reqs[req].op;
    if (op == 'f') return;
    c->inflight--;
    if (op == 'r') {
      int n = read_list(kv_get(kv, "sizes"), v, 64);
      for (int i = 0; i < n; i++) {
        shape_hist_add(&job->recv_received, v[i], 1);
        c->bytes += v[i];
      }
    } else {
      c->bytes += (uint64_t)kv_int(kv, "sizes", 0);
    }
  } else if (!strcmp(call, "regmr") && ok) {
    shape_hist_add(&job->regmr_sizes, (uint64_t)kv_int(kv, "size", 0), 1);
  }
}

/* "<t_us> T<n> <call> k=v ..." */
static int read_line(struct shape_job *job, char *line, const char *path) {
  char *t = strtok(line, " \n"), *thread = strtok(NULL, " \n"), *call = strtok(NULL, " \n");
  if (!t || !thread || !call || thread[0] != 'T' || !job->nsegs) return -1;
  struct read_kv kv = {.n = 0};
  for (char *tok = strtok(NULL, " \n"); tok && kv.n < READ_MAX_KV; tok = strtok(NULL, " \n")) {
    char *eq = strchr(tok, '=');
    if (!eq) return -1;
    *eq = '\0';
    kv.k[kv.n] = tok;
    kv.v[kv.n++] = eq + 1;
  }
  int known = 0;
  for (int i = 0; i < SHAPE_NCALLS; i++)
    if (!strcmp(call, shape_call_names[i])) job->calls[i]++, known = 1;
  if (!known) return -1;
  if (kv_int(&kv, "rc", 0) != 0) {
    if (!job->errors++)
      snprintf(job->first_error, sizeof job->first_error, "%s: %s rc=%lld", path, call,
               kv_int(&kv, "rc", 0));
  }
  read_call(job, &job->segs[job->nsegs - 1], call, read_time(t), &kv);
  return 0;
}

int shape_read_file(struct shape_job *job, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return -1;
  }
  char line[8192];
  size_t segs0 = job->nsegs;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "# braid-trace ", 14)) read_header(job, line, path);
    else if (line[0] == '#' || line[0] == '\n') continue;
    else if (job->nsegs == segs0) break; /* no header first: not a trace */
    else if (read_line(job, line, path) == 0) job->lines++;
    else job->bad_lines++;
  }
  fclose(f);
  if (job->nsegs == segs0) {
    fprintf(stderr, "braid-trace-shape: %s: not a braid-trace file (no '# braid-trace' header)\n",
            path);
    return -1;
  }
  return 0;
}

void shape_job_free(struct shape_job *job) {
  for (size_t i = 0; i < job->nsegs; i++) {
    free(job->segs[i].comm_of);
    free(job->segs[i].reqs);
  }
  for (size_t i = 0; i < job->ncomms; i++) free(job->comms[i].posts);
  free(job->segs);
  free(job->comms);
  free(job->tags);
  shape_hist_free(&job->send_sizes);
  shape_hist_free(&job->recv_posted);
  shape_hist_free(&job->recv_received);
  shape_hist_free(&job->recv_n);
  shape_hist_free(&job->regmr_sizes);
  memset(job, 0, sizeof *job);
}
