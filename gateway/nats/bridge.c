/* bridge.c - the NATS side of lmpipe-nats: the connection on the libuv loop
 * (nats.c's libuv adapter), the work-queue stream and its durable consumer,
 * one job per delivered request, and sampler control by request/reply.
 *
 * nats.c calls message handlers on its own threads: they only queue the
 * message under a lock and wake the loop (uv_async_t); everything else runs
 * on the loop.  Blocking JetStream API calls (stream and consumer set-up)
 * run on libuv's thread pool, since the replies they wait for are read by
 * the loop.  Acks are JetStream's wire protocol (+ACK, -NAK, +WPI, +TERM)
 * published to the delivery's reply subject, after the events they follow on
 * the same connection, so the server sees a request's final event before its
 * ack. */
#include <nats/adapters/libuv.h> /* defines the adapter's functions: this file only */

#include "bridge.h"
#include "request.h"

#include "edge.h"
#include "error.h"
#include "gen-request.h"
#include "link.h"
#include "log.h"
#include "sysinfo.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DONE_RING 4096 /* stream sequences answered lately: a late redelivery is acked again */

typedef struct inmsg {
    natsMsg *msg;
    bool control;
    struct inmsg *next;
} inmsg_t;

typedef struct job job_t;
struct job {
    lp_link_op_t op;
    lp_nb_t *nb;
    job_t *next;
    char *id, *reply, *ack;
    uint64_t sseq;
    uint32_t seq;        /* the next event's */
    int epoch;           /* nb->disconnects when it started */
    double last_wpi_ms;
};

typedef struct ctl_call ctl_call_t;
struct ctl_call {
    lp_link_op_t op;
    lp_nb_t *nb;
    ctl_call_t *next;
    char *reply;
};

struct lp_nb {
    uv_loop_t *loop;
    lp_nb_opts_t o;
    lp_link_t link; /* the coordinator (gateway/common/link.h) */
    natsOptions *nopts;
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *req_sub, *ctl_sub;
    char deliver[256];
    uv_async_t async;
    uv_mutex_t lock;
    inmsg_t *head, *tail;
    uv_timer_t timer;
    uv_work_t work;
    bool work_running;
    int work_rc;
    char work_err[512];
    atomic_int need_setup; /* at start and after every reconnect */
    atomic_int disconnects;
    atomic_bool closing;
    int cap;               /* MaxAckPending */
    job_t *jobs;
    int n_jobs;
    ctl_call_t *ctls; /* control requests waiting for the coordinator */
    struct {
        uint64_t sseq;
        int epoch; /* nb->disconnects when it was acked */
    } done[DONE_RING];
    size_t done_pos;
};

/* ---- events ---- */

static void publish(lp_nb_t *nb, const char *subj, const char *data, size_t len)
{
    natsStatus s = natsConnection_Publish(nb->nc, subj, data, (int)len);
    if (s != NATS_OK) LP_WARN("publish to %s: %s", subj, natsStatus_GetText(s));
}

static void ack(lp_nb_t *nb, const char *ack_subj, const char *what)
{
    if (ack_subj) publish(nb, ack_subj, what, strlen(what));
}

static void nak(lp_nb_t *nb, const char *ack_subj)
{
    char b[64];
    snprintf(b, sizeof(b), "-NAK {\"delay\":%lld}", (long long)nb->o.nak_delay_ms * 1000000LL);
    ack(nb, ack_subj, b);
}

static void event_begin(lp_json_buf_t *b, const char *id, uint32_t seq)
{
    lp_json_buf_printf(b, "{\"v\":%d,\"id\":", LP_NB_SCHEMA);
    lp_json_buf_str(b, id, strlen(id));
    lp_json_buf_printf(b, ",\"seq\":%u", seq);
}

/* The final event of a refused request: {"final":true,"reason":"error",
 * "error":{code, kind, param, message}}, the code and kind from the error's
 * kind (gateway/common/edge.h), never from its message. */
static void publish_error(lp_nb_t *nb, const char *reply, const char *id, uint32_t seq, enum lp_error_kind kind,
                          const char *param, const char *msg)
{
    if (!reply) return;
    if (!strncmp(msg, "coordinator: ", 13)) msg += 13;
    const char *code = lp_edge_nats_code(kind), *kname = lp_error_kind_name(kind);
    lp_json_buf_t b = {0};
    event_begin(&b, id, seq);
    lp_json_buf_puts(&b, ",\"final\":true,\"piece\":\"\",\"reason\":\"error\",\"error\":{\"code\":");
    lp_json_buf_str(&b, code, strlen(code));
    lp_json_buf_puts(&b, ",\"kind\":");
    lp_json_buf_str(&b, kname, strlen(kname));
    lp_json_buf_puts(&b, ",\"param\":");
    if (param && param[0]) lp_json_buf_str(&b, param, strlen(param));
    else lp_json_buf_puts(&b, "null");
    lp_json_buf_puts(&b, ",\"message\":");
    lp_json_buf_str(&b, msg, strlen(msg));
    lp_json_buf_puts(&b, "}}");
    if (!b.oom) publish(nb, reply, b.p, b.n);
    lp_json_buf_free(&b);
}

