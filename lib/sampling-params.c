/* sampling-params.c - sampling parameters: defaults, JSON parsing, validation. */
#include "sampling-params.h"

#include "error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define BIT(f) (1ull << (f))

void lp_sampler_params_default(lp_sampler_params_t *p)
{
    /* llama.cpp common_params_sampling */
    memset(p, 0, sizeof(*p));
    p->temperature = 0.8f;
    p->dynatemp_range = 0.0f;
    p->dynatemp_exponent = 1.0f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->typical_p = 1.0f;
    p->top_n_sigma = -1.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->frequency_penalty = 0.0f;
    p->presence_penalty = 0.0f;
    p->dry_multiplier = 0.0f;
    p->dry_base = 1.75f;
    p->dry_allowed_length = 2;
    p->dry_penalty_last_n = -1;
    p->xtc_probability = 0.0f;
    p->xtc_threshold = 0.1f;
    p->min_keep = 0;
    p->mirostat = 0;
    p->mirostat_tau = 5.0f;
    p->mirostat_eta = 0.1f;
    p->seed = -1;
    p->n_probs = 0;
    static const char *const text_breakers[] = {"\n", ":", "\"", "*"};
    p->n_text_breakers = 4;
    for (int i = 0; i < 4; i++) {
        p->text_breaker_len[i] = 1;
        p->text_breakers[i][0] = text_breakers[i][0];
    }
    static const enum lp_sampler_kind order[] = {
        LP_SAMPLER_PENALTIES, LP_SAMPLER_DRY,   LP_SAMPLER_TOP_N_SIGMA,
        LP_SAMPLER_TOP_K,     LP_SAMPLER_TYPICAL_P, LP_SAMPLER_TOP_P,
        LP_SAMPLER_MIN_P,     LP_SAMPLER_XTC,   LP_SAMPLER_TEMPERATURE,
    };
    p->n_steps = (int32_t)(sizeof(order) / sizeof(order[0]));
    for (int32_t i = 0; i < p->n_steps; i++) p->steps[i].kind = order[i];
}

/* ---- sampler names -------------------------------------------------------- */

static const struct {
    const char *name;
    enum lp_sampler_kind kind;
} kind_names[] = {
    /* canonical names first (lp_sampler_kind_name), then llama.cpp's alternatives */
    {"penalties", LP_SAMPLER_PENALTIES}, {"dry", LP_SAMPLER_DRY},
    {"top_n_sigma", LP_SAMPLER_TOP_N_SIGMA}, {"top_k", LP_SAMPLER_TOP_K},
    {"typ_p", LP_SAMPLER_TYPICAL_P}, {"top_p", LP_SAMPLER_TOP_P}, {"min_p", LP_SAMPLER_MIN_P},
    {"xtc", LP_SAMPLER_XTC}, {"temperature", LP_SAMPLER_TEMPERATURE},
    {"top-n-sigma", LP_SAMPLER_TOP_N_SIGMA}, {"top-k", LP_SAMPLER_TOP_K},
    {"typical_p", LP_SAMPLER_TYPICAL_P}, {"typical-p", LP_SAMPLER_TYPICAL_P},
    {"typical", LP_SAMPLER_TYPICAL_P}, {"typ-p", LP_SAMPLER_TYPICAL_P},
    {"typ", LP_SAMPLER_TYPICAL_P}, {"top-p", LP_SAMPLER_TOP_P}, {"nucleus", LP_SAMPLER_TOP_P},
    {"min-p", LP_SAMPLER_MIN_P}, {"temp", LP_SAMPLER_TEMPERATURE},
};

const char *lp_sampler_kind_name(enum lp_sampler_kind k)
{
    if (k == LP_SAMPLER_PLUGIN) return "plugin";
    for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
        if (kind_names[i].kind == k) return kind_names[i].name;
    return "?";
}

/* A plugin name: [a-z0-9_-]+, shorter than LP_SAMPLER_NAME_MAX. */
static bool plugin_name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= LP_SAMPLER_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

int lp_sampler_step_parse(const char *s, size_t n, lp_sampler_step_t *st)
{
    memset(st, 0, sizeof(*st));
    for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++)
        if (strlen(kind_names[i].name) == n && !memcmp(kind_names[i].name, s, n)) {
            st->kind = kind_names[i].kind;
            return 0;
        }
    /* "plugin:NAME" names a loaded plugin's step */
    if (n > 7 && !memcmp(s, "plugin:", 7) && plugin_name_ok(s + 7, n - 7)) {
        st->kind = LP_SAMPLER_PLUGIN;
        memcpy(st->plugin, s + 7, n - 7);
        return 0;
    }
    return LP_ERR(EINVAL);
}

