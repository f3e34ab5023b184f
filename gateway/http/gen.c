/* gen.c - generations over HTTP: OpenAI's /v1/completions and
 * /v1/chat/completions, and llama.cpp's /completion.  Each choice is one
 * GenerateRequest; its events arrive by Msg.id and are either streamed as
 * Server-Sent Events or gathered into one response.  The response head
 * waits for the first event, so that a request the coordinator refuses at
 * its edge (a bad sampler field, a prompt longer than the context) still
 * gets a 400 and not a 200 with an error inside the stream. */
#include "gw.h"

#include "edge.h"
#include "error.h"
#include "gen-request.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K_COMPL, K_CHAT, K_LLAMA };

typedef struct gen_call gen_call_t;

typedef struct choice {
    lp_link_op_t op;
    gen_call_t *call;
    int prompt_idx;
    char *prompt;         /* the prompt text (echo), or NULL */
    size_t prompt_len;
    lp_json_buf_t text;         /* gathered (not streamed) */
    lp_json_buf_t lp_tokens, lp_values, lp_tops, lp_offsets; /* completions logprobs */
    lp_json_buf_t lp_content;   /* chat and /completion logprobs entries */
    lp_json_buf_t ids;          /* /completion: the token ids */
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
        lp_link_forget(&g->gw->link, &c->op);
        free(c->prompt);
        free(c->stop_word);
        lp_json_buf_free(&c->text);
        lp_json_buf_free(&c->lp_tokens);
        lp_json_buf_free(&c->lp_values);
        lp_json_buf_free(&c->lp_tops);
        lp_json_buf_free(&c->lp_offsets);
        lp_json_buf_free(&c->lp_content);
        lp_json_buf_free(&c->ids);
    }
    free(g->ch);
    free(g);
}

