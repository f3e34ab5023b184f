/* vocab.c - build a tokenizer from the tokenizer.* metadata of a GGUF, with
 * the same defaults and fix-ups as llama.cpp's llama_vocab::load. */
#include "tok-internal.h"
#include "unicode.h"

#include "error.h"
#include "log.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum lp__pre pre;
} pre_names[] = {
    {"default", LP__PRE_DEFAULT},
    {"llama3", LP__PRE_LLAMA3}, {"llama-v3", LP__PRE_LLAMA3}, {"llama-bpe", LP__PRE_LLAMA3},
    {"falcon3", LP__PRE_LLAMA3}, {"falcon-h1", LP__PRE_LLAMA3}, {"pixtral", LP__PRE_LLAMA3},
    {"midm-2.0", LP__PRE_LLAMA3}, {"lfm2", LP__PRE_LLAMA3},
    {"deepseek-llm", LP__PRE_DEEPSEEK_LLM},
    {"deepseek-coder", LP__PRE_DEEPSEEK_CODER},
    {"falcon", LP__PRE_FALCON},
    {"mpt", LP__PRE_MPT},
    {"starcoder", LP__PRE_STARCODER},
    {"gpt-2", LP__PRE_GPT2}, {"phi-2", LP__PRE_GPT2}, {"jina-es", LP__PRE_GPT2},
    {"jina-de", LP__PRE_GPT2}, {"gigachat", LP__PRE_GPT2}, {"jina-v2-es", LP__PRE_GPT2},
    {"jina-v2-de", LP__PRE_GPT2}, {"jina-v1-en", LP__PRE_GPT2}, {"jina-v2-code", LP__PRE_GPT2},
    {"roberta-bpe", LP__PRE_GPT2}, {"exaone4", LP__PRE_GPT2}, {"a.x-4.0", LP__PRE_GPT2},
    {"mellum", LP__PRE_GPT2}, {"modern-bert", LP__PRE_GPT2}, {"trillion", LP__PRE_GPT2},
    {"granite-docling", LP__PRE_GPT2},
    {"refact", LP__PRE_REFACT},
    {"command-r", LP__PRE_COMMAND_R},
    {"qwen2", LP__PRE_QWEN2}, {"deepseek-r1-qwen", LP__PRE_QWEN2}, {"megrez", LP__PRE_QWEN2},
    {"kormo", LP__PRE_QWEN2}, {"hunyuan", LP__PRE_QWEN2}, {"solar-open", LP__PRE_QWEN2},
    {"grok-2", LP__PRE_QWEN2},
    {"qwen35", LP__PRE_QWEN35},
    {"glm4", LP__PRE_CHATGLM4}, {"chatglm-bpe", LP__PRE_CHATGLM4},
    {"stablelm2", LP__PRE_STABLELM2},
    {"olmo", LP__PRE_OLMO},
    {"dbrx", LP__PRE_DBRX},
    {"smaug-bpe", LP__PRE_SMAUG},
    {"smollm", LP__PRE_SMOLLM},
    {"codeshell", LP__PRE_CODESHELL},
    {"exaone", LP__PRE_EXAONE},
    {"minerva-7b", LP__PRE_MINERVA},
    {"jais", LP__PRE_JAIS},
    {"gpt-4o", LP__PRE_GPT4O},
};

/* Gemma 4 (tokenizer.ggml.model gemma4): llama.cpp's end-of-generation
 * texts and the texts it makes USER_DEFINED (matched even without
 * parse_special). */
static const char *const gemma4_eog_texts[] = {"<eos>", "<turn|>", "<|tool_response>"};
static const char *const gemma4_user_texts[] = {
    "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
    "<tool_response|>", "<|\"|>",
};

/* Texts llama.cpp treats as end of generation (and promotes to CONTROL). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>",
};
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>",
    "<end_of_utterance>",
};
/* FIM tokens: promoted to CONTROL; pad, repo and file-separator are EOG. */
static const char *const fim_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>",
};
static const char *const fim_eog_texts[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};

/* Mark the tokens with these texts CONTROL (and EOG); *first gets the
 * lowest such id when given. */
