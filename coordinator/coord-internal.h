/* coord-internal.h - the coordinator's state, shared by its layers:
 *
 *   client-api.c  the client API: validation at the edge, Generate, Cancel
 *   requests.c    the request table and a request's life and final event
 *   fairq.c       the pure round-robin across clients of the waiting queue
 *   links.c       the service links: connect, hello, the FIFO of pending
 *                 operations, send, reply routing, a link that drops
 *   groups.c      the engine groups: placement, readiness, a group that
 *                 drops out and its retry, GroupStats
 *   metrics.c     the request and step metrics of StatsReply
 *   proxy.c       client messages passed on to a service (tokenizer-svc,
 *                 every group's sampler-svc) and their replies passed back
 *   scheduler.c   the pure planner of a group's next step (scheduler.h)
 *   steps.c       plans to StepRequests and SampleRequests, and their replies
 *   text.c        token text and stop strings
 *   coord.c       readiness, reply dispatch, start and stop
 *   drain.c       the stop on SIGTERM: refuse new requests, end the running
 *                 ones within the grace period
 *   health.c      the stages' link state in StatsReply (for /health)
 *   deadline.c    GenerateRequest.deadline_ms
 *
 * A group is one engine and the sampler that reads its rows; the
 * coordinator has one or more tokenizer links and an array of groups.  A
 * request is placed on a group once its prompt is tokenized and stays
 * there. */
#ifndef LP_COORD_INTERNAL_H
#define LP_COORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord.h"
#include "fairq.h"
#include "frame.h"
#include "scheduler.h"
#include "textstream.h"
#include "zloop.h"

#include <uv.h>

/* OP_NONE_REPLY: a reply is due, and only an Error in it matters. */
enum lp__opkind { OP_NONE, OP_NONE_REPLY, OP_HELLO, OP_TOKENIZE, OP_STEP, OP_SOPEN, OP_SCLOSE, OP_SAMPLE, OP_PROXY };

typedef struct lp__op {
    uint64_t id;
    enum lp__opkind kind;
    uint64_t req; /* request key (step number for OP_STEP, OP_SAMPLE), 0 for none */
    uint64_t t_sent; /* ns: a reply overdue by LP__OP_TIMEOUT_MS drops the link */
} lp__op_t;

/* A service whose connection is up (its I/O thread answers the heartbeats)
 * but that answers nothing for this long is wedged: its link is treated as
 * dropped.  Generous: a long prefill of a big model on a CPU takes minutes,
 * and the sampler's wait for a row is bounded at 300 s too. */
#define LP__OP_TIMEOUT_MS 330000

struct lp__group;

/* A link that dropped is reopened after LP__RETRY_MS, doubling to 10 s,
 * and back to LP__RETRY_MS once its service answers the hello: a service
 * restarted by its supervisor is back within a few hundred ms. */
#define LP__RETRY_MS 100

/* A DEALER to one service.  Replies come back in the order of the requests,
 * so the link keeps a FIFO of pending operations. */
typedef struct lp__link {
    const char *name;
    const char *endpoint;
    const char *server_key;  /* the service's CURVE public key; NULL: none */
    Lmpipe__Role role;
    void *sock;
    lp_zsock_t *zs;
    void *mon;               /* PAIR reading the socket's monitor events */
    lp_zsock_t *mzs;
    char routing_id[24];     /* kept across reconnections: the service knows its controller */
    Lmpipe__Msg *hello;      /* the service's Hello reply (owned); NULL until then */
    lp__op_t *ops;           /* FIFO ring of pending operations */
    size_t head, n, cap;
    uint64_t next_id;
    struct lp_coord *owner;
    struct lp__group *group; /* NULL for a tokenizer */
    bool down;               /* dropped; reopened by its retry timer */
    uint64_t deaths;         /* times the service dropped out (poison.c) */
    unsigned backoff_ms;     /* the next retry's delay */
    uv_timer_t timer;        /* the retry */
    bool timer_open;
    unsigned n_opens;        /* names each opening's monitor */
    bool connected;          /* the handshake with the service is done */
    bool hello_sent;         /* since the link opened */
    uv_timer_t hello_timer;  /* a connected service that does not answer the hello */
    bool hello_timer_open;
    uint32_t last_pid;       /* the pid of the last hello: a new one is a restart */
} lp__link_t;