/* Stop every choice still running at the coordinator. */
static void cancel_all(gen_call_t *g)
{
    for (int i = 0; i < g->n_choices; i++)
        if (g->ch[i].op.registered && !g->ch[i].done) lp_link_cancel(&g->gw->link, g->ch[i].op.id);
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

/* A failure of a kind (lib/error.h), naming the field at fault (or NULL):
 * an error response when nothing has been sent, else an error event at the
 * end of the stream.  The status comes from the kind (gateway/common/edge.h). */
static void fail(gen_call_t *g, enum lp_error_kind kind, const char *param, const char *msg)
{
    cancel_all(g);
    /* The coordinator's own prefix says nothing to an HTTP client. */
    if (!strncmp(msg, "coordinator: ", 13)) msg += 13;
    int status = lp_edge_http_status(kind);
    if (!g->head_sent) {
        lp_gw_conn_t *conn = g->conn;
        char p[64];
        snprintf(p, sizeof(p), "%s", param ? param : "");
        char *m = strdup(msg); /* msg may live in the call freed here */
        call_free(g);
        lp_gw_conn_set_call(conn, NULL);
        lp_gw_error_kind(conn, kind, p[0] ? p : NULL, "%s", m ? m : "out of memory");
        free(m);
        return;
    }
    const char *code = lp_edge_openai_code(kind);
    lp_json_buf_t b = {0};
    lp_json_buf_puts(&b, "data: {\"error\":{\"message\":");
    lp_json_buf_str(&b, msg, strlen(msg));
    lp_json_buf_printf(&b, ",\"type\":\"%s\",\"param\":", lp_edge_openai_type(kind));
    if (param && param[0]) lp_json_buf_str(&b, param, strlen(param));
    else lp_json_buf_puts(&b, "null");
    if (code) lp_json_buf_printf(&b, ",\"code\":\"%s\"}}\n\n", code);
    else lp_json_buf_printf(&b, ",\"code\":%d}}\n\n", status);
    if (g->kind != K_LLAMA) lp_json_buf_puts(&b, "data: [DONE]\n\n");
    lp_gw_conn_chunk(g->conn, b.p, b.n);
    lp_json_buf_free(&b);
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
    if (gw->link.vocab && id >= 0 && (uint32_t)id < gw->link.vocab_n) {
        *len = gw->link.vocab_len[id];
        return gw->link.vocab[id];
    }
    *len = 0;
    return "";
}

static void put_bytes(lp_json_buf_t *b, const char *s, size_t n)
{
    lp_json_buf_puts(b, "[");
    for (size_t i = 0; i < n; i++) lp_json_buf_printf(b, "%s%u", i ? "," : "", (unsigned char)s[i]);
    lp_json_buf_puts(b, "]");
}

/* One token's logprobs in the shape of chat's logprobs.content[] (and
 * llama.cpp's completion_probabilities[], with ids). */
static void put_content_entry(gen_call_t *g, lp_json_buf_t *b, const Lmpipe__TokenEvent *t)
{
    size_t n;
    const char *s = tok_text(g->gw, t->id, &n);
    bool ids = g->kind == K_LLAMA;
    lp_json_buf_puts(b, "{");
    if (ids) lp_json_buf_printf(b, "\"id\":%d,", t->id);
    lp_json_buf_puts(b, "\"token\":");
    lp_json_buf_str(b, s, n);
    lp_json_buf_puts(b, ",\"logprob\":");
    lp_json_buf_num(b, t->logprob);
    lp_json_buf_puts(b, ",\"bytes\":");
    put_bytes(b, s, n);
    lp_json_buf_puts(b, ",\"top_logprobs\":[");
    for (size_t k = 0; k < t->n_top && (int)k < g->n_probs; k++) {
        const char *ts = tok_text(g->gw, t->top[k]->id, &n);
        lp_json_buf_printf(b, "%s{", k ? "," : "");
        if (ids) lp_json_buf_printf(b, "\"id\":%d,", t->top[k]->id);
        lp_json_buf_puts(b, "\"token\":");
        lp_json_buf_str(b, ts, n);
        lp_json_buf_puts(b, ",\"logprob\":");
        lp_json_buf_num(b, t->top[k]->logprob);
        lp_json_buf_puts(b, ",\"bytes\":");
        put_bytes(b, ts, n);
        lp_json_buf_puts(b, "}");
    }
    lp_json_buf_puts(b, "]}");
}

/* Completions' logprobs: four parallel lists. */
static void put_compl_lp(gen_call_t *g, choice_t *c, const Lmpipe__TokenEvent *t, size_t offset)
{
    size_t n;
    const char *s = tok_text(g->gw, t->id, &n);
    const char *sep = c->n_tokens ? "," : "";
    lp_json_buf_puts(&c->lp_tokens, sep);
    lp_json_buf_str(&c->lp_tokens, s, n);
    lp_json_buf_puts(&c->lp_values, sep);
    lp_json_buf_num(&c->lp_values, t->logprob);
    lp_json_buf_printf(&c->lp_offsets, "%s%zu", sep, offset);
    lp_json_buf_puts(&c->lp_tops, sep);
    lp_json_buf_puts(&c->lp_tops, "{");
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
        lp_json_buf_puts(&c->lp_tops, w++ ? "," : "");
        lp_json_buf_str(&c->lp_tops, ts, tn);
        lp_json_buf_puts(&c->lp_tops, ":");
        lp_json_buf_num(&c->lp_tops, t->top[k]->logprob);
    }
    lp_json_buf_puts(&c->lp_tops, "}");
}

static void chunk_begin(gen_call_t *g, lp_json_buf_t *b)
{
    lp_json_buf_puts(b, "data: {\"id\":");
    lp_json_buf_str(b, g->id, strlen(g->id));
    lp_json_buf_printf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":",
                 g->kind == K_CHAT ? "chat.completion.chunk" : "text_completion", g->created);
    lp_json_buf_str(b, g->gw->link.model, strlen(g->gw->link.model));
}

static void put_usage(gen_call_t *g, lp_json_buf_t *b)
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
    lp_json_buf_printf(b, "{\"prompt_tokens\":%llu,\"completion_tokens\":%llu,\"total_tokens\":%llu,"
                    "\"prompt_tokens_details\":{\"cached_tokens\":%llu}}",
                 (unsigned long long)p, (unsigned long long)gen, (unsigned long long)(p + gen),
                 (unsigned long long)cached);
}

