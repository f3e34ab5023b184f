/* config_test.c - the `key = value` configuration parser. */
#include "config.h"

#include "../tests/check.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/lmpipe-config-test-%d", (int)getpid());
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

int main(void)
{
    lp_config_t *c;
    CHECK_RC(lp_config_load(write_tmp("# comment\n\nmodel = a b.gguf  # trailing\n"
                                      "engine.max_seqs=8\nno_shm = true\nmodel = c.gguf\n"), &c), 0);
    if (c) {
        CHECK(!strcmp(lp_config_get(c, "model", ""), "c.gguf"));
        CHECK(!strcmp(lp_config_get(c, "absent", "def"), "def"));
        int64_t v;
        CHECK_RC(lp_config_get_int(c, "engine.max_seqs", 0, &v), 0);
        CHECK(v == 8);
        bool b;
        CHECK_RC(lp_config_get_bool(c, "no_shm", false, &b), 0);
        CHECK(b);
        CHECK_RC(lp_config_get_int(c, "model", 0, &v), LP_ERR(EINVAL));
        CHECK(strstr(lp_error_msg(), "model") != NULL);
        CHECK(lp_config_n_keys(c) == 3);
        lp_config_destroy(&c);
    }
    /* A '#' inside a value (Z85 keys hold it) is no comment. */
    CHECK_RC(lp_config_load(write_tmp("server_key = ab#cd  # a comment\n#x = 1\n"), &c), 0);
    if (c) {
        CHECK(!strcmp(lp_config_get(c, "server_key", ""), "ab#cd"));
        CHECK(lp_config_n_keys(c) == 1);
        lp_config_destroy(&c);
    }
    CHECK_RC(lp_config_load(write_tmp("model\n"), &c), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), ":1:") != NULL);
    CHECK_RC(lp_config_load(write_tmp("a b = c\n"), &c), LP_ERR(EINVAL));
    CHECK_RC(lp_config_load("/nonexistent/lmpipe.conf", &c), LP_ERR(ENOENT));
    unlink(write_tmp(""));
    return CHECK_DONE();
}
