/* pretok.c - the BPE pre-tokenizers: split text into words before merging,
 * per tokenizer.ggml.pre, with llama.cpp's results.
 *
 * llama.cpp runs a list of regexes; each splits every piece the previous one
 * left (matches and the gaps between them both become pieces).  The GPT-2 and
 * llama3 regexes have hand-written matchers there; the rest go through
 * std::regex on text whose non-ASCII code points are collapsed to one byte
 * per category class (non-ASCII whitespace to \v).  Each regex used by a
 * supported pre type is written out here by hand as a scanner over code
 * points with precomputed category flags; docs/TOKENIZER.md explains why this
 * beats PCRE2-JIT.  Positions below are code-point indices. */
#include "tok-internal.h"
#include "unicode.h"

#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct text {
    const uint32_t *cp; /* (n) code points */
    const uint8_t *fl;  /* (n) lp__ucd_flags */
} text_t;

typedef struct bounds {
    size_t *v; /* piece starts */
    size_t n, cap;
} bounds_t;

static int bounds_push(bounds_t *b, size_t x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        size_t *v = realloc(b->v, cap * sizeof(*v));
        if (!v) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

/* Emits pieces of one input piece [a, b): add(end) closes the piece that
 * started at prev. */
typedef struct emit {
    bounds_t *out;
    size_t prev;
    int rc;
} emit_t;

static size_t add(emit_t *e, size_t end)
{
    size_t n = end - e->prev;
    if (n > 0 && !e->rc) e->rc = bounds_push(e->out, e->prev);
    e->prev = end;
    return n;
}

/* flags and code point at pos, 0 / out-of-range past the piece's end */
static inline unsigned flags_at(const text_t *t, size_t b, size_t pos) { return pos < b ? t->fl[pos] : 0u; }
static inline uint32_t cp_at(const text_t *t, size_t b, size_t pos) { return pos < b ? t->cp[pos] : 0xFFFFFFFFu; }
#define F(pos) flags_at(t, b, (pos))
#define CP(pos) cp_at(t, b, (pos))
#define IS_L(f) ((f) & LP_UCD_L)
#define IS_N(f) ((f) & LP_UCD_N)
#define IS_WS(f) ((f) & LP_UCD_WS)

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(const text_t *t, size_t a, size_t b, emit_t *e)
{
    for (size_t pos = a; pos < b;) {
        uint32_t c = t->cp[pos];
        unsigned f = t->fl[pos];
        if (c == '\'' && pos + 1 < b) {
            uint32_t n1 = t->cp[pos + 1];
            if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
                pos += add(e, pos + 2);
                continue;
            }
            if (pos + 2 < b) {
                uint32_t n2 = t->cp[pos + 2];
                if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
                    pos += add(e, pos + 3);
                    continue;
                }
            }
        }
        unsigned f2 = c == ' ' ? F(pos + 1) : f;
        if (IS_L(f2)) {
            pos += c == ' ';
            while (IS_L(f2)) f2 = F(++pos);
            add(e, pos);
            continue;
        }
        if (IS_N(f2)) {
            pos += c == ' ';
            while (IS_N(f2)) f2 = F(++pos);
            add(e, pos);
            continue;
        }
        if (!(f2 & (LP_UCD_WS | LP_UCD_L | LP_UCD_N)) && f2) {
            pos += c == ' ';
            while (!(f2 & (LP_UCD_WS | LP_UCD_L | LP_UCD_N)) && f2) f2 = F(++pos);
            add(e, pos);
            continue;
        }
        size_t nws = 0;
        while (IS_WS(F(pos + nws))) nws++;
        if (nws > 1 && pos + nws < b) {
            pos += nws - 1;
            add(e, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            add(e, pos);
            continue;
        }
        add(e, ++pos);
    }
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * max_digits 3 is llama3; 1 is qwen2's regex (std::regex in llama.cpp, which
 * matches the same pieces as this scanner).  With marks (qwen35) a word is
 * [\p{L}\p{M}]+ and the punctuation run [^\s\p{L}\p{M}\p{N}]+: combining
 * marks stay with the letters they follow. */
