/* gr-dfa.c - NFA to DFA (subset construction), trimming of states that can
 * no longer accept, Moore minimisation and a canonical numbering, so that
 * equal languages give equal tables and hashes. */
#include "gr-fa.h"

#include "error.h"

#include <pthread.h>
#include <stdio.h>

/* A DFA under construction: classes fixed, states appended. */
typedef struct {
    uint32_t n_cls;
    uint8_t cls[256];
    GR_VEC(int32_t) next; /* n * n_cls */
    GR_VEC(uint8_t) cnt;
    GR_VEC(int32_t) tag;
    bool any_cnt;
    uint32_t n;
} raw_t;

static void raw_free(raw_t *r)
{
    GR_FREE(r->next);
    GR_FREE(r->cnt);
    GR_FREE(r->tag);
}

static int64_t raw_add(raw_t *r, int32_t tag, uint32_t max_states)
{
    if (r->n >= max_states)
        return lp_error_set(LP_ERR(E2BIG), "automaton too large (over %u DFA states)", max_states);
    if (GR_RESERVE(r->next, r->n_cls) || GR_RESERVE(r->cnt, r->n_cls) || GR_PUSH(r->tag, tag))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building an automaton");
    for (uint32_t k = 0; k < r->n_cls; k++) {
        r->next.v[r->next.n++] = -1;
        r->cnt.v[r->cnt.n++] = 0;
    }
    return r->n++;
}

/* ---- hash set of sorted state lists --------------------------------------------- */

typedef struct {
    GR_VEC(uint32_t) pool;   /* concatenated sets */
    GR_VEC(uint32_t) off;    /* set i = pool[off[i] .. off[i+1]) */
    uint32_t *slots;         /* index + 1, 0 empty */
    uint32_t nslots;
} setmap_t;

static void sm_free(setmap_t *m)
{
    GR_FREE(m->pool);
    GR_FREE(m->off);
    free(m->slots);
}

static uint64_t set_hash(const uint32_t *v, uint32_t n)
{
    return lp__gr_hash_bytes(v, n * sizeof(uint32_t), 7);
}

static int sm_rehash(setmap_t *m)
{
    uint32_t ns = m->nslots ? m->nslots * 2 : 256;
    uint32_t *sl = calloc(ns, sizeof(uint32_t));
    if (!sl) return LP_ERR(ENOMEM);
    uint32_t cnt = m->off.n ? m->off.n - 1 : 0;
    for (uint32_t i = 0; i < cnt; i++) {
        uint64_t h = set_hash(m->pool.v + m->off.v[i], m->off.v[i + 1] - m->off.v[i]);
        uint32_t j = (uint32_t)h & (ns - 1);
        while (sl[j]) j = (j + 1) & (ns - 1);
        sl[j] = i + 1;
    }
    free(m->slots);
    m->slots = sl;
    m->nslots = ns;
    return 0;
}

/* Find or insert; *idx gets the set's index; returns 1 when inserted. */
static int sm_get(setmap_t *m, const uint32_t *v, uint32_t n, uint32_t *idx)
{
    if (!m->off.n && GR_PUSH(m->off, 0)) return LP_ERR(ENOMEM);
    uint32_t cnt = m->off.n - 1;
    if ((cnt + 1) * 2 > m->nslots && sm_rehash(m)) return LP_ERR(ENOMEM);
    uint64_t h = set_hash(v, n);
    uint32_t j = (uint32_t)h & (m->nslots - 1);
    while (m->slots[j]) {
        uint32_t i = m->slots[j] - 1;
        uint32_t len = m->off.v[i + 1] - m->off.v[i];
        if (len == n && !memcmp(m->pool.v + m->off.v[i], v, n * sizeof(uint32_t))) {
            *idx = i;
            return 0;
        }
        j = (j + 1) & (m->nslots - 1);
    }
    if (GR_RESERVE(m->pool, n)) return LP_ERR(ENOMEM);
    memcpy(m->pool.v + m->pool.n, v, n * sizeof(uint32_t));
    m->pool.n += n;
    if (GR_PUSH(m->off, m->pool.n)) return LP_ERR(ENOMEM);
    m->slots[j] = cnt + 1;
    *idx = cnt;
    return 1;
}

/* ---- subset construction ------------------------------------------------------- */

typedef struct {
    const gr_nfa_t *n;
    uint32_t *first;  /* CSR: edges of state s are order[first[s] .. first[s+1]) */
    uint32_t *order;
    uint32_t *mark;   /* per NFA state: generation seen */
    uint32_t gen;
    lp__gr_u32v_t stack;
} nfa_ctx_t;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Close `set` (n items, in buf with room) under EPS edges (and BOL when
 * bol, EOL when eol); result sorted in *out.  Returns the size or -1. */
