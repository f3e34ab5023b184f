/* jinja_test.c - the interpreter on its own: Python semantics (expected
 * texts are what ../shared/tools/render_template.py, Hugging Face's
 * rendering, prints for the same template and variables), errors that name
 * the line, the sandbox, the budgets (a runaway template stops with an
 * error), and apply_chat_template's rules in lp_jinja_chat_render.
 * tests/jinja/template-test.py compares whole templates with the reference
 * itself.  Run under ASan+UBSan in the sanitize suite. */
#include "jinja.h"

#include "../../tests/check.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>

/* Render src with the members of vars_json as variables. */
static int render_opts(const char *src, const char *vars_json, const lp_jinja_opts_t *o, char **out)
{
    *out = NULL;
    lp_jinja_tmpl_t *t = NULL;
    lp_json_doc_t *d = NULL;
    int rc = lp_json_parse(vars_json, strlen(vars_json), &d);
    if (rc) return rc;
    const lp_json_t *root = lp_json_root(d);
    lp_jinja_var_t vars[64];
    size_t n = 0;
    for (size_t i = 0; i < root->n && n < 64; i++) vars[n++] = (lp_jinja_var_t){root->u.items[i].key, &root->u.items[i]};
    rc = lp_jinja_parse(src, strlen(src), &t);
    if (!rc) rc = lp_jinja_render(t, vars, n, o, out, NULL);
    lp_jinja_tmpl_destroy(&t);
    lp_json_doc_destroy(&d);
    return rc;
}

static int render(const char *src, const char *vars_json, char **out)
{
    lp_jinja_opts_t o = {0};
    o.has_now = true;
    lp_jinja_parse_iso_time("2026-01-15T10:00:00", &o.now);
    return render_opts(src, vars_json, &o, out);
}

/* ---- Python semantics, against the reference's output ---------------------- */

static const struct {
    const char *tmpl, *vars, *want;
} cases[] = {
    {"{{ a }} {{ b }} {{ a / 2 }} {{ b * 2 }}",
     "{\"a\": 1, \"b\": 1.0}",
     "1 1.0 0.5 2.0"},
    {"{{ x | tojson }}",
     "{\"x\": {\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\"}}",
     "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"\\n\"}"},
    {"{{ x }}",
     "{\"x\": {\"b\": [1, 2.5, null, true], \"a\": \"it's\"}}",
     "{'b': [1, 2.5, None, True], 'a': \"it's\"}"},
    {"{% for m in msgs %}{{ loop.index }}{{ m.role | upper }}{% if not loop.last %},{% endif %}{% endfor %}",
     "{\"msgs\": [{\"role\": \"user\"}, {\"role\": \"assistant\"}]}",
     "1USER,2ASSISTANT"},
    {"{% set ns = namespace(n=0) %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
     "{}",
     "10"},
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}",
     "{}",
     "1"},
    {"{% macro m(a, b='d') %}{{ a }}{{ b }}{{ caller() if caller is defined }}{% endmacro %}{% call m(1) %}C{% endcall %}|{{ m(2, b=3) }}",
     "{}",
     "1dC|23"},
    {"{%- if true %}\n  x\n{%- endif %}\n{% if true %}\n  y\n{% endif %}\nz",
     "{}",
     "  x  y\nz"},
    {"a  {%- if true -%}  b  {%- endif -%}  c",
     "{}",
     "abc"},
    {"{{ 'Héllo Wörld' | upper }} {{ 'ΣΑΣ' | lower }} {{ 'hello world' | title }} {{ '  x  ' | trim }}",
     "{}",
     "HÉLLO WÖRLD σας Hello World x"},
    {"{{ s[1:3] }}{{ s[::-1] }}{{ s | length }}",
     "{\"s\": \"h😀llo\"}",
     "😀loll😀h5"},
    {"{{ [3, 1, 2] | sort | join(',') }} {{ d | dictsort }} {{ d.items() | list }}",
     "{\"d\": {\"b\": 2, \"a\": 1}}",
     "1,2,3 [('a', 1), ('b', 2)] [('b', 2), ('a', 1)]"},
    {"{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | join('|') }}",
     "{\"ms\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"x\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"c\"}]}",
     "a|c"},
    {"{{ none_v is none }} {{ undef is defined }} {{ undef | default('D') }} {{ '' | default('E', true) }}",
     "{\"none_v\": null}",
     "True False D E"},
    {"{{ '%s=%d' % ('a', 3) }} {{ '{}:{:.2f}'.format('b', 2.5) }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 2 ** 10 }} {{ -7 // 2 }} {{ -7 % 3 }}",
     "{}",
     "a=3 b:2.50 0.30000000000000004 1e+16 1024 -4 2"},
    {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'abc'.replace('b', '') }} {{ 'x'.startswith(('a', 'x')) }}",
     "{}",
     "['a', 'b', '', 'c'] ['a', 'b'] ac True"},
    {"{{ x.content }}|{{ x['content'] is none }}|{{ x.missing is defined }}|{{ n.attr }}",
     "{\"x\": {\"content\": null}, \"n\": null}",
     "None|True|False|"},
    {"{% for k, v in d | items %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"z\": 1, \"a\": [1]}}",
     "z=1;a=[1];"},
    {"{% filter upper %}a{{ 'b' }}{% endfilter %}{% set v %}V{{ 1 }}{% endset %}{{ v }}{% with q = 5 %}{{ q }}{% endwith %}",
     "{}",
     "ABV15"},
    {"{% raw %}{{ x }}{% endraw %}{# c #}{{ 'a' 'b' }}{{ \"\\u00e9\\t\" }}",
     "{}",
     "{{ x }}abé\t"},
    {"{{ ('<a>' | safe) + '<b>' }} {{ '<a>' | escape }}",
     "{}",
     "<a>&lt;b&gt; &lt;a&gt;"},
    {"{{ d['items'] }}",
     "{\"d\": {\"items\": 3}}",
     "3"},
    {"{% for x in [1, 2, 3] if x != 2 %}{{ x }}{{ loop.length }}{% else %}E{% endfor %}{% for x in [] %}{% else %}E{% endfor %}",
     "{}",
     "1232E"},
    {"{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "{}",
     "0246"},
    {"{{ [1, 'a', none, true, 1.5, (1,), {'k': 'v'}] }}",
     "{}",
     "[1, 'a', None, True, 1.5, (1,), {'k': 'v'}]"},
    {"{{ strftime_now('%Y-%m-%d %A') }}",
     "{}",
     "2026-01-15 Thursday"},
    {"{{ tl | tojson(indent=2) }}",
     "{\"tl\": [{\"a\": 1}, []]}",
     "[\n  {\n    \"a\": 1\n  },\n  []\n]"},
};

