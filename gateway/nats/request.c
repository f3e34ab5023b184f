/* request.c - lmpipe-nats: a request body (docs/NATS.md's schema 1: the
 * llama.cpp /completion, OpenAI completions and OpenAI chat shapes) as a
 * GenerateRequest, and the subjects around a request. */
#include "request.h"

#include "bridge.h"
#include "chat-request.h"
#include "gw.h"

#include <stdlib.h>
#include <string.h>

uint64_t lp__nb_ack_sseq(const char *ack_subj)
{
    const char *tok[16];
    int n = 0;
    for (const char *p = ack_subj; p && n < 16; p = strchr(p, '.'), p = p ? p + 1 : NULL) tok[n++] = p;
    if (n < 9 || strncmp(ack_subj, "$JS.ACK.", 8)) return 0;
    return strtoull(tok[n == 9 ? 5 : 7], NULL, 10);
}

bool lp__nb_reply_ok(const char *s)
{
    if (!s[0] || s[0] == '$' || s[0] == '.' || !strncmp(s, "_lmpipe.", 8) || strlen(s) > 255) return false;
    for (const char *p = s; *p; p++)
        if (*p == '*' || *p == '>' || (unsigned char)*p <= ' ' || *p == 127 || (*p == '.' && (p[1] == '.' || !p[1])))
            return false;
    return true;
}

bool lp__nb_subject_match(const char *pattern, const char *subj)
{
    const char *p = pattern, *s = subj;
    for (;;) {
        size_t pl = strcspn(p, "."), sl = strcspn(s, ".");
        if (pl == 1 && p[0] == '>' && !p[1]) return sl > 0 || s[0] == '.';
        if (!(pl == 1 && p[0] == '*') && (pl != sl || memcmp(p, s, pl))) return false;
        if (!p[pl] || !s[sl]) return !p[pl] && !s[sl];
        p += pl + 1;
        s += sl + 1;
    }
}

static const char *const own_fields[] = {
    "v", "id", "reply_to", "model", "prompt", "messages", "max_tokens", "max_completion_tokens", "n", "stream",
    "stream_options", "logprobs", "top_logprobs", "user", "chat_template", "echo", "stop", NULL,
};

static bool is_own(const lp_json_t *it, bool chat)
{
    for (int i = 0; own_fields[i]; i++)
        if (strlen(own_fields[i]) == it->key_len && !memcmp(own_fields[i], it->key, it->key_len)) return true;
    for (int i = 0; chat && lp_chat_request_fields[i]; i++)
        if (!strcmp(lp_chat_request_fields[i], it->key)) return true;
    return false;
}