static int step_from_char(char c, lp_sampler_step_t *st)
{
    static const char chars[] = "ekpmtxyds";
    static const enum lp_sampler_kind kinds[] = {
        LP_SAMPLER_PENALTIES, LP_SAMPLER_TOP_K, LP_SAMPLER_TOP_P, LP_SAMPLER_MIN_P,
        LP_SAMPLER_TEMPERATURE, LP_SAMPLER_XTC, LP_SAMPLER_TYPICAL_P, LP_SAMPLER_DRY,
        LP_SAMPLER_TOP_N_SIGMA,
    };
    const char *at = c ? strchr(chars, c) : NULL;
    if (!at) return LP_ERR(EINVAL);
    memset(st, 0, sizeof(*st));
    st->kind = kinds[at - chars];
    return 0;
}

/* ---- parsing -------------------------------------------------------------- */

static int bad(const char *field, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const char *field, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, field, "%s: %s", field, msg);
}

static int get_float(const lp_json_t *v, const char *field, float *out)
{
    if (v->type != LP_JSON_NUMBER)
        return bad(field, "must be a number, got %s", lp_json_type_name(v->type));
    double d = v->u.num;
    if (!isfinite((float)d)) return bad(field, "%g is out of range for a float", d);
    *out = (float)d;
    return 0;
}

static int get_int(const lp_json_t *v, const char *field, int64_t lo, int64_t hi, int64_t *out)
{
    if (v->type != LP_JSON_NUMBER)
        return bad(field, "must be an integer, got %s", lp_json_type_name(v->type));
    if (lp_json_int(v, lo, hi, out)) {
        if (v->u.num != floor(v->u.num)) return bad(field, "must be an integer, got %g", v->u.num);
        return bad(field, "must be in [%lld, %lld], got %g", (long long)lo, (long long)hi,
                   v->u.num);
    }
    return 0;
}

static int parse_samplers(const lp_json_t *v, lp_sampler_params_t *p)
{
    lp_sampler_step_t steps[LP_SAMPLER_MAX_CHAIN];
    size_t n;
    if (v->type == LP_JSON_STRING) {
        /* llama.cpp's short form: one letter per sampler, "kypmt" */
        n = v->n;
        if (n > LP_SAMPLER_MAX_CHAIN)
            return bad("samplers", "a chain of %zu steps is longer than the limit of %d", n,
                       LP_SAMPLER_MAX_CHAIN);
        for (size_t i = 0; i < n; i++)
            if (step_from_char(v->u.str[i], &steps[i]))
                return bad("samplers", "unknown sampler letter '%c' at %zu (known: "
                                       "e k p m t x y d s)", v->u.str[i], i);
    } else if (v->type == LP_JSON_ARRAY) {
        n = v->n;
        if (n > LP_SAMPLER_MAX_CHAIN)
            return bad("samplers", "a chain of %zu steps is longer than the limit of %d", n,
                       LP_SAMPLER_MAX_CHAIN);
        for (size_t i = 0; i < n; i++) {
            const lp_json_t *e = &v->u.items[i];
            if (e->type != LP_JSON_STRING)
                return bad("samplers", "entry %zu must be a string, got %s", i,
                           lp_json_type_name(e->type));
            if (lp_sampler_step_parse(e->u.str, e->n, &steps[i]))
                return bad("samplers",
                           "unknown sampler \"%.40s\" at %zu (known: penalties, dry, "
                           "top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature, "
                           "plugin:NAME)", e->u.str, i);
        }
    } else
        return bad("samplers", "must be a list of names or a string of letters, got %s",
                   lp_json_type_name(v->type));
    p->n_steps = (int32_t)n;
    memcpy(p->steps, steps, n * sizeof(steps[0]));
    return 0;
}

static int parse_bias_value(const lp_json_t *v, size_t i, float *out)
{
    if (v->type == LP_JSON_BOOL) {
        if (v->u.b)
            return bad("logit_bias", "entry %zu: a bias of true means nothing; use a number "
                                     "or false (never sample)", i);
        *out = -INFINITY;
        return 0;
    }
    if (v->type != LP_JSON_NUMBER)
        return bad("logit_bias", "entry %zu: the bias must be a number or false, got %s", i,
                   lp_json_type_name(v->type));
    if (!isfinite((float)v->u.num))
        return bad("logit_bias", "entry %zu: bias %g is out of range", i, v->u.num);
    *out = (float)v->u.num;
    return 0;
}