static void test_semantics(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out;
        int rc = render(cases[i].tmpl, cases[i].vars, &out);
        CHECK(rc == 0, " case %zu: %s", i, rc ? lp_error_msg() : "");
        if (!rc) CHECK(!strcmp(out, cases[i].want), " case %zu:\n  got  %s\n  want %s", i, out, cases[i].want);
        free(out);
    }
}

/* ---- errors name the line ---------------------------------------------------- */

static void expect_error(const char *src, const char *vars, int want_rc, const char *want_msg)
{
    char *out;
    int rc = render(src, vars, &out);
    CHECK(rc == want_rc, " %s: rc %d (want %d): %s", src, rc, want_rc, rc ? lp_error_msg() : out);
    if (rc) CHECK(strstr(lp_error_msg(), want_msg), " %s: message '%s' lacks '%s'", src, lp_error_msg(), want_msg);
    free(out);
}

static void test_errors(void)
{
    /* parse errors */
    expect_error("a\nb\n{% if x %}\nc", "{}", LP_ERR(EINVAL), "line 4: Unexpected end of template");
    expect_error("{{ 1 +\n}}", "{}", LP_ERR(EINVAL), "line 2: unexpected");
    expect_error("line1\n{% frobnicate %}", "{}", LP_ERR(EINVAL), "line 2: Encountered unknown tag 'frobnicate'");
    expect_error("{% do x.append(1) %}", "{}", LP_ERR(EINVAL), "unknown tag 'do'");
    expect_error("\n\n{{ x | nosuchfilter }}", "{}", LP_ERR(EINVAL), "line 3: No filter named 'nosuchfilter'");
    expect_error("{{ x is nosuchtest }}", "{}", LP_ERR(EINVAL), "No test named 'nosuchtest'");
    expect_error("{% break %}", "{}", LP_ERR(EINVAL), "'break' outside loop");
    expect_error("{{ 'abc }}", "{}", LP_ERR(EINVAL), "line 1");
    expect_error("{{ '\\xZZ' }}", "{}", LP_ERR(EINVAL), "escape");
    expect_error("{# open", "{}", LP_ERR(EINVAL), "Missing end of comment tag");
    expect_error("{{ (1 }}", "{}", LP_ERR(EINVAL), "line 1");
    /* runtime errors: the line of the failing expression */
    expect_error("ok\nok\n{{ raise_exception('Roles must alternate') }}", "{}", LP_ERR(EINVAL),
                 "line 3: Roles must alternate");
    expect_error("{% for m in ms %}\n{{ m.content + 1 }}\n{% endfor %}", "{\"ms\": [{\"content\": \"a\"}]}",
                 LP_ERR(EINVAL), "line 2: can only concatenate str (not \"int\") to str");
    expect_error("{{ x.y }}", "{}", LP_ERR(EINVAL), "'x' is undefined");
    expect_error("{{ 'x' in none }}", "{}", LP_ERR(EINVAL), "argument of type 'NoneType' is not iterable");
    expect_error("{{ 1 / 0 }}", "{}", LP_ERR(EINVAL), "division by zero");
    expect_error("{{ v | items | list }}", "{\"v\": \"s\"}", LP_ERR(EINVAL), "Can only get item pairs from a mapping.");
    expect_error("{{ [1] | map('upper') | tojson }}", "{}", LP_ERR(EINVAL), "is not JSON serializable");
    expect_error("{{ undef | tojson }}", "{}", LP_ERR(EINVAL), "Object of type Undefined is not JSON serializable");
    expect_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{}", LP_ERR(EINVAL), "takes not more than 1 argument");
    /* not valid UTF-8: the reference cannot read such a file either */
    expect_error("ab\n\xff", "{}", LP_ERR(EINVAL), "line 2: the template is not valid UTF-8");
}

