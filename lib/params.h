/* params.h - a service's parameters, declared once in a table (config key,
 * flag, type, range, default, help) and read by the skeleton from the
 * config file and the command line, with every range checked here, once.
 *
 * As Postfix's daemons read main.cf themselves (qmgr.c's parameter tables,
 * master_ent.c), each lmpipe service takes `--config FILE --service NAME`:
 * `lmpipe up` writes one config file for its run and starts each service
 * with its path and the service's name, instead of translating keys into
 * per-service flags.  Flags given beside --config win over its keys (by
 * hand, and for what lmpipe up decides per start: a ring's name, a socket).
 * A key of another service's table is skipped (one file serves them all);
 * `lmpipe up` refuses keys no table knows (lp_params_check_config).
 * `lmpipe schema --config` prints every table (docs/DEPLOY.md lists them). */
#ifndef LP_PARAMS_H
#define LP_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "json.h"

#define LP_PARAM_LIST_MAX 16

typedef enum {
    LP_P_STR,   /* const char * (borrowed from argv or the config) */
    LP_P_INT,   /* int64_t, in [lo, hi] */
    LP_P_BOOL,  /* bool: a flag without a value; in the config true/false (1/0, yes/no) */
    LP_P_LIST,  /* lp_param_list_t: a repeated flag (each value may be a comma-separated
                 * list too); in the config a comma-separated list */
    LP_P_MULTI, /* lp_param_list_t: a repeated flag whose values hold commas themselves */
} lp_param_type_t;

typedef struct lp_param_list {
    const char *v[LP_PARAM_LIST_MAX];
    int n;
} lp_param_list_t;

typedef struct lp_param {
    const char *key;       /* the config key ("engine.kv_block"; a '*' segment matches any
                            * name: "group.*.engine"); NULL: a flag only */
    const char *flag;      /* "kv-block" (without "--"); NULL: the config only */
    lp_param_type_t type;
    int64_t lo, hi;        /* LP_P_INT: the range */
    const char *def;       /* the default, as the docs say it */
    size_t off;            /* where the value goes in the options struct */
    const char *help;
    bool required;         /* the service cannot start without it */
    bool invert;           /* LP_P_BOOL: the option holds the flag's sense, the key the
                            * opposite (--no-prefix-cache, coordinator.prefix_cache) */
} lp_param_t;

typedef struct lp_params {
    const char *service;   /* the name `--service` gives and lmpipe up uses: "engine" */
    const char *prog;      /* the binary, for messages: "engine-svc" */
    const char *summary;   /* one line, for --help */
    const lp_param_t *rows;
    size_t n_rows;
    size_t opts_size;      /* sizeof the options struct (lp_params_check_config) */
} lp_params_t;

/* What lp_params_parse keeps alive for the strings in the options: the
 * config and the lists' storage.  Destroy after the service has stopped. */
typedef struct lp_params_ctx lp_params_ctx_t;
void lp_params_ctx_destroy(lp_params_ctx_t **self_p);
/* The config --config loaded (NULL: none), for keys a service reads itself
 * (group.NAME.*); borrowed, lives with ctx. */
const lp_config_t *lp_params_ctx_config(const lp_params_ctx_t *ctx);

/* Read argv: --config FILE (its keys of this table), --service NAME (must be
 * t->service), then the table's flags, which win.  opts holds the defaults
 * on entry.  Returns 0; 1 after --help (printed; exit 0); 2 after a bad
 * flag, key or value (a message naming it on stderr; exit 2). */
int lp_params_parse(const lp_params_t *t, void *opts, int argc, char **argv, lp_params_ctx_t **ctx);

/* This table's keys in cfg into opts: LP_ERR(EINVAL) naming the key and
 * value on a bad one.  Strings borrow from cfg; a list's strings live in
 * ctx (NULL: lists are checked, not stored). */
int lp_params_from_config(const lp_params_t *t, const lp_config_t *cfg, void *opts, lp_params_ctx_t *ctx);

/* Every key of cfg known to one of the tables, and each table's values in
 * range: LP_ERR(EINVAL) naming the first that is not. */
int lp_params_check_config(const lp_params_t *const *tables, size_t n, const lp_config_t *cfg,
                           const char *const *own_keys);

/* Whether `key` matches a row's key (with '*' segments). */
bool lp_param_key_match(const char *pattern, const char *key);

/* The usage text made from the table. */
void lp_params_usage(const lp_params_t *t, FILE *f);
/* The table as JSON: {"service", "prog", "params": [{key, flag, type, range, default, help}]}. */
void lp_params_write_json(const lp_params_t *t, lp_json_buf_t *b);
/* The table's config keys as a Markdown table (docs/DEPLOY.md): a heading
 * with the service, then | key | flag | type | range | default | what |. */
void lp_params_write_markdown(const lp_params_t *t, lp_json_buf_t *b);

#endif
