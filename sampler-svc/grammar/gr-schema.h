/* gr-schema.h - the JSON Schema compiler's parts.  Internal to
 * sampler-svc/grammar.
 *
 * A schema position is compiled as a conjunction of schema objects (the
 * node itself, what its $ref and allOf bring in, the branch of an anyOf
 * taken), each with the keywords already accounted for masked off.  Equal
 * conjunctions share one rule, which is also how recursion ($ref to an
 * enclosing schema) becomes a recursive rule.  anyOf distributes over the
 * rest; oneOf does when its branches are provably disjoint; enum and const
 * are decided exactly by validating each value against the whole
 * conjunction; what is left is merged per type (gr-schema.c) into string,
 * number, array and object rules. */
#ifndef LP_GR_SCHEMA_H
#define LP_GR_SCHEMA_H

#include "gr-json.h"
#include "json.h"

/* Internal keywords of the synthetic schemas negations build (gr-schema.c).
 * Input schemas may not use keys or "$ref"s starting with U+0001 (refused at
 * compile time), so only the compiler writes these. */
#define K_NOTTYPE "\x01nottype"
#define K_NOTENUM "\x01notenum"
#define K_NOTPATTERN "\x01notpattern"
#define K_NOTFORMAT "\x01notformat"

/* keywords of a conjunct already applied */
enum {
    SK_ANYOF = 1,
    SK_ONEOF = 2,
    SK_ALLOF = 4,
    SK_IF = 8,
    SK_REF = 16,
    SK_NOT = 32,
    SK_DEPS = 64, /* schema dependencies, rewritten as anyOf */
};

typedef struct {
    const lp_json_t *node; /* an object or a boolean */
    uint32_t skip;
} sc_ref_t;
typedef GR_VEC(sc_ref_t) sc_refv_t;

/* JSON types as the compiler tracks them */
enum {
    T_NULL = 1,
    T_BOOL = 2,
    T_INT = 4,
    T_NUM = 8, /* numbers that are not integers */
    T_STR = 16,
    T_ARR = 32,
    T_OBJ = 64,
    T_ALL = 127,
};

/* the negation of a schema node, once built */
typedef struct {
    const lp_json_t *node;
    const lp_json_t *neg; /* NULL while being built */
    uint32_t ref;         /* synthetic reference index, UINT32_MAX none */
} sc_negmemo_t;

typedef struct {
    uint64_t hash;
    uint32_t off, n;  /* conjuncts in sc->keys */
    uint32_t rule;    /* GR_NONE: empty */
    bool busy;        /* being compiled: a recursive reference gets `rule` */
    bool referenced;
} sc_memo_t;

/* A decimal: (neg ? -1 : 1) * dig * 10^exp, dig without leading or
 * trailing zeros ("" for zero). */
typedef struct {
    bool neg;
    const char *dig;
    uint32_t nd;
    int32_t exp;
} sc_dec_t;

typedef struct {
    const char *pat;
    size_t len;
    gr_dfa_t *search;   /* JSON string content, search semantics */
} sc_pat_t;

typedef struct sc {
    gr_json_t J;
    const lp_json_t *root;
    int draft;              /* 0 unknown (both 7 and 2020-12 apply), 4, 6, 7, 2019, 2020 */
    GR_VEC(sc_memo_t) memo;
    GR_VEC(sc_ref_t) keys;
    uint32_t *slots;        /* memo hash index: memo index + 1 */
    uint32_t nslots;
    uint32_t n_compiles;
    int depth;
    GR_VEC(sc_pat_t *) pats; /* compiled patterns (pointers stay valid as more come) */
    lp__gr_arena_t arena;   /* decimals, names, synthetic schemas */
    GR_VEC(const lp_json_t *) syn; /* schemas behind "$ref": "\x01N" (negations of themselves) */
    GR_VEC(sc_negmemo_t) negs;
} sc_t;

#define SC_MAX_COMPILES 20000u
#define SC_MAX_DEPTH 200

/* An error naming a keyword: LP_ERR(ENOTSUP) "unsupported: ..." */
int lp__gr_sc_unsupported(const char *kw, const char *why);

/* ---- gr-schema.c ------------------------------------------------------------------ */

