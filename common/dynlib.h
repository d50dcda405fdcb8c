/* Optional libraries, opened at run time.
 *
 * NCCL dlopen()s a plugin and, when that fails, silently uses its own transport or tuning: so
 * the plugins' NEEDED list is the C library family alone (test/integration/loads_anywhere_test.sh
 * checks it), and every library braid can do without (libibverbs, libfabric, hwloc, libsodium)
 * is opened by its SONAME when first needed.  Its users resolve each function by name into a
 * pointer typed from the library's own header, keep the library loaded for the process's life
 * (dlclose of such libraries is not safe), and log once what is lost when it is missing. */
#ifndef BRAID_DYNLIB_H
#define BRAID_DYNLIB_H

#include <stdbool.h>
#include <stddef.h>

/* dlopen(RTLD_NOW | RTLD_LOCAL) of the first of sonames[] (NULL-terminated) that loads: local,
 * so its symbols never collide with another copy in the process (a framework's own).  NULL
 * when none does, with "NAME cannot be loaded (dlerror's reason)" in why, NAME the first soname. */
void *braid_dynlib_open(const char *const *sonames, char *why, size_t whylen);

/* dlsym(lib, name).  When it is missing and *missing was false, sets *missing and writes
 * "SONAME lacks NAME (older than braid needs?)" in why: the first missing symbol names the
 * problem. */
void *braid_dynlib_sym(void *lib, const char *soname, const char *name, bool *missing,
                       char *why, size_t whylen);

#endif
