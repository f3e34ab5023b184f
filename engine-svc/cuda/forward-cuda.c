/* forward-cuda.c - the CUDA backend: the forward pass of forward-cpu.c on
 * one NVIDIA GPU, step for step.
 *
 * Weights are uploaded once, at create, into one device allocation, in
 * their GGUF encoding.  A step runs on one stream:
 *   load     token ids and per-token facts (lp_cuda_tok_t) go up from a
 *            pinned staging buffer; embeddings are dequantized rows.
 *   layers   rmsnorm; q/k/v = W xn (+ bias); RoPE, then K and V into each
 *            token's sequence cache; attention over positions 0..pos;
 *            x += wo att; rmsnorm; gate, up; SwiGLU; x += down.
 *   logits   final rmsnorm of the requested rows only; output W; copied
 *            from the device straight into the caller's row pointers.
 * Matrix products: up to LP_CUDA_MMV_MAX_TOKENS tokens read the quantized
 * weights directly (matvec.cu, the decode path); larger batches dequantize
 * the weight to float32 in row chunks and run cuBLAS (gemm.c), float32
 * weights go to cuBLAS as they are.  Residual adds are fused into the
 * products that feed them (accumulate / beta = 1); on the matvec path q,
 * k and v of one weight type share a launch, and gate, up and SwiGLU are
 * one kernel.
 *
 * Decode steps (at most LP_CUDA_MMV_MAX_TOKENS tokens, so no cuBLAS) are
 * captured once per shape in a CUDA graph and replayed: a step is 8 to 10
 * launches per layer, whose launch overhead would otherwise exceed the time
 * the weights take to stream.  Nothing a captured kernel is given depends
 * on positions, tokens or cache addresses (they are read from the device
 * arrays uploaded each step), so a graph is valid for every step of the
 * same (tokens, logit rows, attention splits).  LMPIPE_CUDA_GRAPHS=0 turns
 * graphs off.
 *
 * Every CUDA and cuBLAS status is checked; a failure becomes an
 * lp_error_set() message and a negative return, never an abort.  The KV
 * cache of a sequence is [layer][pos][kv_dim] float32 on the device (the
 * CPU's is head-major), grown by doubling up to n_ctx (the CPU backend
 * allocates n_ctx positions at once and relies on lazy page residency). */
#include "backend.h"
#include "gemm.h"
#include "kernels.h"

#include "error.h"
#include "ggml-type.h"
#include "log.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct dweight {
    uint32_t type;      /* enum lp_type */
    const void *d;      /* device copy of the GGUF rows */
    int64_t n_in, n_out;
    size_t row_bytes;
} dweight_t;

typedef struct dlayer {
    float *attn_norm, *ffn_norm;   /* (n_embd) */
    float *bq, *bk, *bv;           /* (q_dim), (kv_dim), (kv_dim); may be NULL */
    dweight_t wq, wk, wv, wo, w_gate, w_up, w_down;
} dlayer_t;

typedef struct kv_seq {
    float *k, *v;   /* device, (n_layer, cap, kv_dim) */
    int32_t cap;
} kv_seq_t;

typedef struct cuda_ctx {
    const lp_model_t *m;
    lp_engine_params_t p;
    int device;
    cudaStream_t stream;
    lp_cuda_blas_t *blas;  /* prefill products */
    uint8_t *d_weights;    /* one allocation holding every weight below */
    dweight_t tok_embd;    /* (n_vocab rows of n_embd) */
    dweight_t output;      /* (n_embd -> n_vocab); tok_embd's copy when tied */
    float *output_norm;    /* (n_embd) */
    dlayer_t *layers;      /* (n_layer), host array of device pointers */
    kv_seq_t *kv;          /* (max_seqs) */
    int32_t q_dim, kv_dim;
    /* device scratch, sized for max_batch_tokens T */
    float *x;              /* (T, n_embd) residual stream */
    float *xn;             /* (T, n_embd) normalised */
    float *q, *k, *v;      /* (T, q_dim), (T, kv_dim), (T, kv_dim) */
    float *att;            /* (T, q_dim) */
    float *gate, *up;      /* (T, n_ff) */
    float *logits;         /* (LOGIT_CHUNK, n_vocab) */
    float *wf32;           /* (wf32_n) a weight's rows dequantized for cuBLAS */
    size_t wf32_n;
    float *attn_scratch;   /* lp_cuda_attention_scratch(T, n_head, head_dim, n_ctx - 1) */
    int32_t *d_tokens;     /* (T) token ids */
    int32_t *d_rows;       /* (T) batch rows that want logits */
    lp_cuda_tok_t *d_tok;  /* (T) */
    /* pinned host staging of the three arrays above */
    int32_t *h_tokens, *h_rows;
    lp_cuda_tok_t *h_tok;
    /* host ranges page-locked by register_host, unregistered at destroy */
    void **reg;
    size_t n_reg;
    /* decode graphs, least recently used replaced */
    bool use_graphs;
    struct graph_entry {
        cudaGraphExec_t exec;        /* NULL: free */
        int32_t n_tok, n_rows, n_splits;
        uint64_t used;
    } graphs[16];
    uint64_t graph_clock;
} cuda_ctx_t;

