/* gr-compile.c - compiling a spec into a shared, immutable grammar, and the
 * cache of compiled grammars. */
#include "gr-internal.h"

#include "error.h"

#include <stdio.h>

uint64_t lp_grammar_spec_hash(const lp_grammar_spec_t *spec)
{
    uint64_t h = lp__gr_mix((uint64_t)spec->kind, spec->compact);
    h = lp__gr_hash_bytes(spec->text, spec->text ? spec->len : 0, h);
    if (spec->kind != LP_GRAMMAR_GBNF) return h;
    for (size_t i = 0; i < spec->n_schema_rules; i++) {
        const lp_grammar_schema_rule_t *r = &spec->schema_rules[i];
        h = lp__gr_hash_bytes(r->name, strlen(r->name) + 1, h);
        h = lp__gr_hash_bytes(r->schema, r->schema_len, lp__gr_mix(h, r->schema_len));
    }
    return h;
}

/* automaton steps one compile may take (about 3 s on one core; the
 * costliest MaskBench schema takes 21 million) */
uint64_t lp__gr_compile_work = 50000000ull;

int lp_grammar_compile(lp_grammar_vocab_t *v, const lp_grammar_spec_t *spec, lp_grammar_t **out)
{
    lp_grammar_t *G = calloc(1, sizeof(*G));
    if (!G) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    lp__gr_grammar_init(&G->g);
    G->vocab = v;
    atomic_init(&G->refs, 1);
    pthread_mutex_init(&G->lock, NULL);
    gr_json_opts_t o = {spec->compact};
    const char *t = spec->text ? spec->text : "";
    size_t n = spec->text ? spec->len : 0;
    int rc;
    if (spec->n_schema_rules && spec->kind != LP_GRAMMAR_GBNF) {
        lp_grammar_unref(&G);
        return lp_error_set(LP_ERR(EINVAL), "grammar: rules from JSON Schemas go with GBNF only");
    }
    lp__gr_dfa_budget(lp__gr_compile_work);
    switch (spec->kind) {
    case LP_GRAMMAR_JSON_SCHEMA: rc = lp__gr_compile_schema(&G->g, t, n, &o); break;
    case LP_GRAMMAR_JSON_OBJECT: rc = lp__gr_compile_json_object(&G->g, &o); break;
    case LP_GRAMMAR_GBNF:
        rc = lp__gr_compile_gbnf(&G->g, t, n, spec->schema_rules, spec->n_schema_rules, &o);
        break;
    case LP_GRAMMAR_REGEX: rc = lp__gr_compile_regex(&G->g, t, n); break;
    case LP_GRAMMAR_CHOICE: rc = lp__gr_compile_choice(&G->g, t, n); break;
    default: rc = lp_error_set(LP_ERR(EINVAL), "grammar: unknown kind %d", (int)spec->kind);
    }
    if (!rc) rc = lp__gr_finalize(&G->g);
    lp__gr_dfa_budget(0);
    if (rc) {
        lp_grammar_unref(&G);
        return rc;
    }
    *out = G;
    return 0;
}

lp_grammar_t *lp_grammar_ref(lp_grammar_t *g)
{
    atomic_fetch_add(&g->refs, 1);
    return g;
}