static int64_t closure(nfa_ctx_t *c, lp__gr_u32v_t *out, bool bol, bool eol)
{
    c->gen++;
    c->stack.n = 0;
    for (uint32_t i = 0; i < out->n; i++) {
        c->mark[out->v[i]] = c->gen;
        if (GR_PUSH(c->stack, out->v[i])) return -1;
    }
    while (c->stack.n) {
        uint32_t s = c->stack.v[--c->stack.n];
        for (uint32_t k = c->first[s]; k < c->first[s + 1]; k++) {
            const gr_nedge_t *e = &c->n->e.v[c->order[k]];
            if (e->kind == GR_NE_BYTE) continue;
            if (e->kind == GR_NE_BOL && !bol) continue;
            if (e->kind == GR_NE_EOL && !eol) continue;
            if (c->mark[e->to] == c->gen) continue;
            c->mark[e->to] = c->gen;
            if (GR_PUSH(c->stack, e->to) || GR_PUSH(*out, e->to)) return -1;
        }
    }
    if (out->n > 24) {
        qsort(out->v, out->n, sizeof(uint32_t), cmp_u32);
    } else { /* small sets: insertion sort */
        for (uint32_t i = 1; i < out->n; i++) {
            uint32_t x = out->v[i], j = i;
            while (j && out->v[j - 1] > x) {
                out->v[j] = out->v[j - 1];
                j--;
            }
            out->v[j] = x;
        }
    }
    return out->n;
}

/* Tag of a set: smallest accepting tag reachable through EPS/EOL (and BOL
 * for the start set). */
static int32_t set_tag(nfa_ctx_t *c, const uint32_t *v, uint32_t n, bool bol, int *err)
{
    lp__gr_u32v_t t = {0};
    int32_t tag = -1;
    if (GR_RESERVE(t, n)) {
        *err = LP_ERR(ENOMEM);
        return -1;
    }
    memcpy(t.v, v, n * sizeof(uint32_t));
    t.n = n;
    if (closure(c, &t, bol, true) < 0) {
        *err = LP_ERR(ENOMEM);
    } else {
        for (uint32_t i = 0; i < t.n; i++) {
            int32_t g = c->n->tag.v[t.v[i]];
            if (g >= 0 && (tag < 0 || g < tag)) tag = g;
        }
    }
    GR_FREE(t);
    return tag;
}

static int finish(raw_t *r, uint32_t max_states, gr_dfa_t **out);

/* Subset construction's work (NFA states handled), counted per compile on
 * the compiling thread; outside a compile, per automaton. */
#define DFA_WORK_ONE 50000000ull
static _Thread_local uint64_t work_left; /* 0: no compile budget set */

void lp__gr_dfa_budget(uint64_t steps) { work_left = steps; }

