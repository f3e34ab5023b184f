/* proxy.c - client messages the coordinator passes on unchanged: Tokenize,
 * Detokenize and ChatTemplate requests to tokenizer-svc, SamplerControl to
 * the sampler of every group.  The service's reply (or Error) goes back with
 * the client's Msg.id; with several services it goes once all have
 * answered, the first Error if any.  A client that has gone by then is
 * simply not answered. */
#include "coord-internal.h"

#include "error.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

/* Proxied messages outstanding at once; more are refused (the services
 * answer in order, so this bounds the coordinator's memory, not theirs). */
#define MAX_PROXIES 4096

static void proxy_free(lp__proxy_t *p)
{
    if (p->reply) lmpipe__msg__free_unpacked(p->reply, NULL);
    free(p->control);
    free(p);
}

static void proxy_remove(lp_coord_t *c, size_t i)
{
    proxy_free(c->proxies[i]);
    memmove(&c->proxies[i], &c->proxies[i + 1], (c->n_proxies - i - 1) * sizeof(*c->proxies));
    c->n_proxies--;
    lp__drain_check(c);
}

void lp__proxy_free_all(lp_coord_t *c)
{
    for (size_t i = 0; i < c->n_controls; i++) free(c->controls[i].msg);
    c->n_controls = 0;
    for (size_t i = 0; i < c->n_proxies; i++) proxy_free(c->proxies[i]);
    free(c->proxies);
    c->proxies = NULL;
    c->n_proxies = c->cap_proxies = 0;
}

/* A SamplerControl every sampler took: one of the sequence replayed to a
 * sampler that comes back (lp__proxy_replay). */
static void control_keep(lp_coord_t *c, lp__proxy_t *p)
{
    if (c->n_controls == LP__MAX_CONTROLS) {
        LP_WARN("coordinator: more than %d sampler controls: a restarted sampler gets only the "
                "newest %d", LP__MAX_CONTROLS, LP__MAX_CONTROLS);
        free(c->controls[0].msg);
        memmove(&c->controls[0], &c->controls[1], (LP__MAX_CONTROLS - 1) * sizeof(c->controls[0]));
        c->n_controls--;
    }
    c->controls[c->n_controls++] = (struct lp__control){p->control, p->control_len};
    p->control = NULL;
    if (p->control_version > c->control_version) c->control_version = p->control_version;
}

void lp__proxy_replay(lp_coord_t *c, lp__link_t *l, uint64_t version)
{
    if (!c->n_controls || version >= c->control_version) return;
    LP_INFO("coordinator: %s %s: replaying %zu sampler control(s) (strategy version %llu; it has "
            "%llu)", l->name, l->endpoint, c->n_controls, (unsigned long long)c->control_version,
            (unsigned long long)version);
    for (size_t i = 0; i < c->n_controls; i++) {
        Lmpipe__Msg *m = lmpipe__msg__unpack(NULL, c->controls[i].len, c->controls[i].msg);
        if (!m) return;
        lp__link_send(l, OP_NONE_REPLY, 0, m, NULL, 0);
        lmpipe__msg__free_unpacked(m, NULL);
    }
}

