/* gr-match.c - the matcher: configurations (a LEX rule's DFA state on a
 * persistent stack of SEQ frames), their closure under calls and returns,
 * one byte at a time, and the per-sequence matcher of grammar.h.
 *
 * A configuration set is always closed: a configuration in an accepting
 * DFA state brings along everything its return allows (the caller's next
 * calls, or "end" at the root).  Frames are immutable and allocated in an
 * arena; equal stacks are recognised by hash and structure, so parallel
 * parses that meet again merge and the set stays small. */
#include "gr-internal.h"

#include "error.h"

#include <math.h>

/* ---- frames ------------------------------------------------------------------------------ */

static uint32_t frame_hash(uint32_t rule, uint32_t state, uint32_t ctr, uint64_t seen_h,
                           const gr_frame_t *parent)
{
    uint64_t h = lp__gr_mix(rule, state);
    h = lp__gr_mix(h, ctr);
    h = lp__gr_mix(h, seen_h);
    h = lp__gr_mix(h, parent ? parent->hash : 0x51ed);
    return (uint32_t)h;
}

static uint64_t seen_hash(const uint64_t *seen, uint32_t words)
{
    if (!seen) return 0;
    uint64_t h = 17;
    for (uint32_t i = 0; i < words; i++) h = lp__gr_mix(h, seen[i]);
    return h;
}

static uint32_t seen_words(const gr_grammar_t *g, uint32_t rule)
{
    const gr_obj_t *o = g->rules.v[rule].obj;
    return o ? o->words : 0;
}

static bool frame_eq_g(const gr_grammar_t *g, const gr_frame_t *a, const gr_frame_t *b)
{
    while (a != b) {
        if (!a || !b || a->hash != b->hash || a->rule != b->rule || a->state != b->state ||
            a->ctr != b->ctr)
            return false;
        if (a->seen != b->seen) {
            uint32_t w = seen_words(g, a->rule);
            if (!a->seen || !b->seen || memcmp(a->seen, b->seen, w * sizeof(uint64_t))) return false;
        }
        a = a->parent;
        b = b->parent;
    }
    return true;
}

static uint32_t frame_depth(const gr_frame_t *f)
{
    uint32_t d = 0;
    while (f && d <= GR_MAX_DEPTH) {
        d++;
        f = f->parent;
    }
    return d;
}

static const gr_frame_t *mkframe(gr_ctx_t *c, uint32_t rule, uint32_t state, uint32_t ctr,
                                 const uint64_t *seen, const gr_frame_t *parent)
{
    gr_frame_t *f = lp__gr_alloc(c->arena, sizeof(*f));
    if (!f) {
        c->err = lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory following the parse");
        return NULL;
    }
    f->rule = rule;
    f->state = state;
    f->ctr = ctr;
    f->seen = seen;
    f->parent = parent;
    f->hash = frame_hash(rule, state, ctr, seen_hash(seen, seen_words(c->g, rule)), parent);
    return f;
}

/* ---- configuration sets ----------------------------------------------------------------- */

int lp__gr_cfgs_reserve(gr_cfgs_t *s, uint32_t n)
{
    if (n <= s->cap) return 0;
    uint32_t cap = s->cap ? s->cap : 8;
    while (cap < n) cap *= 2;
    gr_cfg_t *v = realloc(s->v, cap * sizeof(*v));
    if (!v) return LP_ERR(ENOMEM);
    s->v = v;
    s->cap = cap;
    return 0;
}