typedef struct lp__tokinfo { /* a sampled token and its text */
    int32_t id;
    bool has_logprob;
    float logprob;
    uint64_t strategy_version; /* the sampler strategy that chose it */
    size_t n_top;
    Lmpipe__TokenProb top[32];
} lp__tokinfo_t;

/* ---- metrics (metrics.c; defined in docs/PIPELINE.md) ---- */

#define LP__HIST_MAX 19 /* bucket bounds of the longest histogram */

typedef struct lp__hist {
    const double *bounds;      /* upper bounds, seconds */
    size_t n;
    uint64_t in[LP__HIST_MAX]; /* observations in (bounds[i-1], bounds[i]] */
    double sum;
    uint64_t count;            /* all of them, the +Inf bucket too */
    uint64_t cum[LP__HIST_MAX]; /* StatsReply's cumulative counts */
    Lmpipe__Histogram msg;
} lp__hist_t;

enum lp__hist_id { H_TTFT, H_ITL, H_E2E, H_QUEUE, H_ENGINE, H_SAMPLER, H_OVERHEAD, H_COUNT };
/* Error kinds, in StatsReply.error_kinds order. */
enum lp__errkind { E_BAD_REQUEST, E_TOKENIZER, E_ENGINE, E_SAMPLER, E_INTERNAL, E_COUNT };
/* Finish reasons as counted: EOS and stop strings are both "stop". */
enum lp__finkind { F_STOP, F_LENGTH, F_CONTEXT, F_CANCELLED, F_ERROR, F_COUNT };

typedef struct lp__metrics {
    lp__hist_t h[H_COUNT];
    Lmpipe__Histogram *hp[H_COUNT];
    uint64_t prompt_tokens, generation_tokens, strategy_version;
    uint64_t prefix_queries, prefix_hits; /* prompt tokens looked up in / taken from the prefix cache */
    uint64_t preemptions;      /* requests preempted for KV blocks */
    uint64_t finished[F_COUNT], errors[E_COUNT];
    Lmpipe__KindCount kc_fin[F_COUNT], kc_err[E_COUNT];
    Lmpipe__KindCount *kcp_fin[F_COUNT], *kcp_err[E_COUNT];
} lp__metrics_t;

enum lp__gstate { G_CONNECTING, G_READY, G_DOWN };

typedef struct lp__group {
    const char *name;
    const char *eng_ep, *samp_ep;
    enum lp__gstate state;
    lp__link_t eng, samp;
    lp__sched_group_t s;
    lp__sched_seq_t **seqs;  /* the group's requests, in arrival order */
    size_t n_seqs, cap_seqs;
    const char *ring;        /* the engine's ring; NULL: rows inline */
    /* Token events of the sample reply being handled: they go to the
     * clients once the next step is out (max_seqs). */
    struct lp__text { uint64_t req; lp__tokinfo_t ti; const uint8_t *data; size_t len; } *texts;
    size_t n_texts;
    size_t n_queue_pending;  /* requests running whose first step is still to go out */
    uint64_t t_sampled;      /* when the group's last SampleReply came */
    uint64_t n_steps, n_placed, n_dropped; /* totals, for GroupStats */
    const char *prefix_off; /* static: GroupStats.prefix_cache_off, "" when on */
    uint64_t prefix_hits;    /* prompt tokens taken from its prefix cache, total */
    bool was_ready;          /* its shape is known (slots_total) */
    /* Sessions of requests moved off the group while its sampler may have
     * stayed up: closed once the group is back. */
    uint64_t *stale;
    size_t n_stale, cap_stale;
    Lmpipe__GroupStats stats; /* StatsReply's entry, filled on request */
} lp__group_t;