#define N_GRAPHS ((int)(sizeof(((cuda_ctx_t *)0)->graphs) / sizeof(((cuda_ctx_t *)0)->graphs[0])))

#define LOGIT_CHUNK 64
/* Largest float32 scratch for a dequantized weight: bigger weights go to
 * cuBLAS in row chunks. */
#define WF32_MAX ((size_t)64 << 20)

static int cu_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess) return 0;
    cudaGetLastError(); /* clear a non-sticky error */
    return lp_error_set(err == cudaErrorMemoryAllocation ? LP_ERR(ENOMEM) : LP_ERR(EIO),
                        "CUDA %s: %s", what, cudaGetErrorString(err));
}

/* ---- availability ----------------------------------------------------- */

static int cuda_available(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        cudaGetLastError();
        LP_DEBUG("CUDA backend unavailable: %s", cudaGetErrorString(err));
        return 0;
    }
    return n > 0;
}

/* ---- create / destroy ------------------------------------------------- */

static void cuda_destroy(void *vctx)
{
    cuda_ctx_t *c = vctx;
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (int i = 0; i < N_GRAPHS; i++)
        if (c->graphs[i].exec) cudaGraphExecDestroy(c->graphs[i].exec);
    for (int32_t s = 0; c->kv && s < c->p.max_seqs; s++) {
        cudaFree(c->kv[s].k);
        cudaFree(c->kv[s].v);
    }
    free(c->kv);
    free(c->layers);
    cudaFree(c->d_weights);
    cudaFree(c->x); cudaFree(c->xn); cudaFree(c->q); cudaFree(c->k); cudaFree(c->v);
    cudaFree(c->att); cudaFree(c->gate); cudaFree(c->up); cudaFree(c->logits);
    cudaFree(c->wf32); cudaFree(c->attn_scratch);
    cudaFree(c->d_tokens); cudaFree(c->d_rows); cudaFree(c->d_tok);
    cudaFreeHost(c->h_tokens); cudaFreeHost(c->h_rows); cudaFreeHost(c->h_tok);
    /* A range unmapped before destroy fails to unregister: nothing to do. */
    for (size_t i = 0; i < c->n_reg; i++) cudaHostUnregister(c->reg[i]);
    free(c->reg);
    lp_cuda_blas_destroy(&c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError();
    free(c);
}

#define ALIGN 256
static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t weight_bytes(const lp_weight_t *w) { return w->row_bytes * (size_t)w->n_out; }

/* Walk every tensor the device needs: with `base` NULL only count bytes,
 * otherwise copy each one to base + its offset and fill the device view.
 * A tied output shares the token embedding's copy. */
static int upload(cuda_ctx_t *c, uint8_t *base, size_t *total)
{
    const lp_model_t *m = c->m;
    const lp_hparams_t *hp = &m->hp;
    size_t off = 0;
    int rc = 0;
#define PUT_W(dst, src)                                                                    \
    do {                                                                                   \
        const lp_weight_t *w_ = (src);                                                     \
        size_t n_ = weight_bytes(w_);                                                      \
        if (base) {                                                                        \
            if ((rc = cu_check(cudaMemcpy(base + off, w_->data, n_, cudaMemcpyHostToDevice), \
                               "uploading a weight"))) {                                   \
                lp_error_prefix("tensor %s: ", w_->name);                                  \
                return rc;                                                                 \
            }                                                                              \
            (dst) = (dweight_t){w_->type, base + off, w_->n_in, w_->n_out, w_->row_bytes}; \
        }                                                                                  \
        off += align_up(n_);                                                               \
    } while (0)
#define PUT_F(dst, src, n)                                                                 \
    do {                                                                                   \
        const float *f_ = (src);                                                           \
        size_t n_ = sizeof(float) * (size_t)(n);                                           \
        if (!f_) {                                                                         \
            if (base) (dst) = NULL;                                                        \
            break;                                                                         \
        }                                                                                  \
        if (base) {                                                                        \
            if ((rc = cu_check(cudaMemcpy(base + off, f_, n_, cudaMemcpyHostToDevice),      \
                               "uploading a norm or bias")))                               \
                return rc;                                                                 \
            (dst) = (float *)(base + off);                                                 \
        }                                                                                  \
        off += align_up(n_);                                                               \
    } while (0)

    PUT_W(c->tok_embd, &m->tok_embd);
    if (m->tied_output) {
        if (base) c->output = c->tok_embd;
    } else {
        PUT_W(c->output, &m->output);
    }
    PUT_F(c->output_norm, m->output_norm, hp->n_embd);
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const lp_layer_t *L = &m->layers[l];
        dlayer_t *D = &c->layers[l];
        PUT_F(D->attn_norm, L->attn_norm, hp->n_embd);
        PUT_F(D->ffn_norm, L->ffn_norm, hp->n_embd);
        PUT_F(D->bq, L->bq, c->q_dim);
        PUT_F(D->bk, L->bk, c->kv_dim);
        PUT_F(D->bv, L->bv, c->kv_dim);
        PUT_W(D->wq, &L->wq);
        PUT_W(D->wk, &L->wk);
        PUT_W(D->wv, &L->wv);
        PUT_W(D->wo, &L->wo);
        PUT_W(D->w_gate, &L->w_gate);
        PUT_W(D->w_up, &L->w_up);
        PUT_W(D->w_down, &L->w_down);
    }
#undef PUT_W
#undef PUT_F
    *total = off;
    return 0;
}

