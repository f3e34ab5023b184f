/* coord-internal.h - the coordinator's state, shared by coord.c (services,
 * scheduling, streaming) and client-api.c (the client ROUTER). */
#ifndef LP_COORD_INTERNAL_H
#define LP_COORD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coord.h"
#include "frame.h"
#include "textstream.h"
#include "zloop.h"

enum { B_TOK, B_ENG, B_SAMP, B_COUNT };

enum opkind { OP_NONE, OP_HELLO, OP_TOKENIZE, OP_DETOK, OP_STEP, OP_SOPEN, OP_SCLOSE, OP_SAMPLE };

typedef struct op {
    uint64_t id;
    enum opkind kind;
    uint64_t req; /* request key, 0 for none */
} op_t;

typedef struct backend {
    const char *name;
    Lmpipe__Role role;
    void *sock;
    lp_zsock_t *zs;
    Lmpipe__Msg *hello; /* the service's Hello reply (owned); NULL until then */
    op_t *ops;          /* FIFO ring of pending operations */
    size_t head, n, cap;
    uint64_t next_id;
    struct lp_coord *owner;
    int which;
} backend_t;

enum rstate { R_TOKENIZING, R_WAIT_SLOT, R_OPENING, R_RUNNING, R_DONE };

typedef struct tokinfo { /* a sampled token waiting for its piece */
    int32_t id;
    bool has_logprob;
    float logprob;
    uint64_t strategy_version; /* the sampler strategy that chose it */
    size_t n_top;
    Lmpipe__TokenProb top[32];
} tokinfo_t;

typedef struct req {
    uint64_t key;              /* the coordinator's id, also the sampler session */
    uint8_t peer[LP_FRAME_MAX_PEER];
    size_t peer_len;
    uint64_t client_id;        /* Msg.id of the client's Generate */
    enum rstate state;
    int32_t *prompt;
    size_t n_prompt;
    int32_t seq;               /* engine slot, -1 when none */
    int32_t n_past;            /* tokens in the KV cache */
    int32_t next_tok;          /* sampled, not yet fed */
    bool has_next;
    /* The request's newest logit row, in a step in flight, whose token is
     * neither known nor fed yet; with the ring, where it lies. */
    bool row_pending, row_chainable;
    uint32_t row_slot;
    uint64_t row_seq;
    int32_t fed_ahead;         /* tokens fed by chained steps before their sample came back */
    bool session_open;
    int32_t n_gen, n_predict;
    bool ignore_eos;
    char *params_json;
    char **stops;
    size_t *stop_lens, n_stops;
    lp_textstream_t *ts;
    tokinfo_t *pend;           /* FIFO of tokens awaiting detokenization */
    size_t pend_head, pend_n, pend_cap;
    Lmpipe__FinishReason reason;
    int stop_idx;
    char error[512];
    bool client_gone;
    bool detok_open;           /* the tokenizer holds a decoder for this request */
    char *tail;                /* text released by the final flush */
    size_t tail_len;
    uint64_t t_start, t_first, t_last;
} req_t;

typedef struct entry { /* one entry of a step in flight */
    uint64_t req;
    int32_t n_tokens, n_logits;
    int32_t n_past;  /* the request's cached tokens once the step has run */
} entry_t;

/* A step in flight.  With the ring, two may be: the newer one feeds the
 * tokens the sampler picks from the older one's rows (StepSeq.chain). */
enum { MAX_STEPS = 2 };
typedef struct step {
    uint64_t no;        /* 0: this record is unused */
    entry_t *entries;   /* max_seqs */
    size_t n_entries;
    size_t n_rows;      /* logit rows */
    bool early;         /* ring slots chosen here, SampleRequest sent with the step */
    uint32_t ring_base; /* early: its rows are in slots ring_base.. (cyclic) */
    bool step_wait;     /* a StepReply is due */
    bool sample_wait;   /* a SampleReply is due */
} step_t;

struct lp_coord {
    lp_coord_params_t p;
    lp_service_t *svc;
    backend_t b[B_COUNT];
    bool ready, failed;
    char fail_msg[1024];
    bool use_shm;
    bool samp_detok; /* sampler-svc gives each token's text (SamplerOpen.detok) */
    int32_t n_vocab, eos_id, bos_id, n_ctx, max_seqs, max_batch_tokens;
    req_t **reqs;
    size_t n_reqs, cap_reqs;
    uint64_t next_key;
    uint8_t *slot_used;
    step_t steps[MAX_STEPS];
    uint64_t next_step_no;
    int32_t *tokbuf; /* the tokens of the step being built */
    uint8_t *eog;    /* n_vocab flags: end-of-generation tokens */
    int32_t *eog_ids; /* the same as a list */
    size_t n_eog_ids;
    /* While sample results are handled, tokenizer messages wait here so that
     * the next engine step goes out first (detokenizing overlaps it). */
    size_t rr;       /* round-robin start of the decode pass */
    uint64_t ring_seq; /* last sequence number given to a ring slot */
    size_t ring_slots; /* slots in the engine's ring */
    bool hold_tok;
    struct text { uint64_t req; tokinfo_t ti; const uint8_t *data; size_t len; } *texts;
    size_t n_texts;  /* token events waiting for the next step to go out (max_seqs) */
    struct held { uint8_t *buf; size_t len; } *held;
    size_t n_held, cap_held;
};

/* coord.c */
req_t *lp__req_find_client(lp_coord_t *c, const uint8_t *peer, size_t len, uint64_t id);
void lp__req_free(req_t *r);
/* Send `m` to a service (B_TOK, B_ENG, B_SAMP) and remember what its reply
 * is for (OP_NONE: no reply expected). */
int lp__coord_send(lp_coord_t *c, int which, enum opkind kind, uint64_t req, Lmpipe__Msg *m,
                   const void *raw, size_t raw_len);
/* End a request; its final event goes out once its last piece is back. */
void lp__coord_finish(lp_coord_t *c, req_t *r, Lmpipe__FinishReason reason, const char *error);
/* Admit waiting requests and send the next step when none is in flight. */
void lp__coord_pump(lp_coord_t *c);

/* client-api.c: the skeleton's hello and request callbacks. */
int lp__coord_client_hello(void *ctx, const Lmpipe__Hello *peer, bool controller, Lmpipe__Hello *mine);
int lp__coord_client(void *ctx, lp_service_t *svc, const lp_frame_t *f);

#endif