static void remember_done(lp_nb_t *nb, uint64_t sseq)
{
    size_t i = nb->done_pos++ % DONE_RING;
    nb->done[i].sseq = sseq;
    nb->done[i].epoch = atomic_load(&nb->disconnects);
}

/* Answered, and no connection lost since: its events and ack reached the server. */
static bool was_done(const lp_nb_t *nb, uint64_t sseq)
{
    for (size_t i = 0; i < DONE_RING; i++)
        if (nb->done[i].sseq == sseq) return nb->done[i].epoch == atomic_load(&nb->disconnects);
    return false;
}

/* Events published before a connection was lost may be lost with it (they
 * were written to the old socket): such a request is generated again. */
static bool tainted(const job_t *j)
{
    return j->epoch != atomic_load(&j->nb->disconnects) ||
           natsConnection_Status(j->nb->nc) != NATS_CONN_STATUS_CONNECTED;
}

static void job_free(job_t *j)
{
    lp_nb_t *nb = j->nb;
    lp_link_forget(&nb->link, &j->op);
    for (job_t **p = &nb->jobs; *p; p = &(*p)->next)
        if (*p == j) {
            *p = j->next;
            nb->n_jobs--;
            break;
        }
    free(j->id);
    free(j->reply);
    free(j->ack);
    free(j);
}

/* The request is answered (or refused): the ack goes after its last event. */
static void job_end(job_t *j, const char *what)
{
    ack(j->nb, j->ack, what);
    remember_done(j->nb, j->sseq);
    job_free(j);
}

static const char *reason_name(Lmpipe__FinishReason r)
{
    switch (r) {
    case LMPIPE__FINISH_REASON__FINISH_EOS: return "eos";
    case LMPIPE__FINISH_REASON__FINISH_STOP: return "stop";
    case LMPIPE__FINISH_REASON__FINISH_LENGTH: return "length";
    case LMPIPE__FINISH_REASON__FINISH_CONTEXT: return "context";
    case LMPIPE__FINISH_REASON__FINISH_CANCELLED: return "cancelled";
    case LMPIPE__FINISH_REASON__FINISH_ERROR: return "error";
    default: return "none";
    }
}

static void on_token(job_t *j, const Lmpipe__TokenEvent *t)
{
    lp_json_buf_t b = {0};
    event_begin(&b, j->id, j->seq++);
    lp_json_buf_puts(&b, ",\"piece\":");
    lp_json_buf_str(&b, t->piece.data ? (const char *)t->piece.data : "", t->piece.len);
    lp_json_buf_printf(&b, ",\"token\":%d", t->id);
    if (t->has_logprob) {
        lp_json_buf_puts(&b, ",\"logprob\":");
        lp_json_buf_num(&b, t->logprob);
    }
    lp_json_buf_puts(&b, "}");
    if (!b.oom) publish(j->nb, j->reply, b.p, b.n);
    lp_json_buf_free(&b);
}

