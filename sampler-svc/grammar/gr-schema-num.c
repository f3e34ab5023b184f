/* gr-schema-num.c - numbers in JSON Schema: exact decimals, the number
 * lexeme for minimum/maximum (inclusive or exclusive, any decimal bounds)
 * and integer multipleOf, built digit by digit.
 *
 * Bounded numbers are written without an exponent (1e2 is refused where a
 * bound applies); that loses no value, only a spelling.  multipleOf keeps to
 * integers of at most 15 digits, where Python's and Rust's validators (both
 * partly in binary floating point) agree with exact arithmetic. */
#include "gr-schema.h"

#include "error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_DIGITS 400 /* digits of a bound's integer or fraction part */

int lp__gr_dec_parse(sc_t *sc, const char *t, size_t n, sc_dec_t *d)
{
    size_t i = 0;
    memset(d, 0, sizeof(*d));
    bool neg = false;
    if (i < n && t[i] == '-') neg = true, i++;
    char *dig = lp__gr_alloc(&sc->arena, n + 1);
    if (!dig) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    uint32_t nd = 0;
    int64_t exp = 0;
    bool any = false;
    while (i < n && t[i] >= '0' && t[i] <= '9') dig[nd++] = t[i++], any = true;
    if (i < n && t[i] == '.') {
        i++;
        while (i < n && t[i] >= '0' && t[i] <= '9') dig[nd++] = t[i++], exp--;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        bool en = false;
        if (i < n && (t[i] == '+' || t[i] == '-')) en = t[i] == '-', i++;
        int64_t e = 0;
        while (i < n && t[i] >= '0' && t[i] <= '9') {
            e = e * 10 + (t[i++] - '0');
            if (e > 100000) return lp_error_set(LP_ERR(E2BIG), "number exponent too large");
        }
        exp += en ? -e : e;
    }
    if (!any || i != n) return lp_error_set(LP_ERR(EINVAL), "not a number: %.*s", (int)n, t);
    /* strip leading and trailing zeros */
    uint32_t a = 0;
    while (a < nd && dig[a] == '0') a++;
    while (nd > a && dig[nd - 1] == '0') nd--, exp++;
    d->dig = dig + a;
    d->nd = nd - a;
    d->exp = d->nd ? (int32_t)exp : 0;
    d->neg = d->nd ? neg : false;
    return 0;
}

static int mag_cmp(const sc_dec_t *a, const sc_dec_t *b)
{
    if (!a->nd || !b->nd) return a->nd ? 1 : b->nd ? -1 : 0;
    int64_t oa = (int64_t)a->nd + a->exp, ob = (int64_t)b->nd + b->exp;
    if (oa != ob) return oa < ob ? -1 : 1;
    uint32_t n = a->nd < b->nd ? a->nd : b->nd;
    int c = memcmp(a->dig, b->dig, n);
    if (c) return c < 0 ? -1 : 1;
    return a->nd == b->nd ? 0 : a->nd < b->nd ? -1 : 1;
}

int lp__gr_dec_cmp(const sc_dec_t *a, const sc_dec_t *b)
{
    if (a->neg != b->neg) return a->neg ? -1 : 1;
    int c = mag_cmp(a, b);
    return a->neg ? -c : c;
}

bool lp__gr_dec_is_int(const sc_dec_t *d) { return d->exp >= 0; }

/* v mod m for an integer decimal v and m < 2^62 */
static uint64_t dec_mod(const sc_dec_t *v, uint64_t m)
{
    unsigned __int128 r = 0;
    for (uint32_t i = 0; i < v->nd; i++) r = (r * 10 + (unsigned)(v->dig[i] - '0')) % m;
    for (int32_t i = 0; i < v->exp; i++) r = (r * 10) % m;
    return (uint64_t)r;
}

static bool dec_u64(const sc_dec_t *d, uint64_t *out)
{
    if (d->neg || d->exp < 0 || (int64_t)d->nd + d->exp > 18) return false;
    uint64_t v = 0;
    for (uint32_t i = 0; i < d->nd; i++) v = v * 10 + (uint64_t)(d->dig[i] - '0');
    for (int32_t i = 0; i < d->exp; i++) v *= 10;
    *out = v;
    return true;
}

