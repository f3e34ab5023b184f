/* jinja.h - a Jinja2 interpreter for chat templates, sandboxed.
 *
 * It follows Python jinja2 3.1 as Hugging Face transformers configures it for
 * apply_chat_template (ImmutableSandboxedEnvironment, trim_blocks and
 * lstrip_blocks on, loopcontrols, autoescape off, lenient Undefined, tojson as
 * json.dumps with ensure_ascii=False): values behave as Python's (None, True,
 * 1 vs 1.0, repr of lists and dicts, str methods), so that a template renders
 * the bytes transformers renders, or fails where it fails.  docs/TEMPLATES.md
 * says what is supported.
 *
 * A template is untrusted: nothing reaches files, the environment or the
 * clock (strftime_now reads the time the caller gives, or the clock when it
 * gives none); every render runs under a step budget and a memory cap and
 * stops with an error instead of running away.  Errors name the template
 * line ("line 12: ...") and come back as LP_ERR(EINVAL) with lp_error_msg();
 * the cap and the budget give LP_ERR(E2BIG). */
#ifndef LP_JINJA_H
#define LP_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "json.h"

#define LP_JINJA_MAX_SOURCE (4u << 20) /* bytes of template text */

typedef struct lp_jinja_tmpl lp_jinja_tmpl_t;

/* Parse a template (UTF-8 text, no NUL needed).  *out is the caller's;
 * lp_jinja_tmpl_destroy frees it. */
int lp_jinja_parse(const char *src, size_t len, lp_jinja_tmpl_t **out);
void lp_jinja_tmpl_destroy(lp_jinja_tmpl_t **self_p);

typedef struct lp_jinja_opts {
    uint64_t max_steps;  /* evaluation steps (0: 20 million, about a second) */
    size_t max_bytes;    /* live bytes of values and buffers (0: 128 MiB) */
    size_t max_output;   /* bytes of rendered text (0: 32 MiB) */
    bool has_now;        /* strftime_now formats `now` rather than the clock */
    struct tm now;       /* local broken-down time, with has_now */
} lp_jinja_opts_t;

/* One template variable: a JSON value (NULL: None) by name. */
typedef struct lp_jinja_var {
    const char *name;           /* borrowed */
    const lp_json_t *value;     /* borrowed; NULL is None */
} lp_jinja_var_t;

/* Render with these variables (later entries win over earlier ones of the
 * same name).  *out is malloc'd and NUL-terminated; caller frees. */
int lp_jinja_render(const lp_jinja_tmpl_t *t, const lp_jinja_var_t *vars, size_t n_vars,
                    const lp_jinja_opts_t *opts, char **out, size_t *out_len);

/* ---- chat: transformers' apply_chat_template -------------------------------
 *
 * `context` is one JSON object, the shape ../shared/tools/render_template.py
 * takes: messages (required), tools and documents (None when absent),
 * add_generation_prompt (false), continue_final_message (false, true or the
 * name of the field to continue), __now__ (an ISO date-time for
 * strftime_now; the clock when absent); every other member is a variable.
 * `src` is the template's text (continue_final_message looks for the field's
 * name in it).  Errors are the template's or the context's, with the same
 * contract as lp_jinja_render. */
int lp_jinja_chat_render(const lp_jinja_tmpl_t *t, const char *src, size_t src_len,
                         const lp_json_t *context, const lp_jinja_opts_t *opts, char **out,
                         size_t *out_len);

/* Parse an ISO 8601 date-time as Python's datetime.fromisoformat does
 * ("2026-01-15T10:00:00", "2026-01-15 10:00", "2026-01-15"); 0 or
 * LP_ERR(EINVAL). */
int lp_jinja_parse_iso_time(const char *s, struct tm *out);

#endif
