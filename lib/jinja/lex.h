/* lex.h - template text to tokens, as jinja2's lexer with trim_blocks and
 * lstrip_blocks on and keep_trailing_newline off (transformers' settings). */
#ifndef LP_JINJA_LEX_H
#define LP_JINJA_LEX_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

enum tkind {
    T_DATA,        /* s, n: template text */
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,        /* s, n */
    T_STRING,      /* s, n: the decoded value */
    T_INT,         /* i */
    T_FLOAT,       /* d */
    T_OP,          /* op: one of + - / F(//) * % P(**) ~ [ ] ( ) { } E(==) N(!=) > G(>=) < L(<=) = . : | , ; */
    T_EOF,
};

typedef struct tok {
    uint8_t kind, op;
    int line;
    const char *s; /* arena-owned, NUL-terminated */
    size_t n;
    int64_t i;
    double d;
} tok_t;

/* A bump allocator that owns a template's nodes and strings. */
typedef struct arena arena_t;
void *lp__arena_alloc(arena_t **a, size_t n); /* zeroed; NULL when out of memory */
void lp__arena_free(arena_t **a);

typedef struct lexer {
    jmp_buf *jmp;    /* where errors go */
    char *msg;       /* the error message buffer */
    size_t msg_cap;
    arena_t **arena;
    tok_t *toks;     /* malloc'd; the caller frees */
    size_t n, cap;
} lexer_t;

/* Tokenize src; on error longjmps to lx->jmp with the message in lx->msg. */
void lp__jinja_lex(lexer_t *lx, const char *src, size_t len);
/* Format an error into lx->msg and longjmp. */
_Noreturn void lp__lex_fail(lexer_t *lx, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
