/* shm-ring_test.c - the logit ring: layout, sequence numbers, stale and
 * reused slots, a full ring, corrupt headers, a writer and a reader in
 * two processes, and tokens handed back to the writer (chained steps). */
#include "shm-ring.h"

#include "../tests/check.h"
#include "error.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_basic(void)
{
    lp_shm_ring_t *w, *r;
    CHECK_RC(lp_shm_ring_create(NULL, 3, 1000, &w), 0);
    if (!w) return;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r), 0);
    if (!r) return;
    CHECK(lp_shm_ring_n_slots(r) == 3 && lp_shm_ring_row_len(r) == 1000);
    CHECK(lp_shm_ring_n_free(w) == 3);

    uint32_t s[4];
    uint64_t q[4];
    float *row[4];
    for (int i = 0; i < 3; i++) {
        CHECK_RC(lp_shm_ring_acquire(w, &s[i], &q[i], &row[i]), 0);
        for (int k = 0; k < 1000; k++) row[i][k] = (float)(i * 1000 + k);
        /* Not readable before publish. */
        const float *p;
        CHECK_RC(lp_shm_ring_read(r, s[i], q[i], &p), LP_ERR(ESTALE));
        CHECK_RC(lp_shm_ring_publish(w, s[i], q[i]), 0);
    }
    CHECK(q[0] != q[1] && q[1] != q[2]);
    /* Full: the writer never overwrites. */
    CHECK_RC(lp_shm_ring_acquire(w, &s[3], &q[3], &row[3]), LP_ERR(EAGAIN));
    CHECK(lp_shm_ring_n_free(w) == 0);

    const float *p;
    CHECK_RC(lp_shm_ring_read(r, s[1], q[1], &p), 0);
    CHECK(p[0] == 1000.0f && p[999] == 1999.0f);
    CHECK_RC(lp_shm_ring_read(r, s[1], q[1] + 1, &p), LP_ERR(ESTALE)); /* wrong seq */
    CHECK_RC(lp_shm_ring_read(r, 3, q[1], &p), LP_ERR(ERANGE));
    CHECK_RC(lp_shm_ring_release(r, s[1], q[1]), 0);
    CHECK_RC(lp_shm_ring_release(r, s[1], q[1]), LP_ERR(ESTALE)); /* twice */
    CHECK(lp_shm_ring_n_free(w) == 1);

    /* The freed slot is reused with a new sequence number; the old
     * reference is now stale. */
    CHECK_RC(lp_shm_ring_acquire(w, &s[3], &q[3], &row[3]), 0);
    CHECK(s[3] == s[1] && q[3] > q[2]);
    CHECK_RC(lp_shm_ring_publish(w, s[3], q[3]), 0);
    CHECK_RC(lp_shm_ring_read(r, s[1], q[1], &p), LP_ERR(ESTALE));
    CHECK_RC(lp_shm_ring_release(r, s[1], q[1]), LP_ERR(ESTALE));
    CHECK_RC(lp_shm_ring_read(r, s[3], q[3], &p), 0);

    /* The step's compute time travels with a published row, and only to
     * a reference that names it. */
    uint64_t ns;
    CHECK_RC(lp_shm_ring_compute_ns(r, s[3], q[3], &ns), 0);
    CHECK(ns == 0, "plain publish: compute_ns %llu", (unsigned long long)ns);
    CHECK_RC(lp_shm_ring_release(r, s[3], q[3]), 0);
    CHECK_RC(lp_shm_ring_acquire(w, &s[3], &q[3], &row[3]), 0);
    CHECK_RC(lp_shm_ring_compute_ns(r, s[3], q[3], &ns), LP_ERR(ESTALE)); /* not published */
    CHECK_RC(lp_shm_ring_publish_timed(w, s[3], q[3], 123456789), 0);
    CHECK_RC(lp_shm_ring_compute_ns(r, s[3], q[3], &ns), 0);
    CHECK(ns == 123456789, "compute_ns %llu", (unsigned long long)ns);
    CHECK_RC(lp_shm_ring_compute_ns(r, s[3], q[3] + 1, &ns), LP_ERR(ESTALE));
    CHECK(ns == 0);
    CHECK_RC(lp_shm_ring_publish_timed(w, s[3], q[3], 1), LP_ERR(ESTALE)); /* published already */

    /* Only the creator writes. */
    uint32_t ss;
    uint64_t qq;
    float *rr;
    CHECK_RC(lp_shm_ring_acquire(r, &ss, &qq, &rr), LP_ERR(EPERM));

    /* Abandon gives an unpublished slot back. */
    CHECK_RC(lp_shm_ring_release(r, s[0], q[0]), 0);
    CHECK_RC(lp_shm_ring_acquire(w, &ss, &qq, &rr), 0);
    CHECK_RC(lp_shm_ring_abandon(w, ss, qq), 0);
    CHECK(lp_shm_ring_n_free(w) == 1);

    char name[256];
    snprintf(name, sizeof(name), "%s", lp_shm_ring_name(w));
    lp_shm_ring_destroy(&r);
    lp_shm_ring_destroy(&w);
    CHECK(w == NULL && r == NULL);
    lp_shm_ring_destroy(&w); /* safe on NULL */
    /* The creator unlinked the name. */
    CHECK_RC(lp_shm_ring_open(name, &r), LP_ERR(ENOENT));
}

