/* gr-ir.c - building a grammar's rules, and the checks that make it safe to
 * run: productive rules only (so every allowed token can be completed), no
 * left recursion (the matcher's closure would not terminate). */
#include "gr-ir.h"

#include "error.h"

#include <stdio.h>

void lp__gr_grammar_init(gr_grammar_t *g)
{
    memset(g, 0, sizeof(*g));
    g->root = GR_NONE;
}

void lp__gr_mask_cache_free(gr_rule_t *r);

void lp__gr_grammar_free(gr_grammar_t *g)
{
    for (uint32_t i = 0; i < g->rules.n; i++) {
        gr_rule_t *r = &g->rules.v[i];
        lp__gr_dfa_unref(&r->dfa);
        free(r->reach);
        free(r->efirst);
        free(r->edges);
        free(r->final);
        lp__gr_mask_cache_free(r);
    }
    GR_FREE(g->rules);
    lp__gr_arena_free(&g->arena);
}

static int64_t add_rule(gr_grammar_t *g, uint8_t kind, const char *name)
{
    gr_rule_t r = {0};
    r.kind = kind;
    r.max_len = GR_NONE;
    r.pure = -1;
    r.name = lp__gr_strndup(&g->arena, name, strlen(name));
    if (!r.name || GR_PUSH(g->rules, r))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    return g->rules.n - 1;
}

int64_t lp__gr_add_lex(gr_grammar_t *g, gr_dfa_t *dfa, const char *name)
{
    int64_t id = add_rule(g, GR_LEX, name);
    if (id < 0) {
        lp__gr_dfa_unref(&dfa);
        return id;
    }
    g->rules.v[id].dfa = dfa;
    g->rules.v[id].counted = false; /* set by whoever gives it length bounds */
    return id;
}

int64_t lp__gr_add_seq(gr_grammar_t *g, const char *name)
{
    int64_t id = add_rule(g, GR_SEQ, name);
    if (id >= 0) g->rules.v[id].n_states = 0;
    return id;
}

uint32_t lp__gr_seqb_state(gr_seqb_t *b)
{
    if (GR_PUSH(b->final, 0)) return GR_NONE;
    return b->final.n - 1;
}

int lp__gr_seqb_edge(gr_seqb_t *b, uint32_t from, gr_edge_t e)
{
    if (GR_PUSH(b->e, e) || GR_PUSH(b->from, from))
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    return 0;
}

void lp__gr_seqb_free(gr_seqb_t *b)
{
    GR_FREE(b->e);
    GR_FREE(b->from);
    GR_FREE(b->final);
}

