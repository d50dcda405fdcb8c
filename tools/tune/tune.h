/* braid-tune's subcommands (main.c dispatches). Each takes its own argv (argv[0] is the
 * subcommand's name) and returns the process exit status. */
#ifndef BRAID_TUNE_TUNE_H
#define BRAID_TUNE_TUNE_H

#include <stdio.h>

int braid_tune_explain_main(int argc, char **argv);
void braid_tune_explain_usage(FILE *f);

int braid_tune_health_main(int argc, char **argv);
void braid_tune_health_usage(FILE *f);
int braid_tune_pin_main(int argc, char **argv);
void braid_tune_pin_usage(FILE *f);

#endif
