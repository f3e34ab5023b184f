/* curve.c - key files, key lists, and CURVE socket options (see curve.h). */
#include "curve.h"

#include "error.h"
#include "fileio.h"
#include "log.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static bool is_z85_key(const char *s, size_t n)
{
    if (n != LP_CURVE_KEY_LEN) return false;
    uint8_t bin[32];
    char tmp[LP_CURVE_KEY_LEN + 1];
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    return zmq_z85_decode(bin, tmp) != NULL;
}

static int write_file(const char *path, mode_t mode, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return lp_error_set(LP_ERR(errno), "%s: %s", path, strerror(errno));
    /* The umask may have taken bits away from `mode`; the modes are part of
     * the format. */
    int rc = fchmod(fd, mode) == 0 ? 0 : LP_ERR(errno);
    size_t n = strlen(text);
    if (!rc && write(fd, text, n) != (ssize_t)n) rc = LP_ERR(errno ? errno : EIO);
    if (close(fd) != 0 && !rc) rc = LP_ERR(errno);
    if (rc) {
        unlink(path);
        return lp_error_set(rc, "writing %s: %s", path, strerror(-rc));
    }
    return 0;
}

int lp_curve_keygen(const char *base)
{
    if (!base || !base[0]) return lp_error_set(LP_ERR(EINVAL), "keygen: empty output name");
    char pub[LP_CURVE_KEY_LEN + 1], sec[LP_CURVE_KEY_LEN + 1];
    if (zmq_curve_keypair(pub, sec) != 0)
        return lp_error_set(LP_ERR(zmq_errno()), "keygen: zmq_curve_keypair: %s (libzmq without CURVE?)",
                            zmq_strerror(zmq_errno()));
    size_t n = strlen(base) + 5;
    char *kpath = malloc(n), *ppath = malloc(n);
    char text[2 * LP_CURVE_KEY_LEN + 64];
    int rc = kpath && ppath ? 0 : LP_ERR(ENOMEM);
    if (!rc) {
        snprintf(kpath, n, "%s.key", base);
        snprintf(ppath, n, "%s.pub", base);
        snprintf(text, sizeof(text), "public = %s\nsecret = %s\n", pub, sec);
        rc = write_file(kpath, 0600, text);
    }
    if (!rc) {
        snprintf(text, sizeof(text), "%s\n", pub);
        rc = write_file(ppath, 0644, text);
        if (rc) unlink(kpath);
    }
    memset(sec, 0, sizeof(sec));
    memset(text, 0, sizeof(text));
    free(kpath);
    free(ppath);
    return rc;
}

/* The value of the `NAME = Z85` line of a .key file. */
static int key_line(const char *text, const char *name, const char *path, char out[LP_CURVE_KEY_LEN + 1])
{
    size_t nl = strlen(name);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        while (*line == ' ' || *line == '\t') line++;
        if (strncmp(line, name, nl)) continue;
        const char *p = line + nl;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '=') continue;
        p++;
        while (*p == ' ' || *p == '\t') p++;
        size_t n = strcspn(p, " \t\r\n");
        if (!is_z85_key(p, n))
            return lp_error_set(LP_ERR(EINVAL), "%s: '%s' is not a 40-character Z85 key", path, name);
        memcpy(out, p, n);
        out[n] = '\0';
        return 0;
    }
    return lp_error_set(LP_ERR(EINVAL), "%s: no '%s = KEY' line", path, name);
}

/* Whether `text` has a `NAME =` line: a .key file (a bare Z85 key may
 * itself contain "public" or "secret"). */
static bool has_line(const char *text, const char *name)
{
    size_t nl = strlen(name);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        line += strspn(line, " \t");
        if (strncmp(line, name, nl)) continue;
        const char *p = line + nl + strspn(line + nl, " \t");
        if (*p == '=') return true;
    }
    return false;
}

int lp_curve_keypair_load(const char *path, lp_curve_keypair_t *out)
{
    memset(out, 0, sizeof(*out));
    struct stat st;
    if (stat(path, &st) != 0) return lp_error_set(LP_ERR(errno), "curve key %s: %s", path, strerror(errno));
    if (st.st_mode & 077)
        return lp_error_set(LP_ERR(EPERM), "curve key %s: mode %04o lets others read the secret key "
                            "(chmod 600 it)", path, (unsigned)(st.st_mode & 07777));
    char *text;
    size_t len;
    int rc = lp_read_file(path, &text, &len);
    if (rc) return rc;
    rc = key_line(text, "public", path, out->pub);
    if (!rc) rc = key_line(text, "secret", path, out->sec);
    if (!rc) { /* a pair that does not belong together would fail every handshake */
        char derived[LP_CURVE_KEY_LEN + 1];
        if (zmq_curve_public(derived, out->sec) != 0 || strcmp(derived, out->pub))
            rc = lp_error_set(LP_ERR(EINVAL), "curve key %s: the public key does not match the secret key", path);
    }
    memset(text, 0, len);
    free(text);
    if (rc) memset(out, 0, sizeof(*out));
    return rc;
}

