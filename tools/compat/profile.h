/* How each NCCL version finds its net and tuner plugins: the file names it dlopen()s, in order,
 * and the table symbols it looks up, newest first.  Read from NCCL's own source at each tag
 * (src/net.cc, src/misc/tuner.cc up to 2.25; src/plugin/net.cc, src/plugin/tuner.cc and
 * src/plugin/plugin_open.cc from 2.26), so that braid-nccl-compat can say, per version, which
 * NCCL_NET_PLUGIN and NCCL_TUNER_PLUGIN values load braid and through which ABI. */
#ifndef BRAID_COMPAT_PROFILE_H
#define BRAID_COMPAT_PROFILE_H

#include <stddef.h>

enum net_names {
  NET_NAMES_219, /* set: only "libnccl-net-<v>.so"; unset: "libnccl-net.so" (2.19, 2.20) */
  NET_NAMES_221, /* set: <v> verbatim, then "libnccl-net-<v>.so"; unset or empty: "libnccl-net.so" */
  NET_NAMES_2273, /* 2.27.3: a comma list; each "lib*.so" as given, anything else (a path too)
                     only as "libnccl-net-<v>.so"; unset: "libnccl-net.so"; empty: none */
  NET_NAMES_227, /* a comma list; each <v> verbatim, then "libnccl-net-<v>.so" only for a bare
                    name (no '/', not "lib*.so"); unset: "libnccl-net.so"; empty: none (2.27.5 on) */
};

enum tuner_names {
  TUNER_NAMES_219, /* set: <v> verbatim only; unset: no tuner (2.19, 2.20) */
  TUNER_NAMES_221, /* <v> verbatim, "libnccl-tuner-<v>.so" (unset: "libnccl-tuner.so"), then
                      NCCL_NET_PLUGIN verbatim and "libnccl-net-<n>.so" (unset: "libnccl-net.so");
                      the first library that opens is the one (2.21 to 2.25) */
  TUNER_NAMES_226, /* <v> verbatim, "libnccl-tuner-<v>.so" (unset: "libnccl-tuner.so"), then the
                      net plugin's own library (2.26) */
  TUNER_NAMES_2273, /* 2.27.3: "lib*.so" as given, anything else only as "libnccl-tuner-<v>.so";
                       unset: "libnccl-tuner.so"; then the net plugin's library */
  TUNER_NAMES_227, /* as 2.26, "libnccl-tuner-<v>.so" only for a bare name (2.27.5 on) */
};

struct nccl_profile {
  const char *name;     /* "2.19", "2.22-2.23" or "2.27.5-2.27.7" */
  const char *tag;      /* the tag whose source this follows */
  enum net_names net_names;
  int net_max, net_min; /* ncclNetPlugin_v<max> .. v<min>, and the same for ncclCollNetPlugin */
  enum tuner_names tuner_names;
  int tuner_max, tuner_min;
  int none_word;        /* "none" switches the plugin off (2.28 on) */
};

extern const struct nccl_profile nccl_profiles[];
extern const size_t nccl_nprofiles;

/* The profile for a version ("2.21", "2.23", "2.27.3"; a bare "2.27" is 2.27.5 and later), or
 * NULL. */
const struct nccl_profile *nccl_profile_find(const char *name);

#define COMPAT_MAX_NAMES 16
#define COMPAT_NAME_LEN 1024

/* The file names NCCL tries for the net plugin given NCCL_NET_PLUGIN = value (NULL: unset). */
int compat_net_names(const struct nccl_profile *p, const char *value,
                     char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN]);
/* The file names NCCL tries for the tuner before any fallback to the net plugin's library;
 * *use_net_lib: whether the net plugin's library comes next (2.26 on). */
int compat_tuner_names(const struct nccl_profile *p, const char *value, const char *net_value,
                       char names[COMPAT_MAX_NAMES][COMPAT_NAME_LEN], int *use_net_lib);

#endif
