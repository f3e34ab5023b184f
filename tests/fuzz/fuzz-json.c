/* fuzz-json.c - arbitrary bytes as JSON (lib/json.c, the reader of every
 * request body, config value, strategy and state file): it must refuse or
 * accept cleanly, and whatever it accepts must write back (lib/json.h's
 * writer) as text that reads back to the same text again. */
#include "json.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_doc(const lp_json_doc_t *doc, lp_json_buf_t *out)
{
    memset(out, 0, sizeof(*out));
    lp_json_buf_value(out, lp_json_root(doc));
    lp_json_buf_put(out, "", 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_json_doc_t *doc = NULL;
    if (lp_json_parse((const char *)data, size, &doc) != 0) return 0;
    lp_json_buf_t a, b;
    write_doc(doc, &a);
    lp_json_doc_destroy(&doc);
    if (a.oom) abort();
    /* the writer's own output must read, and write the same again */
    if (lp_json_parse(a.p, a.n, &doc) != 0) abort();
    write_doc(doc, &b);
    lp_json_doc_destroy(&doc);
    if (b.oom || a.n != b.n || memcmp(a.p, b.p, a.n)) abort();
    lp_json_buf_free(&a);
    lp_json_buf_free(&b);
    return 0;
}
