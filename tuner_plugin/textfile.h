/* Reading the tuner's small text inputs (rules, calibration, health) whole. */
#ifndef BRAID_TUNER_TEXTFILE_H
#define BRAID_TUNER_TEXTFILE_H

#include <stddef.h>

/* Reads a whole file of at most max bytes into a NUL-terminated buffer. Returns it (free() it)
 * with *len set, or NULL with errno set: ENOENT for a missing file, EFBIG when it is larger
 * than max, ENOMEM, or what open/read said. */
char *braid_read_small_file(const char *path, size_t max, size_t *len);

#endif
