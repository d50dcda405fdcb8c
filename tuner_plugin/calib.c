/* Calibration and health files (see calib.h): parsers, look-ups, the writer. */
#include "calib.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "nccl_plugin/tuner.h"
#include "textfile.h"

#define CALIB_FILE_MAX (4u << 20)
#define CALIB_MAX_FIELDS 8
#define MIN_REL_BW 0.01

static void default_warn(void *arg, const char *source, int line, const char *msg) {
  (void)arg;
  BRAID_WARN("%s:%d: %s", source, line, msg);
}

/* One parse: where warnings go and how many there were; out is the file's struct. */
struct parse_ctx {
  void *out;
  size_t cap; /* of out's array */
  int warnings;
  const char *source;
  braid_rules_warn_fn warn;
  void *warn_arg;
};

/* One warning about line lineno (0: the whole file), counted. */
static void line_warn(struct parse_ctx *x, int lineno, const char *fmt, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  x->warn(x->warn_arg, x->source, lineno, msg);
  x->warnings++;
}

/* Room for one more element in *v (n used, *cap allocated); 0, or -1 when out of memory. */
static int grow(void **v, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 0;
  size_t ncap = *cap ? *cap * 2 : 16;
  void *nv = realloc(*v, ncap * elem);
  if (!nv) return -1;
  *v = nv;
  *cap = ncap;
  return 0;
}

/* The whole file, or NULL with the reason in err. */
static char *read_input(const char *path, size_t *len, char *err, size_t errlen) {
  char *buf = braid_read_small_file(path, CALIB_FILE_MAX, len);
  if (!buf) snprintf(err, errlen, "%s", errno == EFBIG ? "larger than 4 MiB" : strerror(errno));
  return buf;
}

static int name_index(const char *s, const char *(*name)(int), int count) {
  for (int i = 0; i < count; i++)
    if (strcmp(s, name(i)) == 0) return i;
  return -1;
}

static int parse_pos_int(const char *s, int *out) {
  uint64_t v;
  if (braid_parse_u64(s, &v) || v == 0 || v > 0x7fffffff) return -1;
  *out = (int)v;
  return 0;
}

/* Calls line_fn for each line after the magic first line; handles the text copy and the magic.
 * Returns -1 (with err) when the first line is not "<magic> 1". */
typedef int (*line_fn)(struct parse_ctx *x, char **w, int nw, int lineno);

static int parse_lines(const char *text, size_t len, const char *magic, line_fn fn,
                       struct parse_ctx *x, char *err, size_t errlen) {
  if (errlen) err[0] = '\0';
  if (memchr(text, '\0', len)) {
    snprintf(err, errlen, "holds a NUL byte: not a text file");
    return -1;
  }
  char *copy = malloc(len + 1);
  if (!copy) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  memcpy(copy, text, len);
  copy[len] = '\0';
  int lineno = 0, seen_magic = 0, rc = 0;
  char *save = NULL;
  for (char *p = copy; p && rc >= 0; p = save) {
    char *nl = memchr(p, '\n', (size_t)(copy + len - p));
    save = nl ? nl + 1 : NULL;
    if (nl) *nl = '\0';
    lineno++;
    char *w[CALIB_MAX_FIELDS];
    int nw = braid_split_words(p, w, CALIB_MAX_FIELDS);
    if (nw == 0) {
      if (!save) break;
      continue;
    }
    if (!seen_magic) {
      if (nw != 2 || strcmp(w[0], magic) != 0) {
        snprintf(err, errlen, "line %d: expected \"%s 1\" as the first line", lineno, magic);
        rc = -1;
        break;
      }
      if (strcmp(w[1], "1") != 0) {
        snprintf(err, errlen, "line %d: %s version %s; this braid reads version 1", lineno,
                 magic, w[1]);
        rc = -1;
        break;
      }
      seen_magic = 1;
      continue;
    }
    if (fn(x, w, nw, lineno) < 0) rc = -1;
    if (!save) break;
  }
  if (rc >= 0 && !seen_magic) {
    snprintf(err, errlen, "empty: expected \"%s 1\"", magic);
    rc = -1;
  }
  free(copy);
  return rc;
}

/* ---- calibration -------------------------------------------------------------------------- */