enum lp__rstate { R_TOKENIZING, R_WAIT_SLOT, R_OPENING, R_RUNNING, R_DONE };

typedef struct lp__req {
    lp__sched_seq_t s;         /* key, slot, positions: the scheduler's part
                                * (first: a group's list points here) */
    lp__group_t *group;        /* NULL until placed */
    uint8_t peer[LP_FRAME_MAX_PEER];
    size_t peer_len;
    uint64_t client_id;        /* Msg.id of the client's Generate */
    uint8_t client[LP__FAIR_KEY_MAX]; /* who it counts against in the waiting queue */
    size_t client_len;
    enum lp__rstate state;
    /* Poison pills (poison.c): the stage (link) that last died with this
     * request in flight, and that death's number; a suspect runs again
     * alone among suspects, so that a second death names it. */
    const struct lp__link *crash_link;
    uint64_t crash_death;
    bool suspect;
    int32_t *prompt;
    int32_t n_prompt;          /* the prompt's tokens (s.n_prompt is what is prefilled) */
    int32_t *gen;              /* the tokens generated so far (s.n_gen of them) */
    float mirostat_mu;         /* with has_mu: the session's mu after the last of them, for a reopen */
    bool has_mu;
    uint64_t random_seed;      /* the sampler's seed where the parameters leave it random (every open) */
    int32_t cap_gen;
    int32_t *replay;           /* prompt + gen, prefilled again after a stage died */
    uint8_t *tok_msg;          /* the packed tokenize request, kept to send it again */
    size_t tok_len;
    struct lp__link *tok;      /* the tokenizer it went to; NULL: (re)send it */
    bool admitted;             /* its prompt was counted in prompt_tokens */
    int32_t n_cached;          /* prompt tokens its first admission reused */
    bool ignore_eos;
    Lmpipe__SamplingParams *sampling; /* checked at the edge (owned; NULL: the strategy's) */
    uint32_t t_max_predict_ms; /* llama.cpp's: see text.c */
    bool has_newline;          /* a newline has been generated (t_max_predict_ms) */
    bool chat;                 /* its prompt is a conversation (errors name messages) */
    char **stops;
    size_t *stop_lens, n_stops;
    lp_textstream_t *ts;
    bool session_open;
    bool close_pending;        /* SamplerClose sent; its reply carries the final flush */
    Lmpipe__FinishReason reason;
    int stop_idx;
    char error[512];
    bool client_gone;
    char *tail;                /* text released by the final flush */
    bool retryable;            /* ended for the pipeline's reason: FinalEvent.retryable */
    enum lp_error_kind err_kind; /* FINISH_ERROR: FinalEvent.error_kind and error_param */
    char err_param[64];
    bool final_sent;           /* its FinalEvent is out (an error's, before the close's answer) */
    uint64_t t_deadline;       /* lp_now_ns() it ends by (deadline.c); 0: none */
    size_t tail_len;
    uint64_t t_start, t_first, t_last;
    uint64_t t_queue;          /* its first step went out; 0 until then */
    bool queue_pending;        /* running, its first step not yet out */
} lp__req_t;

/* A client message passed on to one or more services: the reply goes back
 * to the client once every service has answered (the first Error wins). */
typedef struct lp__proxy {
    uint64_t key;              /* OP_PROXY's request key */
    uint8_t peer[LP_FRAME_MAX_PEER];
    size_t peer_len;
    uint64_t client_id;        /* the client's Msg.id, echoed */
    size_t pending;            /* replies still due */
    Lmpipe__Msg *reply;        /* the reply to pass back (owned) */
    uint8_t *control;          /* a SamplerControl: the message, packed (owned) */
    size_t control_len;
    bool control_ok;           /* every sampler took it so far */
    uint64_t control_version;
} lp__proxy_t;

#define LP__MAX_CONTROLS 64