/* The float32 scratch a weight needs for cuBLAS (none when it is F32). */
static size_t wf32_need(const lp_weight_t *w)
{
    if (w->type == LP_TYPE_F32) return 0;
    size_t n = (size_t)w->n_in * (size_t)w->n_out;
    size_t cap = WF32_MAX / (size_t)w->n_in * (size_t)w->n_in; /* whole rows */
    if (cap < (size_t)w->n_in) cap = (size_t)w->n_in;
    return n < cap ? n : cap;
}

static int check_weight(const lp_weight_t *w, size_t *wf32_max)
{
    if (!lp_cuda_type_supported(w->type))
        return lp_error_set(LP_ERR(ENOTSUP), "CUDA backend: tensor %s has type %s, which "
                            "the device kernels do not handle", w->name, lp_type_name(w->type));
    size_t n = wf32_need(w);
    if (n > *wf32_max) *wf32_max = n;
    return 0;
}

static int dalloc(void *pp, size_t bytes, const char *what)
{
    void **p = pp;
    int rc = cu_check(cudaMalloc(p, bytes ? bytes : 1), "allocating device memory");
    if (rc) lp_error_prefix("%s (%zu bytes): ", what, bytes);
    return rc;
}

static int halloc(void *pp, size_t bytes, const char *what)
{
    void **p = pp;
    int rc = cu_check(cudaMallocHost(p, bytes ? bytes : 1), "allocating pinned memory");
    if (rc) lp_error_prefix("%s (%zu bytes): ", what, bytes);
    return rc;
}

/* kv: the engine gives this backend, which does not page, one n_ctx block
 * per seq_id; its cache is that stretch per sequence (kv_reserve). */
