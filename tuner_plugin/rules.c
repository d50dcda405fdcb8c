/* NCCL example-tuner CSV rules: parser, matcher and the one function that reads the file. */
#include "rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nccl_plugin/tuner.h"
#include "textfile.h"

#define RULES_MAX_FIELDS 10
#define RULES_MIN_FIELDS 8
#define RULES_FILE_MAX (16u << 20) /* a rules file is small; refuse anything absurd */

static const char *const coll_names[] = {"broadcast", "reduce", "allgather", "reducescatter",
                                         "allreduce"};
static const char *const algo_names[] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                         "nvls", "nvls_tree", "pat"};
static const char *const proto_names[] = {"ll", "ll128", "simple"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *braid_rule_coll_name(int coll) {
  return coll >= 0 && coll < COUNT(coll_names) ? coll_names[coll] : "?";
}
const char *braid_rule_algo_name(int algo) {
  return algo >= 0 && algo < COUNT(algo_names) ? algo_names[algo] : "?";
}
const char *braid_rule_proto_name(int proto) {
  return proto >= 0 && proto < COUNT(proto_names) ? proto_names[proto] : "?";
}

/* A field of a line: not NUL-terminated. */
struct field {
  const char *p;
  size_t n;
};

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static struct field trim(const char *p, size_t n) {
  while (n && is_blank(*p)) p++, n--;
  while (n && is_blank(p[n - 1])) n--;
  struct field f = {p, n};
  return f;
}

/* Index of f in names (exact, case-sensitive as NCCL's example), or -1. */
static int lookup(struct field f, const char *const *names, int count) {
  for (int i = 0; i < count; i++)
    if (strlen(names[i]) == f.n && memcmp(names[i], f.p, f.n) == 0) return i;
  return -1;
}

/* Decimal digits only; "-1" is accepted as "no bound" (what strtoull makes of it in NCCL's
 * example). 0 on success. */
static int parse_u64(struct field f, uint64_t *out) {
  if (f.n == 2 && f.p[0] == '-' && f.p[1] == '1') {
    *out = UINT64_MAX;
    return 0;
  }
  if (f.n == 0 || f.n > 20) return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < f.n; i++) {
    if (f.p[i] < '0' || f.p[i] > '9') return -1;
    unsigned d = (unsigned)(f.p[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* An int >= -1 ("-1" or decimal digits). 0 on success. */
static int parse_int(struct field f, int *out) {
  if (f.n == 2 && f.p[0] == '-' && f.p[1] == '1') {
    *out = -1;
    return 0;
  }
  uint64_t v;
  if (parse_u64(f, &v) != 0 || v > 0x7fffffff) return -1;
  *out = (int)v;
  return 0;
}

struct line_state {
  char doubt[192]; /* first doubtful point of a line kept, "" if none */
  char fatal[192]; /* why a line is skipped, "" if kept */
};

static void note(char *buf, size_t cap, const char *fmt, const char *what, struct field f) {
  if (buf[0]) return; /* one message per line: the first point */
  int shown = f.n > 40 ? 40 : (int)f.n;
  snprintf(buf, cap, fmt, what, shown, f.p, f.n > 40 ? "..." : "");
}

static void default_warn(void *arg, const char *source, int line, const char *msg) {
  (void)arg;
  BRAID_WARN("tuner rules %s:%d: %s", source, line, msg);
}

/* Parses one non-blank, non-comment line (trimmed) into r. Returns 0 if kept. */
static int parse_line(struct field ln, size_t raw_len, struct braid_rule *r,
                      struct line_state *st) {
  struct field fs[RULES_MAX_FIELDS + 1];
  int nf = 0;
  const char *p = ln.p, *end = ln.p + ln.n;
  for (;;) {
    const char *c = memchr(p, ',', (size_t)(end - p));
    const char *stop = c ? c : end;
    if (nf < RULES_MAX_FIELDS + 1) fs[nf] = trim(p, (size_t)(stop - p));
    nf++;
    if (!c) break;
    p = c + 1;
  }
  if (nf < RULES_MIN_FIELDS || nf > RULES_MAX_FIELDS) {
    snprintf(st->fatal, sizeof st->fatal, "%d fields, expected 8 to 10; line skipped", nf);
    return -1;
  }
  if (raw_len > BRAID_RULE_LINE_MAX)
    snprintf(st->doubt, sizeof st->doubt,
             "line of %zu characters; NCCL's example reads at most %d", raw_len,
             BRAID_RULE_LINE_MAX);

  static const char *const num_names[] = {"channels", "nNodes", "nRanks", "numPipeOps",
                                          "regBuff"};
  int *nums[] = {&r->channels, &r->nnodes, &r->nranks, &r->pipe_ops, &r->reg_buff};
  const char *bad_num = "%s '%.*s%s' is not a number (-1 or 0 and up); line skipped";

  r->coll = lookup(fs[0], coll_names, COUNT(coll_names));
  if (r->coll < 0) {
    r->coll = ncclFuncAllReduce;
    note(st->doubt, sizeof st->doubt, "%s '%.*s%s' unknown, using allreduce", "collective",
         fs[0]);
  }
  if (parse_u64(fs[1], &r->min_bytes) != 0) {
    note(st->fatal, sizeof st->fatal, bad_num, "min_bytes", fs[1]);
    return -1;
  }
  if (parse_u64(fs[2], &r->max_bytes) != 0) {
    note(st->fatal, sizeof st->fatal, bad_num, "max_bytes", fs[2]);
    return -1;
  }
  r->algo = lookup(fs[3], algo_names, COUNT(algo_names));
  if (r->algo < 0) {
    r->algo = NCCL_ALGO_RING;
    note(st->doubt, sizeof st->doubt, "%s '%.*s%s' unknown, using ring", "algorithm", fs[3]);
  }
  r->proto = lookup(fs[4], proto_names, COUNT(proto_names));
  if (r->proto < 0) {
    r->proto = NCCL_PROTO_SIMPLE;
    note(st->doubt, sizeof st->doubt, "%s '%.*s%s' unknown, using simple", "protocol", fs[4]);
  }
  r->pipe_ops = BRAID_RULE_ANY;
  r->reg_buff = BRAID_RULE_ANY;
  for (int i = 5; i < nf; i++) {
    if (parse_int(fs[i], nums[i - 5]) != 0) {
      note(st->fatal, sizeof st->fatal, bad_num, num_names[i - 5], fs[i]);
      return -1;
    }
  }
  if (r->reg_buff > 1) {
    snprintf(st->fatal, sizeof st->fatal, "regBuff %d is not -1, 0 or 1; line skipped",
             r->reg_buff);
    return -1;
  }
  if (r->min_bytes > r->max_bytes) {
    snprintf(st->fatal, sizeof st->fatal,
             "min_bytes %llu > max_bytes %llu, the rule can never match; line skipped",
             (unsigned long long)r->min_bytes, (unsigned long long)r->max_bytes);
    return -1;
  }
  return 0;
}

static int rules_push(struct braid_rules *out, size_t *cap, const struct braid_rule *r) {
  if (out->n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 16;
    struct braid_rule *v = realloc(out->v, ncap * sizeof *v);
    if (!v) return -1;
    out->v = v;
    *cap = ncap;
  }
  out->v[out->n++] = *r;
  return 0;
}

int braid_rules_parse(const char *text, size_t len, const char *source, struct braid_rules *out,
                      braid_rules_warn_fn warn, void *warn_arg) {
  if (!warn) warn = default_warn;
  if (!source) source = "(rules)";
  out->v = NULL;
  out->n = 0;
  size_t cap = 0;
  int nwarn = 0, lineno = 0;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *stop = nl ? nl : end;
    size_t raw_len = (size_t)(stop - p);
    if (raw_len && p[raw_len - 1] == '\r') raw_len--;
    struct field ln = trim(p, (size_t)(stop - p));
    p = nl ? nl + 1 : end;
    lineno++;
    if (ln.n == 0 || ln.p[0] == '#') continue;
    if (memchr(ln.p, '\0', ln.n)) {
      warn(warn_arg, source, lineno, "NUL byte in line; line skipped");
      nwarn++;
      continue;
    }

    struct braid_rule r;
    memset(&r, 0, sizeof r);
    r.line = lineno;
    struct line_state st;
    st.doubt[0] = st.fatal[0] = '\0';
    int kept = parse_line(ln, raw_len, &r, &st) == 0;
    if (!kept || st.doubt[0]) {
      warn(warn_arg, source, lineno, kept ? st.doubt : st.fatal);
      nwarn++;
    }
    if (kept && rules_push(out, &cap, &r) != 0) {
      braid_rules_free(out);
      return -1;
    }
  }
  return nwarn;
}

int braid_rules_load(const char *path, struct braid_rules *out, braid_rules_warn_fn warn,
                     void *warn_arg) {
  out->v = NULL;
  out->n = 0;
  if (!warn) warn = default_warn;
  size_t len = 0;
  char *buf = braid_read_small_file(path, RULES_FILE_MAX, &len);
  if (!buf) {
    if (errno == ENOENT) return 0;
    if (errno == ENOMEM) return -1;
    char msg[160];
    if (errno == EFBIG)
      snprintf(msg, sizeof msg, "larger than 16 MiB, not a rules file; no rules");
    else
      snprintf(msg, sizeof msg, "cannot read: %s; no rules", strerror(errno));
    warn(warn_arg, path, 0, msg);
    return 1;
  }
  int n = braid_rules_parse(buf, len, path, out, warn, warn_arg);
  free(buf);
  return n;
}

static int want(int rule_value, int actual) {
  return rule_value == BRAID_RULE_ANY || rule_value == actual;
}

const struct braid_rule *braid_rules_match(const struct braid_rules *r,
                                           const struct braid_rule_query *q) {
  if (!r) return NULL;
  for (size_t i = 0; i < r->n; i++) {
    const struct braid_rule *x = &r->v[i];
    if (x->coll != q->coll) continue;
    if (q->nbytes < x->min_bytes || q->nbytes > x->max_bytes) continue;
    if (!want(x->nnodes, q->nnodes) || !want(x->nranks, q->nranks)) continue;
    /* An unknown (-1) pipe_ops/reg_buff only meets rules that accept any. */
    if (!want(x->pipe_ops, q->pipe_ops) || !want(x->reg_buff, q->reg_buff)) continue;
    return x;
  }
  return NULL;
}

void braid_rules_free(struct braid_rules *r) {
  if (!r) return;
  free(r->v);
  r->v = NULL;
  r->n = 0;
}
