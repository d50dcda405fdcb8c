/* braid-perf: the logger handed to the plugin's init, printing as NCCL does. */
#ifndef PERF_LOGGER_H
#define PERF_LOGGER_H

#include "nccl_plugin/common.h"

/* Reads NCCL_DEBUG (WARN by default; VERSION, INFO, TRACE) and NCCL_DEBUG_SUBSYS (NCCL's
 * default INIT,BOOTSTRAP,ENV, so NET lines need NCCL_DEBUG_SUBSYS=NET or ALL; "^X" excludes). `dev` is printed in the [..] field
 * where NCCL prints the CUDA device (braid-perf prints the rank). */
void perf_logger_setup(int dev);
/* The ncclDebugLogger_t: lines "host:pid:tid [dev] NCCL INFO msg" on stdout. */
void perf_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
