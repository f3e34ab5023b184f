/* chain.c - the sampler interface, the chain, plugin steps, and building
 * a chain from parameters (llama.cpp's common_sampler_init order). */
#include "breakers.h"
#include "cands-impl.h"

#include "error.h"
#include "plugin-watch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- interface wrappers ------------------------------------------------------- */

lp_sampler_t *lp_sampler_new(const lp_sampler_i *iface, void *ctx)
{
    lp_sampler_t *s = malloc(sizeof(*s));
    if (!s) return NULL;
    s->iface = iface;
    s->ctx = ctx;
    return s;
}

const char *lp_sampler_name(const lp_sampler_t *s)
{
    return s && s->iface ? s->iface->name(s) : "(null)";
}

void lp_sampler_accept(lp_sampler_t *s, int32_t token)
{
    if (s->iface->accept) s->iface->accept(s, token);
}

int lp_sampler_apply(lp_sampler_t *s, lp_cands_t *c)
{
    return s->iface->apply(s, c);
}

void lp_sampler_reset(lp_sampler_t *s)
{
    if (s->iface->reset) s->iface->reset(s);
}

lp_sampler_t *lp_sampler_clone(const lp_sampler_t *s)
{
    if (s->iface->clone) return s->iface->clone(s);
    if (!s->ctx) return lp_sampler_new(s->iface, NULL);
    lp_error_set(LP_ERR(ENOTSUP), "sampler %s cannot be cloned", lp_sampler_name(s));
    return NULL;
}

void lp_sampler_destroy(lp_sampler_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_sampler_t *s = *self_p;
    if (s->iface->free) s->iface->free(s);
    free(s);
    *self_p = NULL;
}

/* ---- chain ---------------------------------------------------------------------- */

typedef struct chain {
    lp_sampler_t *items[LP_SAMPLER_MAX_CHAIN + 4]; /* + bias, final choice, spare */
    int32_t n;
} chain_t;

static const char *chain_name(const lp_sampler_t *s)
{
    (void)s;
    return "chain";
}

static void chain_accept(lp_sampler_t *s, int32_t token)
{
    chain_t *ch = s->ctx;
    for (int32_t i = 0; i < ch->n; i++) lp_sampler_accept(ch->items[i], token);
}

static int chain_apply(lp_sampler_t *s, lp_cands_t *c)
{
    chain_t *ch = s->ctx;
    for (int32_t i = 0; i < ch->n; i++) {
        int rc = lp_sampler_apply(ch->items[i], c);
        if (rc) return rc;
    }
    return 0;
}

static void chain_reset(lp_sampler_t *s)
{
    chain_t *ch = s->ctx;
    for (int32_t i = 0; i < ch->n; i++) lp_sampler_reset(ch->items[i]);
}

static void chain_free(lp_sampler_t *s)
{
    chain_t *ch = s->ctx;
    for (int32_t i = 0; i < ch->n; i++) lp_sampler_destroy(&ch->items[i]);
    free(ch);
}

static lp_sampler_t *chain_clone(const lp_sampler_t *s);

static const lp_sampler_i chain_i = {
    .name = chain_name,
    .accept = chain_accept,
    .apply = chain_apply,
    .reset = chain_reset,
    .clone = chain_clone,
    .free = chain_free,
};

lp_sampler_t *lp_sampler_chain_new(void)
{
    chain_t *ch = calloc(1, sizeof(*ch));
    if (!ch) return NULL;
    lp_sampler_t *s = lp_sampler_new(&chain_i, ch);
    if (!s) free(ch);
    return s;
}

bool lp_sampler_chain_get_mu(lp_sampler_t *chain, float *mu)
{
    if (chain->iface != &chain_i) return false;
    chain_t *ch = chain->ctx;
    for (int32_t i = 0; i < ch->n; i++) {
        float *m = lp__sampler_mu(ch->items[i]);
        if (m) {
            *mu = *m;
            return true;
        }
    }
    return false;
}

bool lp_sampler_chain_set_mu(lp_sampler_t *chain, float mu)
{
    if (chain->iface != &chain_i) return false;
    chain_t *ch = chain->ctx;
    for (int32_t i = 0; i < ch->n; i++) {
        float *m = lp__sampler_mu(ch->items[i]);
        if (m) {
            *m = mu;
            return true;
        }
    }
    return false;
}

static lp_sampler_t *chain_clone(const lp_sampler_t *s)
{
    const chain_t *ch = s->ctx;
    lp_sampler_t *out = lp_sampler_chain_new();
    if (!out) return NULL;
    for (int32_t i = 0; i < ch->n; i++) {
        lp_sampler_t *c = lp_sampler_clone(ch->items[i]);
        if (!c || lp_sampler_chain_add(out, c)) {
            lp_sampler_destroy(&out);
            return NULL;
        }
    }
    return out;
}

