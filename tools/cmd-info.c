/* cmd-info.c - `lmpipe info MODEL`: the metadata and the tensor table. */
#include "lmpipe.h"

#include "error.h"
#include "ggml-type.h"
#include "gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void print_str(lp_gguf_str_t s, size_t max)
{
    putchar('"');
    for (size_t i = 0; i < s.len && i < max; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch == '\n') fputs("\\n", stdout);
        else if (ch < 0x20) printf("\\x%02x", ch);
        else putchar(ch);
    }
    putchar('"');
    if (s.len > max) fputs("...", stdout);
}

static void print_value(enum lp_gguf_vtype t, const void *data, const lp_gguf_str_t *s,
                        uint64_t i)
{
    if (t == LP_GGUF_STRING) print_str(s[i], 80);
    else if (t == LP_GGUF_BOOL) fputs(lp_gguf_num_at(t, data, i) ? "true" : "false", stdout);
    else if (t == LP_GGUF_FLOAT32 || t == LP_GGUF_FLOAT64) printf("%g", lp_gguf_num_at(t, data, i));
    else if (t == LP_GGUF_UINT64) {
        uint64_t v;
        memcpy(&v, (const uint8_t *)data + 8 * i, 8);
        printf("%" PRIu64, v);
    } else if (t == LP_GGUF_INT64) {
        int64_t v;
        memcpy(&v, (const uint8_t *)data + 8 * i, 8);
        printf("%" PRId64, v);
    } else printf("%.0f", lp_gguf_num_at(t, data, i));
}

int lp_cmd_info(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-')
        return lp_cmd_usage_error("info", "usage: lmpipe info MODEL.gguf");
    lp_gguf_t *g;
    if (lp_gguf_open(argv[1], &g)) {
        fprintf(stderr, "lmpipe info: %s\n", lp_error_msg());
        return 1;
    }
    printf("file: %s\nversion: %u\nsize: %zu\nalignment: %u\n", argv[1], lp_gguf_version(g),
           lp_gguf_file_size(g), lp_gguf_alignment(g));
    printf("\nmetadata (%lld keys):\n", (long long)lp_gguf_n_kv(g));
    for (int64_t i = 0; i < lp_gguf_n_kv(g); i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        printf("  %-40s ", kv->key);
        if (kv->type == LP_GGUF_ARRAY) {
            printf("%s[%" PRIu64 "] ", lp_gguf_vtype_name(kv->arr_type), kv->arr_n);
            uint64_t show = kv->arr_n < 6 ? kv->arr_n : 6;
            putchar('[');
            for (uint64_t k = 0; k < show; k++) {
                if (k) fputs(", ", stdout);
                print_value(kv->arr_type, kv->data, kv->strs, k);
            }
            fputs(kv->arr_n > show ? ", ...]" : "]", stdout);
        } else {
            printf("%s ", lp_gguf_vtype_name(kv->type));
            print_value(kv->type, kv->data, kv->strs, 0);
        }
        putchar('\n');
    }
    printf("\ntensors (%lld):\n", (long long)lp_gguf_n_tensors(g));
    printf("  %-32s %-6s %-28s %12s %12s\n", "name", "type", "shape (ne0 first)", "offset",
           "bytes");
    for (int64_t i = 0; i < lp_gguf_n_tensors(g); i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        char shape[64] = "";
        size_t o = 0;
        for (uint32_t d = 0; d < t->n_dims; d++)
            o += (size_t)snprintf(shape + o, sizeof(shape) - o, "%s%" PRId64, d ? " x " : "",
                                  t->ne[d]);
        printf("  %-32s %-6s %-28s %12" PRIu64 " %12zu\n", t->name, lp_type_name(t->type), shape,
               t->offset, t->nbytes);
    }
    lp_gguf_destroy(&g);
    return 0;
}
