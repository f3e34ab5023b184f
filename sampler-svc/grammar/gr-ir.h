/* gr-ir.h - a compiled grammar: the rules every input kind (JSON Schema,
 * GBNF, regex, choice, JSON mode) compiles to, and what the matcher runs.
 * Internal to sampler-svc/grammar.
 *
 * Two kinds of rule:
 *   LEX  a DFA over bytes (a lexeme): strings, numbers, literals, keys,
 *        punctuation with its whitespace.  Every byte of the output is
 *        consumed inside some LEX rule.
 *   SEQ  an automaton whose edges call other rules (LEX or SEQ) and go to
 *        a target state when the callee returns; no bytes of its own.
 *        Edges may carry a guard and an action on the frame's counter and
 *        seen-set: that is how objects take their properties in any order
 *        (each at most once, the required ones before '}') and arrays count
 *        their items (minItems, maxItems, prefixItems), without unrolling.
 *
 * The matcher's state is a set of configurations: a LEX rule and DFA state
 * on top of a persistent stack of SEQ frames (gr-match.c). */
#ifndef LP_GR_IR_H
#define LP_GR_IR_H

#include "gr-fa.h"

#define GR_NONE UINT32_MAX
#define GR_TAG_ANY (-1)
#define GR_TAG_DISPATCH (-2) /* target = edge.to + the callee's tag */

enum gr_rule_kind { GR_LEX = 1, GR_SEQ = 2 };

enum gr_guard {
    GR_G_NONE,
    GR_G_LT,    /* ctr < arg */
    GR_G_GE,    /* ctr >= arg */
    GR_G_EQ,    /* ctr == arg */
    GR_G_RANGE, /* arg <= ctr < arg2 */
    GR_G_KEY,   /* object: the popped key's tag may be added (see gr-match.c) */
    GR_G_CLOSE, /* object: '}' allowed (required present, counts met) */
    GR_G_MORE,  /* object: ',' allowed (some key can still be added) */
};

enum gr_action {
    GR_A_NONE,
    GR_A_INC,  /* ctr + 1 */
    GR_A_MARK, /* object: ctr + 1, and the key's tag marked seen if named */
};

typedef struct {
    uint32_t callee;
    int32_t tag;      /* GR_TAG_ANY, a tag, or GR_TAG_DISPATCH */
    uint32_t to;
    uint8_t guard, action;
    uint32_t arg, arg2;
} gr_edge_t;

/* An object's bookkeeping: named properties are tags 0..n_named-1 of its
 * key lexeme; larger tags are patternProperties / additionalProperties
 * keys, which may repeat and are not tracked. */
typedef struct {
    uint32_t n_named;
    uint32_t words;          /* bitset words for n_named */
    uint64_t *required;      /* n_named bits */
    uint64_t *avail;         /* n_named bits: names the key lexeme can spell */
    uint32_t n_required;
    uint32_t min_props, max_props; /* max GR_NONE: none */
    bool other_keys;         /* keys beyond the named ones exist */
    /* dependentRequired: if dep_key[i] present then dep_set[i] (bitset) too */
    uint32_t n_deps;
    uint32_t *dep_key;
    uint64_t *dep_set;       /* n_deps * words */
} gr_obj_t;

typedef struct gr_rule {
    uint8_t kind;
    char *name; /* for messages and debugging */
    /* LEX */
    gr_dfa_t *dfa;
    uint32_t min_len, max_len;   /* counted characters; max GR_NONE: none */
    bool counted;
    bool tail;                   /* called by a SEQ rule: bytes may follow it */
    const gr_obj_t *key_of;      /* a key lexeme: its liveness depends on the object's frame */
    uint64_t *reach;             /* key lexeme: per state, bitset of tags reachable */
    uint32_t reach_words;
    uint32_t n_tags;             /* key lexeme: tags 0..n_tags-1 */
    int32_t pure;                /* key lexeme: the state of an other key's content past any
                                    name (-1: none); see gr-mask.c's delta tables */
    /* SEQ */
    uint32_t n_states;
    uint32_t *efirst;            /* n_states + 1 */
    gr_edge_t *edges;
    uint8_t *final;              /* per state */
    gr_obj_t *obj;               /* object rules */
    /* the matcher's caches (gr-mask.c), filled lazily or at compile time */
    void *mask_cache;
} gr_rule_t;

typedef struct gr_grammar gr_grammar_t;
struct gr_grammar {
    GR_VEC(gr_rule_t) rules;
    uint32_t root;
    lp__gr_arena_t arena;        /* names, objects, edges */
};

/* ---- building ---------------------------------------------------------------------- */

/* A SEQ rule under construction: states and edges. */
typedef struct {
    GR_VEC(gr_edge_t) e;
    lp__gr_u32v_t from;
    GR_VEC(uint8_t) final;
} gr_seqb_t;

void lp__gr_grammar_init(gr_grammar_t *g);
void lp__gr_grammar_free(gr_grammar_t *g);
/* Add a LEX rule; takes ownership of dfa (even on failure).  Returns the
 * rule id or a negative error. */
int64_t lp__gr_add_lex(gr_grammar_t *g, gr_dfa_t *dfa, const char *name);
/* Reserve a SEQ rule id (to be filled by lp__gr_set_seq: recursion). */
int64_t lp__gr_add_seq(gr_grammar_t *g, const char *name);
uint32_t lp__gr_seqb_state(gr_seqb_t *b);     /* new state; GR_NONE on OOM */
int lp__gr_seqb_edge(gr_seqb_t *b, uint32_t from, gr_edge_t e);
void lp__gr_seqb_free(gr_seqb_t *b);
/* Move b's content into rule id (a reserved SEQ). */
int lp__gr_set_seq(gr_grammar_t *g, uint32_t id, gr_seqb_t *b);

/* After building: drop unproductive rules and states, check for left
 * recursion and an empty language.  Errors name the rule. */
int lp__gr_finalize(gr_grammar_t *g);

static inline const gr_edge_t *lp__gr_edges(const gr_rule_t *r, uint32_t s, uint32_t *n)
{
    *n = r->efirst[s + 1] - r->efirst[s];
    return r->edges + r->efirst[s];
}

#endif
