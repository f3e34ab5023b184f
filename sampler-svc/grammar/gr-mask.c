/* gr-mask.c - the allowed-token bitset of a configuration set.
 *
 * The mask of a set is the union of its configurations' masks.  For a
 * configuration (lexeme L in DFA state q, on stack P) the tokens split in
 * two, once per (L, q), by one walk of the token trie through L's DFA
 * alone (a table, built on first use and kept):
 *
 *   inside  the token's bytes all stay in L and end in a state that can
 *           go on: allowed whatever the stack (a bitset), or after a check
 *           of the end state against the context for counted strings
 *           (minLength/maxLength: cumulative bitsets by length) and object
 *           keys (which keys are left);
 *   exits   the token reaches an accepting state of L at byte i, where L
 *           may return: the rest of the token must then fit what follows
 *           L on the stack.  These are kept as tries of the rests, grouped
 *           by accepting state, and walked from the configurations the
 *           return gives: a handful of bytes, not the vocabulary.
 *
 * A table depends only on the part of the DFA reachable from q, so tables
 * are keyed by that sub-automaton's canonical form: a JSON string's body
 * has one table for every string lexeme of every grammar, built once per
 * vocabulary (those of JSON's common lexemes when the vocabulary loads).
 * Larger sub-automata get tables of their own, per rule. */
#include "gr-internal.h"
#include "gr-json.h"

#include "error.h"

#define MAX_EXITS 100000u /* exit entries of one table; past it the state walks the vocabulary */
#define SHARE_MAX 4096u   /* neighbourhoods up to this many states are shared */
#define CUM 24u           /* cumulative length bitsets kept (lengths 0..CUM-1) */
#define DENSE 1024u       /* token sets this large are bitsets */

/* ---- tables ---------------------------------------------------------------------------------- */

typedef struct {
    int32_t end;  /* state the tokens end in (numbered from q, see sub_t) */
    uint32_t inc; /* counted characters they add */
    uint32_t n;
    int32_t *list;  /* small groups */
    uint64_t *bits; /* large ones */
} ingroup_t;

typedef struct {
    int32_t f;    /* accepting state reached (numbered from q) */
    uint32_t inc; /* counted characters up to it */
    gr_trie_t t;  /* the tokens' rests; tokens at the root end exactly there */
} exitgroup_t;

typedef struct gr_ltab {
    bool naive;         /* too many exits to tabulate: walk the vocabulary instead */
    /* a delta table: tokens whose first byte is not in excl behave as from
     * state base (whose own table gives them); this table holds the rest */
    int32_t base;
    uint64_t excl[4];
    /* inside, all together */
    uint64_t *in_bits;
    int32_t *in_list;
    uint32_t n_in;
    /* inside, by (end, inc): for keys and counted strings */
    ingroup_t *groups;
    uint32_t n_groups;
    /* counted strings whose end states never limit the minimum: allowed
     * iff inc + dmin[end] <= room; cum[k] holds those with key <= k */
    bool uniform;
    uint64_t *cum;      /* CUM bitsets */
    uint32_t n_far;     /* keys >= CUM: sorted by key */
    int32_t *far_tok;
    uint32_t *far_key;
    exitgroup_t *exits;
    uint32_t n_exits;
    size_t bytes;
} gr_ltab_t;

static void trie_free(gr_trie_t *t)
{
    free(t->byte);
    free(t->next);
    free(t->tok0);
    free(t->ntok);
    free(t->depth);
    free(t->toks);
    memset(t, 0, sizeof(*t));
}

static void ltab_free(gr_ltab_t *t)
{
    if (!t) return;
    free(t->in_bits);
    free(t->in_list);
    for (uint32_t i = 0; i < t->n_groups; i++) {
        free(t->groups[i].list);
        free(t->groups[i].bits);
    }
    free(t->groups);
    free(t->cum);
    free(t->far_tok);
    free(t->far_key);
    for (uint32_t i = 0; i < t->n_exits; i++) trie_free(&t->exits[i].t);
    free(t->exits);
    free(t);
}

/* ---- the sub-automaton from q, canonically numbered ----------------------------------------------- */

typedef struct {
    uint32_t n;         /* states reachable from q (q is 0) */
    int32_t *actual;    /* canonical -> DFA state */
    uint64_t hash;
    uint32_t *canon;    /* canonical description, for equality */
    uint32_t ncanon;
} sub_t;

static void sub_free(sub_t *s)
{
    free(s->actual);
    free(s->canon);
    memset(s, 0, sizeof(*s));
}

/* BFS from q in byte order, to depth `depth` (bytes): a token is never
 * longer, so two states with equal neighbourhoods have equal tables.
 * Gives up (n = 0) past limit states. */
