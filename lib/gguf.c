/* gguf.c - validating GGUF reader over a read-only mapping.
 *
 * Layout (little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv key/value pairs, n_tensors tensor infos (name, u32 n_dims, u64 ne[],
 * u32 type, u64 offset), padding to the alignment, then the data section. */
#include "gguf.h"

#include "error.h"
#include "ggml-type.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_DEFAULT_ALIGNMENT 32

struct lp_gguf {
    const uint8_t *base;
    size_t size;
    int mapped;           /* 1 when base is our mmap */
    char *path;           /* the mapped file's path (mapped files only) */
    uint32_t version;
    uint32_t alignment;
    size_t data_offset;
    int64_t n_kv;
    lp_gguf_kv_t *kv;
    int64_t n_tensors;
    lp_gguf_tensor_t *tensors;
};

typedef struct cursor {
    const uint8_t *p;
    size_t pos, size;
    const char *what;     /* what is being read, for messages */
} cursor_t;

static const size_t vtype_size[LP_GGUF_VTYPE_COUNT] = {
    [LP_GGUF_UINT8] = 1, [LP_GGUF_INT8] = 1, [LP_GGUF_UINT16] = 2,
    [LP_GGUF_INT16] = 2, [LP_GGUF_UINT32] = 4, [LP_GGUF_INT32] = 4,
    [LP_GGUF_FLOAT32] = 4, [LP_GGUF_BOOL] = 1, [LP_GGUF_UINT64] = 8,
    [LP_GGUF_INT64] = 8, [LP_GGUF_FLOAT64] = 8,
};

const char *lp_gguf_vtype_name(enum lp_gguf_vtype t)
{
    static const char *names[LP_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr",
        "u64", "i64", "f64"};
    return (unsigned)t < LP_GGUF_VTYPE_COUNT ? names[t] : "unknown";
}

/* UTF-8 validation (Unicode Table 3-7: no overlongs, no surrogates, nothing
 * past U+10FFFF) as a shift-based DFA: a state is a bit offset, and row[b]
 * holds, at each state's offset, the state that byte b leads to.  One shift
 * per byte and no branches, which matters for the 300k short, mixed strings
 * of a vocabulary; runs of 8 ASCII bytes are skipped at once. */
enum {
    U8_OK = 0,   /* between sequences */
    U8_C1 = 6,   /* 1 continuation byte (80-BF) left */
    U8_C2 = 12,  /* 2 left */
    U8_C3 = 18,  /* 3 left */
    U8_E0 = 24,  /* after E0: A0-BF, then 1 */
    U8_ED = 30,  /* after ED: 80-9F, then 1 */
    U8_F0 = 36,  /* after F0: 90-BF, then 2 */
    U8_F4 = 42,  /* after F4: 80-8F, then 2 */
    U8_BAD = 48, /* absorbing */
};
#define U8_ROW(ok, c1, c2, c3, e0, ed, f0, f4)                                      \
    ((uint64_t)(ok) << U8_OK | (uint64_t)(c1) << U8_C1 | (uint64_t)(c2) << U8_C2 | \
     (uint64_t)(c3) << U8_C3 | (uint64_t)(e0) << U8_E0 | (uint64_t)(ed) << U8_ED | \
     (uint64_t)(f0) << U8_F0 | (uint64_t)(f4) << U8_F4 | (uint64_t)U8_BAD << U8_BAD)