static double dec_double(const sc_dec_t *d)
{
    char buf[64];
    if (d->nd > 40) return NAN;
    snprintf(buf, sizeof(buf), "%s%.*se%d", d->neg ? "-" : "", (int)d->nd, d->nd ? d->dig : "0", d->exp);
    return strtod(buf, NULL);
}

int lp__gr_dec_multiple(const sc_dec_t *v, const sc_dec_t *m)
{
    if (!m->nd || m->neg) return lp_error_set(LP_ERR(EINVAL), "multipleOf must be greater than 0");
    if (lp__gr_dec_is_int(m)) {
        uint64_t mm;
        if (!dec_u64(m, &mm) || mm >= (1ull << 62))
            return lp__gr_sc_unsupported("multipleOf", "divisor too large");
        if (!lp__gr_dec_is_int(v)) return 0;
        return dec_mod(v, mm) == 0;
    }
    /* a fractional divisor: Python divides in binary floating point and asks
     * for an integral quotient; ask that and exactness both */
    double q = dec_double(v) / dec_double(m);
    if (!isfinite(q) || q != floor(q)) return 0;
    /* exact: v / m integral  <=>  v.dig * 10^(v.exp - m.exp) divisible by m.dig */
    sc_dec_t md = *m;
    md.exp = 0;
    uint64_t mm;
    if (!dec_u64(&md, &mm) || mm >= (1ull << 62)) return lp__gr_sc_unsupported("multipleOf", "divisor too precise");
    sc_dec_t vv = *v;
    vv.neg = false;
    vv.exp = v->exp - m->exp;
    if (vv.exp < 0) return 0;
    return dec_mod(&vv, mm) == 0;
}

/* ---- magnitudes as expressions -------------------------------------------------------------- */

typedef struct {
    sc_t *sc;
    gr_rebuf_t *rb;
} nb_t;

static gr_re_t *Bd(nb_t *b, char lo, char hi)
{
    if (lo > hi) return lp__gr_re_new(b->rb, GR_RE_NONE);
    return lp__gr_re_byte(b->rb, (uint8_t)lo, (uint8_t)hi, false);
}

static gr_re_t *D(nb_t *b) { return Bd(b, '0', '9'); }
static gr_re_t *Dstar(nb_t *b) { return lp__gr_re_rep(b->rb, D(b), 0, GR_RE_INF); }
static gr_re_t *lit(nb_t *b, const char *s, size_t n) { return lp__gr_re_bytes(b->rb, s, n); }
static gr_re_t *cat(nb_t *b, gr_re_t *x, gr_re_t *y) { return lp__gr_re_cat2(b->rb, x, y); }
static gr_re_t *alt(nb_t *b, gr_re_t *x, gr_re_t *y) { return lp__gr_re_alt2(b->rb, x, y); }
static gr_re_t *none(nb_t *b) { return lp__gr_re_new(b->rb, GR_RE_NONE); }
static gr_re_t *empty(nb_t *b) { return lp__gr_re_new(b->rb, GR_RE_EMPTY); }

/* integer part: 0 | [1-9][0-9]* */
static gr_re_t *int_any(nb_t *b) { return alt(b, Bd(b, '0', '0'), cat(b, Bd(b, '1', '9'), Dstar(b))); }
/* (.[0-9]+)? when fractions are allowed */
static gr_re_t *frac_opt(nb_t *b, bool integer)
{
    if (integer) return empty(b);
    return lp__gr_re_rep(b->rb, cat(b, Bd(b, '.', '.'), lp__gr_re_rep(b->rb, D(b), 1, GR_RE_INF)), 0, 1);
}

/* integer strings (no leading zeros) less than I */
static gr_re_t *int_lt(nb_t *b, const char *I, size_t n)
{
    gr_re_t *r = none(b);
    if (n >= 2) /* shorter */
        r = alt(b, r, alt(b, Bd(b, '0', '0'), cat(b, Bd(b, '1', '9'), lp__gr_re_rep(b->rb, D(b), 0, (uint32_t)n - 2))));
    for (size_t k = 0; k < n; k++) {
        char lo = (k == 0 && n > 1) ? '1' : '0';
        if (I[k] - 1 < lo) continue;
        gr_re_t *x = cat(b, lit(b, I, k), Bd(b, lo, (char)(I[k] - 1)));
        x = cat(b, x, lp__gr_re_rep(b->rb, D(b), (uint32_t)(n - k - 1), (uint32_t)(n - k - 1)));
        r = alt(b, r, x);
    }
    return r;
}