void lp_grammar_unref(lp_grammar_t **gp)
{
    lp_grammar_t *g = *gp;
    if (!g) return;
    *gp = NULL;
    if (atomic_fetch_sub(&g->refs, 1) != 1) return;
    lp__gr_grammar_free(&g->g);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* ---- the cache ------------------------------------------------------------------------- */

typedef struct {
    uint64_t hash;
    lp_grammar_spec_t spec; /* text and rules in `own` */
    void *own;
    lp_grammar_t *g;        /* NULL: refused, with err/msg */
    int err;
    char *msg;
    uint64_t used;
} centry_t;

struct lp_grammar_cache {
    lp_grammar_vocab_t *v;
    pthread_mutex_t lock;
    centry_t *e;
    uint32_t n, cap;
    uint64_t clock;
};

int lp_grammar_cache_new(lp_grammar_vocab_t *v, uint32_t capacity, lp_grammar_cache_t **out)
{
    lp_grammar_cache_t *c = calloc(1, sizeof(*c));
    if (!c || !capacity || !(c->e = calloc(capacity, sizeof(centry_t)))) {
        free(c);
        return lp_error_set(capacity ? LP_ERR(ENOMEM) : LP_ERR(EINVAL), "grammar cache: %s",
                            capacity ? "out of memory" : "capacity must be at least 1");
    }
    c->v = v;
    c->cap = capacity;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return 0;
}

static void centry_free(centry_t *e)
{
    lp_grammar_unref(&e->g);
    free(e->own);
    free(e->msg);
    memset(e, 0, sizeof(*e));
}

void lp_grammar_cache_destroy(lp_grammar_cache_t **cp)
{
    lp_grammar_cache_t *c = *cp;
    if (!c) return;
    *cp = NULL;
    for (uint32_t i = 0; i < c->n; i++) centry_free(&c->e[i]);
    free(c->e);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static bool same_spec(const lp_grammar_spec_t *a, const lp_grammar_spec_t *b)
{
    if (a->kind != b->kind || a->compact != b->compact || a->len != b->len ||
        (a->len && memcmp(a->text, b->text, a->len)) || a->n_schema_rules != b->n_schema_rules)
        return false;
    for (size_t i = 0; i < a->n_schema_rules; i++) {
        const lp_grammar_schema_rule_t *x = &a->schema_rules[i], *y = &b->schema_rules[i];
        if (strcmp(x->name, y->name) || x->schema_len != y->schema_len ||
            (x->schema_len && memcmp(x->schema, y->schema, x->schema_len)))
            return false;
    }
    return true;
}

/* A copy of spec whose text and rules live in one block (*own). */
static int spec_dup(const lp_grammar_spec_t *spec, lp_grammar_spec_t *out, void **own)
{
    size_t nr = spec->kind == LP_GRAMMAR_GBNF ? spec->n_schema_rules : 0;
    size_t bytes = nr * sizeof(lp_grammar_schema_rule_t) + (spec->text ? spec->len : 0) + 1;
    for (size_t i = 0; i < nr; i++)
        bytes += strlen(spec->schema_rules[i].name) + 1 + spec->schema_rules[i].schema_len;
    char *b = malloc(bytes);
    if (!b) return lp_error_set(LP_ERR(ENOMEM), "grammar cache: out of memory");
    *out = *spec;
    lp_grammar_schema_rule_t *r = (lp_grammar_schema_rule_t *)(void *)b;
    char *p = b + nr * sizeof(*r);
    for (size_t i = 0; i < nr; i++) {
        size_t nl = strlen(spec->schema_rules[i].name) + 1, sl = spec->schema_rules[i].schema_len;
        r[i].name = memcpy(p, spec->schema_rules[i].name, nl);
        p += nl;
        r[i].schema = sl ? memcpy(p, spec->schema_rules[i].schema, sl) : p;
        r[i].schema_len = sl;
        p += sl;
    }
    out->schema_rules = nr ? r : NULL;
    out->n_schema_rules = nr;
    out->text = spec->text && spec->len ? memcpy(p, spec->text, spec->len) : NULL;
    if (!out->text) out->len = 0;
    *own = b;
    return 0;
}

int lp_grammar_cache_get(lp_grammar_cache_t *c, const lp_grammar_spec_t *spec, lp_grammar_t **out,
                         bool *hit)
{
    uint64_t h = lp_grammar_spec_hash(spec);
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < c->n; i++) {
        centry_t *e = &c->e[i];
        if (e->hash != h || !same_spec(&e->spec, spec)) continue;
        e->used = ++c->clock;
        int rc = e->err;
        if (!rc) *out = lp_grammar_ref(e->g);
        else lp_error_set(rc, "%s", e->msg ? e->msg : "grammar refused");
        pthread_mutex_unlock(&c->lock);
        if (hit) *hit = true;
        return rc;
    }
    pthread_mutex_unlock(&c->lock);
    if (hit) *hit = false;
    /* compile outside the lock: a slow grammar blocks no other request */
    lp_grammar_t *g = NULL;
    int rc = lp_grammar_compile(c->v, spec, &g);
    centry_t ne = {0};
    ne.hash = h;
    if (spec_dup(spec, &ne.spec, &ne.own)) {
        lp_grammar_unref(&g);
        return LP_ERR(ENOMEM);
    }
    ne.g = g;
    ne.err = rc;
    if (rc) ne.msg = strdup(lp_error_msg());
    if (rc && rc == LP_ERR(ENOMEM)) { /* not the grammar's fault: do not remember it */
        free(ne.own);
        free(ne.msg);
        return rc;
    }
    pthread_mutex_lock(&c->lock);
    ne.used = ++c->clock;
    if (c->n < c->cap) {
        c->e[c->n++] = ne;
    } else {
        uint32_t lru = 0;
        for (uint32_t i = 1; i < c->n; i++)
            if (c->e[i].used < c->e[lru].used) lru = i;
        centry_free(&c->e[lru]);
        c->e[lru] = ne;
    }
    if (!rc) *out = lp_grammar_ref(g);
    pthread_mutex_unlock(&c->lock);
    if (rc) lp_error_set(rc, "%s", ne.msg ? ne.msg : "grammar refused");
    return rc;
}
