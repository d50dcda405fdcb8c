/* Whole-file reads for the tuner's inputs. */
#include "textfile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *braid_read_small_file(const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  int err = buf ? 0 : ENOMEM;
  while (!err) {
    if (n == cap) {
      if (cap >= max) {
        err = EFBIG;
        break;
      }
      size_t ncap = cap * 2 > max ? max : cap * 2;
      char *nb = realloc(buf, ncap + 1);
      if (!nb) {
        err = ENOMEM;
        break;
      }
      buf = nb;
      cap = ncap;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) err = EIO;
      break;
    }
  }
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return NULL;
  }
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

int braid_split_words(char *line, char **w, int max) {
  int n = 0;
  char *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  for (char *p = line;;) {
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p) break;
    if (n == max) return max + 1;
    w[n++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\r') p++;
    if (*p) *p++ = '\0';
  }
  return n;
}

int braid_parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

int braid_parse_u64(const char *s, uint64_t *out) {
  if (*s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end) return -1;
  *out = v;
  return 0;
}
