/* strtab.c - the tokenizer's containers: growable arrays, the interned
 * string table, the merge-pair map and the per-call word cache. */
#include "tok-internal.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Zeroed memory for a hash table.  Tables of a megabyte or more come
 * straight from mmap, 2 MiB-aligned and marked for transparent huge pages:
 * a vocabulary's tables are several MiB probed at random, and with 4 KiB
 * pages most probes would also miss the TLB, and each page would cost a
 * fault. */
#define TABLE_BIG ((size_t)1 << 20)
#define TABLE_HUGE ((size_t)2 << 20)

void *lp__table_alloc(size_t bytes)
{
    if (bytes < TABLE_BIG) return calloc(1, bytes);
    size_t size = (bytes + TABLE_HUGE - 1) & ~(TABLE_HUGE - 1);
    char *p = mmap(NULL, size + TABLE_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    size_t lead = (TABLE_HUGE - ((uintptr_t)p & (TABLE_HUGE - 1))) & (TABLE_HUGE - 1);
    if (lead) munmap(p, lead);
    munmap(p + lead + size, TABLE_HUGE - lead);
    madvise(p + lead, size, MADV_HUGEPAGE); /* a hint: fine if refused */
    return p + lead;
}

void lp__table_free(void *p, size_t bytes)
{
    if (!p) return;
    if (bytes < TABLE_BIG) {
        free(p);
        return;
    }
    munmap(p, (bytes + TABLE_HUGE - 1) & ~(TABLE_HUGE - 1));
}

int lp__ivec_reserve(lp__ivec_t *a, size_t extra)
{
    if (a->n + extra <= a->cap) return 0;
    size_t cap = a->cap ? a->cap : 64;
    while (cap < a->n + extra) cap *= 2;
    int32_t *v = realloc(a->v, cap * sizeof(*v));
    if (!v) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    a->v = v;
    a->cap = cap;
    return 0;
}

int lp__ivec_push(lp__ivec_t *a, int32_t x)
{
    if (a->n == a->cap) {
        int rc = lp__ivec_reserve(a, 1);
        if (rc) return rc;
    }
    a->v[a->n++] = x;
    return 0;
}

int lp__buf_put(lp__buf_t *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        b->v = v;
        b->cap = cap;
    }
    if (n) memcpy(b->v + b->n, p, n);
    b->n += n;
    b->v[b->n] = 0;
    return 0;
}

/* ---- string table ---- */

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n) p *= 2;
    return p;
}

int lp__strtab_init(lp__strtab_t *t, size_t expect)
{
    memset(t, 0, sizeof(*t));
    t->mask = pow2_at_least(expect + expect / 3) - 1; /* load <= 3/4 */
    t->slots = lp__table_alloc((t->mask + 1) * sizeof(*t->slots));
    if (!t->slots) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    return 0;
}

void lp__strtab_free(lp__strtab_t *t)
{
    free(t->off);
    free(t->len);
    free(t->tok);
    free(t->arena);
    lp__table_free(t->slots, (t->mask + 1) * sizeof(*t->slots));
    memset(t, 0, sizeof(*t));
}

static void slot_put(lp__strslot_t *slots, size_t mask, uint64_t h, uint32_t sid, uint32_t off,
                     uint32_t len)
{
    size_t i = (size_t)h & mask;
    while (slots[i].sid1) i = (i + 1) & mask;
    slots[i] = (lp__strslot_t){(uint32_t)(h >> 32), sid + 1, off, len};
}

static int strtab_grow_slots(lp__strtab_t *t)
{
    size_t mask = t->mask * 2 + 1;
    lp__strslot_t *slots = lp__table_alloc((mask + 1) * sizeof(*slots));
    if (!slots) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    for (size_t sid = 0; sid < t->n; sid++)
        slot_put(slots, mask, lp__hash(t->arena + t->off[sid], t->len[sid]), (uint32_t)sid,
                 t->off[sid], t->len[sid]);
    lp__table_free(t->slots, (t->mask + 1) * sizeof(*t->slots));
    t->slots = slots;
    t->mask = mask;
    return 0;
}

int64_t lp__strtab_find_h(const lp__strtab_t *t, const char *s, size_t n, uint64_t h)
{
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = (size_t)h & t->mask;
    for (;;) {
        const lp__strslot_t *e = &t->slots[i];
        if (!e->sid1) return -1;
        if (e->tag == tag && e->len == n && !memcmp(t->arena + e->off, s, n)) return e->sid1 - 1;
        i = (i + 1) & t->mask;
    }
}

int64_t lp__strtab_find(const lp__strtab_t *t, const char *s, size_t n)
{
    return lp__strtab_find_h(t, s, n, lp__hash(s, n));
}

int lp__strtab_intern_h(lp__strtab_t *t, const char *s, size_t n, uint64_t h, uint32_t *sid_out)
{
    int64_t f = lp__strtab_find_h(t, s, n, h);
    if (f >= 0) {
        *sid_out = (uint32_t)f;
        return 0;
    }
    if ((t->n + 1) * 4 > (t->mask + 1) * 3) {
        int rc = strtab_grow_slots(t);
        if (rc) return rc;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        uint32_t *off = realloc(t->off, cap * sizeof(*off));
        if (off) t->off = off;
        uint32_t *len = realloc(t->len, cap * sizeof(*len));
        if (len) t->len = len;
        int32_t *tok = realloc(t->tok, cap * sizeof(*tok));
        if (tok) t->tok = tok;
        if (!off || !len || !tok) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        t->cap = cap;
    }
    if (t->arena_n + n > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 65536;
        while (cap < t->arena_n + n) cap *= 2;
        if (cap > UINT32_MAX) return lp_error_set(LP_ERR(E2BIG), "tokenizer: vocabulary too large");
        char *a = realloc(t->arena, cap);
        if (!a) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        t->arena = a;
        t->arena_cap = cap;
    }
    uint32_t sid = (uint32_t)t->n++;
    if (n) memcpy(t->arena + t->arena_n, s, n);
    t->off[sid] = (uint32_t)t->arena_n;
    t->len[sid] = (uint32_t)n;
    t->tok[sid] = -1;
    t->arena_n += n;
    slot_put(t->slots, t->mask, h, sid, t->off[sid], (uint32_t)n);
    *sid_out = sid;
    return 0;
}

