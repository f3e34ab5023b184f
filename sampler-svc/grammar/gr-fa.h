/* gr-fa.h - finite automata for the grammar engine: sets of code points,
 * the regular-expression syntax tree, its byte-level NFA (Thompson) and the
 * DFA the matcher runs (subset construction, dead states trimmed, Moore
 * minimisation, canonical numbering).  Internal to sampler-svc/grammar.
 *
 * Every lexeme of every input kind ends up as one gr_dfa_t over bytes.
 * Characters are code points until the NFA is built; the NFA encodes them
 * as UTF-8 (GBNF, regex grammars) or as the text of a JSON string (schema
 * strings: escapes included, and each character's first byte marked
 * "counted" so that minLength/maxLength can count characters). */
#ifndef LP_GR_FA_H
#define LP_GR_FA_H

#include "gr-util.h"

#include <stdatomic.h>

#define GR_CP_MAX 0x10FFFFu

/* ---- sets of code points -------------------------------------------------- */

typedef struct {
    uint32_t lo, hi; /* inclusive */
} gr_range_t;

/* Sorted, disjoint, non-adjacent ranges; heap-owned (lp__gr_cs_free). */
typedef struct {
    gr_range_t *r;
    uint32_t n, cap;
} gr_cset_t;

int lp__gr_cs_add(gr_cset_t *s, uint32_t lo, uint32_t hi);
int lp__gr_cs_union(gr_cset_t *s, const gr_cset_t *t);
/* Complement within the scalar values (0..0x10FFFF without surrogates). */
int lp__gr_cs_negate(gr_cset_t *s);
int lp__gr_cs_intersect(gr_cset_t *s, const gr_cset_t *t);
bool lp__gr_cs_has(const gr_cset_t *s, uint32_t cp);
void lp__gr_cs_free(gr_cset_t *s);
/* Named classes, as the strictest of ECMA-262, Python re and Rust regex
 * read them, so that a pattern never accepts what a validator refuses:
 * 'd' [0-9], 'w' [A-Za-z0-9_], 's' the space both call space; 'D','W','S'
 * exclude every character any of them counts in the class. */
int lp__gr_cs_class(gr_cset_t *s, char name);
/* '.': everything but line terminators (\n \r U+2028 U+2029). */
int lp__gr_cs_dot(gr_cset_t *s);
/* \p{..} general categories: "L", "N", "Z", "M", "P", "S", "C" (and long
 * names).  LP_ERR(ENOTSUP) for others. */
int lp__gr_cs_category(gr_cset_t *s, const char *name, size_t len, bool negate);

/* ---- regular expressions ------------------------------------------------------ */

enum gr_re_kind {
    GR_RE_NONE,  /* matches nothing */
    GR_RE_EMPTY, /* the empty string */
    GR_RE_CHARS, /* one character of a set (encoded as the NFA's mode says) */
    GR_RE_BYTES, /* one byte in [lo, hi], raw */
    GR_RE_CAT,
    GR_RE_ALT,
    GR_RE_REP,   /* kids[0]{min,max}; max GR_RE_INF for unbounded */
    GR_RE_BOL,   /* ^ : only at the start of the text */
    GR_RE_EOL,   /* $ : only at the end of the text */
    GR_RE_DFA,   /* a finished DFA, embedded (its tags dropped, its counts kept) */
};
#define GR_RE_INF UINT32_MAX

typedef struct gr_re gr_re_t;
struct gr_re {
    uint8_t kind;
    uint8_t lo, hi;  /* BYTES */
    bool count;      /* BYTES: the byte starts a counted character */
    uint32_t min, max;
    gr_cset_t cs;    /* CHARS (owned by the regex arena's cleanup list) */
    uint32_t n;      /* CAT/ALT/REP: number of kids */
    gr_re_t **kids;
    const struct gr_dfa *dfa; /* DFA: borrowed, must outlive the NFA's use */
};

typedef GR_VEC(gr_re_t *) gr_rev_t;

/* A tree of gr_re_t in one arena; csets are freed with it. */
typedef struct {
    lp__gr_arena_t arena;
    GR_VEC(gr_cset_t *) sets;
    uint32_t nodes;
    uint32_t max_nodes; /* refuse past it (0: default) */
} gr_rebuf_t;

void lp__gr_rebuf_free(gr_rebuf_t *b);
gr_re_t *lp__gr_re_new(gr_rebuf_t *b, enum gr_re_kind k);
gr_re_t *lp__gr_re_chars(gr_rebuf_t *b, const gr_cset_t *cs);  /* copies cs */
gr_re_t *lp__gr_re_char(gr_rebuf_t *b, uint32_t cp);
gr_re_t *lp__gr_re_byte(gr_rebuf_t *b, uint8_t lo, uint8_t hi, bool count);
gr_re_t *lp__gr_re_cat(gr_rebuf_t *b, gr_re_t **kids, uint32_t n);
gr_re_t *lp__gr_re_alt(gr_rebuf_t *b, gr_re_t **kids, uint32_t n);
gr_re_t *lp__gr_re_cat2(gr_rebuf_t *b, gr_re_t *x, gr_re_t *y);
gr_re_t *lp__gr_re_alt2(gr_rebuf_t *b, gr_re_t *x, gr_re_t *y);
gr_re_t *lp__gr_re_rep(gr_rebuf_t *b, gr_re_t *x, uint32_t min, uint32_t max);
gr_re_t *lp__gr_re_dfa(gr_rebuf_t *b, const struct gr_dfa *d);
/* A literal: the code points of UTF-8 text s (invalid bytes -> GR_RE_BYTES). */
gr_re_t *lp__gr_re_text(gr_rebuf_t *b, const char *s, size_t n);
/* Raw bytes, each matched as itself. */
gr_re_t *lp__gr_re_bytes(gr_rebuf_t *b, const char *s, size_t n);