int lp_sampler_chain_add(lp_sampler_t *chain, lp_sampler_t *s)
{
    chain_t *ch = chain->ctx;
    if (!s) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory");
    if (ch->n >= (int32_t)(sizeof(ch->items) / sizeof(ch->items[0]))) {
        lp_sampler_destroy(&s);
        return lp_error_set(LP_ERR(E2BIG), "samplers: chain is longer than the limit of %d",
                            LP_SAMPLER_MAX_CHAIN);
    }
    ch->items[ch->n++] = s;
    return 0;
}

int32_t lp_sampler_chain_n(const lp_sampler_t *chain)
{
    return ((const chain_t *)chain->ctx)->n;
}

lp_sampler_t *lp_sampler_chain_get(const lp_sampler_t *chain, int32_t i)
{
    const chain_t *ch = chain->ctx;
    return i >= 0 && i < ch->n ? ch->items[i] : NULL;
}

/* ---- plugin step ------------------------------------------------------------------ */

typedef struct plugin_step {
    const lp_sampler_plugin_t *desc; /* borrowed: the store keeps the library loaded */
    char *config;
    void *pctx;
} plugin_step_t;

static const char *plugin_name(const lp_sampler_t *s)
{
    return ((const plugin_step_t *)s->ctx)->desc->name;
}

static void plugin_accept(lp_sampler_t *s, int32_t token)
{
    plugin_step_t *ps = s->ctx;
    if (!ps->desc->accept) return;
    lp_plugin_watch_enter(ps->desc->name, "accept");
    ps->desc->accept(ps->pctx, token);
    lp_plugin_watch_leave();
}

static int plugin_apply(lp_sampler_t *s, lp_cands_t *c)
{
    plugin_step_t *ps = s->ctx;
    int rc = lp_cands_materialize(c);
    if (rc) return rc;
    size_t before = c->arr.size;
    lp_token_data_t *data = c->arr.data;
    lp_plugin_watch_enter(ps->desc->name, "apply");
    ps->desc->apply(ps->pctx, &c->arr);
    lp_plugin_watch_leave();
    /* A plugin may drop, reorder and lower; it must not grow the list or move it. */
    if (c->arr.data != data || c->arr.size > before)
        return lp_error_set(LP_ERR(EPROTO), "plugin %s: apply grew or moved the candidate list",
                            ps->desc->name);
    c->arr.selected = -1;
    return 0;
}

static void plugin_reset(lp_sampler_t *s)
{
    plugin_step_t *ps = s->ctx;
    if (!ps->desc->reset) return;
    lp_plugin_watch_enter(ps->desc->name, "reset");
    ps->desc->reset(ps->pctx);
    lp_plugin_watch_leave();
}

static void plugin_free(lp_sampler_t *s)
{
    plugin_step_t *ps = s->ctx;
    if (ps->desc->free && ps->pctx) {
        lp_plugin_watch_enter(ps->desc->name, "free");
        ps->desc->free(ps->pctx);
        lp_plugin_watch_leave();
    }
    free(ps->config);
    free(ps);
}

static lp_sampler_t *plugin_clone(const lp_sampler_t *s);

static const lp_sampler_i plugin_i = {
    .name = plugin_name,
    .accept = plugin_accept,
    .apply = plugin_apply,
    .reset = plugin_reset,
    .clone = plugin_clone,
    .free = plugin_free,
};

static lp_sampler_t *plugin_wrap(const lp_sampler_plugin_t *desc, const char *config, void *pctx)
{
    plugin_step_t *ps = calloc(1, sizeof(*ps));
    char *cfg = strdup(config ? config : "");
    lp_sampler_t *s = ps && cfg ? lp_sampler_new(&plugin_i, ps) : NULL;
    if (!s) {
        free(ps);
        free(cfg);
        if (pctx && desc->free) desc->free(pctx);
        lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory");
        return NULL;
    }
    ps->desc = desc;
    ps->config = cfg;
    ps->pctx = pctx;
    return s;
}

static lp_sampler_t *plugin_clone(const lp_sampler_t *s)
{
    const plugin_step_t *ps = s->ctx;
    void *pctx = NULL;
    if (ps->pctx) {
        if (!ps->desc->clone) {
            lp_error_set(LP_ERR(ENOTSUP), "plugin %s has no clone", ps->desc->name);
            return NULL;
        }
        lp_plugin_watch_enter(ps->desc->name, "clone");
        pctx = ps->desc->clone(ps->pctx);
        lp_plugin_watch_leave();
        if (!pctx) {
            lp_error_set(LP_ERR(EINVAL), "plugin %s: clone failed", ps->desc->name);
            return NULL;
        }
    }
    return plugin_wrap(ps->desc, ps->config, pctx);
}

