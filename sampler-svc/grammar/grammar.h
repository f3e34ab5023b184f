/* grammar.h - constrained decoding: the grammar engine of the sampler.
 *
 * A grammar (JSON Schema, JSON mode, llama.cpp GBNF, a regular expression
 * or a list of choices) is compiled once against a vocabulary into an
 * immutable lp_grammar_t that any number of sequences share.  Each sequence
 * owns a matcher: the allowed-token bitset for its next step, then the token
 * it took, until end of generation is allowed (only where the grammar is
 * complete).  docs/SAMPLER.md ("Grammar engine") has the design, the JSON
 * Schema subset and what is refused.
 *
 * Errors: functions return 0 or a negative LP_ERR code and set
 * lp_error_msg(): a schema or grammar the engine cannot enforce exactly is
 * refused at compile time with LP_ERR(ENOTSUP) and a message naming the
 * keyword or construct; malformed input is LP_ERR(EINVAL); one past the
 * engine's bounds on size, time or ambiguity is LP_ERR(E2BIG).
 *
 * Threads: a vocabulary, a compiled grammar and the cache may be used from
 * any number of threads at once.  A matcher belongs to one thread at a time.
 */
#ifndef LP_GRAMMAR_H
#define LP_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct lp_grammar_vocab lp_grammar_vocab_t;
typedef struct lp_grammar lp_grammar_t;
typedef struct lp_grammar_matcher lp_grammar_matcher_t;
typedef struct lp_grammar_cache lp_grammar_cache_t;

/* ---- vocabulary ------------------------------------------------------------------ */

/* The token trie and the tables shared by every grammar over this
 * vocabulary.  Copies what it needs: tok may be destroyed afterwards. */
int lp_grammar_vocab_new(const lp_tokenizer_t *tok, lp_grammar_vocab_t **out);
void lp_grammar_vocab_destroy(lp_grammar_vocab_t **self_p);
int32_t lp_grammar_vocab_n_tokens(const lp_grammar_vocab_t *v);
/* Words of a mask: one bit per token, (n_tokens + 63) / 64. */
size_t lp_grammar_mask_words(const lp_grammar_vocab_t *v);

/* ---- compile ----------------------------------------------------------------------- */

enum lp_grammar_kind {
    LP_GRAMMAR_JSON_SCHEMA = 1, /* text: a JSON Schema */
    LP_GRAMMAR_JSON_OBJECT,     /* JSON mode: any JSON object (text ignored) */
    LP_GRAMMAR_GBNF,            /* text: llama.cpp GBNF, start rule "root" */
    LP_GRAMMAR_REGEX,           /* text: a regular expression, the whole output */
    LP_GRAMMAR_CHOICE,          /* text: a JSON array of strings */
};

/* A GBNF rule defined by a JSON Schema instead of the grammar's text: what
 * lib/chat's tool-call grammars leave to the engine (lp_chat_grammar_t's
 * refs, "args-0" = a function's parameters). */
typedef struct {
    const char *name;   /* NUL-terminated rule name */
    const char *schema; /* JSON Schema text, schema_len bytes */
    size_t schema_len;
} lp_grammar_schema_rule_t;

typedef struct {
    enum lp_grammar_kind kind;
    const char *text; /* borrowed for the call; need not be NUL-terminated */
    size_t len;
    /* JSON: no whitespace between tokens.  Default (false): any whitespace
     * JSON allows between tokens, none before the value or after it. */
    bool compact;
    /* GBNF only: rules the text references but does not define, each
     * compiled from its JSON Schema (with `compact` as above); borrowed for
     * the call.  A rule both defined in the text and here is refused. */
    const lp_grammar_schema_rule_t *schema_rules;
    size_t n_schema_rules;
} lp_grammar_spec_t;

/* Compile spec for vocabulary v (borrowed: it must outlive the grammar).
 * *out has one reference. */
int lp_grammar_compile(lp_grammar_vocab_t *v, const lp_grammar_spec_t *spec, lp_grammar_t **out);
lp_grammar_t *lp_grammar_ref(lp_grammar_t *g);
void lp_grammar_unref(lp_grammar_t **self_p);
/* The key of a spec in the cache (kind, options, text). */
uint64_t lp_grammar_spec_hash(const lp_grammar_spec_t *spec);

