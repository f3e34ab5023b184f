/* shm-ring.c - the shared-memory ring of logit rows (layout in shm-ring.h). */
#include "shm-ring.h"

#include "error.h"
#include "sysinfo.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct lp_shm_ring {
    char name[256];
    bool owner;
    uint8_t *base;
    size_t size;
    lp_shm_ring_header_t *hdr;
    lp_shm_slot_header_t *slots;
    uint32_t next;     /* writer: where the search for a free slot starts */
    uint64_t next_seq; /* writer: last sequence number handed out */
    bool (*stop)(void); /* may be NULL; see lp_shm_ring_set_stop */
};

void lp_shm_ring_set_stop(lp_shm_ring_t *r, bool (*stop)(void)) { r->stop = stop; }
bool lp_shm_ring_stopping(const lp_shm_ring_t *r) { return r->stop && r->stop(); }

/* A wait gives up when the process is asked to stop: its caller returns,
 * and the service loop can act on the signal. */
static int check_stop(const lp_shm_ring_t *r)
{
    if (!r->stop || !r->stop()) return 0;
    return lp_error_set(LP_ERR(ECANCELED), "shm %s: stopping: the wait for the ring was given up",
                        r->name);
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

void lp_shm_ring_random_name(char *buf, size_t size)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) r = (uint64_t)rand() ^ (uint64_t)getpid() << 32;
    snprintf(buf, size, "/lmpipe-%d-%016llx", (int)getpid(), (unsigned long long)r);
}

static int check_name(const char *name)
{
    size_t n = strlen(name);
    if (n < 2 || n >= 255 || name[0] != '/' || strchr(name + 1, '/'))
        return lp_error_set(LP_ERR(EINVAL), "shm name '%s': must be '/' then 1-253 characters "
                            "without '/'", name);
    return 0;
}

static void layout(uint32_t n_slots, uint32_t row_len, uint64_t *stride, uint64_t *data_off,
                   uint64_t *total)
{
    *stride = round_up((size_t)row_len * sizeof(float), 64);
    *data_off = round_up(sizeof(lp_shm_ring_header_t) + (size_t)n_slots * sizeof(lp_shm_slot_header_t),
                         LP_SHM_RING_DATA_ALIGN);
    *total = *data_off + *stride * n_slots;
}

static void set_pointers(lp_shm_ring_t *r)
{
    r->hdr = (lp_shm_ring_header_t *)r->base;
    r->slots = (lp_shm_slot_header_t *)(r->base + sizeof(lp_shm_ring_header_t));
}

int lp_shm_ring_create(const char *name, uint32_t n_slots, uint32_t row_len, lp_shm_ring_t **out)
{
    *out = NULL;
    if (n_slots < 1 || n_slots > LP_SHM_RING_MAX_SLOTS)
        return lp_error_set(LP_ERR(EINVAL), "shm ring: n_slots %u is not in 1..%u", n_slots,
                            LP_SHM_RING_MAX_SLOTS);
    if (row_len < 1 || row_len > (1u << 26))
        return lp_error_set(LP_ERR(EINVAL), "shm ring: row_len %u is not in 1..2^26", row_len);
    lp_shm_ring_t *r = calloc(1, sizeof(*r));
    if (!r) return LP_ERR(ENOMEM);
    if (name) snprintf(r->name, sizeof(r->name), "%s", name);
    else lp_shm_ring_random_name(r->name, sizeof(r->name));
    int rc = check_name(r->name);
    if (rc) { free(r); return rc; }
    uint64_t stride, data_off, total;
    layout(n_slots, row_len, &stride, &data_off, &total);
    int fd = shm_open(r->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        rc = LP_ERR(errno);
        free(r);
        return lp_error_set(rc, "shm_open %s: %s", name ? name : "(random)", strerror(-rc));
    }
    /* The name exists from here on: unlink it on every failure path. */
    if (ftruncate(fd, (off_t)total) != 0) {
        rc = LP_ERR(errno);
        lp_error_set(rc, "shm %s: ftruncate %llu bytes: %s", r->name, (unsigned long long)total,
                     strerror(errno));
        goto fail;
    }
    r->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
        r->base = NULL;
        rc = LP_ERR(errno);
        lp_error_set(rc, "shm %s: mmap: %s", r->name, strerror(errno));
        goto fail;
    }
    close(fd);
    fd = -1;
    r->size = total;
    r->owner = true;
    /* Sequence numbers start at a random point, so that a reference made
     * up by a stray peer does not name a live row. */
    if (getrandom(&r->next_seq, sizeof(r->next_seq), 0) != (ssize_t)sizeof(r->next_seq))
        r->next_seq = (uint64_t)getpid() << 32;
    r->next_seq >>= 1;
    set_pointers(r);
    memset(r->base, 0, data_off);
    r->hdr->version = LP_SHM_RING_VERSION;
    r->hdr->n_slots = n_slots;
    r->hdr->row_len = row_len;
    r->hdr->owner_pid = (uint32_t)getpid();
    r->hdr->slot_stride = stride;
    r->hdr->data_offset = data_off;
    r->hdr->total_bytes = total;
    for (uint32_t i = 0; i < n_slots; i++) {
        atomic_store_explicit(&r->slots[i].state, LP_SHM_SLOT_FREE, memory_order_relaxed);
        atomic_store_explicit(&r->slots[i].seq, 0, memory_order_relaxed);
    }
    /* The magic goes last: a reader that sees it sees a complete header. */
    atomic_thread_fence(memory_order_release);
    r->hdr->magic = LP_SHM_RING_MAGIC;
    *out = r;
    return 0;
