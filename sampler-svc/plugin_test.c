/* plugin_test.c - the plugin folder, tried as an attacker would, through
 * the control message sampler-svc serves.  test-marker.so creates a marker
 * file from its constructor, which runs inside dlopen: a refused load must
 * leave no marker.  Refused: no folder set; a file outside the folder (by
 * absolute path, by "..", by a symlink inside the folder); a folder under
 * a world-writable directory (one with the sticky bit too, unless it is
 * root's: a folder under /tmp passes); a world-writable subfolder; a group-writable file; a file owned by another user (as
 * root); the folder turned group-writable after it was set.  Loaded: the
 * example plugin and the marker from the folder (and then the marker
 * exists, which shows that the check above can see a load).
 *
 * args: test-marker.so mask-tokens.so WORKDIR (emptied; under the build
 * tree, which no one but its owner may write to) */
#include "plugin.h"
#include "sampler.h"

#include "check.h"
#include "error.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char marker[4096];

static bool marker_made(void)
{
    return access(marker, F_OK) == 0;
}

static void copy_file(const char *src, const char *dst, mode_t mode)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out, "copy %s to %s", src, dst);
    char buf[65536];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof(buf), in)) > 0) CHECK(fwrite(buf, 1, n, out) == n);
    if (in) fclose(in);
    if (out) fclose(out);
    CHECK(chmod(dst, mode) == 0, "chmod %s", dst);
}

static void make_dir(const char *path, mode_t mode)
{
    CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
    CHECK(chmod(path, mode) == 0, "chmod %s", path); /* whatever the umask */
}

/* A load through the control message: refused, naming `why`, with nothing
 * opened and the strategy unchanged. */