/* Add a conjunct. */
int lp__gr_sc_push(sc_refv_t *v, const lp_json_t *node, uint32_t skip);

/* Compile a conjunction to a rule; *rule = GR_NONE when it admits no value. */
int lp__gr_sc_conj(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule);
/* $ref target (JSON pointer in the document, "#" root, $anchor/$id "#name"). */
int lp__gr_sc_resolve(sc_t *sc, const lp_json_t *ref, const lp_json_t **out);
/* Keyword of a schema object (NULL if absent or not an object). */
const lp_json_t *lp__gr_sc_kw(const lp_json_t *s, const char *k);

/* ---- gr-schema-neg.c: negation, disjointness, synthetic schemas ----------------------- */

/* A schema for "not s" (synthetic, in sc's arena); ENOTSUP naming what
 * cannot be negated. */
int lp__gr_sc_neg(sc_t *sc, const lp_json_t *s, const lp_json_t **out, int depth);
/* Provably no value satisfies both a and b. */
bool lp__gr_sc_disjoint(sc_t *sc, const lp_json_t *a, const lp_json_t *b);
/* oneOf as anyOf, type by type: 1 when every pair of branches is
 * disjoint, or overlaps only in whole types both accept in full (then no
 * value of them satisfies exactly one branch: *excluded gets those types). */
int lp__gr_sc_oneof_types(sc_t *sc, const lp_json_t *alts, int *excluded);
/* The T_ mask of a "type" value; -1 when it is not one. */
int lp__gr_sc_type_mask(const lp_json_t *t);
lp_json_t *lp__gr_sc_mk_bool(sc_t *sc, bool b);
lp_json_t *lp__gr_sc_mk_str(sc_t *sc, const char *s, size_t n);
lp_json_t *lp__gr_sc_mk_obj2(sc_t *sc, const char *k1, const lp_json_t *v1, const char *k2, const lp_json_t *v2);
lp_json_t *lp__gr_sc_mk_arr(sc_t *sc, lp_json_t *const *v, size_t n);

/* ---- gr-schema-merge.c: what is left after enum, anyOf, oneOf, if ----------------------- */

/* Merge the conjuncts' keywords per type and emit the rules of each type
 * that remains; *rule GR_NONE when none does. */
int lp__gr_sc_merge_emit(sc_t *sc, const sc_ref_t *items, uint32_t n, uint32_t *rule);

/* ---- gr-schema-num.c ----------------------------------------------------------------- */

int lp__gr_dec_parse(sc_t *sc, const char *text, size_t n, sc_dec_t *d);
int lp__gr_dec_cmp(const sc_dec_t *a, const sc_dec_t *b);
bool lp__gr_dec_is_int(const sc_dec_t *d);
/* |d| as integer digits I and fraction digits F (no trailing zeros). */
int lp__gr_dec_split(sc_t *sc, const sc_dec_t *d, const char **I, size_t *ni, const char **F, size_t *nf);
/* d's spellings without an exponent: [-]I[.F0*] (the sign optional for 0). */
gr_re_t *lp__gr_dec_plain_re(gr_rebuf_t *rb, const sc_dec_t *d, const char *I, size_t ni, const char *F, size_t nf);

typedef struct {
    bool has_lo, has_hi, lo_excl, hi_excl;
    sc_dec_t lo, hi;
    bool integer;          /* only integers */
    bool no_exp;           /* no exponent spellings */
    GR_VEC(sc_dec_t) mult; /* multipleOf */
} sc_num_t;

/* Compared with a bound, numbers keep to spellings a double holds exactly
 * enough that Python's and Rust's float comparisons agree with exact ones:
 * at most 15 digits with a fraction or exponent (exponent of 1 or 2 digits),
 * at most 18 without.  *re is narrowed to those. */
int lp__gr_sc_number_budget(sc_t *sc, gr_re_t **re);
/* The number lexeme for these constraints: *re NULL when none exists. */
int lp__gr_sc_number_re(sc_t *sc, const sc_num_t *c, gr_re_t **re);
/* Whether decimal v is a multiple of m as both Python's and Rust's
 * validators see it (1 yes, 0 no, <0 undecidable: refuse). */