static void mark_texts(lp_tokenizer_t *t, const char *const *list, size_t count, bool eog,
                       int32_t *first)
{
    for (size_t i = 0; i < count; i++) {
        int64_t sid = lp__strtab_find(&t->strs, list[i], strlen(list[i]));
        if (sid < 0 || t->strs.tok[sid] < 0) continue;
        int32_t id = t->strs.tok[sid];
        t->attr[id] |= LP__ATTR_CONTROL;
        if (eog) t->eog[id] = 1;
        if (first && (*first < 0 || id < *first)) *first = id;
    }
}

static int get_bool_opt(const lp_gguf_t *g, const char *key, bool *v)
{
    int rc = lp_gguf_get_bool(g, key, v);
    return rc == LP_ERR(ENOENT) ? 0 : rc;
}

/* A special id from the metadata.  -1 (as i32 or i64) and 0xFFFFFFFF are
 * GGUF's "no such token": absent, silently.  Other out-of-range ids keep the
 * default, as in llama.cpp (with a warning: the file is wrong). */
static int get_id_opt(const lp_gguf_t *g, const char *key, int32_t n_tokens, int32_t *id)
{
    int64_t v;
    int rc = lp_gguf_get_i64(g, key, &v);
    if (rc == LP_ERR(ENOENT)) return 0;
    if (rc) return rc;
    if (v == -1 || v == UINT32_MAX) {
        LP_DEBUG("tokenizer: %s = %lld: none", key, (long long)v);
        return 0;
    }
    if (v < 0 || v >= n_tokens) {
        LP_WARN("tokenizer: %s = %lld is out of range (%d tokens); ignored", key, (long long)v, n_tokens);
        return 0;
    }
    *id = (int32_t)v;
    return 0;
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const lp_tokenizer_t *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->strs.len[t->tok_sid[x]], ly = t->strs.len[t->tok_sid[y]];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int cmp_score_desc(const void *a, const void *b, void *ctx)
{
    const float *sc = ctx;
    float x = sc[*(const int32_t *)a], y = sc[*(const int32_t *)b];
    return x > y ? -1 : x < y ? 1 : 0;
}

/* SPM merge priority: dense rank of the score, highest first. */
static int build_score_rank(lp_tokenizer_t *t)
{
    int32_t *order = malloc((size_t)t->n_tokens * sizeof(*order));
    t->score_rank = malloc((size_t)t->n_tokens * sizeof(*t->score_rank));
    if (!order || !t->score_rank) {
        free(order);
        return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    }
    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (t->scores[i] != t->scores[i]) t->scores[i] = -INFINITY; /* NaN */
        order[i] = i;
    }
    qsort_r(order, (size_t)t->n_tokens, sizeof(*order), cmp_score_desc, t->scores);
    uint32_t rank = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        if (i > 0 && t->scores[order[i]] != t->scores[order[i - 1]]) rank++;
        t->score_rank[order[i]] = rank;
    }
    t->n_score_ranks = rank + 1;
    free(order);
    return 0;
}

/* Merges are "A B": intern A, B and AB and map (A, B) -> (rank, AB).  The
 * tables are larger than the cache and this is most of the load time, so
 * the merges go through in batches, each a pipeline of passes whose memory
 * accesses the pass before prefetched: hash A and B (and find AB at token
 * id 256 + rank, where Hugging Face converters put it), then touch their
 * hash slots, then look them up and compute the pair's slot, then insert. */
static bool is_token_text(const lp_tokenizer_t *t, int64_t id, const char *a, size_t la,
                          const char *b, size_t lb)
{
    if (id < 0 || id >= t->n_tokens) return false;
    size_t n;
    const char *s = lp__strtab_str(&t->strs, t->tok_sid[id], &n);
    return n == la + lb && !memcmp(s, a, la) && !memcmp(s + la, b, lb);
}

