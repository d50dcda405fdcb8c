/* Optional libraries, opened at run time (see dynlib.h). */
#include "dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *braid_dynlib_open(const char *const *sonames, char *why, size_t whylen) {
  char first[192] = "";
  for (int i = 0; sonames[i]; i++) {
    void *lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    const char *e = dlerror();
    if (i > 0) continue;
    if (!e) e = "unknown error";
    size_t n = strlen(sonames[0]); /* dlerror says "NAME: why" */
    if (!strncmp(e, sonames[0], n) && e[n] == ':' && e[n + 1] == ' ') e += n + 2;
    snprintf(first, sizeof first, "%s", e);
  }
  snprintf(why, whylen, "%s cannot be loaded (%s)", sonames[0], first);
  return NULL;
}

void *braid_dynlib_sym(void *lib, const char *soname, const char *name, bool *missing,
                       char *why, size_t whylen) {
  void *p = dlsym(lib, name);
  if (!p && !*missing) {
    *missing = true;
    snprintf(why, whylen, "%s lacks %s (older than braid needs?)", soname, name);
  }
  if (!p) (void)dlerror(); /* leave no error behind for others' dlerror() */
  return p;
}