static int sub_make(const gr_dfa_t *d, int32_t q, uint32_t limit, uint32_t depth, sub_t *s)
{
    memset(s, 0, sizeof(*s));
    uint32_t cap = limit < d->n_states ? limit : d->n_states;
    int32_t *map = malloc(d->n_states * sizeof(int32_t)); /* DFA -> canonical */
    uint32_t *dist = malloc(cap * sizeof(uint32_t));
    s->actual = malloc(cap * sizeof(int32_t));
    GR_VEC(uint32_t) c = {0};
    if (!map || !dist || !s->actual) goto oom;
    for (uint32_t i = 0; i < d->n_states; i++) map[i] = -1;
    map[q] = 0;
    s->actual[0] = q;
    dist[0] = 0;
    s->n = 1;
    /* the byte runs of one class: walking them visits what walking all 256
     * bytes would, in the same order */
    uint16_t run_lo[257];
    uint8_t run_cls[256];
    uint32_t nrun = 0;
    for (int b = 0; b < 256; b++)
        if (!b || d->cls[b] != d->cls[b - 1]) {
            run_lo[nrun] = (uint16_t)b;
            run_cls[nrun++] = d->cls[b];
        }
    run_lo[nrun] = 256;
    uint64_t h = 0x5b;
    for (uint32_t i = 0; i < s->n; i++) {
        int32_t a = s->actual[i];
        uint32_t fl = (d->tag[a] >= 0) | (d->sink[a] << 1);
        h = lp__gr_mix(h, fl);
        if (GR_PUSH(c, fl)) goto oom;
        if (dist[i] >= depth) { /* its edges lie beyond any token */
            if (GR_PUSH(c, 0xfffffffeu)) goto oom;
            continue;
        }
        /* runs of bytes with the same target and count */
        int prev_t = -2, prev_c = -1;
        for (uint32_t ri = 0; ri < nrun; ri++) {
            int b = run_lo[ri];
            size_t at = (size_t)a * d->n_cls + run_cls[ri];
            int32_t t = d->next[at];
            int cn = d->cnt ? d->cnt[at] : 0;
            int tc = -1;
            if (t >= 0) {
                if (map[t] < 0) {
                    if (s->n >= cap) { /* too large to share */
                        free(map);
                        free(dist);
                        GR_FREE(c);
                        free(s->actual);
                        memset(s, 0, sizeof(*s));
                        return 0;
                    }
                    map[t] = (int32_t)s->n;
                    dist[s->n] = dist[i] + 1;
                    s->actual[s->n++] = t;
                }
                tc = map[t];
            }
            if (tc == prev_t && cn == prev_c) continue;
            prev_t = tc;
            prev_c = cn;
            uint32_t w = (uint32_t)b << 24 ^ (uint32_t)(tc + 1) << 1 ^ (uint32_t)cn;
            h = lp__gr_mix(h, w);
            if (GR_PUSH(c, w)) goto oom;
        }
        if (GR_PUSH(c, 0xffffffffu)) goto oom;
    }
    free(map);
    free(dist);
    s->hash = h;
    s->canon = c.v;
    s->ncanon = c.n;
    return 0;
oom:
    free(map);
    free(dist);
    GR_FREE(c);
    sub_free(s);
    return LP_ERR(ENOMEM);
}

/* ---- building a table ------------------------------------------------------------------------------ */

typedef struct {
    int32_t a;    /* end state (inside) or accepting state (exit), DFA numbering */
    uint32_t inc;
    int32_t tok;
    uint32_t pos; /* exit: where the rest starts */
} entry_t;

typedef struct {
    const lp_grammar_vocab_t *v;
    const gr_dfa_t *d;
    const uint64_t *only; /* 256 bits: first bytes walked (NULL: all) */
    bool tail; /* bytes may follow the lexeme: exits with a rest matter */
    GR_VEC(entry_t) in, ex;
    bool too_many;
    int err;
} build_t;

static void add_entry(build_t *b, bool exit, int32_t a, uint32_t inc, int32_t tok, uint32_t pos)
{
    entry_t e = {a, inc, tok, pos};
    if (exit && b->ex.n >= MAX_EXITS) {
        b->too_many = true;
        return;
    }
    if (exit ? GR_PUSH(b->ex, e) : GR_PUSH(b->in, e)) b->err = LP_ERR(ENOMEM);
}

/* Walk the vocabulary trie under node through the DFA from state s. */
static void bwalk(build_t *b, uint32_t node, int32_t s, uint32_t inc)
{
    const gr_trie_t *t = &b->v->trie;
    const gr_dfa_t *d = b->d;
    uint32_t end = t->next[node];
    for (uint32_t c = node + 1; c < end && !b->err && !b->too_many; c = t->next[c]) {
        if (!node && b->only && !lp__gr_btest(b->only, t->byte[c])) continue;
        size_t at = (size_t)s * d->n_cls + d->cls[t->byte[c]];
        int32_t s2 = d->next[at];
        if (s2 < 0) continue;
        uint32_t inc2 = inc + (d->cnt ? d->cnt[at] : 0);
        bool fin = d->tag[s2] >= 0, sink = d->sink[s2];
        for (uint32_t i = 0; i < t->ntok[c]; i++)
            add_entry(b, sink, s2, inc2, t->toks[t->tok0[c] + i], t->depth[c]);
        if (fin && b->tail && t->next[c] > c + 1) {
            /* every longer token through here may return at this point */
            for (uint32_t x = c + 1; x < t->next[c]; x++)
                for (uint32_t i = 0; i < t->ntok[x]; i++)
                    add_entry(b, true, s2, inc2, t->toks[t->tok0[x] + i], t->depth[c]);
        }
        if (!sink && t->next[c] > c + 1) bwalk(b, c, s2, inc2);
    }
}

static const lp_grammar_vocab_t *sort_v;

static int cmp_entry_ex(const void *a, const void *b)
{
    const entry_t *x = a, *y = b;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    if (x->inc != y->inc) return x->inc < y->inc ? -1 : 1;
    size_t nx, ny;
    const uint8_t *sx = lp__gr_tok_bytes(sort_v, x->tok, &nx);
    const uint8_t *sy = lp__gr_tok_bytes(sort_v, y->tok, &ny);
    sx += x->pos, nx -= x->pos;
    sy += y->pos, ny -= y->pos;
    int c = memcmp(sx, sy, nx < ny ? nx : ny);
    if (c) return c;
    if (nx != ny) return nx < ny ? -1 : 1;
    return x->tok < y->tok ? -1 : x->tok > y->tok;
}

