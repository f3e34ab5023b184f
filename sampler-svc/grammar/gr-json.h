/* gr-json.h - JSON as grammar rules: whitespace, strings, numbers,
 * punctuation, any value; shared by JSON mode and the schema compiler.
 * Internal to sampler-svc/grammar.
 *
 * Whitespace: by default any JSON whitespace may follow '{' '[' ',' ':'
 * and precede ',' ':' '}' ']', never before the value or after it; with
 * compact, none.  Punctuation lexemes carry the whitespace around them
 * (LBRACE is "{ws", COMMA "ws,ws", RBRACE "ws}"), so no whitespace is ever
 * a lexeme of its own and a text has one parse. */
#ifndef LP_GR_JSON_H
#define LP_GR_JSON_H

#include "gr-internal.h"

typedef struct {
    gr_grammar_t *g;
    bool compact;
    gr_rebuf_t rb;                    /* expressions, freed with the toolkit */
    GR_VEC(gr_dfa_t *) held;          /* DFAs embedded in those expressions */
    /* LEX rules already made, by DFA hash: equal lexemes share a rule */
    GR_VEC(uint64_t) lex_hash;
    lp__gr_u32v_t lex_id;
    /* common rules, GR_NONE until first asked for */
    uint32_t lbrace, rbrace, rbrace0, lbracket, rbracket, rbracket0, comma;
    uint32_t key_any, scalar_any, value_any, obj_any, arr_any;
    uint32_t max_dfa;                 /* DFA states per lexeme */
    uint32_t budget;                  /* DFA states in all, decremented */
} gr_json_t;

int lp__gr_json_init(gr_json_t *j, gr_grammar_t *g, bool compact);
void lp__gr_json_free(gr_json_t *j);

/* ---- expressions --------------------------------------------------------------- */

gr_re_t *lp__gr_json_ws(gr_json_t *j);                /* [ \t\n\r]* or empty */
/* The text of a JSON string's content, any escapes (for strings without
 * constraints): every character's first byte counted. */
gr_re_t *lp__gr_json_str_body(gr_json_t *j);
/* "..." around a body (quotes are raw bytes). */
gr_re_t *lp__gr_json_quoted(gr_json_t *j, gr_re_t *body);
gr_re_t *lp__gr_json_number(gr_json_t *j);            /* any JSON number */
gr_re_t *lp__gr_json_int(gr_json_t *j);               /* -?(0|[1-9][0-9]*) */
/* Any string content with the escapes JSON requires only (keys, patterns). */
gr_re_t *lp__gr_json_any_content(gr_json_t *j);
const gr_dfa_t *lp__gr_json_any_content_dfa(void);
/* A literal (raw bytes). */
gr_re_t *lp__gr_json_lit(gr_json_t *j, const char *s);

/* ---- rules --------------------------------------------------------------------- */

/* A LEX rule for re (encoding enc); equal DFAs share one rule.  Returns the
 * rule id or a negative error. */
int64_t lp__gr_json_lex(gr_json_t *j, const gr_re_t *re, enum gr_enc enc, const char *name);
/* The same from a finished DFA (takes ownership). */
int64_t lp__gr_json_lex_dfa(gr_json_t *j, gr_dfa_t *d, const char *name);

/* Punctuation and "any" rules (created on first use). */
int64_t lp__gr_json_punct(gr_json_t *j, uint32_t *slot, const char *ch, int ws_before, int ws_after);
#define GR_J_LBRACE(j) lp__gr_json_punct(j, &(j)->lbrace, "{", 0, 1)
#define GR_J_RBRACE(j) lp__gr_json_punct(j, &(j)->rbrace, "}", 1, 0)
#define GR_J_RBRACE0(j) lp__gr_json_punct(j, &(j)->rbrace0, "}", 0, 0)
#define GR_J_LBRACKET(j) lp__gr_json_punct(j, &(j)->lbracket, "[", 0, 1)
#define GR_J_RBRACKET(j) lp__gr_json_punct(j, &(j)->rbracket, "]", 1, 0)
#define GR_J_RBRACKET0(j) lp__gr_json_punct(j, &(j)->rbracket0, "]", 0, 0)
#define GR_J_COMMA(j) lp__gr_json_punct(j, &(j)->comma, ",", 1, 1)
int64_t lp__gr_json_value_any(gr_json_t *j);
int64_t lp__gr_json_obj_any(gr_json_t *j);
int64_t lp__gr_json_arr_any(gr_json_t *j);
/* A key lexeme for any string: "..." ws : ws */
int64_t lp__gr_json_key_any(gr_json_t *j);

/* A SEQ rule that is a plain choice between rules. */
int64_t lp__gr_json_choice(gr_json_t *j, const uint32_t *alts, uint32_t n, const char *name);

#endif
