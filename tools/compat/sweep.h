/* Calling a loaded tuner as a given NCCL version does: its ABI's init, one getCollInfo per
 * collective and size of a sweep, and its destroy, printing each answer. */
#ifndef BRAID_COMPAT_SWEEP_H
#define BRAID_COMPAT_SWEEP_H

#include <stdio.h>

/* table: the ncclTunerPlugin_v<version> the loader found.  0 after a full sweep, 3 when the
 * tuner's init failed (NCCL then fails the communicator's init), 1 on another error. */
int compat_sweep(const void *table, int version, int nranks, int nnodes, FILE *out);

#endif