/* integer strings greater than I */
static gr_re_t *int_gt(nb_t *b, const char *I, size_t n)
{
    gr_re_t *r = cat(b, Bd(b, '1', '9'), lp__gr_re_rep(b->rb, D(b), (uint32_t)n, GR_RE_INF)); /* longer */
    for (size_t k = 0; k < n; k++) {
        if (I[k] == '9') continue;
        if (n > 1 && k == 0 && I[0] == '0') continue;
        gr_re_t *x = cat(b, lit(b, I, k), Bd(b, (char)(I[k] + 1), '9'));
        x = cat(b, x, lp__gr_re_rep(b->rb, D(b), (uint32_t)(n - k - 1), (uint32_t)(n - k - 1)));
        r = alt(b, r, x);
    }
    return r;
}

/* fraction digit strings Y (non-empty) with 0.Y < 0.F */
static gr_re_t *frac_lt(nb_t *b, const char *F, size_t n)
{
    gr_re_t *r = none(b);
    for (size_t k = 0; k < n; k++) {
        if (F[k] > '0') r = alt(b, r, cat(b, cat(b, lit(b, F, k), Bd(b, '0', (char)(F[k] - 1))), Dstar(b)));
        /* a proper prefix, then zeros */
        if (k >= 1) r = alt(b, r, cat(b, lit(b, F, k), lp__gr_re_rep(b->rb, Bd(b, '0', '0'), 0, GR_RE_INF)));
    }
    return r;
}

/* Y with 0.Y > 0.F */
static gr_re_t *frac_gt(nb_t *b, const char *F, size_t n)
{
    gr_re_t *r = none(b);
    for (size_t k = 0; k < n; k++)
        if (F[k] < '9') r = alt(b, r, cat(b, cat(b, lit(b, F, k), Bd(b, (char)(F[k] + 1), '9')), Dstar(b)));
    /* F, then more digits with a non-zero among them */
    r = alt(b, r, cat(b, cat(b, lit(b, F, n), Dstar(b)), cat(b, Bd(b, '1', '9'), Dstar(b))));
    return r;
}

enum { LT, LE, GT, GE };

/* magnitudes M (no sign) with M op B, B >= 0 given as integer part I and
 * fraction F (no trailing zeros); integer: M has no fraction */
static gr_re_t *mag_cmp_re(nb_t *b, int op, const char *I, size_t ni, const char *F, size_t nf, bool integer)
{
    gr_re_t *zeros0 = lp__gr_re_rep(b->rb, Bd(b, '0', '0'), 0, GR_RE_INF);
    gr_re_t *r, *eq = none(b), *fr = none(b);
    if (op == LT || op == LE) {
        r = cat(b, int_lt(b, I, ni), frac_opt(b, integer));
        if (op == LE || nf) eq = lit(b, I, ni); /* M == I */
        if (nf) fr = frac_lt(b, F, nf);
        if (op == LE) fr = alt(b, fr, nf ? cat(b, lit(b, F, nf), zeros0) : lp__gr_re_rep(b->rb, Bd(b, '0', '0'), 1, GR_RE_INF));
    } else {
        r = cat(b, int_gt(b, I, ni), frac_opt(b, integer));
        if (op == GE && !nf) eq = lit(b, I, ni);
        if (nf) fr = frac_gt(b, F, nf);
        else if (op == GT) fr = cat(b, zeros0, cat(b, Bd(b, '1', '9'), Dstar(b)));
        if (op == GE) fr = alt(b, fr, nf ? cat(b, lit(b, F, nf), Dstar(b)) : lp__gr_re_rep(b->rb, D(b), 1, GR_RE_INF));
    }
    r = alt(b, r, eq);
    if (!integer) r = alt(b, r, cat(b, cat(b, lit(b, I, ni), Bd(b, '.', '.')), fr));
    return r;
}

