/* breakers.h - DRY sequence breakers as token sequences: text breakers
 * ("\n", ":", ...) resolved against the vocabulary the way llama.cpp's
 * get_overlapping_token_sequences does, plus breakers given as token IDs. */
#ifndef LP_SAMPLER_BREAKERS_H
#define LP_SAMPLER_BREAKERS_H

#include <stddef.h>
#include <stdint.h>

#include "sampling-params.h"

#define LP_DRY_MAX_TAIL 20 /* llama.cpp's MAX_SEQ_LEN */

/* The vocabulary as text, for resolving text breakers (the service wires it
 * to the tokenizer library).  Callbacks must be safe to call from any thread. */
typedef struct lp_sampler_vocab_text {
    int32_t n_tokens;
    /* The text of one token (special tokens as their text); borrowed. */
    int (*piece)(void *user, int32_t id, const char **text, size_t *len);
    /* Tokenize without BOS/EOS and without special-token parsing; writes at
     * most cap ids, the full count to *n_out. */
    int (*tokenize)(void *user, const char *text, size_t len, int32_t *out, size_t cap,
                    size_t *n_out);
    void *user;
} lp_sampler_vocab_text_t;

/* One breaker: a head token and the tokens that follow it in the text. */
typedef struct lp_dry_breaker {
    int32_t head;
    int32_t tail_len; /* 0: the head alone is a breaker */
    int32_t tail[LP_DRY_MAX_TAIL];
} lp_dry_breaker_t;

typedef struct lp_dry_breakers {
    size_t n;
    lp_dry_breaker_t *v; /* sorted by head; owned */
} lp_dry_breakers_t;

/* Resolve p's text breakers against vt (NULL: none resolved) and add p's
 * ID breakers.  *out owns a new table. */
int lp_dry_breakers_build(const lp_sampler_vocab_text_t *vt, const lp_sampler_params_t *p,
                          lp_dry_breakers_t **out);
/* A new table: `text` (may be NULL) plus p's ID breakers. */
int lp_dry_breakers_with_ids(const lp_dry_breakers_t *text, const lp_sampler_params_t *p,
                             lp_dry_breakers_t **out);
/* A copy of a table (NULL gives an empty one); NULL on out-of-memory. */
lp_dry_breakers_t *lp_dry_breakers_copy(const lp_dry_breakers_t *b);
void lp_dry_breakers_destroy(lp_dry_breakers_t **self_p);
/* Index of the first entry with this head, or b->n. */
size_t lp_dry_breakers_find(const lp_dry_breakers_t *b, int32_t head);

#endif