static void test_bad(void)
{
    lp_shm_ring_t *w = NULL, *r = NULL;
    CHECK_RC(lp_shm_ring_create(NULL, 0, 10, &w), LP_ERR(EINVAL));
    CHECK_RC(lp_shm_ring_create(NULL, 5000, 10, &w), LP_ERR(EINVAL));
    CHECK_RC(lp_shm_ring_create(NULL, 2, 0, &w), LP_ERR(EINVAL));
    CHECK_RC(lp_shm_ring_create("no-slash", 2, 10, &w), LP_ERR(EINVAL));
    CHECK_RC(lp_shm_ring_open("/a/b", &r), LP_ERR(EINVAL));

    /* The same name twice: O_EXCL refuses the second. */
    CHECK_RC(lp_shm_ring_create(NULL, 2, 10, &w), 0);
    if (!w) return;
    lp_shm_ring_t *w2 = NULL;
    CHECK_RC(lp_shm_ring_create(lp_shm_ring_name(w), 2, 10, &w2), LP_ERR(EEXIST));

    /* Corrupt each header field through a raw mapping: open refuses. */
    int fd = shm_open(lp_shm_ring_name(w), O_RDWR, 0);
    CHECK(fd >= 0);
    lp_shm_ring_header_t *h = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    CHECK(h != MAP_FAILED);
    if (h == MAP_FAILED) return;
    lp_shm_ring_header_t saved = *h;
    h->magic ^= 1;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r), LP_ERR(EPROTO));
    CHECK(strstr(lp_error_msg(), "magic") != NULL);
    *h = saved;
    h->version = LP_SHM_RING_VERSION + 1;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r), LP_ERR(EPROTO));
    *h = saved;
    h->n_slots = 1000; /* the data would run past the segment */
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r), LP_ERR(EPROTO));
    *h = saved;
    h->slot_stride = 4;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r), LP_ERR(EPROTO));
    *h = saved;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r), 0);
    munmap(h, 4096);
    lp_shm_ring_destroy(&r);
    lp_shm_ring_destroy(&w);
    CHECK_RC(lp_shm_ring_open("/lmpipe-test-does-not-exist", &r), LP_ERR(ENOENT));
}

/* A writer and a reader in two processes pass 20000 rows through a 4-slot
 * ring; the reader checks each row's contents against its sequence number. */
static void test_two_processes(void)
{
    enum { N = 20000, LEN = 257 };
    lp_shm_ring_t *w;
    CHECK_RC(lp_shm_ring_create(NULL, 4, LEN, &w), 0);
    if (!w) return;
    int p2c[2], c2p[2];
    CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        lp_shm_ring_t *r;
        if (lp_shm_ring_open(lp_shm_ring_name(w), &r)) _exit(2);
        struct { uint32_t slot; uint64_t seq; } ref;
        int bad = 0;
        for (int i = 0; i < N; i++) {
            if (read(p2c[0], &ref, sizeof(ref)) != sizeof(ref)) _exit(3);
            const float *row;
            if (lp_shm_ring_read(r, ref.slot, ref.seq, &row)) _exit(4);
            for (int k = 0; k < LEN; k++)
                if (row[k] != (float)((ref.seq * 7 + (uint64_t)k) % 1000003)) bad++;
            if (lp_shm_ring_release(r, ref.slot, ref.seq)) _exit(5);
        }
        char ok = bad ? 'x' : 'k';
        if (write(c2p[1], &ok, 1) != 1) _exit(6);
        _exit(bad ? 1 : 0);
    }
    int waits = 0;
    for (int i = 0; i < N; i++) {
        struct { uint32_t slot; uint64_t seq; } ref;
        float *row;
        while (lp_shm_ring_acquire(w, &ref.slot, &ref.seq, &row) == LP_ERR(EAGAIN)) {
            waits++;
            usleep(10);
        }
        for (int k = 0; k < LEN; k++) row[k] = (float)((ref.seq * 7 + (uint64_t)k) % 1000003);
        CHECK_RC(lp_shm_ring_publish(w, ref.slot, ref.seq), 0);
        if (write(p2c[1], &ref, sizeof(ref)) != sizeof(ref)) break;
    }
    char ok = 0;
    CHECK(read(c2p[0], &ok, 1) == 1 && ok == 'k');
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(lp_shm_ring_n_free(w) == 4);
    lp_shm_ring_destroy(&w);
}

