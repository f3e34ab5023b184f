/* cmd-tool-calls.c - `lmpipe tool-calls`: what the server makes of tool
 * calls and reasoning for a chat template, from the command line.
 *
 *   format  --template F                the detected format and what the template wants
 *   parse   (--template F | --format N) [--prompt F] [--tools F] [--reasoning-format R] [--chunk N]
 *           model output on stdin -> the assistant message (JSON); with --chunk, first the
 *           deltas of feeding N bytes at a time, one JSON object a line
 *   grammar (--template F | --format N) --tools F [--tool-choice JSON] [--no-parallel]
 *           [--prompt F] [--no-reasoning]   the grammar that forces calls (JSON); reasoning
 *           may come first where the template writes the format's reasoning markers
 *
 * --tools takes a JSON array of tools, or an object with "tools" (a render
 * context).  lib/chat/ does the work; docs/TEMPLATES.md describes it. */
#include "lmpipe.h"

#include "chat-args.h"
#include "chat-format.h"
#include "chat-grammar.h"
#include "chat-parse.h"
#include "error.h"
#include "fileio.h"
#include "jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE                                                                                                   \
    "usage: lmpipe tool-calls format --template F\n"                                                           \
    "       lmpipe tool-calls parse (--template F | --format NAME) [--prompt F] [--tools F]\n"                   \
    "                               [--reasoning-format auto|none|deepseek] [--chunk N]  < output\n"            \
    "       lmpipe tool-calls grammar (--template F | --format NAME) --tools F [--tool-choice JSON]\n"           \
    "                               [--no-parallel] [--prompt F] [--no-reasoning]"

typedef struct {
    const char *template, *format, *prompt, *tools, *rf, *choice;
    size_t chunk;
    bool parallel, reasoning;
} args_t;

static char *read_stdin(size_t *n)
{
    lp_json_buf_t b = {0};
    char tmp[65536];
    size_t k;
    while ((k = fread(tmp, 1, sizeof(tmp), stdin)) > 0) lp_json_buf_put(&b, tmp, k);
    *n = b.n;
    if (!b.p) b.p = calloc(1, 1);
    return b.p;
}

static int get_format(const args_t *a, lp_chat_format_t *f, char **src, size_t *src_len)
{
    if (a->template) {
        int rc = lp_read_file(a->template, src, src_len);
        if (rc) return rc;
        *f = lp_chat_format_detect(*src, *src_len);
    }
    if (a->format) return lp_chat_format_by_name(a->format, f);
    if (!a->template) return lp_error_set(LP_ERR(EINVAL), "--template or --format is required");
    return 0;
}

/* the tools array of a file holding one, or a context with "tools" */
static const lp_json_t *tools_of(lp_json_doc_t *doc)
{
    const lp_json_t *r = lp_json_root(doc);
    if (r->type == LP_JSON_OBJECT) r = lp_json_get(r, "tools");
    return r && r->type == LP_JSON_ARRAY ? r : NULL;
}

static void print_buf(lp_json_buf_t *b)
{
    if (b->p) fwrite(b->p, 1, b->n, stdout);
    fputc('\n', stdout);
    free(b->p);
    *b = (lp_json_buf_t){0};
}

static void print_deltas(const lp_chat_parser_t *p)
{
    for (size_t i = 0; i < lp_chat_parser_n_deltas(p); i++) {
        lp_chat_delta_t d;
        lp_chat_parser_delta(p, i, &d);
        lp_json_buf_t b = {0};
        lp_chat_delta_write_json(&d, &b);
        print_buf(&b);
    }
}

static int cmd_format(const args_t *a)
{
    char *src = NULL;
    size_t n = 0;
    lp_chat_format_t f;
    lp_jinja_tmpl_t *t = NULL;
    int rc = get_format(a, &f, &src, &n);
    if (!rc && !src) rc = lp_error_set(LP_ERR(EINVAL), "--template is required");
    if (!rc) rc = lp_jinja_parse(src, n, &t);
    if (!rc) {
        lp_chat_template_caps_t caps;
        lp_chat_template_caps(t, src, n, &caps);
        printf("{\"format\": \"%s\", \"object_args\": %s, \"thinking_field\": %s}\n", lp_chat_format_info(f)->name,
               caps.object_args ? "true" : "false", caps.thinking_field ? "true" : "false");
    }
    lp_jinja_tmpl_destroy(&t);
    free(src);
    return rc;
}

