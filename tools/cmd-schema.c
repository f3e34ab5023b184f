/* cmd-schema.c - `lmpipe schema`: the request schema's table
 * (lib/request-schema.h), as JSON or as the Markdown field tables of
 * docs/HTTP.md and docs/NATS.md (tests/schema-docs-test.py checks that the
 * docs hold exactly these). */
#include "lmpipe.h"

#include "json.h"
#include "pipeline.h"
#include "request-schema.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: lmpipe schema [--json | --markdown http|nats|config | --config]\n"
               "The request schema: every field the HTTP and NATS edges read, with its\n"
               "endpoints, type, OpenAI and llama.cpp ranges, default, and what it does (or\n"
               "why it is refused).  --json (the default): the whole table; --markdown: the\n"
               "field tables of docs/HTTP.md or docs/NATS.md.\n"
               "--config: every service's parameter table (the config keys, their flags, types,\n"
               "ranges and defaults) as JSON; --markdown config: as docs/DEPLOY.md lists them.\n");
}

int lp_cmd_schema(int argc, char **argv)
{
    lp_json_buf_t b = {0};
    if (argc == 1 || (argc == 2 && !strcmp(argv[1], "--json"))) {
        lp_rs_write_json(&b);
    } else if (argc == 2 && !strcmp(argv[1], "--config")) {
        size_t n;
        const lp_params_t *const *t = lp_pipeline_tables(&n);
        lp_json_buf_puts(&b, "{\"tables\":[");
        for (size_t i = 0; i < n; i++) {
            if (i) lp_json_buf_puts(&b, ",");
            lp_params_write_json(t[i], &b);
        }
        lp_json_buf_puts(&b, "]}\n");
    } else if (argc == 3 && !strcmp(argv[1], "--markdown") && !strcmp(argv[2], "config")) {
        size_t n;
        const lp_params_t *const *t = lp_pipeline_tables(&n);
        for (size_t i = 0; i < n; i++) lp_params_write_markdown(t[i], &b);
    } else if (argc == 3 && !strcmp(argv[1], "--markdown") &&
               (!strcmp(argv[2], "http") || !strcmp(argv[2], "nats"))) {
        lp_rs_write_markdown(&b, !strcmp(argv[2], "http") ? LP_RS_HTTP : LP_RS_NATS);
    } else if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    } else {
        usage(stderr);
        return 2;
    }
    if (b.oom) {
        fprintf(stderr, "lmpipe schema: out of memory\n");
        return 1;
    }
    fwrite(b.p, 1, b.n, stdout);
    lp_json_buf_free(&b);
    return fflush(stdout) ? 1 : 0;
}