/* ---- the sandbox ------------------------------------------------------------------- */

static void test_sandbox(void)
{
    expect_error("{% set l = [1] %}{{ l.append(2) }}", "{}", LP_ERR(EINVAL),
                 "access to attribute 'append' of 'list' object is unsafe.");
    expect_error("{{ d.update({'a': 1}) }}", "{\"d\": {}}", LP_ERR(EINVAL), "unsafe");
    expect_error("{% include 'secrets.txt' %}", "{}", LP_ERR(EINVAL), "no loader");
    expect_error("{% import 'x' as y %}", "{}", LP_ERR(EINVAL), "no loader");
    expect_error("{% set d = {} %}{% set d.x = 1 %}", "{}", LP_ERR(EINVAL), "non-namespace");
    expect_error("{{ range(100001) | length }}", "{}", LP_ERR(EINVAL), "Range too big");
    /* names that would be Python's internals are just missing keys */
    char *out;
    CHECK_RC(render("[{{ x.__class__ }}{{ ''.__len__ }}{{ cycler }}{{ lipsum }}]", "{\"x\": 1}", &out), 0);
    if (out) CHECK(!strcmp(out, "[]"), " got %s", out);
    free(out);
}

/* ---- budgets: a runaway template stops with an error --------------------------- */

static void test_limits(void)
{
    char *out;
    lp_jinja_opts_t o = {0};
    o.max_steps = 100000;
    CHECK_RC(render_opts("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                         "{}", &o, &out), LP_ERR(E2BIG));
    CHECK(strstr(lp_error_msg(), "steps"), " %s", lp_error_msg());
    free(out);
    o = (lp_jinja_opts_t){0};
    o.max_bytes = 1 << 20;
    CHECK_RC(render_opts("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                         "{% endfor %}{{ ns.s | length }}", "{}", &o, &out), LP_ERR(E2BIG));
    CHECK(strstr(lp_error_msg(), "bytes of memory"), " %s", lp_error_msg());
    free(out);
    CHECK_RC(render_opts("{{ 'x' * 100000000000 }}", "{}", &o, &out), LP_ERR(E2BIG));
    free(out);
    o = (lp_jinja_opts_t){0};
    o.max_output = 1000;
    CHECK_RC(render_opts("{% for i in range(1000) %}xx{% endfor %}", "{}", &o, &out), LP_ERR(E2BIG));
    CHECK(strstr(lp_error_msg(), "rendered text is longer"), " %s", lp_error_msg());
    free(out);
    /* the default budget also ends it, quickly */
    CHECK_RC(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", &out),
             LP_ERR(E2BIG));
    free(out);
    /* unbounded recursion and deep nesting are errors, not a smashed stack */
    CHECK_RC(render("{% macro m(x) %}{{ m(x) }}{% endmacro %}{{ m(1) }}", "{}", &out), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "recursion"), " %s", lp_error_msg());
    free(out);
    size_t depth = 5000;
    char *deep = malloc(2 * depth + 16);
    strcpy(deep, "{{ ");
    for (size_t i = 0; i < depth; i++) strcat(deep, "(");
    strcat(deep, "1");
    for (size_t i = 0; i < depth; i++) strcat(deep, ")");
    strcat(deep, " }}");
    CHECK_RC(render(deep, "{}", &out), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "nested too deeply"), " %s", lp_error_msg());
    free(out);
    memset(deep, 0, 2 * depth + 16);
    for (size_t i = 0; i < 300; i++) strcat(deep, "{% if 1 %}");
    CHECK_RC(render(deep, "{}", &out), LP_ERR(EINVAL));
    free(out);
    free(deep);
    /* chains the parser builds without recursing: a.b.b..., 1+1+..., x|f|f... */
    static const char *const link[] = {".b", "+1", "|trim"}, *const head[] = {"{% macro m() %}{{ a", "{{ 1", "{{ x"},
                             *const tail[] = {" }}{% endmacro %}", " }}", " }}"};
    for (int k = 0; k < 3; k++) {
        size_t cap = 200000 * strlen(link[k]) + 64;
        char *chain = malloc(cap);
        strcpy(chain, head[k]);
        size_t at = strlen(chain);
        for (int i = 0; i < 200000; i++, at += strlen(link[k])) memcpy(chain + at, link[k], strlen(link[k]));
        strcpy(chain + at, tail[k]);
        CHECK_RC(render(chain, "{}", &out), LP_ERR(EINVAL));
        CHECK(strstr(lp_error_msg(), "nested too deeply"), " %s", lp_error_msg());
        free(out);
        free(chain);
    }
    /* a list built up many times must not leak past the cap */
    o = (lp_jinja_opts_t){0};
    o.max_bytes = 4 << 20;
    CHECK_RC(render_opts("{% for i in range(20000) %}{% set l = [i] * 100 %}{% endfor %}ok", "{}", &o, &out), 0);
    free(out);
}

/* ---- a parsed template renders again and again, the same --------------------- */

static void test_reuse(void)
{
    const char *src = "{% set ns = namespace(n=0) %}{% for m in ms %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}";
    lp_jinja_tmpl_t *t;
    CHECK_RC(lp_jinja_parse(src, strlen(src), &t), 0);
    for (int k = 0; k < 3; k++) {
        char json[64];
        snprintf(json, sizeof(json), "{\"ms\": [%s]}", k == 0 ? "" : k == 1 ? "1" : "1, 2");
        lp_json_doc_t *d;
        CHECK_RC(lp_json_parse(json, strlen(json), &d), 0);
        lp_jinja_var_t v = {"ms", lp_json_get(lp_json_root(d), "ms")};
        char *out = NULL;
        CHECK_RC(lp_jinja_render(t, &v, 1, NULL, &out, NULL), 0);
        char want[4] = {(char)('0' + k), 0};
        if (out) CHECK(!strcmp(out, want), " got %s want %s", out, want);
        free(out);
        lp_json_doc_destroy(&d);
    }
    lp_jinja_tmpl_destroy(&t);
}

/* ---- apply_chat_template ---------------------------------------------------------- */

static int chat(const char *src, const char *ctx, char **out)
{
    lp_jinja_tmpl_t *t = NULL;
    lp_json_doc_t *d = NULL;
    *out = NULL;
    int rc = lp_json_parse(ctx, strlen(ctx), &d);
    if (!rc) rc = lp_jinja_parse(src, strlen(src), &t);
    if (!rc) rc = lp_jinja_chat_render(t, src, strlen(src), lp_json_root(d), NULL, out, NULL);
    lp_jinja_tmpl_destroy(&t);
    lp_json_doc_destroy(&d);
    return rc;
}

static void test_chat(void)
{
    const char *chatml = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    char *out;
    CHECK_RC(chat(chatml, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"add_generation_prompt\": true}",
                  &out), 0);
    if (out) CHECK(!strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), " got %s", out);
    free(out);
    /* continue_final_message: the text ends inside the last message */
    CHECK_RC(chat(chatml, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                          "{\"role\": \"assistant\", \"content\": \"Sure, \"}], \"continue_final_message\": true}", &out), 0);
    if (out) CHECK(!strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nSure, "), " got %s", out);
    free(out);
    CHECK_RC(chat(chatml, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"continue_final_message\": true, "
                          "\"add_generation_prompt\": true}", &out), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "not compatible"), " %s", lp_error_msg());
    CHECK_RC(chat(chatml, "{\"msgs\": []}", &out), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "no messages"), " %s", lp_error_msg());
    CHECK_RC(chat(chatml, "{\"messages\": [], \"tools\": [\"not a schema\"]}", &out), LP_ERR(EINVAL));
    /* tools and documents are None when absent; __now__ pins strftime_now */
    CHECK_RC(chat("{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}{{ strftime_now('%d %b %Y') }}",
                  "{\"messages\": [], \"__now__\": \"2024-02-29T23:59:58\"}", &out), 0);
    if (out) CHECK(!strcmp(out, "TrueTrueFalse29 Feb 2024"), " got %s", out);
    free(out);
    struct tm tm;
    CHECK_RC(lp_jinja_parse_iso_time("2026-01-15 10:00", &tm), 0);
    CHECK(tm.tm_wday == 4 && tm.tm_yday == 14 && tm.tm_hour == 10);
    CHECK_RC(lp_jinja_parse_iso_time("2026-02-30T10:00:00", &tm), LP_ERR(EINVAL));
    CHECK_RC(lp_jinja_parse_iso_time("yesterday", &tm), LP_ERR(EINVAL));
}

int main(void)
{
    test_semantics();
    test_errors();
    test_sandbox();
    test_limits();
    test_reuse();
    test_chat();
    return CHECK_DONE();
}
