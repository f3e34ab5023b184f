/* gr-cset.c - sets of code points: ranges, set algebra, and the named
 * classes of regular expressions. */
#include "gr-fa.h"

#include "error.h"
#include "unicode.h"

#include <pthread.h>

static int cs_reserve(gr_cset_t *s, uint32_t need)
{
    return lp__gr_grow((void **)&s->r, &s->cap, need, sizeof(gr_range_t));
}

void lp__gr_cs_free(gr_cset_t *s)
{
    free(s->r);
    s->r = NULL;
    s->n = s->cap = 0;
}

/* Insert [lo, hi] keeping the ranges sorted, disjoint and non-adjacent. */
int lp__gr_cs_add(gr_cset_t *s, uint32_t lo, uint32_t hi)
{
    if (lo > hi) return 0;
    /* first range that ends at or after lo - 1 */
    uint32_t i = 0;
    while (i < s->n && s->r[i].hi + 1 < lo) i++;
    uint32_t j = i;
    while (j < s->n && s->r[j].lo <= hi + 1) {
        if (s->r[j].lo < lo) lo = s->r[j].lo;
        if (s->r[j].hi > hi) hi = s->r[j].hi;
        j++;
    }
    if (j == i) {
        if (cs_reserve(s, s->n + 1)) return LP_ERR(ENOMEM);
        memmove(s->r + i + 1, s->r + i, (s->n - i) * sizeof(gr_range_t));
        s->n++;
    } else if (j > i + 1) {
        memmove(s->r + i + 1, s->r + j, (s->n - j) * sizeof(gr_range_t));
        s->n -= j - i - 1;
    }
    s->r[i].lo = lo;
    s->r[i].hi = hi;
    return 0;
}

int lp__gr_cs_union(gr_cset_t *s, const gr_cset_t *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (lp__gr_cs_add(s, t->r[i].lo, t->r[i].hi)) return LP_ERR(ENOMEM);
    return 0;
}

int lp__gr_cs_negate(gr_cset_t *s)
{
    gr_cset_t o = {0};
    uint32_t at = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > at && lp__gr_cs_add(&o, at, s->r[i].lo - 1)) goto oom;
        at = s->r[i].hi + 1;
    }
    if (at <= GR_CP_MAX && lp__gr_cs_add(&o, at, GR_CP_MAX)) goto oom;
    /* no surrogates: they are not characters */
    gr_cset_t sur = {0};
    if (lp__gr_cs_add(&sur, 0, 0xD7FF) || lp__gr_cs_add(&sur, 0xE000, GR_CP_MAX) ||
        lp__gr_cs_intersect(&o, &sur)) {
        lp__gr_cs_free(&sur);
        goto oom;
    }
    lp__gr_cs_free(&sur);
    lp__gr_cs_free(s);
    *s = o;
    return 0;
oom:
    lp__gr_cs_free(&o);
    return LP_ERR(ENOMEM);
}

int lp__gr_cs_intersect(gr_cset_t *s, const gr_cset_t *t)
{
    gr_cset_t o = {0};
    uint32_t i = 0, j = 0;
    while (i < s->n && j < t->n) {
        uint32_t lo = s->r[i].lo > t->r[j].lo ? s->r[i].lo : t->r[j].lo;
        uint32_t hi = s->r[i].hi < t->r[j].hi ? s->r[i].hi : t->r[j].hi;
        if (lo <= hi && lp__gr_cs_add(&o, lo, hi)) {
            lp__gr_cs_free(&o);
            return LP_ERR(ENOMEM);
        }
        if (s->r[i].hi < t->r[j].hi)
            i++;
        else
            j++;
    }
    lp__gr_cs_free(s);
    *s = o;
    return 0;
}

bool lp__gr_cs_has(const gr_cset_t *s, uint32_t cp)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (s->r[mid].hi < cp)
            lo = mid + 1;
        else if (s->r[mid].lo > cp)
            hi = mid;
        else
            return true;
    }
    return false;
}

/* ---- named classes ---------------------------------------------------------- */

/* Space as all three engines agree (ECMA \s, Python str.isspace, Rust
 * White_Space): ECMA's U+FEFF and Python's U+001C..U+001F and U+0085 are
 * not in it. */
