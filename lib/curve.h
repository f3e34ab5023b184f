/* curve.h - CURVE on lmpipe's TCP links (docs/SECURITY.md).
 *
 * A host has one key pair (`lmpipe keygen -o BASE`: BASE.key, BASE.pub).
 * Services bind with it as CURVE servers and accept only the public keys of
 * their allow list (lib/zap.h checks them); client sides connect with it and
 * the server's public key.  ipc:// and inproc:// stay keyless: the run
 * folder's and the socket files' modes guard them. */
#ifndef LP_CURVE_H
#define LP_CURVE_H

#include <stdbool.h>
#include <stddef.h>

#include "params.h"

#define LP_CURVE_KEY_LEN 40 /* Z85 text of a 32-byte key */

typedef struct lp_curve_keypair {
    char pub[LP_CURVE_KEY_LEN + 1];
    char sec[LP_CURVE_KEY_LEN + 1];
} lp_curve_keypair_t;

/* Public keys, Z85. */
typedef struct lp_keylist {
    char (*keys)[LP_CURVE_KEY_LEN + 1]; /* owned */
    size_t n;
} lp_keylist_t;

/* The security flags of a service or client side; strings borrowed. */
typedef struct lp_curve_opts {
    const char *key;         /* --curve-key: this host's BASE.key; NULL: no CURVE */
    const char *allow;       /* --curve-allow: KEY|PATH[,...] accepted peers */
    const char *admin;       /* --curve-admin: KEY|PATH[,...] whose control is accepted */
    const char *coordinator; /* --curve-coordinator: KEY|PATH[,...] that may be controller */
    bool allow_insecure_tcp; /* --allow-insecure-tcp */
} lp_curve_opts_t;

/* The loaded form of lp_curve_opts_t. */
typedef struct lp_curve {
    bool keyed;                      /* kp holds this host's pair */
    lp_curve_keypair_t kp;
    lp_keylist_t allow, admin, coordinator; /* allow holds admin and coordinator too */
    bool allow_insecure_tcp;
} lp_curve_t;

/* Write BASE.key (mode 0600: `public = Z85` and `secret = Z85` lines) and
 * BASE.pub (mode 0644: the public key and a newline).  Refuses to overwrite
 * either file. */
int lp_curve_keygen(const char *base);
/* Read a BASE.key file.  Refused when group or others may read it. */
int lp_curve_keypair_load(const char *path, lp_curve_keypair_t *out);
/* A KEY value: 40 Z85 characters, or the path of a .pub or .key file (its
 * public key). */
int lp_curve_key_parse(const char *value, char out[LP_CURVE_KEY_LEN + 1]);
/* A comma-separated list of KEY values or key-list files (one KEY per line,
 * '#' comments, blank lines ignored), appended to `l`. */
int lp_keylist_add(lp_keylist_t *l, const char *list);
bool lp_keylist_has(const lp_keylist_t *l, const char *z85);
void lp_keylist_clear(lp_keylist_t *l);

/* The rows of a service's parameter table (lib/params.h) for an
 * lp_curve_opts_t member m of its options struct T. */
#define LP_CURVE_PARAMS(T, m)                                                                                      \
    {"curve.key", "curve-key", LP_P_STR, 0, 0, "none", offsetof(T, m.key),                                          \
     "this host's key pair, BASE.key (docs/SECURITY.md)", false, false},                                           \
    {"curve.allow", "curve-allow", LP_P_STR, 0, 0, "none", offsetof(T, m.allow),                                    \
     "peers accepted: KEY|FILE[,...]", false, false},                                                              \
    {"curve.admin", "curve-admin", LP_P_STR, 0, 0, "none", offsetof(T, m.admin),                                    \
     "peers whose control is accepted: KEY|FILE[,...]", false, false},                                             \
    {"curve.coordinator", "curve-coordinator", LP_P_STR, 0, 0, "none", offsetof(T, m.coordinator),                  \
     "peers that may be the controller: KEY|FILE[,...]", false, false},                                            \
    {"allow_insecure_tcp", "allow-insecure-tcp", LP_P_BOOL, 0, 0, "false", offsetof(T, m.allow_insecure_tcp),        \
     "bind tcp:// without CURVE keys", false, false}

/* The flags in a service's getopt_long table (codes from 1000 up, clear of
 * any letter), its usage line, and the switch case that takes them:
 * 1 when `code` was one of them, else 0. */
#define LP_CURVE_LONGOPTS                                                                   \
    {"curve-key", required_argument, 0, 1000}, {"curve-allow", required_argument, 0, 1001}, \
    {"curve-admin", required_argument, 0, 1002},                                            \
    {"curve-coordinator", required_argument, 0, 1003},                                      \
    {"allow-insecure-tcp", no_argument, 0, 1004}
#define LP_CURVE_USAGE                                                                  \
    "  [--curve-key F.key --curve-allow KEY|F[,..] [--curve-admin KEY|F[,..]]\n"      \
    "   [--curve-coordinator KEY|F[,..]]] [--allow-insecure-tcp]   (docs/SECURITY.md)\n"
int lp_curve_opts_take(lp_curve_opts_t *o, int code, const char *arg);

int lp_curve_load(const lp_curve_opts_t *o, lp_curve_t *out);
void lp_curve_clear(lp_curve_t *c);

/* ipc:// and inproc://: endpoints on this host, guarded by file modes. */
bool lp_endpoint_is_local(const char *endpoint);

/* Make `sock` a CURVE server with this host's pair before it binds
 * `endpoint`.  A non-local endpoint without a key pair is refused unless
 * allow_insecure_tcp (then a warning, once per process). `who` names the
 * service in messages. */
int lp_curve_bind(void *sock, const char *endpoint, const lp_curve_t *c, const char *who);
/* Connect `sock` to `endpoint`, as a CURVE client when the endpoint is not
 * local: `c`'s key pair (may be NULL) and `server_key` (a KEY value; may be
 * NULL).  Without both, a non-local endpoint is refused unless
 * `allow_plain` (no warning: the server decides). */
int lp_curve_connect(void *sock, const char *endpoint, const lp_curve_t *c, const char *server_key,
                     bool allow_plain, const char *who);

#endif