void lp__gr_cfgs_free(gr_cfgs_t *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

bool lp__gr_frame_eq(const gr_frame_t *a, const gr_frame_t *b)
{
    /* without the grammar: seen-sets compared by pointer */
    while (a != b) {
        if (!a || !b || a->hash != b->hash || a->rule != b->rule || a->state != b->state ||
            a->ctr != b->ctr || a->seen != b->seen)
            return false;
        a = a->parent;
        b = b->parent;
    }
    return true;
}

/* ---- guards ------------------------------------------------------------------------------ */

static uint32_t popcount_and(const uint64_t *a, const uint64_t *b, uint32_t w)
{
    uint32_t n = 0;
    if (!a || !b) return 0;
    for (uint32_t i = 0; i < w; i++) n += (uint32_t)__builtin_popcountll(a[i] & b[i]);
    return n;
}

/* Room for one more key that is not required (maxProperties). */
static bool obj_room(const gr_obj_t *o, const gr_frame_t *f)
{
    if (o->max_props == GR_NONE) return true;
    uint32_t unseen_req = o->n_required - popcount_and(f->seen, o->required, o->words);
    return f->ctr + unseen_req < o->max_props;
}

static bool obj_seen(const gr_frame_t *f, uint32_t t)
{
    return f->seen && lp__gr_btest(f->seen, t);
}

static bool key_ok(const gr_obj_t *o, const gr_frame_t *f, uint32_t t)
{
    if (t >= o->n_named) return o->other_keys && obj_room(o, f);
    if (obj_seen(f, t) || !lp__gr_btest(o->avail, t)) return false;
    return lp__gr_btest(o->required, t) || obj_room(o, f);
}

static bool obj_can_close(const gr_obj_t *o, const gr_frame_t *f)
{
    if (popcount_and(f->seen, o->required, o->words) != o->n_required) return false;
    if (f->ctr < o->min_props) return false;
    for (uint32_t i = 0; i < o->n_deps; i++) {
        if (!obj_seen(f, o->dep_key[i])) continue;
        const uint64_t *need = o->dep_set + (size_t)i * o->words;
        for (uint32_t w = 0; w < o->words; w++)
            if (need[w] & ~(f->seen[w])) return false;
    }
    return true;
}

static bool obj_can_more(const gr_obj_t *o, const gr_frame_t *f)
{
    if (o->max_props != GR_NONE && f->ctr >= o->max_props) return false;
    if (popcount_and(f->seen, o->required, o->words) != o->n_required) return true;
    if (!obj_room(o, f)) return false;
    if (o->other_keys) return true;
    for (uint32_t w = 0; w < o->words; w++)
        if (o->avail[w] & ~(f->seen ? f->seen[w] : 0)) return true;
    return false;
}

bool lp__gr_key_live(const gr_rule_t *r, int32_t q, const gr_frame_t *f)
{
    const gr_obj_t *o = r->key_of;
    const uint64_t *reach = r->reach + (size_t)q * r->reach_words;
    bool room = obj_room(o, f);
    /* the untracked keys (tags >= n_named) */
    if (o->other_keys && room) {
        uint32_t w0 = o->n_named / 64;
        for (uint32_t w = w0; w < r->reach_words; w++) {
            uint64_t m = reach[w];
            if (w == w0) m &= ~0ull << (o->n_named % 64);
            if (m) return true;
        }
    }
    for (uint32_t w = 0; w < o->words; w++) {
        uint64_t m = reach[w];
        if (w == o->words - 1 && o->n_named % 64) m &= (1ull << (o->n_named % 64)) - 1;
        m &= o->avail[w];
        if (f->seen) m &= ~f->seen[w];
        if (!room) m &= o->required[w];
        if (m) return true;
    }
    return false;
}

static bool guard(const gr_grammar_t *g, const gr_edge_t *e, const gr_frame_t *f, int32_t tag,
                  bool at_pop)
{
    switch (e->guard) {
    case GR_G_NONE: return true;
    case GR_G_LT: return f->ctr < e->arg;
    case GR_G_GE: return f->ctr >= e->arg;
    case GR_G_EQ: return f->ctr == e->arg;
    case GR_G_RANGE: return f->ctr >= e->arg && f->ctr < e->arg2;
    case GR_G_KEY:
        return !at_pop || (tag >= 0 && key_ok(g->rules.v[f->rule].obj, f, (uint32_t)tag));
    case GR_G_CLOSE: return obj_can_close(g->rules.v[f->rule].obj, f);
    case GR_G_MORE: return obj_can_more(g->rules.v[f->rule].obj, f);
    }
    return false;
}

/* ---- closure ------------------------------------------------------------------------------ */

static void expand(gr_ctx_t *c, const gr_frame_t *f);

static void pop(gr_ctx_t *c, uint32_t callee, int32_t tag, const gr_frame_t *p)
{
    if (c->err) return;
    if (!p) {
        c->out->end = true;
        return;
    }
    const gr_rule_t *s = &c->g->rules.v[p->rule];
    uint32_t ne;
    const gr_edge_t *e = lp__gr_edges(s, p->state, &ne);
    for (uint32_t k = 0; k < ne && !c->err; k++) {
        if (e[k].callee != callee) continue;
        if (e[k].tag >= 0 && e[k].tag != tag) continue;
        if (e[k].tag == GR_TAG_DISPATCH && tag < 0) continue;
        if (!guard(c->g, &e[k], p, tag, true)) continue;
        uint32_t to = e[k].tag == GR_TAG_DISPATCH ? e[k].to + (uint32_t)tag : e[k].to;
        if (to >= s->n_states) continue;
        uint32_t ctr = p->ctr;
        const uint64_t *seen = p->seen;
        if (e[k].action == GR_A_INC) {
            ctr++;
        } else if (e[k].action == GR_A_MARK) {
            ctr++;
            const gr_obj_t *o = s->obj;
            if (tag >= 0 && (uint32_t)tag < o->n_named) {
                uint64_t *ns = lp__gr_alloc(c->arena, o->words * sizeof(uint64_t));
                if (!ns) {
                    c->err = lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
                    return;
                }
                if (seen)
                    memcpy(ns, seen, o->words * sizeof(uint64_t));
                else
                    memset(ns, 0, o->words * sizeof(uint64_t));
                lp__gr_bset(ns, (size_t)tag);
                seen = ns;
            }
        }
        const gr_frame_t *nf = mkframe(c, p->rule, to, ctr, seen, p->parent);
        if (nf) expand(c, nf);
    }
}

static bool len_live(const gr_rule_t *r, int32_t q, uint32_t ctr)
{
    const gr_dfa_t *d = r->dfa;
    if (r->max_len != GR_NONE && (d->dmin[q] == UINT32_MAX || ctr + d->dmin[q] > r->max_len))
        return false;
    if (r->min_len && d->dmax[q] != UINT32_MAX && ctr + d->dmax[q] < r->min_len) return false;
    return true;
}

void lp__gr_add_cfg(gr_ctx_t *c, uint32_t rule, int32_t state, uint32_t ctr,
                    const gr_frame_t *parent)
{
    if (c->err) return;
    const gr_rule_t *r = &c->g->rules.v[rule];
    const gr_dfa_t *d = r->dfa;
    bool final = d->tag[state] >= 0 && (!r->counted || (ctr >= r->min_len));
    bool sink = d->sink[state];
    if (!sink) {
        uint32_t h = (uint32_t)lp__gr_mix(lp__gr_mix(rule, (uint32_t)state),
                                          lp__gr_mix(ctr, parent ? parent->hash : 0x51ed));
        gr_cfgs_t *o = c->out;
        for (uint32_t i = 0; i < o->n; i++) {
            const gr_cfg_t *x = &o->v[i];
            if (x->hash == h && x->rule == rule && x->state == state && x->ctr == ctr &&
                frame_eq_g(c->g, x->parent, parent))
                return;
        }
        if (o->n >= GR_MAX_CFGS) {
            c->err = lp_error_set(LP_ERR(E2BIG),
                                  "grammar too ambiguous: over %u parses to follow at once",
                                  GR_MAX_CFGS);
            return;
        }
        if (lp__gr_cfgs_reserve(o, o->n + 1)) {
            c->err = lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
            return;
        }
        gr_cfg_t *x = &o->v[o->n++];
        x->rule = rule;
        x->state = state;
        x->ctr = ctr;
        x->hash = h;
        x->parent = parent;
    } else if (!final) {
        return;
    }
    if (final) pop(c, rule, d->tag[state], parent);
}

static void expand(gr_ctx_t *c, const gr_frame_t *f)
{
    if (c->err) return;
    for (uint32_t i = 0; i < c->visited.n; i++)
        if (c->visited.v[i]->hash == f->hash && frame_eq_g(c->g, c->visited.v[i], f)) return;
    if (GR_PUSH(c->visited, f)) {
        c->err = lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
        return;
    }
    if (c->visited.n > 4 * GR_MAX_CFGS) {
        c->err = lp_error_set(LP_ERR(E2BIG), "grammar too ambiguous: closure too large");
        return;
    }
    if (frame_depth(f) > GR_MAX_DEPTH) {
        c->err = lp_error_set(LP_ERR(E2BIG), "grammar nesting deeper than %u rules", GR_MAX_DEPTH);
        return;
    }
    const gr_rule_t *s = &c->g->rules.v[f->rule];
    uint32_t ne;
    const gr_edge_t *e = lp__gr_edges(s, f->state, &ne);
    for (uint32_t k = 0; k < ne && !c->err; k++) {
        if (!guard(c->g, &e[k], f, -1, false)) continue;
        /* one call per callee: its return follows every matching edge */
        bool dup = false;
        for (uint32_t j = 0; j < k && !dup; j++)
            dup = e[j].callee == e[k].callee && guard(c->g, &e[j], f, -1, false);
        if (dup) continue;
        const gr_rule_t *x = &c->g->rules.v[e[k].callee];
        if (x->kind == GR_LEX) {
            lp__gr_add_cfg(c, e[k].callee, 0, 0, f);
        } else {
            const gr_frame_t *nf = mkframe(c, e[k].callee, 0, 0, NULL, f);
            if (nf) expand(c, nf);
        }
    }
    if (s->final[f->state]) pop(c, f->rule, GR_TAG_ANY, f->parent);
}

void lp__gr_pop(gr_ctx_t *c, uint32_t callee, int32_t tag, const gr_frame_t *p) { pop(c, callee, tag, p); }

int lp__gr_start(const gr_grammar_t *g, lp__gr_arena_t *arena, gr_cfgs_t *out)
{
    gr_ctx_t c = {g, arena, out, {0}, 0};
    out->n = 0;
    out->end = false;
    const gr_rule_t *r = &g->rules.v[g->root];
    if (r->kind == GR_LEX) {
        lp__gr_add_cfg(&c, g->root, 0, 0, NULL);
    } else {
        const gr_frame_t *f = mkframe(&c, g->root, 0, 0, NULL, NULL);
        if (f) expand(&c, f);
    }
    GR_FREE(c.visited);
    return c.err;
}

int lp__gr_step(const gr_grammar_t *g, lp__gr_arena_t *arena, const gr_cfgs_t *in, uint8_t b,
                gr_cfgs_t *out, gr_framev_t *visited)
{
    gr_ctx_t c = {g, arena, out, {0}, 0};
    c.visited = *visited;
    c.visited.n = 0;
    out->n = 0;
    out->end = false;
    for (uint32_t i = 0; i < in->n && !c.err; i++) {
        const gr_cfg_t *x = &in->v[i];
        const gr_rule_t *r = &g->rules.v[x->rule];
        const gr_dfa_t *d = r->dfa;
        size_t at = (size_t)x->state * d->n_cls + d->cls[b];
        int32_t q = d->next[at];
        if (q < 0) continue;
        uint32_t ctr = x->ctr;
        if (r->counted) {
            ctr += d->cnt[at];
            if (!len_live(r, q, ctr)) continue;
        }
        if (r->key_of && !lp__gr_key_live(r, q, x->parent)) continue;
        lp__gr_add_cfg(&c, x->rule, q, ctr, x->parent);
    }
    *visited = c.visited;
    return c.err;
}

/* ---- the matcher ---------------------------------------------------------------------------- */

#define HISTORY 64u

struct lp_grammar_matcher {
    lp_grammar_t *G;
    lp__gr_arena_t arena;  /* frames of cur and of the history */
    gr_cfgs_t cur;
    bool done;
    gr_cfgs_t hist[HISTORY]; /* ring: the states before the last accepted tokens */
    bool hist_done[HISTORY];
    uint32_t hist_n, hist_head;
    gr_cfgs_t tmp[2];
    gr_framev_t visited;
    gr_scratch_t scratch; /* masks */
    size_t compact_at;
    size_t max_bytes;     /* the arena's cap after compaction */
};

int lp_grammar_matcher_new(lp_grammar_t *g, lp_grammar_matcher_t **out)
{
    lp_grammar_matcher_t *m = calloc(1, sizeof(*m));
    if (!m) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    m->G = lp_grammar_ref(g);
    int rc = lp__gr_start(&g->g, &m->arena, &m->cur);
    if (rc) {
        lp_grammar_matcher_destroy(&m);
        return rc;
    }
    m->compact_at = 1 << 20;
    m->max_bytes = LP_GRAMMAR_MATCHER_MAX_BYTES;
    *out = m;
    return 0;
}

static int cfgs_copy(gr_cfgs_t *dst, const gr_cfgs_t *src);

int lp_grammar_matcher_reset(lp_grammar_matcher_t *m)
{
    lp__gr_arena_t na = {0};
    gr_cfgs_t start = {0};
    int rc = lp__gr_start(&m->G->g, &na, &start);
    if (rc || cfgs_copy(&m->cur, &start)) {
        lp__gr_cfgs_free(&start);
        lp__gr_arena_free(&na);
        return rc ? rc : lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    }
    lp__gr_cfgs_free(&start);
    lp__gr_arena_free(&m->arena);
    m->arena = na;
    m->done = false;
    m->hist_n = m->hist_head = 0;
    m->compact_at = 1 << 20;
    return 0;
}

size_t lp_grammar_matcher_bytes(const lp_grammar_matcher_t *m)
{
    size_t b = sizeof(*m) + m->arena.used + m->scratch.arena.used + m->cur.cap * sizeof(gr_cfg_t);
    for (uint32_t i = 0; i < HISTORY; i++) b += m->hist[i].cap * sizeof(gr_cfg_t);
    for (uint32_t i = 0; i < 2; i++) b += m->tmp[i].cap * sizeof(gr_cfg_t);
    for (uint32_t i = 0; i < m->scratch.nlvl; i++) b += m->scratch.lvl[i].cap * sizeof(gr_cfg_t);
    return b;
}

void lp_grammar_matcher_set_max_bytes(lp_grammar_matcher_t *m, size_t max_bytes)
{
    m->max_bytes = max_bytes ? max_bytes : LP_GRAMMAR_MATCHER_MAX_BYTES;
}

void lp_grammar_matcher_destroy(lp_grammar_matcher_t **mp)
{
    lp_grammar_matcher_t *m = *mp;
    if (!m) return;
    *mp = NULL;
    lp__gr_cfgs_free(&m->cur);
    for (uint32_t i = 0; i < HISTORY; i++) lp__gr_cfgs_free(&m->hist[i]);
    lp__gr_cfgs_free(&m->tmp[0]);
    lp__gr_cfgs_free(&m->tmp[1]);
    GR_FREE(m->visited);
    lp__gr_arena_free(&m->arena);
    lp__gr_scratch_free(&m->scratch);
    lp_grammar_unref(&m->G);
    free(m);
}

static int cfgs_copy(gr_cfgs_t *dst, const gr_cfgs_t *src)
{
    if (lp__gr_cfgs_reserve(dst, src->n)) return LP_ERR(ENOMEM);
    if (src->n) memcpy(dst->v, src->v, src->n * sizeof(gr_cfg_t));
    dst->n = src->n;
    dst->end = src->end;
    return 0;
}

/* Copy frames reachable from the given sets into a fresh arena (pointer map
 * keeps shared frames shared). */
typedef struct {
    const gr_frame_t **from;
    gr_frame_t **to;
    uint32_t cap, n;
} fmap_t;

/* Room for one more entry (at most half full). */
static bool fmap_room(fmap_t *mp)
{
    if ((mp->n + 1) * 2 <= mp->cap) return true;
    uint32_t nc = mp->cap ? mp->cap * 2 : 1024;
    const gr_frame_t **nfrom = calloc(nc, sizeof(*nfrom));
    gr_frame_t **nto = calloc(nc, sizeof(*nto));
    if (!nfrom || !nto) {
        free(nfrom);
        free(nto);
        return false;
    }
    for (uint32_t i = 0; i < mp->cap; i++) {
        if (!mp->from[i]) continue;
        uint32_t h = (uint32_t)lp__gr_mix(0, (uintptr_t)mp->from[i]) & (nc - 1);
        while (nfrom[h]) h = (h + 1) & (nc - 1);
        nfrom[h] = mp->from[i];
        nto[h] = mp->to[i];
    }
    free(mp->from);
    free(mp->to);
    mp->from = nfrom;
    mp->to = nto;
    mp->cap = nc;
    return true;
}

static gr_frame_t *fmap_copy(fmap_t *mp, lp__gr_arena_t *a, const gr_grammar_t *g,
                             const gr_frame_t *f)
{
    if (!f || !fmap_room(mp)) return NULL;
    uint32_t h = (uint32_t)lp__gr_mix(0, (uintptr_t)f) & (mp->cap - 1);
    while (mp->from[h]) {
        if (mp->from[h] == f) return mp->to[h];
        h = (h + 1) & (mp->cap - 1);
    }
    gr_frame_t *parent = NULL;
    if (f->parent) {
        parent = fmap_copy(mp, a, g, f->parent);
        /* the parents filled the table: make room again (a deep stack once
         * filled it and the probe below never ended), then find the slot */
        if (!parent || !fmap_room(mp)) return NULL;
        h = (uint32_t)lp__gr_mix(0, (uintptr_t)f) & (mp->cap - 1);
        while (mp->from[h]) h = (h + 1) & (mp->cap - 1);
    }
    gr_frame_t *nf = lp__gr_alloc(a, sizeof(*nf));
    if (!nf) return NULL;
    *nf = *f;
    nf->parent = parent;
    if (f->seen) {
        uint32_t w = seen_words(g, f->rule);
        nf->seen = lp__gr_memdup(a, f->seen, w * sizeof(uint64_t));
        if (!nf->seen) return NULL;
    }
    mp->from[h] = f;
    mp->to[h] = nf;
    mp->n++;
    return nf;
}

static int copy_sets(fmap_t *mp, lp__gr_arena_t *a, const gr_grammar_t *g, gr_cfgs_t *sets,
                     uint32_t nsets)
{
    for (uint32_t s = 0; s < nsets; s++)
        for (uint32_t i = 0; i < sets[s].n; i++) {
            if (!sets[s].v[i].parent) continue;
            const gr_frame_t *p = fmap_copy(mp, a, g, sets[s].v[i].parent);
            if (!p) return LP_ERR(ENOMEM);
            sets[s].v[i].parent = p;
        }
    return 0;
}

/* Move the live frames to a new arena once the old one has grown well past
 * what is live. */
static int compact(lp_grammar_matcher_t *m)
{
    lp__gr_arena_t na = {0};
    fmap_t mp = {0};
    int rc = copy_sets(&mp, &na, &m->G->g, &m->cur, 1);
    for (uint32_t i = 0; i < m->hist_n && !rc; i++)
        rc = copy_sets(&mp, &na, &m->G->g, &m->hist[(m->hist_head + HISTORY - 1 - i) % HISTORY], 1);
    free(mp.from);
    free(mp.to);
    if (rc) {
        /* the sets may point into both arenas now: keep both alive */
        lp__gr_arena_free(&na);
        return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    }
    lp__gr_arena_free(&m->arena);
    m->arena = na;
    m->compact_at = 4 * na.used + (1 << 20);
    return 0;
}

int lp_grammar_matcher_clone(const lp_grammar_matcher_t *m, lp_grammar_matcher_t **out)
{
    lp_grammar_matcher_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    c->G = lp_grammar_ref(m->G);
    c->done = m->done;
    c->compact_at = m->compact_at;
    c->max_bytes = m->max_bytes;
    fmap_t mp = {0};
    int rc = cfgs_copy(&c->cur, &m->cur);
    if (!rc) rc = copy_sets(&mp, &c->arena, &c->G->g, &c->cur, 1);
    for (uint32_t i = 0; i < m->hist_n && !rc; i++) {
        uint32_t k = (m->hist_head + HISTORY - 1 - i) % HISTORY;
        rc = cfgs_copy(&c->hist[k], &m->hist[k]);
        if (!rc) rc = copy_sets(&mp, &c->arena, &c->G->g, &c->hist[k], 1);
        c->hist_done[k] = m->hist_done[k];
    }
    c->hist_n = m->hist_n;
    c->hist_head = m->hist_head;
    free(mp.from);
    free(mp.to);
    if (rc) {
        lp_grammar_matcher_destroy(&c);
        return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory cloning a matcher");
    }
    *out = c;
    return 0;
}

static int push_history(lp_grammar_matcher_t *m)
{
    gr_cfgs_t *h = &m->hist[m->hist_head];
    if (cfgs_copy(h, &m->cur)) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    m->hist_done[m->hist_head] = m->done;
    m->hist_head = (m->hist_head + 1) % HISTORY;
    if (m->hist_n < HISTORY) m->hist_n++;
    return 0;
}

static int advance(lp_grammar_matcher_t *m, const uint8_t *s, size_t n)
{
    if (m->done) return lp_error_set(LP_ERR(EINVAL), "grammar: the output is already complete");
    if (!n) return lp_error_set(LP_ERR(EINVAL), "grammar: a token with no text is not allowed here");
    const gr_cfgs_t *in = &m->cur;
    gr_cfgs_t *o = NULL;
    for (size_t i = 0; i < n; i++) {
        o = &m->tmp[i & 1];
        int rc = lp__gr_step(&m->G->g, &m->arena, in, s[i], o, &m->visited);
        if (rc) return rc;
        if (!o->n && !(o->end && i + 1 == n))
            return lp_error_set(LP_ERR(EINVAL), "grammar: byte %zu of the token is not allowed", i);
        in = o;
    }
    int rc = push_history(m);
    if (rc) return rc;
    if (cfgs_copy(&m->cur, o)) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    if ((m->arena.used > m->compact_at || m->arena.used > m->max_bytes) && (rc = compact(m))) return rc;
    if (m->arena.used > m->max_bytes) {
        /* what is live is past the cap: refuse the token, back to before it */
        lp_grammar_matcher_rollback(m, 1);
        return lp_error_set(LP_ERR(E2BIG), "grammar: the output's parse state would pass %zu MiB",
                            m->max_bytes >> 20);
    }
    return 0;
}

int lp_grammar_matcher_accept(lp_grammar_matcher_t *m, int32_t id)
{
    const lp_grammar_vocab_t *v = m->G->vocab;
    if (id < 0 || id >= v->n_tokens) return lp_error_set(LP_ERR(EINVAL), "grammar: token %d out of range", id);
    if (lp__gr_btest(v->eog, (size_t)id)) {
        if (m->done || !m->cur.end)
            return lp_error_set(LP_ERR(EINVAL), "grammar: end of generation before the output is complete");
        int rc = push_history(m);
        if (rc) return rc;
        m->done = true;
        return 0;
    }
    size_t n;
    const uint8_t *s = lp__gr_tok_bytes(v, id, &n);
    return advance(m, s, n);
}

int lp_grammar_matcher_accept_bytes(lp_grammar_matcher_t *m, const char *s, size_t n)
{
    return advance(m, (const uint8_t *)s, n);
}

bool lp_grammar_matcher_end_allowed(const lp_grammar_matcher_t *m)
{
    return !m->done && m->cur.end;
}

bool lp_grammar_matcher_done(const lp_grammar_matcher_t *m) { return m->done; }

uint32_t lp_grammar_matcher_history(const lp_grammar_matcher_t *m) { return m->hist_n; }

int lp_grammar_matcher_rollback(lp_grammar_matcher_t *m, uint32_t n)
{
    if (n > m->hist_n)
        return lp_error_set(LP_ERR(EINVAL), "grammar: cannot roll back %u tokens (history holds %u)", n,
                            m->hist_n);
    for (uint32_t i = 0; i < n; i++) {
        m->hist_head = (m->hist_head + HISTORY - 1) % HISTORY;
        m->hist_n--;
        if (cfgs_copy(&m->cur, &m->hist[m->hist_head]))
            return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
        m->done = m->hist_done[m->hist_head];
    }
    return 0;
}

int lp_grammar_matcher_fill_mask(lp_grammar_matcher_t *m, uint64_t *mask)
{
    const lp_grammar_vocab_t *v = m->G->vocab;
    if (m->done) {
        memset(mask, 0, v->words * sizeof(uint64_t));
        return lp_error_set(LP_ERR(ENOENT), "grammar: the output is complete: no token may follow its end");
    }
    int rc = lp__gr_fill_mask(m->G, &m->cur, &m->scratch, mask);
    if (rc) {
        memset(mask, 0, v->words * sizeof(uint64_t));
        return rc;
    }
    if (m->cur.end) lp__gr_bor(mask, v->eog, v->words);
    uint64_t any = 0;
    for (size_t w = 0; w < v->words; w++) any |= mask[w];
    if (!any)
        return lp_error_set(LP_ERR(ENOENT), "grammar: no token of the vocabulary can continue the output here%s",
                            m->cur.end ? " (it is complete, and the vocabulary has no end-of-generation token)"
                                       : " (the grammar needs text that no token spells)");
    return 0;
}

int lp_grammar_mask_apply(const lp_grammar_vocab_t *v, const uint64_t *mask, float *logits, int32_t n_logits)
{
    int32_t n = v->n_tokens < n_logits ? v->n_tokens : n_logits, allowed = 0;
    for (int32_t i = 0; i < n; i++) {
        if (mask[i >> 6] >> (i & 63) & 1) {
            allowed += logits[i] == logits[i] && logits[i] != -INFINITY; /* NaN and -inf allow nothing */
        } else {
            logits[i] = -INFINITY;
        }
    }
    for (int32_t i = n; i < n_logits; i++) logits[i] = -INFINITY; /* padding ids: never */
    if (!allowed)
        return lp_error_set(LP_ERR(ENOENT), "grammar: every token the grammar allows here has a logit of -inf or NaN");
    return allowed;
}

int lp__gr_matcher_mask_naive(lp_grammar_matcher_t *m, uint64_t *mask)
{
    const lp_grammar_vocab_t *v = m->G->vocab;
    if (m->done) {
        memset(mask, 0, v->words * sizeof(uint64_t));
        return 0;
    }
    int rc = lp__gr_fill_mask_naive(m->G, &m->cur, &m->scratch, mask);
    if (!rc && m->cur.end) lp__gr_bor(mask, v->eog, v->words);
    return rc;
}