static void split_llama3(const text_t *t, size_t a, size_t b, emit_t *e, size_t max_digits,
                         bool marks)
{
    const unsigned word = LP_UCD_L | (marks ? LP_UCD_M : 0u);
    for (size_t pos = a; pos < b;) {
        uint32_t c = t->cp[pos];
        unsigned f = t->fl[pos];
        if (c == '\'' && pos + 1 < b) {
            uint32_t n1 = ascii_lower(t->cp[pos + 1]);
            if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
                pos += add(e, pos + 2);
                continue;
            }
            if (pos + 2 < b) {
                uint32_t n2 = ascii_lower(t->cp[pos + 2]);
                if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
                    pos += add(e, pos + 3);
                    continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || IS_N(f))) {
            if ((f & word) || (F(pos + 1) & word)) {
                pos++;
                while (F(pos) & word) pos++;
                add(e, pos);
                continue;
            }
        }
        if (IS_N(f)) {
            size_t ini = pos;
            while (IS_N(F(pos))) {
                if (++pos - ini >= max_digits) {
                    add(e, pos);
                    ini = pos;
                }
            }
            add(e, pos);
            continue;
        }
        unsigned f2 = c == ' ' ? F(pos + 1) : f;
        if (!(f2 & (LP_UCD_WS | word | LP_UCD_N)) && f) {
            pos += c == ' ';
            while (!(f2 & (LP_UCD_WS | word | LP_UCD_N)) && f2) f2 = F(++pos);
            uint32_t c2 = CP(pos);
            while (c2 == '\r' || c2 == '\n') c2 = CP(++pos);
            add(e, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (IS_WS(F(pos + nws))) {
            uint32_t c2 = t->cp[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            add(e, pos);
            continue;
        }
        if (nws > 1 && pos + nws < b) {
            pos += nws - 1;
            add(e, pos);
            continue;
        }
        if (nws > 0) {
            pos += nws;
            add(e, pos);
            continue;
        }
        add(e, ++pos);
    }
}

/* o200k (tokenizer.ggml.pre gpt-4o: GPT-4o, gpt-oss), as llama.cpp runs it:
 * its rewrite of the tokenizer.json regex, where an "upper" letter (U) is a
 * letter other than a-z and a "lower" one (W) a letter other than A-Z (so
 * every non-ASCII letter is both, and \p{M} is no letter):
 *   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with C one of 's 't 're 've 'm 'll 'd in any case.  The first two
 * alternatives are resolved as a backtracking engine does: U* takes the
 * longest run, then gives back letters until W+ can start. */
#define IS_U(c, f) (IS_L(f) && !((c) >= 'a' && (c) <= 'z'))
#define IS_W(c, f) (IS_L(f) && !((c) >= 'A' && (c) <= 'Z'))

/* Length of the contraction C at pos (0: none). */
static size_t contraction_at(const text_t *t, size_t b, size_t pos)
{
    if (CP(pos) != '\'') return 0;
    const uint32_t n1 = ascii_lower(CP(pos + 1)), n2 = ascii_lower(CP(pos + 2));
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
    if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
    return 0;
}

/* End of the letter alternatives at pos, or pos when neither matches. */
static size_t o200k_word(const text_t *t, size_t b, size_t pos)
{
    const uint32_t c = t->cp[pos];
    const unsigned f = t->fl[pos];
    /* the optional prefix; without it a word cannot start at a non-letter */
    const size_t s = pos + !(c == '\r' || c == '\n' || IS_L(f) || IS_N(f));
    size_t u = s, end = s;
    while (u < b && IS_U(CP(u), F(u))) u++;
    if (u < b && IS_W(CP(u), F(u))) { /* U* then W+ straight on */
        end = u;
    } else { /* W+ from the last W inside the U run */
        for (size_t k = u; k > s && end == s; k--)
            if (IS_W(CP(k - 1), F(k - 1))) end = k - 1;
        if (end == s && !(s < u && IS_W(CP(s), F(s)))) /* no W: U+ W* (W* empty here) */
            return u > s ? u + contraction_at(t, b, u) : pos;
    }
    while (end < b && IS_W(CP(end), F(end))) end++;
    return end + contraction_at(t, b, end);
}

static void split_o200k(const text_t *t, size_t a, size_t b, emit_t *e)
{
    for (size_t pos = a; pos < b;) {
        const uint32_t c = t->cp[pos];
        const unsigned f = t->fl[pos];
        size_t end = o200k_word(t, b, pos);
        if (end > pos) {
            pos += add(e, end);
            continue;
        }
        if (IS_N(f)) {
            end = pos;
            while (end < pos + 3 && IS_N(F(end))) end++;
            pos += add(e, end);
            continue;
        }
        unsigned f2 = c == ' ' ? F(pos + 1) : f;
        if (!(f2 & (LP_UCD_WS | LP_UCD_L | LP_UCD_N)) && f2) {
            pos += c == ' ';
            while (!(f2 & (LP_UCD_WS | LP_UCD_L | LP_UCD_N)) && f2) f2 = F(++pos);
            uint32_t c2 = CP(pos);
            while (c2 == '\r' || c2 == '\n' || c2 == '/') c2 = CP(++pos);
            add(e, pos);
            continue;
        }
        size_t nws = 0, last_rn = 0;
        while (IS_WS(F(pos + nws))) {
            const uint32_t c2 = t->cp[pos + nws];
            if (c2 == '\r' || c2 == '\n') last_rn = pos + nws + 1;
            nws++;
        }
        if (last_rn > 0) pos = last_rn;
        else if (nws > 1 && pos + nws < b) pos += nws - 1;
        else pos += nws ? nws : 1;
        add(e, pos);
    }
}

/* ---- character classes of the std::regex-path regexes ----
 * For a non-ASCII code point llama.cpp's text is collapsed: whitespace
 * becomes \v (in no class below), and \p{X} matches by category. */

typedef struct range {
    uint32_t lo, hi;
} range_t;

/* deepseek-llm's letter class (cased letters), from llama-vocab.cpp */
static const range_t ds_letters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
/* [!-/:-~！-／：-～‘-‟　-。] */
static const range_t ds_punct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};
/* [一-龥ࠀ-一가-퟿] */
static const range_t cjk[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

static bool in_ranges(uint32_t c, const range_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c >= r[i].lo && c <= r[i].hi) return true;
    return false;
}

enum cls {
    CLS_N,             /* \p{N} */
    CLS_L,             /* \p{L} */
    CLS_P,             /* \p{P} */
    CLS_P_DEFAULT,     /* [\p{P}\$\+<=>\^~\|] */
    CLS_P_FALCON,      /* [\p{P}\$\+<=>\^~\|`] */
    CLS_CRLF,          /* [\r\n] */
    CLS_NL,            /* \n */
    CLS_CJK,
    CLS_DS_LETTER,
    CLS_DS_PUNCT,
};

static bool in_cls(enum cls k, uint32_t c, unsigned f)
{
    if (c >= 0x80 && (f & LP_UCD_WS)) return false;
    switch (k) {
    case CLS_N: return f & LP_UCD_N;
    case CLS_L: return f & LP_UCD_L;
    case CLS_P: return f & LP_UCD_P;
    case CLS_P_DEFAULT:
        return (f & LP_UCD_P) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
               c == '^' || c == '~' || c == '|';
    case CLS_P_FALCON:
        return in_cls(CLS_P_DEFAULT, c, f) || c == '`';
    case CLS_CRLF: return c == '\r' || c == '\n';
    case CLS_NL: return c == '\n';
    case CLS_CJK: return in_ranges(c, cjk, 3);
    case CLS_DS_LETTER: return in_ranges(c, ds_letters, sizeof(ds_letters) / sizeof(ds_letters[0]));
    case CLS_DS_PUNCT: return in_ranges(c, ds_punct, sizeof(ds_punct) / sizeof(ds_punct[0]));
    }
    return false;
}

#define IN(k, pos) ((pos) < b && in_cls((k), t->cp[pos], t->fl[pos]))

/* CLASS+ */
static void split_run(const text_t *t, size_t a, size_t b, emit_t *e, enum cls k)
{
    for (size_t pos = a; pos < b;) {
        if (!IN(k, pos)) {
            pos++;
            continue;
        }
        size_t end = pos + 1;
        while (IN(k, end)) end++;
        add(e, pos);
        add(e, end);
        pos = end;
    }
    add(e, b);
}

/* CLASS (one code point per match) */
static void split_single(const text_t *t, size_t a, size_t b, emit_t *e, enum cls k)
{
    for (size_t pos = a; pos < b; pos++) {
        if (IN(k, pos)) {
            add(e, pos);
            add(e, pos + 1);
        }
    }
    add(e, b);
}

/* \s?CLASS+ */
static void split_ws_run(const text_t *t, size_t a, size_t b, emit_t *e, enum cls k)
{
    for (size_t pos = a; pos < b;) {
        size_t s;
        if (IS_WS(t->fl[pos]) && IN(k, pos + 1)) s = pos + 1;
        else if (IN(k, pos)) s = pos;
        else {
            pos++;
            continue;
        }
        size_t end = s + 1;
        while (IN(k, end)) end++;
        add(e, pos);
        add(e, end);
        pos = end;
    }
    add(e, b);
}

/* [0-9][0-9][0-9] */
static void split_digit3(const text_t *t, size_t a, size_t b, emit_t *e)
{
#define D(p) ((p) < b && t->cp[p] >= '0' && t->cp[p] <= '9')
    for (size_t pos = a; pos < b;) {
        if (D(pos) && D(pos + 1) && D(pos + 2)) {
            add(e, pos);
            add(e, pos + 3);
            pos += 3;
        } else {
            pos++;
        }
    }
#undef D
    add(e, b);
}

/* \s+$ */
static void split_trailing_ws(const text_t *t, size_t a, size_t b, emit_t *e)
{
    size_t s = b;
    while (s > a && IS_WS(t->fl[s - 1])) s--;
    add(e, s);
    add(e, b);
}

enum step {
    S_GPT2, S_LLAMA3, S_QWEN2, S_QWEN35, S_O200K, S_RUN, S_SINGLE, S_WS_RUN, S_DIGIT3, S_TRAIL_WS,
    S_END,
};

typedef struct stepdef {
    enum step step;
    enum cls cls;
} stepdef_t;

static const stepdef_t *steps_for(enum lp__pre pre)
{
    static const stepdef_t dflt[] = {{S_RUN, CLS_P_DEFAULT}, {S_GPT2, 0}, {S_RUN, CLS_N}, {S_DIGIT3, 0}, {S_END, 0}};
    static const stepdef_t llama3[] = {{S_LLAMA3, 0}, {S_END, 0}};
    static const stepdef_t qwen2[] = {{S_QWEN2, 0}, {S_END, 0}};
    static const stepdef_t o200k[] = {{S_O200K, 0}, {S_END, 0}};
    static const stepdef_t qwen35[] = {{S_QWEN35, 0}, {S_END, 0}};
    static const stepdef_t gpt2[] = {{S_GPT2, 0}, {S_END, 0}};
    static const stepdef_t starcoder[] = {{S_SINGLE, CLS_N}, {S_GPT2, 0}, {S_END, 0}};
    static const stepdef_t falcon[] = {{S_RUN, CLS_P_FALCON}, {S_GPT2, 0}, {S_DIGIT3, 0}, {S_END, 0}};
    static const stepdef_t ds_llm[] = {
        {S_SINGLE, CLS_CRLF}, {S_WS_RUN, CLS_DS_LETTER}, {S_WS_RUN, CLS_DS_PUNCT}, {S_TRAIL_WS, 0},
        {S_RUN, CLS_CJK}, {S_RUN, CLS_N}, {S_END, 0}};
    static const stepdef_t gemma4[] = {{S_RUN, CLS_NL}, {S_END, 0}};
    static const stepdef_t ds_coder[] = {
        {S_SINGLE, CLS_CRLF}, {S_WS_RUN, CLS_L}, {S_WS_RUN, CLS_P}, {S_RUN, CLS_CJK},
        {S_SINGLE, CLS_N}, {S_END, 0}};
    switch (pre) {
    case LP__PRE_LLAMA3: case LP__PRE_DBRX: case LP__PRE_SMAUG: case LP__PRE_CHATGLM4: return llama3;
    case LP__PRE_QWEN2: case LP__PRE_STABLELM2: return qwen2;
    case LP__PRE_QWEN35: return qwen35;
    case LP__PRE_GPT2: case LP__PRE_MPT: case LP__PRE_OLMO: case LP__PRE_JAIS: return gpt2;
    case LP__PRE_STARCODER: case LP__PRE_REFACT: case LP__PRE_COMMAND_R: case LP__PRE_SMOLLM:
    case LP__PRE_CODESHELL: case LP__PRE_EXAONE: case LP__PRE_MINERVA: return starcoder;
    case LP__PRE_FALCON: return falcon;
    case LP__PRE_DEEPSEEK_LLM: return ds_llm;
    case LP__PRE_DEEPSEEK_CODER: return ds_coder;
    case LP__PRE_DEFAULT: return dflt;
    case LP__PRE_GEMMA4: return gemma4;
    case LP__PRE_GPT4O: return o200k;
    }
    return dflt;
}

static uint8_t ascii_flags[128];

/* Built before main(), so before any thread can read it. */
__attribute__((constructor)) static void build_ascii_flags(void)
{
    for (uint32_t c = 0; c < 128; c++) ascii_flags[c] = lp__ucd_flags(c);
}

int lp__pretok_split(enum lp__pre pre, const char *text, size_t len, const char **clean,
                     char **owned, size_t **starts, size_t *n_words)
{
    *owned = NULL;
    *starts = NULL;
    *n_words = 0;
    *clean = text;
    if (len == 0) {
        *starts = calloc(1, sizeof(size_t));
        return *starts ? 0 : lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
    }
    int rc = 0;
    uint32_t *cp = malloc(len * sizeof(*cp));
    uint8_t *fl = malloc(len);
    size_t *boff = malloc((len + 1) * sizeof(*boff));
    bounds_t cur = {0}, next = {0};
    char *copy = NULL;
    if (!cp || !fl || !boff) {
        rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        goto out;
    }
    /* decode; invalid bytes become U+FFFD (EF BF BD) in a cleaned copy */
    size_t n = 0, off = 0, out_off = 0;
    const uint8_t *s = (const uint8_t *)text;
    while (off < len) {
        size_t at = off;
        int32_t c;
        if (s[off] < 0x80) {
            c = s[off++];
        } else {
            c = lp__utf8_decode(s, len, &off);
        }
        if (c < 0 && !copy) {
            copy = malloc(len * 3 + 1);
            if (!copy) {
                rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
                goto out;
            }
            memcpy(copy, text, at);
            out_off = at;
        }
        if (c < 0) c = 0xFFFD;
        cp[n] = (uint32_t)c;
        fl[n] = c < 0x80 ? 0 : lp__ucd_flags((uint32_t)c);
        boff[n] = copy ? out_off : at;
        if (copy) {
            if (cp[n] == 0xFFFD && c == 0xFFFD && off - at == 1 && s[at] >= 0x80) {
                out_off += lp__utf8_encode(0xFFFD, copy + out_off);
            } else {
                memcpy(copy + out_off, text + at, off - at);
                out_off += off - at;
            }
        }
        n++;
    }
    boff[n] = copy ? out_off : len;
    /* ASCII flags from a small table (the common case) */
    for (size_t i = 0; i < n; i++)
        if (cp[i] < 0x80) fl[i] = ascii_flags[cp[i]];

    text_t t = {cp, fl};
    if ((rc = bounds_push(&cur, 0))) goto out;
    for (const stepdef_t *st = steps_for(pre); st->step != S_END; st++) {
        next.n = 0;
        for (size_t i = 0; i < cur.n && !rc; i++) {
            size_t a = cur.v[i], b = i + 1 < cur.n ? cur.v[i + 1] : n;
            emit_t e = {&next, a, 0};
            switch (st->step) {
            case S_GPT2: split_gpt2(&t, a, b, &e); break;
            case S_LLAMA3: split_llama3(&t, a, b, &e, 3, false); break;
            case S_QWEN2: split_llama3(&t, a, b, &e, 1, false); break;
            case S_QWEN35: split_llama3(&t, a, b, &e, 1, true); break;
            case S_O200K: split_o200k(&t, a, b, &e); break;
            case S_RUN: split_run(&t, a, b, &e, st->cls); break;
            case S_SINGLE: split_single(&t, a, b, &e, st->cls); break;
            case S_WS_RUN: split_ws_run(&t, a, b, &e, st->cls); break;
            case S_DIGIT3: split_digit3(&t, a, b, &e); break;
            case S_TRAIL_WS: split_trailing_ws(&t, a, b, &e); break;
            case S_END: break;
            }
            rc = e.rc;
        }
        if (rc) goto out;
        bounds_t tmp = cur;
        cur = next;
        next = tmp;
    }
    size_t *st = malloc((cur.n + 1) * sizeof(*st));
    if (!st) {
        rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        goto out;
    }
    for (size_t i = 0; i < cur.n; i++) st[i] = boff[cur.v[i]];
    st[cur.n] = boff[n];
    *starts = st;
    *n_words = cur.n;
    if (copy) {
        *owned = copy;
        *clean = copy;
        copy = NULL;
    }
out:
    free(cp);
    free(fl);
    free(boff);
    free(cur.v);
    free(next.v);
    free(copy);
    return rc;
}