int lp__proxy_send(lp_coord_t *c, const lp_frame_t *f)
{
    const char *what = lp_msg_body_name(f->msg->body_case);
    bool to_samplers = f->msg->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL;
    /* Control changes every tenant's sampling (and loads plugins). */
    if (to_samplers && !lp_service_from_admin(c->svc, f))
        return lp_error_set(LP_ERR(EPERM), "%s: refused: only admins may control the sampler "
                            "(a key in curve.admin, or a client on ipc://)", what);
    if (c->n_proxies >= MAX_PROXIES)
        return lp_error_set(LP_ERR(EBUSY), "%s: %zu proxied requests are pending", what, c->n_proxies);
    if (c->n_proxies == c->cap_proxies) {
        size_t cap = c->cap_proxies ? 2 * c->cap_proxies : 16;
        lp__proxy_t **n = realloc(c->proxies, cap * sizeof(*n));
        if (!n) return lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", what);
        c->proxies = n;
        c->cap_proxies = cap;
    }
    lp__proxy_t *p = calloc(1, sizeof(*p));
    if (!p) return lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", what);
    p->key = ++c->next_proxy;
    memcpy(p->peer, f->peer, f->peer_len);
    p->peer_len = f->peer_len;
    p->client_id = f->msg->id;
    /* The message goes out as the client sent it; only its id is the link's. */
    Lmpipe__Msg m = *f->msg;
    if (to_samplers) { /* kept for a sampler that comes back (lp__proxy_controls) */
        p->control_len = lmpipe__msg__get_packed_size(&m);
        if (!(p->control = malloc(p->control_len))) {
            proxy_free(p);
            return lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", what);
        }
        lmpipe__msg__pack(&m, p->control);
        p->control_ok = true;
    }
    /* A group that is down gets no control message: it may miss a swap. */
    lp__link_t *links[to_samplers ? c->n_groups : 1];
    size_t n_links = 0;
    for (size_t i = 0; to_samplers && i < c->n_groups; i++)
        if (c->groups[i].state == G_READY) links[n_links++] = &c->groups[i].samp;
    if (!to_samplers && (links[0] = lp__tok_pick(c))) n_links = 1;
    if (n_links == 0) {
        proxy_free(p);
        return lp_error_set(LP_ERR(EHOSTUNREACH), "%s: no %s is reachable", what,
                            to_samplers ? "engine group" : "tokenizer-svc");
    }
    for (size_t i = 0; i < n_links; i++) {
        lp__link_t *l = links[i];
        if (lp__link_send(l, OP_PROXY, p->key, &m, NULL, 0) != 0) {
            /* Replies already due for earlier links find no proxy and are
             * dropped; the client gets this Error instead. */
            proxy_free(p);
            return lp_error_set(LP_ERR(EHOSTUNREACH), "%s: cannot reach %s", what, l->name);
        }
        p->pending++;
    }
    c->proxies[c->n_proxies++] = p;
    return 0;
}

void lp__proxy_on_reply(lp_coord_t *c, uint64_t key, lp_frame_t *f)
{
    size_t i = 0;
    while (i < c->n_proxies && c->proxies[i]->key != key) i++;
    if (i == c->n_proxies) return;
    lp__proxy_t *p = c->proxies[i];
    bool is_error = f->msg->body_case == LMPIPE__MSG__BODY_ERROR;
    const Lmpipe__SamplerControlReply *cr =
        f->msg->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY ? f->msg->sampler_control_reply : NULL;
    p->control_ok = p->control_ok && cr && cr->ok;
    if (cr && cr->version > p->control_version) p->control_version = cr->version;
    if (!p->reply || (is_error && p->reply->body_case != LMPIPE__MSG__BODY_ERROR)) {
        if (p->reply) lmpipe__msg__free_unpacked(p->reply, NULL);
        p->reply = f->msg; /* keep it */
        f->msg = NULL;
    }
    if (--p->pending > 0) return;
    if (p->control && p->control_ok) control_keep(c, p);
    /* A refusal of the client's input is its bad request; anything else
     * the service's own failure. */
    if (p->reply->body_case == LMPIPE__MSG__BODY_ERROR) {
        bool theirs = lp_frame_error_kind(p->reply->error) == LP_EK_INVALID_REQUEST;
        c->m.errors[theirs ? E_BAD_REQUEST : p->control ? E_SAMPLER : E_TOKENIZER]++;
    }
    p->reply->id = p->client_id;
    int rc = lp_service_send(c->svc, p->peer, p->peer_len, p->reply, NULL, 0);
    if (rc) LP_DEBUG("coordinator: proxied reply %llu not delivered: %s",
                     (unsigned long long)p->client_id, lp_error_msg());
    proxy_remove(c, i);
}
