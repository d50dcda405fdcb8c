/* netload: finding and opening the plugin library, by NCCL's rules (plugin_open.cc, net.cc). */
#include "netload.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NETLOAD_PREFIX "libnccl-net"

/* Appends "what: why" (or just why, which dlerror() already prefixes with the name) to err. */
static void open_note(char *err, size_t errlen, const char *what, const char *why) {
  if (!err || !errlen) return;
  size_t used = strlen(err);
  if (used + 1 >= errlen) return;
  snprintf(err + used, errlen - used, "%s%s%s%s", used ? "; " : "", what ? what : "",
           what ? ": " : "", why ? why : "?");
}

/* "lib*.so" names are only ever tried as given. */
static int open_is_libso(const char *n) {
  size_t len = strlen(n);
  return len >= 6 && strncmp(n, "lib", 3) == 0 && strcmp(n + len - 3, ".so") == 0;
}

static int open_is_static(const char *n) {
  size_t len = strlen(n);
  return len > 0 && len <= strlen("STATIC_PLUGIN") && strncasecmp(n, "STATIC_PLUGIN", len) == 0;
}

/* dlopen()s one list entry: as given, then libnccl-net-<name>.so. */
static void *open_one(const char *name, char *used, size_t usedlen, char *err, size_t errlen) {
  void *h;
  if (open_is_static(name)) {
    snprintf(used, usedlen, "(main program)");
    if ((h = dlopen(NULL, RTLD_NOW | RTLD_LOCAL))) return h;
    open_note(err, errlen, NULL, dlerror());
    return NULL;
  }
  snprintf(used, usedlen, "%s", name);
  if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) return h;
  open_note(err, errlen, NULL, dlerror());
  if (strchr(name, '/') || open_is_libso(name)) return NULL;
  snprintf(used, usedlen, "%s-%s.so", NETLOAD_PREFIX, name);
  if ((h = dlopen(used, RTLD_NOW | RTLD_LOCAL))) return h;
  open_note(err, errlen, NULL, dlerror());
  return NULL;
}

/* Newest ncclNetPlugin_vN (N <= maxv) exported by the library, or 0. */
static int open_find_symbol(struct netload *nl, int maxv) {
  for (int v = maxv; v >= NETLOAD_MIN_VERSION; v--) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", v);
    const void *t = dlsym(nl->lib, sym);
    if (t) {
      nl->net.any = t;
      nl->version = v;
      nl->name = *(const char *const *)t; /* `name` is the first member of every version */
      return v;
    }
  }
  return 0;
}

ncclResult_t netload_open(struct netload *nl, const char *name, int max_version, char *err,
                          size_t errlen) {
  memset(nl, 0, sizeof *nl);
  if (err && errlen) err[0] = '\0';
  if (max_version <= 0 || max_version > NETLOAD_MAX_VERSION) max_version = NETLOAD_MAX_VERSION;
  if (!name || !*name) name = NETLOAD_PREFIX ".so";
  if (strcasecmp(name, "none") == 0) {
    open_note(err, errlen, name, "external net plugins disabled");
    return ncclInvalidUsage;
  }
  char *list = strdup(name);
  if (!list) return ncclSystemError;
  char *save = NULL;
  for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    nl->lib = open_one(tok, nl->path, sizeof nl->path, err, errlen);
    if (!nl->lib) continue;
    if (open_find_symbol(nl, max_version)) break;
    open_note(err, errlen, nl->path, "no ncclNetPlugin_v7..v12 symbol (unsupported plugin)");
    dlclose(nl->lib);
    nl->lib = NULL;
  }
  free(list);
  return nl->lib ? ncclSuccess : ncclInvalidUsage;
}

void netload_close(struct netload *nl) {
  if (nl->lib) dlclose(nl->lib);
  nl->lib = NULL;
  nl->net.any = NULL;
  nl->version = 0;
}

const char *netload_result_str(ncclResult_t r) {
  static const char *const names[] = {
      "ncclSuccess",        "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
      "ncclInvalidArgument", "ncclInvalidUsage",      "ncclRemoteError", "ncclInProgress"};
  if ((int)r >= 0 && (int)r < (int)(sizeof names / sizeof names[0])) return names[r];
  return "ncclResult(unknown)";
}