struct lp_coord {
    lp_coord_params_t p;
    lp_service_t *svc;
    lp__link_t *toks;          /* the tokenizers (n_toks) */
    size_t n_toks, tok_rr;
    char *tok_eps;             /* the tokenizer list, split in place (owned) */
    char *tok_keys;            /* their server keys, split in place (owned) */
    lp__group_t *groups;
    size_t n_groups;
    Lmpipe__GroupStats **group_stats; /* n_groups: StatsReply's list */
    bool ready, failed;
    char fail_msg[1024];
    int32_t n_vocab, eos_id, bos_id, n_ctx, max_seqs, max_batch_tokens;
    lp__req_t **reqs;          /* every request, in arrival order */
    size_t n_reqs, cap_reqs;
    lp__fair_t fair;           /* admission round-robin across clients */
    uint64_t next_key;
    uint8_t *eog;              /* n_vocab flags: end-of-generation tokens */
    int32_t *eog_ids;          /* the same as a list */
    size_t n_eog_ids;
    lp__proxy_t **proxies;     /* proxied client messages awaiting replies */
    size_t n_proxies, cap_proxies;
    uint64_t next_proxy;
    lp__metrics_t m;
    bool draining, drain_stopped; /* drain.c */
    int drain_grace_ms;
    uv_timer_t drain_timer;
    char (*down_names)[320];   /* health.c: StatsReply.links_down's text (owned) */
    char **down_ptrs;
    uv_timer_t deadline_timer; /* deadline.c: runs while a request has a deadline */
    bool deadline_timer_open;
    uv_timer_t overdue;        /* each second: links with a reply overdue */
    uint64_t epoch;            /* Hello.controller_epoch: a newer coordinator's is higher */
    uint64_t restarts[3];      /* services seen back with a new pid: tokenizer, engine, sampler */
    uint64_t n_redriven;       /* requests moved back to the queue after a stage died */
    uint64_t n_poisoned;       /* requests failed for having crashed a stage twice */
    Lmpipe__KindCount kc_restarts[3], *kcp_restarts[3];
    /* The SamplerControls that succeeded, packed, in order: replayed to a
     * sampler that comes back with an older strategy. */
    struct lp__control { uint8_t *msg; size_t len; } controls[LP__MAX_CONTROLS];
    size_t n_controls;
    uint64_t control_version;  /* the strategy version after the last of them */
};

/* requests.c */
lp__req_t *lp__req_find(lp_coord_t *c, uint64_t key);
lp__req_t *lp__req_find_client(lp_coord_t *c, const uint8_t *peer, size_t len, uint64_t id);
/* Add a request to the table (no group yet). */
int lp__req_add(lp_coord_t *c, lp__req_t *r);
/* Put a request on a group's list, or take it off (it goes back to no
 * group: placed again later). */
int lp__req_place(lp__req_t *r, lp__group_t *g);
void lp__req_unplace(lp__req_t *r);
void lp__req_free(lp__req_t *r);
/* A request in the steps of a group that dropped out goes back to the
 * queue: it is prefilled again from prompt + tokens so far, with a new
 * sampler session, on whichever group is ready first. */
void lp__req_requeue(lp_coord_t *c, lp__req_t *r);
/* Append a generated token. */
int lp__req_push_token(lp__req_t *r, int32_t tok);
/* Send (again) the request's tokenization to the least busy tokenizer;
 * it waits when none is ready. */
void lp__req_tokenize(lp_coord_t *c, lp__req_t *r);
/* Whether the request's text still goes to its client: it runs, or it
 * ended naturally and the end of its text is still to come. */
bool lp__req_text_wanted(const lp__req_t *r);
void lp__req_send_client(lp_coord_t *c, lp__req_t *r, Lmpipe__Msg *m);
/* End a request; its final event goes out once the end of its text is back. */
void lp__coord_finish(lp_coord_t *c, lp__req_t *r, Lmpipe__FinishReason reason, const char *error);
/* End it with FINISH_ERROR, counting the error's kind. */
void lp__coord_fail(lp_coord_t *c, lp__req_t *r, enum lp__errkind kind, const char *error);
/* The same with the client's kind of error and the field at fault (NULL:
 * none); lp__coord_fail takes the kind from the metric's (a bad request or
 * an internal failure). */