#define U8_LEAD(next) U8_ROW(next, U8_BAD, U8_BAD, U8_BAD, U8_BAD, U8_BAD, U8_BAD, U8_BAD)
static const uint64_t utf8_row[256] = {
    [0x00 ... 0x7f] = U8_LEAD(U8_OK),
    [0x80 ... 0x8f] = U8_ROW(U8_BAD, U8_OK, U8_C1, U8_C2, U8_BAD, U8_C1, U8_BAD, U8_C2),
    [0x90 ... 0x9f] = U8_ROW(U8_BAD, U8_OK, U8_C1, U8_C2, U8_BAD, U8_C1, U8_C2, U8_BAD),
    [0xa0 ... 0xbf] = U8_ROW(U8_BAD, U8_OK, U8_C1, U8_C2, U8_C1, U8_BAD, U8_C2, U8_BAD),
    [0xc0 ... 0xc1] = U8_LEAD(U8_BAD),
    [0xc2 ... 0xdf] = U8_LEAD(U8_C1),
    [0xe0] = U8_LEAD(U8_E0),
    [0xe1 ... 0xec] = U8_LEAD(U8_C2),
    [0xed] = U8_LEAD(U8_ED),
    [0xee ... 0xef] = U8_LEAD(U8_C2),
    [0xf0] = U8_LEAD(U8_F0),
    [0xf1 ... 0xf3] = U8_LEAD(U8_C3),
    [0xf4] = U8_LEAD(U8_F4),
    [0xf5 ... 0xff] = U8_LEAD(U8_BAD),
};

