/* read-harmony.c - gpt-oss's harmony messages, the whole output:
 *   <|channel|>analysis<|message|>...<|end|>                      reasoning
 *   <|start|>assistant<|channel|>final<|message|>...<|return|>    content
 *   <|start|>assistant to=functions.f<|channel|>commentary json<|message|>{...}<|call|>
 *   <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
 * (the generation prompt ends with "<|start|>assistant", so the output opens
 * with a header).  A commentary message with no recipient is content, as is
 * text outside any message. */
#include "parse-internal.h"

#include <string.h>

#define MAX_HEADER 1024

enum { H_MSG, H_HEAD, H_REASON, H_CONTENT, H_CALL, H_PLAIN };

/* the word after `key` in the header [a, b), or an empty one */
static void header_word(const P *p, size_t a, size_t b, const char *key, size_t *wa, size_t *wb)
{
    size_t kn = strlen(key);
    *wa = *wb = 0;
    for (size_t i = a; i + kn <= b; i++) {
        if (memcmp(p->buf + i, key, kn)) continue;
        size_t k = i + kn;
        while (k < b && p->buf[k] != ' ' && p->buf[k] != '\n' && p->buf[k] != '<') k++;
        *wa = i + kn;
        *wb = k;
        return;
    }
}

static bool word_is(const P *p, size_t a, size_t b, const char *w)
{
    return b - a == strlen(w) && !memcmp(p->buf + a, w, b - a);
}

static int read_harmony(P *p)
{
    lp__rdstate_t *rs = &p->rs;
    for (;;) {
        switch (rs->st) {
        case H_MSG: {
            size_t q = lp__skip_ws(p, rs->q);
            if (q == p->len) return lp__rd_more(p);
            int r1 = lp__at(p, q, "<|start|>"), r2 = lp__at(p, q, "<|channel|>"), r3 = lp__at(p, q, "to=");
            if (r1 == 0 || r2 == 0 || r3 == 0) return lp__rd_more(p);
            if (r1 == 1) q += 9;
            rs->q = q;
            if (r1 == 1 || r2 == 1 || r3 == 1) {
                rs->a = q;
                rs->st = H_HEAD;
            } else
                rs->st = H_PLAIN;
            break;
        }
        case H_HEAD: {
            const char *m = "<|message|>";
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->a, &m, 1, &at, &safe);
            if ((j < 0 ? safe : at) - rs->a > MAX_HEADER) {
                rs->st = H_PLAIN;
                break;
            }
            if (j < 0) return lp__rd_more(p);
            size_t ca, cb, ra, rb;
            header_word(p, rs->a, at, "<|channel|>", &ca, &cb);
            header_word(p, rs->a, at, "to=", &ra, &rb);
            rs->q = at + 11;
            if (rb - ra > 10 && !memcmp(p->buf + ra, "functions.", 10)) {
                rs->call = lp__call_begin(p, p->buf + ra + 10, rb - ra - 10);
                if (rs->call < 0) return LP__R_FAIL;
                rs->st = H_CALL;
            } else if (word_is(p, ca, cb, "analysis")) {
                if (p->rf == LP_CHAT_REASONING_NONE)
                    lp__sink_put(p, &p->content, "<|channel|>analysis<|message|>", 30);
                rs->st = H_REASON;
            } else
                rs->st = H_CONTENT;
            p->pos = rs->q;
            break;
        }
        case H_REASON:
        case H_CONTENT:
        case H_CALL: {
            static const char *const m[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->q, m, 4, &at, &safe);
            size_t end = j < 0 ? safe : at;
            if (end > rs->q) {
                const char *t = p->buf + rs->q;
                if (rs->st == H_CALL) lp__call_args(p, rs->call, t, end - rs->q);
                else lp__sink_put(p, rs->st == H_REASON ? p->rsink : &p->content, t, end - rs->q);
            }
            p->pos = rs->q = end;
            if (j < 0) return lp__rd_more(p);
            if (j < 3) rs->q = at + strlen(m[j]);
            if (rs->st == H_CALL) {
                lp__call_end(p, rs->call, true);
                rs->call = -1;
            } else if (rs->st == H_REASON) {
                if (p->rf == LP_CHAT_REASONING_NONE) {
                    if (j < 3) lp__sink_put(p, &p->content, m[j], strlen(m[j]));
                } else {
                    lp__sink_end(p, &p->reasoning);
                    lp__sink_end(p, &p->content);
                }
            }
            p->pos = rs->q;
            rs->st = H_MSG;
            break;
        }
        case H_PLAIN: {
            static const char *const m[] = {"<|start|>", "<|channel|>"};
            size_t at = 0, safe = 0;
            int j = lp__find(p, rs->q, m, 2, &at, &safe);
            size_t end = j < 0 ? safe : at;
            if (end > rs->q) lp__sink_put(p, &p->content, p->buf + rs->q, end - rs->q);
            p->pos = rs->q = end;
            if (j < 0) return lp__rd_more(p);
            rs->st = H_MSG;
            break;
        }
        default: return LP__R_FAIL;
        }
    }
}

const lp__fmt_ops_t lp__ops_harmony = {NULL, 0, read_harmony, true};
