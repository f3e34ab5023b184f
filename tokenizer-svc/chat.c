/* chat.c - recognise tokenizer.chat_template and format messages with it,
 * following llama.cpp's llm_chat_detect_template / llm_chat_apply_template
 * (heuristic markers, not a Jinja interpreter). */
#include "chat.h"
#include "tok-internal.h"

#include "error.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    enum lp_chat_template t;
} names[] = {
    {"chatml", LP_CHAT_CHATML},
    {"llama2", LP_CHAT_LLAMA2},
    {"llama2-sys", LP_CHAT_LLAMA2_SYS},
    {"llama2-sys-bos", LP_CHAT_LLAMA2_SYS_BOS},
    {"llama2-sys-strip", LP_CHAT_LLAMA2_SYS_STRIP},
    {"llama3", LP_CHAT_LLAMA3},
    {"zephyr", LP_CHAT_ZEPHYR},
    {"phi3", LP_CHAT_PHI3},
    {"mistral-v1", LP_CHAT_MISTRAL_V1},
    {"mistral-v3", LP_CHAT_MISTRAL_V3},
    {"mistral-v3-tekken", LP_CHAT_MISTRAL_V3_TEKKEN},
    {"mistral-v7", LP_CHAT_MISTRAL_V7},
};

const char *lp_chat_template_name(enum lp_chat_template t)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].t == t) return names[i].name;
    return "unknown";
}

static bool has(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

int lp_chat_template_detect(const char *tmpl, size_t len, enum lp_chat_template *out)
{
    *out = LP_CHAT_UNKNOWN;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == len && !memcmp(names[i].name, tmpl, len)) {
            *out = names[i].t;
            return 0;
        }
    }
    if (has(tmpl, len, "<|im_start|>")) {
        *out = LP_CHAT_CHATML;
    } else if ((len >= 7 && !memcmp(tmpl, "mistral", 7)) || has(tmpl, len, "[INST]")) {
        if (has(tmpl, len, "[SYSTEM_PROMPT]")) {
            *out = LP_CHAT_MISTRAL_V7;
        } else if (has(tmpl, len, "' [INST] ' + system_message") || has(tmpl, len, "[AVAILABLE_TOOLS]")) {
            if (has(tmpl, len, " [INST]")) *out = LP_CHAT_MISTRAL_V1;
            else if (has(tmpl, len, "\"[INST]\"")) *out = LP_CHAT_MISTRAL_V3_TEKKEN;
            else *out = LP_CHAT_MISTRAL_V3;
        } else if (has(tmpl, len, "content.strip()")) {
            *out = LP_CHAT_LLAMA2_SYS_STRIP;
        } else if (has(tmpl, len, "bos_token + '[INST]")) {
            *out = LP_CHAT_LLAMA2_SYS_BOS;
        } else if (has(tmpl, len, "<<SYS>>")) {
            *out = LP_CHAT_LLAMA2_SYS;
        } else {
            *out = LP_CHAT_LLAMA2;
        }
    } else if (has(tmpl, len, "<|assistant|>") && has(tmpl, len, "<|end|>")) {
        *out = LP_CHAT_PHI3;
    } else if (has(tmpl, len, "<|user|>") && has(tmpl, len, "<|endoftext|>")) {
        *out = LP_CHAT_ZEPHYR;
    } else if (has(tmpl, len, "<|start_header_id|>") && has(tmpl, len, "<|end_header_id|>")) {
        *out = LP_CHAT_LLAMA3;
    }
    if (*out == LP_CHAT_UNKNOWN) {
        /* quote the start of the template, on one line */
        char q[81];
        size_t k = 0;
        for (size_t i = 0; i < len && k < 80; i++)
            q[k++] = (tmpl[i] == '\n' || tmpl[i] == '\r') ? ' ' : tmpl[i];
        q[k] = 0;
        return lp_error_set(LP_ERR(ENOTSUP),
                            "chat template not recognised (supported: chatml, llama2, llama3, zephyr, "
                            "phi3, mistral): \"%s%s\"",
                            q, len > 80 ? "..." : "");
    }
    return 0;
}

static int put(lp__buf_t *b, const char *s)
{
    return lp__buf_put(b, s, strlen(s));
}

static int put_trim(lp__buf_t *b, const char *s)
{
    size_t n = strlen(s), a = 0;
    while (a < n && isspace((unsigned char)s[a])) a++;
    while (n > a && isspace((unsigned char)s[n - 1])) n--;
    return lp__buf_put(b, s + a, n - a);
}