fail:
    if (fd >= 0) close(fd);
    shm_unlink(r->name);
    free(r);
    return rc;
}

static void futex_wake(_Atomic uint32_t *addr);
static bool reader_dead(const lp_shm_ring_t *r);

int lp_shm_ring_open(const char *name, lp_shm_ring_t **out)
{
    *out = NULL;
    int rc = check_name(name);
    if (rc) return rc;
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        rc = LP_ERR(errno);
        return lp_error_set(rc, "shm_open %s: %s", name, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = LP_ERR(errno);
        close(fd);
        return lp_error_set(rc, "shm %s: fstat: %s", name, strerror(-rc));
    }
    size_t size = (size_t)st.st_size;
    if (size < LP_SHM_RING_DATA_ALIGN) {
        close(fd);
        return lp_error_set(LP_ERR(EPROTO), "shm %s: %zu bytes is too small for a ring", name, size);
    }
    void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
        rc = LP_ERR(errno);
        return lp_error_set(rc, "shm %s: mmap: %s", name, strerror(-rc));
    }
    lp_shm_ring_header_t h;
    memcpy(&h, base, sizeof(h));
    atomic_thread_fence(memory_order_acquire);
    const char *bad = NULL;
    uint64_t stride = 0, data_off = 0, total = 0;
    if (h.magic != LP_SHM_RING_MAGIC) bad = "magic";
    else if (h.version != LP_SHM_RING_VERSION) bad = "version";
    else if (h.n_slots < 1 || h.n_slots > LP_SHM_RING_MAX_SLOTS) bad = "n_slots";
    else if (h.row_len < 1 || h.row_len > (1u << 26)) bad = "row_len";
    else {
        layout(h.n_slots, h.row_len, &stride, &data_off, &total);
        if (h.slot_stride != stride) bad = "slot_stride";
        else if (h.data_offset != data_off) bad = "data_offset";
        else if (h.total_bytes != total || total > size) bad = "total_bytes";
    }
    if (bad) {
        munmap(base, size);
        return lp_error_set(LP_ERR(EPROTO), "shm %s: bad ring header field %s (version %u, "
                            "%u slots, row_len %u, %zu bytes)", name, bad, h.version, h.n_slots,
                            h.row_len, size);
    }
    lp_shm_ring_t *r = calloc(1, sizeof(*r));
    if (!r) {
        munmap(base, size);
        return LP_ERR(ENOMEM);
    }
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->base = base;
    r->size = size;
    set_pointers(r);
    /* A reader that died (a sampler killed and restarted) never releases
     * the rows it held: they are freed here, so that the writer can use
     * their slots again. */
    if (reader_dead(r)) {
        for (uint32_t i = 0; i < r->hdr->n_slots; i++) {
            lp_shm_slot_header_t *s = &r->slots[i];
            uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
            if ((st == LP_SHM_SLOT_READY || st == LP_SHM_SLOT_FAILED) &&
                atomic_compare_exchange_strong_explicit(&s->state, &st, LP_SHM_SLOT_FREE,
                                                        memory_order_acq_rel, memory_order_acquire))
                futex_wake(&s->state);
        }
    }
    __atomic_store_n(&r->hdr->reader_pid, (uint32_t)getpid(), __ATOMIC_RELEASE);
    *out = r;
    return 0;
}

