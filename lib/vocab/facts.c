/* facts.c - the vocabulary facts (see vocab-facts.h). */
#include "vocab-facts.h"

#include "error.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void lp_vocab_facts(const lp_gguf_t *g, uint32_t *n_tokens, uint64_t *hash)
{
    const lp_gguf_str_t *strs;
    uint64_t n;
    *n_tokens = 0;
    *hash = 0;
    if (lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &strs, &n) != 0) return;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t k = 0; k < strs[i].len; k++) {
            h ^= (uint8_t)strs[i].ptr[k];
            h *= 0x100000001b3ULL;
        }
        h *= 0x100000001b3ULL; /* the 0 separator: xor of 0 is a no-op */
    }
    *n_tokens = (uint32_t)n;
    *hash = h;
}

/* The logit row length is the embedding's row count, not the tokenizer's
 * size: padded vocabularies (qwen2) have more rows than tokens. */
static int n_vocab_of(const lp_gguf_t *g, int32_t *n_vocab)
{
    const lp_gguf_tensor_t *t = lp_gguf_find_tensor(g, "token_embd.weight");
    if (!t) return lp_error_set(LP_ERR(EINVAL), "missing tensor 'token_embd.weight'");
    if (t->n_dims != 2 || t->ne[1] <= 0)
        return lp_error_set(LP_ERR(EINVAL), "tensor 'token_embd.weight': shape %lld x %lld x "
                            "%lld, expected n_embd x n_vocab", (long long)t->ne[0],
                            (long long)t->ne[1], (long long)t->ne[2]);
    if (t->ne[1] > INT32_MAX)
        return lp_error_set(LP_ERR(EINVAL), "tensor 'token_embd.weight': %lld rows is too many",
                            (long long)t->ne[1]);
    *n_vocab = (int32_t)t->ne[1];
    return 0;
}

int lp_vocab_facts_load(const lp_gguf_t *g, lp_vocab_facts_t *f)
{
    memset(f, 0, sizeof(*f));
    int32_t n = 0;
    int rc = n_vocab_of(g, &n);
    if (rc) return rc;
    uint8_t *mask = calloc((size_t)n, 1);
    if (!mask) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    const void *types = NULL;
    uint64_t n_types = 0, n_tok = 0;
    const lp_gguf_str_t *toks;
    if (lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &toks, &n_tok)) n_tok = (uint64_t)n;
    if (lp_gguf_get_arr(g, "tokenizer.ggml.token_type", LP_GGUF_INT32, &types, &n_types))
        n_types = 0;
    int32_t last_real = -1;
    for (int32_t i = 0; i < n; i++) {
        bool unused = (uint64_t)i >= n_tok;
        if ((uint64_t)i < n_types && lp_gguf_num_at(LP_GGUF_INT32, types, (uint64_t)i) == 5)
            unused = true;
        mask[i] = unused;
        if (!unused) last_real = i;
    }
    for (int32_t i = last_real + 1; i < n; i++) mask[i] = 1;
    f->n_vocab = n;
    f->n_tokens_real = last_real + 1;
    f->token_mask = mask;
    lp_vocab_facts(g, &f->n_tokens, &f->hash);
    return 0;
}

void lp_vocab_facts_clear(lp_vocab_facts_t *f)
{
    if (!f) return;
    free(f->token_mask);
    memset(f, 0, sizeof(*f));
}