/* A trie of the rests of entries e[0..n) (sorted by rest). */
static int rest_trie(const lp_grammar_vocab_t *v, const entry_t *e, uint32_t n, gr_trie_t *t)
{
    size_t cap = 1;
    for (uint32_t i = 0; i < n; i++) cap += v->off[e[i].tok + 1] - v->off[e[i].tok] - e[i].pos;
    t->byte = malloc(cap);
    t->next = malloc(cap * sizeof(uint32_t));
    t->tok0 = malloc(cap * sizeof(uint32_t));
    t->ntok = calloc(cap, sizeof(uint16_t));
    t->toks = malloc((n ? n : 1) * sizeof(int32_t));
    uint32_t *path = malloc((v->max_len + 2) * sizeof(uint32_t));
    if (!t->byte || !t->next || !t->tok0 || !t->ntok || !t->toks || !path) {
        free(path);
        return LP_ERR(ENOMEM);
    }
    uint32_t nn = 1, open = 0;
    t->byte[0] = 0;
    t->tok0[0] = 0;
    path[0] = 0;
    const uint8_t *prev = NULL;
    size_t nprev = 0;
    for (uint32_t i = 0; i < n; i++) {
        size_t len;
        const uint8_t *s = lp__gr_tok_bytes(v, e[i].tok, &len);
        s += e[i].pos;
        len -= e[i].pos;
        t->toks[i] = e[i].tok;
        size_t lcp = 0;
        while (prev && lcp < len && lcp < nprev && s[lcp] == prev[lcp]) lcp++;
        while (open > lcp) t->next[path[open--]] = nn;
        for (size_t dd = lcp; dd < len; dd++) {
            uint32_t k = nn++;
            t->byte[k] = s[dd];
            t->tok0[k] = i;
            t->ntok[k] = 0;
            path[++open] = k;
        }
        uint32_t leaf = path[len];
        if (!t->ntok[leaf]) t->tok0[leaf] = i;
        if (t->ntok[leaf] < UINT16_MAX) t->ntok[leaf]++;
        prev = s;
        nprev = len;
    }
    while (open > 0) t->next[path[open--]] = nn;
    t->next[0] = nn;
    t->n_nodes = nn;
    free(path);
    return 0;
}

/* Token sets: a bitset when large. */
static int tokset(const lp_grammar_vocab_t *v, const int32_t *toks, uint32_t n, int32_t **list, uint64_t **bits,
                  size_t *bytes)
{
    if (n >= DENSE) {
        *bits = calloc(v->words, sizeof(uint64_t));
        if (!*bits) return LP_ERR(ENOMEM);
        for (uint32_t i = 0; i < n; i++) lp__gr_bset(*bits, (size_t)toks[i]);
        *bytes += v->words * sizeof(uint64_t);
    } else if (n) {
        *list = malloc(n * sizeof(int32_t));
        if (!*list) return LP_ERR(ENOMEM);
        memcpy(*list, toks, n * sizeof(int32_t));
        *bytes += n * sizeof(int32_t);
    }
    return 0;
}

/* The table of DFA d in state q; states in it are numbered by map (DFA ->
 * canonical; NULL: DFA numbering). */