int lp_chat_apply(enum lp_chat_template t, const lp_chat_msg_t *msgs, size_t n,
                  bool add_assistant, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    lp__buf_t b = {0};
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return lp_error_set(LP_ERR(EINVAL), "chat message %zu: missing role or content", i);

    switch (t) {
    case LP_CHAT_CHATML:
        for (size_t i = 0; i < n && !rc; i++) {
            rc = put(&b, "<|im_start|>");
            if (!rc) rc = put(&b, msgs[i].role);
            if (!rc) rc = put(&b, "\n");
            if (!rc) rc = put(&b, msgs[i].content);
            if (!rc) rc = put(&b, "<|im_end|>\n");
        }
        if (!rc && add_assistant) rc = put(&b, "<|im_start|>assistant\n");
        break;
    case LP_CHAT_LLAMA2: case LP_CHAT_LLAMA2_SYS: case LP_CHAT_LLAMA2_SYS_BOS:
    case LP_CHAT_LLAMA2_SYS_STRIP: {
        bool sys = t != LP_CHAT_LLAMA2;
        bool bos_inside = t == LP_CHAT_LLAMA2_SYS_BOS;
        bool strip = t == LP_CHAT_LLAMA2_SYS_STRIP;
        bool inside = true;
        rc = put(&b, "[INST] ");
        for (size_t i = 0; i < n && !rc; i++) {
            const char *role = msgs[i].role;
            if (!inside) {
                inside = true;
                rc = put(&b, bos_inside ? "<s>[INST] " : "[INST] ");
            }
            if (!strcmp(role, "system")) {
                if (!rc && sys) rc = put(&b, "<<SYS>>\n");
                if (!rc) rc = strip ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, sys ? "\n<</SYS>>\n\n" : "\n");
            } else if (!strcmp(role, "user")) {
                if (!rc) rc = strip ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, " [/INST]");
            } else {
                if (!rc) rc = strip ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "</s>");
                inside = false;
            }
        }
        break;
    }
    case LP_CHAT_LLAMA3:
        for (size_t i = 0; i < n && !rc; i++) {
            rc = put(&b, "<|start_header_id|>");
            if (!rc) rc = put(&b, msgs[i].role);
            if (!rc) rc = put(&b, "<|end_header_id|>\n\n");
            if (!rc) rc = put_trim(&b, msgs[i].content);
            if (!rc) rc = put(&b, "<|eot_id|>");
        }
        if (!rc && add_assistant) rc = put(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case LP_CHAT_ZEPHYR: case LP_CHAT_PHI3:
        for (size_t i = 0; i < n && !rc; i++) {
            rc = put(&b, "<|");
            if (!rc) rc = put(&b, msgs[i].role);
            if (!rc) rc = put(&b, "|>\n");
            if (!rc) rc = put(&b, msgs[i].content);
            if (!rc) rc = put(&b, t == LP_CHAT_ZEPHYR ? "<|endoftext|>\n" : "<|end|>\n");
        }
        if (!rc && add_assistant) rc = put(&b, "<|assistant|>\n");
        break;
    case LP_CHAT_MISTRAL_V1: case LP_CHAT_MISTRAL_V3: case LP_CHAT_MISTRAL_V3_TEKKEN: {
        const char *lead = t == LP_CHAT_MISTRAL_V1 ? " " : "";
        const char *trail = t == LP_CHAT_MISTRAL_V3_TEKKEN ? "" : " ";
        bool trim_asst = t == LP_CHAT_MISTRAL_V3;
        bool inside = false;
        for (size_t i = 0; i < n && !rc; i++) {
            if (!inside) {
                rc = put(&b, lead);
                if (!rc) rc = put(&b, "[INST]");
                if (!rc) rc = put(&b, trail);
                inside = true;
            }
            if (rc) break;
            if (!strcmp(msgs[i].role, "system")) {
                rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "\n\n");
            } else if (!strcmp(msgs[i].role, "user")) {
                rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, lead);
                if (!rc) rc = put(&b, "[/INST]");
            } else {
                rc = put(&b, trail);
                if (!rc) rc = trim_asst ? put_trim(&b, msgs[i].content) : put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "</s>");
                inside = false;
            }
        }
        break;
    }
    case LP_CHAT_MISTRAL_V7:
        for (size_t i = 0; i < n && !rc; i++) {
            if (!strcmp(msgs[i].role, "system")) {
                rc = put(&b, "[SYSTEM_PROMPT] ");
                if (!rc) rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "[/SYSTEM_PROMPT]");
            } else if (!strcmp(msgs[i].role, "user")) {
                rc = put(&b, "[INST] ");
                if (!rc) rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "[/INST]");
            } else {
                rc = put(&b, " ");
                if (!rc) rc = put(&b, msgs[i].content);
                if (!rc) rc = put(&b, "</s>");
            }
        }
        break;
    case LP_CHAT_UNKNOWN:
    default:
        return lp_error_set(LP_ERR(EINVAL), "chat template: none recognised");
    }
    if (!rc && !b.v) rc = lp__buf_put(&b, "", 0);
    if (rc) {
        free(b.v);
        return rc;
    }
    *text = b.v;
    *len = b.n;
    return 0;
}

int lp_tokenizer_chat_apply(const lp_tokenizer_t *tok, const char *tmpl, const lp_chat_msg_t *msgs,
                            size_t n, bool add_assistant, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    size_t tl;
    if (!tmpl) {
        int rc = lp_tokenizer_chat_template(tok, &tmpl, &tl);
        if (rc) return rc;
    } else {
        tl = strlen(tmpl);
    }
    enum lp_chat_template t;
    int rc = lp_chat_template_detect(tmpl, tl, &t);
    if (rc) return rc;
    return lp_chat_apply(t, msgs, n, add_assistant, text, len);
}