gr_re_t *lp__gr_dec_plain_re(gr_rebuf_t *rb, const sc_dec_t *d, const char *I, size_t ni, const char *F, size_t nf)
{
    gr_re_t *zeros = lp__gr_re_rep(rb, lp__gr_re_byte(rb, '0', '0', false), nf ? 0 : 1, GR_RE_INF);
    gr_re_t *frac = lp__gr_re_cat2(rb, lp__gr_re_byte(rb, '.', '.', false), lp__gr_re_cat2(rb, lp__gr_re_bytes(rb, F, nf), zeros));
    gr_re_t *plain = lp__gr_re_cat2(rb, lp__gr_re_bytes(rb, I, ni), nf ? frac : lp__gr_re_rep(rb, frac, 0, 1));
    gr_re_t *sign = d->neg ? lp__gr_re_byte(rb, '-', '-', false)
                  : d->nd  ? lp__gr_re_new(rb, GR_RE_EMPTY)
                           : lp__gr_re_rep(rb, lp__gr_re_byte(rb, '-', '-', false), 0, 1);
    return lp__gr_re_cat2(rb, sign, plain);
}

/* I and F of |d| */
int lp__gr_dec_split(sc_t *sc, const sc_dec_t *d, const char **I, size_t *ni, const char **F, size_t *nf)
{
    if (!d->nd) {
        *I = "0", *ni = 1, *F = "", *nf = 0;
        return 0;
    }
    int64_t intlen = (int64_t)d->nd + d->exp;
    if (intlen > MAX_DIGITS || -(int64_t)d->exp > MAX_DIGITS)
        return lp__gr_sc_unsupported("minimum/maximum", "a bound with over 400 digits");
    char *buf = lp__gr_alloc(&sc->arena, (size_t)(d->nd + 2 * MAX_DIGITS + 4));
    if (!buf) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    if (d->exp >= 0) {
        memcpy(buf, d->dig, d->nd);
        memset(buf + d->nd, '0', (size_t)d->exp);
        *I = buf, *ni = d->nd + (size_t)d->exp, *F = "", *nf = 0;
        return 0;
    }
    size_t k = (size_t)(-d->exp);
    if (d->nd > k) {
        *I = d->dig, *ni = d->nd - k, *F = d->dig + (d->nd - k), *nf = k;
    } else {
        memset(buf, '0', k - d->nd);
        memcpy(buf + (k - d->nd), d->dig, d->nd);
        *I = "0", *ni = 1, *F = buf, *nf = k;
    }
    return 0;
}

/* Constraints on a magnitude: up to two comparisons. */
typedef struct {
    int n;
    int op[2];
    const sc_dec_t *b[2];
    bool dead;
} magc_t;

static void magc_add(magc_t *m, int op, const sc_dec_t *b) { m->op[m->n] = op, m->b[m->n++] = b; }

static int mag_re(nb_t *b, const magc_t *m, bool integer, gr_re_t **out)
{
    if (m->dead) {
        *out = none(b);
        return 0;
    }
    gr_re_t *acc = NULL;
    gr_dfa_t *dacc = NULL;
    for (int i = 0; i < m->n; i++) {
        sc_dec_t abs = *m->b[i];
        abs.neg = false;
        const char *I, *F;
        size_t ni, nf;
        int rc = lp__gr_dec_split(b->sc, &abs, &I, &ni, &F, &nf);
        if (rc) {
            lp__gr_dfa_unref(&dacc);
            return rc;
        }
        gr_re_t *r = mag_cmp_re(b, m->op[i], I, ni, F, nf, integer);
        if (!r) {
            lp__gr_dfa_unref(&dacc);
            return lp_error_set(LP_ERR(E2BIG), "number bounds too large");
        }
        if (m->n == 1) {
            *out = r;
            return 0;
        }
        gr_dfa_t *d;
        rc = lp__gr_dfa_from_re(r, GR_ENC_UTF8, 20000, &d);
        if (rc) {
            lp__gr_dfa_unref(&dacc);
            return rc;
        }
        if (!dacc) {
            dacc = d;
        } else {
            gr_dfa_t *x;
            rc = lp__gr_dfa_intersect(dacc, d, 20000, &x);
            lp__gr_dfa_unref(&d);
            lp__gr_dfa_unref(&dacc);
            if (rc) return rc;
            dacc = x;
        }
        acc = r;
    }
    if (!m->n) {
        *out = cat(b, int_any(b), frac_opt(b, integer));
        return 0;
    }
    (void)acc;
    /* the toolkit holds the DFA until the expressions are built */
    *out = lp__gr_re_dfa(b->rb, dacc);
    if (*out && GR_PUSH(b->sc->J.held, dacc)) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    return *out ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
}

