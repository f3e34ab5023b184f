/* gguf-write.c - GGUF writer: metadata is serialized as it is added; tensor
 * descriptions are kept until the write, which lays the data out in order,
 * each tensor padded to the alignment (as ggml does). */
#include "gguf-write.h"

#include "error.h"
#include "ggml-type.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_ALIGNMENT 32
#define CHUNK_BYTES (4u << 20) /* rows produced per callback call, about */

typedef struct wtensor {
    char *name;           /* owned */
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[LP_GGUF_MAX_DIMS];
    size_t nbytes;
    size_t row_bytes;     /* 0 for raw tensors */
    const void *data;     /* borrowed; NULL with cb or for zeros */
    lp_gguf_rows_cb cb;
    void *ctx;            /* borrowed */
    uint64_t offset;      /* real offset, from the data section's start */
    int forged;
    uint64_t forged_offset;
} wtensor_t;

struct lp_gguf_writer {
    uint32_t version;
    uint32_t alignment;
    uint8_t *meta;        /* serialized key/value pairs; owned */
    size_t meta_len, meta_cap;
    int64_t n_kv;
    wtensor_t *tensors;   /* owned */
    int64_t n_tensors, cap_tensors;
};

static const size_t vsize[LP_GGUF_VTYPE_COUNT] = {
    [LP_GGUF_UINT8] = 1, [LP_GGUF_INT8] = 1, [LP_GGUF_UINT16] = 2,
    [LP_GGUF_INT16] = 2, [LP_GGUF_UINT32] = 4, [LP_GGUF_INT32] = 4,
    [LP_GGUF_FLOAT32] = 4, [LP_GGUF_BOOL] = 1, [LP_GGUF_UINT64] = 8,
    [LP_GGUF_INT64] = 8, [LP_GGUF_FLOAT64] = 8,
};

int lp_gguf_writer_new(lp_gguf_writer_t **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
    (*out)->version = 3;
    (*out)->alignment = DEFAULT_ALIGNMENT;
    return 0;
}

void lp_gguf_writer_destroy(lp_gguf_writer_t **self_p)
{
    lp_gguf_writer_t *w = self_p ? *self_p : NULL;
    if (!w) return;
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->meta);
    free(w);
    *self_p = NULL;
}

void lp_gguf_writer_set_version(lp_gguf_writer_t *w, uint32_t version)
{
    w->version = version;
}

/* ---- metadata serialization ---- */

static int meta_put(lp_gguf_writer_t *w, const void *p, size_t n)
{
    if (n > w->meta_cap - w->meta_len) {
        size_t cap = w->meta_cap ? w->meta_cap : 4096;
        while (n > cap - w->meta_len) {
            if (cap > SIZE_MAX / 2) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: "
                                                        "metadata too large");
            cap *= 2;
        }
        uint8_t *m = realloc(w->meta, cap);
        if (!m) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
        w->meta = m;
        w->meta_cap = cap;
    }
    if (n) memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
    return 0;
}

static int meta_u32(lp_gguf_writer_t *w, uint32_t v) { return meta_put(w, &v, 4); }
static int meta_u64(lp_gguf_writer_t *w, uint64_t v) { return meta_put(w, &v, 8); }

static int meta_str(lp_gguf_writer_t *w, const char *s, size_t len)
{
    int rc = meta_u64(w, len);
    return rc ? rc : meta_put(w, s, len);
}

/* Key and type; on a later failure the caller rolls meta_len back. */
static int kv_begin(lp_gguf_writer_t *w, const char *key, enum lp_gguf_vtype type)
{
    int rc = meta_str(w, key, strlen(key));
    return rc ? rc : meta_u32(w, type);
}

static int kv_end(lp_gguf_writer_t *w, size_t start, int rc)
{
    if (rc) w->meta_len = start;
    else w->n_kv++;
    return rc;
}

static int is_fixed(enum lp_gguf_vtype t)
{
    return (unsigned)t < LP_GGUF_VTYPE_COUNT && vsize[t] != 0;
}

