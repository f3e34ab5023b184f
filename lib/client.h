/* client.h - a client of the coordinator's API (lmpipe run/generate/bench
 * and the integration tests): one DEALER, the hello, Generate requests,
 * and their event streams.  Blocking calls with timeouts. */
#ifndef LP_CLIENT_H
#define LP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"

typedef struct lp_client lp_client_t;

int lp_client_new(const char *endpoint, lp_client_t **out);
/* The same as a CURVE client on a tcp:// endpoint: `key_path` is this
 * host's BASE.key, `server_key` the server's public key (a KEY value,
 * curve.h); both NULL: plain (the server decides whether it accepts). */
int lp_client_new_curve(const char *endpoint, const char *key_path, const char *server_key,
                        lp_client_t **out);
void lp_client_destroy(lp_client_t **self_p);
void *lp_client_socket(lp_client_t *c);

/* Say hello, retrying while the pipeline answers "not ready", for up to
 * timeout_ms.  The coordinator's Hello is kept: lp_client_server_hello(). */
int lp_client_hello(lp_client_t *c, int timeout_ms);
/* The same with another service: the peer must answer with `role`. */
int lp_client_hello_as(lp_client_t *c, Lmpipe__Role role, int timeout_ms);
const Lmpipe__Hello *lp_client_server_hello(const lp_client_t *c);

int lp_client_send_generate(lp_client_t *c, uint64_t id, const Lmpipe__GenerateRequest *g);
int lp_client_send_cancel(lp_client_t *c, uint64_t id);
/* Receive one message; LP_ERR(ETIMEDOUT) after timeout_ms (-1: forever).
 * LP_ERR(ECONNRESET) when the connection of the last hello was lost (the
 * server stopped or crashed, or its heartbeats stopped for 3 s): nothing in
 * flight will be answered.  ZeroMQ reconnects on its own; say hello again
 * before the next request.  lp_frame_clear() after use. */
int lp_client_recv(lp_client_t *c, int timeout_ms, lp_frame_t *f);
/* Whether the last hello was answered and its connection still stands. */
bool lp_client_linked(const lp_client_t *c);

/* One whole generation. */
typedef struct lp_generation {
    int32_t *ids;       /* generated tokens; owned */
    uint64_t *versions; /* sampler strategy version of each token; owned */
    size_t n_ids;
    char *text;         /* pieces and the final tail, NUL-terminated; owned */
    size_t text_len;
    Lmpipe__FinishReason reason;
    char error[512];    /* the Error or FinalEvent.error */
    double prompt_ms, generate_ms, queue_ms;
    uint32_t n_prompt, n_generated; /* FinalEvent's counts */
    uint32_t n_ctx;     /* the coordinator's context size, from its hello (0: unknown) */
} lp_generation_t;

/* Called for each token event (may be NULL). */
typedef void (*lp_client_token_cb)(void *arg, int32_t id, const uint8_t *piece, size_t len);

/* Send `g` as request `id` and collect its events until the final one, or
 * an Error reply, or timeout_ms without a message, or the loss of the
 * connection (LP_ERR(ECONNRESET), see lp_client_recv).  0 when a final event
 * came (whatever its reason); the caller frees with lp_generation_clear(). */
int lp_client_generate(lp_client_t *c, uint64_t id, const Lmpipe__GenerateRequest *g,
                       int timeout_ms, lp_client_token_cb cb, void *arg, lp_generation_t *out);
/* Add one event of request `id` to `out`; 1 when it was the final event or
 * an Error, 0 otherwise. */
int lp_generation_add(lp_generation_t *out, const Lmpipe__Msg *m);
void lp_generation_clear(lp_generation_t *g);

#endif
