/* cmd-sampler.c - `lmpipe sampler`: live swap of a running sampler-svc's
 * default strategy (docs/SAMPLER.md). */
#include "lmpipe.h"

#include "error.h"
#include "json.h"
#include "sampler-ctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE                                                                          \
    "usage: lmpipe sampler --endpoint EP [--curve-key F.key --server-key KEY] COMMAND\n" \
    "  get                      print the current strategy\n"                          \
    "  set JSON                 lay /completion sampling fields over the default\n"    \
    "  load PATH [CONFIG]       load a sampler plugin (first in the chain) from\n"     \
    "                           sampler-svc's --plugin-dir (PATH relative to it)\n"    \
    "  unload NAME              unload a plugin\n"                                     \
    "  rollback                 go back to the strategy before the last change\n"      \
    "  EP is sampler-svc's endpoint (ipc://RUN_DIR/sampler.sock under lmpipe up), or\n" \
    "  the coordinator's, which passes the command to every engine group's sampler.\n" \
    "  Over tcp:// the key must be in the service's curve.admin (docs/SECURITY.md)."

/* Append s as a JSON string to the message being built. */
static int quoted(char *buf, size_t cap, size_t *n, const char *s)
{
    size_t need = lp_json_quote(buf + *n, cap - *n, s, strlen(s));
    if (*n + need >= cap) return -1;
    *n += need;
    return 0;
}

int lp_cmd_sampler(int argc, char **argv)
{
    const char *endpoint = NULL, *key = NULL, *server_key = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts(USAGE);
            return 0;
        }
        if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
        else if (!strcmp(argv[i], "--curve-key") && i + 1 < argc) key = argv[++i];
        else if (!strcmp(argv[i], "--server-key") && i + 1 < argc) server_key = argv[++i];
        else break;
    }
    if (!endpoint || i >= argc) return lp_cmd_usage_error("sampler", "%s", USAGE);
    const char *op = argv[i++];
    int rest = argc - i;
    size_t cap = 65536, n = 0;
    char *msg = malloc(cap);
    if (!msg) return 1;
    int bad = 0;
    if (!strcmp(op, "get") && rest == 0) {
        n = (size_t)snprintf(msg, cap, "{\"op\":\"get\"}");
    } else if (!strcmp(op, "rollback") && rest == 0) {
        n = (size_t)snprintf(msg, cap, "{\"op\":\"rollback\"}");
    } else if (!strcmp(op, "set") && rest == 1) {
        /* the JSON goes in as it is: the service parses and checks it */
        int k = snprintf(msg, cap, "{\"op\":\"set\",\"params\":%s}", argv[i]);
        bad = k < 0 || (size_t)k >= cap;
        n = bad ? 0 : (size_t)k;
    } else if (!strcmp(op, "load") && (rest == 1 || rest == 2)) {
        n = (size_t)snprintf(msg, cap, "{\"op\":\"load\",\"path\":");
        bad |= quoted(msg, cap, &n, argv[i]);
        if (rest == 2) {
            n += (size_t)snprintf(msg + n, cap - n, ",\"config\":");
            bad |= quoted(msg, cap, &n, argv[i + 1]);
        }
        n += (size_t)snprintf(msg + n, cap - n, "}");
    } else if (!strcmp(op, "unload") && rest == 1) {
        n = (size_t)snprintf(msg, cap, "{\"op\":\"unload\",\"name\":");
        bad |= quoted(msg, cap, &n, argv[i]);
        n += (size_t)snprintf(msg + n, cap - n, "}");
    } else {
        free(msg);
        return lp_cmd_usage_error("sampler", "bad command '%s' or arguments\n%s", op, USAGE);
    }
    if (bad || n >= cap) {
        free(msg);
        return lp_cmd_usage_error("sampler", "arguments too long");
    }
    bool ok;
    uint64_t version;
    char *reply;
    int rc = lp_sampler_ctl_curve(endpoint, key, server_key, msg, 10000, &ok, &version, &reply);
    free(msg);
    if (rc) {
        fprintf(stderr, "lmpipe sampler: %s\n", lp_error_msg());
        return 1;
    }
    if (ok) puts(reply);
    else fprintf(stderr, "lmpipe sampler: %s (strategy version %llu unchanged)\n", reply,
                 (unsigned long long)version);
    free(reply);
    return ok ? 0 : 1;
}