void lp__coord_fail_kind(lp_coord_t *c, lp__req_t *r, enum lp__errkind kind, enum lp_error_kind ek,
                         const char *param, const char *error);
/* The same for the pipeline's reason, not the request's (the coordinator
 * stopping, a stage lost for good): the client may send it again. */
void lp__coord_fail_retryable(lp_coord_t *c, lp__req_t *r, enum lp__errkind kind, const char *error);
/* Send the final event and free the request, once it is done and nothing
 * is pending. */
void lp__req_maybe_final(lp_coord_t *c, lp__req_t *r);

/* ---- poison pills (poison.c) ---- */
/* Stage link l died: a request in flight there that was in flight at its
 * previous death too is failed ("crashed the sampler twice") and not
 * re-driven; the others in flight become suspects. Call before the
 * requests are re-driven. */
void lp__poison_on_death(lp_coord_t *c, lp__link_t *l);
/* Whether a suspect is running: then the waiting suspects wait. */
bool lp__poison_suspect_running(const lp_coord_t *c);
/* Send a done request's final event now, without what is still due (the
 * close's flush); the request stays until then (or lp_coord_destroy). */
void lp__req_final_now(lp_coord_t *c, lp__req_t *r);

/* links.c */
/* Set a link's fields (no socket yet). */
void lp__link_init(lp_coord_t *c, lp__link_t *l, const char *name, Lmpipe__Role role,
                   const char *endpoint, const char *server_key, lp__group_t *group);
/* Open its DEALER (heartbeats, reconnection with backoff) and watch it. */
int lp__link_open(lp_coord_t *c, lp__link_t *l);
void lp__link_close(lp__link_t *l);
void lp__link_free(lp__link_t *l);
/* Answer every pending operation but hellos with an Error naming `why`
 * (the link has dropped: nothing will answer them). */
void lp__link_abort(lp_coord_t *c, lp__link_t *l, const char *why);
/* A tokenizer link that drops: its operations fail; it is reopened after
 * its backoff. */
void lp__link_retry_later(lp_coord_t *c, lp__link_t *l);
/* Drop the links whose oldest pending reply is overdue (LP__OP_TIMEOUT_MS). */
void lp__links_check_overdue(lp_coord_t *c);
/* The ready tokenizer with the fewest operations pending; NULL when none. */
lp__link_t *lp__tok_pick(lp_coord_t *c);
/* Send `m` and remember what its reply is for (OP_NONE: no reply expected). */
int lp__link_send(lp__link_t *l, enum lp__opkind kind, uint64_t req, Lmpipe__Msg *m,
                  const void *raw, size_t raw_len);
void lp__link_send_hello(lp_coord_t *c, lp__link_t *l);
/* The hello was answered: its deadline stops. */
void lp__link_hello_done(lp__link_t *l);

/* coord.c: a reply to operation `op` on link `l`. */
void lp__coord_on_reply(lp_coord_t *c, lp__link_t *l, const lp__op_t *op, lp_frame_t *f);
/* A link's socket reported a disconnection. */
void lp__coord_on_link_down(lp_coord_t *c, lp__link_t *l);
void lp__coord_fail_pipeline(lp_coord_t *c, const char *msg);

/* groups.c */
/* Close the sessions left on a sampler that stayed up while its group was
 * down (their requests moved on with new keys). */
void lp__group_close_stale(lp_coord_t *c, lp__group_t *g);
/* Open the group's links and say hello to its engine. */
int lp__group_connect(lp_coord_t *c, lp__group_t *g);
/* Both hellos are in: the group's capacity, from its engine's hello. */
int lp__group_ready(lp_coord_t *c, lp__group_t *g);
/* The group dropped out: its requests in the steps end with FINISH_ERROR
 * naming it, those waiting go back to be placed elsewhere, and it is
 * retried after its backoff. */