static int cmd_parse(const args_t *a)
{
    char *src = NULL, *prompt = NULL, *tools_text = NULL, *out = NULL;
    size_t n = 0, prompt_len = 0, tools_len = 0, out_len = 0;
    lp_json_doc_t *tools = NULL;
    lp_chat_parser_t *p = NULL;
    lp_chat_format_t f = LP_CHAT_FORMAT_NONE;
    lp_chat_reasoning_format_t rf = LP_CHAT_REASONING_AUTO;
    int rc = get_format(a, &f, &src, &n);
    if (!rc && a->rf) rc = lp_chat_reasoning_format_by_name(a->rf, &rf);
    if (!rc && a->prompt) rc = lp_read_file(a->prompt, &prompt, &prompt_len);
    if (!rc && a->tools) rc = lp_read_file(a->tools, &tools_text, &tools_len);
    if (!rc && a->tools) rc = lp_json_parse(tools_text, tools_len, &tools);
    if (!rc) {
        lp_chat_parser_opts_t o = {.format = f, .reasoning = rf, .prompt = prompt, .prompt_len = prompt_len,
                                   .tools = tools ? tools_of(tools) : NULL};
        rc = lp_chat_parser_new(&o, &p);
    }
    if (!rc) out = read_stdin(&out_len);
    size_t step = a->chunk ? a->chunk : out_len;
    for (size_t i = 0; !rc && i < out_len; i += step) {
        rc = lp_chat_parser_feed(p, out + i, out_len - i < step ? out_len - i : step);
        if (a->chunk) print_deltas(p);
    }
    if (!rc) rc = lp_chat_parser_finish(p);
    if (!rc) {
        if (a->chunk) print_deltas(p);
        lp_chat_msg_t m;
        lp_chat_parser_msg(p, &m);
        lp_json_buf_t b = {0};
        lp_chat_msg_write_json(&m, &b);
        print_buf(&b);
    }
    lp_chat_parser_destroy(&p);
    lp_json_doc_destroy(&tools);
    free(out);
    free(tools_text);
    free(prompt);
    free(src);
    return rc;
}

static void put_str_member(lp_json_buf_t *b, const char *key, const char *v)
{
    lp_json_buf_puts(b, ", \"");
    lp_json_buf_puts(b, key);
    lp_json_buf_puts(b, "\": ");
    lp_json_buf_str(b, v, strlen(v));
}

