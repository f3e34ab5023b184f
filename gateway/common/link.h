/* link.h - an edge's link to the coordinator's client API, shared by
 * lmpipe-http and lmpipe-nats (gateway/common/): one DEALER in the edge's
 * libuv loop, the hello (retried while the pipeline is not ready, and again
 * after a coordinator restart), the dispatch of replies and events by
 * Msg.id, the vocabulary (token texts for logprobs), and a liveness check: a
 * StatsRequest every 2 s; a coordinator silent for 5 s, or whose connection
 * the socket monitor sees drop, fails every outstanding request with an
 * Error (kind unavailable) and the hello starts again. */
#ifndef LP_LINK_H
#define LP_LINK_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "frame.h"

/* One outstanding message to the coordinator: replies and events with its
 * id go to on_msg until lp_link_forget(). */
typedef struct lp_link_op lp_link_op_t;
struct lp_link_op {
    uint64_t id;
    lp_link_op_t *next;          /* hash chain */
    void (*on_msg)(lp_link_op_t *op, const Lmpipe__Msg *m);
    void *arg;
    int idx;
    bool registered;
};

typedef struct lp_link {
    /* set by the edge before lp_link_start (borrowed for the link's life) */
    uv_loop_t *loop;
    const char *coordinator;     /* its client endpoint */
    const char *curve_key;       /* this host's BASE.key; NULL: no CURVE */
    const char *server_key;      /* the coordinator's public key */
    const char *model_name;      /* NULL: the coordinator's */
    /* the link */
    void *zctx, *sock;
    struct lp_zsock *zs;
    uv_timer_t hello_timer;
    uint64_t next_id, hello_id;
    uint64_t hello_sent_ms;
    bool ready;                  /* the coordinator answered the hello */
    char reason[256];            /* why not ready */
    char model[256];             /* the served model's name */
    uint32_t n_ctx, n_vocab;
    uint32_t max_seqs;           /* the pipeline's sequence slots (the hello) */
    lp_link_op_t *ops[1024];
    /* token texts for logprobs (after the hello; NULL until then) */
    char **vocab;
    uint32_t *vocab_len;
    uint32_t vocab_n;
    lp_link_op_t vocab_op;
    bool vocab_failed;
    lp_link_op_t ping_op;
    uint64_t ping_sent_ms, last_rx_ms;
    void *mon;                   /* the socket monitor */
    struct lp_zsock *mzs;
    /* the coordinator's word on its stages (links_down, can_serve, draining) */
    bool degraded, unserving, draining;
    char down_json[1024];        /* StatsReply.links_down as a JSON array */
} lp_link_t;

int lp_link_start(lp_link_t *l);
void lp_link_stop(lp_link_t *l);
/* Free the vocabulary. */
void lp_link_clear(lp_link_t *l);
/* Send `m` under a fresh id (op->id); events with that id go to op. */
int lp_link_send(lp_link_t *l, Lmpipe__Msg *m, lp_link_op_t *op);
void lp_link_forget(lp_link_t *l, lp_link_op_t *op);
int lp_link_cancel(lp_link_t *l, uint64_t id);
/* Token id's text from the vocabulary ("" when not there); borrowed. */
const char *lp_link_token_text(const lp_link_t *l, int32_t id, size_t *len);

#endif