/* Slots chosen by the sender: a reader in another process waits on its
 * futex for a publish, for a failure, and times out; a taken slot makes the
 * writer wait and time out too. */
static void test_wait(void)
{
    lp_shm_ring_t *w;
    CHECK_RC(lp_shm_ring_create(NULL, 4, 100, &w), 0);
    if (!w) return;
    pid_t pid = fork();
    if (pid == 0) {
        lp_shm_ring_t *r;
        if (lp_shm_ring_open(lp_shm_ring_name(w), &r)) _exit(2);
        const float *row;
        if (lp_shm_ring_wait(r, 2, 777, 5000) != 0) _exit(3);
        if (lp_shm_ring_read(r, 2, 777, &row) || row[0] != 7.0f || row[99] != 99.0f) _exit(4);
        if (lp_shm_ring_release(r, 2, 777)) _exit(5);
        if (lp_shm_ring_wait(r, 1, 888, 5000) != LP_ERR(EIO)) _exit(6);
        if (lp_shm_ring_release(r, 1, 888)) _exit(7); /* a failed slot is freed too */
        if (lp_shm_ring_wait(r, 0, 999, 100) != LP_ERR(ETIMEDOUT)) _exit(8);
        if (lp_shm_ring_wait(r, 9, 1, 100) != LP_ERR(ERANGE)) _exit(9);
        _exit(0);
    }
    usleep(50000); /* the reader is asleep on the futex by now */
    float *row;
    CHECK_RC(lp_shm_ring_acquire_at(w, 2, 777, 0, &row), 0);
    for (int k = 0; k < 100; k++) row[k] = (float)k;
    row[0] = 7.0f;
    CHECK_RC(lp_shm_ring_publish(w, 2, 777), 0);
    usleep(20000);
    CHECK_RC(lp_shm_ring_acquire_at(w, 1, 888, 0, &row), 0);
    CHECK_RC(lp_shm_ring_fail(w, 1, 888), 0);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) fprintf(stderr, "wait child exit %d\n", WEXITSTATUS(st));
    CHECK(lp_shm_ring_n_free(w) == 4);
    /* A slot still taken: the writer waits, then gives up. */
    CHECK_RC(lp_shm_ring_acquire_at(w, 3, 5, 0, &row), 0);
    CHECK_RC(lp_shm_ring_publish(w, 3, 5), 0);
    CHECK_RC(lp_shm_ring_acquire_at(w, 3, 6, 50, &row), LP_ERR(ETIMEDOUT));
    CHECK_RC(lp_shm_ring_acquire_at(w, 4, 6, 0, &row), LP_ERR(ERANGE));
    lp_shm_ring_destroy(&w);
}

/* Chained steps: the reader hands a slot back with the token it chose, and
 * the writer, waiting in another process, reads it; a slot released
 * without a token, a stale sequence number and a reader that never answers
 * are errors, and a sampled slot is free for the writer again. */