/* Magnitudes divisible by m (at most 15 digits), as a DFA. */
static int mult_dfa(sc_t *sc, uint64_t m, gr_dfa_t **out)
{
    (void)sc;
    if (m > 100000) return lp__gr_sc_unsupported("multipleOf", "an integer divisor over 100000");
    /* residue r after k digits, k <= 15 (unrolled: "at most 15 digits") */
    int rc;
    if (m * 15 > 200000) return lp__gr_sc_unsupported("multipleOf", "divisor too large");
    uint32_t ns = (uint32_t)(2 + 15 * m);
    gr_dfa_t *d = calloc(1, sizeof(*d));
    if (!d) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    d->refs = 1;
    /* classes: 0:'0', 1..9: '1'..'9', 10: other */
    for (int b = 0; b < 256; b++) d->cls[b] = (uint8_t)(b >= '0' && b <= '9' ? b - '0' : 10);
    d->n_cls = 11;
    d->n_states = ns;
    d->next = malloc((size_t)ns * 11 * sizeof(int32_t));
    d->tag = malloc(ns * sizeof(int32_t));
    d->sink = calloc(ns, 1);
    if (!d->next || !d->tag || !d->sink) {
        lp__gr_dfa_unref(&d);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    for (size_t i = 0; i < (size_t)ns * 11; i++) d->next[i] = -1;
    /* state 0 start; 1: "0"; 2 + (k-1)*m + r: k digits, residue r */
#define ST(k, r) ((int32_t)(2 + ((k) - 1) * m + (r)))
    d->next[0 * 11 + 0] = 1;
    for (int dg = 1; dg <= 9; dg++) d->next[0 * 11 + dg] = ST(1, (uint64_t)dg % m);
    for (uint32_t s = 0; s < ns; s++) d->tag[s] = -1;
    d->tag[1] = 0;
    d->sink[1] = 1;
    for (uint64_t k = 1; k <= 15; k++)
        for (uint64_t r = 0; r < m; r++) {
            int32_t s = ST(k, r);
            if (r == 0) d->tag[s] = 0;
            if (k == 15) {
                d->sink[s] = 1;
                continue;
            }
            for (int dg = 0; dg <= 9; dg++) d->next[(size_t)s * 11 + dg] = ST(k + 1, (r * 10 + (uint64_t)dg) % m);
        }
#undef ST
    /* trimmed and minimised: the product with itself is the same language */
    gr_dfa_t *x;
    rc = lp__gr_dfa_intersect(d, d, 200000, &x);
    lp__gr_dfa_unref(&d);
    if (rc) return rc;
    *out = x;
    return 0;
}

int lp__gr_sc_number_budget(sc_t *sc, gr_re_t **re)
{
    static const char *budget =
        "-?([0-9]{1,18}|(([0-9]{1,15})|[0-9]{1}\\.[0-9]{1,14}|[0-9]{2}\\.[0-9]{1,13}|[0-9]{3}\\.[0-9]{1,12}|"
        "[0-9]{4}\\.[0-9]{1,11}|[0-9]{5}\\.[0-9]{1,10}|[0-9]{6}\\.[0-9]{1,9}|[0-9]{7}\\.[0-9]{1,8}|"
        "[0-9]{8}\\.[0-9]{1,7}|[0-9]{9}\\.[0-9]{1,6}|[0-9]{10}\\.[0-9]{1,5}|[0-9]{11}\\.[0-9]{1,4}|"
        "[0-9]{12}\\.[0-9]{1,3}|[0-9]{13}\\.[0-9]{1,2}|[0-9]{14}\\.[0-9])([eE][+-]?[0-9]{1,2})?)";
    gr_rebuf_t *rb = &sc->J.rb;
    gr_re_t *b;
    gr_dfa_t *x = NULL, *y = NULL, *z = NULL;
    int rc = lp__gr_re_parse(rb, budget, strlen(budget), &b);
    if (!rc) rc = lp__gr_dfa_from_re(b, GR_ENC_UTF8, 2000, &x);
    if (!rc) rc = lp__gr_dfa_from_re(*re, GR_ENC_UTF8, sc->J.max_dfa, &y);
    if (!rc) rc = lp__gr_dfa_intersect(x, y, sc->J.max_dfa, &z);
    lp__gr_dfa_unref(&x);
    lp__gr_dfa_unref(&y);
    if (rc) return rc;
    if (GR_PUSH(sc->J.held, z)) {
        lp__gr_dfa_unref(&z);
        return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    }
    *re = lp__gr_re_dfa(rb, z);
    return *re ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
}

static int number_re(sc_t *sc, const sc_num_t *c, gr_re_t **re);

int lp__gr_sc_number_re(sc_t *sc, const sc_num_t *c, gr_re_t **re)
{
    int rc = number_re(sc, c, re);
    if (rc || !*re || (!c->has_lo && !c->has_hi)) return rc;
    return lp__gr_sc_number_budget(sc, re);
}

static int number_re(sc_t *sc, const sc_num_t *c, gr_re_t **re)
{
    nb_t b = {sc, &sc->J.rb};
    bool integer = c->integer;
    /* multipleOf: integer divisors only (fractional ones handled by the caller) */
    uint64_t mult = 0;
    for (uint32_t i = 0; i < c->mult.n; i++) {
        const sc_dec_t *m = &c->mult.v[i];
        uint64_t v;
        sc_dec_t mm = *m;
        if (!lp__gr_dec_is_int(m) || !dec_u64(&mm, &v) || !v)
            return lp__gr_sc_unsupported("multipleOf", "a divisor that is not a positive integer");
        /* lcm */
        uint64_t a = mult ? mult : 1, g = a, h = v;
        while (h) {
            uint64_t t = g % h;
            g = h;
            h = t;
        }
        uint64_t l = a / g * v;
        if (l > 100000) return lp__gr_sc_unsupported("multipleOf", "an integer divisor over 100000");
        mult = l;
        integer = true; /* multiples of an integer are integers: spelled as such */
    }
    bool bounded = c->has_lo || c->has_hi;
    if (!bounded && !mult) {
        if (integer) {
            *re = cat(&b, lp__gr_re_rep(b.rb, Bd(&b, '-', '-'), 0, 1), int_any(&b));
            return *re ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
        }
        if (c->no_exp)
            *re = cat(&b, lp__gr_re_rep(b.rb, Bd(&b, '-', '-'), 0, 1), cat(&b, int_any(&b), frac_opt(&b, false)));
        else
            *re = lp__gr_json_number(&sc->J);
        return *re ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
    }
    /* the empty range */
    if (c->has_lo && c->has_hi) {
        int k = lp__gr_dec_cmp(&c->lo, &c->hi);
        if (k > 0 || (k == 0 && (c->lo_excl || c->hi_excl))) {
            *re = NULL;
            return 0;
        }
    }
    sc_dec_t zero = {0};
    /* bounds at zero only decide the sign: every spelling then, exponents
     * included (nonzero magnitudes, zero magnitudes, signed) */
    if (!mult && !c->no_exp && (!c->has_lo || !lp__gr_dec_cmp(&c->lo, &zero)) &&
        (!c->has_hi || !lp__gr_dec_cmp(&c->hi, &zero))) {
        gr_rebuf_t *rb = b.rb;
        gr_re_t *exp = integer ? empty(&b)
                               : lp__gr_re_rep(rb, lp__gr_re_cat(rb, (gr_re_t *[]){alt(&b, Bd(&b, 'e', 'e'), Bd(&b, 'E', 'E')),
                                                                                  lp__gr_re_rep(rb, alt(&b, Bd(&b, '+', '+'), Bd(&b, '-', '-')), 0, 1),
                                                                                  lp__gr_re_rep(rb, D(&b), 1, GR_RE_INF)}, 3),
                                               0, 1);
        gr_re_t *nz, *z;
        if (integer) {
            nz = cat(&b, Bd(&b, '1', '9'), Dstar(&b));
            z = Bd(&b, '0', '0');
        } else {
            gr_re_t *frac = lp__gr_re_rep(rb, cat(&b, Bd(&b, '.', '.'), lp__gr_re_rep(rb, D(&b), 1, GR_RE_INF)), 0, 1);
            gr_re_t *a = cat(&b, cat(&b, Bd(&b, '1', '9'), Dstar(&b)), frac);
            gr_re_t *f0 = cat(&b, lit(&b, "0.", 2), cat(&b, Dstar(&b), cat(&b, Bd(&b, '1', '9'), Dstar(&b))));
            nz = cat(&b, alt(&b, a, f0), exp);
            z = cat(&b, cat(&b, Bd(&b, '0', '0'), lp__gr_re_rep(rb, cat(&b, Bd(&b, '.', '.'),
                                                                           lp__gr_re_rep(rb, Bd(&b, '0', '0'), 1, GR_RE_INF)), 0, 1)),
                    exp);
        }
        gr_re_t *minus = Bd(&b, '-', '-');
        bool ge = c->has_lo, gt = c->has_lo && c->lo_excl, le = c->has_hi, lt = c->has_hi && c->hi_excl;
        gr_re_t *r;
        if (ge && le) r = gt || lt ? none(&b) : alt(&b, z, cat(&b, minus, z));
        else if (ge) r = gt ? nz : alt(&b, alt(&b, nz, z), cat(&b, minus, z));
        else r = lt ? cat(&b, minus, nz) : alt(&b, cat(&b, minus, alt(&b, nz, z)), z);
        *re = r;
        return r ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
    }
    magc_t pos = {0}, neg = {0};
    if (c->has_lo) {
        int s = lp__gr_dec_cmp(&c->lo, &zero);
        if (s > 0) magc_add(&pos, c->lo_excl ? GT : GE, &c->lo);
        else if (s == 0 && c->lo_excl) magc_add(&pos, GT, &zero);
        /* x = -M >= lo */
        if (s > 0 || (s == 0 && c->lo_excl)) neg.dead = true;
        else if (s == 0) magc_add(&neg, LE, &zero);
        else magc_add(&neg, c->lo_excl ? LT : LE, &c->lo);
    }
    if (c->has_hi) {
        int s = lp__gr_dec_cmp(&c->hi, &zero);
        if (s > 0) magc_add(&pos, c->hi_excl ? LT : LE, &c->hi);
        else if (s == 0) {
            if (c->hi_excl) pos.dead = true;
            else magc_add(&pos, LE, &zero);
        } else
            pos.dead = true;
        if (s == 0 && c->hi_excl) magc_add(&neg, GT, &zero);
        else if (s < 0) magc_add(&neg, c->hi_excl ? GT : GE, &c->hi);
    }
    gr_re_t *p, *q;
    int rc = mag_re(&b, &pos, integer, &p);
    if (!rc) rc = mag_re(&b, &neg, integer, &q);
    if (rc) return rc;
    if (mult) {
        gr_dfa_t *md;
        if ((rc = mult_dfa(sc, mult, &md))) return rc;
        if (GR_PUSH(sc->J.held, md)) {
            lp__gr_dfa_unref(&md);
            return lp_error_set(LP_ERR(ENOMEM), "out of memory");
        }
        /* intersect each branch with the multiples */
        gr_re_t *br[2] = {p, q};
        for (int i = 0; i < 2; i++) {
            gr_dfa_t *x, *y;
            if ((rc = lp__gr_dfa_from_re(br[i], GR_ENC_UTF8, 20000, &x))) return rc;
            rc = lp__gr_dfa_intersect(x, md, 200000, &y);
            lp__gr_dfa_unref(&x);
            if (rc) return rc;
            if (GR_PUSH(sc->J.held, y)) {
                lp__gr_dfa_unref(&y);
                return lp_error_set(LP_ERR(ENOMEM), "out of memory");
            }
            br[i] = lp__gr_re_dfa(b.rb, y);
        }
        p = br[0];
        q = br[1];
    }
    *re = alt(&b, p, cat(&b, Bd(&b, '-', '-'), q));
    return *re ? 0 : lp_error_set(LP_ERR(E2BIG), "expression too large");
}