lp_sampler_t *lp_sampler_plugin_step_new(const lp_sampler_plugin_t *desc, const char *config)
{
    void *pctx = NULL;
    if (desc->init) {
        lp_plugin_watch_enter(desc->name, "init");
        pctx = desc->init(config ? config : "");
        lp_plugin_watch_leave();
    }
    if (desc->init && !pctx) {
        lp_error_set(LP_ERR(EINVAL), "plugin %s: init refused its configuration \"%.80s\"",
                     desc->name, config ? config : "");
        return NULL;
    }
    return plugin_wrap(desc, config, pctx);
}

/* ---- build ------------------------------------------------------------------------- */

static int add(lp_sampler_t *chain, lp_sampler_t *s)
{
    return lp_sampler_chain_add(chain, s);
}

int lp_sampler_chain_build(const lp_sampler_params_t *p, int32_t n_vocab, lp_rng_t *rng,
                           lp_sampler_plugin_lookup_cb lookup, void *lookup_user,
                           const lp_dry_breakers_t *dry_breakers, lp_sampler_t **out)
{
    *out = NULL;
    int rc = lp_sampler_params_validate(p);
    if (rc) return rc;
    lp_sampler_t *ch = lp_sampler_chain_new();
    if (!ch) return lp_error_set(LP_ERR(ENOMEM), "sampler: out of memory");
    size_t min_keep = (size_t)p->min_keep;
    int32_t hist = LP_SAMPLER_HISTORY_MAX;

    if (p->n_bias > 0 && (rc = add(ch, lp_sampler_logit_bias_new(p->bias, p->n_bias)))) goto fail;

    if (p->mirostat == 0) {
        for (int32_t i = 0; i < p->n_steps && !rc; i++) {
            const lp_sampler_step_t *st = &p->steps[i];
            switch (st->kind) {
            case LP_SAMPLER_PENALTIES:
                rc = add(ch, lp_sampler_penalties_new(p->repeat_last_n < 0 ? hist : p->repeat_last_n,
                                                      p->repeat_penalty, p->frequency_penalty,
                                                      p->presence_penalty));
                break;
            case LP_SAMPLER_DRY: {
                lp_dry_breakers_t *own = NULL;
                const lp_dry_breakers_t *br = dry_breakers;
                if (!br && (rc = lp_dry_breakers_with_ids(NULL, p, &own))) break;
                rc = add(ch, lp_sampler_dry_new(p->dry_multiplier, p->dry_base,
                                                p->dry_allowed_length,
                                                p->dry_penalty_last_n < 0 ? hist
                                                                          : p->dry_penalty_last_n,
                                                br ? br : own));
                lp_dry_breakers_destroy(&own);
                break;
            }
            case LP_SAMPLER_TOP_N_SIGMA:
                rc = add(ch, lp_sampler_top_n_sigma_new(p->top_n_sigma));
                break;
            case LP_SAMPLER_TOP_K:
                rc = add(ch, lp_sampler_top_k_new(p->top_k));
                break;
            case LP_SAMPLER_TYPICAL_P:
                rc = add(ch, lp_sampler_typical_new(p->typical_p, min_keep));
                break;
            case LP_SAMPLER_TOP_P:
                rc = add(ch, lp_sampler_top_p_new(p->top_p, min_keep));
                break;
            case LP_SAMPLER_MIN_P:
                rc = add(ch, lp_sampler_min_p_new(p->min_p, min_keep));
                break;
            case LP_SAMPLER_XTC:
                rc = add(ch, lp_sampler_xtc_new(p->xtc_probability, p->xtc_threshold, min_keep, rng));
                break;
            case LP_SAMPLER_TEMPERATURE:
                rc = add(ch, lp_sampler_temp_ext_new(p->temperature, p->dynatemp_range,
                                                     p->dynatemp_exponent));
                break;
            case LP_SAMPLER_PLUGIN: {
                const lp_sampler_plugin_t *desc;
                const char *config;
                if (!lookup || lookup(lookup_user, st->plugin, &desc, &config)) {
                    rc = lp_error_set(LP_ERR(ENOENT), "samplers: plugin \"%s\" is not loaded",
                                      st->plugin);
                    break;
                }
                lp_sampler_t *s = lp_sampler_plugin_step_new(desc, config);
                rc = s ? add(ch, s) : LP_ERR(EINVAL);
                break;
            }
            }
        }
        if (rc) goto fail;
        /* llama.cpp's server samples greedily when temperature <= 0 */
        rc = add(ch, p->temperature <= 0.0f ? lp_sampler_greedy_new() : lp_sampler_dist_new(rng));
    } else {
        rc = add(ch, lp_sampler_temp_new(p->temperature));
        if (!rc)
            rc = add(ch, p->mirostat == 1
                             ? lp_sampler_mirostat_new(n_vocab, p->mirostat_tau, p->mirostat_eta,
                                                       100, rng)
                             : lp_sampler_mirostat_v2_new(p->mirostat_tau, p->mirostat_eta, rng));
    }
    if (rc) goto fail;
    *out = ch;
    return 0;
fail:
    lp_sampler_destroy(&ch);
    return rc;
}