static int cmd_grammar(const args_t *a)
{
    char *src = NULL, *prompt = NULL, *tools_text = NULL;
    size_t n = 0, prompt_len = 0, tools_len = 0;
    lp_json_doc_t *tools = NULL, *choice = NULL;
    lp_chat_grammar_t *g = NULL;
    lp_chat_format_t f = LP_CHAT_FORMAT_NONE;
    int rc = get_format(a, &f, &src, &n);
    if (!rc && !a->tools) rc = lp_error_set(LP_ERR(EINVAL), "--tools is required");
    if (!rc && a->prompt) rc = lp_read_file(a->prompt, &prompt, &prompt_len);
    if (!rc) rc = lp_read_file(a->tools, &tools_text, &tools_len);
    if (!rc) rc = lp_json_parse(tools_text, tools_len, &tools);
    if (!rc && a->choice) rc = lp_json_parse(a->choice, strlen(a->choice), &choice);
    if (!rc) {
        lp_chat_grammar_opts_t o = {.format = f, .tools = tools_of(tools),
                                    .tool_choice = choice ? lp_json_root(choice) : NULL,
                                    .parallel_tool_calls = a->parallel,
                                    .starts_in_reasoning = lp_chat_prompt_opens_reasoning(f, prompt, prompt_len),
                                    .allow_reasoning = a->reasoning && src && lp_chat_format_info(f)->reasoning_open &&
                                                       strstr(src, lp_chat_format_info(f)->reasoning_open)};
        rc = lp_chat_grammar_build(&o, &g);
    }
    if (!rc) {
        lp_json_buf_t b = {0};
        lp_json_buf_puts(&b, "{\"format\": ");
        const char *fname = lp_chat_format_info(f)->name;
        lp_json_buf_str(&b, fname, strlen(fname));
        if (!g) lp_json_buf_puts(&b, ", \"grammar\": null}");
        else {
            lp_json_buf_puts(&b, g->lazy ? ", \"lazy\": true" : ", \"lazy\": false");
            put_str_member(&b, "trigger", g->trigger);
            put_str_member(&b, "prefix", g->prefix);
            put_str_member(&b, "separator", g->separator);
            put_str_member(&b, "suffix", g->suffix);
            char tmp[64];
            snprintf(tmp, sizeof(tmp), ", \"max_calls\": %zu, \"functions\": [", g->max_calls);
            lp_json_buf_puts(&b, tmp);
            for (size_t i = 0; i < g->n_fns; i++) {
                lp_json_buf_puts(&b, i ? ", {\"name\": " : "{\"name\": ");
                lp_json_buf_str(&b, g->fns[i].name, strlen(g->fns[i].name));
                put_str_member(&b, "begin", g->fns[i].begin);
                put_str_member(&b, "end", g->fns[i].end);
                lp_json_buf_puts(&b, ", \"schema\": ");
                lp_json_buf_puts(&b, g->fns[i].schema);
                lp_json_buf_puts(&b, "}");
            }
            lp_json_buf_puts(&b, "], \"refs\": [");
            for (size_t i = 0; i < g->n_refs; i++) {
                lp_json_buf_puts(&b, i ? ", {\"rule\": " : "{\"rule\": ");
                lp_json_buf_str(&b, g->refs[i].rule, strlen(g->refs[i].rule));
                lp_json_buf_puts(&b, ", \"schema\": ");
                lp_json_buf_puts(&b, g->refs[i].schema);
                lp_json_buf_puts(&b, "}");
            }
            lp_json_buf_puts(&b, "]");
            put_str_member(&b, "gbnf", g->gbnf);
            lp_json_buf_puts(&b, "}");
        }
        print_buf(&b);
    }
    lp_chat_grammar_destroy(&g);
    lp_json_doc_destroy(&choice);
    lp_json_doc_destroy(&tools);
    free(tools_text);
    free(prompt);
    free(src);
    return rc;
}

int lp_cmd_tool_calls(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("%s\n", USAGE);
        return argc < 2 ? 2 : 0;
    }
    const char *what = argv[1];
    args_t a = {.parallel = true, .reasoning = true};
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--no-parallel")) a.parallel = false;
        else if (!strcmp(o, "--no-reasoning")) a.reasoning = false;
        else if (!v) return lp_cmd_usage_error("tool-calls", "'%s' needs a value, or is unknown\n%s", o, USAGE);
        else if (!strcmp(o, "--template")) a.template = v, i++;
        else if (!strcmp(o, "--format")) a.format = v, i++;
        else if (!strcmp(o, "--prompt")) a.prompt = v, i++;
        else if (!strcmp(o, "--tools")) a.tools = v, i++;
        else if (!strcmp(o, "--reasoning-format")) a.rf = v, i++;
        else if (!strcmp(o, "--tool-choice")) a.choice = v, i++;
        else if (!strcmp(o, "--chunk")) {
            a.chunk = (size_t)strtoul(v, NULL, 10);
            i++;
            if (!a.chunk) return lp_cmd_usage_error("tool-calls", "--chunk: a positive number of bytes");
        } else
            return lp_cmd_usage_error("tool-calls", "unknown argument '%s'\n%s", o, USAGE);
    }
    int rc;
    if (!strcmp(what, "format")) rc = cmd_format(&a);
    else if (!strcmp(what, "parse")) rc = cmd_parse(&a);
    else if (!strcmp(what, "grammar")) rc = cmd_grammar(&a);
    else return lp_cmd_usage_error("tool-calls", "unknown action '%s'\n%s", what, USAGE);
    if (rc) fprintf(stderr, "lmpipe tool-calls: %s\n", lp_error_msg());
    return rc ? 1 : 0;
}
