/* gr-nfa.c - Thompson construction over bytes: characters become UTF-8 or
 * the text of a JSON string (see gr-fa.h). */
#include "gr-fa.h"

#include "error.h"

int lp__gr_nfa_init(gr_nfa_t *n, enum gr_enc enc, uint32_t max_states)
{
    memset(n, 0, sizeof(*n));
    n->enc = enc;
    n->max_states = max_states ? max_states : 200000;
    if (GR_PUSH(n->tag, -1)) return LP_ERR(ENOMEM);
    n->n_states = 1;
    n->start = 0;
    return 0;
}

void lp__gr_nfa_free(gr_nfa_t *n)
{
    GR_FREE(n->e);
    GR_FREE(n->from);
    GR_FREE(n->tag);
    n->n_states = 0;
}

static int64_t nstate(gr_nfa_t *n)
{
    if (n->n_states >= n->max_states)
        return lp_error_set(LP_ERR(E2BIG), "automaton too large (over %u NFA states)",
                            n->max_states);
    if (GR_PUSH(n->tag, -1)) return LP_ERR(ENOMEM);
    return n->n_states++;
}

static int nedge(gr_nfa_t *n, uint32_t from, uint32_t to, uint8_t kind, uint8_t lo, uint8_t hi,
                 bool count)
{
    gr_nedge_t e = {to, kind, lo, hi, count};
    if (n->e.n >= 8u * n->max_states)
        return lp_error_set(LP_ERR(E2BIG), "automaton too large (over %u NFA edges)",
                            8u * n->max_states);
    if (GR_PUSH(n->e, e) || GR_PUSH(n->from, from)) return LP_ERR(ENOMEM);
    return 0;
}

/* A chain of byte ranges from s to e. */
static int chain(gr_nfa_t *n, uint32_t s, uint32_t e, const uint8_t *lo, const uint8_t *hi,
                 size_t k, bool count)
{
    uint32_t cur = s;
    for (size_t i = 0; i < k; i++) {
        uint32_t nx;
        if (i + 1 == k) {
            nx = e;
        } else {
            int64_t t = nstate(n);
            if (t < 0) return (int)t;
            nx = (uint32_t)t;
        }
        int rc = nedge(n, cur, nx, GR_NE_BYTE, lo[i], hi[i], count && i == 0);
        if (rc) return rc;
        cur = nx;
    }
    return 0;
}

/* Code points [lo, hi] (no surrogates) as UTF-8 chains from s to e. */
static int utf8_range(gr_nfa_t *n, uint32_t s, uint32_t e, uint32_t lo, uint32_t hi, bool count)
{
    if (lo > hi) return 0;
    static const uint32_t bounds[] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++) {
        if (lo <= bounds[i] && bounds[i] < hi) {
            int rc = utf8_range(n, s, e, lo, bounds[i], count);
            return rc ? rc : utf8_range(n, s, e, bounds[i] + 1, hi, count);
        }
    }
    if (hi < 0x80) {
        uint8_t a = (uint8_t)lo, b = (uint8_t)hi;
        return chain(n, s, e, &a, &b, 1, count);
    }
    int len = lo < 0x800 ? 2 : lo < 0x10000 ? 3 : 4;
    for (int i = 1; i < len; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if (lo & m) {
                int rc = utf8_range(n, s, e, lo, lo | m, count);
                return rc ? rc : utf8_range(n, s, e, (lo | m) + 1, hi, count);
            }
            if ((hi & m) != m) {
                int rc = utf8_range(n, s, e, lo, (hi & ~m) - 1, count);
                return rc ? rc : utf8_range(n, s, e, hi & ~m, hi, count);
            }
        }
    }
    uint8_t a[4], b[4];
    lp__gr_utf8_put(lo, a);
    lp__gr_utf8_put(hi, b);
    return chain(n, s, e, a, b, (size_t)len, count);
}

static int utf8_set(gr_nfa_t *n, uint32_t s, uint32_t e, const gr_cset_t *cs, bool count)
{
    for (uint32_t i = 0; i < cs->n; i++) {
        uint32_t lo = cs->r[i].lo, hi = cs->r[i].hi;
        /* surrogates are not characters: skip them */
        if (lo <= 0xDFFF && hi >= 0xD800) {
            int rc = 0;
            if (lo < 0xD800) rc = utf8_range(n, s, e, lo, 0xD7FF, count);
            if (!rc && hi > 0xDFFF) rc = utf8_range(n, s, e, 0xE000, hi, count);
            if (rc) return rc;
            continue;
        }
        int rc = utf8_range(n, s, e, lo, hi > GR_CP_MAX ? GR_CP_MAX : hi, count);
        if (rc) return rc;
    }
    return 0;
}

/* Characters as the text of a JSON string: the escapes JSON requires
 * (\" \\ and control characters, short forms where JSON has them, else
 * \u00XX in either case), \/ besides /, everything else as UTF-8.  The
 * first byte of every character is counted. */