int lp_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    uint64_t st = U8_OK;
    while (i < n) {
        if (n - i >= 8 && (st & 63) == U8_OK) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            if (!(v & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        /* up to 8 bytes through the DFA; x86 shifts use the count's low 6
         * bits, so "& 63" costs nothing */
        size_t end = n - i > 8 ? i + 8 : n;
        for (; i < end; i++) st = utf8_row[s[i]] >> (st & 63);
    }
    return (st & 63) == U8_OK;
}

static int need(cursor_t *c, size_t n)
{
    if (c->size - c->pos < n)
        return lp_error_set(LP_ERR(EBADMSG),
                            "truncated file: %s needs %zu bytes at offset %zu, "
                            "but the file has %zu", c->what, n, c->pos, c->size);
    return 0;
}

static int rd_u32(cursor_t *c, uint32_t *v)
{
    int rc = need(c, 4);
    if (rc) return rc;
    memcpy(v, c->p + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor_t *c, uint64_t *v)
{
    int rc = need(c, 8);
    if (rc) return rc;
    memcpy(v, c->p + c->pos, 8);
    c->pos += 8;
    return 0;
}

static int rd_str(cursor_t *c, lp_gguf_str_t *s)
{
    uint64_t len;
    int rc = rd_u64(c, &len);
    if (rc) return rc;
    if (len > c->size - c->pos)
        return lp_error_set(LP_ERR(EBADMSG),
                            "%s: string length %llu at offset %zu runs past the "
                            "end of the file (%zu bytes)", c->what,
                            (unsigned long long)len, c->pos - 8, c->size);
    s->ptr = (const char *)c->p + c->pos;
    s->len = len;
    if (!lp_utf8_valid(s->ptr, len))
        return lp_error_set(LP_ERR(EILSEQ), "%s: string at offset %zu is not valid UTF-8",
                            c->what, c->pos);
    c->pos += len;
    return 0;
}

static char *dup_str(lp_gguf_str_t s)
{
    char *d = malloc(s.len + 1);
    if (!d) return NULL;
    memcpy(d, s.ptr, s.len);
    d[s.len] = '\0';
    return d;
}

static int read_kv(cursor_t *c, lp_gguf_kv_t *kv, int64_t idx)
{
    char what[96];
    lp_gguf_str_t key;
    snprintf(what, sizeof(what), "key #%lld", (long long)idx);
    c->what = what;
    int rc = rd_str(c, &key);
    if (rc) return rc;
    if (key.len == 0)
        return lp_error_set(LP_ERR(EBADMSG), "key #%lld is empty", (long long)idx);
    if (memchr(key.ptr, '\0', key.len))
        return lp_error_set(LP_ERR(EBADMSG), "key #%lld holds a NUL byte", (long long)idx);
    kv->key = dup_str(key);
    if (!kv->key) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->what = kv->key;

    uint32_t type;
    if ((rc = rd_u32(c, &type))) return rc;
    if (type >= LP_GGUF_VTYPE_COUNT)
        return lp_error_set(LP_ERR(EBADMSG), "key '%s': unknown value type %u",
                            kv->key, type);
    kv->type = type;
    uint64_t n = 1;
    enum lp_gguf_vtype et = type;
    if (type == LP_GGUF_ARRAY) {
        uint32_t at;
        if ((rc = rd_u32(c, &at))) return rc;
        if (at >= LP_GGUF_VTYPE_COUNT || at == LP_GGUF_ARRAY)
            return lp_error_set(LP_ERR(EBADMSG),
                                "key '%s': unsupported array element type %u",
                                kv->key, at);
        if ((rc = rd_u64(c, &n))) return rc;
        et = at;
        kv->arr_type = at;
        kv->arr_n = n;
        /* Each element takes at least its fixed size (8 for a string's
         * length), so a count beyond the remaining bytes is a lie. */
        size_t min = et == LP_GGUF_STRING ? 8 : vtype_size[et];
        if (n > (c->size - c->pos) / min)
            return lp_error_set(LP_ERR(EBADMSG),
                                "key '%s': array count %llu is larger than the "
                                "%zu bytes left in the file", kv->key,
                                (unsigned long long)n, c->size - c->pos);
    }
    kv->data = c->p + c->pos;
    if (et == LP_GGUF_STRING) {
        kv->strs = malloc(sizeof(*kv->strs) * (n ? n : 1));
        if (!kv->strs) return lp_error_set(LP_ERR(ENOMEM), "key '%s': out of memory", kv->key);
        for (uint64_t i = 0; i < n; i++)
            if ((rc = rd_str(c, &kv->strs[i]))) return rc;
    } else {
        if ((rc = need(c, vtype_size[et] * n))) return rc;
        if (et == LP_GGUF_BOOL) {
            for (uint64_t i = 0; i < n; i++)
                if (c->p[c->pos + i] > 1)
                    return lp_error_set(LP_ERR(EBADMSG),
                                        "key '%s': bool value %u is neither 0 nor 1",
                                        kv->key, c->p[c->pos + i]);
        }
        c->pos += vtype_size[et] * n;
    }
    return 0;
}

static int read_tensor_info(cursor_t *c, lp_gguf_tensor_t *t, int64_t idx)
{
    char what[96];
    lp_gguf_str_t name;
    snprintf(what, sizeof(what), "tensor #%lld", (long long)idx);
    c->what = what;
    int rc = rd_str(c, &name);
    if (rc) return rc;
    if (name.len == 0 || memchr(name.ptr, '\0', name.len))
        return lp_error_set(LP_ERR(EBADMSG), "tensor #%lld has an empty or NUL-holding name",
                            (long long)idx);
    t->name = dup_str(name);
    if (!t->name) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->what = t->name;

    if ((rc = rd_u32(c, &t->n_dims))) return rc;
    if (t->n_dims == 0 || t->n_dims > LP_GGUF_MAX_DIMS)
        return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': %u dimensions (1 to %d allowed)",
                            t->name, t->n_dims, LP_GGUF_MAX_DIMS);
    for (int d = 0; d < LP_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    uint64_t nelem = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((rc = rd_u64(c, &ne))) return rc;
        if (ne == 0 || ne > (uint64_t)INT64_MAX || nelem > (uint64_t)INT64_MAX / ne)
            return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': dimension %u is %llu, "
                                "which is zero or overflows", t->name, d,
                                (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        nelem *= ne;
    }
    if ((rc = rd_u32(c, &t->type))) return rc;
    const lp_type_traits_t *tr = lp_type_traits(t->type);
    if (!tr)
        return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': unknown type %u", t->name, t->type);
    if (t->ne[0] % tr->block_elems)
        return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': row length %lld is not a "
                            "multiple of the %s block size %u", t->name,
                            (long long)t->ne[0], tr->name, tr->block_elems);
    uint64_t nblocks = nelem / tr->block_elems;
    if (nblocks > SIZE_MAX / tr->block_bytes)
        return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': size overflows", t->name);
    t->nbytes = (size_t)nblocks * tr->block_bytes;
    if ((rc = rd_u64(c, &t->offset))) return rc;
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(**(char *const *const *)a, **(char *const *const *)b);
}

/* Fails when two keys (or two tensor names) repeat.  `names` points at the
 * first char* of an array of structs of size `stride`. */
static int check_unique(char **first, size_t stride, int64_t n, const char *what)
{
    if (n < 2) return 0;
    char ***idx = malloc(sizeof(*idx) * (size_t)n);
    if (!idx) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    for (int64_t i = 0; i < n; i++)
        idx[i] = (char **)((char *)first + (size_t)i * stride);
    qsort(idx, (size_t)n, sizeof(*idx), cmp_str_ptr);
    int rc = 0;
    for (int64_t i = 1; i < n && !rc; i++)
        if (!strcmp(*idx[i - 1], *idx[i]))
            rc = lp_error_set(LP_ERR(EBADMSG), "duplicate %s '%s'", what, *idx[i]);
    free(idx);
    return rc;
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    const lp_gguf_tensor_t *x = *(lp_gguf_tensor_t *const *)a;
    const lp_gguf_tensor_t *y = *(lp_gguf_tensor_t *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int check_overlap(lp_gguf_t *g)
{
    if (g->n_tensors < 2) return 0;
    lp_gguf_tensor_t **idx = malloc(sizeof(*idx) * (size_t)g->n_tensors);
    if (!idx) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++) idx[i] = &g->tensors[i];
    qsort(idx, (size_t)g->n_tensors, sizeof(*idx), cmp_tensor_offset);
    int rc = 0;
    for (int64_t i = 1; i < g->n_tensors && !rc; i++)
        if (idx[i - 1]->offset + idx[i - 1]->nbytes > idx[i]->offset)
            rc = lp_error_set(LP_ERR(EBADMSG), "tensor '%s' (offset %llu, %zu bytes) "
                              "overlaps tensor '%s' (offset %llu)", idx[i - 1]->name,
                              (unsigned long long)idx[i - 1]->offset, idx[i - 1]->nbytes,
                              idx[i]->name, (unsigned long long)idx[i]->offset);
    free(idx);
    return rc;
}

static int parse(lp_gguf_t *g)
{
    cursor_t c = {g->base, 0, g->size, "header"};
    int rc = need(&c, 4);
    if (rc) return rc;
    if (memcmp(g->base, "GGUF", 4))
        return lp_error_set(LP_ERR(EBADMSG), "bad magic %02x %02x %02x %02x: not a GGUF file",
                            g->base[0], g->base[1], g->base[2], g->base[3]);
    c.pos = 4;
    if ((rc = rd_u32(&c, &g->version))) return rc;
    if (g->version != 2 && g->version != 3)
        return lp_error_set(LP_ERR(EBADMSG), "GGUF version %u is not supported (2 and 3 are)%s",
                            g->version, g->version > 0xffff ? "; a big-endian file?" : "");
    uint64_t nt, nkv;
    if ((rc = rd_u64(&c, &nt)) || (rc = rd_u64(&c, &nkv))) return rc;
    /* The smallest key/value takes 13 bytes and the smallest tensor info 33. */
    if (nkv > (c.size - c.pos) / 13)
        return lp_error_set(LP_ERR(EBADMSG), "header: %llu key/value pairs cannot fit in "
                            "a %zu-byte file", (unsigned long long)nkv, c.size);
    if (nt > (c.size - c.pos) / 33)
        return lp_error_set(LP_ERR(EBADMSG), "header: %llu tensors cannot fit in a "
                            "%zu-byte file", (unsigned long long)nt, c.size);
    g->n_kv = (int64_t)nkv;
    g->n_tensors = (int64_t)nt;
    g->kv = calloc(nkv ? nkv : 1, sizeof(*g->kv));
    g->tensors = calloc(nt ? nt : 1, sizeof(*g->tensors));
    if (!g->kv || !g->tensors) return lp_error_set(LP_ERR(ENOMEM), "out of memory");

    for (int64_t i = 0; i < g->n_kv; i++)
        if ((rc = read_kv(&c, &g->kv[i], i))) return rc;
    if ((rc = check_unique(&g->kv[0].key, sizeof(g->kv[0]), g->n_kv, "key"))) return rc;

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const lp_gguf_kv_t *al = lp_gguf_find(g, "general.alignment");
    if (al) {
        uint32_t a;
        if ((rc = lp_gguf_get_u32(g, "general.alignment", &a))) return rc;
        if (a == 0 || (a & (a - 1)) || a > (1u << 20))
            return lp_error_set(LP_ERR(EBADMSG), "key 'general.alignment': %u is not a "
                                "power of two up to 1 MiB", a);
        g->alignment = a;
    }

    for (int64_t i = 0; i < g->n_tensors; i++)
        if ((rc = read_tensor_info(&c, &g->tensors[i], i))) return rc;
    if ((rc = check_unique(&g->tensors[0].name, sizeof(g->tensors[0]), g->n_tensors,
                           "tensor name")))
        return rc;

    size_t data = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors > 0 && data > g->size)
        return lp_error_set(LP_ERR(EBADMSG), "truncated file: the data section would "
                            "start at %zu, past the end (%zu bytes)", data, g->size);
    g->data_offset = data;
    size_t avail = g->size > data ? g->size - data : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        lp_gguf_tensor_t *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': offset %llu is not aligned "
                                "to %u", t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return lp_error_set(LP_ERR(EBADMSG), "tensor '%s': data [%llu, +%zu) runs past "
                                "the end of the file (data section holds %zu bytes)",
                                t->name, (unsigned long long)t->offset, t->nbytes, avail);
        t->data = g->base + data + t->offset;
    }
    return check_overlap(g);
}