int lp__nb_read_request(const lp_json_t *root, Lmpipe__GenerateRequest *q, char **params, int32_t **ids,
                        ProtobufCBinaryData **stops, char **chat_json, char *why, size_t cap)
{
    const lp_json_t *v;
    int64_t x;
    if (root->type != LP_JSON_OBJECT)
        return snprintf(why, cap, "body: must be a JSON object, got %s", lp_json_type_name(root->type)), -1;
    if ((v = lp_json_get(root, "v")) && (lp_json_int(v, 0, INT32_MAX, &x) || x != LP_NB_SCHEMA))
        return snprintf(why, cap, "v: unknown schema version (this bridge reads %d)", LP_NB_SCHEMA), -1;
    if ((v = lp_json_get(root, "n")) && v->type != LP_JSON_NULL && (lp_json_int(v, 1, 1, &x)))
        return snprintf(why, cap, "n: only 1 choice per request"), -1;
    const char *mt = lp_json_get(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((v = lp_json_get(root, mt)) && v->type != LP_JSON_NULL) {
        if (lp_json_int(v, 1, 1 << 30, &x)) return snprintf(why, cap, "%s: must be an integer >= 1", mt), -1;
        q->n_predict = (int32_t)x;
    }
    int n_probs = -1;
    if ((v = lp_json_get(root, "logprobs")) && v->type != LP_JSON_NULL) {
        if (v->type == LP_JSON_BOOL) n_probs = v->u.b ? 1 : -1;
        else if (!lp_json_int(v, 0, 20, &x)) n_probs = x > 0 ? (int)x : 1;
        else return snprintf(why, cap, "logprobs: must be true, false or an integer in [0, 20]"), -1;
    }
    if ((v = lp_json_get(root, "stop")) && v->type != LP_JSON_NULL) {
        size_t n = v->type == LP_JSON_STRING ? 1 : v->type == LP_JSON_ARRAY ? v->n : 0;
        if (v->type != LP_JSON_STRING && v->type != LP_JSON_ARRAY)
            return snprintf(why, cap, "stop: must be a string or a list of strings"), -1;
        if (n > 16) return snprintf(why, cap, "stop: at most 16 stop strings, got %zu", n), -1;
        if (n && !(*stops = calloc(n, sizeof(**stops)))) return snprintf(why, cap, "out of memory"), -1;
        for (size_t i = 0; i < n; i++) {
            const lp_json_t *s = v->type == LP_JSON_STRING ? v : &v->u.items[i];
            if (s->type != LP_JSON_STRING || !s->n) return snprintf(why, cap, "stop[%zu]: must be a non-empty string", i), -1;
            (*stops)[i].data = (uint8_t *)s->u.str;
            (*stops)[i].len = s->n;
        }
        q->stop = *stops;
        q->n_stop = n;
    }
    bool chat = lp_json_get(root, "messages") != NULL;
    if (chat) {
        if (lp_json_get(root, "prompt")) return snprintf(why, cap, "prompt: give messages or prompt, not both"), -1;
        const char *param;
        if (lp_chat_request_json(root, chat_json, NULL, &param, why, cap)) return -1;
        q->chat_json = *chat_json;
        if ((v = lp_json_get(root, "chat_template")) && v->type != LP_JSON_NULL) {
            if (v->type != LP_JSON_STRING) return snprintf(why, cap, "chat_template: must be a string"), -1;
            q->chat_template = (char *)v->u.str;
        }
    } else {
        v = lp_json_get(root, "prompt");
        if (!v) return snprintf(why, cap, "prompt: missing (or give messages)"), -1;
        if (v->type == LP_JSON_STRING) {
            q->prompt.data = (uint8_t *)v->u.str;
            q->prompt.len = v->n;
        } else if (v->type == LP_JSON_ARRAY && v->n) {
            if (!(*ids = malloc(v->n * sizeof(int32_t)))) return snprintf(why, cap, "out of memory"), -1;
            for (size_t i = 0; i < v->n; i++) {
                if (lp_json_int(&v->u.items[i], 0, INT32_MAX, &x))
                    return snprintf(why, cap, "prompt[%zu]: not a token id", i), -1;
                (*ids)[i] = (int32_t)x;
            }
            q->prompt_ids = *ids;
            q->n_prompt_ids = v->n;
        } else
            return snprintf(why, cap, "prompt: must be a string or a non-empty list of token ids"), -1;
    }
    /* Every other member goes to the coordinator as llama.cpp /completion fields. */
    lp_sb_t b = {0};
    lp_sb_puts(&b, "{");
    for (size_t i = 0; i < root->n; i++) {
        const lp_json_t *it = &root->u.items[i];
        if (is_own(it, chat)) continue;
        if (b.len > 1) lp_sb_puts(&b, ",");
        lp_sb_json_str(&b, it->key, it->key_len);
        lp_sb_puts(&b, ":");
        lp_sb_json_value(&b, it);
    }
    if (n_probs > 0 && !lp_json_get(root, "n_probs")) lp_sb_printf(&b, "%s\"n_probs\":%d", b.len > 1 ? "," : "", n_probs);
    lp_sb_puts(&b, "}");
    if (b.oom) {
        lp_sb_free(&b);
        return snprintf(why, cap, "out of memory"), -1;
    }
    *params = b.p;
    q->params_json = b.p;
    return 0;
}
