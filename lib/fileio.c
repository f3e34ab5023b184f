/* fileio.c - read a whole file or stream into memory. */
#include "fileio.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

int lp_read_stream(FILE *f, const char *what, char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0;
    *out = NULL;
    *len = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                return lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", what);
            }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return lp_error_set(LP_ERR(EIO), "%s: read error", what);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int lp_read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *out = NULL;
        *len = 0;
        return lp_error_set(LP_ERR(errno), "%s: %s", path, strerror(errno));
    }
    int rc = lp_read_stream(f, path, out, len);
    fclose(f);
    return rc;
}