/* Parse an ECMA-262-style pattern (JSON Schema's "pattern", vLLM's regex).
 * Supported: literals and escapes, classes, \d\w\s\D\W\S, \p{..}, ., groups
 * (capturing, (?:), named), alternation, * + ? {n} {n,} {n,m} (lazy forms
 * too), ^ and $.  Refused with LP_ERR(ENOTSUP) naming the construct:
 * lookaround, backreferences, \b \B, flags.  Errors name the offset. */
int lp__gr_re_parse(gr_rebuf_t *b, const char *pat, size_t len, gr_re_t **out);
/* Whether a tree contains ^ or $. */
bool lp__gr_re_has_anchor(const gr_re_t *r);

/* ---- NFA ------------------------------------------------------------------------ */

enum gr_enc {
    GR_ENC_UTF8, /* characters as UTF-8 */
    GR_ENC_JSON, /* characters as the text inside a JSON string */
};

typedef struct {
    uint32_t to;
    uint8_t kind; /* GR_NE_* */
    uint8_t lo, hi;
    uint8_t count;
} gr_nedge_t;
enum { GR_NE_EPS, GR_NE_BYTE, GR_NE_BOL, GR_NE_EOL };

typedef struct {
    GR_VEC(gr_nedge_t) e;
    GR_VEC(uint32_t) from; /* from[i]: source state of e.v[i] */
    GR_VEC(int32_t) tag;   /* per state: accepting tag or -1 */
    uint32_t n_states;
    uint32_t start;
    uint32_t max_states;   /* refuse past it */
    enum gr_enc enc;
} gr_nfa_t;

int lp__gr_nfa_init(gr_nfa_t *n, enum gr_enc enc, uint32_t max_states);
void lp__gr_nfa_free(gr_nfa_t *n);
/* Add re as one alternative from the start state, accepting with `tag`
 * (>= 0).  LP_ERR(E2BIG) past max_states. */
int lp__gr_nfa_add(gr_nfa_t *n, const gr_re_t *re, int32_t tag);

/* ---- DFA -------------------------------------------------------------------------- */

typedef struct gr_dfa {
    uint32_t n_states; /* state 0 is the start */
    uint32_t n_cls;
    uint8_t cls[256];  /* byte -> class */
    int32_t *next;     /* n_states * n_cls; -1 = dead */
    uint8_t *cnt;      /* n_states * n_cls: the byte starts a counted character; NULL if none */
    int32_t *tag;      /* per state: -1, or the accepting tag (the smallest of the NFA's) */
    uint8_t *sink;     /* per state: no byte leads anywhere */
    /* per state: fewest and most counted characters to an accepting state
     * (UINT32_MAX: unbounded); only when cnt is set */
    uint32_t *dmin, *dmax;
    uint64_t hash;     /* of the canonical form: equal DFAs hash equal */
    atomic_uint refs;  /* DFAs are shared between grammars (the build cache) */
} gr_dfa_t;

static inline int32_t lp__gr_dfa_step(const gr_dfa_t *d, int32_t q, uint8_t b)
{
    return d->next[(size_t)q * d->n_cls + d->cls[b]];
}
static inline bool lp__gr_dfa_final(const gr_dfa_t *d, int32_t q) { return d->tag[q] >= 0; }

/* Determinise, trim, minimise.  LP_ERR(E2BIG) past max_states (the message
 * says so); an empty language gives a DFA with no states (n_states 0). */
int lp__gr_dfa_from_nfa(const gr_nfa_t *n, uint32_t max_states, gr_dfa_t **out);
/* The work all automata built from now on this thread may take together
 * (lp_grammar_compile sets it; 0: each automaton its own bound). */
void lp__gr_dfa_budget(uint64_t steps);
/* Convenience: one regex, tag 0. */
int lp__gr_dfa_from_re(const gr_re_t *re, enum gr_enc enc, uint32_t max_states, gr_dfa_t **out);
/* Regexes res[i] accepting with tags[i], through a process-wide cache of
 * built DFAs keyed by the expressions' exact serialisation (*out is a new
 * reference). */
int lp__gr_dfa_build(const gr_re_t *const *res, const int32_t *tags, uint32_t n, enum gr_enc enc,
                     uint32_t max_states, gr_dfa_t **out);
/* Append an expression's exact serialisation to buf. */
int lp__gr_re_serialize(const gr_re_t *r, lp__gr_u32v_t *buf);
/* Intersection (tags of a; cnt of a). */
int lp__gr_dfa_intersect(const gr_dfa_t *a, const gr_dfa_t *b, uint32_t max_states,
                         gr_dfa_t **out);
/* Fill dmin/dmax (counted DFAs only; idempotent). */
int lp__gr_dfa_lengths(gr_dfa_t *d);
/* Does the DFA accept exactly these bytes?  Returns the tag or -1. */
int32_t lp__gr_dfa_run(const gr_dfa_t *d, const uint8_t *s, size_t n);
void lp__gr_dfa_unref(gr_dfa_t **d);
static inline gr_dfa_t *lp__gr_dfa_ref(gr_dfa_t *d)
{
    atomic_fetch_add_explicit(&d->refs, 1, memory_order_relaxed);
    return d;
}

#endif
