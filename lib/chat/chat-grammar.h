/* chat-grammar.h - what constrains decoding to tool calls in a format, for
 * tool_choice "required" or a named function (the whole output) and "auto"
 * (lazily: from the moment a call's trigger appears), so that a call's
 * arguments match its function's JSON Schema.
 *
 * The result is given twice: as a structure (the literals around each call
 * and each function's schema), and as GBNF text in llama.cpp's dialect
 * whose rules for the arguments are left to the grammar engine: the GBNF
 * refers to a rule per function ("args-0", ...), or per parameter in
 * XML-like formats ("args-0-city"), and lists the JSON Schema each must
 * match; the engine compiles those schemas into those rules.  Free text
 * (reasoning, a string parameter of an XML-like format) is written out in
 * the GBNF itself. */
#ifndef LP_CHAT_GRAMMAR_H
#define LP_CHAT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>

#include "chat-format.h"
#include "json.h"

typedef struct lp_chat_grammar_opts {
    lp_chat_format_t format;
    const lp_json_t *tools;         /* [{type: "function", function: {name, parameters}}]; borrowed */
    const lp_json_t *tool_choice;   /* "auto", "none", "required", {type: "function", function: {name}};
                                     * NULL is "auto"; borrowed */
    bool parallel_tool_calls;       /* several calls may follow one another */
    bool starts_in_reasoning;       /* the prompt opened reasoning: it must be closed first */
    bool allow_reasoning;           /* reasoning may come before the calls */
} lp_chat_grammar_opts_t;

/* A rule the engine defines from a JSON Schema. */
typedef struct lp_chat_grammar_ref {
    char *rule;      /* the GBNF nonterminal, "args-0" or "args-0-city" */
    char *schema;    /* the JSON Schema its text must match (compact JSON) */
} lp_chat_grammar_ref_t;

/* One function's call. */
typedef struct lp_chat_grammar_fn {
    char *name;
    char *begin;      /* the literal before the arguments: call_open NAME name_close ("%i": the call's index) */
    char *end;        /* the literal after them */
    char *schema;     /* the function's parameters (compact JSON; an empty object schema when it has none) */
} lp_chat_grammar_fn_t;

typedef struct lp_chat_grammar {
    bool lazy;                /* "auto": the grammar applies from a trigger on, the text before is free */
    char *trigger;            /* lazy: the literal that starts it, where the GBNF's root begins */
    char *prefix, *separator, *suffix;  /* around and between calls ("" none) */
    size_t max_calls;         /* 1 unless parallel calls are allowed; 0: no limit */
    lp_chat_grammar_fn_t *fns;
    size_t n_fns;
    lp_chat_grammar_ref_t *refs;  /* the rules the GBNF leaves to the engine */
    size_t n_refs;
    char *gbnf;               /* the grammar; "root" is its start */
} lp_chat_grammar_t;

/* Build the grammar.  0 with *out NULL when nothing is constrained
 * (tool_choice "none", or no tools), 0 with *out set, or LP_ERR(EINVAL)
 * naming the bad tool or tool_choice, or LP_ERR(ENOTSUP) for a format whose
 * calls a grammar cannot force (none, Gemma 4's non-JSON arguments). */
int lp_chat_grammar_build(const lp_chat_grammar_opts_t *o, lp_chat_grammar_t **out);
void lp_chat_grammar_destroy(lp_chat_grammar_t **self_p);

#endif
