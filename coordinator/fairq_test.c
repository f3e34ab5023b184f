/* fairq_test.c - round-robin admission across clients on hand-built
 * waiting queues: a client with one request among another's many is
 * admitted next, clients alternate, each client's requests keep their
 * order, a latecomer waits at most one round, key order wraps. */
#include "fairq.h"

#include "../tests/check.h"

#include <string.h>

enum { MAX_Q = 64 };

typedef struct queue {
    const char *client[MAX_Q]; /* each request's client key, in arrival order */
    int no[MAX_Q];             /* its number within its client */
    bool gone[MAX_Q];
    size_t n;
} queue_t;

static void push(queue_t *q, const char *client)
{
    int no = 0;
    for (size_t i = 0; i < q->n; i++) no += !strcmp(q->client[i], client);
    q->client[q->n] = client;
    q->no[q->n] = no;
    q->gone[q->n] = false;
    q->n++;
}

/* Admit one request as the coordinator does; its index, or -1. */
static int admit(lp__fair_t *fair, queue_t *q)
{
    lp__fair_pick_t p;
    lp__fair_pick_begin(&p, fair);
    for (size_t i = 0; i < q->n; i++)
        if (!q->gone[i]) lp__fair_offer(&p, i, (const uint8_t *)q->client[i], strlen(q->client[i]));
    size_t at = lp__fair_pick_end(&p);
    if (at == SIZE_MAX) return -1;
    q->gone[at] = true;
    lp__fair_served(fair, (const uint8_t *)q->client[at], strlen(q->client[at]));
    return (int)at;
}

/* Admit everything; the order as "client:no client:no ...". */
static void drain(lp__fair_t *fair, queue_t *q, char *out, size_t cap)
{
    out[0] = '\0';
    int at;
    while ((at = admit(fair, q)) >= 0) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s:%d", len ? " " : "", q->client[at], q->no[at]);
    }
}

int main(void)
{
    char got[2048];
    lp__fair_t fair = {0};
    queue_t q = {0};

    /* nothing waiting */
    CHECK(admit(&fair, &q) == -1);

    /* B's one request behind A's five: second, not sixth */
    for (int i = 0; i < 5; i++) push(&q, "A");
    push(&q, "B");
    drain(&fair, &q, got, sizeof(got));
    CHECK(!strcmp(got, "A:0 B:0 A:1 A:2 A:3 A:4"), "%s", got);

    /* three clients alternate; each one's requests keep their order */
    memset(&fair, 0, sizeof(fair));
    memset(&q, 0, sizeof(q));
    const char *arrivals[] = {"A", "A", "A", "A", "C", "B", "A", "B", "B", "A"};
    for (size_t i = 0; i < sizeof(arrivals) / sizeof(arrivals[0]); i++) push(&q, arrivals[i]);
    drain(&fair, &q, got, sizeof(got));
    CHECK(!strcmp(got, "A:0 B:0 C:0 A:1 B:1 A:2 B:2 A:3 A:4 A:5"), "%s", got);

    /* a latecomer: A has admitted three of many; B arrives and is next,
     * also when its key sorts before A's (the order wraps) */
    const char *late[][2] = {{"K", "M"}, {"M", "K"}};
    for (int t = 0; t < 2; t++) {
        memset(&fair, 0, sizeof(fair));
        memset(&q, 0, sizeof(q));
        for (int i = 0; i < 40; i++) push(&q, late[t][0]);
        for (int i = 0; i < 3; i++) CHECK(!strcmp(q.client[admit(&fair, &q)], late[t][0]));
        push(&q, late[t][1]);
        int at = admit(&fair, &q);
        CHECK(at >= 0 && !strcmp(q.client[at], late[t][1]), "latecomer %s not admitted next", late[t][1]);
        CHECK(!strcmp(q.client[admit(&fair, &q)], late[t][0]));
    }

    /* keys of other lengths and bytes that are not text (routing ids) */
    CHECK(lp__fair_cmp((const uint8_t *)"\xff", 1, (const uint8_t *)"\x00\x00", 2) < 0);
    CHECK(lp__fair_cmp((const uint8_t *)"\x00\x01", 2, (const uint8_t *)"\x00\x02", 2) < 0);
    CHECK(lp__fair_cmp((const uint8_t *)"ab", 2, (const uint8_t *)"ab", 2) == 0);
    memset(&fair, 0, sizeof(fair));
    memset(&q, 0, sizeof(q));
    const char *ids[] = {"long-id", "long-id", "x", "long-id", "yy", "x"};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) push(&q, ids[i]);
    drain(&fair, &q, got, sizeof(got));
    CHECK(!strcmp(got, "x:0 yy:0 long-id:0 x:1 long-id:1 long-id:2"), "%s", got);
    return CHECK_DONE();
}