void lp_shm_ring_destroy(lp_shm_ring_t **self_p)
{
    if (!self_p || !*self_p) return;
    lp_shm_ring_t *r = *self_p;
    if (r->base) munmap(r->base, r->size);
    if (r->owner) shm_unlink(r->name);
    free(r);
    *self_p = NULL;
}

const char *lp_shm_ring_name(const lp_shm_ring_t *r) { return r->name; }
uint32_t lp_shm_ring_n_slots(const lp_shm_ring_t *r) { return r->hdr->n_slots; }
uint32_t lp_shm_ring_row_len(const lp_shm_ring_t *r) { return r->hdr->row_len; }

void lp_shm_ring_region(const lp_shm_ring_t *r, void **base, size_t *size)
{
    *base = r->base;
    *size = r->size;
}

/* The writer may take a slot that the reader has handed back, with or
 * without a token. */
static bool is_free(uint32_t state)
{
    return state == LP_SHM_SLOT_FREE || state == LP_SHM_SLOT_SAMPLED;
}

uint32_t lp_shm_ring_n_free(const lp_shm_ring_t *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->hdr->n_slots; i++)
        n += is_free(atomic_load_explicit(&r->slots[i].state, memory_order_acquire));
    return n;
}

static float *row_at(const lp_shm_ring_t *r, uint32_t slot)
{
    return (float *)(r->base + r->hdr->data_offset + (size_t)slot * r->hdr->slot_stride);
}

int lp_shm_ring_acquire(lp_shm_ring_t *r, uint32_t *slot, uint64_t *seq, float **row)
{
    if (!r->owner) return lp_error_set(LP_ERR(EPERM), "shm %s: only the creator writes", r->name);
    uint32_t n = r->hdr->n_slots;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (r->next + k) % n;
        lp_shm_slot_header_t *s = &r->slots[i];
        if (!is_free(atomic_load_explicit(&s->state, memory_order_acquire))) continue;
        /* Only the writer moves FREE -> WRITING, so no compare-exchange is needed. */
        uint64_t q = ++r->next_seq;
        atomic_store_explicit(&s->seq, q, memory_order_relaxed);
        atomic_store_explicit(&s->state, LP_SHM_SLOT_WRITING, memory_order_release);
        s->n_floats = r->hdr->row_len;
        r->next = (i + 1) % n;
        *slot = i;
        *seq = q;
        *row = row_at(r, i);
        return 0;
    }
    return LP_ERR(EAGAIN);
}

static int slot_range_error(const lp_shm_ring_t *r, uint32_t slot)
{
    return lp_error_set(LP_ERR(ERANGE), "shm %s: slot %u out of range (%u slots)", r->name, slot,
                        r->hdr->n_slots);
}

static int check_ref(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, uint32_t want_state)
{
    if (slot >= r->hdr->n_slots) return slot_range_error(r, slot);
    const lp_shm_slot_header_t *s = &r->slots[slot];
    uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
    uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if (st != want_state || q != seq)
        return lp_error_set(LP_ERR(ESTALE), "shm %s: slot %u holds seq %llu in state %u, not seq "
                            "%llu in state %u", r->name, slot, (unsigned long long)q, st,
                            (unsigned long long)seq, want_state);
    return 0;
}

