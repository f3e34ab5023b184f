/* vocab-text.h - the vocabulary (lib/vocab) as the sampler store's
 * vocabulary text (DRY's text sequence breakers).  Header-only, so that the
 * sampler library's users that never resolve text breakers (lmpipe sample,
 * the fuzzers) do not link the vocabulary; the includer links both. */
#ifndef LP_SAMPLER_VOCAB_TEXT_H
#define LP_SAMPLER_VOCAB_TEXT_H

#include "breakers.h"
#include "tokenizer.h"

static inline int lp__vocab_text_piece(void *user, int32_t id, const char **text, size_t *len)
{
    return lp_token_piece(user, id, true, text, len);
}

static inline int lp__vocab_text_tokenize(void *user, const char *text, size_t len,
                                          int32_t *out, size_t cap, size_t *n_out)
{
    return lp_tokenize(user, text, len, false, false, out, cap, n_out);
}

/* `tok` is borrowed and must outlive the store that gets the result. */
static inline lp_sampler_vocab_text_t lp_sampler_vocab_text_of(lp_tokenizer_t *tok)
{
    lp_sampler_vocab_text_t vt = {lp_tokenizer_n_tokens(tok), lp__vocab_text_piece,
                                  lp__vocab_text_tokenize, tok};
    return vt;
}

#endif