static int parse_id_text(const char *s, size_t n, int32_t *out)
{
    if (n == 0 || n > 10) return LP_ERR(EINVAL);
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return LP_ERR(EINVAL);
        v = v * 10 + (s[i] - '0');
    }
    if (v > INT32_MAX) return LP_ERR(EINVAL);
    *out = (int32_t)v;
    return 0;
}

static int parse_logit_bias(const lp_json_t *v, lp_sampler_params_t *p)
{
    if (v->type != LP_JSON_ARRAY && v->type != LP_JSON_OBJECT)
        return bad("logit_bias", "must be [[id, bias], ...] or {\"id\": bias}, got %s",
                   lp_json_type_name(v->type));
    if (v->n > LP_SAMPLER_MAX_BIAS)
        return bad("logit_bias", "%zu entries exceed the limit of %d", v->n, LP_SAMPLER_MAX_BIAS);
    p->n_bias = 0;
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *e = &v->u.items[i];
        int32_t id;
        float b;
        int rc;
        if (v->type == LP_JSON_OBJECT) {
            if (parse_id_text(e->key, e->key_len, &id))
                return bad("logit_bias", "key \"%.40s\" is not a token ID (token text needs "
                                         "the tokenizer; give IDs)", e->key);
            if ((rc = parse_bias_value(e, i, &b))) return rc;
        } else {
            if (e->type != LP_JSON_ARRAY || e->n != 2)
                return bad("logit_bias", "entry %zu must be [id, bias]", i);
            const lp_json_t *jid = &e->u.items[0];
            if (jid->type == LP_JSON_STRING)
                return bad("logit_bias", "entry %zu: token text needs the tokenizer; give IDs", i);
            int64_t v64;
            if (jid->type != LP_JSON_NUMBER || lp_json_int(jid, 0, INT32_MAX, &v64))
                return bad("logit_bias", "entry %zu: the token ID must be an integer >= 0", i);
            id = (int32_t)v64;
            if ((rc = parse_bias_value(&e->u.items[1], i, &b))) return rc;
        }
        p->bias[p->n_bias].id = id;
        p->bias[p->n_bias].bias = b;
        p->n_bias++;
    }
    return 0;
}

/* Strings (llama.cpp's form, resolved against the vocabulary) and lists of
 * token IDs (lmpipe's form, used as they are). */
static int parse_breakers(const lp_json_t *v, lp_sampler_params_t *p)
{
    if (v->type != LP_JSON_ARRAY)
        return bad("dry_sequence_breakers", "must be a list of strings or token ID lists, got %s",
                   lp_json_type_name(v->type));
    if (v->n > LP_SAMPLER_MAX_BREAKERS)
        return bad("dry_sequence_breakers", "%zu entries exceed the limit of %d", v->n,
                   LP_SAMPLER_MAX_BREAKERS);
    int32_t n_ids = 0, n_text = 0;
    for (size_t i = 0; i < v->n; i++) {
        const lp_json_t *e = &v->u.items[i];
        if (e->type == LP_JSON_STRING) {
            if (e->n == 0) continue; /* llama.cpp skips empty breakers */
            size_t n = lp_sampler_breaker_cut(e->u.str, e->n);
            memcpy(p->text_breakers[n_text], e->u.str, n);
            p->text_breakers[n_text][n] = '\0';
            p->text_breaker_len[n_text++] = (int32_t)n;
            continue;
        }
        if (e->type != LP_JSON_ARRAY || e->n == 0 || e->n > LP_SAMPLER_MAX_BREAKER_LEN)
            return bad("dry_sequence_breakers", "entry %zu must be a string or a list of 1 to %d "
                       "token IDs", i, LP_SAMPLER_MAX_BREAKER_LEN);
        for (size_t k = 0; k < e->n; k++) {
            int64_t id;
            if (lp_json_int(&e->u.items[k], 0, INT32_MAX, &id))
                return bad("dry_sequence_breakers", "entry %zu: item %zu is not a token ID", i, k);
            p->breakers[n_ids][k] = (int32_t)id;
        }
        p->breaker_len[n_ids++] = (int32_t)e->n;
    }
    p->n_breakers = n_ids;
    p->n_text_breakers = n_text;
    return 0;
}

