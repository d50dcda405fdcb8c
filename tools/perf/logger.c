/* braid-perf: NCCL-style logger (NCCL's src/debug.cc formats). */
#include "logger.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"

static int log_level = NCCL_LOG_WARN;
/* NCCL's default NCCL_DEBUG_SUBSYS: INIT, BOOTSTRAP and ENV only (NET lines need NET). */
static unsigned long log_mask = NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
static int log_dev;
static char log_host[64];

static const struct { const char *name; unsigned long bit; } log_subsys[] = {
    {"INIT", NCCL_INIT},   {"COLL", NCCL_COLL},       {"P2P", NCCL_P2P},     {"SHM", NCCL_SHM},
    {"NET", NCCL_NET},     {"GRAPH", NCCL_GRAPH},     {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},
    {"ALLOC", NCCL_ALLOC}, {"CALL", NCCL_CALL},       {"PROXY", NCCL_PROXY}, {"NVLS", NCCL_NVLS},
    {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG}, {"PROFILE", NCCL_PROFILE},
    {"RAS", NCCL_RAS},     {"ALL", ~0ul}};

/* NCCL_DEBUG_SUBSYS: comma list, a leading ^ inverts the whole list. */
static void log_parse_subsys(const char *s) {
  if (!s) return;
  int invert = s[0] == '^';
  unsigned long m = 0;
  char *dup = strdup(s + invert), *save = NULL;
  for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
    for (size_t i = 0; i < sizeof log_subsys / sizeof log_subsys[0]; i++)
      if (!strcasecmp(t, log_subsys[i].name)) m |= log_subsys[i].bit;
  free(dup);
  log_mask = invert ? ~m : m;
}

void perf_logger_setup(int dev) {
  const char *v = getenv("NCCL_DEBUG");
  log_dev = dev;
  log_level = NCCL_LOG_WARN;
  if (v && !strcasecmp(v, "VERSION")) log_level = NCCL_LOG_VERSION;
  if (v && !strcasecmp(v, "INFO")) log_level = NCCL_LOG_INFO;
  if (v && !strcasecmp(v, "TRACE")) log_level = NCCL_LOG_TRACE;
  if (v && !strcasecmp(v, "ABORT")) log_level = NCCL_LOG_ABORT;
  log_parse_subsys(getenv("NCCL_DEBUG_SUBSYS"));
  gethostname(log_host, sizeof log_host - 1);
  char *dot = strchr(log_host, '.');
  if (dot) *dot = '\0';
}

void perf_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                 const char *fmt, ...) {
  if (level == NCCL_LOG_NONE || (int)level > log_level) return;
  if (level != NCCL_LOG_WARN && level != NCCL_LOG_ABORT && !(flags & log_mask)) return;
  char head[256], msg[2048];
  int pid = getpid(), tid = (int)syscall(SYS_gettid);
  if (level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT)
    snprintf(head, sizeof head, "%s:%d:%d [%d] %s:%d NCCL WARN ", log_host, pid, tid, log_dev,
             file ? file : "?", line);
  else if (level == NCCL_LOG_INFO)
    snprintf(head, sizeof head, "%s:%d:%d [%d] NCCL INFO ", log_host, pid, tid, log_dev);
  else if (level == NCCL_LOG_TRACE) {
    snprintf(head, sizeof head, "%s:%d:%d [%d] %f %s:%d NCCL TRACE ", log_host, pid, tid, log_dev,
             (double)braid_now_ns() * 1e-6, file ? file : "?", line);
  } else
    snprintf(head, sizeof head, "%s:%d:%d [%d] NCCL VERSION ", log_host, pid, tid, log_dev);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("%s%s\n", head, msg); /* one printf: lines of concurrent threads do not mix */
  fflush(stdout);
}
