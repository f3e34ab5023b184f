/* sampler.h - the sampler service's library: a versioned store of the
 * default strategy (swapped live, with plugins and rollback), per-sequence
 * state, and the sampling of one logit row.  sampler-svc/main.c serves it;
 * `lmpipe sample` calls it in-process.
 *
 * Threads: the store is safe to use from any thread.  A sequence is used by
 * one thread at a time (the service may run different sequences on
 * different threads).  The registry is safe from any thread.
 *
 * Versions: the store starts at version 1.  Every successful swap, plugin
 * load or unload, and rollback makes a new version (rollback too: versions
 * only grow).  A failed one changes nothing.  A sequence follows the store:
 * before each draw it picks up the current version, rebuilding its chain from
 * (new default overlaid with the request's own parameters) and re-feeding its
 * token history, so requests in flight lose no step; every result names the
 * version that produced it. */
#ifndef LP_SAMPLER_H
#define LP_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "breakers.h"
#include "sampling-params.h"
#include "sampler-plugin.h"

/* ---- store: the service default, versioned ---------------------------------- */

typedef struct lp_sampler_store lp_sampler_store_t;

/* `default_json` (may be NULL) is laid over llama.cpp's defaults, strictly. */
int lp_sampler_store_new(const char *default_json, lp_sampler_store_t **out);
void lp_sampler_store_destroy(lp_sampler_store_t **self_p);

/* The vocabulary guard: tokens at or beyond n_real, and tokens whose mask
 * byte is non-zero (mask has n_mask bytes, may be NULL), are never sampled.
 * Call before the first sequence (lib/vocab's lp_vocab_facts_t gives both:
 * n_tokens_real and token_mask).  Copies the mask. */
int lp_sampler_store_set_vocab(lp_sampler_store_t *st, int32_t n_real, const uint8_t *mask,
                               int32_t n_mask);

/* The vocabulary as text, so that text DRY sequence breakers (llama.cpp's
 * "\n" ":" "\"" "*" by default) become token sequences; without it only
 * breakers given as token IDs act.  Call before the first sequence; the
 * callbacks' user data must outlive the store. */
int lp_sampler_store_set_vocab_text(lp_sampler_store_t *st, const lp_sampler_vocab_text_t *vt);

uint64_t lp_sampler_store_version(lp_sampler_store_t *st);

/* Lay `json` (strict: unknown keys are refused) over the current default. */
int lp_sampler_store_swap(lp_sampler_store_t *st, const char *json, size_t len,
                          uint64_t *version_out);
/* The folder plugins load from (see lp_plugin_resolve for the checks made
 * on it and on each plugin): checked here, copied.  Until one is set, every
 * load is refused. */
int lp_sampler_store_set_plugin_dir(lp_sampler_store_t *st, const char *dir);
/* Keep the store in `path`: read it now if it exists (the strategy, the
 * history for rollback and the version counter come back; plugins are
 * reloaded from the plugin folder with its checks, so set that first, and
 * one that is gone or refused is logged and left out of the strategies that
 * used it, the current one then taking a new version), and from now on save
 * every change there (temp file, fsync, rename) before it takes effect: a
 * change that cannot be saved fails and changes nothing.  A file that is
 * not a state file is an error naming it and the field. */
int lp_sampler_store_set_state_file(lp_sampler_store_t *st, const char *path);
/* Load a plugin (dlopen) and put its step first in the default "samplers"
 * (where logit bias acts, before any truncation).  `config` is handed to the plugin's init for
 * each sequence (NULL = "").  The step's name is the plugin's name.
 * `path` (relative: to the plugin folder) must resolve inside the plugin
 * folder and pass its ownership and mode checks, or nothing is opened. */
int lp_sampler_store_load_plugin(lp_sampler_store_t *st, const char *path, const char *config,
                                 uint64_t *version_out);
/* Remove a plugin by name from the default chain and unload it once no
 * sequence uses it any more. */
int lp_sampler_store_unload_plugin(lp_sampler_store_t *st, const char *name,
                                   uint64_t *version_out);
/* Go back to the strategy before the last change (a new version number). */
int lp_sampler_store_rollback(lp_sampler_store_t *st, uint64_t *version_out);
/* The sampler died inside plugin `name` (plugin-watch.h): the strategy in
 * force becomes a copy of the newest earlier one without that plugin, or,
 * with none, the current one without it.  *from and *to: the versions;
 * equal when the current strategy does not use it. */
int lp_sampler_store_quarantine(lp_sampler_store_t *st, const char *name, uint64_t *from, uint64_t *to);

/* The current strategy as JSON: {"version":N,"params":{...},"plugins":[...]};
 * caller frees. NULL on out-of-memory. */
char *lp_sampler_store_describe(lp_sampler_store_t *st);

/* One control message, for the service's control socket:
 *   {"op":"set","params":{...}}          swap the default
 *   {"op":"load","path":"x.so","config":"..."}
 *   {"op":"unload","name":"mask-tokens"}
 *   {"op":"rollback"}
 *   {"op":"get"}
 * *reply (caller frees) is {"ok":true,"version":N,...} or
 * {"ok":false,"error":"..."}; the return value is 0 or the failure code. */
int lp_sampler_store_control(lp_sampler_store_t *st, const char *msg, size_t len, char **reply);