static int json_set(gr_nfa_t *n, uint32_t s, uint32_t e, const gr_cset_t *cs)
{
    static const char hex[] = "0123456789abcdef";
    gr_cset_t raw = {0};
    int rc = lp__gr_cs_union(&raw, cs);
    gr_cset_t keep = {0};
    if (!rc) rc = lp__gr_cs_add(&keep, 0x20, 0x21);
    if (!rc) rc = lp__gr_cs_add(&keep, 0x23, 0x5B);
    if (!rc) rc = lp__gr_cs_add(&keep, 0x5D, GR_CP_MAX);
    if (!rc) rc = lp__gr_cs_intersect(&raw, &keep);
    if (!rc) rc = utf8_set(n, s, e, &raw, true);
    lp__gr_cs_free(&raw);
    lp__gr_cs_free(&keep);
    if (rc) return rc == LP_ERR(ENOMEM) ? lp_error_set(rc, "out of memory") : rc;
    for (uint32_t c = 0; c < 0x20 && !rc; c++) {
        if (!lp__gr_cs_has(cs, c)) continue;
        const char *sh = c == 8 ? "b" : c == 9 ? "t" : c == 10 ? "n" : c == 12 ? "f" : c == 13 ? "r" : NULL;
        if (sh) {
            uint8_t lo[2] = {'\\', (uint8_t)sh[0]};
            rc = chain(n, s, e, lo, lo, 2, true);
        } else {
            uint8_t lo[6] = {'\\', 'u', '0', '0', (uint8_t)hex[c >> 4], (uint8_t)hex[c & 15]};
            uint8_t hi[6];
            memcpy(hi, lo, 6);
            rc = chain(n, s, e, lo, hi, 6, true);
            if (!rc && (c & 15) >= 10) { /* the upper-case hex digit */
                lo[5] = hi[5] = (uint8_t)("ABCDEF"[(c & 15) - 10]);
                rc = chain(n, s, e, lo, hi, 6, true);
            }
        }
    }
    if (!rc && lp__gr_cs_has(cs, '"')) {
        uint8_t lo[2] = {'\\', '"'};
        rc = chain(n, s, e, lo, lo, 2, true);
    }
    if (!rc && lp__gr_cs_has(cs, '\\')) {
        uint8_t lo[2] = {'\\', '\\'};
        rc = chain(n, s, e, lo, lo, 2, true);
    }
    if (!rc && lp__gr_cs_has(cs, '/')) {
        uint8_t lo[2] = {'\\', '/'};
        rc = chain(n, s, e, lo, lo, 2, true);
    }
    return rc;
}

static int build(gr_nfa_t *n, const gr_re_t *r, uint32_t s, uint32_t e, int depth);

/* A DFA copied in: its state 0 is s, its accepting states lead to e. */
static int embed(gr_nfa_t *n, const gr_dfa_t *d, uint32_t s, uint32_t e)
{
    if (!d->n_states) return 0;
    if (n->n_states + d->n_states >= n->max_states)
        return lp_error_set(LP_ERR(E2BIG), "automaton too large (over %u NFA states)", n->max_states);
    uint32_t base = n->n_states;
    for (uint32_t i = 0; i < d->n_states; i++) {
        int64_t t = nstate(n);
        if (t < 0) return (int)t;
    }
    int rc = nedge(n, s, base, GR_NE_EPS, 0, 0, false);
    /* each class as runs of bytes */
    for (uint32_t q = 0; q < d->n_states && !rc; q++) {
        if (d->tag[q] >= 0) rc = nedge(n, base + q, e, GR_NE_EPS, 0, 0, false);
        for (int b = 0; b < 256 && !rc;) {
            uint8_t k = d->cls[b];
            int b2 = b;
            while (b2 + 1 < 256 && d->cls[b2 + 1] == k) b2++;
            size_t at = (size_t)q * d->n_cls + k;
            int32_t t = d->next[at];
            if (t >= 0)
                rc = nedge(n, base + q, base + (uint32_t)t, GR_NE_BYTE, (uint8_t)b, (uint8_t)b2,
                           d->cnt && d->cnt[at]);
            b = b2 + 1;
        }
    }
    return rc;
}

static int fresh_between(gr_nfa_t *n, const gr_re_t *r, uint32_t s, uint32_t e, int depth)
{
    int64_t a = nstate(n);
    if (a < 0) return (int)a;
    int64_t b = nstate(n);
    if (b < 0) return (int)b;
    int rc = nedge(n, s, (uint32_t)a, GR_NE_EPS, 0, 0, false);
    if (!rc) rc = build(n, r, (uint32_t)a, (uint32_t)b, depth);
    if (!rc) rc = nedge(n, (uint32_t)b, e, GR_NE_EPS, 0, 0, false);
    return rc;
}

