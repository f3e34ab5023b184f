/* gen-args.h - the generation flags that lmpipe run and generate share,
 * turned into a GenerateRequest: the sampling flags fill a typed parameter
 * set (lib/sampling-params.h), which is validated and sent typed
 * (SamplingParams, lib/sampling-wire.h) with only the fields given;
 * --params is read through the request schema (lib/request-schema.h). */
#ifndef LP_TOOLS_GEN_ARGS_H
#define LP_TOOLS_GEN_ARGS_H

#include <stdbool.h>

#include "json.h"
#include "lmpipe.pb-c.h"
#include "request-schema.h"
#include "sampling-params.h"
#include "sampling-wire.h"

typedef struct lp_gen_args {
    const char *prompt;
    const char *params;     /* --params JSON: more /completion fields */
    int max_tokens;         /* -1: until EOS */
    lp_sampler_params_t sp; /* --temperature, --seed, ...: the `set` bits say which */
    const char *stops[16];
    int n_stops;
    bool ids;               /* print a JSON list of the generated ids */
    bool no_bos;
    bool ignore_eos;
    uint32_t deadline_ms;   /* GenerateRequest.deadline_ms; 0: none */
    /* Filled by lp_gen_args_request, freed by lp_gen_args_clear: */
    lp_json_doc_t *doc;     /* the parsed --params (its strings are borrowed) */
    lp_request_t rq;        /* --params read (with has_rq) */
    bool has_rq;
    lp_sampling_pb_t *pb;   /* GenerateRequest.sampling */
    ProtobufCBinaryData *stop_bin;
} lp_gen_args_t;

void lp_gen_args_init(lp_gen_args_t *a);
/* Try to take argv[*i] (and its value); 1 when taken, 0 when not a
 * generation flag, -1 on a bad value (message printed). */
int lp_gen_args_take(lp_gen_args_t *a, const char *cmd, int argc, char **argv, int *i);
/* Fill g (pointers into a, valid until lp_gen_args_clear).  -1 with a
 * message on a bad value or combination. */
int lp_gen_args_request(lp_gen_args_t *a, const char *cmd, Lmpipe__GenerateRequest *g);
/* Free what lp_gen_args_request allocated. */
void lp_gen_args_clear(lp_gen_args_t *a);
/* Print the result as lmpipe run prints it: the text, or the ids in JSON. */
struct lp_generation;
int lp_gen_args_print(const lp_gen_args_t *a, const char *cmd, const struct lp_generation *gen);
/* The exit status of a generation that ended without error (its output is
 * printed): 0, or LP_GEN_EXIT_CONTEXT with the counts on stderr when the
 * context limit cut it short (finish reason "context"). */
#define LP_GEN_EXIT_CONTEXT 3
/* The connection to the coordinator was lost before the final event. */
#define LP_GEN_EXIT_LOST 4
int lp_gen_args_finish(const char *cmd, const struct lp_generation *gen);
/* A plain decimal integer in [lo, hi] for flag; -1 with a message naming it. */
int lp_gen_args_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi,
                    long long *out);
extern const char lp_gen_args_usage[];
extern const char lp_gen_args_exit_usage[]; /* after the command's own options */

#endif
