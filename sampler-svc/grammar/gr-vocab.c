/* gr-vocab.c - the vocabulary as the grammar engine sees it: each token's
 * bytes, the trie of all of them (walked once per mask), the
 * end-of-generation tokens. */
#include "gr-internal.h"

#include "error.h"

void lp__gr_shared_free(lp_grammar_vocab_t *v);
int lp__gr_shared_init(lp_grammar_vocab_t *v);

static const lp_grammar_vocab_t *sort_vocab;

static int cmp_tok(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    size_t nx, ny;
    const uint8_t *sx = lp__gr_tok_bytes(sort_vocab, x, &nx);
    const uint8_t *sy = lp__gr_tok_bytes(sort_vocab, y, &ny);
    size_t n = nx < ny ? nx : ny;
    int c = memcmp(sx, sy, n);
    if (c) return c;
    if (nx != ny) return nx < ny ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_trie(lp_grammar_vocab_t *v)
{
    gr_trie_t *t = &v->trie;
    int32_t *ids = malloc((size_t)v->n_tokens * sizeof(int32_t));
    if (!ids) return LP_ERR(ENOMEM);
    uint32_t m = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->off[i + 1] > v->off[i]) ids[m++] = i;
    /* qsort has no context argument in C11: the vocabulary being sorted is
     * held in a static, under the process-wide lock below */
    static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&sort_lock);
    sort_vocab = v;
    qsort(ids, m, sizeof(int32_t), cmp_tok);
    sort_vocab = NULL;
    pthread_mutex_unlock(&sort_lock);
    /* nodes: at most 1 + total bytes */
    size_t cap = 1 + v->off[v->n_tokens];
    t->byte = malloc(cap);
    t->next = malloc(cap * sizeof(uint32_t));
    t->tok0 = malloc(cap * sizeof(uint32_t));
    t->ntok = calloc(cap, sizeof(uint16_t));
    t->depth = malloc(cap);
    t->toks = ids;
    uint32_t *path = malloc((v->max_len + 2) * sizeof(uint32_t)); /* node at each depth */
    if (!t->byte || !t->next || !t->tok0 || !t->ntok || !t->depth || !path) {
        free(path);
        return LP_ERR(ENOMEM);
    }
    uint32_t n = 1;
    t->byte[0] = 0;
    t->tok0[0] = 0;
    t->depth[0] = 0;
    path[0] = 0;
    uint32_t open = 0; /* depth of the deepest open node */
    const uint8_t *prev = NULL;
    size_t nprev = 0;
    for (uint32_t i = 0; i < m; i++) {
        size_t len;
        const uint8_t *s = lp__gr_tok_bytes(v, ids[i], &len);
        size_t lcp = 0;
        while (prev && lcp < len && lcp < nprev && s[lcp] == prev[lcp]) lcp++;
        /* close the nodes deeper than the common prefix */
        while (open > lcp) {
            t->next[path[open]] = n;
            open--;
        }
        for (size_t d = lcp; d < len; d++) {
            uint32_t k = n++;
            t->byte[k] = s[d];
            t->tok0[k] = i;
            t->ntok[k] = 0;
            t->depth[k] = (uint8_t)(d + 1 > 255 ? 255 : d + 1);
            path[++open] = k;
        }
        uint32_t leaf = path[len];
        if (!t->ntok[leaf]) t->tok0[leaf] = i;
        if (t->ntok[leaf] == UINT16_MAX) {
            free(path);
            return lp_error_set(LP_ERR(EINVAL), "vocabulary: too many tokens with the same text");
        }
        t->ntok[leaf]++;
        prev = s;
        nprev = len;
    }
    while (open > 0) {
        t->next[path[open]] = n;
        open--;
    }
    t->next[0] = n;
    t->n_nodes = n;
    free(path);
    return 0;
}

int lp_grammar_vocab_new(const lp_tokenizer_t *tok, lp_grammar_vocab_t **out)
{
    lp_grammar_vocab_t *v = calloc(1, sizeof(*v));
    if (!v) return lp_error_set(LP_ERR(ENOMEM), "grammar vocabulary: out of memory");
    pthread_mutex_init(&v->lock, NULL);
    int rc = 0;
    int32_t n = lp_tokenizer_n_tokens(tok);
    v->n_tokens = n;
    v->words = lp__gr_words((size_t)n);
    v->off = malloc(((size_t)n + 1) * sizeof(uint32_t));
    v->eog = calloc(v->words, sizeof(uint64_t));
    if (!v->off || !v->eog) goto oom;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        int t = lp_tokenizer_token_type(tok, i);
        /* control and unused tokens have no text the grammar can match */
        if (t == LP_TOKEN_CONTROL || t == LP_TOKEN_UNUSED || t == LP_TOKEN_UNKNOWN ||
            lp_token_piece(tok, i, false, &p, &len))
            len = 0;
        total += len;
    }
    v->bytes = malloc(total ? total : 1);
    if (!v->bytes) goto oom;
    size_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *p = NULL;
        size_t len;
        int t = lp_tokenizer_token_type(tok, i);
        v->off[i] = (uint32_t)at;
        if (t == LP_TOKEN_CONTROL || t == LP_TOKEN_UNUSED || t == LP_TOKEN_UNKNOWN ||
            lp_token_piece(tok, i, false, &p, &len))
            len = 0;
        if (len > 255) len = 0; /* no grammar step is that long; never allowed */
        if (len) memcpy(v->bytes + at, p, len);
        at += len;
        if (len > v->max_len) v->max_len = (uint32_t)len;
        if (lp_tokenizer_is_eog(tok, i)) {
            lp__gr_bset(v->eog, (size_t)i);
            v->n_eog++;
        }
    }
    v->off[n] = (uint32_t)at;
    v->eog_ids = malloc((v->n_eog ? v->n_eog : 1) * sizeof(int32_t));
    if (!v->eog_ids) goto oom;
    for (int32_t i = 0, k = 0; i < n; i++)
        if (lp__gr_btest(v->eog, (size_t)i)) v->eog_ids[k++] = i;
    rc = build_trie(v);
    if (rc) goto fail;
    v->first = calloc(256 * v->words, sizeof(uint64_t));
    if (!v->first) goto oom;
    for (int32_t i = 0; i < n; i++)
        if (v->off[i + 1] > v->off[i]) lp__gr_bset(v->first + (size_t)v->bytes[v->off[i]] * v->words, (size_t)i);
    rc = lp__gr_shared_init(v);
    if (rc) goto fail;
    *out = v;
    return 0;
oom:
    rc = LP_ERR(ENOMEM);
fail:
    lp_grammar_vocab_destroy(&v);
    if (rc == LP_ERR(ENOMEM)) lp_error_set(rc, "grammar vocabulary: out of memory");
    return rc;
}

void lp_grammar_vocab_destroy(lp_grammar_vocab_t **vp)
{
    lp_grammar_vocab_t *v = *vp;
    if (!v) return;
    *vp = NULL;
    lp__gr_shared_free(v);
    free(v->bytes);
    free(v->off);
    free(v->eog);
    free(v->eog_ids);
    free(v->first);
    free(v->trie.byte);
    free(v->trie.next);
    free(v->trie.tok0);
    free(v->trie.ntok);
    free(v->trie.depth);
    free(v->trie.toks);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

int32_t lp_grammar_vocab_n_tokens(const lp_grammar_vocab_t *v) { return v->n_tokens; }
size_t lp_grammar_mask_words(const lp_grammar_vocab_t *v) { return v->words; }