static int ltab_build(const lp_grammar_vocab_t *v, const gr_dfa_t *d, int32_t q, bool tail, bool grouped,
                      const int32_t *map, const uint64_t *only, gr_ltab_t **out)
{
    build_t b = {v, d, only, tail, {0}, {0}, false, 0};
    bwalk(&b, 0, q, 0);

    gr_ltab_t *t = calloc(1, sizeof(*t));
    int32_t *toks = NULL;
    int rc = b.err;
    if (!t) rc = LP_ERR(ENOMEM);
    if (rc) goto done;
    t->base = -1;
    if (b.too_many) {
        t->naive = true;
        goto ok;
    }
    for (uint32_t i = 0; i < b.in.n; i++) b.in.v[i].a = map ? map[b.in.v[i].a] : b.in.v[i].a;
    for (uint32_t i = 0; i < b.ex.n; i++) b.ex.v[i].a = map ? map[b.ex.v[i].a] : b.ex.v[i].a;
    toks = malloc((b.in.n + 1) * sizeof(int32_t));
    if (!toks) goto oom;
    /* all inside tokens */
    t->n_in = b.in.n;
    for (uint32_t i = 0; i < b.in.n; i++) toks[i] = b.in.v[i].tok;
    if (tokset(v, toks, b.in.n, &t->in_list, &t->in_bits, &t->bytes)) goto oom;
    /* groups by (end, inc): count, then fill (no sort) */
    if (grouped) {
        GR_VEC(uint64_t) keys = {0};
        lp__gr_u32v_t cnt = {0};
        uint32_t *gi = malloc((b.in.n + 1) * sizeof(uint32_t));
        uint32_t nsl = 64;
        while (nsl < 2 * b.in.n) nsl *= 2;
        uint32_t *sl = calloc(nsl, sizeof(uint32_t)); /* group index + 1 */
        if (!gi || !sl) {
            free(gi);
            free(sl);
            goto oom;
        }
        for (uint32_t i = 0; i < b.in.n; i++) {
            uint64_t k = (uint64_t)(uint32_t)b.in.v[i].a << 32 | b.in.v[i].inc;
            uint32_t j = (uint32_t)lp__gr_mix(0, k) & (nsl - 1);
            while (sl[j] && keys.v[sl[j] - 1] != k) j = (j + 1) & (nsl - 1);
            if (!sl[j]) {
                if (GR_PUSH(keys, k) || GR_PUSH(cnt, 0)) {
                    free(gi);
                    free(sl);
                    GR_FREE(keys);
                    GR_FREE(cnt);
                    goto oom;
                }
                sl[j] = keys.n;
            }
            uint32_t g = sl[j] - 1;
            cnt.v[g]++;
            gi[i] = g;
        }
        free(sl);
        t->n_groups = keys.n;
        t->groups = calloc(keys.n ? keys.n : 1, sizeof(ingroup_t));
        uint32_t *start = calloc(keys.n + 1, sizeof(uint32_t));
        if (!t->groups || !start) {
            free(start);
            free(gi);
            GR_FREE(keys);
            GR_FREE(cnt);
            goto oom;
        }
        for (uint32_t g = 0; g < keys.n; g++) start[g + 1] = start[g] + cnt.v[g];
        for (uint32_t i = 0; i < b.in.n; i++) toks[start[gi[i]]++] = b.in.v[i].tok;
        int e = 0;
        for (uint32_t g = 0; g < keys.n && !e; g++) {
            ingroup_t *x = &t->groups[g];
            x->end = (int32_t)(keys.v[g] >> 32);
            x->inc = (uint32_t)keys.v[g];
            x->n = cnt.v[g];
            e = tokset(v, toks + start[g] - cnt.v[g], cnt.v[g], &x->list, &x->bits, &t->bytes);
        }
        free(start);
        free(gi);
        GR_FREE(keys);
        GR_FREE(cnt);
        if (e) goto oom;
    }
    goto ok;
oom:
    rc = LP_ERR(ENOMEM);
    goto done;
ok:
    *out = t;
    t = NULL;
    /* exits */
    if (b.ex.n && !(*out)->naive) {
        gr_ltab_t *o = *out;
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        sort_v = v;
        if (b.ex.n > 1) qsort(b.ex.v, b.ex.n, sizeof(entry_t), cmp_entry_ex);
        pthread_mutex_unlock(&lock);
        uint32_t ng = 0;
        for (uint32_t i = 0; i < b.ex.n; i++)
            if (!i || b.ex.v[i].a != b.ex.v[i - 1].a || b.ex.v[i].inc != b.ex.v[i - 1].inc) ng++;
        o->exits = calloc(ng, sizeof(exitgroup_t));
        if (!o->exits) {
            rc = LP_ERR(ENOMEM);
        } else {
            o->n_exits = ng;
            uint32_t g = 0, st = 0;
            for (uint32_t i = 1; i <= b.ex.n && !rc; i++) {
                if (i < b.ex.n && b.ex.v[i].a == b.ex.v[st].a && b.ex.v[i].inc == b.ex.v[st].inc) continue;
                exitgroup_t *x = &o->exits[g++];
                x->f = b.ex.v[st].a;
                x->inc = b.ex.v[st].inc;
                if (rest_trie(v, b.ex.v + st, i - st, &x->t)) rc = LP_ERR(ENOMEM);
                o->bytes += x->t.n_nodes * 11 + (i - st) * 4;
                st = i;
            }
        }
        if (rc) {
            ltab_free(*out);
            *out = NULL;
        }
    }
done:
    free(toks);
    ltab_free(t);
    GR_FREE(b.in);
    GR_FREE(b.ex);
    if (rc) lp_error_set(rc, "grammar: out of memory building a token table");
    return rc;
}

/* Cumulative length bitsets of a counted table: uniform when no end state
 * has a finite dmax (the minimum never depends on where the token ends).
 * dmin/dmax are read through actual (canonical -> DFA state). */
static int ltab_counted(const lp_grammar_vocab_t *v, gr_ltab_t *t, const gr_dfa_t *d, const int32_t *actual)
{
    for (uint32_t g = 0; g < t->n_groups; g++) {
        int32_t e = actual ? actual[t->groups[g].end] : t->groups[g].end;
        if (d->dmax[e] != UINT32_MAX) return 0;
    }
    uint64_t *cum = calloc((size_t)CUM * v->words, sizeof(uint64_t));
    if (!cum) return LP_ERR(ENOMEM);
    GR_VEC(uint64_t) far = {0}; /* key << 32 | token */
    for (uint32_t g = 0; g < t->n_groups; g++) {
        const ingroup_t *x = &t->groups[g];
        int32_t e = actual ? actual[x->end] : x->end;
        uint64_t key = (uint64_t)x->inc + (d->dmin[e] == UINT32_MAX ? 1000000u : d->dmin[e]);
        if (key < CUM) {
            for (uint32_t k = (uint32_t)key; k < CUM; k++) {
                uint64_t *dst = cum + (size_t)k * v->words;
                if (x->bits) lp__gr_bor(dst, x->bits, v->words);
                else
                    for (uint32_t i = 0; i < x->n; i++) lp__gr_bset(dst, (size_t)x->list[i]);
            }
        } else {
            for (uint32_t i = 0; i < x->n; i++) {
                int32_t tok = x->bits ? -1 : x->list[i];
                if (x->bits) break;
                if (GR_PUSH(far, key << 32 | (uint32_t)tok)) {
                    free(cum);
                    GR_FREE(far);
                    return LP_ERR(ENOMEM);
                }
            }
            if (x->bits) /* a large group of long tokens: enumerate its bits */
                for (size_t w = 0; w < v->words; w++)
                    for (uint64_t m = x->bits[w]; m; m &= m - 1) {
                        uint32_t tok = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(m));
                        if (GR_PUSH(far, key << 32 | tok)) {
                            free(cum);
                            GR_FREE(far);
                            return LP_ERR(ENOMEM);
                        }
                    }
        }
    }
    /* far: sorted by key */
    for (uint32_t i = 1; i < far.n; i++) {
        uint64_t x = far.v[i];
        uint32_t j = i;
        while (j && far.v[j - 1] > x) {
            far.v[j] = far.v[j - 1];
            j--;
        }
        far.v[j] = x;
    }
    t->far_tok = malloc((far.n + 1) * sizeof(int32_t));
    t->far_key = malloc((far.n + 1) * sizeof(uint32_t));
    if (!t->far_tok || !t->far_key) {
        free(cum);
        GR_FREE(far);
        return LP_ERR(ENOMEM);
    }
    for (uint32_t i = 0; i < far.n; i++) {
        t->far_tok[i] = (int32_t)(uint32_t)far.v[i];
        t->far_key[i] = (uint32_t)(far.v[i] >> 32);
    }
    t->n_far = far.n;
    GR_FREE(far);
    t->bytes += (size_t)CUM * v->words * sizeof(uint64_t);
    /* publish last: readers test `uniform` */
    t->cum = cum;
    __atomic_store_n(&t->uniform, true, __ATOMIC_RELEASE);
    return 0;
}

