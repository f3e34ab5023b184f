/* vocab-facts.h - what every service must agree on about a model's
 * vocabulary, read from the GGUF's tensor info and tokenizer metadata only
 * (no weight is read or checked): the logit row length, the real tokens,
 * the tokens never to sample, and the hash the hellos compare.  The engine
 * and sampler-svc both take them from here, so they cannot disagree. */
#ifndef LP_VOCAB_FACTS_H
#define LP_VOCAB_FACTS_H

#include <stdint.h>

#include "gguf.h"

typedef struct lp_vocab_facts {
    int32_t n_vocab;       /* logit row length: the rows of token_embd.weight */
    int32_t n_tokens_real; /* tokens up to the last one not unused/padding */
    uint32_t n_tokens;     /* entries in tokenizer.ggml.tokens; 0 when absent */
    uint64_t hash;         /* lp_vocab_facts()'s hash; 0 when no tokens */
    uint8_t *token_mask;   /* (n_vocab) 1 = never sample; owned, malloc'd */
} lp_vocab_facts_t;

/* Fill *f from g.  n_vocab comes from the shape of token_embd.weight
 * (n_embd x n_vocab): LP_ERR(EINVAL) naming the tensor when it is missing,
 * not 2-D or has more than INT32_MAX rows.  Masked: tokens of type 5
 * (unused: llama.cpp's padding entries such as [PAD151935]), rows past the
 * tokenizer's list, and every row after the last real token.  Free with
 * lp_vocab_facts_clear(). */
int lp_vocab_facts_load(const lp_gguf_t *g, lp_vocab_facts_t *f);
/* Free the mask and zero *f; safe on a zeroed or cleared struct. */
void lp_vocab_facts_clear(lp_vocab_facts_t *f);

/* The hello's vocabulary facts alone: tokenizer size and FNV-1a 64 over the
 * token strings (each followed by a 0 byte).  0 and 0 when g has no
 * tokenizer.ggml.tokens. */
void lp_vocab_facts(const lp_gguf_t *g, uint32_t *n_tokens, uint64_t *hash);

#endif
