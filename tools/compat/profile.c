/* NCCL's plugin loaders, version by version (see profile.h). */
#include "profile.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const struct nccl_profile nccl_profiles[] = {
    {"2.19", "v2.19.4-1", NET_NAMES_219, 7, 5, TUNER_NAMES_219, 1, 1, 0},
    {"2.20", "v2.20.5-1", NET_NAMES_219, 8, 5, TUNER_NAMES_219, 1, 1, 0},
    {"2.21", "v2.21.5-1", NET_NAMES_221, 8, 5, TUNER_NAMES_221, 2, 2, 0},
    {"2.22-2.23", "v2.23.4-1", NET_NAMES_221, 8, 5, TUNER_NAMES_221, 3, 2, 0},
    {"2.24-2.25", "v2.24.3-1", NET_NAMES_221, 9, 5, TUNER_NAMES_221, 4, 2, 0},
    {"2.26", "v2.26.6-1", NET_NAMES_221, 10, 6, TUNER_NAMES_226, 4, 2, 0},
    {"2.27.3", "v2.27.3-1", NET_NAMES_2273, 10, 6, TUNER_NAMES_2273, 4, 2, 0},
    {"2.27.5-2.27.7", "v2.27.7-1", NET_NAMES_227, 10, 6, TUNER_NAMES_227, 4, 2, 0},
    {"2.28-2.29", "v2.28.9-1", NET_NAMES_227, 11, 6, TUNER_NAMES_227, 5, 2, 1},
    {"2.30", "v2.30.7-1", NET_NAMES_227, 12, 6, TUNER_NAMES_227, 6, 2, 1},
};
const size_t nccl_nprofiles = sizeof nccl_profiles / sizeof nccl_profiles[0];

/* "2.23" -> 2300, "2.27.3" -> 2703; a bare minor means its first release (patch 0) or, as a
 * wanted version, its last (patch 99). -1 when it is not 2.x. */
static int version_of(const char *s, int bare_patch) {
  int major = 0, minor = -1, patch = -1;
  int n = sscanf(s, "%d.%d.%d", &major, &minor, &patch);
  if (n < 2 || major != 2 || minor < 0) return -1;
  return minor * 100 + (n == 3 && patch >= 0 ? patch : bare_patch);
}

const struct nccl_profile *nccl_profile_find(const char *name) {
  int want = version_of(name, 99);
  for (size_t i = 0; i < nccl_nprofiles; i++) {
    const char *n = nccl_profiles[i].name, *dash = strchr(n, '-');
    int lo = version_of(n, 0), hi = dash ? version_of(dash + 1, 99) : version_of(n, 99);
    if (want >= 0 && want >= lo && want <= hi) return &nccl_profiles[i];
  }
  return NULL;
}

static int lib_so(const char *v) {
  size_t n = strlen(v);
  return n >= 7 && strncmp(v, "lib", 3) == 0 && strcmp(v + n - 3, ".so") == 0;
}

static int bare_name(const char *v) {
  size_t n = strlen(v);
  int libso = strncmp(v, "lib", 3) == 0 && n >= 3 && strcmp(v + n - 3, ".so") == 0;
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
  if (p->none_word && value && strcasecmp(value, "none") == 0) return 0;
  switch (p->net_names) {
    case NET_NAMES_219:
      return value && *value ? add(names, n, "libnccl-net-%s.so", value) : add(names, n, "%s", "libnccl-net.so");
    case NET_NAMES_221:
      if (!value || !*value) return add(names, n, "%s", "libnccl-net.so");
      n = add(names, n, "%s", value);
      return add(names, n, "libnccl-net-%s.so", value);
    case NET_NAMES_2273:
    case NET_NAMES_227: {
      if (!value) return add(names, n, "%s", "libnccl-net.so");
      char list[COMPAT_NAME_LEN], *save = NULL;
      snprintf(list, sizeof list, "%s", value);
      for (char *v = strtok_r(list, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        if (p->net_names == NET_NAMES_2273) {
          n = add(names, n, lib_so(v) ? "%s" : "libnccl-net-%s.so", v);
          continue;
        }
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
  if (p->none_word && set && strcasecmp(value, "none") == 0) return 0;
  switch (p->tuner_names) {
    case TUNER_NAMES_219:
      return set ? add(names, n, "%s", value) : 0;
    case TUNER_NAMES_221:
      if (set) {
        n = add(names, n, "%s", value);
        n = add(names, n, "libnccl-tuner-%s.so", value);
      } else {
        n = add(names, n, "%s", "libnccl-tuner.so");
      }
      if (net_value && *net_value) {
        n = add(names, n, "%s", net_value);
        return add(names, n, "libnccl-net-%s.so", net_value);
      }
      return add(names, n, "%s", "libnccl-net.so");
    case TUNER_NAMES_2273:
      *use_net_lib = 1;
      if (!set) return add(names, n, "%s", "libnccl-tuner.so");
      return add(names, n, lib_so(value) ? "%s" : "libnccl-tuner-%s.so", value);
    case TUNER_NAMES_226:
    case TUNER_NAMES_227:
      *use_net_lib = 1;
      if (!set) return add(names, n, "%s", "libnccl-tuner.so");
      n = add(names, n, "%s", value);
      if (p->tuner_names == TUNER_NAMES_226 || bare_name(value))
        n = add(names, n, "libnccl-tuner-%s.so", value);
      return n;
  }
  return n;
}
