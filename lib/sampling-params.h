/* sampling-params.h - sampling parameters: llama.cpp server `/completion` names and
 * defaults (common_params_sampling), JSON reading (the strategy store's
 * control messages; requests go through lib/request-schema.h), validation
 * and JSON writing.  Their wire form is lib/sampling-wire.h.
 *
 * A parameter set records which fields were given explicitly (`set`), so that
 * a request's parameters can be laid over the service default and laid over
 * it again after the default is swapped. */
#ifndef LP_SAMPLER_PARAMS_H
#define LP_SAMPLER_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define LP_SAMPLER_MAX_CHAIN 16      /* steps in "samplers" */
#define LP_SAMPLER_MAX_BIAS 1024     /* entries in "logit_bias" */
#define LP_SAMPLER_HISTORY_MAX 8192  /* tokens kept per sequence for penalties and DRY */
#define LP_SAMPLER_MAX_N_PROBS 32    /* top-n alternatives per token */
#define LP_SAMPLER_MAX_BREAKERS 16   /* DRY sequence breakers ... */
#define LP_SAMPLER_MAX_BREAKER_LEN 8 /* ... of at most this many tokens */
#define LP_SAMPLER_BREAKER_TEXT 40   /* bytes kept of a text breaker (llama.cpp's limit) */
#define LP_SAMPLER_NAME_MAX 32       /* plugin names, with the NUL */

/* The steps that "samplers" may name, in llama.cpp's default order. */
enum lp_sampler_kind {
    LP_SAMPLER_PENALTIES,
    LP_SAMPLER_DRY,
    LP_SAMPLER_TOP_N_SIGMA,
    LP_SAMPLER_TOP_K,
    LP_SAMPLER_TYPICAL_P,
    LP_SAMPLER_TOP_P,
    LP_SAMPLER_MIN_P,
    LP_SAMPLER_XTC,
    LP_SAMPLER_TEMPERATURE,
    LP_SAMPLER_PLUGIN, /* a loaded plugin, named in lp_sampler_step_t.plugin */
};

typedef struct lp_sampler_step {
    enum lp_sampler_kind kind;
    char plugin[LP_SAMPLER_NAME_MAX]; /* LP_SAMPLER_PLUGIN only */
} lp_sampler_step_t;

typedef struct lp_logit_bias {
    int32_t id;
    float bias; /* -INFINITY bans the token */
} lp_logit_bias_t;

/* Bits of lp_sampler_params_t.set. */
enum lp_sampler_field {
    LP_SP_TEMPERATURE, LP_SP_DYNATEMP_RANGE, LP_SP_DYNATEMP_EXPONENT, LP_SP_TOP_K, LP_SP_TOP_P,
    LP_SP_MIN_P, LP_SP_TYPICAL_P, LP_SP_TOP_N_SIGMA, LP_SP_REPEAT_PENALTY, LP_SP_REPEAT_LAST_N,
    LP_SP_FREQUENCY_PENALTY, LP_SP_PRESENCE_PENALTY, LP_SP_DRY_MULTIPLIER, LP_SP_DRY_BASE,
    LP_SP_DRY_ALLOWED_LENGTH, LP_SP_DRY_PENALTY_LAST_N, LP_SP_DRY_SEQUENCE_BREAKERS,
    LP_SP_XTC_PROBABILITY, LP_SP_XTC_THRESHOLD, LP_SP_MIN_KEEP, LP_SP_MIROSTAT,
    LP_SP_MIROSTAT_TAU, LP_SP_MIROSTAT_ETA, LP_SP_SEED, LP_SP_N_PROBS, LP_SP_SAMPLERS,
    LP_SP_LOGIT_BIAS, LP_SP_COUNT
};

