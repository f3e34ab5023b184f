/* guard_test.c - the vocabulary guard on the padded qwen2 vocabulary: the
 * vocabulary's n_tokens_real and token mask (lib/vocab, as sampler-svc
 * reads them) go into the store, every excluded
 * token gets the largest logits of the row, and no sampling setting may
 * return one of them.  Each setting also runs as sampler-svc runs it
 * (lp_sampler_seq_pick, then lp_sampler_seq_logprobs), which must give the
 * same tokens, logprobs and top tokens as lp_sampler_seq_sample, with and
 * without n_probs (logprobs come only with it).
 *
 * args: synth-qwen2-Q8_0.gguf */
#include "sampler.h"
#include "seq-json.h"
#include "vocab-facts.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: guard_test MODEL.gguf\n");
        return 2;
    }
    lp_gguf_t *g = NULL;
    lp_vocab_facts_t facts;
    if (lp_gguf_open(argv[1], &g) || lp_vocab_facts_load(g, &facts)) {
        fprintf(stderr, "%s\n", lp_error_msg());
        lp_gguf_destroy(&g);
        return 1;
    }
    const lp_vocab_facts_t *hp = &facts;
    const uint8_t *mask = hp->token_mask;
    int32_t n = hp->n_vocab;
    int32_t excluded = 0;
    for (int32_t i = 0; i < n; i++) excluded += mask[i] != 0;
    /* the padded qwen2 vocabulary: 151936 rows, fewer real tokens */
    CHECK(n == 151936);
    CHECK(hp->n_tokens_real < n);
    CHECK(excluded >= n - hp->n_tokens_real && excluded > 0);

    lp_sampler_store_t *st;
    CHECK_RC(lp_sampler_store_new(NULL, &st), 0);
    CHECK_RC(lp_sampler_store_set_vocab(st, hp->n_tokens_real, mask, n), 0);

    /* a row where every excluded token stands far above the rest */
    float *row = malloc((size_t)n * sizeof(float));
    for (int32_t i = 0; i < n; i++)
        row[i] = mask[i] ? 40.0f + (float)(i % 7) : (float)((i * 7919) % 1000) / 250.0f;
    for (int32_t i = 1000; i < 1010; i++) row[i] = NAN; /* guarded to -inf */

    const char *settings[] = {
        "{\"seed\":1,\"temperature\":0}",
        "{\"seed\":2,\"temperature\":3,\"top_k\":0,\"top_p\":1,\"min_p\":0}",
        "{\"seed\":3}",
        "{\"seed\":4,\"temperature\":1,\"top_k\":0,\"top_p\":0.5,\"samplers\":[\"top_p\"]}",
        "{\"seed\":5,\"temperature\":2,\"mirostat\":2}",
        "{\"seed\":6,\"temperature\":2,\"typical_p\":0.9,\"top_k\":0,\"min_p\":0,\"top_p\":1}",
        "{\"seed\":7,\"temperature\":1,\"xtc_probability\":1,\"xtc_threshold\":0.001}",
        "{\"seed\":8,\"top_n_sigma\":1,\"top_k\":0}",
        "{\"seed\":9,\"n_probs\":8}",
    };
    size_t n_settings = sizeof(settings) / sizeof(settings[0]);
    for (size_t s = 0; s < 2 * n_settings; s++) {
        /* each setting as it is, then with logprobs (n_probs 4) asked for */
        char with[256];
        const char *set = settings[s % n_settings];
        if (s >= n_settings) {
            if (strstr(set, "n_probs")) continue; /* asked for already */
            snprintf(with, sizeof(with), "{\"n_probs\":4,%s", set + 1);
            set = with;
        }
        bool want = strstr(set, "n_probs") != NULL;
        lp_sampler_seq_t *seq, *split;
        CHECK_RC(lp_sampler_seq_new(st, set, strlen(set), &seq), 0);
        CHECK_RC(lp_sampler_seq_new(st, set, strlen(set), &split), 0);
        if (!seq || !split) continue;
        lp_sampler_result_t r, r2;
        CHECK_RC(lp_sampler_seq_logprobs(split, &r2), LP_ERR(EINVAL)); /* nothing picked */
        int bad = 0, differ = 0;
        for (int d = 0; d < 60; d++) {
            if (lp_sampler_seq_sample(seq, row, n, &r) || lp_sampler_seq_pick(split, row, n, &r2) ||
                lp_sampler_seq_accept(split, r2.id) || lp_sampler_seq_logprobs(split, &r2)) {
                fprintf(stderr, "%s: %s\n", set, lp_error_msg());
                bad++;
                break;
            }
            if (r.id < 0 || r.id >= hp->n_tokens_real || mask[r.id]) bad++;
            for (int32_t k = 0; k < r.n_top; k++)
                if (mask[r.top[k].id] || r.top[k].id >= hp->n_tokens_real) bad++;
            lp_sampler_seq_accept(seq, r.id);
            differ += r.id != r2.id || memcmp(&r.logprob, &r2.logprob, sizeof(float)) ||
                      r.version != r2.version || r.n_top != r2.n_top ||
                      r.has_logprob != want || r2.has_logprob != want;
            for (int32_t k = 0; k < r.n_top && k < r2.n_top; k++)
                differ += r.top[k].id != r2.top[k].id || r.top[k].logprob != r2.top[k].logprob;
        }
        if (bad) fprintf(stderr, "%s: %d excluded tokens returned\n", set, bad);
        CHECK(bad == 0);
        CHECK(differ == 0, "%s: pick + logprobs differs from sample at %d draws", set, differ);
        lp_sampler_seq_destroy(&seq);
        lp_sampler_seq_destroy(&split);
    }
    free(row);
    lp_sampler_store_destroy(&st);
    lp_vocab_facts_clear(&facts);
    lp_gguf_destroy(&g);
    return CHECK_DONE();
}