static int cuda_create(const lp_model_t *m, const lp_engine_params_t *p, const lp_kv_pool_t *kv,
                       void **out)
{
    (void)kv;
    const lp_hparams_t *hp = &m->hp;
    cuda_ctx_t *c = calloc(1, sizeof(*c));
    if (!c) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->m = m;
    c->p = *p;
    c->q_dim = hp->n_head * hp->head_dim;
    c->kv_dim = hp->n_head_kv * hp->head_dim;
    const char *graphs_env = getenv("LMPIPE_CUDA_GRAPHS");
    c->use_graphs = !(graphs_env && !strcmp(graphs_env, "0"));
    const size_t T = (size_t)p->max_batch_tokens, F = sizeof(float);
    int rc = 0;

    if (hp->head_dim > LP_CUDA_MAX_HEAD_DIM)
        rc = lp_error_set(LP_ERR(ENOTSUP), "CUDA backend: head_dim %d exceeds %d",
                          hp->head_dim, LP_CUDA_MAX_HEAD_DIM);
    size_t wf32_max = 0;
    if (!rc) rc = check_weight(&m->tok_embd, &wf32_max);
    if (!rc) rc = check_weight(&m->output, &wf32_max);
    for (int32_t l = 0; !rc && l < hp->n_layer; l++) {
        const lp_layer_t *L = &m->layers[l];
        const lp_weight_t *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up,
                                   &L->w_down};
        for (size_t i = 0; !rc && i < sizeof(ws) / sizeof(ws[0]); i++)
            rc = check_weight(ws[i], &wf32_max);
    }
    if (!rc) rc = cu_check(cudaSetDevice(0), "selecting device 0");
    if (!rc) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
            LP_INFO("CUDA backend: %s, compute capability %d.%d, %.1f GiB", prop.name,
                    prop.major, prop.minor, (double)prop.totalGlobalMem / (1 << 30));
    }
    if (!rc) rc = cu_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
                           "creating a stream");
    if (!rc) rc = lp_cuda_blas_new(c->stream, &c->blas);

    c->layers = calloc((size_t)hp->n_layer, sizeof(*c->layers));
    c->kv = calloc((size_t)p->max_seqs, sizeof(*c->kv));
    c->reg = NULL;
    if (!rc && (!c->layers || !c->kv)) rc = lp_error_set(LP_ERR(ENOMEM), "out of memory");

    size_t total = 0;
    if (!rc) rc = upload(c, NULL, &total);
    if (!rc) rc = dalloc(&c->d_weights, total, "weights");
    if (!rc) rc = upload(c, c->d_weights, &total);
    if (!rc) LP_INFO("CUDA backend: %.1f MiB of weights on the device",
                     (double)total / (1 << 20));

    const size_t attn_n = lp_cuda_attention_scratch(p->max_batch_tokens, hp->n_head,
                                                    hp->head_dim, p->n_ctx - 1);
    if (!rc) rc = dalloc(&c->x, F * T * (size_t)hp->n_embd, "residual stream");
    if (!rc) rc = dalloc(&c->xn, F * T * (size_t)hp->n_embd, "normalised stream");
    if (!rc) rc = dalloc(&c->q, F * T * (size_t)c->q_dim, "q");
    if (!rc) rc = dalloc(&c->k, F * T * (size_t)c->kv_dim, "k");
    if (!rc) rc = dalloc(&c->v, F * T * (size_t)c->kv_dim, "v");
    if (!rc) rc = dalloc(&c->att, F * T * (size_t)c->q_dim, "attention output");
    if (!rc) rc = dalloc(&c->gate, F * T * (size_t)hp->n_ff, "gate");
    if (!rc) rc = dalloc(&c->up, F * T * (size_t)hp->n_ff, "up");
    if (!rc) rc = dalloc(&c->logits, F * LOGIT_CHUNK * (size_t)hp->n_vocab, "logits");
    c->wf32_n = wf32_max;
    if (!rc && wf32_max) rc = dalloc(&c->wf32, F * wf32_max, "dequantized weight scratch");
    if (!rc) rc = dalloc(&c->attn_scratch, F * attn_n, "attention scratch");
    if (!rc) rc = dalloc(&c->d_tokens, sizeof(int32_t) * T, "token ids");
    if (!rc) rc = dalloc(&c->d_rows, sizeof(int32_t) * T, "logit rows");
    if (!rc) rc = dalloc(&c->d_tok, sizeof(lp_cuda_tok_t) * T, "token facts");
    if (!rc) rc = halloc(&c->h_tokens, sizeof(int32_t) * T, "token ids");
    if (!rc) rc = halloc(&c->h_rows, sizeof(int32_t) * T, "logit rows");
    if (!rc) rc = halloc(&c->h_tok, sizeof(lp_cuda_tok_t) * T, "token facts");
    if (rc) {
        cuda_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* ---- KV cache ---------------------------------------------------------- */

static void cuda_seq_truncate(void *vctx, int32_t seq_id, int32_t len)
{
    /* Positions past len are overwritten by the next step, as on the CPU. */
    (void)vctx; (void)seq_id; (void)len;
}

/* Make room for positions [0, need) of a sequence, keeping what it holds.
 * Called between steps, when the stream is idle. */
static int kv_reserve(cuda_ctx_t *c, int32_t seq_id, int32_t need)
{
    kv_seq_t *s = &c->kv[seq_id];
    if (need <= s->cap) return 0;
    int32_t cap = s->cap ? s->cap : 256;
    while (cap < need) cap *= 2;
    if (cap > c->p.n_ctx) cap = c->p.n_ctx;
    const size_t n_layer = (size_t)c->m->hp.n_layer, row = sizeof(float) * (size_t)c->kv_dim;
    float *k = NULL, *v = NULL;
    int rc = dalloc(&k, n_layer * (size_t)cap * row, "KV cache");
    if (!rc) rc = dalloc(&v, n_layer * (size_t)cap * row, "KV cache");
    if (!rc && s->cap) {
        /* per layer, the old cap rows move to the start of the new layer */
        rc = cu_check(cudaMemcpy2DAsync(k, (size_t)cap * row, s->k, (size_t)s->cap * row,
                                        (size_t)s->cap * row, n_layer,
                                        cudaMemcpyDeviceToDevice, c->stream), "growing K");
        if (!rc)
            rc = cu_check(cudaMemcpy2DAsync(v, (size_t)cap * row, s->v, (size_t)s->cap * row,
                                            (size_t)s->cap * row, n_layer,
                                            cudaMemcpyDeviceToDevice, c->stream), "growing V");
        if (!rc) rc = cu_check(cudaStreamSynchronize(c->stream), "growing the KV cache");
    }
    if (rc) {
        cudaFree(k);
        cudaFree(v);
        lp_error_prefix("KV cache of sequence %d, %d positions: ", seq_id, cap);
        return rc;
    }
    cudaFree(s->k);
    cudaFree(s->v);
    s->k = k;
    s->v = v;
    s->cap = cap;
    return 0;
}

/* ---- matrix products -------------------------------------------------- */

/* y[t] (+)= W x[t] (+ bias) for t < n_tok; x rows are w->n_in floats. */
static int matmul(cuda_ctx_t *c, const dweight_t *w, const float *x, int32_t n_tok,
                  const float *bias, float *y, int64_t y_stride, bool accumulate)
{
    int rc = 0;
    if (n_tok <= LP_CUDA_MMV_MAX_TOKENS)
        return lp_cuda_matvec(c->stream, w->type, w->d, w->row_bytes, w->n_in, w->n_out, x,
                              w->n_in, n_tok, bias, y, y_stride, accumulate);
    if (w->type == LP_TYPE_F32) {
        rc = lp_cuda_gemm(c->blas, w->d, w->n_in, w->n_out, x, w->n_in, n_tok, y, y_stride,
                          accumulate);
    } else {
        /* dequantize row chunks that fit the scratch; each chunk fills
         * columns [o0, o0 + n) of y */
        const int64_t chunk = (int64_t)(c->wf32_n / (size_t)w->n_in);
        for (int64_t o0 = 0; !rc && o0 < w->n_out; o0 += chunk) {
            const int64_t n = w->n_out - o0 < chunk ? w->n_out - o0 : chunk;
            rc = lp_cuda_dequant(c->stream, w->type, (const uint8_t *)w->d + o0 * w->row_bytes,
                                 w->row_bytes, w->n_in, n, NULL, c->wf32);
            if (!rc)
                rc = lp_cuda_gemm(c->blas, c->wf32, w->n_in, n, x, w->n_in, n_tok, y + o0,
                                  y_stride, accumulate);
        }
    }
    if (!rc && bias) rc = lp_cuda_add_rows(c->stream, y, y_stride, bias, n_tok, w->n_out);
    return rc;
}

/* ---- output: final norm and logits for the requested rows --------------- */

static int same_stride(float *const *rows, int32_t n, int64_t *stride)
{
    if (n == 1) {
        *stride = 0;
        return 1;
    }
    ptrdiff_t d = rows[1] - rows[0];
    if (d <= 0) return 0;
    for (int32_t i = 2; i < n; i++)
        if (rows[i] - rows[i - 1] != d) return 0;
    *stride = d;
    return 1;
}

/* Device side of the logits: the final norm of the rows that want logits
 * (gathered through d_rows into xn) and the output product of rows
 * [r0, r0 + n) into c->logits. */
static int logits_norm(cuda_ctx_t *c, int32_t n_rows)
{
    const lp_hparams_t *hp = &c->m->hp;
    return lp_cuda_rmsnorm(c->stream, c->xn, c->x, c->output_norm, hp->n_embd, n_rows,
                           c->d_rows, hp->rms_eps);
}

static int logits_product(cuda_ctx_t *c, int32_t r0, int32_t n)
{
    const lp_hparams_t *hp = &c->m->hp;
    return matmul(c, &c->output, c->xn + (int64_t)r0 * hp->n_embd, n, NULL, c->logits,
                  hp->n_vocab, false);
}

/* Rows [r0, r0 + n) of c->logits go from the device straight into the
 * caller's row pointers (page-locked when registered): one 2D copy when
 * the rows are evenly spaced, else one copy per row. */
static int logits_copy(cuda_ctx_t *c, int32_t r0, int32_t n, float *const *logits)
{
    const int64_t n_vocab = c->m->hp.n_vocab;
    const size_t row_bytes = sizeof(float) * (size_t)n_vocab;
    int64_t stride;
    if (same_stride(logits + r0, n, &stride) && stride >= n_vocab)
        return cu_check(cudaMemcpy2DAsync(logits[r0], sizeof(float) * (size_t)stride, c->logits,
                                          row_bytes, row_bytes, (size_t)n,
                                          cudaMemcpyDeviceToHost, c->stream),
                        "copying logits");
    int rc = 0;
    for (int32_t r = 0; !rc && r < n; r++)
        rc = cu_check(cudaMemcpyAsync(logits[r0 + r], c->logits + (int64_t)r * n_vocab,
                                      row_bytes, cudaMemcpyDeviceToHost, c->stream),
                      "copying logits");
    return rc;
}

/* ---- the step --------------------------------------------------------- */

/* q, k, v (+ biases) = W xn.  On the matvec path, the ones whose weights
 * share a type go in one launch (all three in F16/Q8_0 files; q and k where
 * Q4_K_M gives v a Q6_K). */
static int qkv(cuda_ctx_t *c, const dlayer_t *L, int32_t T)
{
    const dweight_t *w[3] = {&L->wq, &L->wk, &L->wv};
    const float *b[3] = {L->bq, L->bk, L->bv};
    float *y[3] = {c->q, c->k, c->v};
    const int64_t ys[3] = {c->q_dim, c->kv_dim, c->kv_dim};
    int rc = 0;
    if (T > LP_CUDA_MMV_MAX_TOKENS) {
        for (int i = 0; i < 3 && !rc; i++) rc = matmul(c, w[i], c->xn, T, b[i], y[i], ys[i], false);
        return rc;
    }
    bool done[3] = {false, false, false};
    for (int i = 0; i < 3 && !rc; i++) {
        if (done[i]) continue;
        lp_cuda_mv_out_t outs[3];
        int n = 0;
        for (int j = i; j < 3; j++) {
            if (done[j] || w[j]->type != w[i]->type || w[j]->n_in != w[i]->n_in) continue;
            outs[n++] = (lp_cuda_mv_out_t){w[j]->d, w[j]->row_bytes, w[j]->n_out, b[j], y[j], ys[j]};
            done[j] = true;
        }
        rc = lp_cuda_matvec_multi(c->stream, w[i]->type, w[i]->n_in, c->xn, w[i]->n_in, T, outs,
                                  n, false);
    }
    return rc;
}

static int run_layers(cuda_ctx_t *c, int32_t T, int32_t max_pos)
{
    const lp_model_t *m = c->m;
    const lp_hparams_t *hp = &m->hp;
    const int64_t n_embd = hp->n_embd, n_ff = hp->n_ff;
    const float theta_scale = powf(hp->rope_base, -2.0f / (float)hp->n_rot);
    const float scale = 1.0f / sqrtf((float)hp->head_dim);
    int rc = 0;
    for (int32_t l = 0; !rc && l < hp->n_layer; l++) {
        const dlayer_t *L = &c->layers[l];
        /* attention block */
        rc = lp_cuda_rmsnorm(c->stream, c->xn, c->x, L->attn_norm, n_embd, T, NULL, hp->rms_eps);
        if (!rc) rc = qkv(c, L, T);
        if (!rc) rc = lp_cuda_rope_store(c->stream, c->q, c->k, c->v, c->d_tok, T, hp->n_head,
                                         hp->n_head_kv, hp->head_dim, hp->n_rot, theta_scale,
                                         hp->rope_neox, l);
        if (!rc) rc = lp_cuda_attention(c->stream, c->att, c->q, c->d_tok, T, hp->n_head,
                                        hp->n_head_kv, hp->head_dim, scale, l, max_pos, NULL, 0,
                                        c->attn_scratch);
        if (!rc) rc = matmul(c, &L->wo, c->att, T, NULL, c->x, n_embd, true);
        /* feed-forward block */
        if (!rc) rc = lp_cuda_rmsnorm(c->stream, c->xn, c->x, L->ffn_norm, n_embd, T, NULL,
                                      hp->rms_eps);
        const dweight_t *G = &L->w_gate, *U = &L->w_up;
        if (!rc && T <= LP_CUDA_MMV_MAX_TOKENS && G->type == U->type && G->n_in == U->n_in &&
            G->n_out == U->n_out) {
            /* decode: gate, up and SwiGLU in one pass */
            rc = lp_cuda_matvec_glu(c->stream, G->type, G->d, U->d, G->row_bytes, G->n_in,
                                    G->n_out, c->xn, G->n_in, T, c->gate, n_ff);
        } else {
            if (!rc) rc = matmul(c, G, c->xn, T, NULL, c->gate, n_ff, false);
            if (!rc) rc = matmul(c, U, c->xn, T, NULL, c->up, n_ff, false);
            if (!rc) rc = lp_cuda_swiglu(c->stream, c->gate, c->gate, c->up, (int64_t)T * n_ff);
        }
        if (!rc) rc = matmul(c, &L->w_down, c->gate, T, NULL, c->x, n_embd, true);
        LP_DEBUG("layer %d enqueued (%d tokens)", l, T);
    }
    return rc;
}

/* The device work of a step, from the embeddings to the final norm of the
 * n_rows requested rows and the logits of the first LOGIT_CHUNK of them in
 * c->logits: everything a decode graph holds.  Token ids, per-token facts
 * and logit rows are already uploaded. */
static int enqueue_forward(cuda_ctx_t *c, int32_t T, int32_t max_pos, int32_t n_rows)
{
    int rc = lp_cuda_dequant(c->stream, c->tok_embd.type, c->tok_embd.d, c->tok_embd.row_bytes,
                             c->m->hp.n_embd, T, c->d_tokens, c->x);
    if (!rc) rc = run_layers(c, T, max_pos);
    if (!rc && n_rows) rc = logits_norm(c, n_rows);
    if (!rc && n_rows) rc = logits_product(c, 0, n_rows < LOGIT_CHUNK ? n_rows : LOGIT_CHUNK);
    return rc;
}

/* Launch the graph of a decode step of this shape, capturing it first when
 * it is new.  When capture fails the backend warns once and goes on
 * without graphs (the direct path enqueues the same work). */
static int run_graph(cuda_ctx_t *c, int32_t T, int32_t max_pos, int32_t n_rows)
{
    const int32_t n_splits = max_pos / LP_CUDA_ATTN_SPLIT + 1;
    struct graph_entry *g = NULL, *lru = &c->graphs[0];
    for (int i = 0; i < N_GRAPHS && !g; i++) {
        struct graph_entry *e = &c->graphs[i];
        if (e->exec && e->n_tok == T && e->n_rows == n_rows && e->n_splits == n_splits) g = e;
        else if (e->used < lru->used) lru = e;
    }
    if (!g) {
        cudaGraph_t graph = NULL;
        int rc = cu_check(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal),
                          "capturing a decode step");
        /* the largest position of this split count, so the attention grid
         * is the same for every step the graph serves */
        int rc_work = rc ? 0 : enqueue_forward(c, T, n_splits * LP_CUDA_ATTN_SPLIT - 1, n_rows);
        if (!rc) rc = cu_check(cudaStreamEndCapture(c->stream, &graph), "capturing a decode step");
        if (!rc && !rc_work) {
            if (lru->exec) cudaGraphExecDestroy(lru->exec);
            lru->exec = NULL;
            rc = cu_check(cudaGraphInstantiate(&lru->exec, graph, 0), "instantiating a decode step");
            if (rc) lru->exec = NULL;
        }
        if (graph) cudaGraphDestroy(graph);
        if (rc || rc_work) {
            LP_WARN("CUDA backend: decode graphs off: %s", lp_error_msg());
            c->use_graphs = false;
            return enqueue_forward(c, T, max_pos, n_rows);
        }
        *lru = (struct graph_entry){lru->exec, T, n_rows, n_splits, 0};
        g = lru;
        LP_DEBUG("CUDA backend: captured a decode step of %d tokens, %d rows, %d splits", T,
                 n_rows, n_splits);
    }
    g->used = ++c->graph_clock;
    return cu_check(cudaGraphLaunch(g->exec, c->stream), "launching a decode step");
}

