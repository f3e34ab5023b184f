/* fairq.h - fair admission from the coordinator's waiting queue.
 *
 * Requests waiting for an engine slot are admitted round-robin across
 * clients: after client K, the next client in key order that has a request
 * waiting (wrapping around), and of that client the oldest request.  A
 * client with one request waiting is admitted within one round, however
 * many requests the others have queued.  Pure: it knows requests only as
 * client keys in arrival order (fairq_test.c). */
#ifndef LP_COORD_FAIRQ_H
#define LP_COORD_FAIRQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP__FAIR_KEY_MAX 255 /* a ZeroMQ routing id, or a 40-character Z85 key */

/* The client admitted last (an empty key before the first admission). */
typedef struct lp__fair {
    uint8_t last[LP__FAIR_KEY_MAX];
    size_t last_len;
} lp__fair_t;

/* One choice in progress: offer each waiting request in arrival order. */
typedef struct lp__fair_pick {
    const lp__fair_t *fair;
    const uint8_t *after_key, *any_key; /* borrowed from the offers */
    size_t after_len, any_len;
    size_t after, any;                  /* the offers' indexes; SIZE_MAX: none */
} lp__fair_pick_t;

/* Key order: shorter first, then bytes. */
int lp__fair_cmp(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len);

void lp__fair_pick_begin(lp__fair_pick_t *p, const lp__fair_t *fair);
/* Request `idx` of client `key` is waiting (key borrowed until the pick's
 * result is used). */
void lp__fair_offer(lp__fair_pick_t *p, size_t idx, const uint8_t *key, size_t len);
/* The index of the offer to admit; SIZE_MAX when nothing was offered. */
size_t lp__fair_pick_end(const lp__fair_pick_t *p);
/* That request was admitted: its client is the last one served. */
void lp__fair_served(lp__fair_t *fair, const uint8_t *key, size_t len);

#endif