int lp__gr_dfa_from_nfa(const gr_nfa_t *n, uint32_t max_states, gr_dfa_t **out)
{
    if (!max_states) max_states = 20000;
    int rc = 0;
    raw_t r = {0};
    setmap_t sm = {0};
    nfa_ctx_t c = {n, NULL, NULL, NULL, 0, {0}};
    lp__gr_u32v_t cur = {0};
    lp__gr_u32v_t work = {0};
    uint32_t *cnt_per_cls = NULL;
    uint32_t ns = n->n_states;
    c.first = calloc(ns + 1, sizeof(uint32_t));
    c.order = malloc((n->e.n + 1) * sizeof(uint32_t));
    c.mark = calloc(ns, sizeof(uint32_t));
    if (!c.first || !c.order || !c.mark) goto oom;
    for (uint32_t i = 0; i < n->e.n; i++) c.first[n->from.v[i] + 1]++;
    for (uint32_t s = 0; s < ns; s++) c.first[s + 1] += c.first[s];
    {
        uint32_t *pos = malloc((ns + 1) * sizeof(uint32_t));
        if (!pos) goto oom;
        memcpy(pos, c.first, (ns + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < n->e.n; i++) c.order[pos[n->from.v[i]]++] = i;
        free(pos);
    }
    /* byte classes: intervals between the edges' boundaries */
    {
        bool cut[257] = {0};
        for (uint32_t i = 0; i < n->e.n; i++)
            if (n->e.v[i].kind == GR_NE_BYTE) {
                cut[n->e.v[i].lo] = true;
                cut[n->e.v[i].hi + 1] = true;
            }
        uint32_t k = 0;
        for (int b = 0; b < 256; b++) {
            if (b && cut[b]) k++;
            r.cls[b] = (uint8_t)k;
        }
        r.n_cls = k + 1;
    }
    cnt_per_cls = calloc(r.n_cls, sizeof(uint32_t));
    if (!cnt_per_cls) goto oom;
    /* start */
    if (GR_PUSH(cur, n->start)) goto oom;
    if (closure(&c, &cur, true, false) < 0) goto oom;
    {
        uint32_t idx;
        if (sm_get(&sm, cur.v, cur.n, &idx) < 0) goto oom;
        int32_t tag = set_tag(&c, cur.v, cur.n, true, &rc);
        if (rc) goto oom;
        int64_t s = raw_add(&r, tag, max_states);
        if (s < 0) {
            rc = (int)s;
            goto fail;
        }
    }
    /* bucket the byte-edge targets of a set by class */
    lp__gr_u32v_t bucket[256];
    memset(bucket, 0, sizeof(bucket));
    uint64_t spent = 0, limit = work_left ? work_left : DFA_WORK_ONE;
    for (uint32_t d = 0; d < r.n; d++) {
        uint32_t lo = sm.off.v[d], hi = sm.off.v[d + 1];
        spent += hi - lo;
        for (uint32_t k = 0; k < r.n_cls; k++) bucket[k].n = 0;
        memset(cnt_per_cls, 0, r.n_cls * sizeof(uint32_t));
        for (uint32_t i = lo; i < hi; i++) {
            uint32_t s = sm.pool.v[i];
            for (uint32_t k = c.first[s]; k < c.first[s + 1]; k++) {
                const gr_nedge_t *e = &n->e.v[c.order[k]];
                if (e->kind != GR_NE_BYTE) continue;
                for (uint32_t cl = r.cls[e->lo]; cl <= r.cls[e->hi]; cl++) {
                    if (GR_PUSH(bucket[cl], e->to)) goto oom_b;
                    if (e->count) cnt_per_cls[cl] = 1;
                }
            }
        }
        for (uint32_t cl = 0; cl < r.n_cls; cl++) {
            if (!bucket[cl].n) continue;
            work.n = 0;
            /* dedup through the closure's marks */
            c.gen++;
            for (uint32_t i = 0; i < bucket[cl].n; i++) {
                uint32_t t = bucket[cl].v[i];
                if (c.mark[t] == c.gen) continue;
                c.mark[t] = c.gen;
                if (GR_PUSH(work, t)) goto oom_b;
            }
            if (closure(&c, &work, false, false) < 0) goto oom_b;
            spent += work.n;
            if (spent > limit) {
                rc = lp_error_set(LP_ERR(E2BIG), "grammar too costly to compile (over %u million automaton steps)",
                                  (unsigned)(DFA_WORK_ONE / 1000000));
                for (int k = 0; k < 256; k++) GR_FREE(bucket[k]);
                goto fail;
            }
            uint32_t idx;
            int ins = sm_get(&sm, work.v, work.n, &idx);
            if (ins < 0) goto oom_b;
            if (ins) {
                int32_t tag = set_tag(&c, work.v, work.n, false, &rc);
                if (rc) goto oom_b;
                int64_t s = raw_add(&r, tag, max_states);
                if (s < 0) {
                    rc = (int)s;
                    for (int k = 0; k < 256; k++) GR_FREE(bucket[k]);
                    goto fail;
                }
            }
            r.next.v[(size_t)d * r.n_cls + cl] = (int32_t)idx;
            r.cnt.v[(size_t)d * r.n_cls + cl] = (uint8_t)cnt_per_cls[cl];
            if (cnt_per_cls[cl]) r.any_cnt = true;
        }
    }
    for (int k = 0; k < 256; k++) GR_FREE(bucket[k]);
    if (work_left) work_left = work_left > spent ? work_left - spent : 1;
    rc = finish(&r, max_states, out);
    goto done;
oom_b:
    for (int k = 0; k < 256; k++) GR_FREE(bucket[k]);
oom:
    rc = lp_error_set(LP_ERR(ENOMEM), "out of memory building an automaton");
fail:
done:
    free(cnt_per_cls);
    free(c.first);
    free(c.order);
    free(c.mark);
    GR_FREE(c.stack);
    GR_FREE(cur);
    GR_FREE(work);
    sm_free(&sm);
    raw_free(&r);
    return rc;
}

int lp__gr_dfa_from_re(const gr_re_t *re, enum gr_enc enc, uint32_t max_states, gr_dfa_t **out)
{
    int32_t tag = 0;
    return lp__gr_dfa_build(&re, &tag, 1, enc, max_states, out);
}

/* ---- the build cache ------------------------------------------------------------------------ */

#define CACHE_SLOTS 16384u /* entries kept; the table is emptied when full */

typedef struct {
    uint64_t hash;
    uint32_t *key; /* serialisation */
    uint32_t nkey;
    gr_dfa_t *dfa;
} centry_t;

#define CACHE_BYTES ((size_t)256 << 20) /* automata and keys kept; emptied past it too */

static struct {
    pthread_mutex_t lock;
    centry_t *e; /* open addressing */
    uint32_t n;
    size_t bytes;
} cache = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static size_t dfa_bytes(const gr_dfa_t *d)
{
    size_t cells = (size_t)d->n_states * d->n_cls;
    return sizeof(*d) + cells * (sizeof(int32_t) + (d->cnt ? 1 : 0)) +
           d->n_states * (sizeof(int32_t) + 1 + (d->dmin ? 2 * sizeof(uint32_t) : 0));
}

static void cache_clear(void)
{
    for (uint32_t i = 0; i < CACHE_SLOTS; i++) {
        free(cache.e[i].key);
        lp__gr_dfa_unref(&cache.e[i].dfa);
        memset(&cache.e[i], 0, sizeof(cache.e[i]));
    }
    cache.n = 0;
    cache.bytes = 0;
}

int lp__gr_dfa_build(const gr_re_t *const *res, const int32_t *tags, uint32_t n, enum gr_enc enc,
                     uint32_t max_states, gr_dfa_t **out)
{
    lp__gr_u32v_t key = {0};
    int rc = 0;
    if (GR_PUSH(key, (uint32_t)enc) || GR_PUSH(key, max_states)) rc = LP_ERR(ENOMEM);
    for (uint32_t i = 0; i < n && !rc; i++) {
        if (GR_PUSH(key, (uint32_t)tags[i])) rc = LP_ERR(ENOMEM);
        if (!rc) rc = lp__gr_re_serialize(res[i], &key);
    }
    if (rc) {
        GR_FREE(key);
        return lp_error_set(rc, "out of memory building an automaton");
    }
    uint64_t h = lp__gr_hash_bytes(key.v, key.n * sizeof(uint32_t), 11);
    pthread_mutex_lock(&cache.lock);
    if (!cache.e) cache.e = calloc(CACHE_SLOTS, sizeof(centry_t));
    if (cache.e) {
        uint32_t j = (uint32_t)h & (CACHE_SLOTS - 1);
        while (cache.e[j].dfa) {
            centry_t *c = &cache.e[j];
            if (c->hash == h && c->nkey == key.n && !memcmp(c->key, key.v, key.n * sizeof(uint32_t))) {
                *out = lp__gr_dfa_ref(c->dfa);
                pthread_mutex_unlock(&cache.lock);
                GR_FREE(key);
                return 0;
            }
            j = (j + 1) & (CACHE_SLOTS - 1);
        }
    }
    pthread_mutex_unlock(&cache.lock);
    /* build outside the lock */
    gr_nfa_t nfa;
    rc = lp__gr_nfa_init(&nfa, enc, 0);
    for (uint32_t i = 0; i < n && !rc; i++) rc = lp__gr_nfa_add(&nfa, res[i], tags[i]);
    gr_dfa_t *d = NULL;
    if (!rc) rc = lp__gr_dfa_from_nfa(&nfa, max_states, &d);
    lp__gr_nfa_free(&nfa);
    if (rc) {
        GR_FREE(key);
        return rc;
    }
    pthread_mutex_lock(&cache.lock);
    if (cache.e) {
        size_t nb = dfa_bytes(d) + key.n * sizeof(uint32_t);
        if (cache.n * 2 >= CACHE_SLOTS || cache.bytes + nb > CACHE_BYTES) cache_clear();
        cache.bytes += nb;
        uint32_t j = (uint32_t)h & (CACHE_SLOTS - 1);
        while (cache.e[j].dfa) j = (j + 1) & (CACHE_SLOTS - 1);
        cache.e[j].hash = h;
        cache.e[j].key = key.v;
        cache.e[j].nkey = key.n;
        cache.e[j].dfa = lp__gr_dfa_ref(d);
        cache.n++;
        key.v = NULL;
    }
    pthread_mutex_unlock(&cache.lock);
    GR_FREE(key);
    *out = d;
    return 0;
}

/* ---- trim, minimise, canonicalise ---------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Hopcroft's partition refinement: block[] of each live state; returns the
 * block count.  States start split by tag, by which classes count and by
 * which classes lead nowhere (so the dead state, left out, never needs to
 * split anything). */
static int64_t minimise(const raw_t *r, const uint8_t *live, uint32_t *block)
{
    uint32_t n = r->n, K = r->n_cls;
    int64_t ret = -1;
    uint32_t *elems = malloc((n + 1) * sizeof(uint32_t)), *loc = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *blk = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *bstart = malloc((n + 1) * sizeof(uint32_t)), *bend = malloc((n + 1) * sizeof(uint32_t));
    uint32_t *marked = calloc(n + 1, sizeof(uint32_t));
    uint8_t *inw = calloc(n + 1, 1);
    uint32_t *work = malloc((n + 1) * sizeof(uint32_t));
    uint64_t *pairs = malloc((n + 1) * 2 * sizeof(uint64_t));
    /* inverse transitions among live states: for each target, (class, source) */
    uint32_t *ifirst = calloc(n + 1, sizeof(uint32_t));
    uint32_t *isrc = NULL, *icls = NULL, *touched = NULL, *xs = NULL;
    uint32_t *xcnt = calloc(K + 1, sizeof(uint32_t));
    if (!elems || !loc || !blk || !bstart || !bend || !marked || !inw || !work || !pairs || !ifirst || !xcnt)
        goto out;
#define TGT(s, k) (r->next.v[(size_t)(s) * K + (k)])
    size_t ne = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (!live[s]) continue;
        for (uint32_t k = 0; k < K; k++) {
            int32_t t = TGT(s, k);
            if (t >= 0 && live[t]) ifirst[t + 1]++, ne++;
        }
    }
    for (uint32_t t = 0; t < n; t++) ifirst[t + 1] += ifirst[t];
    isrc = malloc((ne + 1) * sizeof(uint32_t));
    icls = malloc((ne + 1) * sizeof(uint32_t));
    touched = malloc((n + 1) * sizeof(uint32_t));
    xs = malloc((ne + 1) * sizeof(uint32_t));
    if (!isrc || !icls || !touched || !xs) goto out;
    {
        uint32_t *pos = malloc((n + 1) * sizeof(uint32_t));
        if (!pos) goto out;
        memcpy(pos, ifirst, (n + 1) * sizeof(uint32_t));
        for (uint32_t s = 0; s < n; s++) {
            if (!live[s]) continue;
            for (uint32_t k = 0; k < K; k++) {
                int32_t t = TGT(s, k);
                if (t < 0 || !live[t]) continue;
                isrc[pos[t]] = s;
                icls[pos[t]++] = k;
            }
        }
        free(pos);
    }
    /* initial blocks: by signature */
    uint32_t m = 0;
    for (uint32_t s = 0; s < n; s++) {
        if (!live[s]) continue;
        uint64_t h = lp__gr_mix(1, (uint64_t)(int64_t)r->tag.v[s]);
        for (uint32_t k = 0; k < K; k++) {
            int32_t t = TGT(s, k);
            h = lp__gr_mix(h, (uint64_t)r->cnt.v[(size_t)s * K + k] * 2 + (t >= 0 && live[t]));
        }
        pairs[2 * m] = h;
        pairs[2 * m + 1] = s;
        m++;
    }
    if (m > 1) qsort(pairs, m, 2 * sizeof(uint64_t), cmp_u64); /* by signature (first word) */
    uint32_t nb = 0, nw = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint32_t s = (uint32_t)pairs[2 * i + 1];
        elems[i] = s;
        if (i == 0 || pairs[2 * i] != pairs[2 * i - 2]) {
            if (nb) bend[nb - 1] = i;
            bstart[nb++] = i;
        }
        blk[s] = nb - 1;
        loc[s] = i;
    }
    if (nb) bend[nb - 1] = m;
    for (uint32_t b = 0; b < nb; b++) {
        work[nw++] = b;
        inw[b] = 1;
    }
    while (nw) {
        uint32_t a = work[--nw];
        inw[a] = 0;
        /* the preimage of block a, bucketed by class */
        memset(xcnt, 0, (K + 1) * sizeof(uint32_t));
        for (uint32_t i = bstart[a]; i < bend[a]; i++) {
            uint32_t t = elems[i];
            for (uint32_t j = ifirst[t]; j < ifirst[t + 1]; j++) xcnt[icls[j] + 1]++;
        }
        for (uint32_t k = 0; k < K; k++) xcnt[k + 1] += xcnt[k];
        for (uint32_t i = bstart[a]; i < bend[a]; i++) {
            uint32_t t = elems[i];
            for (uint32_t j = ifirst[t]; j < ifirst[t + 1]; j++) xs[xcnt[icls[j]]++] = isrc[j];
        }
        /* xcnt[k] now ends class k's run; runs start at the previous end */
        uint32_t st = 0;
        for (uint32_t k = 0; k < K; k++) {
            uint32_t en = xcnt[k];
            uint32_t nt = 0;
            for (uint32_t i = st; i < en; i++) {
                uint32_t s = xs[i], b = blk[s];
                if (loc[s] < bstart[b] + marked[b]) continue; /* already marked */
                if (!marked[b]) touched[nt++] = b;
                /* move s to the front part of its block */
                uint32_t p = bstart[b] + marked[b], o = elems[p];
                elems[p] = s;
                elems[loc[s]] = o;
                loc[o] = loc[s];
                loc[s] = p;
                marked[b]++;
            }
            for (uint32_t i = 0; i < nt; i++) {
                uint32_t b = touched[i], mk = marked[b];
                marked[b] = 0;
                if (mk == bend[b] - bstart[b]) continue;
                /* split: the marked front becomes a new block */
                uint32_t nbk = nb++;
                bstart[nbk] = bstart[b];
                bend[nbk] = bstart[b] + mk;
                bstart[b] += mk;
                for (uint32_t q = bstart[nbk]; q < bend[nbk]; q++) blk[elems[q]] = nbk;
                if (inw[b]) {
                    work[nw++] = nbk;
                    inw[nbk] = 1;
                } else {
                    uint32_t small = (bend[nbk] - bstart[nbk]) <= (bend[b] - bstart[b]) ? nbk : b;
                    work[nw++] = small;
                    inw[small] = 1;
                }
            }
            st = en;
        }
    }
