/* parse-internal.h - what the output parser's engine (parse.c) shares with
 * the per-format call readers (read-*.c).
 *
 * The engine keeps all output in buf; pos is where it has decided.  In text
 * it looks for its format's markers; at one it hands over to that marker's
 * reader, which reads calls from its own cursor rs.q and either commits
 * (opens a call, which then streams) or fails before committing, and the
 * marker is text.  Everything leaves through three sinks: content,
 * reasoning, and each call's arguments, which record the deltas. */
#ifndef LP_CHAT_PARSE_INTERNAL_H
#define LP_CHAT_PARSE_INTERNAL_H

#include "chat-parse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lp_chat_parser P;

/* what a reader returns */
enum { LP__R_MORE, LP__R_DONE, LP__R_FAIL };

/* ---- JSON scanned a byte at a time ---------------------------------------- */

typedef struct lp__jscan {
    uint16_t depth;
    uint8_t st;
} lp__jscan_t;

/* Feed one byte of a JSON value: 0 the byte belongs to it and it goes on,
 * 1 the value ends with this byte, 2 it ended just before it (a number or a
 * literal), -1 the byte cannot be part of it.  Structure only: strings and
 * nesting are followed, and bytes that JSON never has outside strings are
 * refused, so a value that breaks off ends early; the whole value is checked
 * by the strict reader afterwards. */
int lp__jscan_feed(lp__jscan_t *s, unsigned char c);
/* the value is a number or literal still going (it may end at the output's end) */
bool lp__jscan_in_literal(const lp__jscan_t *s);

/* ---- a call object: {"name": ..., "arguments": {...}} ------------------- */

typedef struct lp__wrap {
    uint8_t st, key;
    lp__jscan_t js;
    size_t tok;          /* start of the current key or name token */
    size_t args_at;      /* where the arguments began, or SIZE_MAX */
    size_t args_end;     /* where they ended, or SIZE_MAX */
    size_t args_sent;    /* passed to the call up to here */
    int call;            /* the committed call, or -1 */
    bool has_name, args_str, any_key;
    char *name;          /* decoded, malloc'd */
} lp__wrap_t;

/* Read a call object at *q.  R_MORE, R_DONE (the object ended, the call is
 * closed; *q after it), R_FAIL (not a call object, nothing committed).
 * Once committed, a broken object ends the call with what it has (R_DONE,
 * *q where it broke). */
int lp__wrap_run(P *p, lp__wrap_t *w, size_t *q);
void lp__wrap_reset(lp__wrap_t *w);

/* ---- a reader's state ------------------------------------------------------ */

typedef struct lp__rdstate {
    int st;              /* the reader's own state; 0 on entry */
    size_t q;            /* its cursor into buf */
    size_t a;            /* a start it keeps (a name, a header) */
    int call;            /* its open call, or -1 */
    bool close_str;      /* the open call's arguments have an open JSON string */
    bool close_obj;      /* ... and an open object the reader writes */
    bool in_param;       /* an XML-like parameter is open (lp__param_begin) */
    bool jstarted;       /* lp__jargs: the arguments have begun */
    int n_params;        /* parameters written into the open call */
    int pkind;           /* the current parameter's kind (LP__P_*) */
    bool pstarted;       /* the current parameter has had text */
    lp__wrap_t w;
    lp__jscan_t js;
    lp_json_buf_t tmp;   /* a value being gathered */
    /* Gemma 4's notation: containers open (1 object, 2 array) */
    uint8_t gstack[64];
    int gdepth;
    int gst;
    int n;               /* calls read in this section */
} lp__rdstate_t;

typedef int (*lp__reader_fn)(P *p);

typedef struct lp__marker {
    const char *text;
    lp__reader_fn read;  /* NULL: the marker is dropped */
} lp__marker_t;

typedef struct lp__fmt_ops {
    const lp__marker_t *markers; /* none may be a prefix of another */
    size_t n_markers;
    lp__reader_fn start;         /* may be NULL: tried at the output's first non-space byte */
    bool own_reasoning;          /* the reader does reasoning itself (harmony) */
} lp__fmt_ops_t;

