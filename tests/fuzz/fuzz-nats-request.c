/* fuzz-nats-request.c - arbitrary bytes as a NATS bridge request
 * (gateway/nats/request.c): the body as JSON read through the request
 * schema into GenerateRequests, which must then pack; the same bytes as a reply subject and as an ack
 * subject.  No NATS server needed. */
#include "request.h"

#include "error.h"
#include "gen-request.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    (void)lp__nb_reply_ok(s);
    (void)lp__nb_ack_sseq(s);
    free(s);
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse((const char *)data, size, &doc) != 0) return 0;
    lp_request_t rq;
    if (lp__nb_read_request(lp_json_root(doc), &rq) == 0) {
        /* what the bridge sends: every choice's GenerateRequest packs */
        lp_gen_batch_t b;
        if (lp_gen_batch_build(&rq, "nats:fuzz", &b) == 0) {
            for (size_t i = 0; i < b.n_reqs; i++) {
                Lmpipe__Msg m = LMPIPE__MSG__INIT;
                m.body_case = LMPIPE__MSG__BODY_GENERATE;
                m.generate = &b.reqs[i];
                size_t n = lmpipe__msg__get_packed_size(&m);
                uint8_t *buf = malloc(n ? n : 1);
                if (!buf || lmpipe__msg__pack(&m, buf) != n) abort();
                free(buf);
            }
        }
        lp_gen_batch_clear(&b);
    } else if (!rq.param[0] && strncmp(lp_error_msg(), "body", 4)) {
        abort(); /* a refusal always names the field */
    }
    lp_request_clear(&rq);
    lp_json_doc_destroy(&doc);
    return 0;
}