static int cuda_step(void *vctx, const lp_batch_seq_t *seqs, int32_t n_seqs, int32_t T,
                     float *const *logits)
{
    cuda_ctx_t *c = vctx;
    int rc;

    /* load: cache room, per-token facts, logit rows, token ids */
    for (int32_t i = 0; i < n_seqs; i++)
        if ((rc = kv_reserve(c, seqs[i].seq_id, seqs[i].pos + seqs[i].n_tokens))) return rc;
    int32_t t = 0, n_rows = 0, max_pos = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        const lp_batch_seq_t *s = &seqs[i];
        const kv_seq_t *kv = &c->kv[s->seq_id];
        for (int32_t k = 0; k < s->n_tokens; k++, t++) {
            c->h_tokens[t] = s->tokens[k];
            c->h_tok[t] = (lp_cuda_tok_t){kv->k, kv->v, kv->cap, s->pos + k};
            if (k >= s->n_tokens - s->n_logits) c->h_rows[n_rows++] = t;
        }
        if (s->pos + s->n_tokens - 1 > max_pos) max_pos = s->pos + s->n_tokens - 1;
    }
    rc = cu_check(cudaMemcpyAsync(c->d_tokens, c->h_tokens, sizeof(int32_t) * (size_t)T,
                                  cudaMemcpyHostToDevice, c->stream), "uploading token ids");
    if (!rc) rc = cu_check(cudaMemcpyAsync(c->d_tok, c->h_tok, sizeof(lp_cuda_tok_t) * (size_t)T,
                                           cudaMemcpyHostToDevice, c->stream),
                           "uploading token positions");
    if (!rc && n_rows)
        rc = cu_check(cudaMemcpyAsync(c->d_rows, c->h_rows, sizeof(int32_t) * (size_t)n_rows,
                                      cudaMemcpyHostToDevice, c->stream), "uploading logit rows");

    if (!rc && c->use_graphs && T <= LP_CUDA_MMV_MAX_TOKENS) {
        /* decode: the device work in one graph launch, then the copies */
        rc = run_graph(c, T, max_pos, n_rows);
        if (!rc && n_rows) rc = logits_copy(c, 0, n_rows, logits);
    } else if (!rc) {
        rc = enqueue_forward(c, T, max_pos, n_rows);
        if (!rc && n_rows) rc = logits_copy(c, 0, n_rows < LOGIT_CHUNK ? n_rows : LOGIT_CHUNK,
                                            logits);
        for (int32_t r0 = LOGIT_CHUNK; !rc && r0 < n_rows; r0 += LOGIT_CHUNK) {
            const int32_t n = n_rows - r0 < LOGIT_CHUNK ? n_rows - r0 : LOGIT_CHUNK;
            rc = logits_product(c, r0, n);
            if (!rc) rc = logits_copy(c, r0, n, logits);
        }
    }

    /* Wait for the step even after a failed enqueue: the staging buffers
     * and the caller's rows must not be in use when we return. */
    int rc_sync = cu_check(cudaStreamSynchronize(c->stream), "running the step");
    return rc ? rc : rc_sync;
}

