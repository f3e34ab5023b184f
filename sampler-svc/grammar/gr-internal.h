/* gr-internal.h - what the engine's files share: the vocabulary's trie, the
 * compiled grammar object, matcher configurations and their closure.
 * Internal to sampler-svc/grammar. */
#ifndef LP_GR_INTERNAL_H
#define LP_GR_INTERNAL_H

#include "grammar.h"
#include "gr-ir.h"

#include <pthread.h>
#include <stdatomic.h>

/* ---- vocabulary ------------------------------------------------------------------------- */

/* The trie of all tokens' bytes, nodes in preorder: node i's children are
 * i+1, next[i+1], next[next[i+1]], ... up to next[i]; node 0 is the root. */
typedef struct {
    uint32_t n_nodes;
    uint8_t *byte;   /* per node */
    uint32_t *next;  /* per node: index past its subtree */
    uint32_t *tok0;  /* per node: first of its tokens in toks (tokens ending there) */
    uint16_t *ntok;  /* per node */
    uint8_t *depth;  /* per node (root 0), capped at 255 */
    int32_t *toks;   /* token ids in trie order */
} gr_trie_t;

struct lp_grammar_vocab {
    int32_t n_tokens;
    size_t words;
    uint8_t *bytes;    /* token i: bytes[off[i] .. off[i+1]) */
    uint32_t *off;
    uint32_t max_len;
    gr_trie_t trie;
    uint64_t *eog;     /* bitset: end-of-generation tokens */
    int32_t *eog_ids;
    uint32_t n_eog;
    uint64_t *first;   /* 256 bitsets: the tokens starting with each byte */
    /* tables of lexemes common to many grammars, keyed by DFA hash (gr-mask.c) */
    pthread_mutex_t lock;
    void *shared;
};

static inline const uint8_t *lp__gr_tok_bytes(const lp_grammar_vocab_t *v, int32_t id, size_t *n)
{
    *n = v->off[id + 1] - v->off[id];
    return v->bytes + v->off[id];
}

/* ---- a compiled grammar -------------------------------------------------------------------- */

struct lp_grammar {
    gr_grammar_t g;
    lp_grammar_vocab_t *vocab; /* borrowed */
    atomic_int refs;
    pthread_mutex_t lock;      /* lazily built mask tables */
};

/* ---- configurations -------------------------------------------------------------------------- */

/* A SEQ rule's frame: the state it returns to, its counter and seen-set.
 * Immutable once built, shared by all the stacks above it. */
typedef struct gr_frame gr_frame_t;
struct gr_frame {
    uint32_t rule, state, ctr;
    uint32_t hash;
    const uint64_t *seen; /* object frames: named properties present (NULL: none) */
    const gr_frame_t *parent; /* NULL: the root's caller */
};

/* The top of a stack: a LEX rule in DFA state `state`. */
typedef struct {
    uint32_t rule;
    int32_t state;
    uint32_t ctr;
    uint32_t hash;
    const gr_frame_t *parent;
} gr_cfg_t;

typedef struct {
    gr_cfg_t *v;
    uint32_t n, cap;
    bool end; /* the grammar is complete here */
} gr_cfgs_t;

#define GR_MAX_CFGS 2048u   /* parallel parses followed at most */
#define GR_MAX_DEPTH 4096u  /* nesting of rules */

typedef GR_VEC(const gr_frame_t *) gr_framev_t;

/* What a closure needs: where frames go, dedup of what was expanded. */
typedef struct {
    const gr_grammar_t *g;
    lp__gr_arena_t *arena;
    gr_cfgs_t *out;
    gr_framev_t visited;
    int err;
} gr_ctx_t;

bool lp__gr_frame_eq(const gr_frame_t *a, const gr_frame_t *b);
/* Add LEX config (rule, state, ctr, parent) to ctx->out, with the pops its
 * final state allows. */
void lp__gr_add_cfg(gr_ctx_t *c, uint32_t rule, int32_t state, uint32_t ctr,
                    const gr_frame_t *parent);
/* The configurations of a grammar's start. */
int lp__gr_start(const gr_grammar_t *g, lp__gr_arena_t *arena, gr_cfgs_t *out);
/* One byte from `in` into `out` (cleared first). */
int lp__gr_step(const gr_grammar_t *g, lp__gr_arena_t *arena, const gr_cfgs_t *in, uint8_t b,
                gr_cfgs_t *out, gr_framev_t *visited);
int lp__gr_cfgs_reserve(gr_cfgs_t *s, uint32_t n);
void lp__gr_cfgs_free(gr_cfgs_t *s);

/* Add what the return of callee (with tag) to frame p allows. */
void lp__gr_pop(gr_ctx_t *c, uint32_t callee, int32_t tag, const gr_frame_t *p);
/* Whether a key lexeme's state can still end in a key the object takes. */
bool lp__gr_key_live(const gr_rule_t *r, int32_t q, const gr_frame_t *obj);

/* ---- masks (gr-mask.c) ---------------------------------------------------------------------------- */

/* A mask's working memory, kept by the matcher between masks. */
typedef struct {
    lp__gr_arena_t arena;
    gr_cfgs_t *lvl;   /* a configuration set per trie depth */
    uint32_t nlvl;
    gr_framev_t visited;
    gr_cfgs_t pop;    /* what a lexeme's return allows */
    uint64_t *excl;   /* a mask's worth of scratch bits */
} gr_scratch_t;

void lp__gr_scratch_free(gr_scratch_t *s);
int lp__gr_fill_mask(const lp_grammar_t *G, const gr_cfgs_t *cur, gr_scratch_t *scratch,
                     uint64_t *mask);
/* The same mask by the plain walk of the token trie, stepping every byte
 * (the reference the tables are tested against). */
int lp__gr_fill_mask_naive(const lp_grammar_t *G, const gr_cfgs_t *cur, gr_scratch_t *scratch,
                           uint64_t *mask);
int lp__gr_matcher_mask_naive(lp_grammar_matcher_t *m, uint64_t *mask);

/* ---- compilers ----------------------------------------------------------------------------------- */

typedef struct {
    bool compact;
} gr_json_opts_t;

/* Automaton steps one lp_grammar_compile may take (tests lower it). */
extern uint64_t lp__gr_compile_work;
int lp__gr_compile_schema(gr_grammar_t *g, const char *text, size_t len, const gr_json_opts_t *o);
int lp__gr_compile_json_object(gr_grammar_t *g, const gr_json_opts_t *o);
int lp__gr_compile_gbnf(gr_grammar_t *g, const char *text, size_t len, const lp_grammar_schema_rule_t *ext,
                        size_t n_ext, const gr_json_opts_t *o);
int lp__gr_compile_regex(gr_grammar_t *g, const char *text, size_t len);
int lp__gr_compile_choice(gr_grammar_t *g, const char *text, size_t len);

#endif