static void on_final(job_t *j, const Lmpipe__FinalEvent *f)
{
    lp_nb_t *nb = j->nb;
    if (f->reason == LMPIPE__FINISH_REASON__FINISH_ERROR && f->retryable) {
        /* The pipeline's reason (the coordinator stopping, a stage lost): the
         * request runs again when JetStream redelivers it. */
        LP_INFO("request %s: %s; redelivery in %d ms", j->id, f->error ? f->error : "", j->nb->o.nak_delay_ms);
        nak(j->nb, j->ack);
        job_free(j);
        return;
    }
    if (f->reason == LMPIPE__FINISH_REASON__FINISH_ERROR || f->reason == LMPIPE__FINISH_REASON__FINISH_CANCELLED) {
        const char *msg = f->error && f->error[0] ? f->error : "the generation was cancelled";
        publish_error(nb, j->reply, j->id, j->seq, lp_frame_final_kind(f), f->error_param, msg);
        job_end(j, "+TERM");
        return;
    }
    if (tainted(j)) {
        /* Not acked: AckWait gives it to a bridge again.  (A -NAK of a delivery
         * made before the server restarted can leave it stuck in nats-server 2.9.) */
        LP_INFO("request %s finished across a lost NATS connection: it will be generated again", j->id);
        job_free(j);
        return;
    }
    lp_json_buf_t b = {0};
    event_begin(&b, j->id, j->seq);
    lp_json_buf_puts(&b, ",\"final\":true,\"piece\":");
    lp_json_buf_str(&b, f->tail.data ? (const char *)f->tail.data : "", f->tail.len);
    lp_json_buf_printf(&b, ",\"reason\":\"%s\"", reason_name(f->reason));
    if (f->stop.len) {
        lp_json_buf_puts(&b, ",\"stop_word\":");
        lp_json_buf_str(&b, (const char *)f->stop.data, f->stop.len);
    }
    lp_json_buf_printf(&b, ",\"usage\":{\"prompt_tokens\":%u,\"completion_tokens\":%u,\"total_tokens\":%u,"
                     "\"prompt_tokens_details\":{\"cached_tokens\":%u}}",
                 f->n_prompt, f->n_generated, f->n_prompt + f->n_generated, f->n_cached);
    lp_json_buf_printf(&b, ",\"timings\":{\"queue_ms\":%.3f,\"prompt_ms\":%.3f,\"predicted_ms\":%.3f,"
                     "\"predicted_per_second\":%.3f}}",
                 f->queue_ms, f->prompt_ms, f->generate_ms,
                 f->generate_ms > 0 ? f->n_generated * 1000.0 / f->generate_ms : 0.0);
    if (!b.oom) publish(nb, j->reply, b.p, b.n);
    lp_json_buf_free(&b);
    job_end(j, "+ACK");
}

static void on_job_msg(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    job_t *j = op->arg;
    switch (m->body_case) {
    case LMPIPE__MSG__BODY_TOKEN: on_token(j, m->token); break;
    case LMPIPE__MSG__BODY_FINAL: on_final(j, m->final); break;
    case LMPIPE__MSG__BODY_ERROR: {
        enum lp_error_kind kind = lp_frame_error_kind(m->error);
        if (kind == LP_EK_UNAVAILABLE || kind == LP_EK_RATE_LIMITED) {
            /* Not ready, the coordinator went away or its queue is full: the
             * request runs again later. */
            LP_INFO("request %s: %s; redelivery in %d ms", j->id, m->error->message, j->nb->o.nak_delay_ms);
            nak(j->nb, j->ack);
            job_free(j);
            return;
        }
        publish_error(j->nb, j->reply, j->id, j->seq, kind, m->error->param, m->error->message);
        job_end(j, "+TERM");
        break;
    }
    default: break;
    }
}

/* ---- requests ---- */

/* The bridge's own subject that matches a requested reply subject, or
 * NULL: events published there would be read back by the bridge as
 * requests (its stream's subjects) or as control (its control subject). */
static const char *own_subject(const lp_nb_t *nb, const char *reply)
{
    const char *own[] = {nb->o.subjects, nb->o.control_subject, nb->deliver};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (own[i] && own[i][0] && lp__nb_subject_match(own[i], reply)) return own[i];
    return NULL;
}

