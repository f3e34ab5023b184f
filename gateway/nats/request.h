/* request.h - lmpipe-nats: reading a request (docs/NATS.md's schema 1) and
 * the subjects around it; no NATS connection needed, so tested alone
 * (request_test.c). */
#ifndef LP_NB_REQUEST_H
#define LP_NB_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "json.h"

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

/* The request body as a GenerateRequest; on a bad field returns -1 with
 * `why` naming it.  Strings in *q point into the document (borrowed, valid
 * until it is destroyed); *params, *ids, *stops and *chat_json (a chat's
 * conversation, lib/chat-request.h) are the caller's to free, also after a
 * failure. */
int lp__nb_read_request(const lp_json_t *root, Lmpipe__GenerateRequest *q, char **params, int32_t **ids,
                        ProtobufCBinaryData **stops, char **chat_json, char *why, size_t cap);

#endif
