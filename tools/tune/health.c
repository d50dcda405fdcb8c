/* Advice files parsed strictly and merged into a health file (see health.h; the advice format
 * is documented at the top of tuner_plugin/advice.c). */
#include "health.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "textfile.h"

#define MAX_WORDS 9
#define MIN_REL_BW 0.01

static void errf(char *err, size_t errlen, const char *source, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void errf(char *err, size_t errlen, const char *source, int line, const char *fmt, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (line > 0)
    snprintf(err, errlen, "%s:%d: %s", source, line, msg);
  else
    snprintf(err, errlen, "%s: %s", source, msg);
}

static int parse_num(const char *s, double *out) {
  return braid_parse_double(s, out) || *out < 0 ? -1 : 0;
}

static int known_state(const char *s) {
  static const char *const states[] = {"active", "degraded", "probing", "down", "unknown"};
  for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
    if (strcmp(s, states[i]) == 0) return 1;
  return 0;
}

struct parse {
  struct braid_tune_advice *a;
  const char *source;
  char *err;
  size_t errlen;
  int seen_host, seen_seconds, seen_samples, seen_send;
  int first_rail_line;
  uint64_t longest;
};

/* One rail line (w[0] is "rail"). */
static int rail_line(struct parse *p, char **w, int nw, int line) {
  if (nw != 8) {
    errf(p->err, p->errlen, p->source, line,
         "expected \"rail dev nic peer median_gbps min_gbps slow_samples_in_a_row_max state\" "
         "(8 words), got %d",
         nw);
    return -1;
  }
  uint64_t dev, run;
  double median, min;
  if (braid_parse_u64(w[1], &dev) || dev > 0x7fffffff) {
    errf(p->err, p->errlen, p->source, line, "rail device \"%s\" is not a device index", w[1]);
    return -1;
  }
  if (parse_num(w[4], &median) || parse_num(w[5], &min)) {
    errf(p->err, p->errlen, p->source, line,
         "rail bandwidths \"%s\" \"%s\" are not numbers >= 0 (Gb/s)", w[4], w[5]);
    return -1;
  }
  if (braid_parse_u64(w[6], &run)) {
    errf(p->err, p->errlen, p->source, line, "slow run \"%s\" is not a count", w[6]);
    return -1;
  }
  if (!known_state(w[7])) {
    errf(p->err, p->errlen, p->source, line,
         "rail state \"%s\" is not active, degraded, probing, down or unknown", w[7]);
    return -1;
  }
  if (!p->first_rail_line) p->first_rail_line = line;
  p->a->nrails++;
  if (run >= BRAID_TUNE_SLOW_RUN) {
    p->a->nslow++;
    if (run > p->longest) {
      p->longest = run;
      snprintf(p->a->slowest, sizeof p->a->slowest, "%.15s to %.100s", w[2], w[3]);
    }
  }
  return 0;
}

static int once(struct parse *p, int *seen, const char *key, int line) {
  if (*seen) {
    errf(p->err, p->errlen, p->source, line, "a second \"%s\" line (line %d has one)", key,
         *seen);
    return -1;
  }
  *seen = line;
  return 0;
}

static int record_line(struct parse *p, char **w, int nw, int line) {
  struct braid_tune_advice *a = p->a;
  if (strcmp(w[0], "rail") == 0) return rail_line(p, w, nw, line);
  int is_host = strcmp(w[0], "host") == 0, is_seconds = strcmp(w[0], "seconds") == 0;
  int is_samples = strcmp(w[0], "samples") == 0, is_send = strcmp(w[0], "send_gbps") == 0;
  if (!is_host && !is_seconds && !is_samples && !is_send) {
    errf(p->err, p->errlen, p->source, line,
         "unknown record \"%.40s\" (expected host, seconds, samples, send_gbps or rail)", w[0]);
    return -1;
  }
  if (nw != 2) {
    errf(p->err, p->errlen, p->source, line, "expected \"%s <value>\" (2 words), got %d", w[0],
         nw);
    return -1;
  }
  if (is_host) {
    if (once(p, &p->seen_host, "host", line)) return -1;
    a->host_cut = strlen(w[1]) > BRAID_TUNE_NODE_NAME_MAX;
    snprintf(a->host, sizeof a->host, "%.*s", BRAID_TUNE_NODE_NAME_MAX, w[1]);
    return 0;
  }
  if (is_samples) {
    if (once(p, &p->seen_samples, "samples", line)) return -1;
    if (braid_parse_u64(w[1], &a->samples)) {
      errf(p->err, p->errlen, p->source, line, "samples \"%s\" is not a count", w[1]);
      return -1;
    }
    return 0;
  }
  double *dst = is_seconds ? &a->seconds : &a->send_gbps;
  if (once(p, is_seconds ? &p->seen_seconds : &p->seen_send, w[0], line)) return -1;
  if (parse_num(w[1], dst)) {
    errf(p->err, p->errlen, p->source, line, "%s \"%s\" is not a number >= 0", w[0], w[1]);
    return -1;
  }
  return 0;
}

int braid_tune_advice_parse(const char *text, size_t len, const char *source,
                            struct braid_tune_advice *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  snprintf(out->source, sizeof out->source, "%s", source);
  if (errlen) err[0] = '\0';
  if (memchr(text, '\0', len)) {
    errf(err, errlen, source, 0, "holds a NUL byte: not an advice file");
    return -1;
  }
  char *copy = malloc(len + 1);
  if (!copy) {
    errf(err, errlen, source, 0, "out of memory");
    return -1;
  }
  memcpy(copy, text, len);
  copy[len] = '\0';
  struct parse p = {.a = out, .source = source, .err = err, .errlen = errlen};
  int line = 0, magic = 0, rc = 0;
  for (char *s = copy, *next; s && rc == 0; s = next) {
    char *nl = strchr(s, '\n');
    next = nl ? nl + 1 : NULL;
    if (nl) *nl = '\0';
    if (!nl && !*s) break; /* the text ends with a newline */
    line++;
    char *w[MAX_WORDS];
    int nw = braid_split_words(s, w, MAX_WORDS);
    if (nw == 0) continue;
    if (nw > MAX_WORDS) {
      errf(err, errlen, source, line, "more than %d words", MAX_WORDS);
      rc = -1;
    } else if (!magic) {
      if (strcmp(w[0], "braid-advice") != 0 || nw != 2) {
        errf(err, errlen, source, line, "expected \"braid-advice 1\" first: not an advice file");
        rc = -1;
      } else if (strcmp(w[1], "1") != 0) {
        errf(err, errlen, source, line, "advice format version %.20s; this braid-tune reads 1",
             w[1]);
        rc = -1;
      }
      magic = 1;
    } else {
      rc = record_line(&p, w, nw, line);
    }
  }
  free(copy);
  if (rc) return -1;
  if (!magic) {
    errf(err, errlen, source, 0, "empty: expected \"braid-advice 1\"");
    return -1;
  }
  const char *missing = !p.seen_host      ? "host"
                        : !p.seen_seconds ? "seconds"
                        : !p.seen_samples ? "samples"
                        : !p.seen_send    ? "send_gbps"
                                          : NULL;
  if (missing) {
    errf(err, errlen, source, 0, "no \"%s\" line", missing);
    return -1;
  }
  if (out->samples == 0 && out->nrails) {
    errf(err, errlen, source, p.first_rail_line, "a rail line in a file with samples 0");
    return -1;
  }
  return 0;
}

/* ---- merge ----------------------------------------------------------------------------- */

struct host {
  char name[BRAID_TUNE_NODE_NAME_MAX + 1];
  double sum;      /* send_gbps over files with telemetry */
  int files, used; /* all files of the host, those with telemetry */
  size_t nslow;
  double rel;
};

static int cmp_host(const void *x, const void *y) {
  return strcmp(((const struct host *)x)->name, ((const struct host *)y)->name);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static int has_telemetry(const struct braid_tune_advice *a) {
  return a->samples > 0 && a->send_gbps > 0;
}

int braid_tune_health_merge(const struct braid_tune_advice *v, size_t n, FILE *out, char *err,
                            size_t errlen) {
  if (errlen) err[0] = '\0';
  struct host *h = calloc(n ? n : 1, sizeof *h);
  double *fig = calloc(n ? n : 1, sizeof *fig);
  if (!h || !fig) {
    free(h);
    free(fig);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  size_t nh = 0;
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < nh && strcmp(h[j].name, v[i].host) != 0) j++;
    if (j == nh) snprintf(h[nh++].name, sizeof h[0].name, "%s", v[i].host);
    h[j].files++;
    h[j].nslow += v[i].nslow;
    if (has_telemetry(&v[i])) h[j].used++, h[j].sum += v[i].send_gbps;
  }
  qsort(h, nh, sizeof *h, cmp_host);
  size_t nfig = 0;
  for (size_t j = 0; j < nh; j++)
    if (h[j].used) fig[nfig++] = h[j].sum / h[j].used;
  if (nfig == 0) {
    snprintf(err, errlen,
             "none of the %zu advice files has telemetry (samples 0 or send_gbps 0: braid's net "
             "plugin was not loaded, or sent nothing)",
             n);
    free(h);
    free(fig);
    return -1;
  }
  qsort(fig, nfig, sizeof *fig, cmp_double);
  double ref = fig[nfig / 2];

  fprintf(out, "braid-health 1\n");
  fprintf(out, "# written by braid-tune health from %zu advice file%s:\n", n, n == 1 ? "" : "s");
  for (size_t i = 0; i < n; i++) {
    const struct braid_tune_advice *a = &v[i];
    fprintf(out, "#   %s: host %s%s, %.1f s, %llu samples, %zu rails, send %.3f Gb/s%s\n",
            a->source, a->host, a->host_cut ? " (name cut to 63 characters)" : "", a->seconds,
            (unsigned long long)a->samples, a->nrails, a->send_gbps,
            has_telemetry(a) ? "" : " (no telemetry: not used)");
    if (a->nslow)
      fprintf(out, "#     %zu slow rail%s, longest: %s\n", a->nslow, a->nslow == 1 ? "" : "s",
              a->slowest);
  }
  fprintf(out, "# a host's figure: the mean send_gbps of its files; reference: the upper median "
               "over %zu host%s, %.3f Gb/s\n",
          nfig, nfig == 1 ? "" : "s", ref);
  fprintf(out, "# node relative_bandwidth (figure / reference, at most 1)\n");
  int lines = 0;
  for (size_t j = 0; j < nh; j++) {
    if (!h[j].used) {
      fprintf(out, "# %s: no telemetry in its %d file%s; not listed (counts as healthy)\n",
              h[j].name, h[j].files, h[j].files == 1 ? "" : "s");
      continue;
    }
    double fig_j = h[j].sum / h[j].used;
    double rel = fig_j / ref;
    if (rel > 1) rel = 1;
    if (rel < MIN_REL_BW) rel = MIN_REL_BW;
    fprintf(out, "%s %.3f", h[j].name, rel);
    fprintf(out, "  # %.3f Gb/s, %d of %d file%s%s\n", fig_j, h[j].used, h[j].files,
            h[j].files == 1 ? "" : "s", h[j].nslow ? ", has slow rails" : "");
    lines++;
  }
  free(h);
  free(fig);
  if (ferror(out)) {
    snprintf(err, errlen, "write failed");
    return -1;
  }
  return lines;
}
