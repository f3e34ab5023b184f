/* request.c - lmpipe-nats: a request body (docs/NATS.md's schema 1: the
 * llama.cpp /completion, OpenAI completions and OpenAI chat shapes) read
 * through the request schema (lib/request-schema.h), and the subjects
 * around a request. */
#include "request.h"

#include "bridge.h"

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

int lp__nb_read_request(const lp_json_t *root, lp_request_t *rq)
{
    enum lp_rs_endpoint ep = root && root->type == LP_JSON_OBJECT ? lp_request_nats_endpoint(root) : LP_RS_COMPLETION;
    return lp_request_read(root, ep, LP_RS_NATS, rq);
}
