/* The typed registry of every BRAID_* variable (common/params.def).
 *
 * Values are read once, at the first braid_params_load(); a value that does not parse or is out
 * of range is reported through the logger with the variable, the value and the valid range, and
 * braid_params_load() returns ncclInvalidArgument (a wrong config fails loudly, it is never
 * silently replaced by a default).  Values read apart from that load (the tuner's inputs, again
 * at every communicator's init; braid-ps's token and kernels, which do not check the plugins'
 * variables) go through braid_param_env: the same names, fallbacks and defaults, read then. */
#ifndef BRAID_PARAM_H
#define BRAID_PARAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "nccl_plugin/common.h"

enum braid_param_type { BRAID_PARAM_INT, BRAID_PARAM_SIZE, BRAID_PARAM_BOOL, BRAID_PARAM_STR };

enum braid_param_id {
#define BRAID_PARAM(id, type, def, min, max, fallback, doc) BRAID_P_##id,
#include "params.def"
#undef BRAID_PARAM
  BRAID_P_COUNT
};

struct braid_param_def {
  const char *name; /* full name, "BRAID_..." */
  enum braid_param_type type;
  const char *def;
  int64_t min, max;
  const char *fallback; /* NCCL variable honoured when unset, or NULL */
  const char *doc;
};

const struct braid_param_def *braid_param_def(enum braid_param_id id);

/* Reads the environment once (thread-safe); later calls return the first result. */
ncclResult_t braid_params_load(void);
/* Re-reads the environment (tests only; not thread-safe). */
ncclResult_t braid_params_reload(void);

int64_t braid_param_int(enum braid_param_id id);
const char *braid_param_str(enum braid_param_id id); /* "" when unset */
/* The variable the loaded value came from: the BRAID_ one, else its NCCL fallback; NULL when
 * neither is set (the default). */
const char *braid_param_from(enum braid_param_id id);

/* The value in the environment at this call, unparsed and unchecked (the BRAID_ variable, else its
 * NCCL fallback, else the default).  Loads nothing, warns about nothing. */
const char *braid_param_env(enum braid_param_id id);

/* Parses text for def; 0 on success, -1 with a message in err otherwise. */
int braid_param_parse(const struct braid_param_def *def, const char *text, int64_t *out, char *err,
                      size_t errlen);

/* Prints the registry (name, type, default, range, current value, doc). */
void braid_params_print(FILE *f);

#endif
