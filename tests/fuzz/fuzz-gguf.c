/* fuzz-gguf.c - libFuzzer target for the GGUF reader.
 *
 * Parses the input with lp_gguf_open_mem() and, when it parses, reads back
 * everything through the public getters.  A failure without a message, or a
 * positive code, aborts: the fuzzer reports it like a crash.  Built as a
 * libFuzzer binary with -Dfuzz=true (clang), and linked into
 * fuzz-gguf-replay, which CI runs over the seed corpus. */
#include "error.h"
#include "gguf.h"
#include "../gguf-test-util.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lp_gguf_t *g = NULL;
    lp_error_clear();
    int rc = lp_gguf_open_mem(data, size, &g);
    if (rc) {
        const char *msg = lp_error_msg();
        if (rc > 0 || g != NULL || !msg || !*msg || !strcmp(msg, "no error message")) {
            fprintf(stderr, "fuzz-gguf: rc %d without a proper message\n", rc);
            abort();
        }
        return 0;
    }
    volatile uint64_t h = test_gguf_touch(g);
    (void)h;
    lp_gguf_destroy(&g);
    return 0;
}
