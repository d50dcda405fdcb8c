#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static _Atomic(ncclDebugLogger_t) log_logger;

void braid_log_set_logger(ncclDebugLogger_t logger) {
  if (logger) atomic_store(&log_logger, logger);
}

ncclDebugLogger_t braid_log_logger(void) { return atomic_load(&log_logger); }

/* NCCL_DEBUG level as NCCL reads it; WARN when unset so errors are never silent. */
static int log_stderr_level(void) {
  const char *v = getenv("NCCL_DEBUG");
  if (!v) return NCCL_LOG_WARN;
  if (!strcasecmp(v, "VERSION")) return NCCL_LOG_VERSION;
  if (!strcasecmp(v, "WARN")) return NCCL_LOG_WARN;
  if (!strcasecmp(v, "INFO")) return NCCL_LOG_INFO;
  if (!strcasecmp(v, "TRACE")) return NCCL_LOG_TRACE;
  if (!strcasecmp(v, "ABORT")) return NCCL_LOG_ABORT;
  return NCCL_LOG_WARN;
}

void braid_warn_loud(const char *file, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  braid_log(NCCL_LOG_WARN, NCCL_ALL, file, line, "%s", msg);
  const char *v = getenv("NCCL_DEBUG"); /* NCCL prints WARNs with WARN, INFO, ABORT or TRACE */
  bool shown = v && (!strcasecmp(v, "WARN") || !strcasecmp(v, "INFO") || !strcasecmp(v, "ABORT") ||
                     !strcasecmp(v, "TRACE"));
  if (atomic_load(&log_logger) && !shown) fprintf(stderr, "[%d] NET/braid WARN %s\n", (int)getpid(), msg);
}

void braid_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
               const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);

  ncclDebugLogger_t logger = atomic_load(&log_logger);
  if (logger) {
    logger(level, flags, file, line, "NET/braid : %s", msg);
    return;
  }
  if ((int)level > log_stderr_level() || level == NCCL_LOG_NONE) return;
  fprintf(stderr, "[%d] braid %s %s:%d %s\n", (int)getpid(),
          level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, msg);
}
