/* gen-args.h - the generation flags that lmpipe run, generate and bench
 * share, turned into a GenerateRequest (sampling parameters as llama.cpp
 * /completion JSON). */
#ifndef LP_TOOLS_GEN_ARGS_H
#define LP_TOOLS_GEN_ARGS_H

#include <stdbool.h>

#include "lmpipe.pb-c.h"

typedef struct lp_gen_args {
    const char *prompt;
    const char *params;     /* --params JSON: more /completion fields */
    int max_tokens;         /* -1: until EOS */
    const char *temperature, *seed, *top_k, *top_p, *min_p; /* as given */
    const char *stops[16];
    int n_stops;
    bool ids;               /* print a JSON list of the generated ids */
    bool no_bos;
    bool ignore_eos;
    char json[4096];        /* built params_json */
    ProtobufCBinaryData stop_bin[16];
} lp_gen_args_t;

void lp_gen_args_init(lp_gen_args_t *a);
/* Try to take argv[*i] (and its value); 1 when taken, 0 when not a
 * generation flag, -1 on a bad value (message printed). */
int lp_gen_args_take(lp_gen_args_t *a, const char *cmd, int argc, char **argv, int *i);
/* Fill g (pointers into a).  -1 with a message on a bad combination. */
int lp_gen_args_request(lp_gen_args_t *a, const char *cmd, Lmpipe__GenerateRequest *g);
/* Print the result as lmpipe run prints it: the text, or the ids in JSON. */
struct lp_generation;
int lp_gen_args_print(const lp_gen_args_t *a, const char *cmd, const struct lp_generation *gen);
extern const char lp_gen_args_usage[];

#endif