enum ftype { F_FLOAT, F_INT };
static const struct {
    const char *name;
    enum lp_sampler_field field;
    enum ftype type;
    size_t off;
} simple_fields[] = {
#define FF(n, f) {#n, f, F_FLOAT, offsetof(lp_sampler_params_t, n)}
#define FI(n, f) {#n, f, F_INT, offsetof(lp_sampler_params_t, n)}
    FF(temperature, LP_SP_TEMPERATURE), FF(dynatemp_range, LP_SP_DYNATEMP_RANGE),
    FF(dynatemp_exponent, LP_SP_DYNATEMP_EXPONENT), FI(top_k, LP_SP_TOP_K),
    FF(top_p, LP_SP_TOP_P), FF(min_p, LP_SP_MIN_P), FF(typical_p, LP_SP_TYPICAL_P),
    FF(top_n_sigma, LP_SP_TOP_N_SIGMA), FF(repeat_penalty, LP_SP_REPEAT_PENALTY),
    FI(repeat_last_n, LP_SP_REPEAT_LAST_N), FF(frequency_penalty, LP_SP_FREQUENCY_PENALTY),
    FF(presence_penalty, LP_SP_PRESENCE_PENALTY), FF(dry_multiplier, LP_SP_DRY_MULTIPLIER),
    FF(dry_base, LP_SP_DRY_BASE), FI(dry_allowed_length, LP_SP_DRY_ALLOWED_LENGTH),
    FI(dry_penalty_last_n, LP_SP_DRY_PENALTY_LAST_N),
    FF(xtc_probability, LP_SP_XTC_PROBABILITY), FF(xtc_threshold, LP_SP_XTC_THRESHOLD),
    FI(min_keep, LP_SP_MIN_KEEP), FI(mirostat, LP_SP_MIROSTAT),
    FF(mirostat_tau, LP_SP_MIROSTAT_TAU), FF(mirostat_eta, LP_SP_MIROSTAT_ETA),
    FI(n_probs, LP_SP_N_PROBS),
#undef FF
#undef FI
};

size_t lp_sampler_breaker_cut(const char *s, size_t n)
{
    if (n <= LP_SAMPLER_BREAKER_TEXT) return n;
    /* back to the start of the character that crosses the limit, so that
     * the text kept is whole UTF-8 characters (and writes back as JSON) */
    size_t k = LP_SAMPLER_BREAKER_TEXT;
    while (k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80) k--;
    return k;
}

int lp_sampler_params_read_field(const char *name, const lp_json_t *v, lp_sampler_params_t *p)
{
    int rc;
    for (size_t f = 0; f < sizeof(simple_fields) / sizeof(simple_fields[0]); f++) {
        if (strcmp(name, simple_fields[f].name)) continue;
        void *dst = (char *)p + simple_fields[f].off;
        if (simple_fields[f].type == F_FLOAT) {
            rc = get_float(v, name, (float *)dst);
        } else {
            int64_t x;
            rc = get_int(v, name, INT32_MIN, INT32_MAX, &x);
            if (!rc) *(int32_t *)dst = (int32_t)x;
        }
        if (rc) return rc;
        p->set |= BIT(simple_fields[f].field);
        return 1;
    }
    if (!strcmp(name, "seed")) {
        int64_t x;
        if ((rc = get_int(v, name, -1, (int64_t)1 << 53, &x))) return rc;
        /* llama.cpp: 0xFFFFFFFF (LLAMA_DEFAULT_SEED) also means random */
        p->seed = x == 0xFFFFFFFFll ? -1 : x;
        p->set |= BIT(LP_SP_SEED);
    } else if (!strcmp(name, "samplers")) {
        if ((rc = parse_samplers(v, p))) return rc;
        p->set |= BIT(LP_SP_SAMPLERS);
    } else if (!strcmp(name, "logit_bias")) {
        if ((rc = parse_logit_bias(v, p))) return rc;
        p->set |= BIT(LP_SP_LOGIT_BIAS);
    } else if (!strcmp(name, "dry_sequence_breakers")) {
        if ((rc = parse_breakers(v, p))) return rc;
        p->set |= BIT(LP_SP_DRY_SEQUENCE_BREAKERS);
    } else
        return 0;
    return 1;
}