/* ---- where tables live ----------------------------------------------------------------------- */

/* The vocabulary's tables of small sub-automata, shared by all grammars. */
typedef struct {
    uint64_t hash;
    uint32_t *canon;
    uint32_t ncanon;
    bool tail, grouped;
    gr_ltab_t *tab;
    bool counted_done; /* ltab_counted ran (under the vocabulary lock) */
} sentry_t;

typedef struct {
    sentry_t *e;
    uint32_t n, cap;
    uint32_t *idx; /* open addressing over e by hash: entry + 1, 0 free */
    uint32_t nidx; /* a power of two, at least 2 n */
    size_t bytes;
} shared_t;

#define SHARED_BYTES ((size_t)1 << 30) /* past it, new tables stay with their grammar */

/* A rule's view of its tables: per state, the table and the map from the
 * table's numbering to the DFA's. */
typedef struct {
    _Atomic(gr_ltab_t *) tab;
    int32_t *actual; /* NULL: DFA numbering */
    bool owned;      /* freed with the grammar */
} rslot_t;

typedef struct {
    rslot_t *slot;
    uint32_t n;
} rcache_t;

void lp__gr_mask_cache_free(gr_rule_t *r)
{
    rcache_t *c = r->mask_cache;
    if (!c) return;
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->slot[i].owned) ltab_free(atomic_load(&c->slot[i].tab));
        free(c->slot[i].actual);
    }
    free(c->slot);
    free(c);
    r->mask_cache = NULL;
}

void lp__gr_shared_free(lp_grammar_vocab_t *v)
{
    shared_t *s = v->shared;
    if (!s) return;
    for (uint32_t i = 0; i < s->n; i++) {
        ltab_free(s->e[i].tab);
        free(s->e[i].canon);
    }
    free(s->e);
    free(s->idx);
    free(s);
    v->shared = NULL;
}

/* Find or build the table of (d, q); the vocabulary lock is held. */
static int shared_get(lp_grammar_vocab_t *v, const gr_dfa_t *d, int32_t q, bool tail, bool grouped, bool counted,
                      sub_t *sub, gr_ltab_t **out, bool *owned)
{
    shared_t *s = v->shared;
    *owned = false;
    for (uint32_t j = s->nidx ? (uint32_t)sub->hash & (s->nidx - 1) : 0; s->nidx && s->idx[j];
         j = (j + 1) & (s->nidx - 1)) {
        sentry_t *e = &s->e[s->idx[j] - 1];
        if (e->hash != sub->hash || e->tail != tail || e->grouped != grouped || e->ncanon != sub->ncanon ||
            memcmp(e->canon, sub->canon, sub->ncanon * sizeof(uint32_t)))
            continue;
        if (counted && !e->counted_done && d->dmin) {
            int rc = ltab_counted(v, e->tab, d, sub->actual);
            if (rc) return rc;
            e->counted_done = true;
        }
        *out = e->tab;
        return 0;
    }
    /* canonical numbering for the table */
    int32_t *map = malloc(d->n_states * sizeof(int32_t));
    if (!map) return LP_ERR(ENOMEM);
    for (uint32_t i = 0; i < d->n_states; i++) map[i] = -1;
    for (uint32_t i = 0; i < sub->n; i++) map[sub->actual[i]] = (int32_t)i;
    gr_ltab_t *t;
    int rc = ltab_build(v, d, q, tail, grouped, map, NULL, &t);
    free(map);
    if (rc) return rc;
    if (counted && d->dmin && (rc = ltab_counted(v, t, d, sub->actual))) {
        ltab_free(t);
        return rc;
    }
    if (s->bytes + t->bytes > SHARED_BYTES) {
        *out = t;
        *owned = true;
        return 0;
    }
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 64;
        sentry_t *ne = realloc(s->e, nc * sizeof(*ne));
        uint32_t *ni = ne ? calloc(2 * nc, sizeof(uint32_t)) : NULL;
        if (!ni) {
            if (ne) s->e = ne;
            ltab_free(t);
            return LP_ERR(ENOMEM);
        }
        s->e = ne;
        s->cap = nc;
        free(s->idx);
        s->idx = ni;
        s->nidx = 2 * nc;
        for (uint32_t i = 0; i < s->n; i++) {
            uint32_t j = (uint32_t)s->e[i].hash & (s->nidx - 1);
            while (s->idx[j]) j = (j + 1) & (s->nidx - 1);
            s->idx[j] = i + 1;
        }
    }
    uint32_t j = (uint32_t)sub->hash & (s->nidx - 1);
    while (s->idx[j]) j = (j + 1) & (s->nidx - 1);
    s->idx[j] = s->n + 1;
    sentry_t *e = &s->e[s->n++];
    e->hash = sub->hash;
    e->canon = sub->canon;
    e->ncanon = sub->ncanon;
    sub->canon = NULL; /* the entry owns it */
    e->tail = tail;
    e->grouped = grouped;
    e->tab = t;
    e->counted_done = counted && d->dmin;
    s->bytes += t->bytes;
    *out = t;
    return 0;
}