static void refused(lp_sampler_store_t *st, const char *path, const char *why)
{
    char msg[8192];
    snprintf(msg, sizeof(msg), "{\"op\":\"load\",\"path\":\"%s\"}", path);
    char *reply = NULL;
    int rc = lp_sampler_store_control(st, msg, strlen(msg), &reply);
    CHECK(rc < 0, "%s was loaded", path);
    CHECK(reply && strstr(reply, "\"ok\":false") && strstr(reply, why), "%s: want \"%s\" in %s",
          path, why, reply ? reply : "(no reply)");
    CHECK(!marker_made(), "%s: the library was opened (its constructor ran)", path);
    CHECK(lp_sampler_store_version(st) == 1);
    free(reply);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: plugin_test test-marker.so mask-tokens.so WORKDIR\n");
        return 2;
    }
    const char *marker_so = argv[1], *mask_so = argv[2], *work = argv[3];
    char cmd[8192], good[4096], outside[4096], shared[4096], p[8192], q[8192];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
    CHECK(system(cmd) == 0);
    make_dir(work, 0755);
    snprintf(good, sizeof(good), "%s/plugins", work);
    snprintf(outside, sizeof(outside), "%s/outside", work);
    snprintf(shared, sizeof(shared), "%s/plugins/shared", work);
    snprintf(marker, sizeof(marker), "%s/constructor-ran", work);
    make_dir(good, 0755);
    make_dir(outside, 0755);
    make_dir(shared, 0777);
    setenv("LP_TEST_PLUGIN_MARKER", marker, 1);

    /* The build tree must itself pass: otherwise no load could work here. */
    int rc = lp_plugin_check_dir(good);
    CHECK(rc == 0, "the work folder %s fails the checks: %s", good, lp_error_msg());
    if (rc) return CHECK_DONE();

    snprintf(p, sizeof(p), "%s/evil.so", outside);
    copy_file(marker_so, p, 0755);
    snprintf(p, sizeof(p), "%s/evil.so", shared);
    copy_file(marker_so, p, 0755);
    snprintf(p, sizeof(p), "%s/marker.so", good);
    copy_file(marker_so, p, 0755);
    snprintf(p, sizeof(p), "%s/group-writable.so", good);
    copy_file(marker_so, p, 0775);
    snprintf(p, sizeof(p), "%s/mask.so", good);
    copy_file(mask_so, p, 0755);
    snprintf(p, sizeof(p), "%s/link.so", good);
    snprintf(q, sizeof(q), "%s/evil.so", outside);
    CHECK(symlink(q, p) == 0);

    lp_sampler_store_t *st;
    CHECK_RC(lp_sampler_store_new(NULL, &st), 0);
    if (!st) return CHECK_DONE();

    /* no folder set: every load is refused, and says how to set one */
    snprintf(p, sizeof(p), "%s/marker.so", good);
    refused(st, p, "--plugin-dir DIR (config key sampler.plugin_dir)");

    /* folders that cannot be the plugin folder */
    CHECK_RC(lp_sampler_store_set_plugin_dir(st, shared), LP_ERR(EPERM));
    CHECK(strstr(lp_error_msg(), "writable by others") != NULL, "%s", lp_error_msg());
    snprintf(p, sizeof(p), "%s/evil.so", outside);
    CHECK_RC(lp_sampler_store_set_plugin_dir(st, p), LP_ERR(EPERM));
    CHECK(strstr(lp_error_msg(), "is not a directory") != NULL, "%s", lp_error_msg());
    /* Above the folder, a root-owned directory with the sticky bit (/tmp)
     * is trusted: only an entry's owner or root may rename or remove the
     * entry (docs/SECURITY.md, "Plugin folders").  A world-writable one
     * without the sticky bit is not, nor a sticky one that is not root's. */
    struct stat tst;
    if (stat("/tmp", &tst) == 0 && (tst.st_mode & S_IWOTH) && (tst.st_mode & S_ISVTX) && tst.st_uid == 0) {
        char tmp[] = "/tmp/lp-plugin-test-XXXXXX";
        CHECK(mkdtemp(tmp) != NULL);
        CHECK_RC(lp_plugin_check_dir(tmp), 0);
        snprintf(p, sizeof(p), "%s/sub", tmp);
        make_dir(p, 0777); /* but the folder itself, or one between, may not be shared */
        snprintf(q, sizeof(q), "%s/sub/plugins", tmp);
        make_dir(q, 0755);
        CHECK_RC(lp_plugin_check_dir(q), LP_ERR(EPERM));
        CHECK(strstr(lp_error_msg(), "sub is writable by others") != NULL, "%s", lp_error_msg());
        rmdir(q);
        rmdir(p);
        rmdir(tmp);
    }
    snprintf(p, sizeof(p), "%s/open", work);
    make_dir(p, 0777);
    snprintf(q, sizeof(q), "%s/open/plugins", work);
    make_dir(q, 0755);
    CHECK_RC(lp_plugin_check_dir(q), LP_ERR(EPERM));
    CHECK(strstr(lp_error_msg(), "open is writable by others") != NULL, "%s", lp_error_msg());
    snprintf(p, sizeof(p), "%s/sticky", work);
    make_dir(p, 01777);
    snprintf(q, sizeof(q), "%s/sticky/plugins", work);
    make_dir(q, 0755);
    /* not root's: as root, given to nobody (the folder below too, so that
     * only the sticky directory is at fault) */
    bool theirs = geteuid() != 0 || (chown(p, 65534, 65534) == 0);
    if (theirs && geteuid() == 0) CHECK(chown(q, 0, 0) == 0);
    if (theirs) {
        CHECK_RC(lp_plugin_check_dir(q), LP_ERR(EPERM));
        CHECK(strstr(lp_error_msg(), "sticky is ") != NULL, "%s", lp_error_msg());
    }
    CHECK_RC(lp_sampler_store_set_plugin_dir(st, "/nonexistent/plugins"), LP_ERR(ENOENT));
    refused(st, "marker.so", "--plugin-dir DIR");

    CHECK_RC(lp_sampler_store_set_plugin_dir(st, good), 0);
    /* outside the folder, however it is named */
    snprintf(p, sizeof(p), "%s/evil.so", outside);
    refused(st, p, "outside the plugin folder");
    refused(st, "../outside/evil.so", "outside the plugin folder");
    snprintf(p, sizeof(p), "%s/../outside/evil.so", good);
    refused(st, p, "outside the plugin folder");
    refused(st, "link.so", "outside the plugin folder");
    refused(st, ".", "outside the plugin folder");
    refused(st, "missing.so", "cannot load");
    /* inside, but someone else could have written it */
    refused(st, "shared/evil.so", "shared is writable by others");
    refused(st, "group-writable.so", "group-writable.so is writable by its group");
    if (geteuid() == 0) {
        snprintf(p, sizeof(p), "%s/theirs.so", good);
        copy_file(marker_so, p, 0755);
        CHECK(chown(p, 65534, 65534) == 0);
        refused(st, "theirs.so", "is owned by uid 65534");
    }
    /* the folder turns group-writable after it was set */
    CHECK(chmod(good, 0775) == 0);
    refused(st, "marker.so", "plugins is writable by its group");
    CHECK(chmod(good, 0755) == 0);

    /* a good plugin in a safe folder loads, by relative and absolute path */
    char *reply = NULL;
    const char *m1 = "{\"op\":\"load\",\"path\":\"mask.so\",\"config\":\"1\"}";
    CHECK_RC(lp_sampler_store_control(st, m1, strlen(m1), &reply), 0);
    CHECK(reply && strstr(reply, "\"name\":\"mask-tokens\""), "%s", reply ? reply : "");
    free(reply);
    CHECK(!marker_made());
    snprintf(p, sizeof(p), "{\"op\":\"load\",\"path\":\"%s/marker.so\"}", good);
    CHECK_RC(lp_sampler_store_control(st, p, strlen(p), &reply), 0);
    CHECK(reply && strstr(reply, "\"name\":\"marker\""), "%s", reply ? reply : "");
    free(reply);
    CHECK(marker_made(), "the marker plugin loaded, but its constructor left no %s", marker);
    CHECK(lp_sampler_store_version(st) == 3);
    lp_sampler_store_destroy(&st);

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
    CHECK(system(cmd) == 0);
    return CHECK_DONE();
}