static void put_timings(const choice_t *c, lp_json_buf_t *b)
{
    /* As llama-server: prompt_n counts the prompt tokens computed, cache_n
     * those taken from the prefix cache. */
    double pms = c->prompt_ms, gms = c->gen_ms;
    uint32_t cached = c->n_cached < c->n_prompt ? c->n_cached : c->n_prompt, n = c->n_prompt - cached;
    lp_json_buf_printf(b, "{\"cache_n\":%u,\"prompt_n\":%u,\"prompt_ms\":%.3f,\"prompt_per_token_ms\":%.3f,"
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
static void put_llama_final(gen_call_t *g, choice_t *c, lp_json_buf_t *b, bool streamed)
{
    lp_json_buf_puts(b, "{\"index\":0,\"content\":");
    if (streamed) lp_json_buf_puts(b, "\"\"");
    else lp_json_buf_str(b, c->text.p ? c->text.p : "", c->text.n);
    lp_json_buf_puts(b, ",\"tokens\":[");
    if (!streamed && c->ids.n) lp_json_buf_put(b, c->ids.p, c->ids.n);
    lp_json_buf_puts(b, "],\"id_slot\":-1,\"stop\":true,\"model\":");
    lp_json_buf_str(b, g->gw->link.model, strlen(g->gw->link.model));
    lp_json_buf_printf(b, ",\"tokens_predicted\":%u,\"tokens_evaluated\":%u,\"tokens_cached\":%u,\"truncated\":false,"
                    "\"stop_type\":\"%s\",\"stopping_word\":",
                 c->n_gen, c->n_prompt, c->n_cached, llama_stop_type(c));
    lp_json_buf_str(b, c->stop_word ? c->stop_word : "", c->stop_word ? strlen(c->stop_word) : 0);
    lp_json_buf_puts(b, ",\"timings\":");
    put_timings(c, b);
    if (!streamed && g->n_probs >= 0) {
        lp_json_buf_puts(b, ",\"completion_probabilities\":[");
        if (c->lp_content.n) lp_json_buf_put(b, c->lp_content.p, c->lp_content.n);
        lp_json_buf_puts(b, "]");
    }
    lp_json_buf_printf(b, ",\"strategy_version\":%llu}", (unsigned long long)g->version);
}

static void respond_whole(gen_call_t *g)
{
    lp_json_buf_t b = {0};
    if (g->kind == K_LLAMA) {
        put_llama_final(g, &g->ch[0], &b, false);
    } else {
        bool chat = g->kind == K_CHAT;
        lp_json_buf_puts(&b, "{\"id\":");
        lp_json_buf_str(&b, g->id, strlen(g->id));
        lp_json_buf_printf(&b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", chat ? "chat.completion" : "text_completion",
                     g->created);
        lp_json_buf_str(&b, g->gw->link.model, strlen(g->gw->link.model));
        lp_json_buf_puts(&b, ",\"choices\":[");
        for (int i = 0; i < g->n_choices; i++) {
            choice_t *c = &g->ch[i];
            lp_json_buf_printf(&b, "%s{\"index\":%d,", i ? "," : "", i);
            if (chat) {
                lp_json_buf_puts(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
                lp_json_buf_str(&b, c->text.p ? c->text.p : "", c->text.n);
                lp_json_buf_puts(&b, "},\"logprobs\":");
                if (g->n_probs >= 0) {
                    lp_json_buf_puts(&b, "{\"content\":[");
                    if (c->lp_content.n) lp_json_buf_put(&b, c->lp_content.p, c->lp_content.n);
                    lp_json_buf_puts(&b, "]}");
                } else
                    lp_json_buf_puts(&b, "null");
            } else {
                lp_json_buf_t t = {0};
                if (g->echo && c->prompt) lp_json_buf_put(&t, c->prompt, c->prompt_len);
                if (c->text.n) lp_json_buf_put(&t, c->text.p, c->text.n);
                lp_json_buf_puts(&b, "\"text\":");
                lp_json_buf_str(&b, t.p ? t.p : "", t.n);
                lp_json_buf_free(&t);
                lp_json_buf_puts(&b, ",\"logprobs\":");
                if (g->n_probs >= 0) {
                    lp_json_buf_puts(&b, "{\"tokens\":[");
                    if (c->lp_tokens.n) lp_json_buf_put(&b, c->lp_tokens.p, c->lp_tokens.n);
                    lp_json_buf_puts(&b, "],\"token_logprobs\":[");
                    if (c->lp_values.n) lp_json_buf_put(&b, c->lp_values.p, c->lp_values.n);
                    lp_json_buf_puts(&b, "],\"top_logprobs\":[");
                    if (c->lp_tops.n) lp_json_buf_put(&b, c->lp_tops.p, c->lp_tops.n);
                    lp_json_buf_puts(&b, "],\"text_offset\":[");
                    if (c->lp_offsets.n) lp_json_buf_put(&b, c->lp_offsets.p, c->lp_offsets.n);
                    lp_json_buf_puts(&b, "]}");
                } else
                    lp_json_buf_puts(&b, "null");
            }
            lp_json_buf_printf(&b, ",\"finish_reason\":\"%s\"}", reason_name(c->reason));
        }
        lp_json_buf_puts(&b, "],\"usage\":");
        put_usage(g, &b);
        lp_json_buf_printf(&b, ",\"strategy_version\":%llu}", (unsigned long long)g->version);
    }
    lp_json_buf_puts(&b, "\n");
    if (b.oom) {
        lp_json_buf_free(&b);
        fail(g, LP_EK_INTERNAL, NULL, "out of memory");
        return;
    }
    g->head_sent = true;
    lp_gw_conn_head(g->conn, 200, "application/json", (long long)b.n, NULL);
    lp_gw_conn_write(g->conn, b.p, b.n);
    lp_json_buf_free(&b);
    finish(g);
}

/* One streamed chunk for a token (piece) or the end of a choice (reason). */
static void stream_chunk(gen_call_t *g, choice_t *c, const Lmpipe__TokenEvent *t, const char *piece,
                         size_t len, const char *reason)
{
    int idx = (int)(c - g->ch);
    lp_json_buf_t b = {0};
    if (g->kind == K_LLAMA) {
        lp_json_buf_puts(&b, "data: {\"index\":0,\"content\":");
        lp_json_buf_str(&b, piece, len);
        lp_json_buf_puts(&b, ",\"tokens\":[");
        if (t) lp_json_buf_printf(&b, "%d", t->id);
        lp_json_buf_printf(&b, "],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%u", c->n_tokens + (t ? 1 : 0));
        if (t && g->n_probs >= 0) {
            lp_json_buf_puts(&b, ",\"completion_probabilities\":[");
            put_content_entry(g, &b, t);
            lp_json_buf_puts(&b, "]");
        }
        lp_json_buf_printf(&b, ",\"strategy_version\":%llu}\n\n", (unsigned long long)g->version);
    } else {
        chunk_begin(g, &b);
        lp_json_buf_printf(&b, ",\"choices\":[{\"index\":%d,", idx);
        if (g->kind == K_CHAT) {
            lp_json_buf_puts(&b, "\"delta\":{");
            if (!c->sent_role) {
                lp_json_buf_puts(&b, "\"role\":\"assistant\"");
                c->sent_role = true;
                if (!reason) lp_json_buf_puts(&b, ",");
            }
            if (!reason) {
                lp_json_buf_puts(&b, "\"content\":");
                lp_json_buf_str(&b, piece, len);
            }
            lp_json_buf_puts(&b, "},\"logprobs\":");
            if (t && g->n_probs >= 0) {
                lp_json_buf_puts(&b, "{\"content\":[");
                put_content_entry(g, &b, t);
                lp_json_buf_puts(&b, "]}");
            } else
                lp_json_buf_puts(&b, "null");
        } else {
            lp_json_buf_puts(&b, "\"text\":");
            lp_json_buf_str(&b, piece, len);
            lp_json_buf_puts(&b, ",\"logprobs\":");
            if (t && g->n_probs >= 0) {
                lp_json_buf_t tmp = {0};
                choice_t one = {0};
                put_compl_lp(g, &one, t, c->text_off);
                lp_json_buf_puts(&b, "{\"tokens\":[");
                lp_json_buf_put(&b, one.lp_tokens.p, one.lp_tokens.n);
                lp_json_buf_puts(&b, "],\"token_logprobs\":[");
                lp_json_buf_put(&b, one.lp_values.p, one.lp_values.n);
                lp_json_buf_puts(&b, "],\"top_logprobs\":[");
                lp_json_buf_put(&b, one.lp_tops.p, one.lp_tops.n);
                lp_json_buf_puts(&b, "],\"text_offset\":[");
                lp_json_buf_put(&b, one.lp_offsets.p, one.lp_offsets.n);
                lp_json_buf_puts(&b, "]}");
                lp_json_buf_free(&one.lp_tokens);
                lp_json_buf_free(&one.lp_values);
                lp_json_buf_free(&one.lp_tops);
                lp_json_buf_free(&one.lp_offsets);
                lp_json_buf_free(&tmp);
            } else
                lp_json_buf_puts(&b, "null");
        }
        lp_json_buf_puts(&b, ",\"finish_reason\":");
        if (reason) lp_json_buf_printf(&b, "\"%s\"", reason);
        else lp_json_buf_puts(&b, "null");
        lp_json_buf_printf(&b, "}],\"strategy_version\":%llu}\n\n", (unsigned long long)g->version);
    }
    lp_gw_conn_chunk(g->conn, b.p, b.n);
    lp_json_buf_free(&b);
}

static void stream_end(gen_call_t *g)
{
    lp_json_buf_t b = {0};
    if (g->kind == K_LLAMA) {
        lp_json_buf_puts(&b, "data: ");
        put_llama_final(g, &g->ch[0], &b, true);
        lp_json_buf_puts(&b, "\n\n");
    } else {
        if (g->include_usage) {
            chunk_begin(g, &b);
            lp_json_buf_puts(&b, ",\"choices\":[],\"usage\":");
            put_usage(g, &b);
            lp_json_buf_printf(&b, ",\"strategy_version\":%llu}\n\n", (unsigned long long)g->version);
        }
        lp_json_buf_puts(&b, "data: [DONE]\n\n");
    }
    lp_gw_conn_chunk(g->conn, b.p, b.n);
    lp_json_buf_free(&b);
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
                if (c->n_tokens) lp_json_buf_puts(&c->lp_content, ",");
                put_content_entry(g, &c->lp_content, t);
            }
        }
        lp_json_buf_put(&c->text, piece ? piece : "", len);
        if (g->kind == K_LLAMA) lp_json_buf_printf(&c->ids, "%s%d", c->n_tokens ? "," : "", t->id);
    }
    c->text_off += len;
    c->n_tokens++;
}