typedef struct lp_sampler_params {
    uint64_t set;             /* 1 << LP_SP_x for each field given explicitly */
    float temperature;        /* 0.8; <= 0 is greedy */
    float dynatemp_range;     /* 0: off */
    float dynatemp_exponent;  /* 1 */
    int32_t top_k;            /* 40; 0: off */
    float top_p;              /* 0.95; 1: off */
    float min_p;              /* 0.05; 0: off */
    float typical_p;          /* 1: off */
    float top_n_sigma;        /* -1: off */
    float repeat_penalty;     /* 1: off */
    int32_t repeat_last_n;    /* 64; 0: off; -1: the whole history */
    float frequency_penalty;  /* 0 */
    float presence_penalty;   /* 0 */
    float dry_multiplier;     /* 0: off */
    float dry_base;           /* 1.75 */
    int32_t dry_allowed_length; /* 2 */
    int32_t dry_penalty_last_n; /* -1: the whole history */
    int32_t n_breakers;       /* DRY sequence breakers given as token IDs */
    int32_t breaker_len[LP_SAMPLER_MAX_BREAKERS];
    int32_t breakers[LP_SAMPLER_MAX_BREAKERS][LP_SAMPLER_MAX_BREAKER_LEN];
    int32_t n_text_breakers;  /* ... and as text: "\n" ":" "\"" "*" by default; they
                                 need the vocabulary (lp_sampler_store_set_vocab_text) */
    int32_t text_breaker_len[LP_SAMPLER_MAX_BREAKERS];
    char text_breakers[LP_SAMPLER_MAX_BREAKERS][LP_SAMPLER_BREAKER_TEXT + 1];
    float xtc_probability;    /* 0: off */
    float xtc_threshold;      /* 0.1 */
    int32_t min_keep;         /* 0 */
    int32_t mirostat;         /* 0, 1 or 2 */
    float mirostat_tau;       /* 5 */
    float mirostat_eta;       /* 0.1 */
    int64_t seed;             /* -1: a random seed */
    int32_t n_probs;          /* top-n alternatives to report, 0..LP_SAMPLER_MAX_N_PROBS */
    int32_t n_steps;          /* "samplers" */
    lp_sampler_step_t steps[LP_SAMPLER_MAX_CHAIN];
    int32_t n_bias;           /* "logit_bias" */
    lp_logit_bias_t bias[LP_SAMPLER_MAX_BIAS];
} lp_sampler_params_t;

/* llama.cpp's defaults; `set` is 0. */
void lp_sampler_params_default(lp_sampler_params_t *p);

enum {
    /* Refuse keys that are not sampling parameters (for control messages;
     * a /completion request also carries "prompt", "n_predict", ...). */
    LP_SAMPLER_PARAMS_STRICT = 1,
};

/* Read one field by its llama.cpp name into *p and mark it given: 1 when
 * `name` is a sampling parameter (read), 0 when it is not (nothing done),
 * LP_ERR(EINVAL) naming it when its value is not of its type.  Ranges are
 * left to lp_sampler_params_validate (and the request schema's dialect
 * ranges, lib/request-schema.h). */
int lp_sampler_params_read_field(const char *name, const lp_json_t *v, lp_sampler_params_t *p);

/* The bytes of a text DRY breaker that are kept: at most
 * LP_SAMPLER_BREAKER_TEXT, cut before a UTF-8 character that would cross
 * the limit (llama.cpp cuts at 40 bytes; a cut inside a character would be
 * invalid text). */
size_t lp_sampler_breaker_cut(const char *s, size_t n);

/* Read the fields present in a JSON object into *p (other fields keep their
 * values) and validate the result.  On failure *p may be partly written and
 * lp_error_msg() names the field: `top_k: must be >= 0, got -1`. */
int lp_sampler_params_parse(const char *json, size_t len, unsigned flags, lp_sampler_params_t *p);
int lp_sampler_params_from_json(const lp_json_t *obj, unsigned flags, lp_sampler_params_t *p);

/* Check every field's range (also for parameter sets built in C). */
int lp_sampler_params_validate(const lp_sampler_params_t *p);

/* Copy into dst every field that src gives explicitly. */
void lp_sampler_params_overlay(lp_sampler_params_t *dst, const lp_sampler_params_t *src);

/* The parameters as a JSON object (all, or only those given) appended to out. */
void lp_sampler_params_write_json(const lp_sampler_params_t *p, bool given_only, lp_json_buf_t *out);
/* The parameters as a JSON object; returns the length needed, like snprintf. */
size_t lp_sampler_params_to_json(const lp_sampler_params_t *p, char *buf, size_t cap);
/* The same with only the fields given explicitly (`set`), so that the
 * others keep the receiver's default: a request built from typed values. */
size_t lp_sampler_params_given_to_json(const lp_sampler_params_t *p, char *buf, size_t cap);

/* A step of "samplers" by name ("top_k", llama.cpp's alternatives such as
 * "top-k", or "plugin:NAME"): 0, or LP_ERR(EINVAL) for an unknown name. */
int lp_sampler_step_parse(const char *name, size_t n, lp_sampler_step_t *st);

/* "top_k" for LP_SAMPLER_TOP_K, and so on. */
const char *lp_sampler_kind_name(enum lp_sampler_kind k);

#endif
