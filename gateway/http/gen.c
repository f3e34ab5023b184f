/* gen.c - generations over HTTP: OpenAI's /v1/completions and
 * /v1/chat/completions, and llama.cpp's /completion.  Each choice is one
 * GenerateRequest; its events arrive by Msg.id and are either streamed as
 * Server-Sent Events or gathered into one response.  The response head
 * waits for the first event, so that a request the coordinator refuses at
 * its edge (a bad sampler field, a prompt longer than the context) still
 * gets a 400 and not a 200 with an error inside the stream. */
#include "gw.h"

#include "chat-request.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K_COMPL, K_CHAT, K_LLAMA };

typedef struct gen_call gen_call_t;

typedef struct choice {
    lp_gw_op_t op;
    gen_call_t *call;
    int prompt_idx;
    char *prompt;         /* the prompt text (echo), or NULL */
    size_t prompt_len;
    lp_sb_t text;         /* gathered (not streamed) */
    lp_sb_t lp_tokens, lp_values, lp_tops, lp_offsets; /* completions logprobs */
    lp_sb_t lp_content;   /* chat and /completion logprobs entries */
    lp_sb_t ids;          /* /completion: the token ids */
    size_t text_off;
    uint32_t n_tokens;
    bool done, sent_role, echoed;
    Lmpipe__FinishReason reason;
    char *stop_word;
    uint32_t n_prompt, n_gen, n_cached;
    double prompt_ms, gen_ms;
} choice_t;

struct gen_call {
    lp_gw_call_t base;
    lp_gw_conn_t *conn;
    lp_gw_t *gw;
    int kind;
    bool stream, include_usage, echo, head_sent;
    int n_probs;          /* top entries wanted; -1: no logprobs */
    char id[48];
    long long created;
    int n_choices, n_done;
    choice_t *ch;
    uint64_t version;     /* strategy version of the last token */
};

static void call_free(gen_call_t *g)
{
    for (int i = 0; i < g->n_choices; i++) {
        choice_t *c = &g->ch[i];
        lp_gw_link_forget(g->gw, &c->op);
        free(c->prompt);
        free(c->stop_word);
        lp_sb_free(&c->text);
        lp_sb_free(&c->lp_tokens);
        lp_sb_free(&c->lp_values);
        lp_sb_free(&c->lp_tops);
        lp_sb_free(&c->lp_offsets);
        lp_sb_free(&c->lp_content);
        lp_sb_free(&c->ids);
    }
    free(g->ch);
    free(g);
}

/* Stop every choice still running at the coordinator. */
static void cancel_all(gen_call_t *g)
{
    for (int i = 0; i < g->n_choices; i++)
        if (g->ch[i].op.registered && !g->ch[i].done) lp_gw_link_cancel(g->gw, g->ch[i].op.id);
}

static void on_abort(lp_gw_call_t *base)
{
    gen_call_t *g = (gen_call_t *)base;
    cancel_all(g);
    call_free(g);
}

static void finish(gen_call_t *g)
{
    lp_gw_conn_t *conn = g->conn;
    call_free(g);
    lp_gw_conn_set_call(conn, NULL);
    lp_gw_conn_end(conn);
}

static const char *reason_name(Lmpipe__FinishReason r)
{
    return r == LMPIPE__FINISH_REASON__FINISH_LENGTH || r == LMPIPE__FINISH_REASON__FINISH_CONTEXT ? "length"
                                                                                                  : "stop";
}

/* A failure: an error response when nothing has been sent, else an error
 * event at the end of the stream. */