int lp_sampler_params_from_json(const lp_json_t *obj, unsigned flags, lp_sampler_params_t *p)
{
    if (!obj || obj->type != LP_JSON_OBJECT)
        return lp_error_set(LP_ERR(EINVAL), "sampling parameters must be a JSON object, got %s",
                            obj ? lp_json_type_name(obj->type) : "nothing");
    for (size_t i = 0; i < obj->n; i++) {
        const lp_json_t *v = &obj->u.items[i];
        int rc = lp_sampler_params_read_field(v->key, v, p);
        if (rc < 0) return rc;
        if (rc == 0 && (flags & LP_SAMPLER_PARAMS_STRICT))
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, v->key, "%.60s: not a sampling parameter",
                                     v->key);
    }
    return lp_sampler_params_validate(p);
}

int lp_sampler_params_parse(const char *json, size_t len, unsigned flags, lp_sampler_params_t *p)
{
    lp_json_doc_t *doc;
    int rc = lp_json_parse(json, len, &doc);
    if (rc) return rc;
    rc = lp_sampler_params_from_json(lp_json_root(doc), flags, p);
    lp_json_doc_destroy(&doc);
    return rc;
}

/* ---- validation -------------------------------------------------------------- */

#define CHECK_FINITE(f)                                                      \
    do {                                                                     \
        if (!isfinite(p->f)) return bad(#f, "must be a finite number");      \
    } while (0)
#define CHECK_RANGE(f, lo, hi)                                                            \
    do {                                                                                  \
        CHECK_FINITE(f);                                                                  \
        if (p->f < (lo) || p->f > (hi))                                                   \
            return bad(#f, "must be in [%g, %g], got %g", (double)(lo), (double)(hi),     \
                       (double)p->f);                                                     \
    } while (0)

int lp_sampler_params_validate(const lp_sampler_params_t *p)
{
    CHECK_FINITE(temperature);
    CHECK_RANGE(dynatemp_range, 0.0f, 1e6f);
    CHECK_RANGE(dynatemp_exponent, 0.0f, 1e6f);
    if (p->top_k < 0) return bad("top_k", "must be >= 0 (0 turns it off), got %d", p->top_k);
    CHECK_RANGE(top_p, 0.0f, 1.0f);
    CHECK_RANGE(min_p, 0.0f, 1.0f);
    CHECK_RANGE(typical_p, 0.0f, 1.0f);
    CHECK_FINITE(top_n_sigma);
    CHECK_FINITE(repeat_penalty);
    if (p->repeat_penalty <= 0.0f)
        return bad("repeat_penalty", "must be > 0 (1 turns it off), got %g",
                   (double)p->repeat_penalty);
    if (p->repeat_last_n < -1 || p->repeat_last_n > LP_SAMPLER_HISTORY_MAX)
        return bad("repeat_last_n", "must be in [-1, %d], got %d", LP_SAMPLER_HISTORY_MAX,
                   p->repeat_last_n);
    /* llama.cpp takes any value; this bound keeps count * penalty finite
     * (OpenAI's [-2, 2] is the request schema's, on the /v1 endpoints) */
    CHECK_RANGE(frequency_penalty, -1e6f, 1e6f);
    CHECK_RANGE(presence_penalty, -1e6f, 1e6f);
    CHECK_RANGE(dry_multiplier, 0.0f, 1e6f);
    CHECK_RANGE(dry_base, 0.0f, 1e6f);
    if (p->dry_allowed_length < 0 || p->dry_allowed_length > LP_SAMPLER_HISTORY_MAX)
        return bad("dry_allowed_length", "must be in [0, %d], got %d", LP_SAMPLER_HISTORY_MAX,
                   p->dry_allowed_length);
    if (p->dry_penalty_last_n < -1 || p->dry_penalty_last_n > LP_SAMPLER_HISTORY_MAX)
        return bad("dry_penalty_last_n", "must be in [-1, %d], got %d", LP_SAMPLER_HISTORY_MAX,
                   p->dry_penalty_last_n);
    CHECK_RANGE(xtc_probability, 0.0f, 1.0f);
    CHECK_RANGE(xtc_threshold, 0.0f, 1.0f);
    if (p->min_keep < 0 || p->min_keep > 100000)
        return bad("min_keep", "must be in [0, 100000], got %d", p->min_keep);
    if (p->mirostat < 0 || p->mirostat > 2)
        return bad("mirostat", "must be 0 (off), 1 or 2, got %d", p->mirostat);
    CHECK_RANGE(mirostat_tau, 0.0f, 1e6f);
    CHECK_RANGE(mirostat_eta, 0.0f, 1e6f);
    if (p->seed < -1) return bad("seed", "must be -1 (random) or >= 0");
    if (p->n_probs < 0 || p->n_probs > LP_SAMPLER_MAX_N_PROBS)
        return bad("n_probs", "must be in [0, %d], got %d", LP_SAMPLER_MAX_N_PROBS, p->n_probs);
    if (p->n_steps < 0 || p->n_steps > LP_SAMPLER_MAX_CHAIN)
        return bad("samplers", "a chain of %d steps is longer than the limit of %d", p->n_steps,
                   LP_SAMPLER_MAX_CHAIN);
    for (int32_t i = 0; i < p->n_steps; i++) {
        if ((unsigned)p->steps[i].kind > LP_SAMPLER_PLUGIN)
            return bad("samplers", "entry %d is not a known sampler", i);
        if (p->steps[i].kind == LP_SAMPLER_PLUGIN &&
            !plugin_name_ok(p->steps[i].plugin, strnlen(p->steps[i].plugin, LP_SAMPLER_NAME_MAX)))
            return bad("samplers", "entry %d: bad plugin name", i);
    }
    if (p->n_bias < 0 || p->n_bias > LP_SAMPLER_MAX_BIAS)
        return bad("logit_bias", "%d entries exceed the limit of %d", p->n_bias,
                   LP_SAMPLER_MAX_BIAS);
    for (int32_t i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id < 0) return bad("logit_bias", "entry %d: negative token ID", i);
        if (isnan(p->bias[i].bias) || p->bias[i].bias == INFINITY)
            return bad("logit_bias", "entry %d: bias must be a number or -infinity", i);
    }
    if (p->n_breakers < 0 || p->n_breakers > LP_SAMPLER_MAX_BREAKERS)
        return bad("dry_sequence_breakers", "too many entries");
    for (int32_t i = 0; i < p->n_breakers; i++)
        if (p->breaker_len[i] < 1 || p->breaker_len[i] > LP_SAMPLER_MAX_BREAKER_LEN)
            return bad("dry_sequence_breakers", "entry %d has a bad length", i);
    if (p->n_text_breakers < 0 || p->n_text_breakers > LP_SAMPLER_MAX_BREAKERS ||
        p->n_breakers + p->n_text_breakers > LP_SAMPLER_MAX_BREAKERS)
        return bad("dry_sequence_breakers", "too many entries");
    for (int32_t i = 0; i < p->n_text_breakers; i++)
        if (p->text_breaker_len[i] < 1 || p->text_breaker_len[i] > LP_SAMPLER_BREAKER_TEXT)
            return bad("dry_sequence_breakers", "text entry %d has a bad length", i);
    return 0;
}