static int calib_line(struct parse_ctx *x, char **w, int nw, int lineno) {
  struct braid_calib *c = x->out;
#define WARN_LINE(...) (line_warn(x, lineno, __VA_ARGS__), 0)
  if (strcmp(w[0], "nranks") == 0 || strcmp(w[0], "nnodes") == 0 ||
      strcmp(w[0], "model_nchannels") == 0) {
    int v;
    if (nw != 2 || parse_pos_int(w[1], &v)) return WARN_LINE("%s needs one positive integer; line skipped", w[0]);
    if (w[0][0] == 'm') c->model_nchannels = v;
    else if (w[0][1] == 'r') c->nranks = v;
    else c->nnodes = v;
    return 0;
  }
  if (strcmp(w[0], "link_gbs") == 0 || strcmp(w[0], "model_link_gbs") == 0) {
    double v;
    if (nw != 2 || braid_parse_double(w[1], &v) || v <= 0)
      return WARN_LINE("%s needs one positive number (GB/s); line skipped", w[0]);
    if (w[0][0] == 'm') c->model_link_gbs = v; else c->link_gbs = v;
    return 0;
  }
  if (nw != 6) return WARN_LINE("expected \"coll algo proto bytes measured_us model_us\" (6 fields, found %d); line skipped", nw);
  struct braid_calib_point pt;
  pt.coll = name_index(w[0], braid_rule_coll_name, NCCL_NUM_FUNCTIONS);
  pt.algo = name_index(w[1], braid_rule_algo_name, NCCL_NUM_ALGORITHMS);
  pt.proto = name_index(w[2], braid_rule_proto_name, NCCL_NUM_PROTOCOLS);
  if (pt.coll < 0) return WARN_LINE("unknown collective \"%s\"; line skipped", w[0]);
  if (pt.algo < 0) return WARN_LINE("unknown algorithm \"%s\"; line skipped", w[1]);
  if (pt.proto < 0) return WARN_LINE("unknown protocol \"%s\"; line skipped", w[2]);
  if (braid_parse_u64(w[3], &pt.bytes) || braid_parse_double(w[4], &pt.measured_us) ||
      braid_parse_double(w[5], &pt.model_us) || pt.measured_us <= 0 || pt.model_us <= 0)
    return WARN_LINE("bytes must be an integer and both times positive numbers; line skipped");
  for (size_t i = 0; i < c->n; i++) {
    const struct braid_calib_point *q = &c->v[i];
    if (q->coll == pt.coll && q->algo == pt.algo && q->proto == pt.proto && q->bytes == pt.bytes)
      return WARN_LINE("%s %s %s at %llu bytes appears twice; the later line skipped", w[0], w[1], w[2], (unsigned long long)pt.bytes);
  }
  if (grow((void **)&c->v, &x->cap, c->n, sizeof *c->v)) return -1;
  c->v[c->n++] = pt;
  return 0;
#undef WARN_LINE
}

static int point_cmp(const void *a, const void *b) {
  const struct braid_calib_point *x = a, *y = b;
  if (x->coll != y->coll) return x->coll < y->coll ? -1 : 1;
  if (x->algo != y->algo) return x->algo < y->algo ? -1 : 1;
  if (x->proto != y->proto) return x->proto < y->proto ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
  return 0;
}

int braid_calib_parse(const char *text, size_t len, const char *source, struct braid_calib *out,
                      braid_rules_warn_fn warn, void *warn_arg, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  struct parse_ctx x = {out, 0, 0, source, warn ? warn : default_warn, warn_arg};
  if (parse_lines(text, len, "braid-calibration", calib_line, &x, err, errlen) < 0) {
    if (!err[0]) snprintf(err, errlen, "out of memory");
    braid_calib_free(out);
    return -1;
  }
  if (out->n == 0 && !x.warnings) line_warn(&x, 0, "no measurements in the file");
  if (out->n) qsort(out->v, out->n, sizeof *out->v, point_cmp);
  return x.warnings;
}

int braid_calib_load(const char *path, struct braid_calib *out, braid_rules_warn_fn warn,
                     void *warn_arg, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t len;
  char *buf = read_input(path, &len, err, errlen);
  if (!buf) return -1;
  int rc = braid_calib_parse(buf, len, path, out, warn, warn_arg, err, errlen);
  free(buf);
  return rc;
}

void braid_calib_free(struct braid_calib *c) {
  if (!c) return;
  free(c->v);
  memset(c, 0, sizeof *c);
}

int braid_calib_write(FILE *f, const struct braid_calib *c, const char *comment) {
  if (comment && *comment) {
    for (const char *p = comment; *p;) {
      const char *nl = strchr(p, '\n');
      int n = nl ? (int)(nl - p) : (int)strlen(p);
      fprintf(f, "# %.*s\n", n, p);
      p += n + (nl != NULL);
    }
  }
  fprintf(f, "braid-calibration 1\nnranks %d\nnnodes %d\n", c->nranks, c->nnodes);
  if (c->link_gbs > 0) fprintf(f, "link_gbs %.6g\n", c->link_gbs);
  if (c->model_link_gbs > 0) fprintf(f, "model_link_gbs %.6g\n", c->model_link_gbs);
  if (c->model_nchannels > 0) fprintf(f, "model_nchannels %d\n", c->model_nchannels);
  fprintf(f, "# coll algo proto bytes measured_us model_us\n");
  for (size_t i = 0; i < c->n; i++) {
    const struct braid_calib_point *p = &c->v[i];
    fprintf(f, "%s %s %s %llu %.6g %.6g\n", braid_rule_coll_name(p->coll),
            braid_rule_algo_name(p->algo), braid_rule_proto_name(p->proto),
            (unsigned long long)p->bytes, p->measured_us, p->model_us);
  }
  return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}