/* ---- host registration ------------------------------------------------ */

static int cuda_register_host(void *vctx, void *ptr, size_t len)
{
    cuda_ctx_t *c = vctx;
    void **reg = realloc(c->reg, sizeof(*reg) * (c->n_reg + 1));
    if (!reg) return lp_error_set(LP_ERR(ENOMEM), "out of memory");
    c->reg = reg;
    cudaError_t err = cudaHostRegister(ptr, len, cudaHostRegisterPortable);
    if (err == cudaErrorHostMemoryAlreadyRegistered) {
        cudaGetLastError();
        return 0; /* registered by someone else, who unregisters it */
    }
    int rc = cu_check(err, "page-locking the logit segment");
    if (rc) {
        lp_error_prefix("%zu bytes at %p: ", len, ptr);
        return rc;
    }
    c->reg[c->n_reg++] = ptr;
    return 0;
}

const lp_backend_ops_t lp_backend_cuda = {
    .name = "cuda",
    .paged = 0, /* contiguous KV; the tables in lp_batch_seq_t await a paged kernel */
    /* the plain llama/qwen2 block only: every arch feature of arch/arch.h
     * (Llama 3 rope_freqs, qwen3, gemma) is refused at create, by name */
    .features = 0,
    .available = cuda_available,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .seq_truncate = cuda_seq_truncate,
    .step = cuda_step,
    .register_host = cuda_register_host,
};