static int load_merges(lp_tokenizer_t *t, const lp_gguf_t *g)
{
    const lp_gguf_str_t *m;
    uint64_t n;
    int rc = lp_gguf_get_str_arr(g, "tokenizer.ggml.merges", &m, &n);
    if (rc == LP_ERR(ENOENT))
        return lp_error_set(LP_ERR(EINVAL), "tokenizer.ggml.merges: missing (needed by gpt2 vocabularies)");
    if (rc) return rc;
    if (n > INT32_MAX) return lp_error_set(LP_ERR(EINVAL), "tokenizer.ggml.merges: too many entries");
    rc = lp__pairmap_init(&t->merges, (size_t)n);
    if (rc) return rc;
    t->n_merge_ranks = (uint32_t)n;
    enum { BATCH = 32 };
    struct {
        const char *a, *b;
        size_t la, lb;
        uint64_t ha, hb;
        uint64_t key;
        uint32_t sab;
        bool ab_found; /* sab is set: AB was the token at 256 + rank */
    } q[BATCH];
    char *tmp = NULL;
    size_t tmp_cap = 0;
    for (uint64_t base = 0; base < n && !rc; base += BATCH) {
        size_t k = n - base < BATCH ? (size_t)(n - base) : BATCH;
        for (size_t j = 0; j < k; j++) {
            const char *s = m[base + j].ptr;
            size_t len = m[base + j].len;
            const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
            q[j].a = NULL;
            if (!sp) continue; /* llama.cpp maps it to the pair ("", ""), which never matches */
            q[j].a = s;
            q[j].la = (size_t)(sp - s);
            q[j].b = sp + 1;
            q[j].lb = len - q[j].la - 1;
            q[j].ha = lp__hash(q[j].a, q[j].la);
            q[j].hb = lp__hash(q[j].b, q[j].lb);
            lp__strtab_prefetch(&t->strs, q[j].ha);
            lp__strtab_prefetch(&t->strs, q[j].hb);
            int64_t guess = 256 + (int64_t)(base + j);
            q[j].ab_found = is_token_text(t, guess, q[j].a, q[j].la, q[j].b, q[j].lb) &&
                            t->strs.tok[t->tok_sid[guess]] >= 0;
            if (q[j].ab_found) q[j].sab = t->tok_sid[guess];
        }
        for (size_t j = 0; j < k; j++) {
            if (!q[j].a) continue;
            lp__strtab_prefetch2(&t->strs, q[j].ha);
            lp__strtab_prefetch2(&t->strs, q[j].hb);
        }
        for (size_t j = 0; j < k && !rc; j++) {
            if (!q[j].a) continue;
            uint32_t sa, sb;
            if ((rc = lp__strtab_intern_h(&t->strs, q[j].a, q[j].la, q[j].ha, &sa))) break;
            if ((rc = lp__strtab_intern_h(&t->strs, q[j].b, q[j].lb, q[j].hb, &sb))) break;
            if (!q[j].ab_found) {
                size_t lab = q[j].la + q[j].lb;
                if (lab > tmp_cap) {
                    tmp_cap = lab * 2 + 64;
                    char *p = realloc(tmp, tmp_cap);
                    if (!p) {
                        rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
                        break;
                    }
                    tmp = p;
                }
                memcpy(tmp, q[j].a, q[j].la);
                memcpy(tmp + q[j].la, q[j].b, q[j].lb);
                if ((rc = lp__strtab_intern(&t->strs, tmp, lab, &q[j].sab))) break;
            }
            q[j].key = (uint64_t)sa << 32 | sb;
            lp__pairmap_prefetch(&t->merges, q[j].key);
        }
        for (size_t j = 0; j < k && !rc; j++)
            if (q[j].a) rc = lp__pairmap_add(&t->merges, q[j].key, (int32_t)(base + j), q[j].sab);
    }
    free(tmp);
    return rc;
}

/* SPM results can be computed per chunk (split before each "▁" that follows
 * another character) when no token spans such a boundary. */
static bool spm_split_ok(const lp_tokenizer_t *t)
{
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t n;
        const char *s = lp__strtab_str(&t->strs, t->tok_sid[id], &n);
        for (size_t i = 1; i + 3 <= n; i++) {
            if (memcmp(s + i, "\xe2\x96\x81", 3)) continue;
            if (i >= 3 && !memcmp(s + i - 3, "\xe2\x96\x81", 3)) continue;
            return false;
        }
    }
    return true;
}