int lp_gguf_writer_add_scalar(lp_gguf_writer_t *w, const char *key, enum lp_gguf_vtype type,
                              const void *value)
{
    if (!is_fixed(type))
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: key '%s': type %s is not a "
                            "numeric or bool scalar", key, lp_gguf_vtype_name(type));
    size_t start = w->meta_len;
    int rc = kv_begin(w, key, type);
    if (!rc) rc = meta_put(w, value, vsize[type]);
    return kv_end(w, start, rc);
}

int lp_gguf_writer_add_u32(lp_gguf_writer_t *w, const char *key, uint32_t v)
{
    return lp_gguf_writer_add_scalar(w, key, LP_GGUF_UINT32, &v);
}

int lp_gguf_writer_add_i32(lp_gguf_writer_t *w, const char *key, int32_t v)
{
    return lp_gguf_writer_add_scalar(w, key, LP_GGUF_INT32, &v);
}

int lp_gguf_writer_add_f32(lp_gguf_writer_t *w, const char *key, float v)
{
    return lp_gguf_writer_add_scalar(w, key, LP_GGUF_FLOAT32, &v);
}

int lp_gguf_writer_add_bool(lp_gguf_writer_t *w, const char *key, bool v)
{
    uint8_t b = v;
    return lp_gguf_writer_add_scalar(w, key, LP_GGUF_BOOL, &b);
}

int lp_gguf_writer_add_str(lp_gguf_writer_t *w, const char *key, const char *s, size_t len)
{
    size_t start = w->meta_len;
    int rc = kv_begin(w, key, LP_GGUF_STRING);
    if (!rc) rc = meta_str(w, s, len);
    return kv_end(w, start, rc);
}

int lp_gguf_writer_add_cstr(lp_gguf_writer_t *w, const char *key, const char *s)
{
    return lp_gguf_writer_add_str(w, key, s, strlen(s));
}

int lp_gguf_writer_add_arr(lp_gguf_writer_t *w, const char *key, enum lp_gguf_vtype type,
                           const void *data, uint64_t n)
{
    if (!is_fixed(type))
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: key '%s': %s is not a numeric "
                            "or bool element type", key, lp_gguf_vtype_name(type));
    if (n > SIZE_MAX / vsize[type])
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: key '%s': array too large", key);
    size_t start = w->meta_len;
    int rc = kv_begin(w, key, LP_GGUF_ARRAY);
    if (!rc) rc = meta_u32(w, type);
    if (!rc) rc = meta_u64(w, n);
    if (!rc) rc = meta_put(w, data, (size_t)n * vsize[type]);
    return kv_end(w, start, rc);
}

int lp_gguf_writer_add_str_arr(lp_gguf_writer_t *w, const char *key,
                               const lp_gguf_str_t *strs, uint64_t n)
{
    size_t start = w->meta_len;
    int rc = kv_begin(w, key, LP_GGUF_ARRAY);
    if (!rc) rc = meta_u32(w, LP_GGUF_STRING);
    if (!rc) rc = meta_u64(w, n);
    for (uint64_t i = 0; i < n && !rc; i++) rc = meta_str(w, strs[i].ptr, strs[i].len);
    return kv_end(w, start, rc);
}

int lp_gguf_writer_add_kv(lp_gguf_writer_t *w, const lp_gguf_kv_t *kv)
{
    if (kv->type == LP_GGUF_STRING)
        return lp_gguf_writer_add_str(w, kv->key, kv->strs[0].ptr, kv->strs[0].len);
    if (kv->type != LP_GGUF_ARRAY) return lp_gguf_writer_add_scalar(w, kv->key, kv->type, kv->data);
    if (kv->arr_type == LP_GGUF_STRING)
        return lp_gguf_writer_add_str_arr(w, kv->key, kv->strs, kv->arr_n);
    return lp_gguf_writer_add_arr(w, kv->key, kv->arr_type, kv->data, kv->arr_n);
}

int64_t lp_gguf_writer_n_kv(const lp_gguf_writer_t *w) { return w->n_kv; }

int lp_gguf_writer_set_alignment(lp_gguf_writer_t *w, uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)))
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: alignment %u is not a power of two",
                            alignment);
    if (w->n_tensors)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: set the alignment before adding "
                            "tensors");
    int rc = lp_gguf_writer_add_u32(w, "general.alignment", alignment);
    if (!rc) w->alignment = alignment;
    return rc;
}

