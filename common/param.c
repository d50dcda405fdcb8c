#include "param.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

static const struct braid_param_def param_defs[BRAID_P_COUNT] = {
#define BRAID_PARAM(id, type, def, min, max, fallback, doc) \
  {"BRAID_" #id, BRAID_PARAM_##type, def, min, max, fallback, doc},
#include "params.def"
#undef BRAID_PARAM
};

static int64_t param_ints[BRAID_P_COUNT];
static const char *param_strs[BRAID_P_COUNT];
static const char *param_from[BRAID_P_COUNT];
static ncclResult_t param_status;
static pthread_once_t param_once = PTHREAD_ONCE_INIT;

const struct braid_param_def *braid_param_def(enum braid_param_id id) {
  return id < BRAID_P_COUNT ? &param_defs[id] : NULL;
}

static int param_parse_bool(const char *t, int64_t *out) {
  static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < 4; i++) {
    if (!strcasecmp(t, yes[i])) return *out = 1, 0;
    if (!strcasecmp(t, no[i])) return *out = 0, 0;
  }
  return -1;
}

/* Multiplier for a size suffix (K, KB, KiB, M, ... all binary); 0 if the suffix is unknown. */
static int64_t param_size_unit(const char *s) {
  if (!*s) return 1;
  static const char units[] = "KMGT";
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return 0;
  const char *u = strchr(units, s[0] & ~0x20);
  if (!u) return 0;
  const char *rest = s + 1;
  if (*rest && strcasecmp(rest, "B") && strcasecmp(rest, "iB")) return 0;
  return (int64_t)1 << (10 * (u - units + 1));
}

int braid_param_parse(const struct braid_param_def *def, const char *text, int64_t *out, char *err,
                      size_t errlen) {
  if (def->type == BRAID_PARAM_STR) return *out = 0, 0;
  if (def->type == BRAID_PARAM_BOOL) {
    if (param_parse_bool(text, out) == 0) return 0;
    snprintf(err, errlen, "%s=\"%s\" is not a boolean (use 0/1, true/false, yes/no, on/off)",
             def->name, text);
    return -1;
  }
  errno = 0;
  char *end = NULL;
  /* Decimal ("060000" is 60000, never octal), or hexadecimal with 0x. */
  const char *d = text + strspn(text, " \t");
  d += *d == '+' || *d == '-';
  long long v = strtoll(text, &end, d[0] == '0' && (d[1] == 'x' || d[1] == 'X') ? 16 : 10);
  int64_t unit = def->type == BRAID_PARAM_SIZE ? param_size_unit(end) : (*end ? 0 : 1);
  if (end == text || errno == ERANGE || unit == 0) {
    snprintf(err, errlen, "%s=\"%s\" is not %s in [%" PRId64 ", %" PRId64 "]", def->name, text,
             def->type == BRAID_PARAM_SIZE ? "a size (a number with an optional K/M/G suffix)"
                                           : "an integer",
             def->min, def->max);
    return -1;
  }
  if (v != 0 && (v > INT64_MAX / unit || v < INT64_MIN / unit)) {
    snprintf(err, errlen, "%s=\"%s\" overflows", def->name, text);
    return -1;
  }
  v *= unit;
  if (v < def->min || v > def->max) {
    snprintf(err, errlen, "%s=\"%s\" is out of range [%" PRId64 ", %" PRId64 "]", def->name, text,
             def->min, def->max);
    return -1;
  }
  *out = v;
  return 0;
}

/* d's value in the environment now (an empty variable counts as unset) into *value; returns the
 * variable it came from, NULL for the default. */
static const char *param_lookup(const struct braid_param_def *d, const char **value) {
  const char *v = getenv(d->name);
  if (v && *v) return *value = v, d->name;
  v = d->fallback ? getenv(d->fallback) : NULL;
  if (v && *v) return *value = v, d->fallback;
  *value = d->def;
  return NULL;
}

static void param_read_all(void) {
  param_status = ncclSuccess;
  for (int i = 0; i < BRAID_P_COUNT; i++) {
    const struct braid_param_def *d = &param_defs[i];
    const char *v;
    param_from[i] = param_lookup(d, &v);
    param_strs[i] = v;
    char err[256];
    int64_t x = 0;
    if (braid_param_parse(d, v, &x, err, sizeof err) != 0) {
      BRAID_WARN("invalid configuration: %s", err);
      param_status = ncclInvalidArgument;
      braid_param_parse(d, d->def, &x, err, sizeof err);
    }
    param_ints[i] = x;
  }
}

ncclResult_t braid_params_load(void) {
  pthread_once(&param_once, param_read_all);
  return param_status;
}

ncclResult_t braid_params_reload(void) {
  pthread_once(&param_once, param_read_all);
  param_read_all();
  return param_status;
}

int64_t braid_param_int(enum braid_param_id id) {
  braid_params_load();
  return param_ints[id];
}

const char *braid_param_str(enum braid_param_id id) {
  braid_params_load();
  return param_strs[id] ? param_strs[id] : "";
}

const char *braid_param_from(enum braid_param_id id) {
  braid_params_load();
  return param_from[id];
}

const char *braid_param_env(enum braid_param_id id) {
  const char *v = "";
  if (id < BRAID_P_COUNT) param_lookup(&param_defs[id], &v);
  return v;
}

static const char *param_type_name(enum braid_param_type t) {
  switch (t) {
    case BRAID_PARAM_INT: return "int";
    case BRAID_PARAM_SIZE: return "size";
    case BRAID_PARAM_BOOL: return "bool";
    default: return "string";
  }
}

void braid_params_print(FILE *f) {
  braid_params_load();
  fprintf(f, "%-28s %-6s %-10s %-24s %-12s %s\n", "variable", "type", "default", "range", "value",
          "meaning");
  for (int i = 0; i < BRAID_P_COUNT; i++) {
    const struct braid_param_def *d = &param_defs[i];
    char range[64] = "-";
    if (d->type == BRAID_PARAM_INT || d->type == BRAID_PARAM_SIZE)
      snprintf(range, sizeof range, "[%" PRId64 ", %" PRId64 "]", d->min, d->max);
    char doc[512];
    snprintf(doc, sizeof doc, "%s%s%s", d->doc, d->fallback ? "; falls back to " : "",
             d->fallback ? d->fallback : "");
    /* Secrets (…_TOKEN) are never printed: only whether one is set. */
    const char *val = *param_strs[i] ? param_strs[i] : "\"\"";
    if (strstr(d->name, "_TOKEN")) val = *param_strs[i] ? "(set)" : "(unset)";
    fprintf(f, "%-28s %-6s %-10s %-24s %-12s %s\n", d->name, param_type_name(d->type),
            *d->def ? d->def : "\"\"", range, val, doc);
  }
}