static int load(lp_tokenizer_t *t, const lp_gguf_t *g)
{
    lp_gguf_str_t s;
    int rc = lp_gguf_get_str(g, "tokenizer.ggml.model", &s);
    if (rc == LP_ERR(ENOENT))
        return lp_error_set(LP_ERR(EINVAL), "tokenizer.ggml.model: missing (not a model with a vocabulary)");
    if (rc) return rc;
    if (s.len == 5 && !memcmp(s.ptr, "llama", 5)) t->kind = LP_VOCAB_SPM;
    else if (s.len == 4 && !memcmp(s.ptr, "gpt2", 4)) t->kind = LP_VOCAB_BPE;
    else if (s.len == 6 && !memcmp(s.ptr, "gemma4", 6)) t->kind = LP_VOCAB_BPE, t->raw_bpe = true;
    else
        return lp_error_set(LP_ERR(ENOTSUP), "tokenizer.ggml.model: unsupported tokenizer '%.*s' "
                            "(want llama, gpt2 or gemma4)", (int)(s.len > 64 ? 64 : s.len), s.ptr);

    strcpy(t->pre_name, "default");
    t->pre = LP__PRE_DEFAULT;
    rc = lp_gguf_get_str(g, "tokenizer.ggml.pre", &s);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (!rc) snprintf(t->pre_name, sizeof(t->pre_name), "%.*s", (int)(s.len > 63 ? 63 : s.len), s.ptr);

    if (t->raw_bpe) {
        /* llama.cpp forces its gemma4 pre-tokenizer, whatever the file says */
        strcpy(t->pre_name, "gemma4");
        t->pre = LP__PRE_GEMMA4;
        t->add_space_prefix = false;
        t->add_bos = true;
        t->add_eos = false;
        t->bos = 2;
        t->eos = 1;
        t->unk = 3;
    } else if (t->kind == LP_VOCAB_BPE) {
        bool found = false;
        for (size_t i = 0; i < sizeof(pre_names) / sizeof(pre_names[0]); i++) {
            if (!rc && strlen(pre_names[i].name) == s.len && !memcmp(pre_names[i].name, s.ptr, s.len)) {
                t->pre = pre_names[i].pre;
                found = true;
            }
        }
        if (rc == LP_ERR(ENOENT)) {
            LP_WARN("tokenizer.ggml.pre: missing, using 'default'");
        } else if (!found) {
            return lp_error_set(LP_ERR(ENOTSUP), "tokenizer.ggml.pre: unknown pre-tokenizer '%s'", t->pre_name);
        }
        t->add_space_prefix = false;
        t->add_bos = false;
        t->add_eos = false;
        if (t->pre == LP__PRE_LLAMA3) {
            t->ignore_merges = true;
            t->add_bos = true;
        }
        t->bos = t->pre == LP__PRE_CHATGLM4 ? -1 : 11;
        t->eos = 11;
        t->unk = -1;
    } else {
        t->add_space_prefix = true;
        t->add_bos = true;
        t->add_eos = false;
        t->bos = 1;
        t->eos = 2;
        t->unk = 0;
    }
    t->eot = t->eom = t->pad = -1;
    if ((rc = get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix))) return rc;

    /* tokens, scores, types */
    const lp_gguf_str_t *toks;
    uint64_t n;
    rc = lp_gguf_get_str_arr(g, "tokenizer.ggml.tokens", &toks, &n);
    if (rc == LP_ERR(ENOENT)) return lp_error_set(LP_ERR(EINVAL), "tokenizer.ggml.tokens: missing");
    if (rc) return rc;
    if (n == 0 || n > INT32_MAX / 2)
        return lp_error_set(LP_ERR(EINVAL), "tokenizer.ggml.tokens: bad token count %llu", (unsigned long long)n);
    t->n_tokens = (int32_t)n;
    if (t->bos >= t->n_tokens) t->bos = -1;
    if (t->eos >= t->n_tokens) t->eos = -1;
    if (t->unk >= t->n_tokens) t->unk = -1;

    const void *sc = NULL, *ty = NULL;
    uint64_t n_sc = 0, n_ty = 0;
    rc = lp_gguf_get_arr(g, "tokenizer.ggml.scores", LP_GGUF_FLOAT32, &sc, &n_sc);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    rc = lp_gguf_get_arr(g, "tokenizer.ggml.token_type", LP_GGUF_INT32, &ty, &n_ty);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (ty && n_ty != n)
        return lp_error_set(LP_ERR(EINVAL), "tokenizer.ggml.token_type: %llu entries for %llu tokens",
                            (unsigned long long)n_ty, (unsigned long long)n);

    t->tok_sid = malloc(n * sizeof(*t->tok_sid));
    t->scores = calloc(n, sizeof(*t->scores));
    t->attr = calloc(n, sizeof(*t->attr));
    t->eog = calloc(n, 1);
    if (!t->tok_sid || !t->scores || !t->attr || !t->eog)
        return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    if ((rc = lp__strtab_init(&t->strs, (size_t)n + 1024))) return rc;

    uint64_t hq[16];
    for (uint64_t base = 0; base < n; base += 16) {
        uint64_t k = n - base < 16 ? n - base : 16;
        for (uint64_t j = 0; j < k; j++) {
            hq[j] = lp__hash(toks[base + j].ptr, toks[base + j].len);
            lp__strtab_prefetch(&t->strs, hq[j]);
        }
        for (uint64_t j = 0; j < k; j++) {
            uint64_t i = base + j;
            char empty[32];
            const char *p = toks[i].ptr;
            size_t len = toks[i].len;
            uint64_t h = hq[j];
            if (len == 0) {
                len = (size_t)snprintf(empty, sizeof(empty), "[EMPTY_%llu]", (unsigned long long)i);
                p = empty;
                h = lp__hash(p, len);
            }
            uint32_t sid;
            if ((rc = lp__strtab_intern_h(&t->strs, p, len, h, &sid))) return rc;
            t->strs.tok[sid] = (int32_t)i; /* a later duplicate wins, as in llama.cpp */
            t->tok_sid[i] = sid;
            if (len > t->max_token_len) t->max_token_len = len;
            if (sc && i < n_sc) memcpy(&t->scores[i], (const char *)sc + 4 * i, 4);
            int32_t type = LP_TOKEN_NORMAL;
            if (ty) memcpy(&type, (const char *)ty + 4 * i, 4);
            switch (type) {
            case LP_TOKEN_NORMAL: t->attr[i] = LP__ATTR_NORMAL; break;
            case LP_TOKEN_UNKNOWN: t->attr[i] = LP__ATTR_UNKNOWN; break;
            case LP_TOKEN_CONTROL: t->attr[i] = LP__ATTR_CONTROL; break;
            case LP_TOKEN_USER_DEFINED: t->attr[i] = LP__ATTR_USER_DEFINED; break;
            case LP_TOKEN_UNUSED: t->attr[i] = LP__ATTR_UNUSED; break;
            case LP_TOKEN_BYTE: t->attr[i] = LP__ATTR_BYTE; break;
            default: t->attr[i] = 0; break;
            }
        }
    }

    if (t->kind == LP_VOCAB_BPE && (rc = load_merges(t, g))) return rc;

    /* special ids and add_bos/add_eos */
    if ((rc = get_id_opt(g, "tokenizer.ggml.bos_token_id", t->n_tokens, &t->bos))) return rc;
    if ((rc = get_id_opt(g, "tokenizer.ggml.eos_token_id", t->n_tokens, &t->eos))) return rc;
    if ((rc = get_id_opt(g, "tokenizer.ggml.eot_token_id", t->n_tokens, &t->eot))) return rc;
    if ((rc = get_id_opt(g, "tokenizer.ggml.eom_token_id", t->n_tokens, &t->eom))) return rc;
    if ((rc = get_id_opt(g, "tokenizer.ggml.unknown_token_id", t->n_tokens, &t->unk))) return rc;
    if ((rc = get_id_opt(g, "tokenizer.ggml.padding_token_id", t->n_tokens, &t->pad))) return rc;
    if ((rc = get_bool_opt(g, "tokenizer.ggml.add_bos_token", &t->add_bos))) return rc;
    if ((rc = get_bool_opt(g, "tokenizer.ggml.add_eos_token", &t->add_eos))) return rc;
    if (t->raw_bpe) {
        t->add_bos = true; /* llama.cpp overrides add_bos_token false for gemma4 */
        mark_texts(t, gemma4_eog_texts, sizeof(gemma4_eog_texts) / sizeof(gemma4_eog_texts[0]),
                   true, NULL);
        for (size_t i = 0; i < sizeof(gemma4_user_texts) / sizeof(gemma4_user_texts[0]); i++) {
            int64_t sid = lp__strtab_find(&t->strs, gemma4_user_texts[i], strlen(gemma4_user_texts[i]));
            if (sid >= 0 && t->strs.tok[sid] >= 0)
                t->attr[t->strs.tok[sid]] = LP__ATTR_USER_DEFINED;
        }
    }

    /* llama.cpp's fix-ups by token text (over its text -> id map, where a
     * later duplicate wins): EOT/EOG/FIM-looking tokens become CONTROL,
     * control tokens named "unused" become UNUSED. */
    bool has_fim_keys = lp_gguf_find(g, "tokenizer.ggml.fim_pre_token_id") != NULL;
    mark_texts(t, eot_texts, sizeof(eot_texts) / sizeof(eot_texts[0]), false, t->eot < 0 ? &t->eot : NULL);
    mark_texts(t, eog_texts, sizeof(eog_texts) / sizeof(eog_texts[0]), true, NULL);
    if (!has_fim_keys) {
        mark_texts(t, fim_texts, sizeof(fim_texts) / sizeof(fim_texts[0]), false, NULL);
        mark_texts(t, fim_eog_texts, sizeof(fim_eog_texts) / sizeof(fim_eog_texts[0]), true, NULL);
    }
    for (int32_t id = 0; id < t->n_tokens; id++) {
        size_t len;
        const char *p = lp__strtab_str(&t->strs, t->tok_sid[id], &len);
        if ((t->attr[id] & LP__ATTR_CONTROL) && memmem(p, len, "unused", 6)) t->attr[id] |= LP__ATTR_UNUSED;
    }
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    if (t->eom >= 0) t->eog[t->eom] = 1;

    /* special-token cache, longest text first */
    t->special = malloc((size_t)t->n_tokens * sizeof(*t->special));
    if (!t->special) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    for (int32_t id = 0; id < t->n_tokens; id++)
        if (t->attr[id] & (LP__ATTR_CONTROL | LP__ATTR_USER_DEFINED | LP__ATTR_UNKNOWN))
            t->special[t->n_special++] = id;
    qsort_r(t->special, t->n_special, sizeof(*t->special), cmp_special, t);

    /* phi-3 strips the whitespace after its special tokens */
    if (lp_gguf_get_str(g, "general.name", &s) == 0) {
        char name[128];
        size_t k = s.len < sizeof(name) - 1 ? s.len : sizeof(name) - 1;
        for (size_t i = 0; i < k; i++) name[i] = (char)tolower((unsigned char)s.ptr[i]);
        name[k] = 0;
        if (strstr(name, "phi-3") || strstr(name, "phi3")) {
            for (size_t i = 0; i < t->n_special; i++) t->attr[t->special[i]] |= LP__ATTR_RSTRIP;
            static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
            int64_t sid = lp__strtab_find(&t->strs, "</s>", 4);
            if (sid >= 0 && t->strs.tok[sid] >= 0) t->attr[t->strs.tok[sid]] |= LP__ATTR_RSTRIP;
            for (size_t i = 0; i < 3; i++) {
                sid = lp__strtab_find(&t->strs, keep[i], strlen(keep[i]));
                if (sid >= 0 && t->strs.tok[sid] >= 0) t->attr[t->strs.tok[sid]] &= (uint16_t)~LP__ATTR_RSTRIP;
            }
        }
    }

    if (t->kind == LP_VOCAB_SPM || t->raw_bpe) {
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof(hex), "<0x%02X>", b);
            int64_t sid = lp__strtab_find(&t->strs, hex, 6);
            if (sid < 0 || t->strs.tok[sid] < 0) {
                char c = (char)b;
                sid = lp__strtab_find(&t->strs, &c, 1);
            }
            t->byte_tok[b] = sid >= 0 ? t->strs.tok[sid] : -1;
        }
    }
    if (t->kind == LP_VOCAB_SPM) {
        t->spm_split_ok = spm_split_ok(t);
        if ((rc = build_score_rank(t))) return rc;
    } else {
        for (int b = 0; b < 256; b++) {
            char u[4];
            size_t k = lp__utf8_encode(lp__byte_to_cp((uint8_t)b), u);
            if ((rc = lp__strtab_intern(&t->strs, u, k, &t->byte_sid[b]))) return rc;
        }
    }

    rc = lp_gguf_get_str(g, "tokenizer.chat_template", &s);
    if (rc && rc != LP_ERR(ENOENT)) return rc;
    if (!rc) {
        t->chat_template = malloc(s.len + 1);
        if (!t->chat_template) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        memcpy(t->chat_template, s.ptr, s.len);
        t->chat_template[s.len] = 0;
        t->chat_template_len = s.len;
    }
    return 0;
}