static void on_request(lp_nb_t *nb, natsMsg *msg)
{
    const char *ack_subj = natsMsg_GetReply(msg);
    uint64_t sseq = ack_subj ? lp__nb_ack_sseq(ack_subj) : 0;
    if (!sseq) {
        LP_WARN("a message on %s is not a JetStream delivery: dropped", natsMsg_GetSubject(msg));
        return;
    }
    for (job_t *j = nb->jobs; j; j = j->next)
        if (j->sseq == sseq) {
            /* Redelivered while it runs (its InProgress was lost in an outage): keep
             * the newer delivery's ack subject and go on. */
            char *a = strdup(ack_subj);
            if (a) {
                free(j->ack);
                j->ack = a;
            }
            ack(nb, j->ack, "+WPI");
            j->last_wpi_ms = lp_now_ms();
            return;
        }
    if (was_done(nb, sseq)) {
        ack(nb, ack_subj, "+ACK"); /* answered already; the first ack was lost */
        return;
    }
    if (!nb->link.ready) {
        nak(nb, ack_subj);
        return;
    }
    job_t *j = calloc(1, sizeof(*j));
    if (!j) {
        nak(nb, ack_subj);
        return;
    }
    j->nb = nb;
    j->sseq = sseq;
    j->op.arg = j;
    j->op.on_msg = on_job_msg;
    j->ack = strdup(ack_subj);
    j->last_wpi_ms = lp_now_ms();
    j->epoch = atomic_load(&nb->disconnects);
    const char *h = NULL;
    char idbuf[64];
    if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &h) == NATS_OK && h && h[0]) j->id = strdup(h);
    if (natsMsgHeader_Get(msg, "Lmpipe-Reply-To", &h) == NATS_OK && h && h[0]) j->reply = strdup(h);
    j->next = nb->jobs;
    nb->jobs = j;
    nb->n_jobs++;

    const char *data = natsMsg_GetData(msg);
    size_t len = (size_t)natsMsg_GetDataLength(msg);
    char why[512] = "";
    lp_json_doc_t *doc = NULL;
    const lp_json_t *root = NULL;
    if (len > nb->o.max_body)
        snprintf(why, sizeof(why), "body: %zu bytes is over the bridge's limit of %zu (--max-body)", len, nb->o.max_body);
    else if (lp_json_parse(data ? data : "", len, &doc) != 0)
        snprintf(why, sizeof(why), "body: not JSON: %s", lp_error_msg());
    else
        root = lp_json_root(doc);
    const lp_json_t *v;
    if (root && !j->id && (v = lp_json_get(root, "id")) && v->type == LP_JSON_STRING && v->n) j->id = strdup(v->u.str);
    if (root && !j->reply && (v = lp_json_get(root, "reply_to")) && v->type == LP_JSON_STRING && v->n)
        j->reply = strdup(v->u.str);
    if (!j->id) {
        snprintf(idbuf, sizeof(idbuf), "%s-%llu", nb->o.stream, (unsigned long long)sseq);
        j->id = strdup(idbuf);
    }
    if (!j->id || !j->ack) {
        nak(nb, ack_subj);
        job_free(j);
        lp_json_doc_destroy(&doc);
        return;
    }
    const char *own = j->reply ? own_subject(nb, j->reply) : NULL;
    if (!j->reply || !lp__nb_reply_ok(j->reply) || own) {
        LP_WARN("request %s: %s%s%s%s: terminated", j->id,
                j->reply ? "not a subject the bridge answers on: " : "no Lmpipe-Reply-To header or reply_to field",
                j->reply ? j->reply : "", own ? ", which the bridge's own subject matches: " : "", own ? own : "");
        job_end(j, "+TERM");
        lp_json_doc_destroy(&doc);
        return;
    }
    lp_request_t rq;
    bool read = false;
    const char *param = "body";
    if (root) {
        read = lp__nb_read_request(root, &rq) == 0;
        if (!read) {
            snprintf(why, sizeof(why), "%s", lp_error_msg());
            param = rq.param;
        }
    }
    /* Each request subject is a client of its own at the coordinator:
     * give each user publish permission on its own subject
     * (lmpipe.req.USER) and users get fair shares (docs/NATS.md). */
    char tenant[300];
    snprintf(tenant, sizeof(tenant), "nats:%s", natsMsg_GetSubject(msg));
    lp_gen_batch_t batch = {0};
    if (read && lp_gen_batch_build(&rq, tenant, &batch) != 0) {
        snprintf(why, sizeof(why), "%s", lp_error_msg());
        read = false;
        param = NULL;
    }
    if (!read) {
        publish_error(nb, j->reply, j->id, 0, LP_EK_INVALID_REQUEST, param, why);
        job_end(j, "+TERM");
    } else {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_GENERATE;
        m.generate = &batch.reqs[0]; /* one choice over NATS (the schema's n) */
        if (lp_link_send(&nb->link, &m, &j->op) != 0) {
            nak(nb, j->ack);
            job_free(j);
        }
    }
    lp_gen_batch_clear(&batch);
    if (root) lp_request_clear(&rq);
    lp_json_doc_destroy(&doc);
}

/* ---- control ---- */

static void ctl_reply(lp_nb_t *nb, const char *reply, const char *json)
{
    if (reply) publish(nb, reply, json, strlen(json));
}

static void ctl_refuse(lp_nb_t *nb, const char *reply, const char *code, const char *msg)
{
    lp_json_buf_t b = {0};
    lp_json_buf_puts(&b, "{\"ok\":false,\"error\":{\"code\":");
    lp_json_buf_str(&b, code, strlen(code));
    lp_json_buf_puts(&b, ",\"message\":");
    lp_json_buf_str(&b, msg, strlen(msg));
    lp_json_buf_puts(&b, "}}");
    if (!b.oom) ctl_reply(nb, reply, b.p);
    lp_json_buf_free(&b);
}

