/* The tuner's inputs from the environment, and their fingerprint (see inputs.h). */
#include "inputs.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agree.h"
#include "log.h"
#include "param.h"
#include "sodium_lib.h"
#include "textfile.h"

#define INPUT_FILE_MAX (16u << 20)

const char *braid_tuner_mode_name(enum braid_tuner_mode m) {
  switch (m) {
    case BRAID_TUNER_AUTO: return "auto";
    case BRAID_TUNER_RULES: return "rules";
    case BRAID_TUNER_MODEL: return "model";
    case BRAID_TUNER_OFF: return "off";
  }
  return "?";
}

/* NCCL_TUNER_PLUGIN as NCCL resolves it: "braid", "libnccl-tuner-braid.so" or a path to it. */
static int names_braid(const char *v) {
  if (!v || !*v) return 0;
  const char *base = strrchr(v, '/');
  base = base ? base + 1 : v;
  return strcmp(base, "braid") == 0 || strncmp(base, "libnccl-tuner-braid", 19) == 0;
}

static void copy_env(char *dst, size_t n, const char *name, const char *def) {
  const char *v = getenv(name);
  snprintf(dst, n, "%s", v && *v ? v : def);
}

/* Hashes a tag, then the file's contents or the reason it has none. */
static void hash_file(const struct braid_sodium *s, crypto_generichash_state *st, const char *tag,
                      const char *path) {
  s->crypto_generichash_update(st, (const unsigned char *)tag, strlen(tag) + 1);
  if (!*path) {
    s->crypto_generichash_update(st, (const unsigned char *)"unset", 6);
    return;
  }
  size_t len = 0;
  char *buf = braid_read_small_file(path, INPUT_FILE_MAX, &len);
  if (!buf) {
    char why[32];
    snprintf(why, sizeof why, "unreadable:%d", errno == ENOENT ? 0 : 1);
    s->crypto_generichash_update(st, (const unsigned char *)why, strlen(why) + 1);
    return;
  }
  s->crypto_generichash_update(st, (const unsigned char *)"file", 5);
  s->crypto_generichash_update(st, (const unsigned char *)buf, len);
  free(buf);
}

/* The mode and the files it reads, hashed (BLAKE2b, 8 bytes); 0 never comes out. */
static uint64_t inputs_hash(const struct braid_sodium *s, const struct braid_tuner_inputs *in) {
  unsigned char out[8];
  crypto_generichash_state st;
  s->crypto_generichash_init(&st, NULL, 0, sizeof out);
  const char *m = braid_tuner_mode_name(in->mode);
  s->crypto_generichash_update(&st, (const unsigned char *)m, strlen(m) + 1);
  hash_file(s, &st, "rules", in->mode == BRAID_TUNER_MODEL ? "" : in->rules_path);
  hash_file(s, &st, "calib", in->mode == BRAID_TUNER_RULES ? "" : in->calib_path);
  hash_file(s, &st, "health", in->mode == BRAID_TUNER_RULES ? "" : in->health_path);
  s->crypto_generichash_final(&st, out, sizeof out);
  uint64_t fp = 0;
  for (int i = 0; i < 8; i++) fp = fp << 8 | out[i];
  return fp ? fp : 1;
}

/* quiet: for the net plugin and tools, which only compare fingerprints; the tuner says what a
 * missing libsodium costs it. */
static void inputs_read(struct braid_tuner_inputs *in, bool quiet) {
  memset(in, 0, sizeof *in);
  /* The tuner itself (quiet == false) is braid's tuner whatever name NCCL loaded it by; the net
   * plugin can only guess from NCCL_TUNER_PLUGIN. */
  in->braid_tuner = !quiet || names_braid(getenv("NCCL_TUNER_PLUGIN"));
  const char *mode = braid_param_env(BRAID_P_TUNER_MODE);
  in->mode = BRAID_TUNER_AUTO;
  in->mode_valid = 1;
  if (mode && *mode) {
    enum braid_tuner_mode m;
    for (m = BRAID_TUNER_AUTO; m <= BRAID_TUNER_OFF; m++)
      if (strcasecmp(mode, braid_tuner_mode_name(m)) == 0) break;
    if (m <= BRAID_TUNER_OFF)
      in->mode = m;
    else
      in->mode_valid = 0;
  }
  copy_env(in->rules_path, sizeof in->rules_path, "NCCL_TUNER_CONFIG_FILE",
           BRAID_TUNER_DEFAULT_RULES);
  snprintf(in->calib_path, sizeof in->calib_path, "%s", braid_param_env(BRAID_P_TUNER_CALIB));
  snprintf(in->health_path, sizeof in->health_path, "%s", braid_param_env(BRAID_P_TUNER_HEALTH));

  /* Neither case reads a file, so neither needs libsodium. */
  if (!in->braid_tuner) {
    in->fingerprint = BRAID_TUNER_FP_NONE;
    return;
  }
  if (in->mode == BRAID_TUNER_OFF) {
    in->fingerprint = BRAID_TUNER_FP_OFF;
    return;
  }
  const struct braid_sodium *s = braid_sodium();
  if (!s) {
    /* Files no rank can show the others it shares would let ranks choose differently: off.  A
     * rank that has libsodium and runs with BRAID_TUNER_MODE=off agrees with this one. */
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!quiet && !atomic_flag_test_and_set(&said))
      BRAID_INFO(NCCL_INIT | NCCL_TUNING, "tuner: %s: the tuner cannot fingerprint its input files "
                 "(rules, calibration, health), which every rank must be seen to share, so it "
                 "ignores them and leaves every choice to NCCL, as BRAID_TUNER_MODE=off (apt-get "
                 "install libsodium23)", braid_sodium_error());
    in->mode = BRAID_TUNER_OFF;
    in->no_fingerprint = 1;
    in->fingerprint = BRAID_TUNER_FP_OFF;
    return;
  }
  in->fingerprint = inputs_hash(s, in);
}

void braid_tuner_inputs_read(struct braid_tuner_inputs *in) { inputs_read(in, false); }

static pthread_once_t fp_once = PTHREAD_ONCE_INIT;
static uint64_t fp_value;

static void fp_init(void) {
  struct braid_tuner_inputs in;
  inputs_read(&in, true);
  char why[1600];
  enum braid_agree a = braid_tuner_agree(&in, why, sizeof why);
  fp_value = braid_tuner_agreed_fingerprint(&in, a); /* what this rank's choices depend on */
  /* NCCL 2.19-2.21 (and NCCL_RUNTIME_CONNECT=0) connect before the tuner's init could refuse:
   * say here why this rank's files are not the pinned ones, so the connection WARN has a cause. */
  if (in.braid_tuner && a == BRAID_AGREE_REFUSE) BRAID_WARN("tuner inputs (net plugin's view): %s", why);
}

uint64_t braid_tuner_fingerprint(void) {
  pthread_once(&fp_once, fp_init);
  return fp_value;
}