#undef TGT
    for (uint32_t s = 0; s < n; s++)
        if (live[s]) block[s] = blk[s];
    ret = nb;
out:
    free(elems);
    free(loc);
    free(blk);
    free(bstart);
    free(bend);
    free(marked);
    free(inw);
    free(work);
    free(pairs);
    free(ifirst);
    free(isrc);
    free(icls);
    free(touched);
    free(xcnt);
    free(xs);
    return ret;
}

static int finish(raw_t *r, uint32_t max_states, gr_dfa_t **out)
{
    (void)max_states;
    uint32_t n = r->n, K = r->n_cls;
    int rc = LP_ERR(ENOMEM);
    uint8_t *live = calloc(n ? n : 1, 1);
    uint32_t *block = calloc(n ? n : 1, sizeof(uint32_t));
    uint32_t *rev_first = calloc(n + 1, sizeof(uint32_t));
    uint32_t *rev = NULL, *queue = NULL, *newid = NULL, *rep = NULL;
    gr_dfa_t *d = NULL;
    if (!live || !block || !rev_first) goto done;
    /* live: can reach an accepting state (reverse BFS) */
    size_t ne = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t k = 0; k < K; k++)
            if (r->next.v[(size_t)s * K + k] >= 0) {
                rev_first[r->next.v[(size_t)s * K + k] + 1]++;
                ne++;
            }
    for (uint32_t s = 0; s < n; s++) rev_first[s + 1] += rev_first[s];
    rev = malloc((ne + 1) * sizeof(uint32_t));
    queue = malloc((n + 1) * sizeof(uint32_t));
    if (!rev || !queue) goto done;
    {
        uint32_t *pos = malloc((n + 1) * sizeof(uint32_t));
        if (!pos) goto done;
        memcpy(pos, rev_first, (n + 1) * sizeof(uint32_t));
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t k = 0; k < K; k++) {
                int32_t t = r->next.v[(size_t)s * K + k];
                if (t >= 0) rev[pos[t]++] = s;
            }
        free(pos);
    }
    uint32_t qh = 0, qt = 0;
    for (uint32_t s = 0; s < n; s++)
        if (r->tag.v[s] >= 0) {
            live[s] = 1;
            queue[qt++] = s;
        }
    while (qh < qt) {
        uint32_t t = queue[qh++];
        for (uint32_t i = rev_first[t]; i < rev_first[t + 1]; i++)
            if (!live[rev[i]]) {
                live[rev[i]] = 1;
                queue[qt++] = rev[i];
            }
    }
    d = calloc(1, sizeof(*d));
    if (!d) goto done;
    atomic_init(&d->refs, 1);
    if (!n || !live[0]) { /* the empty language */
        d->n_cls = 1;
        d->next = calloc(1, sizeof(int32_t));
        d->tag = calloc(1, sizeof(int32_t));
        d->sink = calloc(1, 1);
        if (!d->next || !d->tag || !d->sink) goto done;
        d->hash = 0x5eed;
        *out = d;
        d = NULL;
        rc = 0;
        goto done;
    }
    int64_t nb = minimise(r, live, block);
    if (nb < 0) goto done;
    /* raw classes in the order of their first byte: walking them visits
     * targets in the same order as walking bytes */
    uint32_t corder[256], nco = 0;
    {
        bool seen_cls[256] = {0};
        for (int b = 0; b < 256; b++)
            if (!seen_cls[r->cls[b]]) {
                seen_cls[r->cls[b]] = true;
                corder[nco++] = r->cls[b];
            }
    }
    /* canonical order: BFS from the start over blocks */
    newid = malloc((size_t)nb * sizeof(uint32_t));
    rep = malloc((size_t)nb * sizeof(uint32_t));
    if (!newid || !rep) goto done;
    for (int64_t i = 0; i < nb; i++) newid[i] = UINT32_MAX;
    qh = qt = 0;
    newid[block[0]] = 0;
    rep[0] = 0;
    queue[qt++] = 0;
    uint32_t cnt = 1;
    while (qh < qt) {
        uint32_t s = queue[qh++];
        for (uint32_t ci = 0; ci < nco; ci++) {
            int32_t t = r->next.v[(size_t)s * K + corder[ci]];
            if (t < 0 || !live[t]) continue;
            if (newid[block[t]] == UINT32_MAX) {
                newid[block[t]] = cnt;
                rep[cnt++] = (uint32_t)t;
                queue[qt++] = (uint32_t)t;
            }
        }
    }
    /* canonical classes: raw classes with equal columns merge, numbered in
     * order of first byte */
    uint64_t rawh[256];
    for (uint32_t k = 0; k < K; k++) {
        uint64_t h = 3;
        for (uint32_t i = 0; i < cnt; i++) {
            size_t at = (size_t)rep[i] * K + k;
            int32_t t = r->next.v[at];
            uint64_t v = t >= 0 && live[t] ? newid[block[t]] + 1 : 0;
            h = lp__gr_mix(h, v * 2 + r->cnt.v[at]);
        }
        rawh[k] = h;
    }
    uint32_t ncls = 0;
    int first_of[256];
    int32_t raw2new[256];
    for (uint32_t k = 0; k < 256; k++) raw2new[k] = -1;
    for (uint32_t ci = 0; ci < nco; ci++) {
        uint32_t k = corder[ci];
        int found = -1;
        for (uint32_t j = 0; j < ncls && found < 0; j++)
            if (rawh[r->cls[first_of[j]]] == rawh[k]) found = (int)j;
        if (found < 0) {
            int fb = 0;
            while (r->cls[fb] != k) fb++;
            first_of[ncls] = fb;
            found = (int)ncls++;
        }
        raw2new[k] = found;
    }
    for (int b = 0; b < 256; b++) d->cls[b] = (uint8_t)raw2new[r->cls[b]];
    d->n_states = cnt;
    d->n_cls = ncls;
    d->next = malloc((size_t)cnt * ncls * sizeof(int32_t));
    d->tag = malloc((size_t)cnt * sizeof(int32_t));
    if (r->any_cnt) d->cnt = calloc((size_t)cnt * ncls, 1);
    if (!d->next || !d->tag || (r->any_cnt && !d->cnt)) goto done;
    uint64_t h = lp__gr_mix(cnt, ncls);
    for (int b = 0; b < 256; b++) h = lp__gr_mix(h, d->cls[b]);
    for (uint32_t i = 0; i < cnt; i++) {
        d->tag[i] = r->tag.v[rep[i]];
        h = lp__gr_mix(h, (uint64_t)(int64_t)d->tag[i]);
        for (uint32_t k = 0; k < ncls; k++) {
            size_t at = (size_t)rep[i] * K + r->cls[first_of[k]];
            int32_t t = r->next.v[at];
            int32_t v = t >= 0 && live[t] ? (int32_t)newid[block[t]] : -1;
            d->next[(size_t)i * ncls + k] = v;
            uint8_t c = r->cnt.v[at];
            if (d->cnt) d->cnt[(size_t)i * ncls + k] = c;
            h = lp__gr_mix(h, (uint64_t)(int64_t)v * 2 + c);
        }
    }
    d->hash = h;
    d->sink = malloc(cnt);
    if (!d->sink) goto done;
    for (uint32_t i = 0; i < cnt; i++) {
        d->sink[i] = 1;
        for (uint32_t k = 0; k < ncls; k++)
            if (d->next[(size_t)i * ncls + k] >= 0) d->sink[i] = 0;
    }
    *out = d;
    d = NULL;
    rc = 0;
