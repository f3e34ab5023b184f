/* sampling-wire.c - SamplingParams <-> lp_sampler_params_t (see sampling-wire.h). */
#include "sampling-wire.h"

#include "error.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIVEN(fieldno) (1ull << (fieldno))

/* The scalar fields: lp_sampler_params_t's bit, the message's field number,
 * and where each side keeps the value (both 4 bytes: float or int32). */
static const struct {
    enum lp_sampler_field sp;
    int fieldno;
    size_t p_off, m_off;
} scalars[] = {
#define S(name, sp, no) {sp, no, offsetof(lp_sampler_params_t, name), offsetof(Lmpipe__SamplingParams, name)}
    S(temperature, LP_SP_TEMPERATURE, 2),
    S(dynatemp_range, LP_SP_DYNATEMP_RANGE, 3),
    S(dynatemp_exponent, LP_SP_DYNATEMP_EXPONENT, 4),
    S(top_k, LP_SP_TOP_K, 5),
    S(top_p, LP_SP_TOP_P, 6),
    S(min_p, LP_SP_MIN_P, 7),
    S(typical_p, LP_SP_TYPICAL_P, 8),
    S(top_n_sigma, LP_SP_TOP_N_SIGMA, 9),
    S(repeat_penalty, LP_SP_REPEAT_PENALTY, 10),
    S(repeat_last_n, LP_SP_REPEAT_LAST_N, 11),
    S(frequency_penalty, LP_SP_FREQUENCY_PENALTY, 12),
    S(presence_penalty, LP_SP_PRESENCE_PENALTY, 13),
    S(dry_multiplier, LP_SP_DRY_MULTIPLIER, 14),
    S(dry_base, LP_SP_DRY_BASE, 15),
    S(dry_allowed_length, LP_SP_DRY_ALLOWED_LENGTH, 16),
    S(dry_penalty_last_n, LP_SP_DRY_PENALTY_LAST_N, 17),
    S(xtc_probability, LP_SP_XTC_PROBABILITY, 19),
    S(xtc_threshold, LP_SP_XTC_THRESHOLD, 20),
    S(min_keep, LP_SP_MIN_KEEP, 21),
    S(mirostat, LP_SP_MIROSTAT, 22),
    S(mirostat_tau, LP_SP_MIROSTAT_TAU, 23),
    S(mirostat_eta, LP_SP_MIROSTAT_ETA, 24),
    S(n_probs, LP_SP_N_PROBS, 26),
#undef S
};
enum { F_BREAKERS = 18, F_SEED = 25, F_SAMPLERS = 27, F_BIAS = 28, F_CONSTRAINT = 40 };
_Static_assert(sizeof(float) == sizeof(int32_t), "scalars are copied as 4 bytes");

struct lp_sampling_pb {
    Lmpipe__SamplingParams m;
    Lmpipe__LogitBias bias[LP_SAMPLER_MAX_BIAS];
    Lmpipe__LogitBias *bias_p[LP_SAMPLER_MAX_BIAS];
    Lmpipe__DryBreaker brk[LP_SAMPLER_MAX_BREAKERS];
    Lmpipe__DryBreaker *brk_p[LP_SAMPLER_MAX_BREAKERS];
    int32_t brk_ids[LP_SAMPLER_MAX_BREAKERS][LP_SAMPLER_MAX_BREAKER_LEN];
    char brk_text[LP_SAMPLER_MAX_BREAKERS][LP_SAMPLER_BREAKER_TEXT + 1];
    char steps[LP_SAMPLER_MAX_CHAIN][LP_SAMPLER_NAME_MAX + 8];
    char *steps_p[LP_SAMPLER_MAX_CHAIN];
};

