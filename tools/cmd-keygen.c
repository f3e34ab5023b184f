/* cmd-keygen.c - `lmpipe keygen -o BASE`: a CURVE key pair for one host
 * (docs/SECURITY.md). */
#include "lmpipe.h"

#include "curve.h"
#include "error.h"

#include <stdio.h>
#include <string.h>

#define USAGE                                                                        \
    "usage: lmpipe keygen -o BASE\n"                                                 \
    "  writes BASE.key (mode 0600: public and secret key) and BASE.pub (mode 0644:\n" \
    "  the public key to put in other hosts' curve.allow / server_key)"

int lp_cmd_keygen(int argc, char **argv)
{
    const char *base = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts(USAGE);
            return 0;
        }
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) base = argv[++i];
        else return lp_cmd_usage_error("keygen", "unknown or incomplete option '%s'\n%s", argv[i], USAGE);
    }
    if (!base) return lp_cmd_usage_error("keygen", "-o BASE is required\n%s", USAGE);
    if (lp_curve_keygen(base)) {
        fprintf(stderr, "lmpipe keygen: %s\n", lp_error_msg());
        return 1;
    }
    char pub[LP_CURVE_KEY_LEN + 1];
    char path[4096];
    snprintf(path, sizeof(path), "%s.pub", base);
    if (lp_curve_key_parse(path, pub)) {
        fprintf(stderr, "lmpipe keygen: %s\n", lp_error_msg());
        return 1;
    }
    printf("%s\n", pub);
    return 0;
}
