/* braid-tune pin: the BRAID_TUNER_PIN line for the tuner files this environment names. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agree.h"
#include "inputs.h"
#include "tune.h"

void braid_tune_pin_usage(FILE *f) {
  fprintf(f,
          "usage: braid-tune pin\n"
          "\n"
          "Prints BRAID_TUNER_PIN=<fingerprint> for the tuner inputs this environment names\n"
          "(BRAID_TUNER_MODE; the rules file NCCL_TUNER_CONFIG_FILE, default ./nccl_tuner.conf;\n"
          "BRAID_TUNER_CALIB; BRAID_TUNER_HEALTH), and on stderr which files went in.  Run it\n"
          "where the files are as the job will see them, then give every rank the same line\n"
          "(export $(braid-tune pin)): the tuner uses its files only when they are pinned, and a\n"
          "rank whose files differ from the pin fails its communicator's init instead of\n"
          "choosing differently from the others (docs/tuner.md).  Exit 1 when libsodium is missing.\n");
}

int braid_tune_pin_main(int argc, char **argv) {
  if (argc > 1) {
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
      braid_tune_pin_usage(stdout);
      return 0;
    }
    fprintf(stderr, "braid-tune pin: takes no arguments (it reads the environment)\n");
    braid_tune_pin_usage(stderr);
    return 2;
  }
  struct braid_tuner_inputs in;
  braid_tuner_inputs_read(&in);
  fprintf(stderr, "braid-tune pin: mode %s, rules %s, calibration %s, health %s\n",
          braid_tuner_mode_name(in.mode), in.mode == BRAID_TUNER_MODEL ? "(not read)" : in.rules_path,
          in.calib_path[0] ? in.calib_path : "(unset)", in.health_path[0] ? in.health_path : "(unset)");
  if (in.no_fingerprint) {
    fprintf(stderr, "braid-tune pin: libsodium cannot be loaded, so the files cannot be "
            "fingerprinted (apt-get install libsodium23); no pin printed\n");
    return 1;
  }
  printf("BRAID_TUNER_PIN=%016" PRIx64 "\n", in.fingerprint);
  return 0;
}