int lp_sampling_pb_new(const lp_sampler_params_t *p, lp_sampling_pb_t **out)
{
    *out = NULL;
    lp_sampling_pb_t *w = calloc(1, sizeof(*w));
    if (!w) return LP_ERR(ENOMEM);
    Lmpipe__SamplingParams *m = &w->m;
    lmpipe__sampling_params__init(m);
    for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++) {
        if (!(p->set & (1ull << scalars[i].sp))) continue;
        memcpy((char *)m + scalars[i].m_off, (const char *)p + scalars[i].p_off, 4);
        m->given |= GIVEN(scalars[i].fieldno);
    }
    if (p->set & (1ull << LP_SP_SEED)) {
        m->seed = p->seed;
        m->given |= GIVEN(F_SEED);
    }
    if (p->set & (1ull << LP_SP_SAMPLERS)) {
        for (int32_t i = 0; i < p->n_steps; i++) {
            if (p->steps[i].kind == LP_SAMPLER_PLUGIN)
                snprintf(w->steps[i], sizeof(w->steps[i]), "plugin:%s", p->steps[i].plugin);
            else
                snprintf(w->steps[i], sizeof(w->steps[i]), "%s", lp_sampler_kind_name(p->steps[i].kind));
            w->steps_p[i] = w->steps[i];
        }
        m->samplers = w->steps_p;
        m->n_samplers = (size_t)p->n_steps;
        m->given |= GIVEN(F_SAMPLERS);
    }
    if (p->set & (1ull << LP_SP_LOGIT_BIAS)) {
        for (int32_t i = 0; i < p->n_bias; i++) {
            lmpipe__logit_bias__init(&w->bias[i]);
            w->bias[i].id = p->bias[i].id;
            if (isinf(p->bias[i].bias) && p->bias[i].bias < 0) w->bias[i].ban = true;
            else w->bias[i].bias = p->bias[i].bias;
            w->bias_p[i] = &w->bias[i];
        }
        m->logit_bias = w->bias_p;
        m->n_logit_bias = (size_t)p->n_bias;
        m->given |= GIVEN(F_BIAS);
    }
    if (p->set & (1ull << LP_SP_DRY_SEQUENCE_BREAKERS)) {
        size_t n = 0;
        for (int32_t i = 0; i < p->n_text_breakers; i++, n++) {
            lmpipe__dry_breaker__init(&w->brk[n]);
            memcpy(w->brk_text[n], p->text_breakers[i], (size_t)p->text_breaker_len[i]);
            w->brk[n].text.data = (uint8_t *)w->brk_text[n];
            w->brk[n].text.len = (size_t)p->text_breaker_len[i];
            w->brk_p[n] = &w->brk[n];
        }
        for (int32_t i = 0; i < p->n_breakers; i++, n++) {
            lmpipe__dry_breaker__init(&w->brk[n]);
            memcpy(w->brk_ids[n], p->breakers[i], (size_t)p->breaker_len[i] * sizeof(int32_t));
            w->brk[n].ids = w->brk_ids[n];
            w->brk[n].n_ids = (size_t)p->breaker_len[i];
            w->brk_p[n] = &w->brk[n];
        }
        m->dry_sequence_breakers = w->brk_p;
        m->n_dry_sequence_breakers = n;
        m->given |= GIVEN(F_BREAKERS);
    }
    *out = w;
    return 0;
}

int lp_sampling_pb_from_json(const char *json, lp_sampling_pb_t **out)
{
    *out = NULL;
    lp_sampler_params_t *p = malloc(sizeof(*p));
    if (!p) return LP_ERR(ENOMEM);
    lp_sampler_params_default(p);
    int rc = lp_sampler_params_parse(json, strlen(json), LP_SAMPLER_PARAMS_STRICT, p);
    if (!rc) rc = lp_sampling_pb_new(p, out);
    free(p);
    return rc;
}

Lmpipe__SamplingParams *lp_sampling_pb_msg(lp_sampling_pb_t *w) { return &w->m; }

void lp_sampling_pb_destroy(lp_sampling_pb_t **self_p)
{
    if (!self_p || !*self_p) return;
    free(*self_p);
    *self_p = NULL;
}

/* ---- reading ---------------------------------------------------------------- */

static int bad(const char *field, const char *why)
{
    return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, field, "%s: %s", field, why);
}