int lp_tokenizer_new_from_gguf(const lp_gguf_t *g, lp_tokenizer_t **out)
{
    *out = NULL;
    lp_tokenizer_t *t = calloc(1, sizeof(*t));
    if (!t) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    pthread_mutex_init(&t->pieces_lock, NULL);
    int rc = load(t, g);
    if (rc) {
        lp_tokenizer_destroy(&t);
        return rc;
    }
    *out = t;
    return 0;
}

int lp_tokenizer_new(const char *path, lp_tokenizer_t **out)
{
    *out = NULL;
    lp_gguf_t *g;
    int rc = lp_gguf_open(path, &g);
    if (rc) return rc;
    rc = lp_tokenizer_new_from_gguf(g, out);
    if (rc) lp_error_prefix("%s: ", path);
    lp_gguf_destroy(&g);
    return rc;
}

void lp_tokenizer_destroy(lp_tokenizer_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_tokenizer_t *t = *self_p;
    lp__strtab_free(&t->strs);
    lp__pairmap_free(&t->merges);
    free(t->tok_sid);
    free(t->scores);
    free(t->score_rank);
    free(t->attr);
    free(t->eog);
    free(t->special);
    free(t->piece_off);
    free(t->piece_len);
    free(t->piece_arena);
    pthread_mutex_destroy(&t->pieces_lock);
    free(t->chat_template);
    free(t);
    *self_p = NULL;
}