static void test_token(void)
{
    lp_shm_ring_t *w;
    CHECK_RC(lp_shm_ring_create(NULL, 3, 100, &w), 0);
    if (!w) return;
    float *row;
    CHECK_RC(lp_shm_ring_acquire_at(w, 0, 41, 0, &row), 0);
    CHECK_RC(lp_shm_ring_publish(w, 0, 41), 0);
    CHECK_RC(lp_shm_ring_acquire_at(w, 1, 42, 0, &row), 0);
    CHECK_RC(lp_shm_ring_publish(w, 1, 42), 0);
    pid_t pid = fork();
    if (pid == 0) {
        lp_shm_ring_t *r;
        if (lp_shm_ring_open(lp_shm_ring_name(w), &r)) _exit(2);
        usleep(50000); /* the writer is asleep on the futex by now */
        if (lp_shm_ring_release_token(r, 0, 41, 12345)) _exit(3);
        if (lp_shm_ring_release_token(r, 0, 41, 7) != LP_ERR(ESTALE)) _exit(4); /* twice */
        usleep(20000);
        if (lp_shm_ring_release(r, 1, 42)) _exit(5); /* no token */
        _exit(0);
    }
    int32_t tok = -1;
    CHECK_RC(lp_shm_ring_wait_token(w, 0, 41, 5000, &tok), 0);
    CHECK(tok == 12345);
    CHECK_RC(lp_shm_ring_wait_token(w, 1, 42, 5000, &tok), LP_ERR(ENODATA));
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_RC(lp_shm_ring_wait_token(w, 0, 40, 100, &tok), LP_ERR(ESTALE));
    CHECK_RC(lp_shm_ring_wait_token(w, 5, 41, 100, &tok), LP_ERR(ERANGE));
    /* A sampled slot is free: both ways of acquiring take it. */
    CHECK(lp_shm_ring_n_free(w) == 3);
    CHECK_RC(lp_shm_ring_acquire_at(w, 0, 43, 0, &row), 0);
    CHECK_RC(lp_shm_ring_publish(w, 0, 43), 0);
    /* Published, never handed back: the writer gives up. */
    CHECK_RC(lp_shm_ring_wait_token(w, 0, 43, 30, &tok), LP_ERR(ETIMEDOUT));
    /* Still being written: no token will come. */
    CHECK_RC(lp_shm_ring_acquire_at(w, 2, 44, 0, &row), 0);
    CHECK_RC(lp_shm_ring_wait_token(w, 2, 44, 1000, &tok), LP_ERR(ESTALE));
    lp_shm_ring_destroy(&w);
}

/* The writer's process is gone: a reader does not wait for it. */
static void test_writer_gone(void)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        lp_shm_ring_t *w;
        if (lp_shm_ring_create(NULL, 2, 10, &w)) _exit(2);
        char name[256];
        snprintf(name, sizeof(name), "%s", lp_shm_ring_name(w));
        if (write(fds[1], name, sizeof(name)) != (ssize_t)sizeof(name)) _exit(3);
        _exit(0); /* no destroy: the segment stays, its writer is gone */
    }
    char name[256] = "";
    CHECK(read(fds[0], name, sizeof(name)) == (ssize_t)sizeof(name));
    int st;
    waitpid(pid, &st, 0);
    lp_shm_ring_t *r;
    CHECK_RC(lp_shm_ring_open(name, &r), 0);
    if (r) {
        CHECK_RC(lp_shm_ring_wait(r, 0, 1, 5000), LP_ERR(EPIPE));
        lp_shm_ring_destroy(&r);
    }
    shm_unlink(name);
    close(fds[0]);
    close(fds[1]);
}

/* The reader's process is gone (a killed sampler): the writer can tell,
 * and the rows it held are freed when the next reader opens the ring. */
static void test_reader_gone(void)
{
    lp_shm_ring_t *w;
    CHECK_RC(lp_shm_ring_create(NULL, 3, 10, &w), 0);
    if (!w) return;
    CHECK(!lp_shm_ring_reader_gone(w)); /* no reader yet */
    float *row;
    CHECK_RC(lp_shm_ring_acquire_at(w, 0, 51, 0, &row), 0);
    CHECK_RC(lp_shm_ring_publish(w, 0, 51), 0);
    CHECK_RC(lp_shm_ring_acquire_at(w, 1, 52, 0, &row), 0);
    CHECK_RC(lp_shm_ring_fail(w, 1, 52), 0);
    pid_t pid = fork();
    if (pid == 0) {
        lp_shm_ring_t *r;
        _exit(lp_shm_ring_open(lp_shm_ring_name(w), &r) ? 2 : 0); /* holds both, releases neither */
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(lp_shm_ring_reader_gone(w));
    CHECK(lp_shm_ring_n_free(w) == 1);
    lp_shm_ring_t *r2;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r2), 0);
    CHECK(lp_shm_ring_n_free(w) == 3); /* READY and FAILED rows of the dead reader freed */
    CHECK(!lp_shm_ring_reader_gone(w));
    /* A live reader's rows stay: opening again frees nothing. */
    CHECK_RC(lp_shm_ring_acquire_at(w, 2, 53, 0, &row), 0);
    CHECK_RC(lp_shm_ring_publish(w, 2, 53), 0);
    lp_shm_ring_t *r3;
    CHECK_RC(lp_shm_ring_open(lp_shm_ring_name(w), &r3), 0);
    CHECK(lp_shm_ring_n_free(w) == 2);
    lp_shm_ring_destroy(&r3);
    lp_shm_ring_destroy(&r2);
    lp_shm_ring_destroy(&w);
}

int main(void)
{
    test_basic();
    test_bad();
    test_two_processes();
    test_wait();
    test_token();
    test_writer_gone();
    test_reader_gone();
    return CHECK_DONE();
}
