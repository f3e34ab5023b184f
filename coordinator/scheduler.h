/* scheduler.h - the coordinator's scheduler: from the scheduling state of the
 * requests and of one engine group to the plan of the group's next step.
 *
 * It knows no sockets and no messages: the dispatcher (steps.c) turns a
 * plan into a StepRequest and a SampleRequest, and tells the scheduler what
 * came back (lp__sched_token, lp__sched_release, lp__sched_retire).  That
 * keeps the rules (continuous batching, the token budget, chaining, the
 * ring slots, fairness) testable on their own (scheduler_test.c). */
#ifndef LP_COORD_SCHED_H
#define LP_COORD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache.h"

/* With the ring, two steps of a group may be in flight: the newer one
 * feeds the tokens the sampler picks from the older one's rows. */
#define LP__SCHED_MAX_STEPS 2

/* A request as the scheduler sees it. */
typedef struct lp__sched_seq {
    uint64_t key;           /* the request's key */
    bool running;           /* in the steps (its sampler session is open) */
    int32_t slot;           /* engine sequence slot, -1 when none */
    const int32_t *prompt;
    int32_t n_prompt;
    int32_t n_past;         /* tokens in the KV cache once the steps sent have run */
    int32_t next_tok;       /* sampled, not yet fed */
    bool has_next;
    /* The newest logit row, in a step in flight, whose token is neither
     * known nor fed yet; with the ring, where it lies. */
    bool row_pending, row_chainable;
    uint32_t row_slot;
    uint64_t row_seq;
    int32_t fed_ahead;      /* tokens fed by chained steps before their sample came back */
    int32_t n_gen;          /* tokens generated */
    int32_t n_predict;      /* -1: no limit */
    /* Paged KV only (the group's `paged`); all zero otherwise. */
    int32_t *hist;          /* the token of each position: the prompt, then every
                             * sampled token (owned, cap_hist) */
    int32_t n_hist, cap_hist;
    uint32_t *blocks;       /* the block table from position 0 (owned, cap_blocks) */
    int32_t n_blocks, cap_blocks;
    /* A group with sliding-window layers: their table in the group's second
     * pool, as long as `blocks`; entries below swa_lo are out of the window
     * of every position still to come, given back, UINT32_MAX (owned). */
    uint32_t *swa;
    int32_t swa_lo;
    int32_t n_hashed;       /* leading blocks registered in the cache */
    uint64_t chain_hash;    /* the chain hash of the last of them */
    int32_t n_done;         /* positions whose KV a step has confirmed */
    int32_t n_refill;       /* > 0 after a preemption: hist[0..n_refill) is prefilled
                             * again, without a row, before the pending token */
    bool parked;            /* preempted: no KV; waits for its rows in flight */
    uint32_t epoch;         /* bumped by each preemption */
    int32_t n_reused;       /* prompt tokens taken from the cache at admission */
} lp__sched_seq_t;

/* One request's part of a step. */
typedef struct lp__sched_entry {
    uint64_t req;           /* the request's key */
    int32_t slot, pos;      /* engine sequence slot and first position */
    int32_t n_tokens;       /* tokens this step adds to the cache */
    const int32_t *tokens;  /* NULL when chained: the engine reads the token from chain_* */
    uint32_t chain_slot;
    uint64_t chain_seq;
    int32_t n_logits;       /* 0 or 1 */
    int32_t n_past;         /* the request's cached tokens once the step has run */
    uint32_t row_slot;      /* early: the ring slot and sequence number of its row */
    uint64_t row_seq;
    const uint32_t *blocks; /* paged: the block table (borrowed from the request,
                             * valid until the step is sent), n_blocks long */
    int32_t n_blocks;
    const uint32_t *swa;    /* sliding-window layers: their table, n_blocks long; NULL */
    uint32_t epoch;         /* the request's epoch when planned */
} lp__sched_entry_t;

/* A step planned or in flight. */
typedef struct lp__sched_step {
    uint64_t no;            /* 0: this record is unused */
    lp__sched_entry_t *entries; /* max_seqs */
    size_t n_entries;
    size_t n_rows;          /* logit rows */
    bool early;             /* ring slots chosen here; the SampleRequest goes with the step */
    uint32_t ring_base;     /* early: its rows are in slots ring_base.. (cyclic) */
    bool step_wait;         /* a StepReply is due */
    bool sample_wait;       /* a SampleReply is due */
    uint64_t t_sent;        /* when the step went out (metrics) */
    uint64_t engine_ns;     /* its StepReply's compute_ns, when it had one */
} lp__sched_step_t;