static int table_for(lp_grammar_vocab_t *v, const gr_rule_t *r, int32_t q, rslot_t *slot)
{
    const gr_dfa_t *d = r->dfa;
    if (r->key_of && r->pure >= 0 && q != r->pure) {
        /* bytes on which q goes where the pure state goes: those tokens
         * are the pure state's; walk only the others */
        uint64_t excl[4] = {0};
        uint32_t n = 0;
        for (int b = 0; b < 256; b++)
            if (lp__gr_dfa_step(d, q, (uint8_t)b) != lp__gr_dfa_step(d, r->pure, (uint8_t)b)) {
                excl[b >> 6] |= 1ull << (b & 63);
                n++;
            }
        if (n <= 128) {
            gr_ltab_t *t;
            int rc = ltab_build(v, d, q, r->tail, true, NULL, excl, &t);
            if (rc) return rc;
            t->base = r->pure;
            memcpy(t->excl, excl, sizeof(excl));
            slot->owned = true;
            slot->actual = NULL;
            atomic_store_explicit(&slot->tab, t, memory_order_release);
            return 0;
        }
    }
    sub_t sub;
    int rc = sub_make(d, q, SHARE_MAX, v->max_len + 1, &sub);
    if (rc) return rc;
    gr_ltab_t *t = NULL;
    if (sub.n) {
        pthread_mutex_lock(&v->lock);
        rc = shared_get(v, d, q, r->tail, r->counted || r->key_of, r->counted, &sub, &t, &slot->owned);
        pthread_mutex_unlock(&v->lock);
        if (!rc) {
            slot->actual = sub.actual;
            sub.actual = NULL;
        }
    } else {
        rc = ltab_build(v, d, q, r->tail, r->counted || r->key_of, NULL, NULL, &t);
        if (!rc && r->counted && d->dmin && (rc = ltab_counted(v, t, d, NULL))) ltab_free(t);
        slot->owned = true;
        slot->actual = NULL;
    }
    sub_free(&sub);
    if (!rc) atomic_store_explicit(&slot->tab, t, memory_order_release);
    return rc;
}

int lp__gr_shared_init(lp_grammar_vocab_t *v)
{
    shared_t *s = calloc(1, sizeof(*s));
    if (!s) return lp_error_set(LP_ERR(ENOMEM), "grammar vocabulary: out of memory");
    v->shared = s;
    int rc = 0;
    /* the lexemes of JSON mode and of schemas' plain types, both spacings */
    for (int compact = 0; compact < 2 && !rc; compact++) {
        gr_grammar_t g;
        lp__gr_grammar_init(&g);
        gr_json_t j;
        lp__gr_json_init(&j, &g, compact);
        int64_t ids[8];
        int n = 0;
        ids[n++] = lp__gr_json_obj_any(&j); /* brings the punctuation, key and scalar */
        gr_re_t *str = lp__gr_json_quoted(&j, lp__gr_json_str_body(&j));
        ids[n++] = lp__gr_json_lex(&j, str, GR_ENC_JSON, "string");
        ids[n++] = lp__gr_json_lex(&j, lp__gr_json_number(&j), GR_ENC_UTF8, "number");
        ids[n++] = lp__gr_json_lex(&j, lp__gr_json_int(&j), GR_ENC_UTF8, "integer");
        for (int i = 0; i < n; i++)
            if (ids[i] < 0) rc = (int)ids[i];
        for (uint32_t r = 0; r < g.rules.n && !rc; r++) {
            gr_rule_t *rule = &g.rules.v[r];
            if (rule->kind != GR_LEX) continue;
            rule->tail = true;
            bool str_rule = (int64_t)r == ids[1];
            if (str_rule) {
                rule->counted = true; /* a string with a length limit shares these */
                if ((rc = lp__gr_dfa_lengths(rule->dfa))) break;
            }
            for (uint32_t q = 0; q < rule->dfa->n_states && !rc; q++) {
                rslot_t slot = {0};
                rc = table_for(v, rule, (int32_t)q, &slot);
                if (slot.owned) ltab_free(atomic_load(&slot.tab));
                free(slot.actual);
            }
        }
        lp__gr_json_free(&j);
        lp__gr_grammar_free(&g);
    }
    if (rc) lp_error_set(rc, "grammar vocabulary: building the shared token tables failed");
    return rc;
}

