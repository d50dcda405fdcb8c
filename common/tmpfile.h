/* Files written whole: a unique temporary next to the target, then rename() (issue 19 item 13).
 * The temporary is created with O_EXCL under an unpredictable name, so a link planted there is
 * never followed; rename() replaces a link at the target instead of writing through it. */
#ifndef BRAID_TMPFILE_H
#define BRAID_TMPFILE_H

#include <stddef.h>
#include <stdio.h>

/* Creates "<path>.tmp.XXXXXX" (mode 0644), its name into tmp; NULL with errno on failure. */
FILE *braid_tmpfile_open(const char *path, char *tmp, size_t tmplen);

/* Flushes, syncs and closes f, then renames tmp to path; bad != 0 (the caller's write failed)
 * only discards.  On any failure tmp is removed; -1 with errno (EIO when bad). */
int braid_tmpfile_commit(FILE *f, const char *tmp, const char *path, int bad);

/* Opens path for writing (created 0644 or truncated; O_APPEND when append), never through a
 * symbolic link at path (ELOOP); a descriptor or -1 with errno. */
int braid_file_create(const char *path, int append);

#endif
