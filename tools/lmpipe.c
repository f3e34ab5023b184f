/* lmpipe.c - the lmpipe command line: dispatches to one subcommand. */
#include "lmpipe.h"

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    lp_cmd_fn fn;
    const char *help;
} commands[] = {
    {"info", lp_cmd_info, "MODEL                print GGUF metadata and tensors"},
    {"up", lp_cmd_up, "[--config F]         start the pipeline and supervise it"},
    {"run", lp_cmd_run, "--model M --prompt T start a pipeline, generate, stop"},
    {"generate", lp_cmd_generate, "--endpoint EP ...    generate on a running pipeline"},
    {"tokenize", lp_cmd_tokenize, "--model M [--raw]    text on stdin -> token IDs"},
    {"detokenize", lp_cmd_detokenize, "--model M [--special] token IDs on stdin -> text"},
    {"template", lp_cmd_template, "--template F --context C.json   render a chat template"},
    {"tool-calls", lp_cmd_tool_calls, "format|parse|grammar --template F ...   tool calls and reasoning"},
    {"sample", lp_cmd_sample, "--logits F --params J --draws N   draw tokens from one logit row"},
    {"stats", lp_cmd_stats, "--endpoint EP         a coordinator's requests and engine groups"},
    {"sampler", lp_cmd_sampler, "--endpoint EP get|set|load|unload|rollback   live swap"},
    {"bench", lp_cmd_bench, "--model M            prefill and decode tokens/s"},
    {"score", lp_cmd_score, "--model M --ids I,.. top log-probabilities per position"},
    {"keygen", lp_cmd_keygen, "-o BASE              CURVE key pair: BASE.key (0600), BASE.pub"},
    {"schema", lp_cmd_schema, "[--json | --markdown http|nats]   the request schema's fields"},
    {"grammar", lp_cmd_grammar, "check|maskbench --vocab V ...  constrained decoding checks"},
    {"synth", lp_cmd_synth, "--arch A --shape S --type T --vocab V -o OUT  random-weight model"},
};

int lp_cmd_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "lmpipe %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: lmpipe COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    lp_log_init("lmpipe");
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "lmpipe: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
