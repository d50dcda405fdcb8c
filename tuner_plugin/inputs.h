/* Everything the braid tuner's choices depend on besides NCCL's own arguments, gathered in one
 * place and hashed into one fingerprint.
 *
 * Ranks that choose differently hang or corrupt a collective, so these inputs must be identical
 * on every rank: the tuner logs the fingerprint, braid's net plugin carries it in every listen
 * handle and refuses a connection between ranks whose fingerprints differ, and braid-perf
 * compares it across ranks before it runs. */
#ifndef BRAID_TUNER_INPUTS_H
#define BRAID_TUNER_INPUTS_H

#include <stdint.h>

enum braid_tuner_mode {
  BRAID_TUNER_AUTO = 0, /* rules first, then the model (when it has calibration or health) */
  BRAID_TUNER_RULES,    /* rules only */
  BRAID_TUNER_MODEL,    /* the model only, rules ignored */
  BRAID_TUNER_OFF,      /* NCCL's own choice, always */
};

#define BRAID_TUNER_DEFAULT_RULES "nccl_tuner.conf"

struct braid_tuner_inputs {
  int braid_tuner;       /* NCCL_TUNER_PLUGIN names braid (else nothing below matters) */
  enum braid_tuner_mode mode;
  int mode_valid;        /* BRAID_TUNER_MODE was empty or a known word */
  int no_fingerprint;    /* libsodium is missing: the files cannot be fingerprinted (mode off) */
  char rules_path[512];  /* NCCL_TUNER_CONFIG_FILE or the default */
  char calib_path[512];  /* BRAID_TUNER_CALIB, "" if unset */
  char health_path[512]; /* BRAID_TUNER_HEALTH, "" if unset */
  uint64_t fingerprint;  /* 0 never occurs */
};

/* The fingerprints that read no file: NCCL_TUNER_PLUGIN is not braid, or BRAID_TUNER_MODE=off.
 * Constants, so they need no libsodium; each is the hash braid_tuner_inputs_read would compute
 * (BLAKE2b-64 of "no braid tuner", of "off" and the three files unset; checked by
 * test/unit/optional_libs_test.cc). */
#define BRAID_TUNER_FP_NONE 0xb19e4828b52a8ee1ULL
#define BRAID_TUNER_FP_OFF 0xb86e5281f507793aULL

/* Reads the environment and hashes the mode and the three files' contents (a missing file
 * hashes as missing) with libsodium, opened at run time.  Without libsodium the files cannot be
 * fingerprinted, so they are not used: mode becomes BRAID_TUNER_OFF (NCCL's choices) and the
 * fingerprint BRAID_TUNER_FP_OFF, after one INFO line per process. */
void braid_tuner_inputs_read(struct braid_tuner_inputs *in);

const char *braid_tuner_mode_name(enum braid_tuner_mode m);

/* The fingerprint for this process, computed once (thread-safe), without the INFO line. */
uint64_t braid_tuner_fingerprint(void);

#endif