/* ---- tensors ---- */

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int add_tensor(lp_gguf_writer_t *w, const wtensor_t *t, const char *name)
{
    if (t->n_dims > LP_GGUF_MAX_DIMS)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: tensor '%s': %u dimensions", name,
                            t->n_dims);
    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        wtensor_t *nt = realloc(w->tensors, sizeof(*nt) * (size_t)cap);
        if (!nt) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
        w->tensors = nt;
        w->cap_tensors = cap;
    }
    uint64_t offset = 0;
    if (w->n_tensors) {
        const wtensor_t *last = &w->tensors[w->n_tensors - 1];
        offset = pad_to(last->offset + last->nbytes, w->alignment);
    }
    if (offset > SIZE_MAX / 2 || t->nbytes > SIZE_MAX / 2)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: tensor '%s': data too large", name);
    wtensor_t *d = &w->tensors[w->n_tensors];
    *d = *t;
    d->name = strdup(name);
    if (!d->name) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
    d->offset = offset;
    w->n_tensors++;
    return 0;
}

static int describe(wtensor_t *t, const char *name, uint32_t type, uint32_t n_dims,
                    const int64_t *ne)
{
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < LP_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims && d < LP_GGUF_MAX_DIMS; d++) t->ne[d] = ne[d];
    if (n_dims == 0 || n_dims > LP_GGUF_MAX_DIMS)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: tensor '%s': %u dimensions", name,
                            n_dims);
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || (d > 0 && (uint64_t)ne[d] > UINT64_MAX / rows))
            return lp_error_set(LP_ERR(EINVAL), "gguf writer: tensor '%s': bad dimension "
                                "%u (%lld)", name, d, (long long)ne[d]);
        if (d > 0) rows *= (uint64_t)ne[d];
    }
    t->row_bytes = lp_type_row_bytes(type, ne[0]);
    if (!t->row_bytes)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: tensor '%s': type %u with rows of "
                            "%lld elements", name, type, (long long)ne[0]);
    if (rows > SIZE_MAX / t->row_bytes)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: tensor '%s': too large", name);
    t->nbytes = (size_t)rows * t->row_bytes;
    return 0;
}

int lp_gguf_writer_add_tensor(lp_gguf_writer_t *w, const char *name, uint32_t type,
                              uint32_t n_dims, const int64_t *ne, const void *data)
{
    wtensor_t t;
    int rc = describe(&t, name, type, n_dims, ne);
    if (rc) return rc;
    t.data = data;
    return add_tensor(w, &t, name);
}

int lp_gguf_writer_add_tensor_cb(lp_gguf_writer_t *w, const char *name, uint32_t type,
                                 uint32_t n_dims, const int64_t *ne, lp_gguf_rows_cb cb,
                                 void *ctx)
{
    wtensor_t t;
    int rc = describe(&t, name, type, n_dims, ne);
    if (rc) return rc;
    t.cb = cb;
    t.ctx = ctx;
    return add_tensor(w, &t, name);
}

int lp_gguf_writer_add_tensor_raw(lp_gguf_writer_t *w, const char *name, uint32_t type,
                                  uint32_t n_dims, const int64_t *ne, const void *data,
                                  size_t nbytes)
{
    wtensor_t t;
    memset(&t, 0, sizeof(t));
    t.type = type;
    t.n_dims = n_dims;
    for (int d = 0; d < LP_GGUF_MAX_DIMS; d++) t.ne[d] = 1;
    for (uint32_t d = 0; d < n_dims && d < LP_GGUF_MAX_DIMS; d++) t.ne[d] = ne[d];
    t.data = data;
    t.nbytes = nbytes;
    return add_tensor(w, &t, name);
}

int lp_gguf_writer_forge_offset(lp_gguf_writer_t *w, int64_t i, uint64_t offset)
{
    if (i < 0 || i >= w->n_tensors)
        return lp_error_set(LP_ERR(EINVAL), "gguf writer: no tensor #%lld", (long long)i);
    w->tensors[i].forged = 1;
    w->tensors[i].forged_offset = offset;
    return 0;
}

int64_t lp_gguf_writer_n_tensors(const lp_gguf_writer_t *w) { return w->n_tensors; }

