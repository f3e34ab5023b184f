/* fileio.h - read a whole file or stream into memory. */
#ifndef LP_FILEIO_H
#define LP_FILEIO_H

#include <stddef.h>
#include <stdio.h>

/* Read `f` to its end into *out (malloc'd, NUL-terminated; caller frees).
 * `what` names the input in messages ("stdin", a path). */
int lp_read_stream(FILE *f, const char *what, char **out, size_t *len);

/* The same for the file at `path`; a missing or unreadable file is an error
 * that names the path. */
int lp_read_file(const char *path, char **out, size_t *len);

#endif