static void on_final(gen_call_t *g, choice_t *c, const Lmpipe__FinalEvent *f)
{
    c->done = true;
    g->n_done++;
    lp_link_forget(&g->gw->link, &c->op);
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
        /* The coordinator's kind: a prompt longer than the context, a bad
         * template, a deadline; the pipeline's reason (stopping, a stage
         * lost) is unavailable: try again later. */
        fail(g, lp_frame_final_kind(f), f->error_param, msg);
        return;
    }
    const char *tail = (const char *)f->tail.data;
    if (g->stream) {
        head(g);
        stream_echo(g, c);
        if (f->tail.len) stream_chunk(g, c, NULL, tail, f->tail.len, NULL);
        if (g->kind != K_LLAMA) stream_chunk(g, c, NULL, "", 0, reason_name(f->reason));
    } else
        lp_json_buf_put(&c->text, tail ? tail : "", f->tail.len);
    if (g->n_done < g->n_choices) return;
    if (g->stream) stream_end(g);
    else respond_whole(g);
}

static void on_msg(lp_link_op_t *op, const Lmpipe__Msg *m)
{
    choice_t *c = op->arg;
    gen_call_t *g = c->call;
    switch (m->body_case) {
    case LMPIPE__MSG__BODY_TOKEN: on_token(g, c, m->token); break;
    case LMPIPE__MSG__BODY_FINAL: on_final(g, c, m->final); break;
    case LMPIPE__MSG__BODY_ERROR:
        c->done = true;
        lp_link_forget(&g->gw->link, &c->op);
        fail(g, lp_frame_error_kind(m->error), m->error->param, m->error->message);
        break;
    default: break;
    }
}

