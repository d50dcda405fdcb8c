/* The braid tuner: one context per communicator, one decision for every ABI version.
 *
 * The decision depends only on the init arguments (nRanks, nNodes), the rules file and the
 * getCollInfo arguments, so every rank of a communicator chooses the same. Nothing here ever
 * fails a collective: trouble is logged once and NCCL's own choice is left in place. */
#ifndef BRAID_TUNER_TUNER_H
#define BRAID_TUNER_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_plugin/tuner.h"
#include "rules.h"

struct braid_tuner;

/* Creates a context: reads the rules from NCCL_TUNER_CONFIG_FILE (default nccl_tuner.conf in the
 * working directory; missing = no rules) and logs one INFO line. version is the ABI version
 * NCCL picked (2..6), for the log. Never fails for the rules file; *out is NULL only if memory
 * ran out, and a NULL context tunes nothing. */
void braid_tuner_create(struct braid_tuner **out, int version, uint64_t comm_id, size_t nranks,
                        size_t nnodes);
void braid_tuner_destroy(struct braid_tuner *t);

size_t braid_tuner_rule_count(const struct braid_tuner *t);

/* The rule that applies, or NULL. pipe_ops/reg_buff -1: not known to this ABI version. */
const struct braid_rule *braid_tuner_decide(const struct braid_tuner *t, int coll,
                                            size_t nbytes, int pipe_ops, int reg_buff);

/* v3..v6: applies the decision to NCCL's flat float[num_algo][num_proto] cost table: the
 * chosen entry is set to 0.0 unless it is IGNORE, and *nchannels is set only then, and only
 * when the rule gives channels != -1. */
void braid_tuner_apply_table(struct braid_tuner *t, int coll, size_t nbytes, int pipe_ops,
                             int reg_buff, float *table, int num_algo, int num_proto,
                             int *nchannels);

/* v2: sets *algorithm, *protocol (and *nchannels) only when a rule matches and its algorithm
 * is possible given collnet_support/nvls_support. */
void braid_tuner_apply_v2(struct braid_tuner *t, int coll, size_t nbytes, int collnet_support,
                          int nvls_support, int pipe_ops, int *algorithm, int *protocol,
                          int *nchannels);

#endif
