/* braid-tune: what the braid tuner would choose, and why (explain); advice files merged into a
 * health file for the next run (health); the pin that lets the tuner use its files (pin). */
#include <stdio.h>
#include <string.h>

#include "tune.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: braid-tune <command> [options]\n"
          "\n"
          "commands:\n"
          "  explain   what the braid tuner chooses for each message size, NCCL's own pick, and\n"
          "            why (rules, calibration, health); optionally a PNG chart\n"
          "  health    merges BRAID_TUNER_ADVICE files of a run into a BRAID_TUNER_HEALTH file\n"
          "  pin       the BRAID_TUNER_PIN line that lets the tuner use this environment's files\n"
          "\n"
          "  braid-tune <command> --help   the command's options\n"
          "  braid-tune --help             this text\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
    if (argc > 2 && !strcmp(argv[2], "explain")) braid_tune_explain_usage(stdout);
    else if (argc > 2 && !strcmp(argv[2], "health")) braid_tune_health_usage(stdout);
    else if (argc > 2 && !strcmp(argv[2], "pin")) braid_tune_pin_usage(stdout);
    else usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "explain")) return braid_tune_explain_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "health")) return braid_tune_health_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "pin")) return braid_tune_pin_main(argc - 1, argv + 1);
  fprintf(stderr, "braid-tune: unknown command \"%s\"\n\n", cmd);
  usage(stderr);
  return 2;
}
