/* tok-internal.h - the tokenizer's private state, shared by its files:
 * vocab.c (load), strtab.c (hash tables), special.c (special-token split),
 * pretok.c (BPE pre-tokenizers), spm.c, bpe.c, tokenize.c, detok.c, and
 * tokenizer-svc's chat.c (its growable buffer). */
#ifndef LP_TOK_INTERNAL_H
#define LP_TOK_INTERNAL_H

#include "tokenizer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* llama.cpp's token attributes (llama_token_attr), kept as bits. */
enum {
    LP__ATTR_UNKNOWN = 1 << 0,
    LP__ATTR_UNUSED = 1 << 1,
    LP__ATTR_NORMAL = 1 << 2,
    LP__ATTR_CONTROL = 1 << 3,
    LP__ATTR_USER_DEFINED = 1 << 4,
    LP__ATTR_BYTE = 1 << 5,
    LP__ATTR_LSTRIP = 1 << 7,
    LP__ATTR_RSTRIP = 1 << 8,
};

/* ---- growable arrays ---- */
typedef struct lp__ivec {
    int32_t *v;
    size_t n, cap;
} lp__ivec_t;
int lp__ivec_push(lp__ivec_t *a, int32_t x);
int lp__ivec_reserve(lp__ivec_t *a, size_t extra);

typedef struct lp__buf {
    char *v;
    size_t n, cap;
} lp__buf_t;
int lp__buf_put(lp__buf_t *b, const void *p, size_t n);

/* Zeroed memory for a hash table of `bytes` (huge pages when large); free
 * it with the same size. */
void *lp__table_alloc(size_t bytes);
void lp__table_free(void *p, size_t bytes);

/* String hash for the tables (in-process only, never stored): wyhash's
 * structure, whole words read with unaligned loads (two overlapping 4- or
 * 8-byte reads cover a short string without a byte loop), mixed by 64x64 ->
 * 128-bit multiplies. */