int lp_gguf_open_mem(const void *buf, size_t len, lp_gguf_t **out)
{
    *out = NULL;
    lp_gguf_t *g = calloc(1, sizeof(*g));
    if (!g) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    g->base = buf;
    g->size = len;
    int rc = parse(g);
    if (rc) {
        lp_gguf_destroy(&g);
        return rc;
    }
    *out = g;
    return 0;
}

int lp_gguf_open(const char *path, lp_gguf_t **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return lp_error_set(LP_ERR(errno), "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return lp_error_set(LP_ERR(e), "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 8) {
        close(fd);
        return lp_error_set(LP_ERR(EBADMSG), "%s: truncated file: %lld bytes is too small "
                            "for a GGUF header", path, (long long)st.st_size);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return lp_error_set(LP_ERR(e), "%s: mmap: %s", path, strerror(e));
    int rc = lp_gguf_open_mem(p, (size_t)st.st_size, out);
    if (rc) {
        munmap(p, (size_t)st.st_size);
        lp_error_prefix("%s: ", path);
        return rc;
    }
    (*out)->mapped = 1;
    if (!((*out)->path = strdup(path))) {
        lp_gguf_destroy(out);
        return lp_error_set(LP_ERR(ENOMEM), "%s: out of memory", path);
    }
    return 0;
}

void lp_gguf_destroy(lp_gguf_t **self_p)
{
    lp_gguf_t *g = self_p ? *self_p : NULL;
    if (!g) return;
    for (int64_t i = 0; g->kv && i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].strs);
    }
    for (int64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
    *self_p = NULL;
}