static const gr_range_t space_all[] = {
    {0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};
/* Space as any of them has it: \S must exclude all of these. */
static const gr_range_t space_any[] = {
    {0x09, 0x0D}, {0x1C, 0x20}, {0x85, 0x85}, {0xA0, 0xA0}, {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
    {0x3000, 0x3000}, {0xFEFF, 0xFEFF},
};

static int add_table(gr_cset_t *s, const gr_range_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lp__gr_cs_add(s, t[i].lo, t[i].hi)) return LP_ERR(ENOMEM);
    return 0;
}

/* Unicode general-category classes, built once from lib/vocab's table. */
static gr_cset_t ucd_sets[8];
static int ucd_status;
static pthread_once_t ucd_once = PTHREAD_ONCE_INIT;

static void ucd_build(void)
{
    uint32_t start[8] = {0};
    uint8_t prev = 0;
    for (uint32_t cp = 0; cp <= GR_CP_MAX + 1; cp++) {
        uint8_t f = cp <= GR_CP_MAX && (cp < 0xD800 || cp > 0xDFFF) ? lp__ucd_flags(cp) : 0;
        if (f == prev) continue;
        for (int k = 0; k < 8; k++) {
            uint8_t bit = (uint8_t)(1u << k);
            if ((f & bit) && !(prev & bit)) start[k] = cp;
            if (!(f & bit) && (prev & bit) && lp__gr_cs_add(&ucd_sets[k], start[k], cp - 1))
                ucd_status = LP_ERR(ENOMEM);
        }
        prev = f;
    }
}

static const gr_cset_t *ucd(uint8_t flag)
{
    pthread_once(&ucd_once, ucd_build);
    if (ucd_status) return NULL;
    for (int k = 0; k < 8; k++)
        if (flag == 1u << k) return &ucd_sets[k];
    return NULL;
}

int lp__gr_cs_class(gr_cset_t *s, char name)
{
    gr_cset_t t = {0};
    int rc = 0;
    switch (name) {
    case 'd':
        return lp__gr_cs_add(s, '0', '9');
    case 'w':
        if (lp__gr_cs_add(s, '0', '9') || lp__gr_cs_add(s, 'A', 'Z') || lp__gr_cs_add(s, 'a', 'z') ||
            lp__gr_cs_add(s, '_', '_'))
            return LP_ERR(ENOMEM);
        return 0;
    case 's':
        return add_table(s, space_all, sizeof(space_all) / sizeof(space_all[0]));
    case 'D':
    case 'W': {
        const gr_cset_t *n = ucd(LP_UCD_N);
        if (!n) return LP_ERR(ENOMEM);
        rc = lp__gr_cs_union(&t, n);
        if (!rc) rc = lp__gr_cs_add(&t, '0', '9');
        if (!rc && name == 'W') {
            const gr_cset_t *l = ucd(LP_UCD_L), *m = ucd(LP_UCD_M), *p = ucd(LP_UCD_P);
            if (!l || !m || !p) rc = LP_ERR(ENOMEM);
            if (!rc) rc = lp__gr_cs_union(&t, l);
            if (!rc) rc = lp__gr_cs_union(&t, m);
            if (!rc) rc = lp__gr_cs_union(&t, p);
            if (!rc) rc = lp__gr_cs_add(&t, 0x200C, 0x200D);
            if (!rc) rc = lp__gr_cs_add(&t, 'A', 'Z');
            if (!rc) rc = lp__gr_cs_add(&t, 'a', 'z');
            if (!rc) rc = lp__gr_cs_add(&t, '_', '_');
        }
        break;
    }
    case 'S':
        rc = add_table(&t, space_any, sizeof(space_any) / sizeof(space_any[0]));
        break;
    default:
        return LP_ERR(EINVAL);
    }
    if (!rc) rc = lp__gr_cs_negate(&t);
    if (!rc) rc = lp__gr_cs_union(s, &t);
    lp__gr_cs_free(&t);
    return rc;
}

int lp__gr_cs_dot(gr_cset_t *s)
{
    gr_cset_t t = {0};
    int rc = lp__gr_cs_add(&t, '\n', '\n');
    if (!rc) rc = lp__gr_cs_add(&t, '\r', '\r');
    if (!rc) rc = lp__gr_cs_add(&t, 0x2028, 0x2029);
    if (!rc) rc = lp__gr_cs_negate(&t);
    if (!rc) rc = lp__gr_cs_union(s, &t);
    lp__gr_cs_free(&t);
    return rc;
}

int lp__gr_cs_category(gr_cset_t *s, const char *name, size_t len, bool negate)
{
    static const struct {
        const char *a, *b;
        uint8_t flag;
    } cats[] = {
        {"L", "Letter", LP_UCD_L},      {"N", "Number", LP_UCD_N},
        {"Z", "Separator", LP_UCD_Z},   {"M", "Mark", LP_UCD_M},
        {"P", "Punctuation", LP_UCD_P}, {"S", "Symbol", LP_UCD_S},
        {"C", "Other", LP_UCD_C},
    };
    /* "General_Category=L" and "gc=L" name the same class */
    for (size_t i = 0; i < len; i++)
        if (name[i] == '=') {
            name += i + 1;
            len -= i + 1;
            break;
        }
    for (size_t i = 0; i < sizeof(cats) / sizeof(cats[0]); i++) {
        if ((strlen(cats[i].a) == len && !memcmp(cats[i].a, name, len)) ||
            (strlen(cats[i].b) == len && !memcmp(cats[i].b, name, len))) {
            const gr_cset_t *c = ucd(cats[i].flag);
            if (!c) return LP_ERR(ENOMEM);
            gr_cset_t t = {0};
            int rc = lp__gr_cs_union(&t, c);
            if (!rc && negate) rc = lp__gr_cs_negate(&t);
            if (!rc) rc = lp__gr_cs_union(s, &t);
            lp__gr_cs_free(&t);
            return rc;
        }
    }
    return LP_ERR(ENOTSUP);
}
