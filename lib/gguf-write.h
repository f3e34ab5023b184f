/* gguf-write.h - a small GGUF writer (version 3 by default).
 *
 * Build the file in memory (metadata and tensor descriptions), then write it
 * to a path or to a heap buffer.  Tensor data is either a borrowed buffer or
 * produced on demand, a few rows at a time, by a callback, so a multi-GB model
 * never has to sit in memory.
 *
 * The writer writes what it is told: it does not refuse duplicate keys or
 * names, odd versions, unknown tensor types or forged offsets, because tests
 * use it to build the broken files that the reader must reject.  Only its own
 * resources (memory, I/O) and impossible layouts fail here. */
#ifndef LP_GGUF_WRITE_H
#define LP_GGUF_WRITE_H

#include "gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lp_gguf_writer lp_gguf_writer_t;

/* Produces rows [row0, row0 + n_rows) of a tensor into dst (n_rows rows of
 * the tensor's row size in bytes; a row is ne[0] elements).  Returns 0, or a
 * negative code (with lp_error_set) to abort the write. */
typedef int (*lp_gguf_rows_cb)(void *ctx, int64_t row0, int64_t n_rows, void *dst);

int lp_gguf_writer_new(lp_gguf_writer_t **out);
void lp_gguf_writer_destroy(lp_gguf_writer_t **self_p);

/* The version written in the header (default 3).  Any value is written. */
void lp_gguf_writer_set_version(lp_gguf_writer_t *w, uint32_t version);
/* Data alignment (default 32): a power of two; also adds the key
 * general.alignment (u32).  Call it before adding tensors. */
int lp_gguf_writer_set_alignment(lp_gguf_writer_t *w, uint32_t alignment);

/* ---- metadata: every call appends one key/value pair; values are copied ---- */
/* A scalar of a numeric or bool type; `value` points at its bytes. */
int lp_gguf_writer_add_scalar(lp_gguf_writer_t *w, const char *key, enum lp_gguf_vtype type,
                              const void *value);
int lp_gguf_writer_add_u32(lp_gguf_writer_t *w, const char *key, uint32_t v);
int lp_gguf_writer_add_i32(lp_gguf_writer_t *w, const char *key, int32_t v);
int lp_gguf_writer_add_f32(lp_gguf_writer_t *w, const char *key, float v);
int lp_gguf_writer_add_bool(lp_gguf_writer_t *w, const char *key, bool v);
/* A string of `len` bytes, written as given (it may be invalid UTF-8). */
int lp_gguf_writer_add_str(lp_gguf_writer_t *w, const char *key, const char *s, size_t len);
int lp_gguf_writer_add_cstr(lp_gguf_writer_t *w, const char *key, const char *s);
/* An array of n numeric or bool elements, packed little-endian. */
int lp_gguf_writer_add_arr(lp_gguf_writer_t *w, const char *key, enum lp_gguf_vtype type,
                           const void *data, uint64_t n);
int lp_gguf_writer_add_str_arr(lp_gguf_writer_t *w, const char *key,
                               const lp_gguf_str_t *strs, uint64_t n);
/* A copy of a key/value pair read by lp_gguf_open() (any type). */
int lp_gguf_writer_add_kv(lp_gguf_writer_t *w, const lp_gguf_kv_t *kv);
int64_t lp_gguf_writer_n_kv(const lp_gguf_writer_t *w);

/* ---- tensors: data offsets follow in order, each aligned ---- */
/* `data` (borrowed until the write) holds the rows of a known type; NULL
 * writes zeros.  Fails on an unknown type or a row length that is not a whole
 * number of blocks. */
int lp_gguf_writer_add_tensor(lp_gguf_writer_t *w, const char *name, uint32_t type,
                              uint32_t n_dims, const int64_t *ne, const void *data);
/* Same, with the data produced by `cb` (ctx borrowed until the write). */
int lp_gguf_writer_add_tensor_cb(lp_gguf_writer_t *w, const char *name, uint32_t type,
                                 uint32_t n_dims, const int64_t *ne, lp_gguf_rows_cb cb,
                                 void *ctx);
/* Any type ID, dims and data size, written unchecked (for broken-file tests). */
int lp_gguf_writer_add_tensor_raw(lp_gguf_writer_t *w, const char *name, uint32_t type,
                                  uint32_t n_dims, const int64_t *ne, const void *data,
                                  size_t nbytes);
/* Write `offset` into tensor i's description instead of its real offset
 * (the data is still stored at the real one).  For broken-file tests. */
int lp_gguf_writer_forge_offset(lp_gguf_writer_t *w, int64_t i, uint64_t offset);
int64_t lp_gguf_writer_n_tensors(const lp_gguf_writer_t *w);

/* ---- output ---- */
/* Write to `path` (created or truncated); on failure the file is removed. */
int lp_gguf_writer_write_file(lp_gguf_writer_t *w, const char *path);
/* Write to a new heap buffer; caller frees *buf. */
int lp_gguf_writer_write_mem(lp_gguf_writer_t *w, uint8_t **buf, size_t *len);

#endif
