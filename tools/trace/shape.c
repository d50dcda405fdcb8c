/* braid-trace-shape: prints the shape of a job's traces, or compares two jobs.
 *
 *   braid-trace-shape [-v] JOB                  the canonical summary (README.md: "Shape")
 *   braid-trace-shape [-v] [--ignore K,..] --compare JOB_A JOB_B
 *                                               exit 0: same shape; 1: different (a diff is
 *                                               printed); 2: unreadable input
 *   JOB: a trace file, a directory (its braid-trace files), or a comma-separated list of either.
 *
 * Makefile: tools/trace/build.mk has the rules (the top-level Makefile includes it); in short,
 * the wrapper library must not link this tool's files, and the tool is a program of its own:
 *
 *   SHAPE_SRCS  = $(wildcard tools/trace/shape*.c)
 *   TRACE_SRCS := $(filter-out $(SHAPE_SRCS),$(TRACE_SRCS))
 *   SHAPE       = $(BUILD)/braid-trace-shape
 *   $(SHAPE): $(call obj,$(SHAPE_SRCS))
 *   	$(CC) $(LDFLAGS) $^ -o $@ $(LDLIBS)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shape.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: braid-trace-shape [-v] JOB\n"
          "       braid-trace-shape [-v] [--ignore KEY,...] --compare JOB_A JOB_B\n"
          "Prints the shape of the braid-trace traces of one job (sizes, depths, grouping, tags,\n"
          "ordering; no timing), or compares two jobs' shapes: exit 0 same, 1 different, 2 error.\n"
          "JOB: a trace file, a directory of trace files, or a comma-separated list of them.\n"
          "-v: add '#' lines (calls, raw ordering counts), ignored by --compare.\n"
          "--ignore: summary keys (e.g. 'order,regmr sizes') left out of the comparison.\n");
}

static int is_trace(const char *path) {
  FILE *f = fopen(path, "r");
  char head[16] = "";
  if (!f) return 0;
  int ok = fgets(head, sizeof head, f) && !strncmp(head, "# braid-trace ", 14);
  fclose(f);
  return ok;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory: its braid-trace files, in name order. */
static int read_dir(struct shape_job *job, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    perror(dir);
    return -1;
  }
  char **names = NULL;
  size_t n = 0;
  int rc = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) || !S_ISREG(st.st_mode) || !is_trace(path)) continue;
    names = realloc(names, (n + 1) * sizeof *names);
    if (!names || !(names[n++] = strdup(path))) exit(2);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    if (shape_read_file(job, names[i])) rc = -1;
    free(names[i]);
  }
  free(names);
  if (!n) {
    fprintf(stderr, "braid-trace-shape: %s: no braid-trace files\n", dir);
    rc = -1;
  }
  return rc;
}

static int read_job(struct shape_job *job, const char *spec) {
  char *list = strdup(spec), *save = NULL;
  int rc = 0;
  if (!list) exit(2);
  for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) rc |= read_dir(job, p);
    else rc |= shape_read_file(job, p);
  }
  free(list);
  return rc ? -1 : 0;
}

static int summarize(const char *spec, int verbose, struct shape_text *out) {
  struct shape_job job = {0};
  int rc = read_job(&job, spec);
  if (rc == 0) shape_summarize(&job, verbose, out);
  shape_job_free(&job);
  return rc;
}

/* The key of a summary line: up to the first ':'. */
static size_t key_len(const char *line) {
  const char *c = strchr(line, ':');
  return c ? (size_t)(c - line) : strlen(line);
}

static int ignored(const char *line, const char *ignore) {
  if (line[0] == '#') return 1;
  size_t k = key_len(line);
  for (const char *p = ignore; p && *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == k && !strncmp(line, p, n)) return 1;
    p = end ? end + 1 : NULL;
  }
  return 0;
}

static const char *find_key(const struct shape_text *t, const char *line) {
  size_t k = key_len(line);
  for (size_t i = 0; i < t->n; i++)
    if (key_len(t->line[i]) == k && !strncmp(t->line[i], line, k)) return t->line[i];
  return NULL;
}

static int compare(const char *a, const char *b, const char *ignore, int verbose) {
  struct shape_text ta = {0}, tb = {0};
  if (summarize(a, verbose, &ta) || summarize(b, verbose, &tb)) return 2;
  int diff = 0;
  for (int pass = 0; pass < 2; pass++) {
    const struct shape_text *x = pass ? &tb : &ta, *y = pass ? &ta : &tb;
    for (size_t i = 0; i < x->n; i++) {
      const char *l = x->line[i], *other = find_key(y, l);
      if (ignored(l, ignore) || (pass && other)) continue; /* pass 1: keys only in B */
      if (other && !strcmp(l, other)) continue;
      if (!diff++) printf("braid-trace-shape: different shapes (A: %s, B: %s)\n", a, b);
      size_t k = key_len(l);
      const char *la = pass ? other : l, *lb = pass ? l : other;
      printf("  %.*s:\n    A:%s\n    B:%s\n", (int)k, l, la ? la + k + 1 : " (none)",
             lb ? lb + k + 1 : " (none)");
    }
  }
  if (!diff) printf("braid-trace-shape: same shape (A: %s, B: %s)\n", a, b);
  if (verbose)
    for (int pass = 0; pass < 2; pass++) {
      const struct shape_text *x = pass ? &tb : &ta;
      for (size_t i = 0; i < x->n; i++)
        if (x->line[i][0] == '#') printf("%c %s\n", pass ? 'B' : 'A', x->line[i]);
    }
  shape_text_free(&ta);
  shape_text_free(&tb);
  return diff ? 1 : 0;
}

int main(int argc, char **argv) {
  int verbose = 0;
  const char *ignore = NULL, *cmp_a = NULL, *cmp_b = NULL, *job = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) verbose = 1;
    else if (!strcmp(argv[i], "--ignore") && i + 1 < argc) ignore = argv[++i];
    else if (!strcmp(argv[i], "--compare") && i + 2 < argc) cmp_a = argv[++i], cmp_b = argv[++i];
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(stdout), 0;
    else if (argv[i][0] != '-' && !job) job = argv[i];
    else return usage(stderr), 2;
  }
  if (cmp_a) return job ? (usage(stderr), 2) : compare(cmp_a, cmp_b, ignore, verbose);
  if (!job) return usage(stderr), 2;
  struct shape_text t = {0};
  if (summarize(job, verbose, &t)) return 2;
  for (size_t i = 0; i < t.n; i++) printf("%s\n", t.line[i]);
  shape_text_free(&t);
  return 0;
}