static inline uint64_t lp__mum(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}
static inline uint64_t lp__rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline uint64_t lp__rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t lp__hash(const void *data, size_t n)
{
    const uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull,
                   k2 = 0x8ebc6af09c88c6e3ull;
    const uint8_t *p = data;
    uint64_t a, b, seed = k0 ^ n;
    if (n <= 16) {
        if (n >= 4) {
            size_t m = (n >> 3) << 2; /* 0 or 4 */
            a = lp__rd32(p) << 32 | lp__rd32(p + m);
            b = lp__rd32(p + n - 4) << 32 | lp__rd32(p + n - 4 - m);
        } else if (n) {
            a = (uint64_t)p[0] << 16 | (uint64_t)p[n >> 1] << 8 | p[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = n;
        while (i > 16) {
            seed = lp__mum(lp__rd64(p) ^ k1, lp__rd64(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = lp__rd64(p + i - 16);
        b = lp__rd64(p + i - 8);
    }
    return lp__mum(k1 ^ n, lp__mum(a ^ k1, b ^ seed) ^ k2);
}

/* ---- interned strings: bytes -> dense id (sid) ---- */
typedef struct lp__strslot {
    uint32_t tag;  /* high half of the hash */
    uint32_t sid1; /* sid + 1 */
    uint32_t off, len;
} lp__strslot_t;

typedef struct lp__strtab {
    uint32_t *off, *len;  /* (n) into arena */
    int32_t *tok;         /* (n) token id whose text this is, or -1 */
    size_t n, cap;
    char *arena;
    size_t arena_n, arena_cap;
    lp__strslot_t *slots; /* (mask + 1) open addressing; sid1 = 0 when empty */
    size_t mask;
} lp__strtab_t;
int lp__strtab_init(lp__strtab_t *t, size_t expect);
void lp__strtab_free(lp__strtab_t *t);
/* sid of s, adding it when new. */
int lp__strtab_intern(lp__strtab_t *t, const char *s, size_t n, uint32_t *sid);
/* sid of s, or -1. */
int64_t lp__strtab_find(const lp__strtab_t *t, const char *s, size_t n);
/* Same with lp__hash(s, n) already computed (see lp__strtab_prefetch). */
int64_t lp__strtab_find_h(const lp__strtab_t *t, const char *s, size_t n, uint64_t h);
int lp__strtab_intern_h(lp__strtab_t *t, const char *s, size_t n, uint64_t h, uint32_t *sid);
static inline void lp__strtab_prefetch(const lp__strtab_t *t, uint64_t h)
{
    __builtin_prefetch(&t->slots[(size_t)h & t->mask]);
}
/* Second stage: once the slot is cached, prefetch the string it points at. */
static inline void lp__strtab_prefetch2(const lp__strtab_t *t, uint64_t h)
{
    const lp__strslot_t *e = &t->slots[(size_t)h & t->mask];
    if (e->sid1) __builtin_prefetch(t->arena + e->off);
}
static inline const char *lp__strtab_str(const lp__strtab_t *t, uint32_t sid, size_t *n)
{
    *n = t->len[sid];
    return t->arena + t->off[sid];
}

/* ---- u64 key -> (i32, u32) map, used for BPE merge pairs ---- */
typedef struct lp__pairent {
    uint64_t key; /* UINT64_MAX = empty */
    int32_t rank;
    uint32_t val;
} lp__pairent_t;

typedef struct lp__pairmap {
    lp__pairent_t *e;
    size_t n, mask;
    unsigned shift; /* 64 - log2(mask + 1): Fibonacci hashing uses the high bits */
} lp__pairmap_t;
int lp__pairmap_init(lp__pairmap_t *m, size_t expect);
void lp__pairmap_free(lp__pairmap_t *m);
/* Insert unless present (first insertion wins, as std::map::emplace). */
int lp__pairmap_add(lp__pairmap_t *m, uint64_t key, int32_t rank, uint32_t val);
static inline size_t lp__pairmap_slot(const lp__pairmap_t *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> m->shift);
}
static inline void lp__pairmap_prefetch(const lp__pairmap_t *m, uint64_t key)
{
    __builtin_prefetch(&m->e[lp__pairmap_slot(m, key)], 1);
}
static inline bool lp__pairmap_get(const lp__pairmap_t *m, uint64_t key, int32_t *rank,
                                   uint32_t *val)
{
    size_t i = lp__pairmap_slot(m, key);
    for (;;) {
        const lp__pairent_t *e = &m->e[i];
        if (e->key == key) {
            *rank = e->rank;
            *val = e->val;
            return true;
        }
        if (e->key == UINT64_MAX) return false;
        i = (i + 1) & m->mask;
    }
}

/* ---- pre-tokenizers ---- */
enum lp__pre {
    LP__PRE_DEFAULT,
    LP__PRE_LLAMA3,
    LP__PRE_DEEPSEEK_LLM,
    LP__PRE_DEEPSEEK_CODER,
    LP__PRE_FALCON,
    LP__PRE_MPT,
    LP__PRE_STARCODER,
    LP__PRE_GPT2,
    LP__PRE_REFACT,
    LP__PRE_COMMAND_R,
    LP__PRE_QWEN2,
    LP__PRE_QWEN35,
    LP__PRE_STABLELM2,
    LP__PRE_OLMO,
    LP__PRE_DBRX,
    LP__PRE_SMAUG,
    LP__PRE_SMOLLM,
    LP__PRE_CODESHELL,
    LP__PRE_EXAONE,
    LP__PRE_MINERVA,
    LP__PRE_JAIS,
    LP__PRE_CHATGLM4, /* llama3's regex, without ignore_merges or a default BOS */
    LP__PRE_GEMMA4,   /* runs of newlines and runs of anything else ([^\n]+|[\n]+) */
    LP__PRE_GPT4O,    /* o200k: GPT-4o, gpt-oss */
};

struct lp_tokenizer {
    enum lp_vocab_kind kind;
    enum lp__pre pre;
    char pre_name[64];
    int32_t n_tokens;

    lp__strtab_t strs;   /* token texts first, then BPE merge parts */
    uint32_t *tok_sid;   /* (n_tokens) sid of each token's text */
    float *scores;       /* (n_tokens) SPM merge scores */
    uint32_t *score_rank; /* (n_tokens) SPM: 0 for the highest score, equal scores equal */
    uint32_t n_score_ranks; /* distinct scores */
    uint16_t *attr;      /* (n_tokens) LP__ATTR_* bits */
    uint8_t *eog;        /* (n_tokens) 1 for end-of-generation tokens */
    size_t max_token_len;

    int32_t bos, eos, eot, eom, unk, pad;
    bool add_bos, add_eos, add_space_prefix, ignore_merges;
    /* tokenizer.ggml.model "gemma4": BPE over raw UTF-8 characters (no GPT-2
     * byte mapping), spaces escaped to "▁" first, a symbol that is no token
     * spelled as <0xXX> byte tokens (byte_tok) */
    bool raw_bpe;

    /* Special tokens (control, user-defined, unknown), longest text first. */
    int32_t *special;
    size_t n_special;

    /* token_to_piece(special = true) of every token, built by the first
     * lp_token_piece (detok.c) under pieces_lock; NULL until then. */
    atomic_bool pieces_ready;
    pthread_mutex_t pieces_lock;
    uint32_t *piece_off, *piece_len; /* (n_tokens) into piece_arena */
    char *piece_arena;

    /* SPM (and raw BPE's byte fallback) */
    int32_t byte_tok[256];   /* <0xXX> token of each byte, or -1 */
    bool spm_split_ok;       /* no token has "▁" after a non-"▁" character */

    /* BPE */
    lp__pairmap_t merges;    /* (sid_left << 32 | sid_right) -> rank, sid */
    uint32_t n_merge_ranks;  /* length of tokenizer.ggml.merges */
    uint32_t byte_sid[256];  /* sid of each byte's GPT-2 character */

    char *chat_template;     /* NUL-terminated copy, or NULL */
    size_t chat_template_len;
};

/* One piece of input after special-token partitioning. */
typedef struct lp__frag {
    size_t off, len; /* raw text, when token < 0 */
    int32_t token;   /* special token id, or -1 for text */
} lp__frag_t;

/* Split text at special tokens as llama.cpp's tokenizer_st_partition does.
 * *frags is malloc'd; caller frees. */
int lp__special_split(const lp_tokenizer_t *t, const char *text, size_t len, bool parse_special,
                      lp__frag_t **frags, size_t *n);

/* A word cache for one lp_tokenize call: bytes -> token IDs. */
typedef struct lp__wcache lp__wcache_t;
lp__wcache_t *lp__wcache_new(size_t text_len); /* sized for this much text */
void lp__wcache_free(lp__wcache_t *c);
/* Append the cached IDs of s to out and return true, or return false. */
bool lp__wcache_get(lp__wcache_t *c, const char *s, size_t n, lp__ivec_t *out);
void lp__wcache_put(lp__wcache_t *c, const char *s, size_t n, const int32_t *ids, size_t n_ids);

/* SPM: tokenize text (already "▁"-escaped, prefix added) into out. */
int lp__spm_encode(const lp_tokenizer_t *t, const char *text, size_t len, lp__ivec_t *out,
                   lp__wcache_t *cache);

/* BPE pre-tokenizer: split text into words.  Invalid UTF-8 is replaced by
 * U+FFFD first (as llama.cpp does), so words index *clean, which is text
 * itself or a malloc'd copy that the caller frees.  *starts (malloc'd) holds
 * n_words + 1 byte offsets. */
int lp__pretok_split(enum lp__pre pre, const char *text, size_t len, const char **clean,
                     char **owned, size_t **starts, size_t *n_words);
/* BPE: tokenize one word (raw bytes) into out. */
int lp__bpe_word(const lp_tokenizer_t *t, const char *w, size_t n, lp__ivec_t *out);

#endif