/* Shared (not private) futexes: the waiter is another process. */
static void futex_wake(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void futex_wait(const _Atomic uint32_t *addr, uint32_t val, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Sleep until the slot's state leaves st, for at most 50 ms and not past
 * the deadline (the callers look again, so that a dead peer is noticed). */
/* The ring's last reader has exited: what it held will not come back. */
static bool reader_dead(const lp_shm_ring_t *r)
{
    uint32_t pid = __atomic_load_n(&r->hdr->reader_pid, __ATOMIC_ACQUIRE);
    return pid && pid != (uint32_t)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

bool lp_shm_ring_reader_gone(const lp_shm_ring_t *r) { return reader_dead(r); }

static void wait_change(const lp_shm_slot_header_t *s, uint32_t st, int64_t deadline)
{
    int64_t left = deadline - (int64_t)lp_now_ms();
    if (left > 0) futex_wait(&s->state, st, left > 50 ? 50 : (int)left);
}

int lp_shm_ring_acquire_at(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int wait_ms, float **row)
{
    if (!r->owner) return lp_error_set(LP_ERR(EPERM), "shm %s: only the creator writes", r->name);
    if (slot >= r->hdr->n_slots) return slot_range_error(r, slot);
    lp_shm_slot_header_t *s = &r->slots[slot];
    int64_t deadline = (int64_t)lp_now_ms() + wait_ms;
    while (!is_free(atomic_load_explicit(&s->state, memory_order_acquire))) {
        int src = check_stop(r);
        if (src) return src;
        if ((int64_t)lp_now_ms() >= deadline)
            return lp_error_set(LP_ERR(ETIMEDOUT), "shm %s: slot %u stayed taken (the reader has "
                                "not released it)", r->name, slot);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    atomic_store_explicit(&s->seq, seq, memory_order_relaxed);
    atomic_store_explicit(&s->state, LP_SHM_SLOT_WRITING, memory_order_release);
    s->n_floats = r->hdr->row_len;
    *row = row_at(r, slot);
    return 0;
}

/* Writer: move an acquired slot to `state`, waking its readers unless the
 * slot only goes back to the writer (FREE). */
static int end_write(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, uint32_t state)
{
    int rc = check_ref(r, slot, seq, LP_SHM_SLOT_WRITING);
    if (rc) return rc;
    atomic_store_explicit(&r->slots[slot].state, state, memory_order_release);
    if (state != LP_SHM_SLOT_FREE) futex_wake(&r->slots[slot].state);
    return 0;
}

int lp_shm_ring_publish(lp_shm_ring_t *r, uint32_t slot, uint64_t seq)
{
    return lp_shm_ring_publish_timed(r, slot, seq, 0);
}

int lp_shm_ring_publish_timed(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, uint64_t compute_ns)
{
    int rc = check_ref(r, slot, seq, LP_SHM_SLOT_WRITING);
    if (rc) return rc;
    r->slots[slot].compute_ns = compute_ns; /* ordered before READY by its release store */
    return end_write(r, slot, seq, LP_SHM_SLOT_READY);
}

int lp_shm_ring_fail(lp_shm_ring_t *r, uint32_t slot, uint64_t seq)
{
    return end_write(r, slot, seq, LP_SHM_SLOT_FAILED);
}

int lp_shm_ring_wait(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int wait_ms)
{
    if (slot >= r->hdr->n_slots) return slot_range_error(r, slot);
    lp_shm_slot_header_t *s = &r->slots[slot];
    int64_t deadline = (int64_t)lp_now_ms() + wait_ms;
    for (;;) {
        uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
        uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (q == seq && st == LP_SHM_SLOT_READY) return 0;
        if (q == seq && st == LP_SHM_SLOT_FAILED)
            return lp_error_set(LP_ERR(EIO), "shm %s: the step that was to fill slot %u failed",
                                r->name, slot);
        int src = check_stop(r);
        if (src) return src;
        if ((int64_t)lp_now_ms() >= deadline)
            return lp_error_set(LP_ERR(ETIMEDOUT), "shm %s: slot %u did not get seq %llu in %d ms",
                                r->name, slot, (unsigned long long)seq, wait_ms);
        /* A writer that died will never publish: do not wait for it. */
        if (r->hdr->owner_pid && kill((pid_t)r->hdr->owner_pid, 0) != 0 && errno == ESRCH)
            return lp_error_set(LP_ERR(EPIPE), "shm %s: the engine (pid %u) that writes the ring "
                                "has exited", r->name, r->hdr->owner_pid);
        wait_change(s, st, deadline);
    }
}

int lp_shm_ring_abandon(lp_shm_ring_t *r, uint32_t slot, uint64_t seq)
{
    return end_write(r, slot, seq, LP_SHM_SLOT_FREE);
}

int lp_shm_ring_read(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, const float **row)
{
    int rc = check_ref(r, slot, seq, LP_SHM_SLOT_READY);
    if (rc) return rc;
    *row = row_at(r, slot);
    return 0;
}

int lp_shm_ring_compute_ns(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, uint64_t *ns)
{
    *ns = 0;
    int rc = check_ref(r, slot, seq, LP_SHM_SLOT_READY);
    if (!rc) *ns = r->slots[slot].compute_ns;
    return rc;
}

int lp_shm_ring_release(lp_shm_ring_t *r, uint32_t slot, uint64_t seq)
{
    if (slot >= r->hdr->n_slots) return slot_range_error(r, slot);
    /* Compare-exchange on the state so that two releases of one reference
     * cannot free a slot that the writer has since reused. */
    lp_shm_slot_header_t *s = &r->slots[slot];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != seq)
        return check_ref(r, slot, seq, LP_SHM_SLOT_READY);
    uint32_t expect = LP_SHM_SLOT_READY;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, LP_SHM_SLOT_FREE,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        expect = LP_SHM_SLOT_FAILED;
        if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, LP_SHM_SLOT_FREE,
                                                     memory_order_acq_rel, memory_order_acquire))
            return check_ref(r, slot, seq, LP_SHM_SLOT_READY);
    }
    futex_wake(&s->state); /* an engine may wait for this slot's token */
    return 0;
}