static void fail(gen_call_t *g, int status, const char *msg)
{
    cancel_all(g);
    /* The coordinator's own prefix says nothing to an HTTP client. */
    if (!strncmp(msg, "coordinator: ", 13)) msg += 13;
    if (!g->head_sent) {
        char param[64] = "";
        /* The coordinator names the field first: "top_k: must be >= 0". */
        size_t n = strspn(msg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.[]");
        if (status == 400 && n > 0 && n < sizeof(param) && msg[n] == ':') {
            memcpy(param, msg, n);
            param[n] = '\0';
        }
        lp_gw_conn_t *conn = g->conn;
        call_free(g);
        lp_gw_conn_set_call(conn, NULL);
        /* 429 as OpenAI writes it, so that SDKs back off and retry */
        lp_gw_error(conn, status,
                    status == 400 ? "invalid_request_error" : status == 429 ? "requests" : "server_error",
                    param[0] ? param : NULL, status == 429 ? "rate_limit_exceeded" : NULL, "%s", msg);
        return;
    }
    lp_sb_t b = {0};
    lp_sb_puts(&b, "data: {\"error\":{\"message\":");
    lp_sb_json_str(&b, msg, strlen(msg));
    lp_sb_printf(&b, ",\"type\":\"server_error\",\"param\":null,\"code\":%d}}\n\n", status);
    if (g->kind != K_LLAMA) lp_sb_puts(&b, "data: [DONE]\n\n");
    lp_gw_conn_chunk(g->conn, b.p, b.len);
    lp_sb_free(&b);
    finish(g);
}

static void head(gen_call_t *g)
{
    if (g->head_sent) return;
    g->head_sent = true;
    if (g->stream) lp_gw_conn_head(g->conn, 200, "text/event-stream", -1, NULL);
}

static const char *tok_text(lp_gw_t *gw, int32_t id, size_t *len)
{
    if (gw->vocab && id >= 0 && (uint32_t)id < gw->vocab_n) {
        *len = gw->vocab_len[id];
        return gw->vocab[id];
    }
    *len = 0;
    return "";
}

static void put_bytes(lp_sb_t *b, const char *s, size_t n)
{
    lp_sb_puts(b, "[");
    for (size_t i = 0; i < n; i++) lp_sb_printf(b, "%s%u", i ? "," : "", (unsigned char)s[i]);
    lp_sb_puts(b, "]");
}

/* One token's logprobs in the shape of chat's logprobs.content[] (and
 * llama.cpp's completion_probabilities[], with ids). */
static void put_content_entry(gen_call_t *g, lp_sb_t *b, const Lmpipe__TokenEvent *t)
{
    size_t n;
    const char *s = tok_text(g->gw, t->id, &n);
    bool ids = g->kind == K_LLAMA;
    lp_sb_puts(b, "{");
    if (ids) lp_sb_printf(b, "\"id\":%d,", t->id);
    lp_sb_puts(b, "\"token\":");
    lp_sb_json_str(b, s, n);
    lp_sb_puts(b, ",\"logprob\":");
    lp_sb_json_num(b, t->logprob);
    lp_sb_puts(b, ",\"bytes\":");
    put_bytes(b, s, n);
    lp_sb_puts(b, ",\"top_logprobs\":[");
    for (size_t k = 0; k < t->n_top && (int)k < g->n_probs; k++) {
        const char *ts = tok_text(g->gw, t->top[k]->id, &n);
        lp_sb_printf(b, "%s{", k ? "," : "");
        if (ids) lp_sb_printf(b, "\"id\":%d,", t->top[k]->id);
        lp_sb_puts(b, "\"token\":");
        lp_sb_json_str(b, ts, n);
        lp_sb_puts(b, ",\"logprob\":");
        lp_sb_json_num(b, t->top[k]->logprob);
        lp_sb_puts(b, ",\"bytes\":");
        put_bytes(b, ts, n);
        lp_sb_puts(b, "}");
    }
    lp_sb_puts(b, "]}");
}

/* Completions' logprobs: four parallel lists. */
static void put_compl_lp(gen_call_t *g, choice_t *c, const Lmpipe__TokenEvent *t, size_t offset)
{
    size_t n;
    const char *s = tok_text(g->gw, t->id, &n);
    const char *sep = c->n_tokens ? "," : "";
    lp_sb_puts(&c->lp_tokens, sep);
    lp_sb_json_str(&c->lp_tokens, s, n);
    lp_sb_puts(&c->lp_values, sep);
    lp_sb_json_num(&c->lp_values, t->logprob);
    lp_sb_printf(&c->lp_offsets, "%s%zu", sep, offset);
    lp_sb_puts(&c->lp_tops, sep);
    lp_sb_puts(&c->lp_tops, "{");
    /* A token text can repeat in the top list (two ids, one text): the
     * first, most likely, is kept, as a JSON object has unique keys. */
    for (size_t k = 0, w = 0; k < t->n_top && (int)k < g->n_probs; k++) {
        size_t tn;
        const char *ts = tok_text(g->gw, t->top[k]->id, &tn);
        bool dup = false;
        for (size_t j = 0; j < k && !dup; j++) {
            size_t jn;
            const char *js = tok_text(g->gw, t->top[j]->id, &jn);
            dup = jn == tn && !memcmp(js, ts, tn);
        }
        if (dup) continue;
        lp_sb_puts(&c->lp_tops, w++ ? "," : "");
        lp_sb_json_str(&c->lp_tops, ts, tn);
        lp_sb_puts(&c->lp_tops, ":");
        lp_sb_json_num(&c->lp_tops, t->top[k]->logprob);
    }
    lp_sb_puts(&c->lp_tops, "}");
}

static void chunk_begin(gen_call_t *g, lp_sb_t *b)
{
    lp_sb_puts(b, "data: {\"id\":");
    lp_sb_json_str(b, g->id, strlen(g->id));
    lp_sb_printf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":",
                 g->kind == K_CHAT ? "chat.completion.chunk" : "text_completion", g->created);
    lp_sb_json_str(b, g->gw->model, strlen(g->gw->model));
}

static void put_usage(gen_call_t *g, lp_sb_t *b)
{
    uint64_t p = 0, gen = 0, cached = 0;
    for (int i = 0; i < g->n_choices; i++) {
        /* the n choices of one prompt share it: count it, and its reuse, once */
        if (i == 0 || g->ch[i].prompt_idx != g->ch[i - 1].prompt_idx) {
            p += g->ch[i].n_prompt;
            cached += g->ch[i].n_cached;
        }
        gen += g->ch[i].n_gen;
    }
    lp_sb_printf(b, "{\"prompt_tokens\":%llu,\"completion_tokens\":%llu,\"total_tokens\":%llu,"
                    "\"prompt_tokens_details\":{\"cached_tokens\":%llu}}",
                 (unsigned long long)p, (unsigned long long)gen, (unsigned long long)(p + gen),
                 (unsigned long long)cached);
}

