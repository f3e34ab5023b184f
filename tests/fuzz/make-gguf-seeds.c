/* make-gguf-seeds.c - builds the GGUF fuzz seed corpus from real files:
 * each seed keeps a file's metadata, with arrays cut to their first 8
 * elements, and its first 6 tensors cut to their first row (real data).
 * One more seed per file is written as version 2 with alignment 64.
 * usage: make-gguf-seeds OUTDIR FILE.gguf...  (see docs/TESTING.md) */
#include "error.h"
#include "ggml-type.h"
#include "gguf-write.h"
#include "gguf.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>

#define KEEP_ELEMS 8
#define KEEP_TENSORS 6

static int write_seed(const lp_gguf_t *g, const char *out, uint32_t version, uint32_t align)
{
    lp_gguf_writer_t *w;
    int rc = lp_gguf_writer_new(&w);
    if (rc) return rc;
    if (version) lp_gguf_writer_set_version(w, version);
    if (align) rc = lp_gguf_writer_set_alignment(w, align);
    else if (lp_gguf_find(g, "general.alignment"))
        rc = lp_gguf_writer_set_alignment(w, lp_gguf_alignment(g));
    for (int64_t i = 0; i < lp_gguf_n_kv(g) && !rc; i++) {
        const lp_gguf_kv_t *kv = lp_gguf_kv_at(g, i);
        if (!strcmp(kv->key, "general.alignment")) continue;
        uint64_t n = kv->arr_n < KEEP_ELEMS ? kv->arr_n : KEEP_ELEMS;
        if (kv->type != LP_GGUF_ARRAY) rc = lp_gguf_writer_add_kv(w, kv);
        else if (kv->arr_type == LP_GGUF_STRING)
            rc = lp_gguf_writer_add_str_arr(w, kv->key, kv->strs, n);
        else rc = lp_gguf_writer_add_arr(w, kv->key, kv->arr_type, kv->data, n);
    }
    for (int64_t i = 0; i < lp_gguf_n_tensors(g) && i < KEEP_TENSORS && !rc; i++) {
        const lp_gguf_tensor_t *t = lp_gguf_tensor_at(g, i);
        int64_t ne[LP_GGUF_MAX_DIMS] = {t->ne[0], 1, 1, 1};
        rc = lp_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data);
    }
    if (!rc) rc = lp_gguf_writer_write_file(w, out);
    lp_gguf_writer_destroy(&w);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUTDIR FILE.gguf...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        lp_gguf_t *g;
        if (lp_gguf_open(argv[i], &g)) {
            fprintf(stderr, "%s\n", lp_error_msg());
            return 1;
        }
        char base[256], out[1024];
        snprintf(base, sizeof(base), "%s", basename(argv[i]));
        char *dot = strrchr(base, '.');
        if (dot) *dot = '\0';
        snprintf(out, sizeof(out), "%s/%s.gguf", argv[1], base);
        int rc = write_seed(g, out, 0, 0);
        snprintf(out, sizeof(out), "%s/%s-v2-align64.gguf", argv[1], base);
        if (!rc) rc = write_seed(g, out, 2, 64);
        lp_gguf_destroy(&g);
        if (rc) {
            fprintf(stderr, "%s\n", lp_error_msg());
            return 1;
        }
    }
    return 0;
}
