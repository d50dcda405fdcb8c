/* Whole-file reads for the tuner's inputs. */
#include "textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