/* The table of rule r in state q, built if needed. */
static int get_table(const lp_grammar_t *G, const gr_rule_t *r, int32_t q, const gr_ltab_t **out,
                     const int32_t **actual)
{
    rcache_t *c = r->mask_cache;
    if (c) {
        gr_ltab_t *t = atomic_load_explicit(&c->slot[q].tab, memory_order_acquire);
        if (t) {
            *out = t;
            *actual = c->slot[q].actual;
            return 0;
        }
    }
    pthread_mutex_lock((pthread_mutex_t *)&G->lock);
    int rc = 0;
    c = r->mask_cache;
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (c) c->slot = calloc(r->dfa->n_states, sizeof(*c->slot));
        if (!c || !c->slot) {
            free(c);
            rc = lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
            goto done;
        }
        c->n = r->dfa->n_states;
        ((gr_rule_t *)r)->mask_cache = c;
    }
    if (!atomic_load(&c->slot[q].tab)) rc = table_for(G->vocab, r, q, &c->slot[q]);
    if (!rc) {
        *out = atomic_load(&c->slot[q].tab);
        *actual = c->slot[q].actual;
    } else {
        lp_error_set(rc, "grammar: out of memory building a token table");
    }
done:
    pthread_mutex_unlock((pthread_mutex_t *)&G->lock);
    return rc;
}

/* ---- the mask --------------------------------------------------------------------------------- */

void lp__gr_scratch_free(gr_scratch_t *s)
{
    for (uint32_t i = 0; i < s->nlvl; i++) lp__gr_cfgs_free(&s->lvl[i]);
    free(s->lvl);
    s->lvl = NULL;
    s->nlvl = 0;
    GR_FREE(s->visited);
    lp__gr_arena_free(&s->arena);
    lp__gr_cfgs_free(&s->pop);
    free(s->excl);
    s->excl = NULL;
}

typedef struct {
    const lp_grammar_t *G;
    uint64_t *mask;
    gr_scratch_t *s;
    const uint64_t *skip; /* 256 bits: tokens starting with these bytes are not set (NULL: none) */
    int err;
} walk_t;

static inline void set_node(walk_t *w, const gr_trie_t *t, uint32_t node)
{
    const lp_grammar_vocab_t *v = w->G->vocab;
    for (uint32_t i = 0; i < t->ntok[node]; i++) {
        int32_t tok = t->toks[t->tok0[node] + i];
        if (w->skip && lp__gr_btest(w->skip, v->bytes[v->off[tok]])) continue;
        lp__gr_bset(w->mask, (size_t)tok);
    }
}

/* The tokens of trie t under node whose bytes the configurations accept. */
static void walk(walk_t *w, const gr_trie_t *t, uint32_t node, uint32_t depth, const gr_cfgs_t *in)
{
    uint32_t end = t->next[node];
    gr_cfgs_t *o = &w->s->lvl[depth + 1];
    for (uint32_t c = node + 1; c < end && !w->err; c = t->next[c]) {
        lp__gr_mark_t mk = lp__gr_mark(&w->s->arena);
        int rc = lp__gr_step(&w->G->g, &w->s->arena, in, t->byte[c], o, &w->s->visited);
        if (rc) {
            w->err = rc;
            break;
        }
        if (o->n || o->end) {
            set_node(w, t, c);
            if (o->n && t->next[c] > c + 1) walk(w, t, c, depth + 1, o);
        }
        lp__gr_release(&w->s->arena, mk);
    }
}

static void set_set(uint64_t *mask, const int32_t *list, const uint64_t *bits, uint32_t n, size_t words)
{
    if (bits) lp__gr_bor(mask, bits, words);
    else
        for (uint32_t i = 0; i < n; i++) lp__gr_bset(mask, (size_t)list[i]);
}

static bool group_live(const gr_rule_t *r, int32_t end, uint32_t inc, const gr_cfg_t *c)
{
    if (r->counted) {
        const gr_dfa_t *d = r->dfa;
        uint32_t ctr = c->ctr + inc;
        if (r->max_len != GR_NONE && (d->dmin[end] == UINT32_MAX || ctr + d->dmin[end] > r->max_len))
            return false;
        if (r->min_len && d->dmax[end] != UINT32_MAX && ctr + d->dmax[end] < r->min_len) return false;
    }
    if (r->key_of && !lp__gr_key_live(r, end, c->parent)) return false;
    return true;
}

static int tab_mask(walk_t *w, const gr_cfg_t *c, const gr_ltab_t *t, const int32_t *actual);

static int cfg_mask(walk_t *w, const gr_cfg_t *c)
{
    const gr_rule_t *r = &w->G->g.rules.v[c->rule];
    const gr_ltab_t *t = NULL;
    const int32_t *actual = NULL;
    int rc = get_table(w->G, r, c->state, &t, &actual);
    if (rc) return rc;
    if (t->base >= 0) {
        /* the pure state's tokens (live only if an other key may come),
         * less those starting with the bytes this state treats otherwise */
        if (lp__gr_key_live(r, t->base, c->parent)) {
            const gr_ltab_t *bt = NULL;
            const int32_t *bact = NULL;
            if ((rc = get_table(w->G, r, t->base, &bt, &bact))) return rc;
            const lp_grammar_vocab_t *v = w->G->vocab;
            size_t words = v->words;
            uint64_t *ex = w->s->excl;
            memset(ex, 0, words * sizeof(uint64_t));
            for (int b = 0; b < 256; b++)
                if (t->excl[b >> 6] >> (b & 63) & 1) lp__gr_bor(ex, v->first + (size_t)b * words, words);
            if (bt->in_bits) {
                for (size_t i = 0; i < words; i++) w->mask[i] |= bt->in_bits[i] & ~ex[i];
            } else {
                for (uint32_t i = 0; i < bt->n_in; i++)
                    if (!lp__gr_btest(ex, (size_t)bt->in_list[i])) lp__gr_bset(w->mask, (size_t)bt->in_list[i]);
            }
            /* its exits, with the same tokens left out */
            gr_ltab_t only_exits = *bt;
            only_exits.in_bits = NULL;
            only_exits.in_list = NULL;
            only_exits.n_in = 0;
            only_exits.n_groups = 0;
            only_exits.base = -1;
            w->skip = t->excl;
            rc = tab_mask(w, c, &only_exits, bact);
            w->skip = NULL;
            if (rc) return rc;
        }
    }
    return tab_mask(w, c, t, actual);
}