/* ---- sequences ------------------------------------------------------------------ */

typedef struct lp_sampler_seq lp_sampler_seq_t;

typedef struct lp_sampler_alt {
    int32_t id;
    float logprob;
} lp_sampler_alt_t;

/* The token's logprob and the top alternatives cost a pass of exp() over
 * the whole row, so they come only when asked for, as in llama.cpp's server
 * and vLLM: for a sequence whose n_probs is above 0 (has_logprob).
 * Otherwise logprob is NaN and n_top 0. */
typedef struct lp_sampler_result {
    int32_t id;          /* chosen token, < n_real and not masked */
    bool has_logprob;    /* logprob and top are filled (n_probs > 0) */
    float logprob;       /* log-softmax of id over the guarded row, before the chain */
    uint64_t version;    /* strategy version that produced it */
    bool has_mu;         /* the chain has a mirostat step: mu is its value after this token */
    float mu;
    int32_t n_top;       /* entries in top (the request's n_probs) */
    lp_sampler_alt_t top[LP_SAMPLER_MAX_N_PROBS]; /* most likely first, same measure */
} lp_sampler_result_t;

/* A sequence with the request's parameters, laid over the store's strategy
 * (the fields with their `set` bits; lp_sampler_params_default() then
 * fields set by hand, or lib/sampling-wire.h's reader).  The store is
 * borrowed and must outlive the sequence.  (seq-json.h: the same from JSON,
 * for tests and tools.) */
int lp_sampler_seq_new_params(lp_sampler_store_t *st, const lp_sampler_params_t *req,
                              lp_sampler_seq_t **out);
void lp_sampler_seq_destroy(lp_sampler_seq_t **self_p);

/* Feed a token into the history (prompt tokens and each sampled token). */
int lp_sampler_seq_accept(lp_sampler_seq_t *seq, int32_t id);
/* Choose the next token from one row of n_vocab logits (borrowed for the
 * call).  Does not accept it: call lp_sampler_seq_accept() next. */
int lp_sampler_seq_sample(lp_sampler_seq_t *seq, const float *logits, int32_t n_vocab,
                          lp_sampler_result_t *out);
/* lp_sampler_seq_sample in two parts, for a caller that hands the token on
 * before it reports it: _pick chooses (out->id, out->version; the row is
 * read only here) and, when n_probs > 0, keeps the guarded row; _logprobs
 * then fills out->has_logprob, out->logprob and out->top from it (nothing
 * when n_probs is 0).  Together they give what _sample gives; _logprobs is
 * LP_ERR(EINVAL) without a _pick before it. */
int lp_sampler_seq_pick(lp_sampler_seq_t *seq, const float *logits, int32_t n_vocab,
                        lp_sampler_result_t *out);
int lp_sampler_seq_logprobs(lp_sampler_seq_t *seq, lp_sampler_result_t *out);
/* Reopen a sequence after a sampler restart (SamplerOpen.generated_ids):
 * after the prompt's tokens were accepted, the n tokens generated so far
 * join the history and the next draw is that of position n.  The draws of
 * generated token k are keyed by (seed, k) alone, so the tokens that follow
 * are those the first sampler would have drawn (docs/SAMPLER.md). */
int lp_sampler_seq_resume(lp_sampler_seq_t *seq, const int32_t *generated, size_t n);
/* Position of the next draw: the tokens picked (or resumed) so far. */
uint64_t lp_sampler_seq_position(const lp_sampler_seq_t *seq);
/* Give mirostat its mu back (lp_sampler_result_t.mu of the last token):
 * the one piece of state the token history does not rebuild.  EINVAL when
 * mu is not finite or the strategy has no mirostat step. */
int lp_sampler_seq_set_mu(lp_sampler_seq_t *seq, float mu);
/* The seed in use (the request's, or the random one chosen for seed -1). */
uint64_t lp_sampler_seq_seed(const lp_sampler_seq_t *seq);
/* Where the parameters left the seed random (-1), use `seed` instead of the
 * one drawn at creation (SamplerOpen.random_seed); an explicit seed stays. */
void lp_sampler_seq_set_random_seed(lp_sampler_seq_t *seq, uint64_t seed);
/* The effective parameters (default overlaid with the request's) of the
 * version last used. Borrowed. */
const lp_sampler_params_t *lp_sampler_seq_params(const lp_sampler_seq_t *seq);

/* ---- registry: sequences keyed by the service's sequence id -------------------- */

typedef struct lp_sampler_registry lp_sampler_registry_t;

int lp_sampler_registry_new(lp_sampler_registry_t **out);
/* Destroys every sequence still registered. */
void lp_sampler_registry_destroy(lp_sampler_registry_t **self_p);
/* Takes ownership of seq (also on failure).  A key in use is LP_ERR(EEXIST). */
int lp_sampler_registry_put(lp_sampler_registry_t *r, uint64_t key, lp_sampler_seq_t *seq);
/* Borrowed until removed; NULL when absent. */
lp_sampler_seq_t *lp_sampler_registry_get(lp_sampler_registry_t *r, uint64_t key);
/* Destroy a sequence; LP_ERR(ENOENT) when absent. */
int lp_sampler_registry_remove(lp_sampler_registry_t *r, uint64_t key);
size_t lp_sampler_registry_count(lp_sampler_registry_t *r);

#endif