/* ---- requests ---- */

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
static void send_all(gen_call_t *g, Lmpipe__GenerateRequest *reqs)
{
    lp_gw_conn_set_call(g->conn, &g->base);
    for (int i = 0; i < g->n_choices; i++) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        m.body_case = LMPIPE__MSG__BODY_GENERATE;
        m.generate = &reqs[i];
        if (lp_link_send(&g->gw->link, &m, &g->ch[i].op) != 0) {
            fail(g, LP_EK_UNAVAILABLE, NULL, "cannot send to the coordinator");
            return;
        }
    }
}

void lp_gw_generate(lp_gw_conn_t *conn, const lp_gw_req_t *r, const lp_json_t *root, enum lp_rs_endpoint ep)
{
    lp_gw_t *gw = lp_gw_conn_gw(conn);
    lp_request_t rq;
    lp_gen_batch_t batch = {0};
    /* every field through the request schema: honored, or refused by name */
    if (lp_request_read(root, ep, LP_RS_HTTP, &rq) != 0) {
        gw->n_bad_requests++;
        lp_gw_error_kind(conn, LP_EK_INVALID_REQUEST, rq.param[0] ? rq.param : NULL, "%s", lp_error_msg());
        goto out;
    }
    if (rq.model && strcmp(rq.model, gw->link.model)) {
        lp_gw_error(conn, 404, "invalid_request_error", "model", "model_not_found",
                    "the model '%s' does not exist; this server has '%s'", rq.model, gw->link.model);
        goto out;
    }
    if (rq.n_probs >= 0 && !gw->link.vocab) {
        const char *f = ep == LP_RS_COMPLETION ? "n_probs" : "logprobs";
        if (gw->link.vocab_failed)
            lp_gw_error(conn, 400, "invalid_request_error", f, NULL,
                        "%s: logprobs are not available: the coordinator does not serve the vocabulary", f);
        else
            lp_gw_error(conn, 503, "server_error", f, NULL, "%s: the vocabulary is still loading", f);
        goto out;
    }
    char tenant[96];
    lp_gw_tenant(conn, r, tenant, sizeof(tenant));
    if (lp_gen_batch_build(&rq, tenant, &batch) != 0) {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "%s", lp_error_msg());
        goto out;
    }
    int kind = ep == LP_RS_CHAT ? K_CHAT : ep == LP_RS_COMPLETIONS ? K_COMPL : K_LLAMA;
    gen_call_t *g = call_new(conn, kind, (int)batch.n_reqs);
    if (!g) {
        lp_gw_error(conn, 500, "server_error", NULL, NULL, "out of memory");
        goto out;
    }
    g->stream = rq.stream;
    g->include_usage = rq.include_usage;
    g->echo = rq.echo;
    g->n_probs = rq.n_probs;
    for (size_t i = 0; i < batch.n_reqs; i++) {
        int pi = batch.prompt_idx[i];
        g->ch[i].prompt_idx = pi;
        if (rq.echo && rq.prompts && rq.prompts[pi].text && (g->ch[i].prompt = malloc(rq.prompts[pi].len + 1))) {
            memcpy(g->ch[i].prompt, rq.prompts[pi].text, rq.prompts[pi].len);
            g->ch[i].prompt_len = rq.prompts[pi].len;
        }
    }
    send_all(g, batch.reqs);
out:
    lp_gen_batch_clear(&batch);
    lp_request_clear(&rq);
}