static int tab_mask(walk_t *w, const gr_cfg_t *c, const gr_ltab_t *t, const int32_t *actual)
{
    const gr_rule_t *r = &w->G->g.rules.v[c->rule];
    size_t words = w->G->vocab->words;
    if (t->naive) {
        gr_cfgs_t *one = &w->s->pop;
        if (lp__gr_cfgs_reserve(one, 1)) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
        one->v[0] = *c;
        one->n = 1;
        one->end = false;
        walk(w, &w->G->vocab->trie, 0, 0, one);
        return w->err;
    }
    if (!r->counted && !r->key_of) {
        set_set(w->mask, t->in_list, t->in_bits, t->n_in, words);
    } else if (t->base < 0 && !t->n_groups && r->key_of) {
        /* only its exits (the pure state's part of a delta table) */
    } else if (r->counted && !r->key_of && __atomic_load_n(&t->uniform, __ATOMIC_ACQUIRE)) {
        /* no end state limits the minimum: one bitset by the room left */
        if (r->max_len == GR_NONE) {
            set_set(w->mask, t->in_list, t->in_bits, t->n_in, words);
        } else {
            uint32_t room = r->max_len > c->ctr ? r->max_len - c->ctr : 0;
            lp__gr_bor(w->mask, t->cum + (size_t)(room < CUM ? room : CUM - 1) * words, words);
            for (uint32_t i = 0; i < t->n_far && t->far_key[i] <= room; i++)
                lp__gr_bset(w->mask, (size_t)t->far_tok[i]);
        }
    } else {
        for (uint32_t g = 0; g < t->n_groups; g++) {
            const ingroup_t *x = &t->groups[g];
            if (!group_live(r, actual ? actual[x->end] : x->end, x->inc, c)) continue;
            set_set(w->mask, x->list, x->bits, x->n, words);
        }
    }
    for (uint32_t k = 0; k < t->n_exits && !w->err; k++) {
        const exitgroup_t *e = &t->exits[k];
        int32_t f = actual ? actual[e->f] : e->f;
        if (r->counted) {
            uint32_t ctr = c->ctr + e->inc;
            if (ctr < r->min_len || (r->max_len != GR_NONE && ctr > r->max_len)) continue;
        }
        /* what the return at f allows */
        lp__gr_mark_t mk = lp__gr_mark(&w->s->arena);
        gr_cfgs_t *p = &w->s->pop;
        p->n = 0;
        p->end = false;
        gr_ctx_t ctx = {&w->G->g, &w->s->arena, p, w->s->visited, 0};
        ctx.visited.n = 0;
        lp__gr_pop(&ctx, c->rule, r->dfa->tag[f], c->parent);
        w->s->visited = ctx.visited;
        if (ctx.err) return ctx.err;
        if (p->n || p->end) {
            set_node(w, &e->t, 0); /* tokens that end right there */
            if (p->n && e->t.n_nodes > 1) walk(w, &e->t, 0, 0, p);
        }
        lp__gr_release(&w->s->arena, mk);
    }
    return w->err;
}

/* An empty mask, and a level of configurations per byte of the longest token. */
static int mask_start(const lp_grammar_vocab_t *v, gr_scratch_t *s, uint64_t *mask)
{
    memset(mask, 0, v->words * sizeof(uint64_t));
    uint32_t need = v->max_len + 2;
    if (s->nlvl < need) {
        gr_cfgs_t *l = realloc(s->lvl, need * sizeof(*l));
        if (!l) return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
        memset(l + s->nlvl, 0, (need - s->nlvl) * sizeof(*l));
        s->lvl = l;
        s->nlvl = need;
    }
    return 0;
}

int lp__gr_fill_mask(const lp_grammar_t *G, const gr_cfgs_t *cur, gr_scratch_t *s, uint64_t *mask)
{
    const lp_grammar_vocab_t *v = G->vocab;
    int rc = mask_start(v, s, mask);
    if (rc) return rc;
    if (!s->excl && !(s->excl = malloc(v->words * sizeof(uint64_t))))
        return lp_error_set(LP_ERR(ENOMEM), "grammar: out of memory");
    walk_t w = {G, mask, s, NULL, 0};
    for (uint32_t i = 0; i < cur->n && !w.err; i++) w.err = cfg_mask(&w, &cur->v[i]);
    return w.err;
}

int lp__gr_fill_mask_naive(const lp_grammar_t *G, const gr_cfgs_t *cur, gr_scratch_t *s, uint64_t *mask)
{
    const lp_grammar_vocab_t *v = G->vocab;
    int rc = mask_start(v, s, mask);
    if (rc) return rc;
    walk_t w = {G, mask, s, NULL, 0};
    walk(&w, &v->trie, 0, 0, cur);
    return w.err;
}
