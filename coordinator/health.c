/* health.c - the coordinator's word on its stages in StatsReply (links_down,
 * can_serve, draining): what lmpipe-http's /health reports. */
#include "coord-internal.h"

#include <stdio.h>
#include <stdlib.h>

static bool link_up(const lp__link_t *l) { return l->hello && !l->down; }

void lp__health_fill(lp_coord_t *c, Lmpipe__StatsReply *out)
{
    size_t cap = c->n_toks + 2 * c->n_groups;
    if (!c->down_names) {
        c->down_names = calloc(cap, sizeof(*c->down_names));
        c->down_ptrs = calloc(cap, sizeof(char *));
        if (!c->down_names || !c->down_ptrs) { /* no list; the flags still go */
            free(c->down_names);
            free(c->down_ptrs);
            c->down_names = NULL;
            c->down_ptrs = NULL;
        }
    }
    size_t n = 0;
    bool tok = false;
    for (size_t i = 0; i < c->n_toks; i++) {
        const lp__link_t *l = &c->toks[i];
        tok |= link_up(l);
        if (!link_up(l) && c->down_names)
            snprintf(c->down_names[n++], sizeof(*c->down_names), "tokenizer-svc %s", l->endpoint);
    }
    for (size_t i = 0; i < c->n_groups; i++) {
        const lp__group_t *g = &c->groups[i];
        const lp__link_t *ls[2] = {&g->eng, &g->samp};
        for (int k = 0; k < 2 && c->down_names; k++)
            /* A group reconnecting closes both links: one whose service
             * is connected again is not the one down. */
            if (g->state != G_READY && !link_up(ls[k]) && !ls[k]->connected)
                snprintf(c->down_names[n++], sizeof(*c->down_names), "group %s: %s %s", g->name,
                         ls[k]->name, ls[k]->endpoint);
    }
    for (size_t i = 0; i < n; i++) c->down_ptrs[i] = c->down_names[i];
    out->n_links_down = n;
    out->links_down = c->down_ptrs;
    out->can_serve = c->ready && tok && !c->draining;
    out->draining = c->draining;
}