int lp__gr_dec_multiple(const sc_dec_t *v, const sc_dec_t *m);

/* ---- gr-schema-str.c ------------------------------------------------------------------ */

/* A pattern's DFA over JSON string content (search semantics), cached. */
int lp__gr_sc_pattern(sc_t *sc, const char *pat, size_t len, const sc_pat_t **out);
/* Does the (UTF-8) string s match the pattern? */
bool lp__gr_sc_pattern_match(const sc_pat_t *p, const char *s, size_t n);
/* A format's content expression (JSON encoding): 0 and *re set (and
 * *max_len, characters, 0 for none); 1 when the
 * format is not asserted by validators (no constraint); ENOTSUP when it is
 * asserted and not supported here. */
int lp__gr_sc_format(sc_t *sc, const char *fmt, size_t len, gr_re_t **re, uint32_t *max_len);
/* Does the literal string (UTF-8) satisfy the format? 1, 0, <0 (refuse). */
int lp__gr_sc_format_check(sc_t *sc, const char *fmt, size_t flen, const char *s, size_t n);
/* Any string content (JSON restricted encoding), as a DFA. */
int lp__gr_sc_any_content(sc_t *sc, const gr_dfa_t **out);
/* Number of characters (code points) of UTF-8 s. */
size_t lp__gr_utf8_chars(const char *s, size_t n);
/* Encode UTF-8 text as the content of a JSON string, JSON encoding
 * (expression matching its canonical escapes). */
gr_re_t *lp__gr_sc_text_re(sc_t *sc, const char *s, size_t n);

/* ---- gr-schema-obj.c ---------------------------------------------------------------- */

/* An object's rule: named properties (any order, each at most once),
 * keys matching disjoint patterns, other keys. */
typedef struct {
    uint32_t n_named;
    const char *const *names;  /* UTF-8 */
    const size_t *name_lens;
    const uint32_t *value_rule; /* per name; GR_NONE: the name may not appear */
    const uint64_t *required;   /* bits over names (NULL: none) */
    uint32_t n_pat;
    const gr_dfa_t *const *pat_dfa; /* content DFAs, JSON encoding */
    const uint32_t *pat_rule;
    uint32_t other_rule;        /* GR_NONE: no other keys */
    const gr_dfa_t *names_dfa;  /* propertyNames: content DFA (NULL: any) */
    uint32_t min_props, max_props; /* max GR_NONE: none */
    uint32_t n_deps;            /* dependentRequired: name index -> names */
    const uint32_t *dep_key;
    const uint64_t *dep_set;    /* n_deps * words(n_named) */
} sc_objspec_t;
int lp__gr_sc_object(sc_t *sc, const sc_objspec_t *o, uint32_t *rule);

typedef struct {
    uint32_t n_prefix;
    const uint32_t *prefix_rule; /* GR_NONE: nothing can be at that index */
    uint32_t rest_rule;          /* GR_NONE: nothing after the prefix */
    uint32_t min_items, max_items; /* max GR_NONE: none */
} sc_arrspec_t;
/* *rule GR_NONE when no array satisfies the spec. */
int lp__gr_sc_array(sc_t *sc, const sc_arrspec_t *a, uint32_t *rule);

/* ---- gr-schema-lit.c ---------------------------------------------------------------- */

/* Validate literal v against schema s (full semantics): 1 valid, 0 not,
 * <0 when it cannot be decided (error set). */
int lp__gr_sc_validate(sc_t *sc, const lp_json_t *v, const lp_json_t *s, int depth);
/* Against a conjunction (keywords in skip ignored). */
int lp__gr_sc_validate_conj(sc_t *sc, const lp_json_t *v, const sc_ref_t *items, uint32_t n);
/* A rule matching exactly these literal values (any whitespace and key
 * order JSON allows); *rule GR_NONE when n == 0. */
int lp__gr_sc_literals(sc_t *sc, const lp_json_t *const *vals, uint32_t n, uint32_t *rule);
/* JSON equality (numbers by value, objects by members). */
bool lp__gr_sc_json_eq(sc_t *sc, const lp_json_t *a, const lp_json_t *b);

#endif
