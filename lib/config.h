/* config.h - the lmpipe configuration file: `key = value` lines.
 *
 * '#' starts a comment; blank lines are skipped; keys are words with dots
 * ("engine.endpoint"); values run to the end of the line, trimmed.  A later
 * line for the same key wins.  deploy/lmpipe.conf is the annotated example. */
#ifndef LP_CONFIG_H
#define LP_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

typedef struct lp_config lp_config_t;

/* Parse a file; a bad line is an error naming the file and line. */
int lp_config_load(const char *path, lp_config_t **out);
lp_config_t *lp_config_new(void);
void lp_config_destroy(lp_config_t **self_p);

/* Set (copying both strings). */
int lp_config_set(lp_config_t *c, const char *key, const char *value);
/* Set a printf-formatted value. */
int lp_config_setf(lp_config_t *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Borrowed, valid until the key is set again; `def` when absent. */
const char *lp_config_get(const lp_config_t *c, const char *key, const char *def);
/* LP_ERR(EINVAL) naming the key when the value is not an integer / bool. */
int lp_config_get_int(const lp_config_t *c, const char *key, int64_t def, int64_t *out);
int lp_config_get_bool(const lp_config_t *c, const char *key, bool def, bool *out);
/* Write every key as `key = value` lines to path (mode 0600: a config may
 * hold keys and passwords).  A value that would not read back the same
 * (a newline, a '#' after a blank, blanks at its ends) is an error naming
 * its key. */
int lp_config_save(const lp_config_t *c, const char *path);
/* The keys in file order, for checking that every key is known. */
int lp_config_n_keys(const lp_config_t *c);
const char *lp_config_key_at(const lp_config_t *c, int i);

#endif
