/* cmd-template.c - `lmpipe template --template FILE --context FILE.json`:
 * render a chat template as transformers' apply_chat_template does (the
 * contract of ../shared/tools/render_template.py): the text on stdout,
 * nothing added, exit 0; or the template's error on stderr, exit 1. */
#include "lmpipe.h"

#include "error.h"
#include "fileio.h"
#include "jinja.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "usage: lmpipe template --template FILE.jinja --context FILE.json"

int lp_cmd_template(int argc, char **argv)
{
    const char *tpath = NULL, *cpath = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--template") && i + 1 < argc) tpath = argv[++i];
        else if (!strncmp(argv[i], "--template=", 11)) tpath = argv[i] + 11;
        else if (!strcmp(argv[i], "--context") && i + 1 < argc) cpath = argv[++i];
        else if (!strncmp(argv[i], "--context=", 10)) cpath = argv[i] + 10;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n", USAGE);
            return 0;
        } else
            return lp_cmd_usage_error("template", "unknown argument '%s'\n%s", argv[i], USAGE);
    }
    if (!tpath || !cpath) return lp_cmd_usage_error("template", "--template and --context are required\n%s", USAGE);
    char *src = NULL, *ctx_text = NULL, *out = NULL;
    size_t src_len = 0, ctx_len = 0, out_len = 0;
    lp_json_doc_t *doc = NULL;
    lp_jinja_tmpl_t *t = NULL;
    int rc = lp_read_file(tpath, &src, &src_len);
    if (!rc) rc = lp_read_file(cpath, &ctx_text, &ctx_len);
    if (!rc) rc = lp_json_parse(ctx_text, ctx_len, &doc);
    if (!rc && lp_json_root(doc)->type != LP_JSON_OBJECT)
        rc = lp_error_set(LP_ERR(EINVAL), "the context must be a JSON object");
    if (!rc) rc = lp_jinja_parse(src, src_len, &t);
    if (!rc) rc = lp_jinja_chat_render(t, src, src_len, lp_json_root(doc), NULL, &out, &out_len);
    if (rc) {
        fprintf(stderr, "%s\n", lp_error_msg());
    } else if (out_len && fwrite(out, 1, out_len, stdout) != out_len) {
        fprintf(stderr, "lmpipe template: cannot write the output\n");
        rc = -1;
    }
    fflush(stdout);
    free(out);
    lp_jinja_tmpl_destroy(&t);
    lp_json_doc_destroy(&doc);
    free(ctx_text);
    free(src);
    return rc ? 1 : 0;
}
