/* gguf.h - a validating, memory-mapping reader of GGUF files (v2 and v3).
 *
 * Every count, offset, size, alignment, type and dimension is checked against
 * the file size before it is trusted.  Each failure returns a negative code
 * and sets lp_error_msg() to a message that names the key or tensor at fault.
 *
 * Tensor data stays in the mapping: lp_gguf_tensor_t.data points into it and
 * is valid until lp_gguf_destroy().  GGUF dims are innermost-first: ne[0] is
 * the row length and the data is row-major, so a 2-D weight with
 * ne = {n_in, n_out} is n_out rows of n_in elements. */
#ifndef LP_GGUF_H
#define LP_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP_GGUF_MAX_DIMS 4

enum lp_gguf_vtype {
    LP_GGUF_UINT8 = 0,
    LP_GGUF_INT8 = 1,
    LP_GGUF_UINT16 = 2,
    LP_GGUF_INT16 = 3,
    LP_GGUF_UINT32 = 4,
    LP_GGUF_INT32 = 5,
    LP_GGUF_FLOAT32 = 6,
    LP_GGUF_BOOL = 7,
    LP_GGUF_STRING = 8,
    LP_GGUF_ARRAY = 9,
    LP_GGUF_UINT64 = 10,
    LP_GGUF_INT64 = 11,
    LP_GGUF_FLOAT64 = 12,
    LP_GGUF_VTYPE_COUNT = 13,
};

typedef struct lp_gguf lp_gguf_t;

/* A string inside the mapping: not NUL-terminated; valid UTF-8. */
typedef struct lp_gguf_str {
    const char *ptr;
    uint64_t len;
} lp_gguf_str_t;

typedef struct lp_gguf_kv {
    char *key;               /* NUL-terminated copy, owned by the reader */
    enum lp_gguf_vtype type; /* LP_GGUF_ARRAY for arrays */
    enum lp_gguf_vtype arr_type; /* element type when type is ARRAY */
    uint64_t arr_n;          /* element count when type is ARRAY */
    const void *data;        /* scalar value, or first element, in the mapping */
    lp_gguf_str_t *strs;     /* string values (arr_n of them, or 1); owned */
} lp_gguf_kv_t;

typedef struct lp_gguf_tensor {
    char *name;              /* NUL-terminated copy, owned by the reader */
    uint32_t n_dims;
    int64_t ne[LP_GGUF_MAX_DIMS]; /* innermost first; unused dims are 1 */
    uint32_t type;           /* enum lp_type */
    uint64_t offset;         /* from the start of the data section */
    size_t nbytes;
    const void *data;        /* in the mapping */
} lp_gguf_tensor_t;

/* Map and validate a file.  On success *out owns the mapping. */
int lp_gguf_open(const char *path, lp_gguf_t **out);
/* Validate a buffer that the caller keeps alive (fuzzing, tests). */
int lp_gguf_open_mem(const void *buf, size_t len, lp_gguf_t **out);
void lp_gguf_destroy(lp_gguf_t **self_p);

/* Ask for the tensor data of a mapped file in 2 MiB pages, for code that
 * streams every weight (decode reads each once per token).  When the file
 * sits in the page cache in 4 KiB pages, its clean pages are dropped once
 * so that they come back large: the next reads go to the disk.  Returns 1
 * when the data is mapped with huge pages, 0 when not (an unmapped buffer,
 * a file under 4 MiB, a kernel or filesystem without them). */
int lp_gguf_map_huge(const lp_gguf_t *g);
/* Give back the resident pages wholly inside [p, p + len) of a mapped
 * file (a reader that has copied that data elsewhere): they fault back in
 * from the file if read again.  Does nothing for a buffer opened with
 * lp_gguf_open_mem. */
void lp_gguf_drop_pages(const lp_gguf_t *g, const void *p, size_t len);

uint32_t lp_gguf_version(const lp_gguf_t *g);
size_t lp_gguf_file_size(const lp_gguf_t *g);
uint32_t lp_gguf_alignment(const lp_gguf_t *g);

int64_t lp_gguf_n_kv(const lp_gguf_t *g);
const lp_gguf_kv_t *lp_gguf_kv_at(const lp_gguf_t *g, int64_t i);
/* NULL when absent. */
const lp_gguf_kv_t *lp_gguf_find(const lp_gguf_t *g, const char *key);

int64_t lp_gguf_n_tensors(const lp_gguf_t *g);
const lp_gguf_tensor_t *lp_gguf_tensor_at(const lp_gguf_t *g, int64_t i);
const lp_gguf_tensor_t *lp_gguf_find_tensor(const lp_gguf_t *g, const char *name);

/* Typed getters.  They return 0, LP_ERR(ENOENT) when the key is absent, or
 * LP_ERR(EINVAL) with a message naming the key when its type or value does
 * not fit.  Integer getters accept any integer type whose value fits. */
int lp_gguf_get_u32(const lp_gguf_t *g, const char *key, uint32_t *out);
int lp_gguf_get_i64(const lp_gguf_t *g, const char *key, int64_t *out);
int lp_gguf_get_f32(const lp_gguf_t *g, const char *key, float *out);
int lp_gguf_get_bool(const lp_gguf_t *g, const char *key, bool *out);
int lp_gguf_get_str(const lp_gguf_t *g, const char *key, lp_gguf_str_t *out);
/* An array of `type` elements; *data points into the mapping (unaligned). */
int lp_gguf_get_arr(const lp_gguf_t *g, const char *key, enum lp_gguf_vtype type,
                    const void **data, uint64_t *n);
/* An array of strings; *strs is owned by the reader. */
int lp_gguf_get_str_arr(const lp_gguf_t *g, const char *key,
                        const lp_gguf_str_t **strs, uint64_t *n);

const char *lp_gguf_vtype_name(enum lp_gguf_vtype t);

/* Read element i of a numeric array or scalar as double. */
double lp_gguf_num_at(enum lp_gguf_vtype t, const void *data, uint64_t i);

/* 1 when the bytes are valid UTF-8 (no overlongs, no surrogates). */
int lp_utf8_valid(const char *s, size_t n);

#endif