/* A KEY value: 40 Z85 characters, unless a file of that name exists (a
 * 40-character path such as /tmp/x/host.key is Z85 too). */
static bool is_key_text(const char *s, size_t n)
{
    if (!is_z85_key(s, n)) return false;
    char path[LP_CURVE_KEY_LEN + 1];
    memcpy(path, s, n);
    path[n] = '\0';
    return access(path, F_OK) != 0;
}

int lp_curve_key_parse(const char *value, char out[LP_CURVE_KEY_LEN + 1])
{
    if (is_key_text(value, strlen(value))) {
        memcpy(out, value, LP_CURVE_KEY_LEN + 1);
        return 0;
    }
    char *text;
    size_t len;
    int rc = lp_read_file(value, &text, &len);
    if (rc) {
        lp_error_prefix("key '%s' is neither 40 Z85 characters nor a readable key file: ", value);
        return rc;
    }
    if (has_line(text, "public")) {
        rc = key_line(text, "public", value, out);
    } else {
        const char *p = text + strspn(text, " \t\r\n");
        size_t n = strcspn(p, " \t\r\n");
        if (is_z85_key(p, n)) {
            memcpy(out, p, n);
            out[n] = '\0';
        } else {
            rc = lp_error_set(LP_ERR(EINVAL), "%s: no 40-character Z85 public key", value);
        }
    }
    memset(text, 0, len);
    free(text);
    return rc;
}

static int list_push(lp_keylist_t *l, const char *z85)
{
    if (lp_keylist_has(l, z85)) return 0;
    void *n = realloc(l->keys, (l->n + 1) * sizeof(*l->keys));
    if (!n) return LP_ERR(ENOMEM);
    l->keys = n;
    memcpy(l->keys[l->n++], z85, LP_CURVE_KEY_LEN + 1);
    return 0;
}

/* A key-list file: one KEY per line (or a .pub / .key file). */
static int list_file(lp_keylist_t *l, const char *path)
{
    char *text;
    size_t len;
    int rc = lp_read_file(path, &text, &len);
    if (rc) {
        lp_error_prefix("key list '%s' is neither 40 Z85 characters nor a readable file: ", path);
        return rc;
    }
    if (has_line(text, "secret")) { /* a .key file: its public key */
        char k[LP_CURVE_KEY_LEN + 1];
        rc = key_line(text, "public", path, k);
        if (!rc) rc = list_push(l, k);
        memset(text, 0, len);
        free(text);
        return rc;
    }
    int line_no = 0;
    for (char *line = text; !rc && line; line_no++) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        /* A comment starts a line or follows a blank: Z85 keys hold '#'. */
        char *hash = line;
        while ((hash = strchr(hash, '#')) && hash != line && hash[-1] != ' ' && hash[-1] != '\t') hash++;
        if (hash) *hash = '\0';
        char *p = line + strspn(line, " \t\r");
        size_t n = strcspn(p, " \t\r");
        if (n) {
            if (!is_z85_key(p, n) || p[n + strspn(p + n, " \t\r")])
                rc = lp_error_set(LP_ERR(EINVAL), "%s:%d: not a 40-character Z85 public key", path,
                                  line_no + 1);
            else {
                p[n] = '\0';
                rc = list_push(l, p);
            }
        }
        line = next;
    }
    free(text);
    return rc;
}

int lp_keylist_add(lp_keylist_t *l, const char *list)
{
    if (!list) return 0;
    char *copy = strdup(list);
    if (!copy) return LP_ERR(ENOMEM);
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); !rc && tok; tok = strtok_r(NULL, ",", &save)) {
        tok += strspn(tok, " \t");
        size_t n = strlen(tok);
        while (n && (tok[n - 1] == ' ' || tok[n - 1] == '\t')) tok[--n] = '\0';
        if (!n) continue;
        rc = is_key_text(tok, n) ? list_push(l, tok) : list_file(l, tok);
    }
    free(copy);
    return rc;
}

bool lp_keylist_has(const lp_keylist_t *l, const char *z85)
{
    if (!z85 || !z85[0]) return false;
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->keys[i], z85)) return true;
    return false;
}

void lp_keylist_clear(lp_keylist_t *l)
{
    free(l->keys);
    l->keys = NULL;
    l->n = 0;
}

int lp_curve_opts_take(lp_curve_opts_t *o, int code, const char *arg)
{
    switch (code) {
    case 1000: o->key = arg; return 1;
    case 1001: o->allow = arg; return 1;
    case 1002: o->admin = arg; return 1;
    case 1003: o->coordinator = arg; return 1;
    case 1004: o->allow_insecure_tcp = true; return 1;
    default: return 0;
    }
}

