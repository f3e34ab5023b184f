/* cmd-synth.c - `lmpipe synth`: write a random-weight model of a real shape
 * (tools/synth.c does the work). */
#include "lmpipe.h"

#include "error.h"
#include "synth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints the usage to `f`; returns 2, the exit status of a usage error. */
static int usage(FILE *f)
{
    fprintf(f,
            "usage: lmpipe synth --arch llama|qwen2|qwen3|gemma3|gemma4|qwen3moe|gpt-oss\n"
            "                    --shape SHAPE --type TYPE\n"
            "                    --vocab VOCAB.gguf [--seed S] [--vocab-size N] [--layers N]\n"
            "                    [--threads N]\n"
            "                    -o OUT.gguf\n"
            "  shapes: %s\n  types:  %s\n  vocab size: default the shape's (tiny: the vocab "
            "file's; gemma4-small too); extra tokens are [PADn]\n  layers: the shape's first N "
            "(a shape too big to bench whole)\n  threads: default one per CPU; the output does "
            "not depend on it\n",
            lp_synth_shape_names, lp_synth_type_names);
    return 2;
}

int lp_cmd_synth(int argc, char **argv)
{
    lp_synth_opts_t o = {0};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            lp_cmd_usage_error("synth", "%s: needs a value", a);
            return usage(stderr);
        }
        const char *v = argv[++i];
        char *end;
        if (!strcmp(a, "--arch")) o.arch = v;
        else if (!strcmp(a, "--shape")) o.shape = v;
        else if (!strcmp(a, "--type")) o.type = v;
        else if (!strcmp(a, "--vocab")) o.vocab = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) out = v;
        else if (!strcmp(a, "--seed")) {
            errno = 0;
            o.seed = strtoull(v, &end, 0);
            if (errno || *end || !*v || *v == '-')
                return lp_cmd_usage_error("synth", "--seed '%s': not a number", v);
        } else if (!strcmp(a, "--vocab-size")) {
            long n = strtol(v, &end, 10);
            if (*end || !*v || n < 1 || n > (1L << 24))
                return lp_cmd_usage_error("synth", "--vocab-size '%s': not 1 to 16777216", v);
            o.n_vocab = (uint32_t)n;
        } else if (!strcmp(a, "--layers")) {
            long n = strtol(v, &end, 10);
            if (*end || !*v || n < 1 || n > 1024)
                return lp_cmd_usage_error("synth", "--layers '%s': not 1 to 1024", v);
            o.n_layer = (uint32_t)n;
        } else if (!strcmp(a, "--threads")) {
            long n = strtol(v, &end, 10);
            if (*end || !*v || n < 1 || n > 1024)
                return lp_cmd_usage_error("synth", "--threads '%s': not 1 to 1024", v);
            o.n_threads = (int)n;
        } else {
            lp_cmd_usage_error("synth", "unknown option '%s'", a);
            return usage(stderr);
        }
    }
    if (!o.arch || !o.shape || !o.type || !o.vocab || !out) {
        lp_cmd_usage_error("synth", "--arch, --shape, --type, --vocab and -o are required");
        return usage(stderr);
    }
    if (lp_synth_write(&o, out)) {
        fprintf(stderr, "lmpipe synth: %s\n", lp_error_msg());
        return 1;
    }
    return 0;
}