/* An engine group's capacity and what it has in flight. */
typedef struct lp__sched_group {
    int32_t max_seqs, max_batch_tokens, n_ctx;
    int32_t prefill_chunk;  /* prompt tokens in a step with decode tokens; 0: no cap */
    bool ring;              /* logit rows in the shared-memory ring */
    size_t ring_slots;
    uint64_t ring_seq;      /* last sequence number given to a ring slot */
    size_t rr;              /* round-robin start of the decode pass */
    uint64_t next_step_no;
    uint8_t *slot_used;     /* max_seqs */
    /* Paged KV: the engine announced kv_block > 0; the coordinator owns its
     * blocks (set before lp__sched_group_init, with kv_block, kv_blocks). */
    bool paged;
    bool prefix_cache;      /* full blocks are kept and shared by their hash */
    int32_t kv_block, kv_blocks;
    lp__kv_t kv;
    /* Sliding-window layers (the engine's Hello.kv_swa_window > 0): a
     * second pool of kv_blocks_swa blocks, one block of it per block of kv
     * but only for the positions some query can still see (docs/
     * ARCHITECTURE.md "Sliding windows"); set with kv_block, kv_blocks. */
    int32_t swa_window, kv_blocks_swa;
    bool swa;               /* set by lp__sched_group_init */
    lp__kv_t kv_swa;
    int32_t peak_used, peak_swa_used; /* most blocks of each pool held at once */
    uint64_t n_preempted;   /* requests preempted for blocks, total */
    int32_t *tokbuf;        /* max_batch_tokens + max_seqs: the tokens of the step being planned */
    lp__sched_step_t steps[LP__SCHED_MAX_STEPS];
} lp__sched_group_t;

/* A group as placement sees it. */
typedef struct lp__sched_place {
    bool ready;
    int32_t free_slots;     /* engine sequence slots free */
    size_t waiting;         /* requests placed on it still waiting for a slot */
} lp__sched_place_t;

/* The group a new request goes to: among the ready ones, the most free
 * capacity (free slots less the requests already waiting for one), then
 * the fewest waiting, then the first listed.  -1 when none is ready. */
int lp__sched_place(const lp__sched_place_t *groups, size_t n);

/* How many fewer free slots than the least loaded group a group may have
 * and still win a request by its cached prefix. */
#define LP__PLACE_SLACK 2

/* The same, weighing prefix[i], the request's prompt tokens that group i
 * holds in its prefix cache (NULL: none anywhere).  Where some group has
 * room (free capacity > 0), the groups with room and at most
 * LP__PLACE_SLACK less free capacity than the most free one compete: the
 * longest prefix wins, then the most free capacity, then the fewest
 * waiting.  Where none has room, only the most free ones compete, the same
 * way. */
int lp__sched_place_prefix(const lp__sched_place_t *groups, const int32_t *prefix, size_t n);

/* The blocks of a sliding-window pool one request holds at most: those of
 * a window and of the longest step. */
int32_t lp__sched_swa_per_seq(const lp__sched_group_t *g);

/* Allocate the group's buffers for its max_seqs and max_batch_tokens
 * (set by the caller, with ring, ring_slots and ring_seq). */
int lp__sched_group_init(lp__sched_group_t *g);
void lp__sched_group_free(lp__sched_group_t *g);

/* The lowest free engine slot, now taken; -1 when all are used. */
int32_t lp__sched_take_slot(lp__sched_group_t *g);

/* A request enters the steps (its slot taken): n_past 0, or with a paged
 * group its history and block table, and the longest cached prefix of its
 * prompt (full blocks, never the one holding the last prompt token), which
 * is not prefilled again (n_past and n_reused).  LP_ERR(ENOMEM). */
int lp__sched_seq_start(lp__sched_group_t *g, lp__sched_seq_t *s);

/* A step of epoch `epoch` that leaves the request's KV at n_past positions
 * has run: its full blocks with known tokens are registered in the cache. */
void lp__sched_done(lp__sched_group_t *g, lp__sched_seq_t *s, int32_t n_past, uint32_t epoch);

/* Free the request's blocks, drop its KV and have it recomputed later
 * (prompt and sampled tokens, no new row) once its rows in flight are back. */
void lp__sched_preempt(lp__sched_group_t *g, lp__sched_seq_t *s);

/* Plan the group's next step over `seqs` (in arrival order): a decode token
 * for every running request that has one (round-robin start), then prefill
 * chunks in arrival order while max_batch_tokens lasts.  Paged, each entry
 * gets the blocks it grows into; where the pool is short a request takes
 * the blocks of the youngest running requests younger than itself that are
 * not in this step (lp__sched_preempt); a decode token that still finds
 * none parks its own request when no younger one holds blocks, and a
 * prefill chunk shrinks to the blocks it can have.  With the ring and
 * an early step in flight, the new step is chained on it: a request whose
 * row is pending feeds that row's token, unknown yet.  The seqs are
 * advanced as the step will leave them.  Returns the step record (no,
 * entries, rows and ring slots filled; both waits false), or NULL when
 * there is nothing to do or no room. */
lp__sched_step_t *lp__sched_plan(lp__sched_group_t *g, lp__sched_seq_t *const *seqs, size_t n);

/* A sampled token `tok` of `s` came back from a step's row.  Returns true
 * when a chained step has already fed it; otherwise it is the next token
 * to feed. */
bool lp__sched_token(lp__sched_seq_t *s, int32_t tok);

/* Whether a request may get another token after the pending one (its
 * chained step would not be computed for nothing). */
bool lp__sched_will_continue(const lp__sched_group_t *g, const lp__sched_seq_t *s);

/* The request has ended: it leaves the steps and frees its slot; paged,
 * its confirmed full blocks stay cached and the others go back. */
void lp__sched_release(lp__sched_group_t *g, lp__sched_seq_t *s);

/* Forget a step once neither its StepReply nor its SampleReply is due. */
void lp__sched_retire(lp__sched_step_t *st);

/* The step in flight numbered `no`; NULL when none. */
lp__sched_step_t *lp__sched_step_find(lp__sched_group_t *g, uint64_t no);

#endif