void lp__group_down(lp_coord_t *c, lp__group_t *g, const char *why);
/* Place the tokenized requests that have no group on the ready group with
 * the most free capacity. */
void lp__groups_place(lp_coord_t *c);
/* The first ready group; NULL when none. */
lp__group_t *lp__groups_first_ready(lp_coord_t *c);
void lp__groups_stats(lp_coord_t *c, Lmpipe__StatsReply *out, Lmpipe__GroupStats **gp);

/* steps.c */
/* Give waiting requests a slot and open their sampler sessions. */
void lp__steps_admit(lp_coord_t *c, lp__group_t *g);
/* Send the group's next step; false when none went out. */
bool lp__steps_send(lp_coord_t *c, lp__group_t *g);
void lp__steps_on_stepped(lp_coord_t *c, lp__group_t *g, uint64_t no, const lp_frame_t *f);
void lp__steps_on_sampled(lp_coord_t *c, lp__group_t *g, uint64_t no, const Lmpipe__Msg *m);
void lp__steps_on_opened(lp_coord_t *c, lp__req_t *r, const Lmpipe__Msg *m);
/* Admit waiting requests and send steps while the groups take them. */
void lp__coord_pump(lp_coord_t *c);

/* text.c */
/* The token events gathered while a sample reply was handled. */
void lp__text_send(lp_coord_t *c, lp__group_t *g);
/* sampler-svc's answer to SamplerClose: the final flush. */
void lp__text_on_closed(lp_coord_t *c, lp__req_t *r, const Lmpipe__Msg *m);

/* metrics.c */
void lp__metrics_init(lp__metrics_t *m);
void lp__metrics_observe(lp__hist_t *h, uint64_t ns);
/* A request's first step has gone out (queue time). */
void lp__metrics_queued(lp_coord_t *c, lp__req_t *r, uint64_t now);
/* A step's SampleReply came back: its engine, sampler and overhead times. */
void lp__metrics_step(lp_coord_t *c, lp__group_t *g, const lp__sched_step_t *st,
                      const Lmpipe__SampleReply *rep);
void lp__metrics_fill(lp_coord_t *c, Lmpipe__StatsReply *out);

/* proxy.c */
/* Pass a Tokenize, Detokenize or ChatTemplate request to tokenizer-svc, a
 * SamplerControl to every group's sampler-svc. */
int lp__proxy_send(lp_coord_t *c, const lp_frame_t *f);
void lp__proxy_on_reply(lp_coord_t *c, uint64_t key, lp_frame_t *f);
void lp__proxy_free_all(lp_coord_t *c);
/* Send the kept SamplerControls to a sampler whose hello gave an older
 * strategy version than the last of them. */
void lp__proxy_replay(lp_coord_t *c, lp__link_t *l, uint64_t version);

/* drain.c */
/* The service skeleton's drain (SIGTERM). */
void lp__coord_drain(void *ctx, lp_service_t *svc);
/* A request or proxied message has ended: stop when the drain is done. */
void lp__drain_check(lp_coord_t *c);
/* LP_ERR(ESHUTDOWN) naming the drain while it runs, else 0. */
int lp__drain_refuse(const lp_coord_t *c);

/* deadline.c: end `r` with an error when it runs past `ms` from its
 * arrival (0: no deadline). */
void lp__deadline_set(lp_coord_t *c, lp__req_t *r, uint32_t ms);

/* health.c: links_down, can_serve and draining of a StatsReply */
void lp__health_fill(lp_coord_t *c, Lmpipe__StatsReply *out);

/* client-api.c */
int lp__coord_client_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine);
int lp__coord_client(void *ctx, lp_service_t *svc, const lp_frame_t *f);
void lp__coord_on_tokenized(lp_coord_t *c, lp__req_t *r, const Lmpipe__Msg *m);

#endif