/* ---- accessors ---- */

enum lp_vocab_kind lp_tokenizer_kind(const lp_tokenizer_t *tok) { return tok->kind; }
const char *lp_tokenizer_pre(const lp_tokenizer_t *tok) { return tok->pre_name; }
int32_t lp_tokenizer_n_tokens(const lp_tokenizer_t *tok) { return tok->n_tokens; }
int32_t lp_tokenizer_bos(const lp_tokenizer_t *tok) { return tok->bos; }
int32_t lp_tokenizer_eos(const lp_tokenizer_t *tok) { return tok->eos; }
bool lp_tokenizer_adds_bos(const lp_tokenizer_t *tok) { return tok->add_bos && tok->bos >= 0; }
bool lp_tokenizer_adds_eos(const lp_tokenizer_t *tok) { return tok->add_eos && tok->eos >= 0; }

bool lp_tokenizer_is_eog(const lp_tokenizer_t *tok, int32_t id)
{
    return id >= 0 && id < tok->n_tokens && tok->eog[id];
}

int lp_tokenizer_token_type(const lp_tokenizer_t *tok, int32_t id)
{
    if (id < 0 || id >= tok->n_tokens)
        return lp_error_set(LP_ERR(EINVAL), "token id %d out of range (%d tokens)", id, tok->n_tokens);
    uint16_t a = tok->attr[id];
    if (a & LP__ATTR_CONTROL) return LP_TOKEN_CONTROL;
    if (a & LP__ATTR_USER_DEFINED) return LP_TOKEN_USER_DEFINED;
    if (a & LP__ATTR_UNKNOWN) return LP_TOKEN_UNKNOWN;
    if (a & LP__ATTR_BYTE) return LP_TOKEN_BYTE;
    if (a & LP__ATTR_UNUSED) return LP_TOKEN_UNUSED;
    if (a & LP__ATTR_NORMAL) return LP_TOKEN_NORMAL;
    return LP_TOKEN_UNDEFINED;
}

const char *lp_tokenizer_token_text(const lp_tokenizer_t *tok, int32_t id, size_t *len)
{
    if (id < 0 || id >= tok->n_tokens) return NULL;
    return lp__strtab_str(&tok->strs, tok->tok_sid[id], len);
}

int lp_tokenizer_chat_template(const lp_tokenizer_t *tok, const char **tmpl, size_t *len)
{
    if (!tok->chat_template) return lp_error_set(LP_ERR(ENOENT), "tokenizer.chat_template: missing");
    *tmpl = tok->chat_template;
    if (len) *len = tok->chat_template_len;
    return 0;
}