static void ctl_free(ctl_call_t *c)
{
    lp_link_forget(&c->nb->link, &c->op);
    for (ctl_call_t **p = &c->nb->ctls; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    free(c->reply);
    free(c);
}

static void on_ctl_reply(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    ctl_call_t *c = op->arg;
    if (m->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY) {
        const Lmpipe__SamplerControlReply *s = m->sampler_control_reply;
        ctl_reply(c->nb, c->reply, s->json && s->json[0] ? s->json : s->ok ? "{\"ok\":true}" : "{\"ok\":false}");
    } else if (m->body_case == LMPIPE__MSG__BODY_ERROR)
        ctl_refuse(c->nb, c->reply, "unavailable", m->error->message);
    else
        ctl_refuse(c->nb, c->reply, "internal", lp_msg_body_name(m->body_case));
    ctl_free(c);
}

/* The requester's user as nats-server states it: the Nats-Request-Info header,
 * which the server sets (replacing any the client sent) on requests that
 * cross accounts through a service import with share: true. */
static bool ctl_user(natsMsg *msg, char *user, size_t cap)
{
    const char *h = NULL;
    if (natsMsgHeader_Get(msg, "Nats-Request-Info", &h) != NATS_OK || !h) return false;
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse(h, strlen(h), &doc) != 0) return false;
    const lp_json_t *u = lp_json_get(lp_json_root(doc), "user");
    bool ok = u && u->type == LP_JSON_STRING && u->n && u->n < cap;
    if (ok) memcpy(user, u->u.str, u->n + 1);
    lp_json_doc_destroy(&doc);
    return ok;
}

static void on_control(lp_nb_t *nb, natsMsg *msg)
{
    const char *reply = natsMsg_GetReply(msg);
    if (!reply) return; /* nowhere to answer: not a request */
    bool any = false, allowed = false;
    char user[256] = "";
    for (int i = 0; i < nb->o.n_control_users; i++) any |= !strcmp(nb->o.control_users[i], "*");
    if (!nb->o.n_control_users) {
        ctl_refuse(nb, reply, "forbidden", "sampler control is off: no nats.control_users are configured");
        return;
    }
    if (any) allowed = true; /* nats-server's publish permissions decide */
    else if (ctl_user(msg, user, sizeof(user)))
        for (int i = 0; i < nb->o.n_control_users && !allowed; i++) allowed = !strcmp(nb->o.control_users[i], user);
    if (!allowed) {
        char why[512];
        snprintf(why, sizeof(why), "forbidden: %s%s%s is not among nats.control_users", user[0] ? "user '" : "",
                 user[0] ? user : "a requester without Nats-Request-Info", user[0] ? "'" : "");
        LP_WARN("control request refused: %s", why);
        ctl_refuse(nb, reply, "forbidden", why);
        return;
    }
    const char *data = natsMsg_GetData(msg);
    int len = natsMsg_GetDataLength(msg);
    lp_json_doc_t *doc = NULL;
    const lp_json_t *op;
    if (lp_json_parse(data ? data : "", (size_t)len, &doc) != 0 ||
        !(op = lp_json_get(lp_json_root(doc), "op")) || op->type != LP_JSON_STRING) {
        lp_json_doc_destroy(&doc);
        ctl_refuse(nb, reply, "invalid_request",
                   "op: the body must be a JSON object whose op is one of \"set\", \"load\", \"unload\", \"rollback\", \"get\"");
        return;
    }
    lp_json_doc_destroy(&doc);
    ctl_call_t *c = calloc(1, sizeof(*c));
    char *json = strndup(data, (size_t)len);
    if (!c || !json || !(c->reply = strdup(reply))) {
        free(c ? c->reply : NULL);
        free(c);
        free(json);
        ctl_refuse(nb, reply, "internal", "out of memory");
        return;
    }
    c->nb = nb;
    c->op.arg = c;
    c->op.on_msg = on_ctl_reply;
    Lmpipe__SamplerControl sc = LMPIPE__SAMPLER_CONTROL__INIT;
    sc.json = json;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_CONTROL;
    m.sampler_control = &sc;
    if (!nb->link.ready || lp_link_send(&nb->link, &m, &c->op) != 0) {
        ctl_refuse(nb, reply, "unavailable", nb->link.ready ? "cannot send to the coordinator" : nb->link.reason);
        free(c->reply);
        free(c);
    } else {
        c->next = nb->ctls;
        nb->ctls = c;
    }
    free(json);
}

/* ---- nats.c threads -> the loop ---- */

static void enqueue(lp_nb_t *nb, natsMsg *msg, bool control)
{
    inmsg_t *it = malloc(sizeof(*it));
    if (!it) {
        natsMsg_Destroy(msg); /* not acked: JetStream redelivers it */
        return;
    }
    it->msg = msg;
    it->control = control;
    it->next = NULL;
    uv_mutex_lock(&nb->lock);
    if (nb->tail) nb->tail->next = it;
    else nb->head = it;
    nb->tail = it;
    uv_mutex_unlock(&nb->lock);
    uv_async_send(&nb->async);
}

static void on_nats_req(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg)
{
    enqueue(arg, msg, false);
}

static void on_nats_ctl(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *arg)
{
    enqueue(arg, msg, true);
}