int lp_shm_ring_release_token(lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int32_t token)
{
    int rc = check_ref(r, slot, seq, LP_SHM_SLOT_READY);
    if (rc) return rc;
    lp_shm_slot_header_t *s = &r->slots[slot];
    atomic_store_explicit(&s->token, token, memory_order_relaxed);
    uint32_t expect = LP_SHM_SLOT_READY;
    if (!atomic_compare_exchange_strong_explicit(&s->state, &expect, LP_SHM_SLOT_SAMPLED,
                                                 memory_order_acq_rel, memory_order_acquire))
        return check_ref(r, slot, seq, LP_SHM_SLOT_READY);
    futex_wake(&s->state);
    return 0;
}

int lp_shm_ring_wait_token(const lp_shm_ring_t *r, uint32_t slot, uint64_t seq, int wait_ms,
                           int32_t *token)
{
    if (slot >= r->hdr->n_slots) return slot_range_error(r, slot);
    lp_shm_slot_header_t *s = &r->slots[slot];
    int64_t deadline = (int64_t)lp_now_ms() + wait_ms;
    for (;;) {
        uint32_t st = atomic_load_explicit(&s->state, memory_order_acquire);
        uint64_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
        if (q != seq)
            return lp_error_set(LP_ERR(ESTALE), "shm %s: slot %u holds seq %llu, not %llu", r->name,
                                slot, (unsigned long long)q, (unsigned long long)seq);
        if (st == LP_SHM_SLOT_SAMPLED) {
            *token = atomic_load_explicit(&s->token, memory_order_relaxed);
            return 0;
        }
        if (st == LP_SHM_SLOT_FREE)
            return lp_error_set(LP_ERR(ENODATA), "shm %s: slot %u was released without a token "
                                "(its sampling failed)", r->name, slot);
        if (st == LP_SHM_SLOT_WRITING)
            return lp_error_set(LP_ERR(ESTALE), "shm %s: slot %u is still being written", r->name,
                                slot);
        int src = check_stop(r);
        if (src) return src;
        if ((int64_t)lp_now_ms() >= deadline)
            return lp_error_set(LP_ERR(ETIMEDOUT), "shm %s: the sampler did not hand back slot %u "
                                "in %d ms", r->name, slot, wait_ms);
        wait_change(s, st, deadline);
    }
}