static void put_timings(const choice_t *c, lp_sb_t *b)
{
    /* As llama-server: prompt_n counts the prompt tokens computed, cache_n
     * those taken from the prefix cache. */
    double pms = c->prompt_ms, gms = c->gen_ms;
    uint32_t cached = c->n_cached < c->n_prompt ? c->n_cached : c->n_prompt, n = c->n_prompt - cached;
    lp_sb_printf(b, "{\"cache_n\":%u,\"prompt_n\":%u,\"prompt_ms\":%.3f,\"prompt_per_token_ms\":%.3f,"
                    "\"prompt_per_second\":%.3f,"
                    "\"predicted_n\":%u,\"predicted_ms\":%.3f,\"predicted_per_token_ms\":%.3f,"
                    "\"predicted_per_second\":%.3f}",
                 cached, n, pms, n ? pms / n : 0.0, pms > 0 ? n * 1000.0 / pms : 0.0, c->n_gen, gms,
                 c->n_gen ? gms / c->n_gen : 0.0, gms > 0 ? c->n_gen * 1000.0 / gms : 0.0);
}

static const char *llama_stop_type(const choice_t *c)
{
    switch (c->reason) {
    case LMPIPE__FINISH_REASON__FINISH_EOS: return "eos";
    case LMPIPE__FINISH_REASON__FINISH_STOP: return "word";
    case LMPIPE__FINISH_REASON__FINISH_LENGTH:
    case LMPIPE__FINISH_REASON__FINISH_CONTEXT: return "limit";
    default: return "none";
    }
}

/* llama.cpp's final /completion object (also the last streamed chunk). */
static void put_llama_final(gen_call_t *g, choice_t *c, lp_sb_t *b, bool streamed)
{
    lp_sb_puts(b, "{\"index\":0,\"content\":");
    if (streamed) lp_sb_puts(b, "\"\"");
    else lp_sb_json_str(b, c->text.p ? c->text.p : "", c->text.len);
    lp_sb_puts(b, ",\"tokens\":[");
    if (!streamed && c->ids.len) lp_sb_putn(b, c->ids.p, c->ids.len);
    lp_sb_puts(b, "],\"id_slot\":-1,\"stop\":true,\"model\":");
    lp_sb_json_str(b, g->gw->model, strlen(g->gw->model));
    lp_sb_printf(b, ",\"tokens_predicted\":%u,\"tokens_evaluated\":%u,\"tokens_cached\":%u,\"truncated\":false,"
                    "\"stop_type\":\"%s\",\"stopping_word\":",
                 c->n_gen, c->n_prompt, c->n_cached, llama_stop_type(c));
    lp_sb_json_str(b, c->stop_word ? c->stop_word : "", c->stop_word ? strlen(c->stop_word) : 0);
    lp_sb_puts(b, ",\"timings\":");
    put_timings(c, b);
    if (!streamed && g->n_probs >= 0) {
        lp_sb_puts(b, ",\"completion_probabilities\":[");
        if (c->lp_content.len) lp_sb_putn(b, c->lp_content.p, c->lp_content.len);
        lp_sb_puts(b, "]");
    }
    lp_sb_printf(b, ",\"strategy_version\":%llu}", (unsigned long long)g->version);
}