/* The run of points for (coll, algo, proto): [*lo, *hi). */
static void series(const struct braid_calib *c, int coll, int algo, int proto, size_t *lo,
                   size_t *hi) {
  size_t i = 0;
  while (i < c->n && !(c->v[i].coll == coll && c->v[i].algo == algo && c->v[i].proto == proto)) i++;
  *lo = i;
  while (i < c->n && c->v[i].coll == coll && c->v[i].algo == algo && c->v[i].proto == proto) i++;
  *hi = i;
}

/* The series used for proto: its own, else simple's, else any other protocol's. */
static int pick_series(const struct braid_calib *c, int coll, int algo, int proto, size_t *lo,
                       size_t *hi) {
  if (!c || !c->n) return -1;
  const int order[] = {proto, NCCL_PROTO_SIMPLE, NCCL_PROTO_LL128, NCCL_PROTO_LL};
  for (int k = 0; k < 4; k++) {
    series(c, coll, algo, order[k], lo, hi);
    if (*hi > *lo) return 0;
  }
  return -1;
}

double braid_calib_ratio(const struct braid_calib *c, int coll, int algo, int proto,
                         uint64_t nbytes) {
  size_t lo, hi;
  if (pick_series(c, coll, algo, proto, &lo, &hi)) return 0;
  const struct braid_calib_point *v = c->v;
  if (nbytes <= v[lo].bytes) return v[lo].measured_us / v[lo].model_us;
  if (nbytes >= v[hi - 1].bytes) return v[hi - 1].measured_us / v[hi - 1].model_us;
  size_t i = lo;
  while (v[i + 1].bytes < nbytes) i++;
  double x0 = log((double)(v[i].bytes ? v[i].bytes : 1)), x1 = log((double)v[i + 1].bytes);
  double x = log((double)nbytes);
  double r0 = log(v[i].measured_us / v[i].model_us), r1 = log(v[i + 1].measured_us / v[i + 1].model_us);
  double t = x1 > x0 ? (x - x0) / (x1 - x0) : 0;
  return exp(r0 + t * (r1 - r0));
}

double braid_calib_latency(const struct braid_calib *c, int coll, int algo, int proto) {
  size_t lo, hi;
  if (pick_series(c, coll, algo, proto, &lo, &hi)) return 0;
  return c->v[lo].measured_us;
}

/* ---- health ------------------------------------------------------------------------------- */

static int health_line(struct parse_ctx *x, char **w, int nw, int lineno) {
  struct braid_health *h = x->out;
  double v;
  if (nw != 2 || braid_parse_double(w[1], &v) || v <= 0) {
    line_warn(x, lineno, "expected \"node relative_bandwidth\" with a number > 0; line skipped");
    return 0;
  }
  if (strlen(w[0]) >= sizeof h->v[0].name) {
    line_warn(x, lineno, "node name longer than 63 characters; line skipped");
    return 0;
  }
  if (v > 1) {
    line_warn(x, lineno, "relative bandwidth %g above 1 counts as 1", v);
    v = 1;
  }
  if (v < MIN_REL_BW) v = MIN_REL_BW;
  if (grow((void **)&h->v, &x->cap, h->n, sizeof *h->v)) return -1;
  struct braid_health_node *n = &h->v[h->n++];
  snprintf(n->name, sizeof n->name, "%s", w[0]);
  n->rel_bw = v;
  return 0;
}

int braid_health_parse(const char *text, size_t len, const char *source,
                       struct braid_health *out, braid_rules_warn_fn warn, void *warn_arg,
                       char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  struct parse_ctx x = {out, 0, 0, source, warn ? warn : default_warn, warn_arg};
  if (parse_lines(text, len, "braid-health", health_line, &x, err, errlen) < 0) {
    if (!err[0]) snprintf(err, errlen, "out of memory");
    braid_health_free(out);
    return -1;
  }
  return x.warnings;
}

int braid_health_load(const char *path, struct braid_health *out, braid_rules_warn_fn warn,
                      void *warn_arg, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t len;
  char *buf = read_input(path, &len, err, errlen);
  if (!buf) return -1;
  int rc = braid_health_parse(buf, len, path, out, warn, warn_arg, err, errlen);
  free(buf);
  return rc;
}

void braid_health_free(struct braid_health *h) {
  if (!h) return;
  free(h->v);
  memset(h, 0, sizeof *h);
}

double braid_health_min(const struct braid_health *h, const char **name) {
  double m = 1.0;
  if (name) *name = NULL;
  for (size_t i = 0; h && i < h->n; i++)
    if (h->v[i].rel_bw < m) {
      m = h->v[i].rel_bw;
      if (name) *name = h->v[i].name;
    }
  return m;
}
