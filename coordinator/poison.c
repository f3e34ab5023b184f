/* poison.c - poison pills: a request that a stage dies on twice is failed
 * instead of re-driven for ever (docs/PIPELINE.md, "Faults and recovery").
 *
 * A stage (a tokenizer link, a group's engine or sampler) that dies takes
 * the requests in flight there with it; they are re-driven.  Each one
 * remembers that death.  When the same stage dies again and a request was
 * in flight at both deaths, that request is failed with "crashed the
 * sampler twice" and not re-driven.  Those in flight at one death are
 * suspects: they are admitted again one at a time (among suspects), so
 * that a second death names the one that caused it and spares the others. */
#include "coord-internal.h"

#include "log.h"

#include <stdio.h>

static const char *stage_name(const lp__link_t *l)
{
    if (!l->group) return "tokenizer";
    return l == &l->group->samp ? "sampler" : "engine";
}

static bool in_flight(const lp__req_t *r, const lp__link_t *l)
{
    if (!l->group) return r->state == R_TOKENIZING && r->tok == l;
    return r->group == l->group && (r->state == R_OPENING || r->state == R_RUNNING);
}

void lp__poison_on_death(lp_coord_t *c, lp__link_t *l)
{
    l->deaths++;
    for (size_t i = c->n_reqs; i-- > 0;) {
        if (i >= c->n_reqs) continue;
        lp__req_t *r = c->reqs[i];
        if (!in_flight(r, l)) continue;
        if (r->crash_link == l && r->crash_death + 1 == l->deaths) {
            char msg[200];
            snprintf(msg, sizeof(msg), "crashed the %s twice: %s died both times this request was in flight "
                     "there; it is not retried", stage_name(l), l->name);
            LP_WARN("coordinator: request %llu %s", (unsigned long long)r->client_id, msg);
            c->n_poisoned++;
            lp__coord_fail(c, r, l->group ? (l == &l->group->samp ? E_SAMPLER : E_ENGINE) : E_TOKENIZER, msg);
            continue;
        }
        r->crash_link = l;
        r->crash_death = l->deaths;
        r->suspect = true;
    }
}

bool lp__poison_suspect_running(const lp_coord_t *c)
{
    for (size_t i = 0; i < c->n_reqs; i++) {
        const lp__req_t *o = c->reqs[i];
        if (o->suspect && (o->state == R_OPENING || o->state == R_RUNNING)) return true;
    }
    return false;
}