static void respond_whole(gen_call_t *g)
{
    lp_sb_t b = {0};
    if (g->kind == K_LLAMA) {
        put_llama_final(g, &g->ch[0], &b, false);
    } else {
        bool chat = g->kind == K_CHAT;
        lp_sb_puts(&b, "{\"id\":");
        lp_sb_json_str(&b, g->id, strlen(g->id));
        lp_sb_printf(&b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", chat ? "chat.completion" : "text_completion",
                     g->created);
        lp_sb_json_str(&b, g->gw->model, strlen(g->gw->model));
        lp_sb_puts(&b, ",\"choices\":[");
        for (int i = 0; i < g->n_choices; i++) {
            choice_t *c = &g->ch[i];
            lp_sb_printf(&b, "%s{\"index\":%d,", i ? "," : "", i);
            if (chat) {
                lp_sb_puts(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
                lp_sb_json_str(&b, c->text.p ? c->text.p : "", c->text.len);
                lp_sb_puts(&b, "},\"logprobs\":");
                if (g->n_probs >= 0) {
                    lp_sb_puts(&b, "{\"content\":[");
                    if (c->lp_content.len) lp_sb_putn(&b, c->lp_content.p, c->lp_content.len);
                    lp_sb_puts(&b, "]}");
                } else
                    lp_sb_puts(&b, "null");
            } else {
                lp_sb_t t = {0};
                if (g->echo && c->prompt) lp_sb_putn(&t, c->prompt, c->prompt_len);
                if (c->text.len) lp_sb_putn(&t, c->text.p, c->text.len);
                lp_sb_puts(&b, "\"text\":");
                lp_sb_json_str(&b, t.p ? t.p : "", t.len);
                lp_sb_free(&t);
                lp_sb_puts(&b, ",\"logprobs\":");
                if (g->n_probs >= 0) {
                    lp_sb_puts(&b, "{\"tokens\":[");
                    if (c->lp_tokens.len) lp_sb_putn(&b, c->lp_tokens.p, c->lp_tokens.len);
                    lp_sb_puts(&b, "],\"token_logprobs\":[");
                    if (c->lp_values.len) lp_sb_putn(&b, c->lp_values.p, c->lp_values.len);
                    lp_sb_puts(&b, "],\"top_logprobs\":[");
                    if (c->lp_tops.len) lp_sb_putn(&b, c->lp_tops.p, c->lp_tops.len);
                    lp_sb_puts(&b, "],\"text_offset\":[");
                    if (c->lp_offsets.len) lp_sb_putn(&b, c->lp_offsets.p, c->lp_offsets.len);
                    lp_sb_puts(&b, "]}");
                } else
                    lp_sb_puts(&b, "null");
            }
            lp_sb_printf(&b, ",\"finish_reason\":\"%s\"}", reason_name(c->reason));
        }
        lp_sb_puts(&b, "],\"usage\":");
        put_usage(g, &b);
        lp_sb_printf(&b, ",\"strategy_version\":%llu}", (unsigned long long)g->version);
    }
    lp_sb_puts(&b, "\n");
    if (b.oom) {
        lp_sb_free(&b);
        fail(g, 500, "out of memory");
        return;
    }
    g->head_sent = true;
    lp_gw_conn_head(g->conn, 200, "application/json", (long long)b.len, NULL);
    lp_gw_conn_write(g->conn, b.p, b.len);
    lp_sb_free(&b);
    finish(g);
}

/* One streamed chunk for a token (piece) or the end of a choice (reason). */
static void stream_chunk(gen_call_t *g, choice_t *c, const Lmpipe__TokenEvent *t, const char *piece,
                         size_t len, const char *reason)
{
    int idx = (int)(c - g->ch);
    lp_sb_t b = {0};
    if (g->kind == K_LLAMA) {
        lp_sb_puts(&b, "data: {\"index\":0,\"content\":");
        lp_sb_json_str(&b, piece, len);
        lp_sb_puts(&b, ",\"tokens\":[");
        if (t) lp_sb_printf(&b, "%d", t->id);
        lp_sb_printf(&b, "],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%u", c->n_tokens + (t ? 1 : 0));
        if (t && g->n_probs >= 0) {
            lp_sb_puts(&b, ",\"completion_probabilities\":[");
            put_content_entry(g, &b, t);
            lp_sb_puts(&b, "]");
        }
        lp_sb_printf(&b, ",\"strategy_version\":%llu}\n\n", (unsigned long long)g->version);
    } else {
        chunk_begin(g, &b);
        lp_sb_printf(&b, ",\"choices\":[{\"index\":%d,", idx);
        if (g->kind == K_CHAT) {
            lp_sb_puts(&b, "\"delta\":{");
            if (!c->sent_role) {
                lp_sb_puts(&b, "\"role\":\"assistant\"");
                c->sent_role = true;
                if (!reason) lp_sb_puts(&b, ",");
            }
            if (!reason) {
                lp_sb_puts(&b, "\"content\":");
                lp_sb_json_str(&b, piece, len);
            }
            lp_sb_puts(&b, "},\"logprobs\":");
            if (t && g->n_probs >= 0) {
                lp_sb_puts(&b, "{\"content\":[");
                put_content_entry(g, &b, t);
                lp_sb_puts(&b, "]}");
            } else
                lp_sb_puts(&b, "null");
        } else {
            lp_sb_puts(&b, "\"text\":");
            lp_sb_json_str(&b, piece, len);
            lp_sb_puts(&b, ",\"logprobs\":");
            if (t && g->n_probs >= 0) {
                lp_sb_t tmp = {0};
                choice_t one = {0};
                put_compl_lp(g, &one, t, c->text_off);
                lp_sb_puts(&b, "{\"tokens\":[");
                lp_sb_putn(&b, one.lp_tokens.p, one.lp_tokens.len);
                lp_sb_puts(&b, "],\"token_logprobs\":[");
                lp_sb_putn(&b, one.lp_values.p, one.lp_values.len);
                lp_sb_puts(&b, "],\"top_logprobs\":[");
                lp_sb_putn(&b, one.lp_tops.p, one.lp_tops.len);
                lp_sb_puts(&b, "],\"text_offset\":[");
                lp_sb_putn(&b, one.lp_offsets.p, one.lp_offsets.len);
                lp_sb_puts(&b, "]}");
                lp_sb_free(&one.lp_tokens);
                lp_sb_free(&one.lp_values);
                lp_sb_free(&one.lp_tops);
                lp_sb_free(&one.lp_offsets);
                lp_sb_free(&tmp);
            } else
                lp_sb_puts(&b, "null");
        }
        lp_sb_puts(&b, ",\"finish_reason\":");
        if (reason) lp_sb_printf(&b, "\"%s\"", reason);
        else lp_sb_puts(&b, "null");
        lp_sb_printf(&b, "}],\"strategy_version\":%llu}\n\n", (unsigned long long)g->version);
    }
    lp_gw_conn_chunk(g->conn, b.p, b.len);
    lp_sb_free(&b);
}

static void stream_end(gen_call_t *g)
{
    lp_sb_t b = {0};
    if (g->kind == K_LLAMA) {
        lp_sb_puts(&b, "data: ");
        put_llama_final(g, &g->ch[0], &b, true);
        lp_sb_puts(&b, "\n\n");
    } else {
        if (g->include_usage) {
            chunk_begin(g, &b);
            lp_sb_puts(&b, ",\"choices\":[],\"usage\":");
            put_usage(g, &b);
            lp_sb_printf(&b, ",\"strategy_version\":%llu}\n\n", (unsigned long long)g->version);
        }
        lp_sb_puts(&b, "data: [DONE]\n\n");
    }
    lp_gw_conn_chunk(g->conn, b.p, b.len);
    lp_sb_free(&b);
    finish(g);
}

/* Streamed completions with echo: the prompt goes first, as its own chunk. */
static void stream_echo(gen_call_t *g, choice_t *c)
{
    if (!g->echo || !c->prompt || c->echoed) return;
    c->echoed = true;
    stream_chunk(g, c, NULL, c->prompt, c->prompt_len, NULL);
}

static void on_token(gen_call_t *g, choice_t *c, const Lmpipe__TokenEvent *t)
{
    g->version = t->strategy_version;
    const char *piece = (const char *)t->piece.data;
    size_t len = t->piece.len;
    if (g->stream) {
        head(g);
        stream_echo(g, c);
        if (g->kind == K_CHAT && !c->sent_role && len == 0 && g->n_probs < 0) {
            /* nothing to say yet */
        } else if (len || g->n_probs >= 0 || g->kind == K_LLAMA) /* /completion: every id, as llama-server */
            stream_chunk(g, c, t, piece ? piece : "", len, NULL);
    } else {
        if (g->n_probs >= 0) {
            if (g->kind == K_COMPL) put_compl_lp(g, c, t, c->text_off + (g->echo && c->prompt ? c->prompt_len : 0));
            else {
                if (c->n_tokens) lp_sb_puts(&c->lp_content, ",");
                put_content_entry(g, &c->lp_content, t);
            }
        }
        lp_sb_putn(&c->text, piece ? piece : "", len);
        if (g->kind == K_LLAMA) lp_sb_printf(&c->ids, "%s%d", c->n_tokens ? "," : "", t->id);
    }
    c->text_off += len;
    c->n_tokens++;
}

static void on_final(gen_call_t *g, choice_t *c, const Lmpipe__FinalEvent *f)
{
    c->done = true;
    g->n_done++;
    lp_gw_link_forget(g->gw, &c->op);
    c->reason = f->reason;
    c->n_prompt = f->n_prompt;
    c->n_gen = f->n_generated;
    c->n_cached = f->n_cached;
    c->prompt_ms = f->prompt_ms;
    c->gen_ms = f->generate_ms;
    if (f->stop.len && (c->stop_word = malloc(f->stop.len + 1))) {
        memcpy(c->stop_word, f->stop.data, f->stop.len);
        c->stop_word[f->stop.len] = '\0';
    }
    if (f->reason == LMPIPE__FINISH_REASON__FINISH_ERROR || f->reason == LMPIPE__FINISH_REASON__FINISH_CANCELLED) {
        const char *msg = f->error && f->error[0] ? f->error : "the generation was cancelled";
        /* A prompt longer than the context, or chat with a model that has
         * no template, is the request's fault. */
        bool bad = c->n_tokens == 0 && (strstr(msg, "the context holds") || strstr(msg, "chat_template"));
        /* The pipeline's reason (stopping, a stage lost): try again later. */
        fail(g, bad ? 400 : f->retryable ? 503 : 500, msg);
        return;
    }
    const char *tail = (const char *)f->tail.data;
    if (g->stream) {
        head(g);
        stream_echo(g, c);
        if (f->tail.len) stream_chunk(g, c, NULL, tail, f->tail.len, NULL);
        if (g->kind != K_LLAMA) stream_chunk(g, c, NULL, "", 0, reason_name(f->reason));
    } else
        lp_sb_putn(&c->text, tail ? tail : "", f->tail.len);
    if (g->n_done < g->n_choices) return;
    if (g->stream) stream_end(g);
    else respond_whole(g);
}

static void on_msg(lp_gw_op_t *op, const Lmpipe__Msg *m)
{
    choice_t *c = op->arg;
    gen_call_t *g = c->call;
    switch (m->body_case) {
    case LMPIPE__MSG__BODY_TOKEN: on_token(g, c, m->token); break;
    case LMPIPE__MSG__BODY_FINAL: on_final(g, c, m->final); break;
    case LMPIPE__MSG__BODY_ERROR:
        c->done = true;
        lp_gw_link_forget(g->gw, &c->op);
        fail(g, lp_gw_status_of(m->error->code, m->error->message), m->error->message);
        break;
    default: break;
    }
}

/* ---- requests ---- */

/* The OpenAI fields the gateway reads itself; every other member of the
 * body goes to the coordinator in params_json (llama.cpp's sampler fields). */
static const char *const own_fields[] = {
    "model", "prompt", "messages", "max_tokens", "max_completion_tokens", "stop", "n", "stream",
    "stream_options", "logprobs", "top_logprobs", "echo", "user", "seed", "suffix", "best_of", "n_probs",
    "chat_template", NULL,
};

static bool is_own(const lp_json_t *it, bool chat)
{
    for (int i = 0; own_fields[i]; i++)
        if (strlen(own_fields[i]) == it->key_len && !memcmp(own_fields[i], it->key, it->key_len)) return true;
    for (int i = 0; chat && lp_chat_request_fields[i]; i++)
        if (!strcmp(lp_chat_request_fields[i], it->key)) return true;
    return false;
}

#define BAD(param, ...)                                                                                   \
    do {                                                                                                  \
        lp_gw_error(conn, 400, "invalid_request_error", param, NULL, __VA_ARGS__);                        \
        goto out;                                                                                         \
    } while (0)

static int get_int(const lp_json_t *root, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *given)
{
    const lp_json_t *v = lp_json_get(root, key);
    *given = v && v->type != LP_JSON_NULL;
    if (!*given) return 0;
    return lp_json_int(v, lo, hi, out);
}

static int get_bool(const lp_json_t *root, const char *key, bool *out)
{
    const lp_json_t *v = lp_json_get(root, key);
    if (!v || v->type == LP_JSON_NULL) return 0;
    if (v->type != LP_JSON_BOOL) return -1;
    *out = v->u.b;
    return 0;
}

typedef struct prompt {
    const char *text;
    size_t len;
    int32_t *ids;
    size_t n_ids;
} prompt_t;

/* prompt: a string, a list of token ids, or a list of either. */
static int read_prompts(const lp_json_t *v, prompt_t **out, size_t *n, char *why, size_t cap)
{
    *out = NULL;
    *n = 0;
    if (!v) return snprintf(why, cap, "prompt: missing"), -1;
    const lp_json_t *list = v;
    size_t count = 1;
    bool many = false;
    if (v->type == LP_JSON_ARRAY && v->n > 0 &&
        (v->u.items[0].type == LP_JSON_STRING || v->u.items[0].type == LP_JSON_ARRAY)) {
        many = true;
        count = v->n;
    } else if (v->type != LP_JSON_STRING && v->type != LP_JSON_ARRAY)
        return snprintf(why, cap, "prompt: must be a string or a list, got %s", lp_json_type_name(v->type)), -1;
    if (count > 64) return snprintf(why, cap, "prompt: at most 64 prompts, got %zu", count), -1;
    prompt_t *p = calloc(count, sizeof(*p));
    if (!p) return snprintf(why, cap, "out of memory"), -1;
    for (size_t i = 0; i < count; i++) {
        const lp_json_t *it = many ? &list->u.items[i] : v;
        if (it->type == LP_JSON_STRING) {
            p[i].text = it->u.str;
            p[i].len = it->n;
        } else if (it->type == LP_JSON_ARRAY) {
            if (it->n == 0) {
                snprintf(why, cap, "prompt: an empty token list");
                goto bad;
            }
            if (!(p[i].ids = malloc(it->n * sizeof(int32_t)))) goto bad;
            p[i].n_ids = it->n;
            for (size_t k = 0; k < it->n; k++) {
                int64_t x;
                if (lp_json_int(&it->u.items[k], 0, INT32_MAX, &x) != 0) {
                    snprintf(why, cap, "prompt: token %zu is not a token id", k);
                    goto bad;
                }
                p[i].ids[k] = (int32_t)x;
            }
        } else {
            snprintf(why, cap, "prompt[%zu]: must be a string or a list of token ids", i);
            goto bad;
        }
    }
    *out = p;
    *n = count;
    return 0;
bad:
    for (size_t i = 0; i < count; i++) free(p[i].ids);
    free(p);
    return -1;
}

static gen_call_t *call_new(lp_gw_conn_t *conn, int kind, int n_choices)
{
    gen_call_t *g = calloc(1, sizeof(*g));
    if (!g) return NULL;
    if (!(g->ch = calloc((size_t)n_choices, sizeof(choice_t)))) {
        free(g);
        return NULL;
    }
    static uint64_t seq;
    g->base.abort = on_abort;
    g->conn = conn;
    g->gw = lp_gw_conn_gw(conn);
    g->kind = kind;
    g->n_choices = n_choices;
    g->n_probs = -1;
    g->created = (long long)time(NULL);
    snprintf(g->id, sizeof(g->id), "%s-%llx%llx", kind == K_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)g->created, (unsigned long long)++seq);
    for (int i = 0; i < n_choices; i++) {
        g->ch[i].call = g;
        g->ch[i].op.arg = &g->ch[i];
        g->ch[i].op.on_msg = on_msg;
    }
    return g;
}

