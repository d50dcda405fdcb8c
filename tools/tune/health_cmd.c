/* braid-tune health: reads advice files, merges them (health.c), writes the health file. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "health.h"
#include "tune.h"
#include "tmpfile.h"

#define ADVICE_FILE_MAX (4u << 20)

void braid_tune_health_usage(FILE *f) {
  fprintf(f,
          "usage: braid-tune health [-o FILE] ADVICE_FILE...\n"
          "\n"
          "Merges the advice files a run's ranks wrote (BRAID_TUNER_ADVICE, one per process)\n"
          "into a health file for the next run's BRAID_TUNER_HEALTH (the same file on every\n"
          "rank). A host's relative bandwidth is its send bandwidth (the mean over its files)\n"
          "divided by the median host's, at most 1; hosts without telemetry are left out.\n"
          "Every input must be a well-formed advice file: the first problem is reported as\n"
          "FILE:LINE and nothing is written.\n"
          "\n"
          "options:\n"
          "  -o, --output FILE   write the health file to FILE (atomically: a temporary file,\n"
          "                      then rename); default: standard output\n"
          "  -h, --help          this text\n"
          "\n"
          "exit status: 0 written, 1 bad input or no telemetry at all, 2 bad usage\n");
}

/* The whole file, NUL-terminated, or NULL with err. */
static char *read_file(const char *path, size_t *len, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(ADVICE_FILE_MAX + 1);
  size_t n = buf ? fread(buf, 1, ADVICE_FILE_MAX + 1, f) : 0;
  int bad = !buf || ferror(f);
  fclose(f);
  if (bad || n > ADVICE_FILE_MAX) {
    snprintf(err, errlen, "%s: %s", path,
             !buf ? "out of memory" : bad ? "read error" : "larger than 4 MiB: not an advice file");
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int write_atomic(const char *path, const char *text, size_t len) {
  size_t tl = strlen(path) + 32;
  char *tmp = malloc(tl);
  if (!tmp) return -1;
  FILE *f = braid_tmpfile_open(path, tmp, tl);
  int rc = f ? 0 : -1;
  if (f) rc = braid_tmpfile_commit(f, tmp, path, fwrite(text, 1, len, f) != len);
  free(tmp);
  return rc;
}

int braid_tune_health_main(int argc, char **argv) {
  static const struct option opts[] = {
      {"output", required_argument, NULL, 'o'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *output = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
    switch (c) {
      case 'o': output = optarg; break;
      case 'h': braid_tune_health_usage(stdout); return 0;
      default: braid_tune_health_usage(stderr); return 2;
    }
  }
  size_t n = (size_t)(argc - optind);
  if (n == 0) {
    fprintf(stderr, "braid-tune health: no advice files given\n\n");
    braid_tune_health_usage(stderr);
    return 2;
  }
  struct braid_tune_advice *v = calloc(n, sizeof *v);
  if (!v) {
    fprintf(stderr, "braid-tune health: out of memory\n");
    return 1;
  }
  char err[512];
  int status = 0;
  for (size_t i = 0; i < n && !status; i++) {
    const char *path = argv[optind + (int)i];
    size_t len = 0;
    char *text = read_file(path, &len, err, sizeof err);
    if (!text || braid_tune_advice_parse(text, len, path, &v[i], err, sizeof err) != 0) {
      fprintf(stderr, "braid-tune health: %s\n", err);
      status = 1;
    }
    free(text);
  }
  char *out = NULL;
  size_t out_len = 0;
  FILE *mem = status ? NULL : open_memstream(&out, &out_len);
  if (!status && !mem) {
    fprintf(stderr, "braid-tune health: out of memory\n");
    status = 1;
  }
  if (mem) {
    int lines = braid_tune_health_merge(v, n, mem, err, sizeof err);
    if (fclose(mem) != 0 && lines >= 0) lines = -1, snprintf(err, sizeof err, "out of memory");
    if (lines < 0) {
      fprintf(stderr, "braid-tune health: %s\n", err);
      status = 1;
    } else if (!output) {
      if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout) != 0) {
        fprintf(stderr, "braid-tune health: writing standard output: %s\n", strerror(errno));
        status = 1;
      }
    } else if (write_atomic(output, out, out_len) != 0) {
      fprintf(stderr, "braid-tune health: cannot write %s: %s\n", output, strerror(errno));
      status = 1;
    } else {
      fprintf(stderr, "braid-tune health: %s: %d node%s from %zu advice file%s\n", output, lines,
              lines == 1 ? "" : "s", n, n == 1 ? "" : "s");
    }
  }
  free(out);
  free(v);
  return status;
}