/* A cache of compiled grammars keyed by lp_grammar_spec_hash (text compared
 * too), least recently used evicted past `capacity` entries.  Refusals are
 * cached as well, so a hostile schema costs its compile time once. */
int lp_grammar_cache_new(lp_grammar_vocab_t *v, uint32_t capacity, lp_grammar_cache_t **out);
void lp_grammar_cache_destroy(lp_grammar_cache_t **self_p);
/* The grammar for spec: from the cache or compiled now.  *out gets a new
 * reference (lp_grammar_unref it); *hit (may be NULL) says which. */
int lp_grammar_cache_get(lp_grammar_cache_t *c, const lp_grammar_spec_t *spec, lp_grammar_t **out,
                         bool *hit);

/* ---- match --------------------------------------------------------------------------- */

/* A matcher at the grammar's start; takes a reference to g. */
int lp_grammar_matcher_new(lp_grammar_t *g, lp_grammar_matcher_t **out);
void lp_grammar_matcher_destroy(lp_grammar_matcher_t **self_p);
/* The tokens allowed next: bit i of mask (lp_grammar_mask_words words) set
 * when token i may follow.  The end-of-generation tokens (the tokenizer's
 * EOG set: EOS, EOT, ...) are set exactly when the grammar is complete here.
 * Bits past the vocabulary's tokens are never set.  Errors, with the mask
 * all zero: LP_ERR(ENOENT) when no token at all may follow (after end of
 * generation; or a dead end: the grammar needs text that no token spells, or
 * it is complete and the vocabulary has no EOG token): the sequence must
 * end with an error, never sample from an empty mask; LP_ERR(E2BIG) when the
 * grammar is too ambiguous at this point to follow within the engine's
 * bounds. */
int lp_grammar_matcher_fill_mask(lp_grammar_matcher_t *m, uint64_t *mask);
/* Apply a mask to a logit row of n_logits (which may be longer than the
 * vocabulary: padding ids): every token outside the mask, and every id past
 * the vocabulary, gets -inf.  Returns how many tokens stay samplable (a
 * finite or +inf logit), or LP_ERR(ENOENT) when none does, so that a
 * softmax over the row never sees only -inf (NaN). */
int lp_grammar_mask_apply(const lp_grammar_vocab_t *v, const uint64_t *mask, float *logits, int32_t n_logits);
/* Take token id.  An end-of-generation token is taken only where the grammar
 * is complete, and ends it.  LP_ERR(EINVAL) when the token is not allowed
 * (the matcher is unchanged). */
int lp_grammar_matcher_accept(lp_grammar_matcher_t *m, int32_t id);
/* Take a token's text instead (bytes not from the vocabulary: for tests and
 * for text a client forces). */
int lp_grammar_matcher_accept_bytes(lp_grammar_matcher_t *m, const char *s, size_t n);
/* The grammar is complete here: end of generation may come next. */
bool lp_grammar_matcher_end_allowed(const lp_grammar_matcher_t *m);
/* An end-of-generation token has been taken. */
bool lp_grammar_matcher_done(const lp_grammar_matcher_t *m);
/* Undo the last n accepted tokens (n <= lp_grammar_matcher_history()). */
int lp_grammar_matcher_rollback(lp_grammar_matcher_t *m, uint32_t n);
uint32_t lp_grammar_matcher_history(const lp_grammar_matcher_t *m);
/* An independent copy (same grammar, same position, its own history). */
int lp_grammar_matcher_clone(const lp_grammar_matcher_t *m, lp_grammar_matcher_t **out);
/* Back to the grammar's start, history emptied (a sequence restarted). */
int lp_grammar_matcher_reset(lp_grammar_matcher_t *m);

/* Memory.  A matcher holds its parse stacks, the last 64 states (rollback)
 * and a mask's scratch; the grammar's tables are shared and bounded by the
 * vocabulary object.  A token that would take a matcher's live parse state
 * past its cap is refused with LP_ERR(E2BIG) and the matcher is left as it
 * was (the request fails cleanly; deep nesting and ambiguity are bounded
 * earlier, by depth and configuration count). */
#define LP_GRAMMAR_MATCHER_MAX_BYTES ((size_t)64 << 20)
size_t lp_grammar_matcher_bytes(const lp_grammar_matcher_t *m);
/* 0 restores the default. */
void lp_grammar_matcher_set_max_bytes(lp_grammar_matcher_t *m, size_t max_bytes);

#endif
