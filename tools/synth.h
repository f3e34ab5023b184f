/* synth.h - random-weight models with real shapes, for benchmarks and tests.
 *
 * lp_synth_write() writes a GGUF model of a named shape whose weights are
 * drawn from a seeded generator and quantized with the reference quantizers
 * (engine-svc/quant.h), so every block is valid.  The tokenizer comes from a
 * vocab GGUF.  The same options give the same bytes.  docs/GGUF.md has the
 * shapes, the type mix and the weight distribution. */
#ifndef LP_TOOLS_SYNTH_H
#define LP_TOOLS_SYNTH_H

#include <stdint.h>

typedef struct lp_synth_opts {
    const char *arch;  /* "llama" or "qwen2"; borrowed */
    const char *shape; /* "tinyllama-1.1b", "qwen2.5-0.5b" or "tiny"; borrowed */
    const char *type;  /* file type: "Q4_K_M", "Q8_0", "F16", ...; borrowed */
    const char *vocab; /* path of a GGUF holding tokenizer.* keys; borrowed */
    uint64_t seed;
    uint32_t n_vocab;  /* 0: the shape's (tiny: the vocab file's); a larger
                        * size than the vocab's pads the token list */
    int n_threads;     /* <= 0: one per online CPU */
    uint32_t n_layer;  /* 0: the shape's; else its first n_layer layers (benchmarks of
                        * a shape too big for the machine: per-layer costs are the same) */
} lp_synth_opts_t;

/* Write the model to `path`.  Returns 0, or a negative code with a message
 * naming the option or file at fault; a failed write leaves no file. */
int lp_synth_write(const lp_synth_opts_t *opts, const char *path);

/* The tensor type that --type `type_name` gives the tensor `name` ("blk.3.
 * attn_v.weight"; ne0 its row length) in a model of n_layer layers, as
 * llama-quantize chooses it; tied: token_embd doubles as the output.
 * UINT32_MAX when type_name is unknown. */
uint32_t lp_synth_tensor_type(const char *type_name, const char *name, uint32_t n_dims,
                              int64_t ne0, int tied, uint32_t n_layer);

/* Names accepted by opts->shape and opts->type, for usage text. */
extern const char *const lp_synth_shape_names;
extern const char *const lp_synth_type_names;

#endif