/* ---- huge pages for the tensor data ------------------------------------
 *
 * Streaming the weights through 4 KiB pages costs a TLB miss per page, and
 * the hardware prefetchers stop at page boundaries.  Linux caches a file
 * in large folios when a VM_HUGEPAGE mapping faults it in (filesystems with
 * large folios: ext4 since 6.16, xfs, tmpfs), and maps a 2 MiB folio with
 * one PMD entry when the mapping is aligned to 2 MiB.  A file already
 * cached in small pages stays so until its pages are dropped. */

#define HUGE_BYTES ((uintptr_t)2 << 20)

/* FilePmdMapped of the mapping holding addr, from /proc/self/smaps; -1 if
 * unreadable. */
static long pmd_mapped_kb(uintptr_t addr)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f) return -1;
    char line[4096]; /* a mapping's line ends in a path of up to PATH_MAX */
    int inside = 0;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = addr >= lo && addr < hi;
            continue;
        }
        if (inside && sscanf(line, "FilePmdMapped: %ld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

/* Touch the 2 MiB at addr: 1 when it came in as one huge page, 0 when
 * not, -1 when /proc does not say. */
static int probe_huge(uintptr_t addr)
{
    (void)*(volatile const uint8_t *)addr;
    long kb = pmd_mapped_kb(addr);
    return kb < 0 ? -1 : kb > 0;
}

int lp_gguf_map_huge(const lp_gguf_t *g)
{
    if (!g->mapped || !g->path || ((uintptr_t)g->base & (HUGE_BYTES - 1))) return 0;
    uintptr_t probe = ((uintptr_t)g->base + g->data_offset + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
    if (probe + HUGE_BYTES > (uintptr_t)g->base + g->size) return 0; /* too small to matter */
    if (madvise((void *)g->base, g->size, MADV_HUGEPAGE)) return 0;  /* no THP here */
    int huge = probe_huge(probe);
    if (huge) return huge > 0; /* huge already, or no way to tell */
    /* Cached in small pages: unmap ours and drop the file's clean pages
     * that no other process maps, so that the weights fault back in as
     * large folios.  Costs one read of the file. */
    int fd = open(g->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    madvise((void *)g->base, g->size, MADV_DONTNEED);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return probe_huge(probe) > 0;
}

void lp_gguf_drop_pages(const lp_gguf_t *g, const void *p, size_t len)
{
    uintptr_t lo = (uintptr_t)p, hi = lo + len, base = (uintptr_t)g->base;
    if (!g->mapped || lo < base || hi > base + g->size) return;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    lo = (lo + pg - 1) & ~(pg - 1);
    hi &= ~(pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

uint32_t lp_gguf_version(const lp_gguf_t *g) { return g->version; }
size_t lp_gguf_file_size(const lp_gguf_t *g) { return g->size; }
uint32_t lp_gguf_alignment(const lp_gguf_t *g) { return g->alignment; }
int64_t lp_gguf_n_kv(const lp_gguf_t *g) { return g->n_kv; }
int64_t lp_gguf_n_tensors(const lp_gguf_t *g) { return g->n_tensors; }

const lp_gguf_kv_t *lp_gguf_kv_at(const lp_gguf_t *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const lp_gguf_tensor_t *lp_gguf_tensor_at(const lp_gguf_t *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const lp_gguf_kv_t *lp_gguf_find(const lp_gguf_t *g, const char *key)
{
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key && !strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const lp_gguf_tensor_t *lp_gguf_find_tensor(const lp_gguf_t *g, const char *name)
{
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

double lp_gguf_num_at(enum lp_gguf_vtype t, const void *data, uint64_t i)
{
    const uint8_t *p = (const uint8_t *)data + vtype_size[t] * i;
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32;
            int32_t i32; float f32; uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, p, vtype_size[t]);
    switch (t) {
    case LP_GGUF_UINT8: case LP_GGUF_BOOL: return v.u8;
    case LP_GGUF_INT8: return v.i8;
    case LP_GGUF_UINT16: return v.u16;
    case LP_GGUF_INT16: return v.i16;
    case LP_GGUF_UINT32: return v.u32;
    case LP_GGUF_INT32: return v.i32;
    case LP_GGUF_FLOAT32: return v.f32;
    case LP_GGUF_UINT64: return (double)v.u64;
    case LP_GGUF_INT64: return (double)v.i64;
    case LP_GGUF_FLOAT64: return v.f64;
    default: return 0;
    }
}

static int get_int(const lp_gguf_t *g, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const lp_gguf_kv_t *kv = lp_gguf_find(g, key);
    if (!kv) return LP_ERR(ENOENT);
    int64_t v;
    switch (kv->type) {
    case LP_GGUF_UINT8: case LP_GGUF_INT8: case LP_GGUF_UINT16: case LP_GGUF_INT16:
    case LP_GGUF_UINT32: case LP_GGUF_INT32:
        v = (int64_t)lp_gguf_num_at(kv->type, kv->data, 0);
        break;
    case LP_GGUF_INT64:
        memcpy(&v, kv->data, 8);
        break;
    case LP_GGUF_UINT64: {
        uint64_t u;
        memcpy(&u, kv->data, 8);
        if (u > (uint64_t)INT64_MAX)
            return lp_error_set(LP_ERR(EINVAL), "key '%s': value %llu is out of range",
                                key, (unsigned long long)u);
        v = (int64_t)u;
        break;
    }
    default:
        return lp_error_set(LP_ERR(EINVAL), "key '%s': expected an integer, found %s",
                            key, lp_gguf_vtype_name(kv->type));
    }
    if (v < lo || v > hi)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': value %lld is out of range",
                            key, (long long)v);
    *out = v;
    return 0;
}

int lp_gguf_get_u32(const lp_gguf_t *g, const char *key, uint32_t *out)
{
    int64_t v;
    int rc = get_int(g, key, 0, UINT32_MAX, &v);
    if (!rc) *out = (uint32_t)v;
    return rc;
}

int lp_gguf_get_i64(const lp_gguf_t *g, const char *key, int64_t *out)
{
    return get_int(g, key, INT64_MIN, INT64_MAX, out);
}

int lp_gguf_get_f32(const lp_gguf_t *g, const char *key, float *out)
{
    const lp_gguf_kv_t *kv = lp_gguf_find(g, key);
    if (!kv) return LP_ERR(ENOENT);
    if (kv->type == LP_GGUF_FLOAT32 || kv->type == LP_GGUF_FLOAT64) {
        *out = (float)lp_gguf_num_at(kv->type, kv->data, 0);
        return 0;
    }
    int64_t v;
    int rc = get_int(g, key, INT64_MIN, INT64_MAX, &v);
    if (rc == 0) *out = (float)v;
    else lp_error_set(LP_ERR(EINVAL), "key '%s': expected a number, found %s", key,
                      lp_gguf_vtype_name(kv->type));
    return rc ? LP_ERR(EINVAL) : 0;
}

int lp_gguf_get_bool(const lp_gguf_t *g, const char *key, bool *out)
{
    const lp_gguf_kv_t *kv = lp_gguf_find(g, key);
    if (!kv) return LP_ERR(ENOENT);
    if (kv->type != LP_GGUF_BOOL)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': expected a bool, found %s", key,
                            lp_gguf_vtype_name(kv->type));
    *out = *(const uint8_t *)kv->data != 0;
    return 0;
}

int lp_gguf_get_str(const lp_gguf_t *g, const char *key, lp_gguf_str_t *out)
{
    const lp_gguf_kv_t *kv = lp_gguf_find(g, key);
    if (!kv) return LP_ERR(ENOENT);
    if (kv->type != LP_GGUF_STRING)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': expected a string, found %s", key,
                            lp_gguf_vtype_name(kv->type));
    *out = kv->strs[0];
    return 0;
}

int lp_gguf_get_arr(const lp_gguf_t *g, const char *key, enum lp_gguf_vtype type,
                    const void **data, uint64_t *n)
{
    const lp_gguf_kv_t *kv = lp_gguf_find(g, key);
    if (!kv) return LP_ERR(ENOENT);
    if (kv->type != LP_GGUF_ARRAY || kv->arr_type != type)
        return lp_error_set(LP_ERR(EINVAL), "key '%s': expected an array of %s", key,
                            lp_gguf_vtype_name(type));
    *data = kv->data;
    *n = kv->arr_n;
    return 0;
}

int lp_gguf_get_str_arr(const lp_gguf_t *g, const char *key, const lp_gguf_str_t **strs,
                        uint64_t *n)
{
    const void *unused;
    int rc = lp_gguf_get_arr(g, key, LP_GGUF_STRING, &unused, n);
    if (rc) return rc;
    *strs = lp_gguf_find(g, key)->strs;
    return 0;
}