static int build(gr_nfa_t *n, const gr_re_t *r, uint32_t s, uint32_t e, int depth)
{
    if (depth > 1000) return lp_error_set(LP_ERR(E2BIG), "expression nested too deep");
    int rc = 0;
    switch (r->kind) {
    case GR_RE_NONE:
        return 0;
    case GR_RE_EMPTY:
        return nedge(n, s, e, GR_NE_EPS, 0, 0, false);
    case GR_RE_BOL:
        return nedge(n, s, e, GR_NE_BOL, 0, 0, false);
    case GR_RE_EOL:
        return nedge(n, s, e, GR_NE_EOL, 0, 0, false);
    case GR_RE_BYTES:
        return nedge(n, s, e, GR_NE_BYTE, r->lo, r->hi, r->count);
    case GR_RE_DFA:
        return embed(n, r->dfa, s, e);
    case GR_RE_CHARS:
        return n->enc == GR_ENC_JSON ? json_set(n, s, e, &r->cs) : utf8_set(n, s, e, &r->cs, false);
    case GR_RE_CAT: {
        uint32_t cur = s;
        for (uint32_t i = 0; i < r->n && !rc; i++) {
            uint32_t nx;
            if (i + 1 == r->n) {
                nx = e;
            } else {
                int64_t t = nstate(n);
                if (t < 0) return (int)t;
                nx = (uint32_t)t;
            }
            rc = build(n, r->kids[i], cur, nx, depth + 1);
            cur = nx;
        }
        return rc;
    }
    case GR_RE_ALT:
        for (uint32_t i = 0; i < r->n && !rc; i++) rc = fresh_between(n, r->kids[i], s, e, depth + 1);
        return rc;
    case GR_RE_REP: {
        const gr_re_t *x = r->kids[0];
        uint32_t cur = s;
        /* many copies of a large expression: determinise it once and copy
         * the (much smaller) DFA instead */
        uint32_t copies = r->max == GR_RE_INF ? r->min + 1 : r->max;
        gr_dfa_t *xd = NULL;
        if (copies > 3 && x->kind != GR_RE_BYTES && x->kind != GR_RE_DFA && !lp__gr_re_has_anchor(x)) {
            int32_t tag = 0;
            rc = lp__gr_dfa_build(&x, &tag, 1, n->enc, 20000, &xd);
            if (rc) return rc;
            if (!xd->n_states) {
                lp__gr_dfa_unref(&xd);
                return r->min ? 0 : nedge(n, s, e, GR_NE_EPS, 0, 0, false);
            }
            gr_re_t emb = {0};
            emb.kind = GR_RE_DFA;
            emb.dfa = xd;
            gr_re_t *kid = &emb;
            gr_re_t rep = *r;
            rep.kids = &kid;
            rc = build(n, &rep, s, e, depth + 1);
            lp__gr_dfa_unref(&xd);
            return rc;
        }
        for (uint32_t i = 0; i < r->min && !rc; i++) {
            int64_t t = nstate(n);
            if (t < 0) return (int)t;
            rc = fresh_between(n, x, cur, (uint32_t)t, depth + 1);
            cur = (uint32_t)t;
        }
        if (rc) return rc;
        if (r->max == GR_RE_INF) {
            /* cur -eps-> loop; loop -x-> loop; loop -eps-> e */
            int64_t l = nstate(n);
            if (l < 0) return (int)l;
            rc = nedge(n, cur, (uint32_t)l, GR_NE_EPS, 0, 0, false);
            if (!rc) rc = fresh_between(n, x, (uint32_t)l, (uint32_t)l, depth + 1);
            if (!rc) rc = nedge(n, (uint32_t)l, e, GR_NE_EPS, 0, 0, false);
            return rc;
        }
        for (uint32_t i = r->min; i < r->max && !rc; i++) {
            rc = nedge(n, cur, e, GR_NE_EPS, 0, 0, false);
            int64_t t = nstate(n);
            if (t < 0) return (int)t;
            if (!rc) rc = fresh_between(n, x, cur, (uint32_t)t, depth + 1);
            cur = (uint32_t)t;
        }
        if (!rc) rc = nedge(n, cur, e, GR_NE_EPS, 0, 0, false);
        return rc;
    }
    }
    return lp_error_set(LP_ERR(EINVAL), "bad expression node");
}

int lp__gr_nfa_add(gr_nfa_t *n, const gr_re_t *re, int32_t tag)
{
    int64_t a = nstate(n);
    if (a < 0) return (int)a;
    int64_t b = nstate(n);
    if (b < 0) return (int)b;
    n->tag.v[b] = tag;
    int rc = nedge(n, n->start, (uint32_t)a, GR_NE_EPS, 0, 0, false);
    if (!rc) rc = build(n, re, (uint32_t)a, (uint32_t)b, 0);
    if (rc == LP_ERR(ENOMEM)) lp_error_set(rc, "out of memory building an automaton");
    return rc;
}
