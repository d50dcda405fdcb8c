/* Whether this rank may let its tuner files decide: the rank-agreement gate.
 *
 * NCCL asks every rank's tuner separately and never checks that they agree; ranks that choose a
 * different algorithm, protocol or channel count hang inside NCCL (with NCCL_RUNTIME_CONNECT=1,
 * the default since 2.22, before any connection of braid's could compare them). The inputs a
 * braid choice can depend on are:
 *   - NCCL's arguments (ranks, nodes, constants, the collective, its size, the cost table):
 *     the same on every rank, since NCCL's own choice depends on them too;
 *   - braid's environment (BRAID_TUNER_MODE, BRAID_TUNER_PIN and the file variables): like
 *     NCCL_ALGO and NCCL_PROTO, which break NCCL just the same when they differ, the launcher
 *     gives every rank the same environment;
 *   - the contents of the rules, calibration and health files: local files, which can differ
 *     between nodes (a stale copy, a different working directory) without anyone noticing;
 *   - live fabric health: per rank by nature, so it never enters a choice (advice.h).
 * So files decide only when their identity is checked before use: BRAID_TUNER_PIN names the
 * fingerprint of the inputs (inputs.h) that every rank must compute. Pinned and equal: the
 * files decide. Pinned and different (or a malformed pin): the communicator's init fails with
 * a WARN naming both values. Files present but no pin: agreement cannot be shown, so NCCL's
 * choice is kept, said once with the exact pin to set. */
#ifndef BRAID_TUNER_AGREE_H
#define BRAID_TUNER_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "inputs.h"

enum braid_agree {
  BRAID_AGREE_NONE = 0, /* no file would change a choice: NCCL's choice (nothing to agree on) */
  BRAID_AGREE_USE,      /* files present and pinned: they decide */
  BRAID_AGREE_UNPINNED, /* files present, BRAID_TUNER_PIN unset: NCCL's choice */
  BRAID_AGREE_REFUSE,   /* BRAID_TUNER_PIN malformed or not this rank's fingerprint: init fails */
};

/* Decides for in (read from this process's environment); why (may be NULL) gets one sentence
 * for the log: which files, and what to do. */
enum braid_agree braid_tuner_agree(const struct braid_tuner_inputs *in, char *why, size_t n);

/* The fingerprint that describes what this rank's choices depend on, given a, the decision
 * braid_tuner_agree made for in: in->fingerprint when files decide, else BRAID_TUNER_FP_OFF
 * (NCCL's choice, whatever the local files hold), so that ranks which choose alike also compare
 * alike in the net plugin's connection check. */
uint64_t braid_tuner_agreed_fingerprint(const struct braid_tuner_inputs *in, enum braid_agree a);

#endif
