/* Logging through the logger NCCL hands to init.
 *
 * Every braid module logs with BRAID_WARN / BRAID_INFO.  Until NCCL has given us a logger (and in
 * tools that run without NCCL) messages go to stderr, filtered by NCCL_DEBUG like NCCL's own.
 * A condition that can repeat (per message, per poll) is logged with BRAID_WARN_ONCE, which keeps
 * a per-call-site flag so the first occurrence, with its cause, is all the user sees. */
#ifndef BRAID_LOG_H
#define BRAID_LOG_H

#include <stdatomic.h>
#include "nccl_plugin/common.h"

void braid_log_set_logger(ncclDebugLogger_t logger);
ncclDebugLogger_t braid_log_logger(void);
void braid_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define BRAID_WARN(...) braid_log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_INFO(flags, ...) braid_log(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define BRAID_TRACE(flags, ...) braid_log(NCCL_LOG_TRACE, (flags), __func__, __LINE__, __VA_ARGS__)

#define BRAID_WARN_ONCE(...)                                                  \
  do {                                                                        \
    static atomic_flag braid_warned_ = ATOMIC_FLAG_INIT;                      \
    if (!atomic_flag_test_and_set(&braid_warned_)) BRAID_WARN(__VA_ARGS__);   \
  } while (0)

/* A WARN the user must see even where NCCL's logger shows none (NCCL prints WARNs only with
 * NCCL_DEBUG set, and a call that succeeds leaves no error behind): through NCCL's logger, and
 * also on stderr when NCCL_DEBUG would hide it.  For what weakens the job silently (a security
 * fallback), never for errors, which NCCL reports with the call that failed. */
void braid_warn_loud(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define BRAID_WARN_LOUD(...) braid_warn_loud(__FILE__, __LINE__, __VA_ARGS__)

#endif