int lp_curve_load(const lp_curve_opts_t *o, lp_curve_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!o) return 0;
    out->allow_insecure_tcp = o->allow_insecure_tcp;
    int rc = 0;
    if (o->key) {
        rc = lp_curve_keypair_load(o->key, &out->kp);
        out->keyed = rc == 0;
    }
    const char *lists[3] = {o->allow, o->admin, o->coordinator};
    const char *flags[3] = {"--curve-allow", "--curve-admin", "--curve-coordinator"};
    lp_keylist_t *dst[3] = {&out->allow, &out->admin, &out->coordinator};
    for (int i = 0; !rc && i < 3; i++) {
        rc = lp_keylist_add(dst[i], lists[i]);
        if (rc) lp_error_prefix("%s: ", flags[i]);
    }
    /* Admins and coordinators must be able to connect to be either. */
    for (size_t i = 0; !rc && i < out->admin.n; i++) rc = list_push(&out->allow, out->admin.keys[i]);
    for (size_t i = 0; !rc && i < out->coordinator.n; i++) rc = list_push(&out->allow, out->coordinator.keys[i]);
    if (!rc && !o->key && (o->allow || o->coordinator))
        rc = lp_error_set(LP_ERR(EINVAL), "--curve-allow and --curve-coordinator need --curve-key "
                          "(this host's key pair)");
    if (rc) lp_curve_clear(out);
    return rc;
}

void lp_curve_clear(lp_curve_t *c)
{
    lp_keylist_clear(&c->allow);
    lp_keylist_clear(&c->admin);
    lp_keylist_clear(&c->coordinator);
    memset(c, 0, sizeof(*c));
}

bool lp_endpoint_is_local(const char *endpoint)
{
    return !strncmp(endpoint, "ipc://", 6) || !strncmp(endpoint, "inproc://", 9);
}

static void warn_insecure(const char *who, const char *endpoint)
{
    static bool warned;
    if (warned) return;
    warned = true;
    LP_WARN("%s: %s without CURVE keys (allow_insecure_tcp): any peer that reaches it is trusted",
            who, endpoint);
}

int lp_curve_bind(void *sock, const char *endpoint, const lp_curve_t *c, const char *who)
{
    if (lp_endpoint_is_local(endpoint)) return 0;
    if (!c || !c->keyed) {
        if (c && c->allow_insecure_tcp) {
            warn_insecure(who, endpoint);
            return 0;
        }
        return lp_error_set(LP_ERR(EACCES), "%s: %s needs CURVE keys: give --curve-key and "
                            "--curve-allow (config curve.key, curve.allow), or set "
                            "allow_insecure_tcp = true (--allow-insecure-tcp)", who, endpoint);
    }
    int one = 1;
    /* The domain makes libzmq ask the ZAP handler about every peer. */
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) != 0 ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->kp.sec, LP_CURVE_KEY_LEN) != 0 ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "lmpipe", 6) != 0)
        return lp_error_set(LP_ERR(zmq_errno()), "%s: CURVE server options: %s", who,
                            zmq_strerror(zmq_errno()));
    return 0;
}

int lp_curve_connect(void *sock, const char *endpoint, const lp_curve_t *c, const char *server_key,
                     bool allow_plain, const char *who)
{
    if (!lp_endpoint_is_local(endpoint)) {
        bool keyed = c && c->keyed;
        if (keyed && server_key) {
            char sk[LP_CURVE_KEY_LEN + 1];
            int rc = lp_curve_key_parse(server_key, sk);
            if (rc) {
                lp_error_prefix("%s: server key of %s: ", who, endpoint);
                return rc;
            }
            if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, sk, LP_CURVE_KEY_LEN) != 0 ||
                zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, c->kp.pub, LP_CURVE_KEY_LEN) != 0 ||
                zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->kp.sec, LP_CURVE_KEY_LEN) != 0)
                return lp_error_set(LP_ERR(zmq_errno()), "%s: CURVE client options: %s", who,
                                    zmq_strerror(zmq_errno()));
        } else if (keyed || server_key) {
            return lp_error_set(LP_ERR(EINVAL), "%s: %s: CURVE needs both this host's key "
                                "(--curve-key) and the server's public key (--server-key)",
                                who, endpoint);
        } else if (c && c->allow_insecure_tcp) {
            warn_insecure(who, endpoint);
        } else if (!allow_plain) {
            return lp_error_set(LP_ERR(EACCES), "%s: %s needs CURVE keys: give --curve-key and the "
                                "server's key, or set allow_insecure_tcp = true", who, endpoint);
        }
    }
    if (zmq_connect(sock, endpoint) != 0)
        return lp_error_set(LP_ERR(zmq_errno()), "%s: connect %s: %s", who, endpoint,
                            zmq_strerror(zmq_errno()));
    return 0;
}
