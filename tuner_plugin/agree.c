/* The rank-agreement gate for the tuner's files (see agree.h). */
#include "agree.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "param.h"

/* Which of the files this mode reads would be used, as "rules X, calibration Y" (empty: none).
 * The default rules file counts only where it exists; a file named in the environment counts
 * even if unreadable (another rank may read it). */
static void files_in_use(const struct braid_tuner_inputs *in, char *out, size_t n) {
  out[0] = 0;
  if (!in->braid_tuner || in->mode == BRAID_TUNER_OFF) return;
  size_t o = 0;
  if (in->mode != BRAID_TUNER_MODEL) {
    const char *set = getenv("NCCL_TUNER_CONFIG_FILE");
    if ((set && *set) || access(in->rules_path, F_OK) == 0)
      o += (size_t)snprintf(out + o, n - o, "rules %s", in->rules_path);
  }
  if (in->mode != BRAID_TUNER_RULES) {
    if (in->calib_path[0] && o < n)
      o += (size_t)snprintf(out + o, n - o, "%scalibration %s", o ? ", " : "", in->calib_path);
    if (in->health_path[0] && o < n)
      snprintf(out + o, n - o, "%shealth %s", o ? ", " : "", in->health_path);
  }
}

/* BRAID_TUNER_PIN: 1 and *pin for 16 hex digits (an optional 0x), 0 unset, -1 malformed. */
static int read_pin(uint64_t *pin) {
  const char *v = braid_param_env(BRAID_P_TUNER_PIN);
  if (!v || !*v) return 0;
  if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) v += 2;
  if (strlen(v) != 16 || strspn(v, "0123456789abcdefABCDEF") != 16) return -1;
  *pin = strtoull(v, NULL, 16);
  return 1;
}

enum braid_agree braid_tuner_agree(const struct braid_tuner_inputs *in, char *why, size_t n) {
  char files[1200], sink[8];
  if (!why) why = sink, n = sizeof sink;
  why[0] = 0;
  files_in_use(in, files, sizeof files);
  uint64_t pin = 0;
  int pinned = read_pin(&pin);
  if (pinned < 0) {
    snprintf(why, n, "BRAID_TUNER_PIN=%s is not a 16-digit hex fingerprint (this rank's is "
             "%016" PRIx64 ")", braid_param_env(BRAID_P_TUNER_PIN), in->fingerprint);
    return BRAID_AGREE_REFUSE;
  }
  if (pinned && in->no_fingerprint) {
    snprintf(why, n, "BRAID_TUNER_PIN is set, but this rank cannot fingerprint its tuner files "
             "(libsodium cannot be loaded: apt-get install libsodium23), so it cannot show that "
             "it reads the pinned ones");
    return BRAID_AGREE_REFUSE;
  }
  if (pinned && pin != in->fingerprint) {
    snprintf(why, n, "this rank's tuner inputs (mode %s%s%s) have fingerprint %016" PRIx64
             ", BRAID_TUNER_PIN says %016" PRIx64 ": a file differs from the pinned one (or is "
             "missing) here; fix the file or the pin, every rank must read the same",
             braid_tuner_mode_name(in->mode), files[0] ? ", " : "", files, in->fingerprint, pin);
    return BRAID_AGREE_REFUSE;
  }
  if (!files[0]) {
    snprintf(why, n, "no tuner file in use%s", pinned ? " (BRAID_TUNER_PIN matches)" : "");
    return BRAID_AGREE_NONE;
  }
  if (pinned) {
    snprintf(why, n, "%s: pinned by BRAID_TUNER_PIN=%016" PRIx64, files, pin);
    return BRAID_AGREE_USE;
  }
  snprintf(why, n, "%s not used, NCCL's choice kept: without BRAID_TUNER_PIN nothing shows that "
           "every rank reads the same files; to use them, set BRAID_TUNER_PIN=%016" PRIx64
           " on every rank", files, in->fingerprint);
  return BRAID_AGREE_UNPINNED;
}

uint64_t braid_tuner_agreed_fingerprint(const struct braid_tuner_inputs *in, enum braid_agree a) {
  return a == BRAID_AGREE_USE ? in->fingerprint : BRAID_TUNER_FP_OFF;
}
