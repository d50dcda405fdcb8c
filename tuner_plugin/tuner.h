/* The braid tuner: one context per communicator, one decision for every ABI version.
 *
 * A decision depends only on the init arguments (nRanks, nNodes, NCCL's constants), the tuner's
 * inputs (inputs.h: mode, rules, calibration and health files, all fingerprinted) and the
 * getCollInfo arguments, so every rank of a communicator chooses the same. Live telemetry never
 * enters a choice (it only feeds advice for the next run, advice.h). Nothing here fails a
 * collective: trouble is logged once and NCCL's own choice is left in place.
 *
 * Order of a decision: BRAID_TUNER_MODE=off: NCCL's choice. Otherwise a matching rule wins
 * (modes auto and rules). Otherwise, in modes auto and model and when a calibration or health
 * file is in use, the model: NCCL's predicted times corrected by the calibration
 * (measured/predicted for the algorithm at that size) and charged for the slowest node's link;
 * its best entry replaces NCCL's pick only when it is predicted at least BRAID_TUNER_MARGIN
 * faster than NCCL's pick, so near-ties keep NCCL's choice. */
#ifndef BRAID_TUNER_TUNER_H
#define BRAID_TUNER_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "inputs.h"
#include "nccl_plugin/tuner.h"
#include "rules.h"

/* Predicted-time advantage the model needs before it overrides NCCL's pick. */
#define BRAID_TUNER_MARGIN 0.03

struct braid_tuner;

/* Creates a context from the environment (inputs.h) and logs what it uses. constants: what
 * NCCL passed to a v5+ init, or NULL (older versions: NCCL's defaults are assumed). version is
 * the ABI version NCCL picked (1..6), for the log. The files decide only when pinned
 * (agree.h): unpinned files are left out (NCCL's choice, one WARN); a pin that this rank's
 * inputs do not match returns -1 with a WARN, and NCCL then fails the communicator's init.
 * Otherwise 0; *out is NULL only if memory ran out, and a NULL context tunes nothing. */
int braid_tuner_create(struct braid_tuner **out, int version, uint64_t comm_id, size_t nranks,
                        size_t nnodes, const ncclTunerConstants_v5_t *constants);
/* The same from explicit inputs (braid-tune, tests). */
void braid_tuner_create_from(struct braid_tuner **out, const struct braid_tuner_inputs *in,
                             int version, uint64_t comm_id, size_t nranks, size_t nnodes,
                             const ncclTunerConstants_v5_t *constants);
void braid_tuner_destroy(struct braid_tuner *t);

size_t braid_tuner_rule_count(const struct braid_tuner *t);
/* Whether the model is in use (calibration or health loaded and applicable). */
int braid_tuner_model_active(const struct braid_tuner *t);
uint64_t braid_tuner_inputs_fingerprint(const struct braid_tuner *t);
/* The process's advice object this context feeds (tests), or NULL. */
struct braid_advice *braid_tuner_advice(const struct braid_tuner *t);

/* The rule that applies, or NULL. pipe_ops/reg_buff -1: not known to this ABI version. */
const struct braid_rule *braid_tuner_decide(const struct braid_tuner *t, int coll,
                                            size_t nbytes, int pipe_ops, int reg_buff);

enum braid_tuner_source {
  BRAID_TUNER_SRC_NCCL = 0, /* NCCL's choice kept */
  BRAID_TUNER_SRC_RULE,     /* a rule */
  BRAID_TUNER_SRC_MODEL,    /* the model */
};

/* What a decision was and why (braid-tune explain, logs, tests). */
struct braid_tuner_why {
  enum braid_tuner_source source;
  int rule_line;                 /* SRC_RULE */
  int nccl_algo, nccl_proto;     /* NCCL's pick from the table as passed (-1: none) */
  int algo, proto;               /* the resulting pick (-1: none) */
  int nchannels;                 /* set by a rule, else 0 */
  /* The model's predicted µs per entry (IGNORE where NCCL's table is), when it ran. */
  float predicted[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  int model_ran;
  float best_us, nccl_us;        /* the model's prediction for its best and for NCCL's pick */
  int best_algo, best_proto;     /* the model's best entry (may lose to the margin) */
  int straggler;                 /* the slow-node charge changed the pick */
  char reason[400];              /* filled only for a caller's why and for the log */
};

/* v3..v6: decides and applies the decision to NCCL's flat float[num_algo][num_proto] cost
 * table (the chosen entry is set to 0.0, never an IGNORE one) and *nchannels (only from a
 * rule with channels != -1). why may be NULL. */
void braid_tuner_apply_table(struct braid_tuner *t, int coll, size_t nbytes, int pipe_ops,
                             int reg_buff, float *table, int num_algo, int num_proto,
                             int *nchannels, struct braid_tuner_why *why);

/* v1 and v2: sets *algorithm and *protocol only when a rule matches and NCCL 2.19-2.21, which
 * use the answer unchecked, can certainly run it (no cost table: no model; a rule's channel
 * count is never applied, since those versions do not check it either). */
void braid_tuner_apply_v2(struct braid_tuner *t, int coll, size_t nbytes, int collnet_support,
                          int nvls_support, int pipe_ops, int *algorithm, int *protocol,
                          int *nchannels);

/* v1's one process-wide context serves every communicator, and getCollInfo does not say whose
 * call it is: rules that name a node or rank count never match in it. */
void braid_tuner_sizes_unknown(struct braid_tuner *t);

#endif