static int read_samplers(const Lmpipe__SamplingParams *m, lp_sampler_params_t *p)
{
    if (m->n_samplers > LP_SAMPLER_MAX_CHAIN)
        return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "samplers", "samplers: a chain of %zu steps is longer than the limit of %d",
                            m->n_samplers, LP_SAMPLER_MAX_CHAIN);
    for (size_t i = 0; i < m->n_samplers; i++) {
        const char *name = m->samplers[i] ? m->samplers[i] : "";
        if (lp_sampler_step_parse(name, strlen(name), &p->steps[i]))
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "samplers", "samplers: unknown sampler \"%.40s\" at %zu", name, i);
    }
    p->n_steps = (int32_t)m->n_samplers;
    p->set |= 1ull << LP_SP_SAMPLERS;
    return 0;
}

int lp_sampling_pb_read(const Lmpipe__SamplingParams *m, lp_sampler_params_t *p)
{
    if (!m) return lp_sampler_params_validate(p);
    for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++) {
        if (!(m->given & GIVEN(scalars[i].fieldno))) continue;
        memcpy((char *)p + scalars[i].p_off, (const char *)m + scalars[i].m_off, 4);
        p->set |= 1ull << scalars[i].sp;
    }
    if (m->given & GIVEN(F_SEED)) {
        if (m->seed < -1) return bad("seed", "must be -1 (random) or >= 0");
        p->seed = m->seed;
        p->set |= 1ull << LP_SP_SEED;
    }
    int rc;
    if ((m->given & GIVEN(F_SAMPLERS)) && (rc = read_samplers(m, p)) != 0) return rc;
    if (m->given & GIVEN(F_BIAS)) {
        if (m->n_logit_bias > LP_SAMPLER_MAX_BIAS)
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "logit_bias", "logit_bias: %zu entries exceed the limit of %d", m->n_logit_bias,
                                LP_SAMPLER_MAX_BIAS);
        for (size_t i = 0; i < m->n_logit_bias; i++) {
            p->bias[i].id = m->logit_bias[i]->id;
            p->bias[i].bias = m->logit_bias[i]->ban ? -INFINITY : m->logit_bias[i]->bias;
        }
        p->n_bias = (int32_t)m->n_logit_bias;
        p->set |= 1ull << LP_SP_LOGIT_BIAS;
    }
    if (m->given & GIVEN(F_BREAKERS)) {
        if (m->n_dry_sequence_breakers > LP_SAMPLER_MAX_BREAKERS)
            return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "dry_sequence_breakers", "dry_sequence_breakers: %zu entries exceed the limit of %d",
                                m->n_dry_sequence_breakers, LP_SAMPLER_MAX_BREAKERS);
        int32_t n_text = 0, n_ids = 0;
        for (size_t i = 0; i < m->n_dry_sequence_breakers; i++) {
            const Lmpipe__DryBreaker *b = m->dry_sequence_breakers[i];
            if (b->text.len && b->n_ids) return bad("dry_sequence_breakers", "an entry is text or ids, not both");
            if (b->text.len) {
                size_t n = lp_sampler_breaker_cut((const char *)b->text.data, b->text.len);
                memcpy(p->text_breakers[n_text], b->text.data, n);
                p->text_breakers[n_text][n] = '\0';
                p->text_breaker_len[n_text++] = (int32_t)n;
            } else {
                if (!b->n_ids || b->n_ids > LP_SAMPLER_MAX_BREAKER_LEN)
                    return lp_error_set_kind(LP_ERR(EINVAL), LP_EK_INVALID_REQUEST, "dry_sequence_breakers",
                                             "dry_sequence_breakers: entry %zu must be a string or a "
                                        "list of 1 to %d token IDs", i, LP_SAMPLER_MAX_BREAKER_LEN);
                for (size_t k = 0; k < b->n_ids; k++) {
                    if (b->ids[k] < 0) return bad("dry_sequence_breakers", "a token ID is negative");
                    p->breakers[n_ids][k] = b->ids[k];
                }
                p->breaker_len[n_ids++] = (int32_t)b->n_ids;
            }
        }
        p->n_text_breakers = n_text;
        p->n_breakers = n_ids;
        p->set |= 1ull << LP_SP_DRY_SEQUENCE_BREAKERS;
    }
    if ((m->given & GIVEN(F_CONSTRAINT)) || (m->constraint && m->constraint->kind))
        return bad("constraint", "constrained decoding is not supported by this sampler");
    return lp_sampler_params_validate(p);
}
