/* gr-util.c - arena, arrays, bitsets, hash and UTF-8 for the grammar engine. */
#include "gr-util.h"

#include <errno.h>

struct lp__gr_chunk {
    lp__gr_chunk_t *next;
    size_t off, cap;
    _Alignas(16) unsigned char data[];
};

void *lp__gr_alloc(lp__gr_arena_t *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->limit && a->used + n > a->limit) return NULL;
    lp__gr_chunk_t *c = a->head;
    if (!c || c->cap - c->off < n) {
        /* a chunk released by a mark may still hang after head: reuse it */
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof(*c) + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->off = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->data + c->off;
    c->off += n;
    a->used += n;
    return p;
}

void *lp__gr_zalloc(lp__gr_arena_t *a, size_t n)
{
    void *p = lp__gr_alloc(a, n);
    if (p) memset(p, 0, n);
    return p;
}

void *lp__gr_memdup(lp__gr_arena_t *a, const void *p, size_t n)
{
    void *q = lp__gr_alloc(a, n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

char *lp__gr_strndup(lp__gr_arena_t *a, const char *s, size_t n)
{
    char *q = lp__gr_alloc(a, n + 1);
    if (!q) return NULL;
    memcpy(q, s, n);
    q[n] = 0;
    return q;
}

lp__gr_mark_t lp__gr_mark(const lp__gr_arena_t *a)
{
    lp__gr_mark_t m = {a->head, a->head ? a->head->off : 0, a->used};
    return m;
}

void lp__gr_release(lp__gr_arena_t *a, lp__gr_mark_t m)
{
    while (a->head != m.chunk) {
        lp__gr_chunk_t *c = a->head;
        a->head = c->next;
        free(c);
    }
    if (a->head) a->head->off = m.off;
    a->used = m.used;
}

void lp__gr_arena_free(lp__gr_arena_t *a)
{
    while (a->head) {
        lp__gr_chunk_t *c = a->head;
        a->head = c->next;
        free(c);
    }
    a->used = 0;
}

int lp__gr_grow(void **v, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap) return 0;
    uint64_t nc = *cap ? (uint64_t)*cap * 2 : 8;
    while (nc < need) nc *= 2;
    if (nc > UINT32_MAX || nc * elem > ((size_t)1 << 40)) return -ENOMEM;
    void *p = realloc(*v, (size_t)nc * elem);
    if (!p) return -ENOMEM;
    *v = p;
    *cap = (uint32_t)nc;
    return 0;
}

void lp__gr_bor(uint64_t *dst, const uint64_t *src, size_t nwords)
{
    for (size_t i = 0; i < nwords; i++) dst[i] |= src[i];
}

uint64_t lp__gr_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    /* eight bytes at a time, multiply-xorshift; the tail bytewise */
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ seed ^ (n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return lp__gr_mix(h, n);
}

int32_t lp__gr_utf8_next(const uint8_t *s, size_t n, size_t *len)
{
    *len = 1;
    if (!n) return -1;
    uint8_t b = s[0];
    if (b < 0x80) return b;
    uint32_t cp, need;
    uint32_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        cp = b & 0x1F;
        need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
        cp = b & 0x0F;
        need = 2;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        cp = b & 0x07;
        need = 3;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return -1;
    if (n < need + 1) return -1;
    for (uint32_t i = 1; i <= need; i++) {
        uint8_t c = s[i];
        if (c < lo || c > hi) return -1;
        lo = 0x80;
        hi = 0xBF;
        cp = cp << 6 | (c & 0x3F);
    }
    *len = need + 1;
    return (int32_t)cp;
}

size_t lp__gr_utf8_put(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
