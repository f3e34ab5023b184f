/* shm-ring.h - the shared-memory ring of logit rows between engine-svc and
 * sampler-svc.  This header is the one description of the layout.
 *
 * The engine creates the segment (shm_open with a random name, mode 0600),
 * writes each logit row it computes into a free slot and publishes it; the
 * sampler opens the segment by name, reads a published slot in place and
 * releases it.  A slot is named on the wire by (index, sequence number): the
 * sequence number is stamped into the slot when it is acquired, so a stale or
 * reused reference is detected.  A full ring is never overwritten: acquire
 * fails with LP_ERR(EAGAIN) and the engine waits.
 *
 * Segment layout (all offsets from the start, little-endian host order):
 *
 *   0                          lp_shm_ring_header_t     (64 bytes)
 *   64                         lp_shm_slot_header_t [n_slots] (64 bytes each)
 *   data_offset (4096-aligned) n_slots rows, slot_stride bytes apart
 *
 * Slot states move FREE -> WRITING (engine) -> READY or FAILED (engine) ->
 * FREE or SAMPLED (sampler).  SAMPLED is FREE with the token the sampler
 * chose from the row left in `token`: a chained step (StepSeq.chain) feeds
 * it to the engine without a round trip through the coordinator.  The
 * writer takes FREE and SAMPLED slots alike.  READY and FAILED wake the
 * sampler, FREE and SAMPLED the engine, through a futex on the state word.
 * Each transition is an atomic store with release order; the other side
 * loads with acquire order, so row data written before READY is visible to
 * the sampler, and the token written before SAMPLED to the engine. */
#ifndef LP_SHM_RING_H
#define LP_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP_SHM_RING_MAGIC 0x314752524d48534cULL /* "LSHMRRG1" */
#define LP_SHM_RING_VERSION 3u
#define LP_SHM_RING_MAX_SLOTS 4096u
#define LP_SHM_RING_DATA_ALIGN 4096u

enum lp_shm_slot_state {
    LP_SHM_SLOT_FREE = 0,
    LP_SHM_SLOT_WRITING = 1,
    LP_SHM_SLOT_READY = 2,
    LP_SHM_SLOT_FAILED = 3, /* the step that was to fill it failed */
    LP_SHM_SLOT_SAMPLED = 4, /* free; `token` holds the sampler's choice */
};

typedef struct lp_shm_ring_header {
    uint64_t magic;       /* LP_SHM_RING_MAGIC */
    uint32_t version;     /* LP_SHM_RING_VERSION */
    uint32_t n_slots;     /* 1 .. LP_SHM_RING_MAX_SLOTS */
    uint32_t row_len;     /* floats per row (n_vocab) */
    uint32_t owner_pid;   /* the engine that created the segment */
    uint64_t slot_stride; /* bytes between rows: row_len*4 rounded up to 64 */
    uint64_t data_offset; /* first row; multiple of LP_SHM_RING_DATA_ALIGN */
    uint64_t total_bytes; /* size of the segment */
    uint32_t reader_pid;  /* the sampler that opened it last (0: none yet) */
    uint32_t reserved32;
    uint64_t reserved[1];
} lp_shm_ring_header_t;

typedef struct lp_shm_slot_header {
    _Atomic uint32_t state; /* enum lp_shm_slot_state */
    uint32_t n_floats;      /* floats written (row_len) */
    _Atomic uint64_t seq;   /* sequence number of the current contents */
    _Atomic int32_t token;  /* SAMPLED: the token chosen from the row */
    uint32_t pad;
    uint64_t compute_ns;    /* READY: the engine's compute time of the step
                             * that wrote the row (the same for all its rows) */
    uint64_t reserved[4];
} lp_shm_slot_header_t;

_Static_assert(sizeof(lp_shm_ring_header_t) == 64, "ring header is 64 bytes");
_Static_assert(sizeof(lp_shm_slot_header_t) == 64, "slot header is 64 bytes");
_Static_assert(sizeof(_Atomic uint32_t) == 4 && sizeof(_Atomic uint64_t) == 8,
               "atomics have their plain size");
_Static_assert(offsetof(lp_shm_slot_header_t, seq) == 8, "slot seq at offset 8");
_Static_assert(offsetof(lp_shm_slot_header_t, token) == 16, "slot token at offset 16");
_Static_assert(offsetof(lp_shm_slot_header_t, compute_ns) == 24, "slot compute_ns at offset 24");
_Static_assert(offsetof(lp_shm_ring_header_t, slot_stride) == 24, "stride at offset 24");

typedef struct lp_shm_ring lp_shm_ring_t;

/* Engine side.  Create a segment named `name` ("/lmpipe-..."; NULL picks a
 * random name) with n_slots rows of row_len floats.  The creator unlinks the
 * name in lp_shm_ring_destroy(). */
int lp_shm_ring_create(const char *name, uint32_t n_slots, uint32_t row_len,
                       lp_shm_ring_t **out);