done:
    if (rc) lp_error_set(rc, "out of memory building an automaton");
    if (d) lp__gr_dfa_unref(&d);
    free(live);
    free(block);
    free(rev_first);
    free(rev);
    free(queue);
    free(newid);
    free(rep);
    return rc;
}

/* ---- counted characters to an accepting state ---------------------------------- */

static int lengths_locked(gr_dfa_t *d)
{
    uint32_t n = d->n_states, K = d->n_cls;
    if (!d->cnt || d->dmin) return 0;
    d->dmin = malloc(n * sizeof(uint32_t));
    d->dmax = malloc(n * sizeof(uint32_t));
    if (!d->dmin || !d->dmax) return LP_ERR(ENOMEM);
    /* dmin: Bellman-Ford with 0/1 weights, at most n rounds */
    for (uint32_t s = 0; s < n; s++) d->dmin[s] = d->tag[s] >= 0 ? 0 : UINT32_MAX;
    for (uint32_t round = 0; round <= n; round++) {
        bool ch = false;
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t k = 0; k < K; k++) {
                int32_t t = d->next[(size_t)s * K + k];
                if (t < 0 || d->dmin[t] == UINT32_MAX) continue;
                uint32_t v = d->dmin[t] + d->cnt[(size_t)s * K + k];
                if (v < d->dmin[s]) {
                    d->dmin[s] = v;
                    ch = true;
                }
            }
        if (!ch) break;
    }
    /* dmax: longest path; a state that reaches a cycle is unbounded */
    uint8_t *st = calloc(n, 1); /* 0 new, 1 on stack, 2 done */
    uint32_t *stk = malloc((size_t)n * 2 * sizeof(uint32_t));
    if (!st || !stk) {
        free(st);
        free(stk);
        return LP_ERR(ENOMEM);
    }
    for (uint32_t root = 0; root < n; root++) {
        if (st[root]) continue;
        uint32_t sp = 0;
        stk[sp++] = root;
        stk[sp++] = 0;
        st[root] = 1;
        d->dmax[root] = 0;
        while (sp) {
            uint32_t s = stk[sp - 2], k = stk[sp - 1];
            if (k < K) {
                stk[sp - 1]++;
                int32_t t = d->next[(size_t)s * K + k];
                if (t < 0) continue;
                if (st[t] == 1) {
                    d->dmax[s] = UINT32_MAX; /* a cycle */
                } else if (st[t] == 0) {
                    st[t] = 1;
                    d->dmax[t] = 0;
                    stk[sp++] = (uint32_t)t;
                    stk[sp++] = 0;
                }
                continue;
            }
            /* all successors done: fold them in */
            uint32_t best = d->dmax[s];
            for (uint32_t j = 0; j < K && best != UINT32_MAX; j++) {
                int32_t t = d->next[(size_t)s * K + j];
                if (t < 0) continue;
                uint32_t v = d->dmax[t];
                if (v == UINT32_MAX || st[t] == 1) {
                    best = UINT32_MAX;
                    break;
                }
                v += d->cnt[(size_t)s * K + j];
                if (v > best) best = v;
            }
            d->dmax[s] = best;
            st[s] = 2;
            sp -= 2;
        }
    }
    free(st);
    free(stk);
    return 0;
}

