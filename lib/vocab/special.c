/* special.c - split input text at special-token text, as llama.cpp's
 * tokenizer_st_partition does: special tokens are taken longest text first;
 * each claims its leftmost non-overlapping occurrences in the text that no
 * earlier token claimed.  Control and unknown tokens take part only when
 * parse_special is on; user-defined tokens always do.  LSTRIP/RSTRIP tokens
 * also swallow the whitespace beside them. */
#include "tok-internal.h"

#include "error.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int lp__special_split(const lp_tokenizer_t *t, const char *text, size_t len, bool parse_special,
                      lp__frag_t **frags, size_t *n_frags)
{
    *frags = NULL;
    *n_frags = 0;
    if (len == 0) return 0;

    /* Bigrams present in the text, to skip tokens that cannot occur. */
    uint8_t *claimed = NULL;  /* (len) 1 = taken by a token or stripped */
    int32_t *tok_at = NULL;   /* (len) token starting here, or -1 */
    uint64_t present[1024] = {0};
    bool have_present = false;
    int rc = 0;
    size_t n_found = 0;

    for (size_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        uint16_t a = t->attr[id];
        if (!parse_special && (a & (LP__ATTR_CONTROL | LP__ATTR_UNKNOWN))) continue;
        size_t sl;
        const char *s = lp__strtab_str(&t->strs, t->tok_sid[id], &sl);
        if (sl == 0 || sl > len) continue;
        if (sl >= 2) {
            if (!have_present) {
                for (size_t i = 0; i + 1 < len; i++) {
                    unsigned bg = (uint8_t)text[i] << 8 | (uint8_t)text[i + 1];
                    present[bg >> 6] |= 1ull << (bg & 63);
                }
                have_present = true;
            }
            unsigned bg = (uint8_t)s[0] << 8 | (uint8_t)s[1];
            if (!(present[bg >> 6] & (1ull << (bg & 63)))) continue;
        }
        size_t pos = 0;
        while (pos + sl <= len) {
            const char *hit = memmem(text + pos, len - pos, s, sl);
            if (!hit) break;
            size_t h = (size_t)(hit - text);
            bool ok = true;
            if (claimed)
                for (size_t i = 0; i < sl; i++)
                    if (claimed[h + i]) {
                        ok = false;
                        break;
                    }
            if (!ok) {
                pos = h + 1;
                continue;
            }
            if (!claimed) {
                claimed = calloc(len, 1);
                tok_at = malloc(len * sizeof(*tok_at));
                if (!claimed || !tok_at) {
                    rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
                    goto out;
                }
                memset(tok_at, 0xff, len * sizeof(*tok_at));
            }
            memset(claimed + h, 1, sl);
            tok_at[h] = id;
            n_found++;
            if (a & LP__ATTR_LSTRIP)
                for (size_t i = h; i > 0 && !claimed[i - 1] && isspace((uint8_t)text[i - 1]); i--)
                    claimed[i - 1] = 1;
            size_t end = h + sl;
            if (a & LP__ATTR_RSTRIP)
                while (end < len && !claimed[end] && isspace((uint8_t)text[end])) claimed[end++] = 1;
            pos = end;
        }
    }

    if (!claimed) {
        *frags = malloc(sizeof(**frags));
        if (!*frags) return lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        (*frags)[0] = (lp__frag_t){0, len, -1};
        *n_frags = 1;
        return 0;
    }
    /* at most one text run before each token, plus one at the end */
    lp__frag_t *f = malloc((2 * n_found + 1) * sizeof(*f));
    if (!f) {
        rc = lp_error_set(LP_ERR(ENOMEM), "tokenizer: out of memory");
        goto out;
    }
    size_t nf = 0, i = 0;
    while (i < len) {
        if (tok_at[i] >= 0) {
            size_t sl = t->strs.len[t->tok_sid[tok_at[i]]];
            f[nf++] = (lp__frag_t){i, sl, tok_at[i]};
            i += sl;
        } else if (claimed[i]) {
            i++;
        } else {
            size_t j = i;
            while (j < len && !claimed[j]) j++;
            f[nf++] = (lp__frag_t){i, j - i, -1};
            i = j;
        }
    }
    *frags = f;
    *n_frags = nf;
out:
    free(claimed);
    free(tok_at);
    return rc;
}
