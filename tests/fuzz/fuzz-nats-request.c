/* fuzz-nats-request.c - arbitrary bytes as a NATS bridge request
 * (gateway/nats/request.c): the body as JSON read into a GenerateRequest,
 * which must then pack; the same bytes as a reply subject and as an ack
 * subject.  No NATS server needed. */
#include "request.h"

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
    Lmpipe__GenerateRequest q = LMPIPE__GENERATE_REQUEST__INIT;
    char *params = NULL;
    int32_t *ids = NULL;
    ProtobufCBinaryData *stops = NULL;
    char *chat_json = NULL;
    char why[512] = "";
    if (lp__nb_read_request(lp_json_root(doc), &q, &params, &ids, &stops, &chat_json, why, sizeof(why)) == 0) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_GENERATE;
        m.generate = &q;
        size_t n = lmpipe__msg__get_packed_size(&m);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf || lmpipe__msg__pack(&m, buf) != n) abort();
        free(buf);
    } else if (!why[0] || !memchr(why, '\0', sizeof(why))) {
        abort(); /* a refusal always says why */
    }
    free(params);
    free(ids);
    free(stops);
    free(chat_json);
    lp_json_doc_destroy(&doc);
    return 0;
}
