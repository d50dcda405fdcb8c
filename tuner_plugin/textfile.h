/* Reading the tuner's small text inputs (rules, calibration, health) whole. */
#ifndef BRAID_TUNER_TEXTFILE_H
#define BRAID_TUNER_TEXTFILE_H

#include <stddef.h>
#include <stdint.h>

/* Reads a whole file of at most max bytes into a NUL-terminated buffer. Returns it (free() it)
 * with *len set, or NULL with errno set: ENOENT for a missing file, EFBIG when it is larger
 * than max, ENOMEM, or what open/read said. */
char *braid_read_small_file(const char *path, size_t max, size_t *len);

/* Splits one line in place into blank-separated (space, tab, CR) words, '#' to the end of the
 * line being a comment; the words are NUL-terminated in place. Returns the word count, or
 * max + 1 when there are more than max words. */
int braid_split_words(char *line, char **w, int max);

/* A whole word as a finite double / an unsigned decimal integer: 0, or -1 when it is not one
 * (trailing characters, overflow, empty). */
int braid_parse_double(const char *s, double *out);
int braid_parse_u64(const char *s, uint64_t *out);

#endif
