/* curve_test.c - key files, KEY values and key lists (lib/curve.h): what
 * keygen writes reads back, and every bad file or value is refused with a
 * message naming it. */
#include "curve.h"

#include "../tests/check.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

static char dir[64];

static const char *path_of(const char *name)
{
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
    return p[k];
}

static const char *write_file(const char *name, const char *text, mode_t mode)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    return p;
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/lmpipe-curve-test-XXXXXX");
    if (!mkdtemp(dir)) return 1;

    /* keygen, then the pair, the .pub and the .key as KEY values */
    CHECK_RC(lp_curve_keygen(path_of("a")), 0);
    CHECK_RC(lp_curve_keygen(path_of("b")), 0);
    CHECK_RC(lp_curve_keygen(path_of("a")), LP_ERR(EEXIST));
    CHECK(strstr(lp_error_msg(), "a.key") != NULL, "%s", lp_error_msg());
    lp_curve_keypair_t a, b;
    CHECK_RC(lp_curve_keypair_load(path_of("a.key"), &a), 0);
    CHECK_RC(lp_curve_keypair_load(path_of("b.key"), &b), 0);
    CHECK(strlen(a.pub) == LP_CURVE_KEY_LEN && strlen(a.sec) == LP_CURVE_KEY_LEN);
    CHECK(strcmp(a.pub, b.pub) != 0);
    char k[LP_CURVE_KEY_LEN + 1];
    CHECK_RC(lp_curve_key_parse(path_of("a.pub"), k), 0);
    CHECK(!strcmp(k, a.pub));
    CHECK_RC(lp_curve_key_parse(path_of("a.key"), k), 0);
    CHECK(!strcmp(k, a.pub));
    CHECK_RC(lp_curve_key_parse(a.pub, k), 0);
    CHECK(!strcmp(k, a.pub));
    /* a 40-character path is Z85 text too: an existing file wins */
    char pubtext[LP_CURVE_KEY_LEN + 2];
    snprintf(pubtext, sizeof(pubtext), "%s\n", b.pub);
    const char *forty = write_file("forty1.pub", pubtext, 0644);
    CHECK(strlen(forty) == LP_CURVE_KEY_LEN, "%s", forty);
    CHECK_RC(lp_curve_key_parse(forty, k), 0);
    CHECK(!strcmp(k, b.pub), "%s read as the key text %s", forty, k);

    /* bad key files */
    char text[256];
    snprintf(text, sizeof(text), "public = %s\nsecret = %s\n", b.pub, a.sec);
    chmod(path_of("a.key"), 0640);
    CHECK_RC(lp_curve_keypair_load(path_of("a.key"), &a), LP_ERR(EPERM));
    CHECK(strstr(lp_error_msg(), "a.key") && strstr(lp_error_msg(), "0640"), "%s", lp_error_msg());
    CHECK_RC(lp_curve_keypair_load(write_file("mixed.key", text, 0600), &a), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "does not match"), "%s", lp_error_msg());
    CHECK_RC(lp_curve_keypair_load(write_file("short.key", "public = abc\nsecret = def\n", 0600), &a),
             LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "short.key") && strstr(lp_error_msg(), "public"), "%s", lp_error_msg());
    CHECK_RC(lp_curve_keypair_load(write_file("nosecret.key", "public = x\n", 0600), &a), LP_ERR(EINVAL));
    CHECK_RC(lp_curve_keypair_load(path_of("absent.key"), &a), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "absent.key") != NULL);
    CHECK_RC(lp_curve_key_parse("not-a-key", k), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "not-a-key") != NULL);
    CHECK_RC(lp_curve_key_parse(write_file("bad.pub", "hello\n", 0644), k), LP_ERR(EINVAL));

    /* key lists: keys, files with comments, .pub and .key files */
    lp_keylist_t l = {0};
    /* A key with '#' inside (about one in three has one): no comment. */
    char hashed[LP_CURVE_KEY_LEN + 1], sec[LP_CURVE_KEY_LEN + 1];
    do zmq_curve_keypair(hashed, sec);
    while (!strchr(hashed, '#'));
    snprintf(text, sizeof(text), "# the gateway\n  %s   # user\n\n%s\n", b.pub, hashed);
    const char *list = write_file("allow.txt", text, 0644);
    char spec[512];
    snprintf(spec, sizeof(spec), "%s, %s,%s", list, path_of("a.pub"), b.pub);
    CHECK_RC(lp_keylist_add(&l, spec), 0);
    CHECK(l.n == 3, "%zu keys", l.n);
    CHECK(lp_keylist_has(&l, b.pub) && lp_keylist_has(&l, hashed));
    CHECK(!lp_keylist_has(&l, "") && !lp_keylist_has(&l, NULL));
    lp_keylist_clear(&l);
    CHECK_RC(lp_keylist_add(&l, write_file("bad.txt", "# ok\nnot a key\n", 0644)), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "bad.txt:2:") != NULL, "%s", lp_error_msg());
    lp_keylist_clear(&l);

    /* options: lists without a key pair are a mistake */
    lp_curve_opts_t o = {.allow = b.pub};
    lp_curve_t c;
    CHECK_RC(lp_curve_load(&o, &c), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "--curve-key") != NULL, "%s", lp_error_msg());
    o.key = path_of("b.key");
    o.admin = "nonsense";
    CHECK_RC(lp_curve_load(&o, &c), LP_ERR(ENOENT));
    CHECK(strstr(lp_error_msg(), "--curve-admin") != NULL, "%s", lp_error_msg());
    o.admin = NULL;
    CHECK_RC(lp_curve_load(&o, &c), 0);
    CHECK(c.keyed && lp_keylist_has(&c.allow, b.pub));
    lp_curve_clear(&c);
    /* an admin or coordinator key can connect without being in allow */
    o.allow = NULL;
    o.admin = path_of("a.pub");
    o.coordinator = hashed;
    CHECK_RC(lp_curve_load(&o, &c), 0);
    CHECK(c.allow.n == 2 && lp_keylist_has(&c.allow, hashed) && lp_keylist_has(&c.admin, c.allow.keys[0]));
    CHECK(!lp_keylist_has(&c.admin, hashed));
    lp_curve_clear(&c);
    CHECK(lp_endpoint_is_local("ipc:///tmp/x") && !lp_endpoint_is_local("tcp://127.0.0.1:1"));

    const char *files[] = {"a.key", "a.pub", "b.key", "b.pub", "mixed.key", "short.key",
                           "nosecret.key", "bad.pub", "allow.txt", "bad.txt", "forty1.pub"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) unlink(path_of(files[i]));
    rmdir(dir);
    return CHECK_DONE();
}
