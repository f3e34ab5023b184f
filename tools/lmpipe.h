/* lmpipe.h - the subcommands of the lmpipe command line.  Each lives in its
 * own cmd-*.c file and returns the process exit status. */
#ifndef LP_TOOLS_LMPIPE_H
#define LP_TOOLS_LMPIPE_H

typedef int (*lp_cmd_fn)(int argc, char **argv);

int lp_cmd_info(int argc, char **argv);
int lp_cmd_up(int argc, char **argv);
int lp_cmd_run(int argc, char **argv);
int lp_cmd_generate(int argc, char **argv);
int lp_cmd_tokenize(int argc, char **argv);
int lp_cmd_detokenize(int argc, char **argv);
int lp_cmd_sample(int argc, char **argv);
int lp_cmd_sampler(int argc, char **argv);
int lp_cmd_score(int argc, char **argv);
int lp_cmd_synth(int argc, char **argv);
int lp_cmd_bench(int argc, char **argv);
int lp_cmd_keygen(int argc, char **argv);
int lp_cmd_stats(int argc, char **argv);
int lp_cmd_schema(int argc, char **argv);
int lp_cmd_grammar(int argc, char **argv);
int lp_cmd_template(int argc, char **argv);
int lp_cmd_tool_calls(int argc, char **argv);

/* Print "lmpipe CMD: message" to stderr and return 2 (usage errors). */
int lp_cmd_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