/* ---- overlay and output --------------------------------------------------------- */

void lp_sampler_params_overlay(lp_sampler_params_t *dst, const lp_sampler_params_t *src)
{
    for (size_t f = 0; f < sizeof(simple_fields) / sizeof(simple_fields[0]); f++)
        if (src->set & BIT(simple_fields[f].field))
            memcpy((char *)dst + simple_fields[f].off, (const char *)src + simple_fields[f].off, 4);
    if (src->set & BIT(LP_SP_SEED)) dst->seed = src->seed;
    if (src->set & BIT(LP_SP_SAMPLERS)) {
        dst->n_steps = src->n_steps;
        memcpy(dst->steps, src->steps, sizeof(src->steps));
    }
    if (src->set & BIT(LP_SP_LOGIT_BIAS)) {
        dst->n_bias = src->n_bias;
        memcpy(dst->bias, src->bias, (size_t)src->n_bias * sizeof(src->bias[0]));
    }
    if (src->set & BIT(LP_SP_DRY_SEQUENCE_BREAKERS)) {
        dst->n_breakers = src->n_breakers;
        memcpy(dst->breaker_len, src->breaker_len, sizeof(src->breaker_len));
        memcpy(dst->breakers, src->breakers, sizeof(src->breakers));
        dst->n_text_breakers = src->n_text_breakers;
        memcpy(dst->text_breaker_len, src->text_breaker_len, sizeof(src->text_breaker_len));
        memcpy(dst->text_breakers, src->text_breakers, sizeof(src->text_breakers));
    }
    dst->set |= src->set;
}