int lp__strtab_intern(lp__strtab_t *t, const char *s, size_t n, uint32_t *sid_out)
{
    return lp__strtab_intern_h(t, s, n, lp__hash(s, n), sid_out);
}

/* ---- pair map ---- */

int lp__pairmap_init(lp__pairmap_t *m, size_t expect)
{
    memset(m, 0, sizeof(*m));
    size_t cap = pow2_at_least(expect + expect / 3 + 16); /* load <= 3/4 */
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap) bits++;
    m->mask = cap - 1;
    m->shift = 64 - bits;
    m->e = lp__table_alloc(cap * sizeof(*m->e));
    if (!m->e) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    memset(m->e, 0xff, cap * sizeof(*m->e));
    return 0;
}

void lp__pairmap_free(lp__pairmap_t *m)
{
    if (m->e) lp__table_free(m->e, (m->mask + 1) * sizeof(*m->e));
    memset(m, 0, sizeof(*m));
}

int lp__pairmap_add(lp__pairmap_t *m, uint64_t key, int32_t rank, uint32_t val)
{
    if ((m->n + 1) * 4 > (m->mask + 1) * 3)
        return lp_error_set(LP_ERR(ENOSPC), "tokenizer: pair map full");
    size_t i = lp__pairmap_slot(m, key);
    for (;;) {
        if (m->e[i].key == key) return 0;
        if (m->e[i].key == UINT64_MAX) break;
        i = (i + 1) & m->mask;
    }
    m->e[i] = (lp__pairent_t){key, rank, val};
    m->n++;
    return 0;
}

/* ---- word cache ----
 * Open addressing over (hash, word bytes, ids) kept in two arenas.  Only
 * short words are cached, and the cache empties itself when full, so its
 * memory stays bounded whatever the input. */

#define WC_MAX_SLOTS 65536
#define WC_MAX_WORD 48
#define WC_MAX_ARENA (8u << 20)

typedef struct wc_slot {
    uint64_t hash;
    uint32_t word_off, ids_off;
    uint16_t word_len, n_ids;
} wc_slot_t;

struct lp__wcache {
    wc_slot_t *slot; /* (n_slots); hash 0 = empty */
    size_t n_slots;
    size_t used;
    lp__buf_t words;
    lp__ivec_t ids;
};

lp__wcache_t *lp__wcache_new(size_t text_len)
{
    lp__wcache_t *c = calloc(1, sizeof(*c));
    if (!c) return NULL;
    c->n_slots = 1024;
    while (c->n_slots < WC_MAX_SLOTS && c->n_slots * 16 < text_len) c->n_slots *= 2;
    c->slot = calloc(c->n_slots, sizeof(*c->slot));
    if (!c->slot) {
        free(c);
        return NULL;
    }
    return c;
}

void lp__wcache_free(lp__wcache_t *c)
{
    if (!c) return;
    free(c->slot);
    free(c->words.v);
    free(c->ids.v);
    free(c);
}

static uint64_t wc_hash(const char *s, size_t n)
{
    uint64_t h = lp__hash(s, n);
    return h ? h : 1;
}

bool lp__wcache_get(lp__wcache_t *c, const char *s, size_t n, lp__ivec_t *out)
{
    if (!c || n > WC_MAX_WORD) return false;
    uint64_t h = wc_hash(s, n);
    size_t i = (size_t)h & (c->n_slots - 1);
    for (;;) {
        wc_slot_t *e = &c->slot[i];
        if (!e->hash) return false;
        if (e->hash == h && e->word_len == n && !memcmp(c->words.v + e->word_off, s, n)) {
            if (!e->n_ids) return true;
            if (lp__ivec_reserve(out, e->n_ids)) return false;
            memcpy(out->v + out->n, c->ids.v + e->ids_off, e->n_ids * sizeof(int32_t));
            out->n += e->n_ids;
            return true;
        }
        i = (i + 1) & (c->n_slots - 1);
    }
}

void lp__wcache_put(lp__wcache_t *c, const char *s, size_t n, const int32_t *ids, size_t n_ids)
{
    if (!c || n > WC_MAX_WORD || n_ids > WC_MAX_WORD) return;
    if (c->used * 2 >= c->n_slots || c->words.n + n > WC_MAX_ARENA) {
        memset(c->slot, 0, c->n_slots * sizeof(*c->slot));
        c->used = 0;
        c->words.n = 0;
        c->ids.n = 0;
    }
    uint64_t h = wc_hash(s, n);
    size_t i = (size_t)h & (c->n_slots - 1);
    while (c->slot[i].hash) i = (i + 1) & (c->n_slots - 1);
    size_t woff = c->words.n, ioff = c->ids.n;
    if (lp__buf_put(&c->words, s, n)) return;
    if (lp__ivec_reserve(&c->ids, n_ids)) return;
    if (n_ids) memcpy(c->ids.v + ioff, ids, n_ids * sizeof(int32_t));
    c->ids.n += n_ids;
    c->slot[i] = (wc_slot_t){h, (uint32_t)woff, (uint32_t)ioff, (uint16_t)n, (uint16_t)n_ids};
    c->used++;
}