static void on_async(uv_async_t *a)
{
    lp_nb_t *nb = a->data;
    uv_mutex_lock(&nb->lock);
    inmsg_t *it = nb->head;
    nb->head = nb->tail = NULL;
    uv_mutex_unlock(&nb->lock);
    while (it) {
        inmsg_t *next = it->next;
        if (it->control) on_control(nb, it->msg);
        else on_request(nb, it->msg);
        natsMsg_Destroy(it->msg);
        free(it);
        it = next;
    }
}

/* ---- connection callbacks (nats.c threads: log, flag, nothing else) ---- */

static void on_disconnected(natsConnection *nc, void *arg)
{
    lp_nb_t *nb = arg;
    atomic_fetch_add(&nb->disconnects, 1);
    if (!atomic_load(&nb->closing)) LP_WARN("disconnected from NATS; reconnecting");
}

static void on_reconnected(natsConnection *nc, void *arg)
{
    lp_nb_t *nb = arg;
    LP_WARN("reconnected to NATS");
    atomic_store(&nb->need_setup, 1); /* a server without our stream (memory storage) gets it back */
}

static void on_connected(natsConnection *nc, void *arg)
{
    LP_INFO("connected to NATS");
}

static int64_t reconnect_delay(natsConnection *nc, int attempts, void *arg)
{
    int64_t d = 100LL << (attempts < 6 ? attempts : 6); /* 100 ms doubling to 6.4 s */
    return d + rand() % (d / 4 + 1);
}

static void on_nats_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *arg)
{
    LP_WARN("NATS: %s", natsStatus_GetText(err));
}

/* ---- set-up: the stream, the consumer and the subscriptions (thread pool) ---- */

static int js_fail(lp_nb_t *nb, const char *what, natsStatus s, jsErrCode e)
{
    const char *last = nats_GetLastError(NULL);
    snprintf(nb->work_err, sizeof(nb->work_err), "%s: %s (%s, JetStream error %d)", what, natsStatus_GetText(s),
             last ? last : "", (int)e);
    return -1;
}

static int ensure_stream(lp_nb_t *nb, jsStreamConfig *sc, const char *what)
{
    jsStreamInfo *si = NULL;
    jsErrCode e = 0;
    natsStatus s = js_AddStream(&si, nb->js, sc, NULL, &e);
    if (s != NATS_OK && e == JSStreamNameExistErr) s = js_UpdateStream(&si, nb->js, sc, NULL, &e);
    jsStreamInfo_Destroy(si);
    return s == NATS_OK ? 0 : js_fail(nb, what, s, e);
}

static void setup_work(uv_work_t *w)
{
    lp_nb_t *nb = w->data;
    natsStatus s;
    jsErrCode e = 0;
    nb->work_rc = -1;
    if (!nb->js && (s = natsConnection_JetStream(&nb->js, nb->nc, NULL)) != NATS_OK) {
        js_fail(nb, "JetStream context", s, 0);
        return;
    }
    const char *subj[1] = {nb->o.subjects};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = nb->o.stream;
    sc.Subjects = subj;
    sc.SubjectsLen = 1;
    sc.Retention = js_WorkQueuePolicy;
    sc.Storage = js_FileStorage;
    sc.Duplicates = (int64_t)nb->o.dup_window_ms * 1000000LL;
    if (ensure_stream(nb, &sc, nb->o.stream)) return;
    if (nb->o.events_stream) {
        const char *esubj[1] = {nb->o.events_subjects};
        jsStreamConfig ec;
        jsStreamConfig_Init(&ec);
        ec.Name = nb->o.events_stream;
        ec.Subjects = esubj;
        ec.SubjectsLen = 1;
        ec.Retention = js_LimitsPolicy;
        ec.Storage = js_FileStorage;
        ec.MaxAge = (int64_t)nb->o.events_max_age_s * 1000000000LL;
        if (ensure_stream(nb, &ec, nb->o.events_stream)) return;
    }
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = nb->o.durable;
    cc.DeliverSubject = nb->deliver;
    cc.DeliverGroup = nb->o.durable;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = (int64_t)nb->o.ack_wait_ms * 1000000LL;
    cc.MaxAckPending = nb->cap;
    cc.MaxDeliver = -1;
    jsConsumerInfo *ci = NULL;
    s = js_GetConsumerInfo(&ci, nb->js, nb->o.stream, nb->o.durable, NULL, &e);
    jsConsumerInfo_Destroy(ci);
    ci = NULL;
    if (s == NATS_OK) s = js_UpdateConsumer(&ci, nb->js, nb->o.stream, &cc, NULL, &e);
    else if (e == JSConsumerNotFoundErr || s == NATS_NOT_FOUND) s = js_AddConsumer(&ci, nb->js, nb->o.stream, &cc, NULL, &e);
    jsConsumerInfo_Destroy(ci);
    if (s != NATS_OK) {
        js_fail(nb, "the durable consumer", s, e);
        return;
    }
    if (!nb->req_sub &&
        (s = natsConnection_QueueSubscribe(&nb->req_sub, nb->nc, nb->deliver, nb->o.durable, on_nats_req, nb)) != NATS_OK) {
        js_fail(nb, nb->deliver, s, 0);
        return;
    }
    if (!nb->ctl_sub && (s = natsConnection_QueueSubscribe(&nb->ctl_sub, nb->nc, nb->o.control_subject, nb->o.durable,
                                                            on_nats_ctl, nb)) != NATS_OK) {
        js_fail(nb, nb->o.control_subject, s, 0);
        return;
    }
    /* Both handlers only queue: no limit on what waits for the loop. */
    natsSubscription_SetPendingLimits(nb->req_sub, -1, -1);
    natsSubscription_SetPendingLimits(nb->ctl_sub, -1, -1);
    nb->work_rc = 0;
}