/* The fields whose bit is in `mask`, in the order of simple_fields and
 * then seed, samplers, logit_bias, dry_sequence_breakers. */
static void to_json(const lp_sampler_params_t *p, uint64_t mask, lp_json_buf_t *o)
{
    const char *sep = "";
    lp_json_buf_puts(o, "{");
    for (size_t f = 0; f < sizeof(simple_fields) / sizeof(simple_fields[0]); f++) {
        if (!(mask & BIT(simple_fields[f].field))) continue;
        const void *src = (const char *)p + simple_fields[f].off;
        lp_json_buf_printf(o, "%s\"%s\":", sep, simple_fields[f].name);
        if (simple_fields[f].type == F_FLOAT) lp_json_buf_float(o, *(const float *)src);
        else lp_json_buf_printf(o, "%d", *(const int32_t *)src);
        sep = ",";
    }
    if (mask & BIT(LP_SP_SEED)) {
        lp_json_buf_printf(o, "%s\"seed\":%lld", sep, (long long)p->seed);
        sep = ",";
    }
    if (mask & BIT(LP_SP_SAMPLERS)) {
        lp_json_buf_printf(o, "%s\"samplers\":[", sep);
        for (int32_t i = 0; i < p->n_steps; i++) {
            if (p->steps[i].kind == LP_SAMPLER_PLUGIN)
                lp_json_buf_printf(o, "%s\"plugin:%s\"", i ? "," : "", p->steps[i].plugin);
            else
                lp_json_buf_printf(o, "%s\"%s\"", i ? "," : "", lp_sampler_kind_name(p->steps[i].kind));
        }
        lp_json_buf_puts(o, "]");
        sep = ",";
    }
    if (mask & BIT(LP_SP_LOGIT_BIAS)) {
        lp_json_buf_printf(o, "%s\"logit_bias\":[", sep);
        for (int32_t i = 0; i < p->n_bias; i++) {
            lp_json_buf_printf(o, "%s[%d,", i ? "," : "", p->bias[i].id);
            if (isinf(p->bias[i].bias)) lp_json_buf_puts(o, "false");
            else lp_json_buf_float(o, p->bias[i].bias);
            lp_json_buf_puts(o, "]");
        }
        lp_json_buf_puts(o, "]");
        sep = ",";
    }
    if (mask & BIT(LP_SP_DRY_SEQUENCE_BREAKERS)) {
        lp_json_buf_printf(o, "%s\"dry_sequence_breakers\":[", sep);
        for (int32_t i = 0; i < p->n_text_breakers; i++) {
            if (i) lp_json_buf_puts(o, ",");
            lp_json_buf_str(o, p->text_breakers[i], (size_t)p->text_breaker_len[i]);
        }
        for (int32_t i = 0; i < p->n_breakers; i++) {
            lp_json_buf_puts(o, i || p->n_text_breakers ? ",[" : "[");
            for (int32_t k = 0; k < p->breaker_len[i]; k++)
                lp_json_buf_printf(o, "%s%d", k ? "," : "", p->breakers[i][k]);
            lp_json_buf_puts(o, "]");
        }
        lp_json_buf_puts(o, "]");
    }
    lp_json_buf_puts(o, "}");
}

void lp_sampler_params_write_json(const lp_sampler_params_t *p, bool given_only, lp_json_buf_t *out)
{
    to_json(p, given_only ? p->set : BIT(LP_SP_COUNT) - 1, out);
}

/* snprintf-like copies of the text */
static size_t to_text(const lp_sampler_params_t *p, uint64_t mask, char *buf, size_t cap)
{
    lp_json_buf_t o = {0};
    to_json(p, mask, &o);
    size_t n = o.oom ? 0 : o.n;
    if (cap) {
        size_t k = n < cap ? n : cap - 1;
        if (k) memcpy(buf, o.p, k);
        buf[k] = '\0';
    }
    lp_json_buf_free(&o);
    return n;
}

size_t lp_sampler_params_to_json(const lp_sampler_params_t *p, char *buf, size_t cap)
{
    return to_text(p, BIT(LP_SP_COUNT) - 1, buf, cap);
}

size_t lp_sampler_params_given_to_json(const lp_sampler_params_t *p, char *buf, size_t cap)
{
    return to_text(p, p->set, buf, cap);
}
