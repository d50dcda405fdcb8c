/* getCollInfo's cost, measured in-process as NCCL calls it: loads tuner plugins by path
 * (ncclTunerPlugin_v5), and for each times batches of calls on NCCL-shaped cost tables (filled by
 * NCCL's model for 4 nodes x 8 GPUs), sizes cycling over 1 KiB .. 1 GiB. The table is restored
 * before every call (NCCL fills a fresh one each time); that copy is timed alone and subtracted.
 * Prints the median and 90th percentile ns per call over the batches.
 *
 * Usage: tuner-latency [--batches N] [--calls N] NAME=PATH [NAME=PATH ...]
 * Each plugin sees the environment as it is (BRAID_TUNER_*, NCCL_TUNER_CONFIG_FILE). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "model.h"
#include "nccl_plugin/tuner.h"

#define NSIZES 21
#define TABLE (NCCL_NUM_ALGORITHMS * NCCL_NUM_PROTOCOLS)

static void quiet(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                  const char *fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static float tables[NSIZES][TABLE];
static size_t sizes[NSIZES];
static volatile float sink;

/* ns per call of one batch: the calls (with the table copies) minus the copies alone. */
static double batch(const ncclTuner_v5_t *t, void *ctx, int calls) {
  float work[TABLE];
  double t0 = (double)braid_now_ns();
  for (int i = 0; i < calls; i++) {
    int s = i % NSIZES, nch = 0;
    memcpy(work, tables[s], sizeof work);
    t->getCollInfo(ctx, ncclFuncAllReduce, sizes[s], 1, (float **)(void *)work,
                   NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch);
    sink += work[0];
  }
  double t1 = (double)braid_now_ns();
  for (int i = 0; i < calls; i++) {
    int s = i % NSIZES;
    memcpy(work, tables[s], sizeof work);
    __asm__ volatile("" : : "r"(work) : "memory");
    sink += work[0];
  }
  double t2 = (double)braid_now_ns();
  double v = ((t1 - t0) - (t2 - t1)) / calls;
  return v < 0 ? 0 : v;
}

int main(int argc, char **argv) {
  int batches = 200, calls = 2000;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (!strcmp(argv[first], "--batches") && first + 1 < argc) batches = atoi(argv[++first]);
    else if (!strcmp(argv[first], "--calls") && first + 1 < argc) calls = atoi(argv[++first]);
    else {
      fprintf(stderr, "usage: %s [--batches N] [--calls N] NAME=PATH...\n", argv[0]);
      return 2;
    }
  }
  if (first == argc || batches < 1 || calls < 1) {
    fprintf(stderr, "usage: %s [--batches N] [--calls N] NAME=PATH...\n", argv[0]);
    return 2;
  }
  ncclTunerConstants_v5_t c;
  braid_model_default_constants(&c);
  struct braid_fabric f;
  braid_fabric_default(&f, 4, 8, 50.0, 8);
  struct braid_model m;
  braid_model_build(&m, &c, &f);
  for (int s = 0; s < NSIZES; s++) {
    sizes[s] = (size_t)1024 << s;
    braid_model_fill(&m, ncclFuncAllReduce, sizes[s], 1, tables[s], NCCL_NUM_ALGORITHMS);
  }
  printf("%-24s %10s %10s   (ns per getCollInfo, %d batches of %d calls)\n", "tuner", "median",
         "p90", batches, calls);
  int rc = 0;
  for (int a = first; a < argc; a++) {
    char *eq = strchr(argv[a], '=');
    if (!eq) {
      fprintf(stderr, "%s: expected NAME=PATH\n", argv[a]);
      return 2;
    }
    *eq = '\0';
    const char *name = argv[a], *path = eq + 1;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const ncclTuner_v5_t *t = lib ? dlsym(lib, "ncclTunerPlugin_v5") : NULL;
    if (!t) {
      fprintf(stderr, "%s: cannot load ncclTunerPlugin_v5 from %s: %s\n", name, path, dlerror());
      rc = 1;
      continue;
    }
    ncclTunerConstants_v5_t cc = c;
    ncclNvlDomainInfo_v5_t nvl = {4, 8, 8};
    void *ctx = NULL;
    if (t->init(&ctx, 0x1234, 32, 4, quiet, &nvl, &cc) != ncclSuccess) {
      fprintf(stderr, "%s: init failed\n", name);
      rc = 1;
      continue;
    }
    double *v = malloc(sizeof *v * (size_t)batches);
    for (int w = 0; w < 10; w++) batch(t, ctx, calls); /* warm caches and the log-once bits */
    for (int b = 0; b < batches; b++) v[b] = batch(t, ctx, calls);
    qsort(v, (size_t)batches, sizeof *v, cmp_double);
    printf("%-24s %10.1f %10.1f\n", name, v[batches / 2], v[batches * 9 / 10]);
    free(v);
    t->finalize(ctx);
    dlclose(lib);
  }
  return rc;
}