/* Sampler side.  Open and validate an existing segment: magic, version and
 * every size against the segment's real size. */
int lp_shm_ring_open(const char *name, lp_shm_ring_t **out);
/* Unmap; the creator also unlinks the name. */
void lp_shm_ring_destroy(lp_shm_ring_t **self_p);

/* Borrowed, valid for the ring's life. */
const char *lp_shm_ring_name(const lp_shm_ring_t *r);
uint32_t lp_shm_ring_n_slots(const lp_shm_ring_t *r);
uint32_t lp_shm_ring_row_len(const lp_shm_ring_t *r);
uint32_t lp_shm_ring_n_free(const lp_shm_ring_t *r);
/* The whole mapping, for page-locking it (lp_engine_register_host).
 * Borrowed, valid for the ring's life. */
void lp_shm_ring_region(const lp_shm_ring_t *r, void **base, size_t *size);

/* Writer: take a free (or sampled) slot and stamp it with a new sequence number.  *row
 * points at row_len floats in the segment, valid until publish.  Returns
 * LP_ERR(EAGAIN) when every slot is taken. */
int lp_shm_ring_acquire(lp_shm_ring_t *r, uint32_t *slot, uint64_t *seq, float **row);
/* Writer: take the given slot (which the sender chose) and stamp it with
 * `seq`, waiting up to wait_ms for the reader to free it.  LP_ERR(ERANGE)
 * for a bad index, LP_ERR(ETIMEDOUT) when it stays taken. */
int lp_shm_ring_acquire_at(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int wait_ms, float **row);
/* Writer: mark an acquired slot failed (its row will not come) and wake
 * its readers; the reader frees it like a published one. */
int lp_shm_ring_fail(lp_shm_ring_t *r, uint32_t slot, uint64_t seq);
/* Writer: make an acquired slot readable. */
int lp_shm_ring_publish(lp_shm_ring_t *r, uint32_t slot, uint64_t seq);
/* The same, with the compute time of the step that wrote the row, for the
 * reader's step metrics (lp_shm_ring_compute_ns). */
int lp_shm_ring_publish_timed(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, uint64_t compute_ns);
/* Writer: give back an acquired slot that was never published. */
int lp_shm_ring_abandon(lp_shm_ring_t *r, uint32_t slot, uint64_t seq);

/* Reader: the row of a published slot, in place, valid until release.
 * LP_ERR(ERANGE) for a bad index, LP_ERR(ESTALE) when the slot does not
 * hold `seq` or is not published. */
int lp_shm_ring_read(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, const float **row);
/* Reader: wait up to wait_ms for slot to hold `seq` published: 0, then
 * read it; LP_ERR(EIO) when the writer failed it; LP_ERR(EPIPE) when the
 * writer's process has exited; LP_ERR(ETIMEDOUT). */
int lp_shm_ring_wait(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int wait_ms);
/* Reader: the compute_ns a published slot holding `seq` was stamped with
 * (0: none); same checks as read. */
int lp_shm_ring_compute_ns(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, uint64_t *ns);
/* Reader: hand the slot back to the writer (same checks as read; a failed
 * slot is freed too), waking a writer that waits for its token. */
int lp_shm_ring_release(lp_shm_ring_t *r, uint32_t slot, uint64_t seq);
/* Reader: hand a published slot back with the token chosen from its row
 * (state SAMPLED), waking a writer that waits for it. */
int lp_shm_ring_release_token(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int32_t token);
/* Writer: whether the process that opened the ring last as a reader has
 * exited (a killed sampler): what it held will not be handed back until a
 * new reader opens the ring, which frees those slots. */
bool lp_shm_ring_reader_gone(const lp_shm_ring_t *r);
/* Writer: wait up to wait_ms for the reader to hand back slot `slot`
 * holding `seq`, and give the token it left.  LP_ERR(ENODATA) when the
 * reader released it without one (its sampling failed, or the row was only
 * released); LP_ERR(ESTALE) when the slot no longer holds `seq`;
 * LP_ERR(ETIMEDOUT). */
int lp_shm_ring_wait_token(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int wait_ms,
                           int32_t *token);

/* Make this side's waits (acquire_at, wait, wait_token) give up with
 * LP_ERR(ECANCELED) once stop() returns true, checked at least every 50 ms:
 * a service asked to stop is not held by a full ring.  stop may be NULL
 * (the default: waits end only on their own conditions or timeout). */
void lp_shm_ring_set_stop(lp_shm_ring_t *r, bool (*stop)(void));
/* Whether stop() (lp_shm_ring_set_stop) says to give up now. */
bool lp_shm_ring_stopping(const lp_shm_ring_t *r);

/* A random segment name "/lmpipe-PID-HEX" in buf (at least 40 bytes). */
void lp_shm_ring_random_name(char *buf, size_t size);

#endif