/* Send every choice; on failure the call is answered and freed. */
static void send_all(gen_call_t *g, const lp_gw_req_t *r, Lmpipe__GenerateRequest *reqs)
{
    char tenant[96];
    lp_gw_tenant(g->conn, r, tenant, sizeof(tenant));
    lp_gw_conn_set_call(g->conn, &g->base);
    for (int i = 0; i < g->n_choices; i++) {
        reqs[i].tenant.data = (uint8_t *)tenant;
        reqs[i].tenant.len = strlen(tenant);
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_GENERATE;
        m.generate = &reqs[i];
        if (lp_gw_link_send(g->gw, &m, &g->ch[i].op) != 0) {
            fail(g, 503, "cannot send to the coordinator");
            return;
        }
    }
}

void lp_gw_openai_completions(lp_gw_conn_t *conn, const lp_gw_req_t *r, const lp_json_t *root, bool chat)
{
    lp_gw_t *gw = lp_gw_conn_gw(conn);
    char why[512];
    prompt_t *prompts = NULL;
    size_t n_prompts = 1;
    char *chat_json = NULL;
    Lmpipe__GenerateRequest *reqs = NULL;
    char **params = NULL;
    ProtobufCBinaryData *stops = NULL;
    int n_total = 0;
    const lp_json_t *v;
    int64_t n = 1, max_tokens = 0, seed = 0, top = 0;
    bool given, has_seed = false, stream = false, echo = false;
    const char *chat_template = NULL;

    if ((v = lp_json_get(root, "model")) && v->type != LP_JSON_NULL) {
        if (v->type != LP_JSON_STRING) BAD("model", "model: must be a string");
        if (strcmp(v->u.str, gw->model)) {
            lp_gw_error(conn, 404, "invalid_request_error", "model", "model_not_found",
                        "the model '%s' does not exist; this server has '%s'", v->u.str, gw->model);
            goto out;
        }
    }
    if (get_int(root, "n", 1, 128, &n, &given)) BAD("n", "n: must be an integer in [1, 128]");
    if (get_int(root, "max_tokens", 1, 1 << 30, &max_tokens, &given))
        BAD("max_tokens", "max_tokens: must be an integer >= 1");
    if (chat && get_int(root, "max_completion_tokens", 1, 1 << 30, &max_tokens, &given))
        BAD("max_completion_tokens", "max_completion_tokens: must be an integer >= 1");
    if (get_int(root, "seed", 0, INT32_MAX, &seed, &has_seed))
        BAD("seed", "seed: must be an integer in [0, %d]", INT32_MAX);
    if (get_bool(root, "stream", &stream)) BAD("stream", "stream: must be true or false");
    const lp_json_t *user = lp_json_get(root, "user");
    if (user && user->type != LP_JSON_STRING && user->type != LP_JSON_NULL) BAD("user", "user: must be a string");
    bool include_usage = false;
    if ((v = lp_json_get(root, "stream_options")) && v->type != LP_JSON_NULL) {
        if (v->type != LP_JSON_OBJECT) BAD("stream_options", "stream_options: must be an object");
        if (get_bool(v, "include_usage", &include_usage))
            BAD("stream_options", "stream_options.include_usage: must be true or false");
    }
    int n_probs = -1;
    if (chat) {
        bool want = false;
        if (get_bool(root, "logprobs", &want)) BAD("logprobs", "logprobs: must be true or false");
        if (get_int(root, "top_logprobs", 0, 20, &top, &given))
            BAD("top_logprobs", "top_logprobs: must be an integer in [0, 20]");
        if (given && !want) BAD("top_logprobs", "top_logprobs: needs logprobs: true");
        if (want) n_probs = (int)top;
    } else {
        if (get_int(root, "logprobs", 0, 20, &top, &given))
            BAD("logprobs", "logprobs: must be an integer in [0, 20] (the number of top alternatives)");
        if (given) n_probs = (int)top;
        if (get_bool(root, "echo", &echo)) BAD("echo", "echo: must be true or false");
        if (echo && n_probs >= 0)
            BAD("echo", "echo with logprobs is not supported: the pipeline does not compute prompt logprobs");
        if ((v = lp_json_get(root, "suffix")) && v->type != LP_JSON_NULL)
            BAD("suffix", "suffix: insertion is not supported");
    }
    if ((v = lp_json_get(root, "best_of")) && v->type != LP_JSON_NULL && !(v->type == LP_JSON_NUMBER && v->u.num == n))
        BAD("best_of", "best_of: only best_of = n is supported");
    if (n_probs >= 0 && !gw->vocab) {
        if (gw->vocab_failed)
            BAD("logprobs", "logprobs are not available: the coordinator does not serve the vocabulary");
        lp_gw_error(conn, 503, "server_error", "logprobs", NULL, "logprobs: the vocabulary is still loading");
        goto out;
    }
    /* stop: a string or a list of strings */
    size_t n_stop = 0;
    if ((v = lp_json_get(root, "stop")) && v->type != LP_JSON_NULL) {
        if (v->type == LP_JSON_STRING) n_stop = 1;
        else if (v->type == LP_JSON_ARRAY) {
            n_stop = v->n;
            for (size_t i = 0; i < v->n; i++)
                if (v->u.items[i].type != LP_JSON_STRING) BAD("stop", "stop[%zu]: must be a string", i);
        } else
            BAD("stop", "stop: must be a string or a list of strings");
        if (n_stop > 16) BAD("stop", "stop: at most 16 stop strings, got %zu", n_stop);
        if (n_stop && !(stops = calloc(n_stop, sizeof(*stops)))) BAD(NULL, "out of memory");
        for (size_t i = 0; i < n_stop; i++) {
            const lp_json_t *s = v->type == LP_JSON_STRING ? v : &v->u.items[i];
            if (s->n == 0) BAD("stop", "stop: an empty stop string");
            stops[i].data = (uint8_t *)s->u.str;
            stops[i].len = s->n;
        }
    }
    if (chat) {
        if (lp_json_get(root, "prompt")) BAD("prompt", "prompt: chat takes messages, not prompt");
        const char *param;
        if (lp_chat_request_json(root, &chat_json, NULL, &param, why, sizeof(why))) BAD(param, "%s", why);
        if ((v = lp_json_get(root, "chat_template")) && v->type != LP_JSON_NULL) {
            if (v->type != LP_JSON_STRING) BAD("chat_template", "chat_template: must be a string");
            chat_template = v->u.str;
        }
    } else if (read_prompts(lp_json_get(root, "prompt"), &prompts, &n_prompts, why, sizeof(why)))
        BAD("prompt", "%s", why);

    /* The sampler fields, with the seed and n_probs of each choice. */
    lp_sb_t base = {0};
    for (size_t i = 0; i < root->n; i++) {
        const lp_json_t *it = &root->u.items[i];
        if (is_own(it, chat)) continue;
        lp_sb_puts(&base, base.len ? "," : "{");
        lp_sb_json_str(&base, it->key, it->key_len);
        lp_sb_puts(&base, ":");
        lp_sb_json_value(&base, it);
    }
    if (n_probs >= 0) {
        lp_sb_puts(&base, base.len ? "," : "{");
        lp_sb_printf(&base, "\"n_probs\":%d", n_probs > 0 ? n_probs : 1);
    }
    if (n_prompts * (size_t)n > 128) {
        lp_sb_free(&base);
        BAD("n", "n: %lld choices for each of %zu prompts is more than 128 in all", (long long)n, n_prompts);
    }
    n_total = (int)(n_prompts * (size_t)n);
    reqs = calloc((size_t)n_total, sizeof(*reqs));
    params = calloc((size_t)n_total, sizeof(char *));
    gen_call_t *g = reqs && params && !base.oom ? call_new(conn, chat ? K_CHAT : K_COMPL, n_total) : NULL;
    if (!g) {
        lp_sb_free(&base);
        BAD(NULL, "out of memory");
    }
    g->stream = stream;
    g->include_usage = include_usage;
    g->echo = echo;
    g->n_probs = n_probs;
    for (int i = 0; i < n_total; i++) {
        int pi = i / (int)n, ci = i % (int)n;
        lp_sb_t p = {0};
        lp_sb_putn(&p, base.p ? base.p : "{", base.len ? base.len : 1);
        if (has_seed) lp_sb_printf(&p, "%s\"seed\":%lld", base.len ? "," : "", (long long)(seed + ci));
        lp_sb_puts(&p, "}");
        params[i] = p.p;
        Lmpipe__GenerateRequest *q = &reqs[i];
        lmpipe__generate_request__init(q);
        q->params_json = params[i] ? params[i] : "{}";
        q->n_predict = max_tokens ? (int32_t)max_tokens : 0;
        q->stop = stops;
        q->n_stop = n_stop;
        g->ch[i].prompt_idx = pi;
        if (chat) {
            q->chat_json = chat_json;
            if (chat_template) q->chat_template = (char *)chat_template;
        } else if (prompts[pi].ids) {
            q->prompt_ids = prompts[pi].ids;
            q->n_prompt_ids = prompts[pi].n_ids;
        } else {
            q->prompt.data = (uint8_t *)prompts[pi].text;
            q->prompt.len = prompts[pi].len;
            if (echo && (g->ch[i].prompt = malloc(prompts[pi].len + 1))) {
                memcpy(g->ch[i].prompt, prompts[pi].text, prompts[pi].len);
                g->ch[i].prompt_len = prompts[pi].len;
            }
        }
    }
    lp_sb_free(&base);
    send_all(g, r, reqs);
out:
    if (params)
        for (int i = 0; i < n_total; i++) free(params[i]);
    free(params);
    free(reqs);
    free(stops);
    if (prompts)
        for (size_t i = 0; i < n_prompts; i++) free(prompts[i].ids);
    free(prompts);
    free(chat_json);
}

