/* The braid tuner's one implementation behind every exported ABI version. */
#include "tuner.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define TUNER_DEFAULT_FILE "nccl_tuner.conf"
#define TUNER_BINS 64 /* size bins: floor(log2(nBytes)), 0 and 1 share bin 0 */

struct braid_tuner {
  int version;
  uint64_t comm_id;
  int nranks, nnodes;
  char *path;
  struct braid_rules rules;
  /* Which (coll, size bin) have had their INFO line; only logging reads it. */
  _Atomic uint64_t logged[NCCL_NUM_FUNCTIONS];
};

static int clamp_int(size_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

void braid_tuner_create(struct braid_tuner **out, int version, uint64_t comm_id, size_t nranks,
                        size_t nnodes) {
  *out = NULL;
  struct braid_tuner *t = calloc(1, sizeof *t);
  const char *env = getenv("NCCL_TUNER_CONFIG_FILE");
  const char *path = env && env[0] ? env : TUNER_DEFAULT_FILE;
  if (t) t->path = strdup(path);
  if (!t || !t->path) {
    BRAID_WARN("tuner: out of memory creating the context; NCCL's tuning is left unchanged");
    free(t);
    return;
  }
  t->version = version;
  t->comm_id = comm_id;
  t->nranks = clamp_int(nranks);
  t->nnodes = clamp_int(nnodes);
  for (int i = 0; i < NCCL_NUM_FUNCTIONS; i++) atomic_init(&t->logged[i], 0);
  int nwarn = braid_rules_load(t->path, &t->rules, NULL, NULL);
  if (nwarn < 0) {
    BRAID_WARN("tuner: out of memory reading %s; no rules", t->path);
    nwarn = 0;
  }
  BRAID_INFO(NCCL_INIT | NCCL_TUNING,
             "tuner: NCCL uses ncclTunerPlugin_v%d; rules file %s: %zu rules loaded%s "
             "(commId 0x%llx, nRanks %d, nNodes %d)",
             version, t->path, t->rules.n, nwarn ? ", with warnings" : "",
             (unsigned long long)comm_id, t->nranks, t->nnodes);
  *out = t;
}

void braid_tuner_destroy(struct braid_tuner *t) {
  if (!t) return;
  braid_rules_free(&t->rules);
  free(t->path);
  free(t);
}

size_t braid_tuner_rule_count(const struct braid_tuner *t) { return t ? t->rules.n : 0; }

const struct braid_rule *braid_tuner_decide(const struct braid_tuner *t, int coll,
                                            size_t nbytes, int pipe_ops, int reg_buff) {
  if (!t || t->rules.n == 0) return NULL;
  struct braid_rule_query q = {coll, (uint64_t)nbytes, t->nnodes, t->nranks, pipe_ops,
                               reg_buff};
  return braid_rules_match(&t->rules, &q);
}

static int size_bin(size_t nbytes) {
  return nbytes > 1 ? 63 - __builtin_clzll((unsigned long long)nbytes) : 0;
}

/* Logs, once per (coll, size bin) and context, what a matching rule did. */
static void log_rule(struct braid_tuner *t, int coll, size_t nbytes,
                     const struct braid_rule *r, const char *outcome) {
  if (coll < 0 || coll >= NCCL_NUM_FUNCTIONS) return;
  int bin = size_bin(nbytes);
  uint64_t bit = 1ull << bin;
  if (atomic_fetch_or(&t->logged[coll], bit) & bit) return;
  BRAID_INFO(NCCL_TUNING,
             "tuner: %s of %zu B (size bin 2^%d): rule %s:%d (%s/%s, channels %d) %s",
             braid_rule_coll_name(coll), nbytes, bin, t->path, r->line,
             braid_rule_algo_name(r->algo), braid_rule_proto_name(r->proto), r->channels,
             outcome);
}

void braid_tuner_apply_table(struct braid_tuner *t, int coll, size_t nbytes, int pipe_ops,
                             int reg_buff, float *table, int num_algo, int num_proto,
                             int *nchannels) {
  const struct braid_rule *r = braid_tuner_decide(t, coll, nbytes, pipe_ops, reg_buff);
  if (!r) return;
  if (!table || num_algo <= 0 || num_proto <= 0) {
    BRAID_WARN_ONCE("tuner: getCollInfo called without a usable cost table (%p, %d x %d); "
                    "NCCL's choice is kept",
                    (void *)table, num_algo, num_proto);
    return;
  }
  if (r->algo >= num_algo || r->proto >= num_proto) {
    log_rule(t, coll, nbytes, r, "is outside NCCL's cost table; NCCL's choice kept");
    return;
  }
  float *entry = &table[(size_t)r->algo * (size_t)num_proto + (size_t)r->proto];
  if (*entry == (float)NCCL_ALGO_PROTO_IGNORE) {
    log_rule(t, coll, nbytes, r, "is not available (IGNORE); NCCL's choice kept");
    return;
  }
  *entry = 0.0f;
  if (r->channels != -1 && nchannels) *nchannels = r->channels;
  log_rule(t, coll, nbytes, r, "applied");
}

/* Whether NCCL (v2 era) could run algo at all. */
static int v2_plausible(int algo, int proto, int collnet_support, int nvls_support) {
  if (proto < 0 || proto >= NCCL_NUM_PROTOCOLS) return 0;
  switch (algo) {
    case NCCL_ALGO_TREE:
    case NCCL_ALGO_RING:
      return 1;
    case NCCL_ALGO_COLLNET_DIRECT:
    case NCCL_ALGO_COLLNET_CHAIN:
      return collnet_support != 0;
    case NCCL_ALGO_NVLS:
    case NCCL_ALGO_NVLS_TREE:
      return nvls_support != 0;
    default: /* PAT came after tuner v2 */
      return 0;
  }
}

void braid_tuner_apply_v2(struct braid_tuner *t, int coll, size_t nbytes, int collnet_support,
                          int nvls_support, int pipe_ops, int *algorithm, int *protocol,
                          int *nchannels) {
  const struct braid_rule *r = braid_tuner_decide(t, coll, nbytes, pipe_ops, -1);
  if (!r) return;
  if (!algorithm || !protocol) {
    BRAID_WARN_ONCE("tuner: v2 getCollInfo called without algorithm/protocol; NCCL's choice "
                    "is kept");
    return;
  }
  if (!v2_plausible(r->algo, r->proto, collnet_support, nvls_support)) {
    log_rule(t, coll, nbytes, r, "is not available (no CollNet/NVLS support); NCCL's choice kept");
    return;
  }
  *algorithm = r->algo;
  *protocol = r->proto;
  if (r->channels != -1 && nchannels) *nchannels = r->channels;
  log_rule(t, coll, nbytes, r, "applied");
}