static void setup_done(uv_work_t *w, int status)
{
    lp_nb_t *nb = w->data;
    nb->work_running = false;
    if (nb->work_rc != 0) {
        LP_WARN("NATS set-up: %s; retrying", nb->work_err);
        atomic_store(&nb->need_setup, 1);
        return;
    }
    LP_INFO("consuming %s (%s) through %s, at most %d unacked", nb->o.subjects, nb->o.stream, nb->o.durable, nb->cap);
}

static void on_timer(uv_timer_t *t)
{
    lp_nb_t *nb = t->data;
    double now = lp_now_ms();
    /* InProgress well before AckWait runs out, so that a long generation is not redelivered. */
    for (job_t *j = nb->jobs; j; j = j->next)
        if (now - j->last_wpi_ms >= nb->o.ack_wait_ms / 3.0) {
            ack(nb, j->ack, "+WPI");
            j->last_wpi_ms = now;
        }
    if (nb->work_running || !nb->link.ready || natsConnection_Status(nb->nc) != NATS_CONN_STATUS_CONNECTED) return;
    int cap = nb->o.max_inflight ? nb->o.max_inflight : nb->link.max_seqs ? (int)nb->link.max_seqs : 16;
    if (cap != nb->cap) {
        nb->cap = cap; /* MaxAckPending follows the pipeline's slots (a restarted coordinator may differ) */
        atomic_store(&nb->need_setup, 1);
    }
    if (!atomic_exchange(&nb->need_setup, 0)) return;
    nb->work_running = true;
    nb->work.data = nb;
    if (uv_queue_work(nb->loop, &nb->work, setup_work, setup_done) != 0) {
        nb->work_running = false;
        atomic_store(&nb->need_setup, 1);
    }
}

/* ---- the process ---- */

static int opt_fail(natsStatus s, const char *what)
{
    const char *last = nats_GetLastError(NULL);
    return lp_error_set(LP_ERR(EINVAL), "%s: %s%s%s", what, natsStatus_GetText(s), last ? ": " : "", last ? last : "");
}