int lp__gr_set_seq(gr_grammar_t *g, uint32_t id, gr_seqb_t *b)
{
    gr_rule_t *r = &g->rules.v[id];
    uint32_t ns = b->final.n, ne = b->e.n;
    r->efirst = calloc(ns + 1, sizeof(uint32_t));
    r->edges = malloc((ne ? ne : 1) * sizeof(gr_edge_t));
    r->final = malloc(ns ? ns : 1);
    if (!r->efirst || !r->edges || !r->final) {
        lp__gr_seqb_free(b);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    }
    for (uint32_t i = 0; i < ne; i++) r->efirst[b->from.v[i] + 1]++;
    for (uint32_t s = 0; s < ns; s++) r->efirst[s + 1] += r->efirst[s];
    uint32_t *pos = malloc((ns + 1) * sizeof(uint32_t));
    if (!pos) {
        lp__gr_seqb_free(b);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory building a grammar");
    }
    memcpy(pos, r->efirst, (ns + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < ne; i++) r->edges[pos[b->from.v[i]]++] = b->e.v[i];
    free(pos);
    memcpy(r->final, b->final.v, ns);
    r->n_states = ns;
    lp__gr_seqb_free(b);
    return 0;
}

/* ---- checks ------------------------------------------------------------------------ */

/* Whether a final state is reachable from state 0 through edges whose
 * callee is marked in via; a dispatch edge leads to every state where
 * dispatch is set, and is not taken otherwise. */
static int reaches_final(const gr_rule_t *r, const uint8_t *via, bool dispatch, bool *ok)
{
    uint32_t ns = r->n_states;
    *ok = false;
    if (!ns) return 0;
    uint8_t *seen = calloc(ns, 1);
    uint32_t *q = malloc(ns * sizeof(uint32_t));
    if (!seen || !q) {
        free(seen);
        free(q);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory checking a grammar");
    }
    uint32_t qh = 0, qt = 0;
    seen[0] = 1;
    q[qt++] = 0;
    while (qh < qt && !*ok) {
        uint32_t s = q[qh++];
        if (r->final[s]) *ok = true;
        for (uint32_t k = r->efirst[s]; k < r->efirst[s + 1]; k++) {
            const gr_edge_t *e = &r->edges[k];
            if (!via[e->callee] || (e->tag == GR_TAG_DISPATCH && !dispatch)) continue;
            uint32_t lo = e->to, hi = e->tag == GR_TAG_DISPATCH ? ns : e->to + 1;
            for (uint32_t t = lo; t < hi; t++)
                if (!seen[t]) {
                    seen[t] = 1;
                    q[qt++] = t;
                }
        }
    }
    free(seen);
    free(q);
    return 0;
}


static bool lex_nonempty(const gr_rule_t *r)
{
    if (!r->dfa->n_states) return false;
    if (r->counted && r->dfa->dmin) {
        /* some accepted string must fit the length bounds */
        if (r->max_len != GR_NONE && r->dfa->dmin[0] > r->max_len) return false;
        if (r->min_len && r->dfa->dmax[0] != UINT32_MAX && r->dfa->dmax[0] < r->min_len)
            return false;
    }
    return true;
}

/* Remove from SEQ rule r the edges to dead callees and the states that can
 * no longer reach a final state; returns whether state 0 survives. */
static int trim_seq(gr_rule_t *r, const uint8_t *prod, bool *alive)
{
    uint32_t ns = r->n_states;
    uint8_t *co = calloc(ns ? ns : 1, 1);
    if (!co) return LP_ERR(ENOMEM);
    for (uint32_t s = 0; s < ns; s++) co[s] = r->final[s];
    bool ch = true;
    while (ch) {
        ch = false;
        for (uint32_t s = 0; s < ns; s++) {
            if (co[s]) continue;
            for (uint32_t k = r->efirst[s]; k < r->efirst[s + 1]; k++) {
                const gr_edge_t *e = &r->edges[k];
                uint32_t hi = e->tag == GR_TAG_DISPATCH ? ns : e->to + 1;
                bool any = false;
                if (e->tag == GR_TAG_DISPATCH) {
                    for (uint32_t t = e->to; t < hi && !any; t++) any = co[t];
                } else {
                    any = co[e->to];
                }
                if (prod[e->callee] && any) {
                    co[s] = 1;
                    ch = true;
                    break;
                }
            }
        }
    }
    /* drop edges into dead states or to dead callees (dispatch edges stay:
     * their dead targets are refused at the pop) */
    uint32_t w = 0;
    uint32_t *nf = calloc(ns + 1, sizeof(uint32_t));
    if (!nf) {
        free(co);
        return LP_ERR(ENOMEM);
    }
    for (uint32_t s = 0; s < ns; s++) {
        nf[s] = w;
        for (uint32_t k = r->efirst[s]; k < r->efirst[s + 1]; k++) {
            gr_edge_t e = r->edges[k];
            if (!co[s] || !prod[e.callee]) continue;
            if (e.tag != GR_TAG_DISPATCH && !co[e.to]) continue;
            r->edges[w++] = e;
        }
    }
    nf[ns] = w;
    memcpy(r->efirst, nf, (ns + 1) * sizeof(uint32_t));
    free(nf);
    *alive = ns && co[0];
    /* dead states stay (ids are referenced) but have no edges and are not final */
    for (uint32_t s = 0; s < ns; s++)
        if (!co[s]) r->final[s] = 0;
    free(co);
    return 0;
}

int lp__gr_finalize(gr_grammar_t *g)
{
    uint32_t n = g->rules.n;
    if (g->root == GR_NONE || g->root >= n) return lp_error_set(LP_ERR(EINVAL), "grammar has no root");
    uint8_t *prod = calloc(n, 1);
    uint8_t *nullable = calloc(n, 1);
    if (!prod || !nullable) {
        free(prod);
        free(nullable);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory checking a grammar");
    }
    int rc = 0;
    for (uint32_t i = 0; i < n; i++) {
        gr_rule_t *r = &g->rules.v[i];
        if (r->kind == GR_LEX) {
            if (r->counted && (rc = lp__gr_dfa_lengths(r->dfa))) goto out;
            prod[i] = lex_nonempty(r);
            nullable[i] = prod[i] && r->dfa->tag[0] >= 0 && r->min_len == 0;
        }
    }
    /* productive SEQ rules: a fixpoint over "some path to a final state" */
    bool ch = true;
    while (ch) {
        ch = false;
        for (uint32_t i = 0; i < n; i++) {
            gr_rule_t *r = &g->rules.v[i];
            if (r->kind != GR_SEQ || prod[i]) continue;
            /* reachability from 0 through productive callees */
            bool ok;
            if ((rc = reaches_final(r, prod, true, &ok))) goto out;
            if (ok) {
                prod[i] = 1;
                ch = true;
            }
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        gr_rule_t *r = &g->rules.v[i];
        if (r->kind != GR_SEQ) continue;
        for (uint32_t k = 0; k < r->efirst[r->n_states]; k++) g->rules.v[r->edges[k].callee].tail = true;
    }
    if (!prod[g->root]) {
        rc = lp_error_set(LP_ERR(EINVAL), "the grammar matches nothing (rule '%s' can never complete)",
                          g->rules.v[g->root].name);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        gr_rule_t *r = &g->rules.v[i];
        if (r->kind != GR_SEQ || !prod[i]) continue;
        bool alive;
        if ((rc = trim_seq(r, prod, &alive))) goto out;
        if (!alive) prod[i] = 0;
    }
    /* nullable SEQ rules (fixpoint) */
    ch = true;
    while (ch) {
        ch = false;
        for (uint32_t i = 0; i < n; i++) {
            gr_rule_t *r = &g->rules.v[i];
            if (r->kind != GR_SEQ || nullable[i] || !prod[i]) continue;
            bool ok;
            if ((rc = reaches_final(r, nullable, false, &ok))) goto out;
            if (ok) {
                nullable[i] = 1;
                ch = true;
            }
        }
    }
    /* left recursion: rule R reaches a call of R without consuming a byte */
    {
        uint8_t *color = calloc(n, 1); /* DFS over the "left-calls" graph */
        uint32_t *stk = malloc((size_t)n * 2 * sizeof(uint32_t));
        uint8_t *seen = NULL;
        if (!color || !stk) {
            free(color);
            free(stk);
            rc = lp_error_set(LP_ERR(ENOMEM), "out of memory checking a grammar");
            goto out;
        }
        /* left-callees of each SEQ rule, as a list */
        lp__gr_u32v_t *lc = calloc(n, sizeof(*lc));
        if (!lc) {
            free(color);
            free(stk);
            rc = lp_error_set(LP_ERR(ENOMEM), "out of memory checking a grammar");
            goto out;
        }
        for (uint32_t i = 0; i < n && !rc; i++) {
            gr_rule_t *r = &g->rules.v[i];
            if (r->kind != GR_SEQ || !prod[i]) continue;
            uint32_t ns = r->n_states;
            free(seen);
            seen = calloc(ns ? ns : 1, 1);
            uint32_t *q = malloc((ns ? ns : 1) * sizeof(uint32_t));
            if (!seen || !q) {
                free(q);
                rc = lp_error_set(LP_ERR(ENOMEM), "out of memory checking a grammar");
                break;
            }
            uint32_t qh = 0, qt = 0;
            seen[0] = 1;
            q[qt++] = 0;
            while (qh < qt) {
                uint32_t s = q[qh++];
                for (uint32_t k = r->efirst[s]; k < r->efirst[s + 1]; k++) {
                    const gr_edge_t *e = &r->edges[k];
                    if (g->rules.v[e->callee].kind == GR_SEQ && GR_PUSH(lc[i], e->callee)) {
                        rc = LP_ERR(ENOMEM);
                        break;
                    }
                    if (nullable[e->callee] && e->tag != GR_TAG_DISPATCH && !seen[e->to]) {
                        seen[e->to] = 1;
                        q[qt++] = e->to;
                    }
                }
            }
            free(q);
        }
        free(seen);
        for (uint32_t root = 0; root < n && !rc; root++) {
            if (color[root]) continue;
            uint32_t sp = 0;
            stk[sp++] = root;
            stk[sp++] = 0;
            color[root] = 1;
            while (sp && !rc) {
                uint32_t v = stk[sp - 2], k = stk[sp - 1];
                if (k < lc[v].n) {
                    stk[sp - 1]++;
                    uint32_t w = lc[v].v[k];
                    if (color[w] == 1) {
                        rc = lp_error_set(LP_ERR(EINVAL),
                                          "left recursion: rule '%s' can call itself before "
                                          "matching any text",
                                          g->rules.v[w].name);
                    } else if (!color[w]) {
                        color[w] = 1;
                        stk[sp++] = w;
                        stk[sp++] = 0;
                    }
                } else {
                    color[v] = 2;
                    sp -= 2;
                }
            }
        }
        for (uint32_t i = 0; i < n; i++) GR_FREE(lc[i]);
        free(lc);
        free(color);
        free(stk);
    }
out:
    free(prod);
    free(nullable);
    return rc;
}
