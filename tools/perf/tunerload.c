/* braid-perf: the tuner plugin, loaded and called as NCCL 2.28 does (plugin/tuner.cc). */
#include "tunerload.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logger.h"

#define TUNERLOAD_DEFAULT "braid"
#define TUNERLOAD_SYMBOL "ncclTunerPlugin_v5"

static void tl_note(char *err, size_t errlen, const char *why) {
  size_t used = strlen(err);
  if (used + 1 < errlen) snprintf(err + used, errlen - used, "%s%s", used ? "; " : "", why);
}

/* dlopen()s path; 0 and tl->lib set, or -1 with the reason added to err. */
static int tl_try(struct tunerload *tl, const char *path, char *err, size_t errlen) {
  tl->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!tl->lib) {
    const char *e = dlerror();
    tl_note(err, errlen, e ? e : path);
    return -1;
  }
  snprintf(tl->path, sizeof tl->path, "%s", path);
  return 0;
}

/* The directory of the running braid-perf (empty when unknown). */
static void tl_exe_dir(char *dir, size_t len) {
  char exe[1024];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  dir[0] = '\0';
  if (n <= 0) return;
  exe[n] = '\0';
  snprintf(dir, len, "%s", dirname(exe));
}

static int tl_find(struct tunerload *tl, const char *name, char *err, size_t errlen) {
  size_t len = strlen(name);
  int libso = len >= 6 && strncmp(name, "lib", 3) == 0 && strcmp(name + len - 3, ".so") == 0;
  if (strchr(name, '/') || libso) return tl_try(tl, name, err, errlen);
  char file[300], dir[1024], path[1400];
  snprintf(file, sizeof file, "libnccl-tuner-%s.so", name);
  tl_exe_dir(dir, sizeof dir);
  if (dir[0]) {
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (access(path, F_OK) == 0) return tl_try(tl, path, err, errlen);
    snprintf(path, sizeof path, "%s/../lib/%s", dir, file);
    if (access(path, F_OK) == 0) return tl_try(tl, path, err, errlen);
  }
  return tl_try(tl, file, err, errlen);
}

int tunerload_open(struct tunerload *tl, char *err, size_t errlen) {
  memset(tl, 0, sizeof *tl);
  err[0] = '\0';
  const char *name = getenv("NCCL_TUNER_PLUGIN");
  if (!name || !*name) name = TUNERLOAD_DEFAULT;
  if (tl_find(tl, name, err, errlen)) return -1;
  tl->t = dlsym(tl->lib, TUNERLOAD_SYMBOL);
  if (!tl->t || !tl->t->init || !tl->t->getCollInfo) {
    char why[1200];
    snprintf(why, sizeof why, "%s: no usable %s", tl->path, TUNERLOAD_SYMBOL);
    tl_note(err, errlen, why);
    dlclose(tl->lib);
    tl->lib = NULL;
    tl->t = NULL;
    return -1;
  }
  return 0;
}

int tunerload_init(struct tunerload *tl, uint64_t comm_id, int nranks, int nnodes,
                   ncclNvlDomainInfo_v5_t *nvl, ncclTunerConstants_v5_t *constants) {
  ncclResult_t r = tl->t->init(&tl->ctx, comm_id, (size_t)nranks, (size_t)nnodes, perf_logger,
                               nvl, constants);
  if (r != ncclSuccess) {
    fprintf(stderr, "braid-perf: tuner %s (%s) init failed: %d\n",
            tl->t->name ? tl->t->name : "?", tl->path, (int)r);
    return -1;
  }
  tl->ctx_valid = 1;
  return 0;
}

int tunerload_coll_info(struct tunerload *tl, int coll, size_t nbytes, float *table,
                        int *nchannels) {
  ncclResult_t r = tl->t->getCollInfo(tl->ctx, (ncclFunc_t)coll, nbytes, 1, (float **)(void *)table,
                                      NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, nchannels);
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "braid-perf: tuner %s getCollInfo(%zu bytes) failed: %d\n",
          tl->t->name ? tl->t->name : "?", nbytes, (int)r);
  return -1;
}

void tunerload_close(struct tunerload *tl) {
  if (tl->ctx_valid && tl->t->finalize) tl->t->finalize(tl->ctx);
  tl->ctx_valid = 0;
  if (tl->lib) dlclose(tl->lib);
  tl->lib = NULL;
  tl->t = NULL;
}
