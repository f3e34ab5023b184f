/* fairq.c - round-robin admission across clients (see fairq.h). */
#include "fairq.h"

#include <assert.h>
#include <string.h>

int lp__fair_cmp(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len)
{
    if (a_len != b_len) return a_len < b_len ? -1 : 1;
    return a_len ? memcmp(a, b, a_len) : 0;
}

void lp__fair_pick_begin(lp__fair_pick_t *p, const lp__fair_t *fair)
{
    *p = (lp__fair_pick_t){.fair = fair, .after = SIZE_MAX, .any = SIZE_MAX};
}

void lp__fair_offer(lp__fair_pick_t *p, size_t idx, const uint8_t *key, size_t len)
{
    /* Strictly smaller only: of one client, the first offer (the oldest
     * request) is kept. */
    if (p->any == SIZE_MAX || lp__fair_cmp(key, len, p->any_key, p->any_len) < 0) {
        p->any = idx;
        p->any_key = key;
        p->any_len = len;
    }
    if (lp__fair_cmp(key, len, p->fair->last, p->fair->last_len) <= 0) return;
    if (p->after == SIZE_MAX || lp__fair_cmp(key, len, p->after_key, p->after_len) < 0) {
        p->after = idx;
        p->after_key = key;
        p->after_len = len;
    }
}

size_t lp__fair_pick_end(const lp__fair_pick_t *p)
{
    /* The next client after the last one served, else wrap to the first. */
    return p->after != SIZE_MAX ? p->after : p->any;
}

void lp__fair_served(lp__fair_t *fair, const uint8_t *key, size_t len)
{
    assert(len <= LP__FAIR_KEY_MAX);
    memcpy(fair->last, key, len);
    fair->last_len = len;
}
