/* request.h - lmpipe-nats: reading a request (docs/NATS.md's schema 1) and
 * the subjects around it; no NATS connection needed, so tested alone
 * (request_test.c). */
#ifndef LP_NB_REQUEST_H
#define LP_NB_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "request-schema.h"

/* The stream sequence in a delivery's ack subject,
 * $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending> or
 * with <domain>.<account hash> after ACK and a token at the end; 0 when it
 * is not one. */
uint64_t lp__nb_ack_sseq(const char *ack_subj);

/* An event subject the requester may name: no wildcards or white space, and
 * none of the server's ($JS.API, $SYS, ...: anything from '$') or the
 * bridge's own (_lmpipe.), which a request could otherwise drive with the
 * bridge's permissions. */
bool lp__nb_reply_ok(const char *s);

/* Whether NATS subject `subj` (no wildcards) is matched by `pattern`, whose
 * tokens may be `*` (one token) and a last `>` (one or more). */
bool lp__nb_subject_match(const char *pattern, const char *subj);

/* The request body through the request schema: chat with messages, OpenAI
 * completions with a field that only /v1/completions takes (max_tokens,
 * logprobs as a count, ...), else llama.cpp's /completion; the ranges are
 * those of the shape's dialect.  LP_ERR(EINVAL) with lp_error_msg() naming
 * the field (rq->param); lp_request_clear after either. */
int lp__nb_read_request(const lp_json_t *root, lp_request_t *rq);

#endif