/* The DFA may be shared (the build cache) by grammars compiled on other
 * threads: one lock, and a failure leaves no half-filled arrays. */
int lp__gr_dfa_lengths(gr_dfa_t *d)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    int rc = lengths_locked(d);
    if (rc) {
        free(d->dmin);
        free(d->dmax);
        d->dmin = d->dmax = NULL;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---- products, runs, lifetime ---------------------------------------------------- */

int lp__gr_dfa_intersect(const gr_dfa_t *a, const gr_dfa_t *b, uint32_t max_states,
                         gr_dfa_t **out)
{
    if (!max_states) max_states = 20000;
    raw_t r = {0};
    int rc = 0;
    /* classes: pairs */
    uint16_t pair[256];
    uint32_t np = 0;
    int rep[256];
    for (int x = 0; x < 256; x++) {
        uint16_t pv = (uint16_t)(a->cls[x] << 8 | b->cls[x]);
        int f = -1;
        for (uint32_t k = 0; k < np; k++)
            if (pair[k] == pv) {
                f = (int)k;
                break;
            }
        if (f < 0) {
            pair[np] = pv;
            rep[np] = x;
            f = (int)np++;
        }
        r.cls[x] = (uint8_t)f;
    }
    r.n_cls = np;
    if (!a->n_states || !b->n_states) {
        rc = finish(&r, max_states, out);
        raw_free(&r);
        return rc;
    }
    GR_VEC(uint64_t) pairs = {0};
    uint32_t *slots = NULL, nslots = 0;
    /* open addressing map pair -> state */
#define PKEY(x, y) ((uint64_t)(x) << 32 | (uint32_t)(y))
    int64_t s0 = raw_add(&r, a->tag[0] >= 0 && b->tag[0] >= 0 ? a->tag[0] : -1, max_states);
    if (s0 < 0) {
        rc = (int)s0;
        goto out;
    }
    if (GR_PUSH(pairs, PKEY(0, 0))) goto oom;
    for (uint32_t i = 0; i < pairs.n; i++) {
        uint32_t x = (uint32_t)(pairs.v[i] >> 32), y = (uint32_t)pairs.v[i];
        for (uint32_t k = 0; k < np; k++) {
            int32_t tx = lp__gr_dfa_step(a, (int32_t)x, (uint8_t)rep[k]);
            int32_t ty = lp__gr_dfa_step(b, (int32_t)y, (uint8_t)rep[k]);
            if (tx < 0 || ty < 0) continue;
            uint64_t key = PKEY(tx, ty);
            if ((pairs.n + 1) * 2 > nslots) {
                uint32_t ns2 = nslots ? nslots * 2 : 256;
                uint32_t *s2 = calloc(ns2, sizeof(uint32_t));
                if (!s2) goto oom;
                for (uint32_t j = 0; j < pairs.n; j++) {
                    uint32_t h = (uint32_t)lp__gr_mix(0, pairs.v[j]) & (ns2 - 1);
                    while (s2[h]) h = (h + 1) & (ns2 - 1);
                    s2[h] = j + 1;
                }
                free(slots);
                slots = s2;
                nslots = ns2;
            }
            uint32_t h = (uint32_t)lp__gr_mix(0, key) & (nslots - 1);
            int32_t found = -1;
            while (slots[h]) {
                if (pairs.v[slots[h] - 1] == key) {
                    found = (int32_t)slots[h] - 1;
                    break;
                }
                h = (h + 1) & (nslots - 1);
            }
            if (found < 0) {
                int32_t tg = a->tag[tx] >= 0 && b->tag[ty] >= 0 ? a->tag[tx] : -1;
                int64_t ns = raw_add(&r, tg, max_states);
                if (ns < 0) {
                    rc = (int)ns;
                    goto out;
                }
                if (GR_PUSH(pairs, key)) goto oom;
                slots[h] = pairs.n;
                found = (int32_t)ns;
            }
            r.next.v[(size_t)i * np + k] = found;
            uint8_t c = a->cnt ? a->cnt[(size_t)x * a->n_cls + a->cls[rep[k]]] : 0;
            r.cnt.v[(size_t)i * np + k] = c;
            if (c) r.any_cnt = true;
        }
    }
#undef PKEY
    rc = finish(&r, max_states, out);
    goto out;
oom:
    rc = lp_error_set(LP_ERR(ENOMEM), "out of memory building an automaton");
out:
    GR_FREE(pairs);
    free(slots);
    raw_free(&r);
    return rc;
}

int32_t lp__gr_dfa_run(const gr_dfa_t *d, const uint8_t *s, size_t n)
{
    if (!d->n_states) return -1;
    int32_t q = 0;
    for (size_t i = 0; i < n && q >= 0; i++) q = lp__gr_dfa_step(d, q, s[i]);
    return q >= 0 ? d->tag[q] : -1;
}

void lp__gr_dfa_unref(gr_dfa_t **dp)
{
    gr_dfa_t *d = *dp;
    if (!d) return;
    *dp = NULL;
    if (atomic_fetch_sub_explicit(&d->refs, 1, memory_order_acq_rel) != 1) return;
    free(d->next);
    free(d->cnt);
    free(d->tag);
    free(d->sink);
    free(d->dmin);
    free(d->dmax);
    free(d);
}