/* ---- output ---- */

static int put(FILE *f, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, f) != n)
        return lp_error_set(LP_ERR(EIO), "gguf writer: write failed");
    return 0;
}

static int put_zeros(FILE *f, size_t n)
{
    static const uint8_t zeros[4096];
    int rc = 0;
    while (n && !rc) {
        size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
        rc = put(f, zeros, k);
        n -= k;
    }
    return rc;
}

static int write_data(FILE *f, const wtensor_t *t, uint8_t **buf, size_t *buf_cap)
{
    if (t->data) return put(f, t->data, t->nbytes);
    if (!t->cb) return put_zeros(f, t->nbytes);
    int64_t rows = (int64_t)(t->nbytes / t->row_bytes);
    int64_t per = CHUNK_BYTES / t->row_bytes;
    if (per < 1) per = 1;
    size_t need = (size_t)per * t->row_bytes;
    if (need > *buf_cap) {
        free(*buf);
        *buf = malloc(need);
        *buf_cap = *buf ? need : 0;
        if (!*buf) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
    }
    for (int64_t r = 0; r < rows; r += per) {
        int64_t n = rows - r < per ? rows - r : per;
        int rc = t->cb(t->ctx, r, n, *buf);
        if (!rc) rc = put(f, *buf, (size_t)n * t->row_bytes);
        if (rc) return rc;
    }
    return 0;
}

static int write_all(lp_gguf_writer_t *w, FILE *f)
{
    uint64_t counts[2] = {(uint64_t)w->n_tensors, (uint64_t)w->n_kv};
    int rc = put(f, "GGUF", 4);
    if (!rc) rc = put(f, &w->version, 4);
    if (!rc) rc = put(f, counts, sizeof(counts));
    if (!rc) rc = put(f, w->meta, w->meta_len);
    uint64_t pos = 24 + w->meta_len;
    for (int64_t i = 0; i < w->n_tensors && !rc; i++) {
        const wtensor_t *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint64_t off = t->forged ? t->forged_offset : t->offset;
        rc = put(f, &len, 8);
        if (!rc) rc = put(f, t->name, len);
        if (!rc) rc = put(f, &t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims && !rc; d++) rc = put(f, &t->ne[d], 8);
        if (!rc) rc = put(f, &t->type, 4);
        if (!rc) rc = put(f, &off, 8);
        pos += 8 + len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    /* ggml pads here even when there are no tensors; so do we. */
    if (!rc) rc = put_zeros(f, pad_to(pos, w->alignment) - pos);
    uint8_t *buf = NULL;
    size_t buf_cap = 0;
    uint64_t at = 0; /* bytes of the data section written */
    for (int64_t i = 0; i < w->n_tensors && !rc; i++) {
        const wtensor_t *t = &w->tensors[i];
        rc = put_zeros(f, t->offset - at);
        if (!rc) rc = write_data(f, t, &buf, &buf_cap);
        at = t->offset + t->nbytes;
        if (!rc) rc = put_zeros(f, pad_to(at, w->alignment) - at);
        at = pad_to(at, w->alignment);
    }
    free(buf);
    return rc;
}

int lp_gguf_writer_write_file(lp_gguf_writer_t *w, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) return lp_error_set(LP_ERR(errno), "%s: %s", path, strerror(errno));
    int rc = write_all(w, f);
    if (fclose(f) && !rc) rc = lp_error_set(LP_ERR(EIO), "%s: write failed", path);
    else if (rc) lp_error_prefix("%s: ", path);
    if (rc) unlink(path);
    return rc;
}

int lp_gguf_writer_write_mem(lp_gguf_writer_t *w, uint8_t **buf, size_t *len)
{
    char *p = NULL;
    size_t n = 0;
    *buf = NULL;
    *len = 0;
    FILE *f = open_memstream(&p, &n);
    if (!f) return lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
    int rc = write_all(w, f);
    if (fclose(f) && !rc) rc = lp_error_set(LP_ERR(ENOMEM), "gguf writer: out of memory");
    if (rc) {
        free(p);
        return rc;
    }
    *buf = (uint8_t *)p;
    *len = n;
    return 0;
}