void lp_gw_llama_completion(lp_gw_conn_t *conn, const lp_gw_req_t *r, const lp_json_t *root)
{
    lp_gw_t *gw = lp_gw_conn_gw(conn);
    bool stream = false;
    int64_t n_probs = 0;
    bool given;
    prompt_t *prompts = NULL;
    size_t n_prompts = 0;
    char why[512];
    if (get_bool(root, "stream", &stream)) {
        lp_gw_error(conn, 400, "invalid_request_error", "stream", NULL, "stream: must be true or false");
        return;
    }
    if (get_int(root, "n_probs", 0, 100, &n_probs, &given)) {
        lp_gw_error(conn, 400, "invalid_request_error", "n_probs", NULL, "n_probs: must be an integer in [0, 100]");
        return;
    }
    if (n_probs > 0 && !gw->vocab) {
        lp_gw_error(conn, gw->vocab_failed ? 400 : 503, "invalid_request_error", "n_probs", NULL,
                    "n_probs: %s", gw->vocab_failed ? "the coordinator does not serve the vocabulary"
                                                    : "the vocabulary is still loading");
        return;
    }
    const lp_json_t *pv = lp_json_get(root, "prompt");
    if (read_prompts(pv, &prompts, &n_prompts, why, sizeof(why)) || n_prompts != 1) {
        lp_gw_error(conn, 400, "invalid_request_error", "prompt", NULL, "%s",
                    n_prompts > 1 ? "prompt: /completion takes one prompt" : why);
        goto out;
    }
    gen_call_t *g = call_new(conn, K_LLAMA, 1);
    if (!g) {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    g->stream = stream;
    g->n_probs = n_probs > 0 ? (int)n_probs : -1;
    Lmpipe__GenerateRequest q = LMPIPE__GENERATE_REQUEST__INIT;
    /* The body goes as it is: the coordinator reads llama.cpp's field names. */
    char *body = strndup(r->body, r->body_len);
    q.params_json = body;
    if (prompts[0].ids) {
        q.prompt_ids = prompts[0].ids;
        q.n_prompt_ids = prompts[0].n_ids;
    } else {
        q.prompt.data = (uint8_t *)prompts[0].text;
        q.prompt.len = prompts[0].len;
    }
    if (!body) {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
        call_free(g);
        goto out;
    }
    send_all(g, r, &q);
    free(body);
out:
    if (prompts)
        for (size_t i = 0; i < n_prompts; i++) free(prompts[i].ids);
    free(prompts);
}
