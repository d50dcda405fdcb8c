/* NCCL's plugin loaders, version by version (see profile.h). */
#include "profile.h"

#include <stdio.h>
#include <string.h>

const struct nccl_profile nccl_profiles[] = {
    {"2.19", "v2.19.4-1", NET_NAMES_219, 7, 5, TUNER_NAMES_219, 1, 1, 0},
    {"2.20", "v2.20.5-1", NET_NAMES_219, 8, 5, TUNER_NAMES_219, 1, 1, 0},
    {"2.21", "v2.21.5-1", NET_NAMES_221, 8, 5, TUNER_NAMES_221, 2, 2, 0},
    {"2.22-2.23", "v2.23.4-1", NET_NAMES_221, 8, 5, TUNER_NAMES_221, 3, 2, 0},
    {"2.24-2.25", "v2.24.3-1", NET_NAMES_221, 9, 5, TUNER_NAMES_221, 4, 2, 0},
    {"2.26", "v2.26.6-1", NET_NAMES_221, 10, 6, TUNER_NAMES_226, 4, 2, 0},
    {"2.27", "v2.27.7-1", NET_NAMES_227, 10, 6, TUNER_NAMES_227, 4, 2, 0},
    {"2.28-2.29", "v2.28.9-1", NET_NAMES_227, 11, 6, TUNER_NAMES_227, 5, 2, 1},
    {"2.30", "v2.30.7-1", NET_NAMES_227, 12, 6, TUNER_NAMES_227, 6, 2, 1},
};
const size_t nccl_nprofiles = sizeof nccl_profiles / sizeof nccl_profiles[0];

/* "2.23" -> minor 23; "2.22-2.23" -> 22..23. */
static int minor_of(const char *s) {
  int major = 0, minor = -1;
  return sscanf(s, "%d.%d", &major, &minor) == 2 && major == 2 ? minor : -1;
}

const struct nccl_profile *nccl_profile_find(const char *name) {
  int want = minor_of(name);
  for (size_t i = 0; i < nccl_nprofiles; i++) {
    const char *n = nccl_profiles[i].name, *dash = strchr(n, '-');
    int lo = minor_of(n), hi = dash ? minor_of(dash + 1) : lo;
    if (want >= lo && want <= hi) return &nccl_profiles[i];
  }
  return NULL;
}

static int bare_name(const char *v) {
  size_t n = strlen(v);
  int libso = strncmp(v, "lib", 3) == 0 && n > 3 && strcmp(v + n - 3, ".so") == 0;
  return !strchr(v, '/') && !libso;
}

static int add(char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN], int n, const char *fmt,
               const char *v) {
  if (n >= COMPAT_MAX_NAMES) return n;
  snprintf(names[n], COMPAT_NAME_LEN, fmt, v);
  return n + 1;
}

int compat_net_names(const struct nccl_profile *p, const char *value,
                     char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN]) {
  int n = 0;
  if (p->none_word && value && strcmp(value, "none") == 0) return 0;
  switch (p->net_names) {
    case NET_NAMES_219:
      return add(names, n, value && *value ? "libnccl-net-%s.so" : "libnccl-net.so%s", value && *value ? value : "");
    case NET_NAMES_221:
      if (!value || !*value) return add(names, n, "libnccl-net.so%s", "");
      n = add(names, n, "%s", value);
      return add(names, n, "libnccl-net-%s.so", value);
    case NET_NAMES_227: {
      if (!value) return add(names, n, "libnccl-net.so%s", "");
      char list[COMPAT_NAME_LEN], *save = NULL;
      snprintf(list, sizeof list, "%s", value);
      for (char *v = strtok_r(list, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        n = add(names, n, "%s", v);
        if (bare_name(v)) n = add(names, n, "libnccl-net-%s.so", v);
      }
      return n;
    }
  }
  return n;
}

int compat_tuner_names(const struct nccl_profile *p, const char *value, const char *net_value,
                       char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN], int *use_net_lib) {
  int n = 0, set = value && *value;
  *use_net_lib = 0;
  if (p->none_word && set && strcmp(value, "none") == 0) return 0;
  switch (p->tuner_names) {
    case TUNER_NAMES_219:
      return set ? add(names, n, "%s", value) : 0;
    case TUNER_NAMES_221:
      if (set) {
        n = add(names, n, "%s", value);
        n = add(names, n, "libnccl-tuner-%s.so", value);
      } else {
        n = add(names, n, "libnccl-tuner.so%s", "");
      }
      if (net_value && *net_value) {
        n = add(names, n, "%s", net_value);
        return add(names, n, "libnccl-net-%s.so", net_value);
      }
      return add(names, n, "libnccl-net.so%s", "");
    case TUNER_NAMES_226:
    case TUNER_NAMES_227:
      *use_net_lib = 1;
      if (!set) return add(names, n, "libnccl-tuner.so%s", "");
      n = add(names, n, "%s", value);
      if (p->tuner_names == TUNER_NAMES_226 || bare_name(value))
        n = add(names, n, "libnccl-tuner-%s.so", value);
      return n;
  }
  return n;
}
