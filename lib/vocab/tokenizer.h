/* tokenizer.h - text to token IDs and back, from the vocabulary in a GGUF.
 * It lives in lib/ because more than one service needs the vocabulary:
 * tokenizer-svc tokenizes, and sampler-svc decodes tokens to text and
 * resolves DRY's text sequence breakers with it.
 *
 * Supports tokenizer.ggml.model "llama" (SentencePiece BPE with byte
 * fallback) and "gpt2" (byte-level BPE with a pre-tokenizer chosen by
 * tokenizer.ggml.pre).  Output matches llama.cpp's llama_tokenize token for
 * token.  All functions return 0 or a negative errno code (LP_ERR) and set
 * lp_error_msg() on failure.
 *
 * Threads: a tokenizer is read-only after lp_tokenizer_new*(), so any number
 * of threads may call lp_tokenize / lp_detokenize / lp_token_piece on it at
 * once.  An lp_detok_t belongs to one sequence and one thread at a time. */
#ifndef LP_TOKENIZER_H
#define LP_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct lp_tokenizer lp_tokenizer_t;

/* Token types as stored in tokenizer.ggml.token_type. */
enum lp_token_type {
    LP_TOKEN_UNDEFINED = 0,
    LP_TOKEN_NORMAL = 1,
    LP_TOKEN_UNKNOWN = 2,
    LP_TOKEN_CONTROL = 3,
    LP_TOKEN_USER_DEFINED = 4,
    LP_TOKEN_UNUSED = 5,
    LP_TOKEN_BYTE = 6,
};

enum lp_vocab_kind {
    LP_VOCAB_SPM = 1, /* tokenizer.ggml.model = "llama" */
    LP_VOCAB_BPE = 2, /* tokenizer.ggml.model = "gpt2" */
};

/* ---- load ---------------------------------------------------------------- */

/* Build a tokenizer from the tokenizer.* metadata of g.  Everything needed is
 * copied: g may be destroyed afterwards.  Fails with a message naming the key
 * when the vocabulary is missing or malformed, and with LP_ERR(ENOTSUP)
 * naming the value for an unknown model or pre-tokenizer. */
int lp_tokenizer_new_from_gguf(const lp_gguf_t *g, lp_tokenizer_t **out);
/* Open path (a model or a vocab-only GGUF) and build the tokenizer. */
int lp_tokenizer_new(const char *path, lp_tokenizer_t **out);
void lp_tokenizer_destroy(lp_tokenizer_t **self_p);

/* ---- accessors ----------------------------------------------------------- */

enum lp_vocab_kind lp_tokenizer_kind(const lp_tokenizer_t *tok);
/* tokenizer.ggml.pre as given ("default" when absent); borrowed. */
const char *lp_tokenizer_pre(const lp_tokenizer_t *tok);
int32_t lp_tokenizer_n_tokens(const lp_tokenizer_t *tok);
/* -1 when the vocabulary has none. */
int32_t lp_tokenizer_bos(const lp_tokenizer_t *tok);
int32_t lp_tokenizer_eos(const lp_tokenizer_t *tok);
/* Whether lp_tokenize(add_special = true) adds BOS / EOS. */
bool lp_tokenizer_adds_bos(const lp_tokenizer_t *tok);
bool lp_tokenizer_adds_eos(const lp_tokenizer_t *tok);
/* End of generation: EOS, EOT, <|im_end|>, <|eot_id|> and the like. */
bool lp_tokenizer_is_eog(const lp_tokenizer_t *tok, int32_t id);
/* The effective type (llama.cpp promotes EOG-looking tokens to CONTROL);
 * LP_ERR(EINVAL) when id is out of range. */
int lp_tokenizer_token_type(const lp_tokenizer_t *tok, int32_t id);
/* The token's text as stored in the vocabulary; borrowed, NULL when out of
 * range. */
const char *lp_tokenizer_token_text(const lp_tokenizer_t *tok, int32_t id, size_t *len);
/* tokenizer.chat_template; LP_ERR(ENOENT) when the file has none.  Borrowed,
 * valid until the tokenizer is destroyed; NUL-terminated. */
int lp_tokenizer_chat_template(const lp_tokenizer_t *tok, const char **tmpl, size_t *len);

/* ---- tokenize ------------------------------------------------------------ */

/* Tokenize len bytes of text (any bytes; invalid UTF-8 is handled like
 * llama.cpp does).  add_special adds BOS/EOS as the metadata says;
 * parse_special turns control-token text ("<|im_start|>", "</s>") into
 * their IDs (user-defined tokens are always matched, as in llama.cpp).
 * Writes min(cap, count) IDs to out and the full count to *n_out; returns
 * LP_ERR(ENOSPC) when cap was too small (out then holds the first cap). */
int lp_tokenize(const lp_tokenizer_t *tok, const char *text, size_t len, bool add_special,
                bool parse_special, int32_t *out, size_t cap, size_t *n_out);
/* Same, into a new array: *ids is malloc'd, caller frees. */
int lp_tokenize_alloc(const lp_tokenizer_t *tok, const char *text, size_t len,
                      bool add_special, bool parse_special, int32_t **ids, size_t *n_out);

/* ---- detokenize ---------------------------------------------------------- */

/* The bytes one token stands for (llama.cpp's token_to_piece with lstrip 0):
 * SPM "▁" becomes " ", byte tokens one byte, BPE tokens are byte-decoded.
 * Control and unknown tokens give "" unless special.  *piece is borrowed and
 * not NUL-terminated; it may be partial UTF-8.  LP_ERR(EINVAL) for a bad id.
 * The first call builds the table of all pieces (thread-safe; LP_ERR(ENOMEM)
 * if that fails), so loading and tokenizing never pay for it. */
int lp_token_piece(const lp_tokenizer_t *tok, int32_t id, bool special, const char **piece,
                   size_t *len);

/* Incremental decoder, one per sequence.  It emits only valid UTF-8: a
 * partial sequence is held back until the bytes that complete it arrive;
 * bytes that cannot form valid UTF-8 become U+FFFD.  With an SPM vocabulary
 * that adds a space prefix, the leading space of the sequence's first text
 * is dropped (so detokenize(tokenize(x)) == x).  special renders control
 * tokens as their text. */
typedef struct lp_detok lp_detok_t;
/* tok is borrowed and must outlive the decoder. */
int lp_detok_new(const lp_tokenizer_t *tok, bool special, lp_detok_t **out);
void lp_detok_destroy(lp_detok_t **self_p);
/* Start a new sequence. */
void lp_detok_reset(lp_detok_t *d);
/* The sequence continues text already shown (a prompt that rendered some
 * text): keep its first token's leading space, as llama.cpp's detokenize
 * does for any token that is not the first of the text. */
void lp_detok_continue(lp_detok_t *d);
/* Feed one token; *text (borrowed, valid until the next call on d) gets the
 * newly complete text, possibly empty.  LP_ERR(EINVAL) for a bad id (the
 * decoder is unchanged). */
int lp_detok_feed(lp_detok_t *d, int32_t id, const char **text, size_t *len);
/* End of sequence: emits what is held back (as U+FFFD when incomplete). */
int lp_detok_flush(lp_detok_t *d, const char **text, size_t *len);

/* Whole-sequence decoding: exactly the bytes the incremental decoder gives
 * when fed ids one at a time and flushed.  *text is malloc'd and
 * NUL-terminated; caller frees. */
int lp_detokenize(const lp_tokenizer_t *tok, const int32_t *ids, size_t n, bool special,
                  char **text, size_t *len);

#endif