const lp__fmt_ops_t *lp__fmt_ops(lp_chat_format_t f);

/* ---- the parser ------------------------------------------------------------ */

typedef struct lp__out {
    lp_json_buf_t b;     /* everything written */
    size_t sent;         /* passed on as deltas up to here */
} lp__out_t;

typedef struct lp__sink {
    lp__out_t o;
    lp_json_buf_t ws;    /* white space held back */
    bool strip;          /* drop white space before the next text */
    uint8_t kind;        /* LP_CHAT_DELTA_CONTENT or _REASONING */
} lp__sink_t;

typedef struct lp__call {
    char id[40];
    char *name;
    lp__out_t args;
    bool valid, complete, broken;
} lp__call_t;

typedef struct lp__delta {
    uint8_t kind;
    bool first;
    size_t index, start, end;
} lp__delta_t;

struct lp_chat_parser {
    const lp_chat_format_info_t *fi;
    const lp__fmt_ops_t *ops;
    lp_chat_reasoning_format_t rf;
    char *buf;
    size_t len, cap;
    size_t pos;
    bool final, finished, oom;
    int mode;
    lp__sink_t content, reasoning;
    lp__sink_t *rsink;       /* where reasoning goes: reasoning, or content */
    lp__call_t *calls;
    size_t n_calls, cap_calls;
    lp__delta_t *deltas;
    size_t n_deltas, cap_deltas;
    /* the reader in charge */
    lp__reader_fn rd;
    size_t rd_mlen;          /* its marker's length */
    size_t rd_calls0;        /* calls before it began */
    lp__rdstate_t rs;
    bool prompt_functionary; /* the prompt ends with Functionary's ">>>" */
    lp_json_doc_t *tools;
    uint64_t rng;
    int id_len;
    const char *id_prefix;
    lp_chat_tool_call_t *view;  /* lp_chat_parser_msg's array */
};

/* ---- what readers use ---------------------------------------------------- */

/* The literal s at q: 1 it is there, 0 the output so far ends with a part
 * of it (never at the end of output), -1 it is not. */
int lp__at(const P *p, size_t q, const char *s);
size_t lp__skip_ws(const P *p, size_t q);
static inline bool lp__is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
/* The first of the n markers at or after `from`: its index and *at; -1
 * when none is there yet, with *safe the first offset that may still begin
 * one (the rest of the output is a part of one; the output's length at its
 * end). */
int lp__find(const P *p, size_t from, const char *const *m, size_t n, size_t *at, size_t *safe);

void lp__sink_put(P *p, lp__sink_t *s, const char *t, size_t n);
void lp__sink_end(P *p, lp__sink_t *s);

/* Open a call (the content before it ends); its index. */
int lp__call_begin(P *p, const char *name, size_t name_len);
void lp__call_args(P *p, int i, const char *s, size_t n);
void lp__call_args_str(P *p, int i, const char *s, size_t n); /* s escaped as inside a JSON string */
/* The call's arguments are broken: it will not be valid. */
void lp__call_broken(P *p, int i);
/* Close a call: its arguments are checked ("{}" when it has none). */
void lp__call_end(P *p, int i, bool complete);

/* The reader's way out when it needs more: at the output's end it closes
 * its open call (with the JSON it owes) first. */
int lp__rd_more(P *p);

/* parameter kinds, from the tools' schemas */
enum { LP__P_STRING, LP__P_JSON, LP__P_BOOL };
int lp__param_kind(const P *p, const char *fn, const char *key, size_t key_len);
/* an XML-like parameter: its key (after the previous one), text, end */
void lp__param_begin(P *p, const char *key, size_t key_len);
void lp__param_begin_kind(P *p, const char *key, size_t key_len, int kind);
void lp__param_text(P *p, const char *s, size_t n);
void lp__param_end(P *p);

/* JSON arguments of the open call (rs->call) from rs->q, streamed: R_MORE,
 * or R_DONE with rs->q after them (the call left open). */
int lp__jargs(P *p);

/* Readers for several formats, in read-*.c */
int lp__read_tagcall(P *p);

#endif
