/* braid-nccl-compat: which NCCL_NET_PLUGIN and NCCL_TUNER_PLUGIN values load a plugin under each
 * NCCL version, through which ABI, and what its tuner answers (see --help). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"
#include "sweep.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: braid-nccl-compat versions\n"
          "       braid-nccl-compat load --nccl VERSION\n"
          "       braid-nccl-compat sweep --nccl VERSION [--nranks N] [--nnodes M]\n"
          "\n"
          "Loads the net and tuner plugins named by NCCL_NET_PLUGIN and NCCL_TUNER_PLUGIN the way\n"
          "NCCL VERSION (2.19 to 2.30) does: the same file names in the same order (dlopen, so\n"
          "LD_LIBRARY_PATH applies), the same table symbols newest first. load prints what was\n"
          "opened and which ncclNetPlugin_vN, ncclCollNetPlugin_vN and ncclTunerPlugin_vN that\n"
          "version would use; sweep also calls the tuner through that ABI (init, getCollInfo for\n"
          "5 collectives x 16 sizes, destroy) and prints every answer, so that the answers of\n"
          "ranks with different local files can be compared.  Read from NCCL's source per tag\n"
          "(tools/compat/profile.c).  Exit: 0; 2 bad usage or nothing to sweep; 3 the tuner's\n"
          "init failed (NCCL would fail the communicator).\n");
}

/* dlopen()s names in order as NCCL does; the handle of the first that opens, or NULL. */
static void *open_first(char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN], int n, const char **used,
                        char *tried, size_t triedlen) {
  tried[0] = 0;
  for (int i = 0; i < n; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *used = names[i];
      return h;
    }
    size_t o = strlen(tried);
    snprintf(tried + o, triedlen - o, "%s%s", o ? " " : "", names[i]);
  }
  return NULL;
}

/* The newest prefix_v<N> in [lo, hi]; its version, or 0. */
static int find_sym(void *h, const char *prefix, int hi, int lo, const void **table) {
  for (int v = hi; v >= lo; v--) {
    char sym[64];
    snprintf(sym, sizeof sym, "%s_v%d", prefix, v);
    if ((*table = dlsym(h, sym))) return v;
  }
  return 0;
}

/* The table's first member is its name in every net, CollNet and tuner version. */
static const char *table_name(const void *t) { return *(const char *const *)t; }

struct loaded {
  void *net_lib, *tuner_lib;
  const void *tuner;
  int tuner_version;
};

static void load(const struct nccl_profile *p, struct loaded *L, FILE *out) {
  char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN], tried[8192];
  const char *net_value = getenv("NCCL_NET_PLUGIN"), *tuner_value = getenv("NCCL_TUNER_PLUGIN");
  const char *used = NULL;
  memset(L, 0, sizeof *L);
  int n = compat_net_names(p, net_value, names);
  L->net_lib = open_first(names, n, &used, tried, sizeof tried);
  if (!L->net_lib) {
    fprintf(out, "net: not loaded (tried: %s): NCCL uses its own transports\n", n ? tried : "nothing");
  } else {
    const void *t = NULL, *c = NULL;
    int v = find_sym(L->net_lib, "ncclNetPlugin", p->net_max, p->net_min, &t);
    int cv = find_sym(L->net_lib, "ncclCollNetPlugin", p->net_max, p->net_min, &c);
    if (!v)
      fprintf(out, "net: %s opened, no ncclNetPlugin_v%d..v%d: NCCL uses its own transports\n",
              used, p->net_min, p->net_max);
    else
      fprintf(out, "net: loaded %s ncclNetPlugin_v%d name=%s collnet=%s%d\n", used, v,
              table_name(t), cv ? "ncclCollNetPlugin_v" : "none", cv);
  }
  int use_net_lib = 0;
  n = compat_tuner_names(p, tuner_value, net_value, names, &use_net_lib);
  used = NULL;
  L->tuner_lib = open_first(names, n, &used, tried, sizeof tried);
  const char *from = used;
  void *h = L->tuner_lib;
  if (!h && use_net_lib && L->net_lib) h = L->net_lib, from = "(the net plugin's library)";
  if (!h) {
    fprintf(out, "tuner: none (tried: %s): NCCL tunes alone\n", n ? tried : "nothing");
    return;
  }
  L->tuner_version = find_sym(h, "ncclTunerPlugin", p->tuner_max, p->tuner_min, &L->tuner);
  if (!L->tuner_version)
    fprintf(out, "tuner: %s opened, no ncclTunerPlugin_v%d..v%d: NCCL tunes alone\n", from,
            p->tuner_min, p->tuner_max);
  else
    fprintf(out, "tuner: loaded %s ncclTunerPlugin_v%d name=%s\n", from, L->tuner_version,
            table_name(L->tuner));
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1], *ver = NULL;
  int nranks = 16, nnodes = 2;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--nccl") && i + 1 < argc) ver = argv[++i];
    else if (!strcmp(argv[i], "--nranks") && i + 1 < argc) nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--nnodes") && i + 1 < argc) nnodes = atoi(argv[++i]);
    else {
      fprintf(stderr, "braid-nccl-compat: unknown argument %s\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (!strcmp(cmd, "versions")) {
    for (size_t i = 0; i < nccl_nprofiles; i++)
      printf("%s %s\n", nccl_profiles[i].name, nccl_profiles[i].tag);
    return 0;
  }
  const struct nccl_profile *p = ver ? nccl_profile_find(ver) : NULL;
  if (!p || nranks < 1 || nnodes < 1 || nnodes > nranks || (strcmp(cmd, "load") && strcmp(cmd, "sweep"))) {
    fprintf(stderr, "braid-nccl-compat: %s\n", !p ? "--nccl 2.19 .. 2.30 is needed" : "bad arguments");
    usage(stderr);
    return 2;
  }
  struct loaded L;
  printf("nccl %s (as %s)\n", p->name, p->tag);
  load(p, &L, stdout);
  if (!strcmp(cmd, "load")) return 0;
  if (!L.tuner) {
    fprintf(stderr, "braid-nccl-compat: no tuner to sweep under NCCL %s\n", p->name);
    return 2;
  }
  fflush(stdout);
  return compat_sweep(L.tuner, L.tuner_version, nranks, nnodes, stdout);
}
