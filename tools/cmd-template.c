/* cmd-template.c - `lmpipe template --template FILE --context FILE.json`:
 * render a chat template as transformers' apply_chat_template does (the
 * contract of ../shared/tools/render_template.py): the text on stdout,
 * nothing added, exit 0; or the template's error on stderr, exit 1.
 * --tool-args auto gives the template tool-call arguments (and reasoning) as
 * it expects them (chat-args.h), as the server does; objects gives them as
 * objects whatever the template; the default passes the context as it is. */
#include "lmpipe.h"

#include "chat-args.h"
#include "error.h"
#include "fileio.h"
#include "jinja.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "usage: lmpipe template --template FILE.jinja --context FILE.json [--tool-args as-is|auto|objects]"

int lp_cmd_template(int argc, char **argv)
{
    const char *tpath = NULL, *cpath = NULL, *args_mode = "as-is";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--template") && i + 1 < argc) tpath = argv[++i];
        else if (!strncmp(argv[i], "--template=", 11)) tpath = argv[i] + 11;
        else if (!strcmp(argv[i], "--context") && i + 1 < argc) cpath = argv[++i];
        else if (!strncmp(argv[i], "--context=", 10)) cpath = argv[i] + 10;
        else if (!strcmp(argv[i], "--tool-args") && i + 1 < argc) args_mode = argv[++i];
        else if (!strncmp(argv[i], "--tool-args=", 12)) args_mode = argv[i] + 12;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("%s\n", USAGE);
            return 0;
        } else
            return lp_cmd_usage_error("template", "unknown argument '%s'\n%s", argv[i], USAGE);
    }
    if (!tpath || !cpath) return lp_cmd_usage_error("template", "--template and --context are required\n%s", USAGE);
    if (strcmp(args_mode, "as-is") && strcmp(args_mode, "auto") && strcmp(args_mode, "objects"))
        return lp_cmd_usage_error("template", "--tool-args: '%s' is not as-is, auto or objects", args_mode);
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
    if (!rc && strcmp(args_mode, "as-is")) {
        lp_chat_template_caps_t caps = {.object_args = true};
        if (!strcmp(args_mode, "auto")) lp_chat_template_caps(t, src, src_len, &caps);
        lp_json_buf_t b = {0};
        lp_chat_prepare_messages(lp_json_root(doc), &caps, &b);
        lp_json_doc_destroy(&doc);
        rc = b.oom ? lp_error_set(LP_ERR(ENOMEM), "out of memory") : lp_json_parse(b.p, b.n, &doc);
        free(b.p);
    }
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