static int make_options(lp_nb_t *nb)
{
    const lp_nb_opts_t *o = &nb->o;
    /* nats.c reads some of these only when it connects, and a connection that
     * fails is retried forever: a missing file is said now. */
    const char *files[][2] = {{"--creds", o->creds}, {"--nkey-seed", o->nkey_seed}, {"--tls-ca", o->tls_ca},
                              {"--tls-cert", o->tls_cert}, {"--tls-key", o->tls_key}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (files[i][1] && access(files[i][1], R_OK) != 0)
            return lp_error_set(LP_ERR(errno), "%s %s: %s", files[i][0], files[i][1], strerror(errno));
    natsOptions *no = NULL;
    natsStatus s = natsOptions_Create(&no);
    if (s != NATS_OK) return lp_error_set(LP_ERR(ENOMEM), "NATS options: %s", natsStatus_GetText(s));
    nb->nopts = no;
    /* the URL list: comma-separated, as nats.c takes it */
    if ((s = natsOptions_SetURL(no, o->urls)) != NATS_OK) return opt_fail(s, "--url");
    if (o->creds && (s = natsOptions_SetUserCredentialsFromFiles(no, o->creds, NULL)) != NATS_OK)
        return opt_fail(s, "--creds");
    if (o->nkey_seed && (s = natsOptions_SetNKeyFromSeed(no, o->user, o->nkey_seed)) != NATS_OK)
        return opt_fail(s, "--nkey-seed");
    if (!o->nkey_seed && o->user && (s = natsOptions_SetUserInfo(no, o->user, o->password)) != NATS_OK)
        return opt_fail(s, "--user");
    if (o->tls && (s = natsOptions_SetSecure(no, true)) != NATS_OK) return opt_fail(s, "--tls");
    if (o->tls_ca && (s = natsOptions_LoadCATrustedCertificates(no, o->tls_ca)) != NATS_OK)
        return opt_fail(s, "--tls-ca");
    if ((o->tls_cert || o->tls_key) && (s = natsOptions_LoadCertificatesChain(no, o->tls_cert, o->tls_key)) != NATS_OK)
        return opt_fail(s, "--tls-cert/--tls-key");
    natsOptions_SetName(no, "lmpipe-nats");
    natsOptions_SetMaxReconnect(no, -1);
    natsOptions_SetCustomReconnectDelay(no, reconnect_delay, nb);
    natsOptions_SetReconnectBufSize(no, 64 << 20); /* events and acks of requests that finish during an outage */
    natsOptions_SetRetryOnFailedConnect(no, true, on_connected, nb);
    natsOptions_SetDisconnectedCB(no, on_disconnected, nb);
    natsOptions_SetReconnectedCB(no, on_reconnected, nb);
    natsOptions_SetErrorHandler(no, on_nats_error, nb);
    natsOptions_SetEventLoop(no, nb->loop, natsLibuv_Attach, natsLibuv_Read, natsLibuv_Write, natsLibuv_Detach);
    return 0;
}

int lp_nb_start(uv_loop_t *loop, const lp_nb_opts_t *o, lp_nb_t **out)
{
    *out = NULL;
    lp_nb_t *nb = calloc(1, sizeof(*nb));
    if (!nb) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    nb->loop = loop;
    nb->o = *o;
    snprintf(nb->deliver, sizeof(nb->deliver), "_lmpipe.deliver.%s", o->durable);
    atomic_store(&nb->need_setup, 1);
    natsLibuv_Init();
    natsLibuv_SetThreadLocalLoop(loop);
    int rc = make_options(nb);
    if (rc) goto fail;
    natsStatus s = natsConnection_Connect(&nb->nc, nb->nopts);
    if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED) {
        rc = opt_fail(s, o->urls);
        goto fail;
    }
    if (s == NATS_NOT_YET_CONNECTED) {
        const char *last = nats_GetLastError(NULL);
        LP_WARN("cannot connect to NATS at %s yet%s%s%s; retrying", o->urls, last && last[0] ? " (" : "",
                last && last[0] ? last : "", last && last[0] ? ")" : "");
    }
    nb->link.loop = loop;
    nb->link.coordinator = o->coordinator;
    nb->link.curve_key = o->curve_key;
    nb->link.server_key = o->server_key;
    if ((rc = lp_link_start(&nb->link)) != 0) goto fail;
    uv_mutex_init(&nb->lock);
    uv_async_init(loop, &nb->async, on_async);
    nb->async.data = nb;
    uv_timer_init(loop, &nb->timer);
    nb->timer.data = nb;
    /* a tick of at most a quarter of AckWait, so that +WPI goes out in time */
    uint64_t tick = o->ack_wait_ms / 4 < 250 ? (uint64_t)o->ack_wait_ms / 4 : 250;
    uv_timer_start(&nb->timer, on_timer, tick, tick);
    *out = nb;
    return 0;
fail:
    if (nb->nc) natsConnection_Destroy(nb->nc);
    natsOptions_Destroy(nb->nopts);
    free(nb);
    return rc;
}

void lp_nb_stop(lp_nb_t *nb)
{
    if (!nb) return;
    uv_timer_stop(&nb->timer);
    uv_close((uv_handle_t *)&nb->timer, NULL);
    /* Unfinished requests stay unacked: JetStream gives them to the next bridge. */
    while (nb->jobs) job_free(nb->jobs);
    while (nb->ctls) ctl_free(nb->ctls);
    if (nb->req_sub) natsSubscription_Destroy(nb->req_sub);
    if (nb->ctl_sub) natsSubscription_Destroy(nb->ctl_sub);
    nb->req_sub = nb->ctl_sub = NULL;
    atomic_store(&nb->closing, true);
    natsConnection_Close(nb->nc);
    uv_close((uv_handle_t *)&nb->async, NULL);
    lp_link_stop(&nb->link);
}

void lp_nb_destroy(lp_nb_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_nb_t *nb = *self_p;
    for (inmsg_t *it = nb->head, *next; it; it = next) {
        next = it->next;
        natsMsg_Destroy(it->msg);
        free(it);
    }
    uv_mutex_destroy(&nb->lock);
    jsCtx_Destroy(nb->js);
    natsConnection_Destroy(nb->nc);
    natsOptions_Destroy(nb->nopts);
    lp_link_clear(&nb->link);
    free(nb);
    *self_p = NULL;
}
