/* gen-args.c - shared generation flags (see gen-args.h). */
#include "gen-args.h"

#include "client.h"
#include "error.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char lp_gen_args_usage[] =
    "  --prompt TEXT        the prompt (\"\" is BOS alone)\n"
    "  --max-tokens N       new tokens at most (default: until EOS)\n"
    "  --temperature T      --seed S  --top-k K  --top-p P  --min-p P\n"
    "  --params JSON        more llama.cpp /completion fields, e.g. '{\"samplers\":[\"top_k\"]}'\n"
    "                       (read as lmpipe-http reads /completion: docs/HTTP.md)\n"
    "  --stop TEXT          a stop string (repeatable, up to 16)\n"
    "  --ignore-eos         --no-bos\n"
    "  --deadline-ms MS     the pipeline ends the request with an error (\"deadline\") when\n"
    "                       it has not finished MS after it arrived (default: none)\n"
    "  --ids                print a JSON list of the generated token ids\n";

const char lp_gen_args_exit_usage[] =
    "exit status: 0 when the generation ends (end of text, --max-tokens or a --stop\n"
    "string), 3 when the context limit cuts it short (the text so far is printed and\n"
    "stderr gives the prompt, generated and context token counts), 2 for bad usage,\n"
    "4 when the connection to the coordinator is lost before the final event (it\n"
    "stopped or crashed; noticed within about 3 s), 1 for any other error (the\n"
    "pipeline refused or ended the request: stderr says why, e.g. \"draining\" or\n"
    "\"shutting down\" while it stops)\n";

void lp_gen_args_init(lp_gen_args_t *a)
{
    memset(a, 0, sizeof(*a));
    a->max_tokens = -1;
    lp_sampler_params_default(&a->sp);
}

void lp_gen_args_clear(lp_gen_args_t *a)
{
    if (a->has_rq) lp_request_clear(&a->rq);
    a->has_rq = false;
    lp_json_doc_destroy(&a->doc);
    lp_sampling_pb_destroy(&a->pb);
    free(a->stop_bin);
    a->stop_bin = NULL;
}

/* Plain decimal: [-]digits[.digits][e[+-]digits] (fraction and exponent
 * only with `real`).  strtod alone also takes "nan", "inf", hex floats and
 * leading blanks, which then came back from the sampler as a JSON error. */
static bool decimal(const char *s, bool real)
{
    size_t digits = 0;
    if (*s == '-') s++;
    for (; *s >= '0' && *s <= '9'; s++) digits++;
    if (real && *s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++) digits++;
    if (!digits) return false;
    if (real && (*s == 'e' || *s == 'E')) {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return false;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

int lp_gen_args_int(const char *cmd, const char *flag, const char *v, long long lo, long long hi,
                    long long *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!decimal(v, false) || *end) {
        fprintf(stderr, "lmpipe %s: %s: '%s' is not a decimal integer\n", cmd, flag, v);
        return -1;
    }
    if (errno) {
        fprintf(stderr, "lmpipe %s: %s: %s is out of range [%lld, %lld]\n", cmd, flag, v, lo, hi);
        return -1;
    }
    if (n < lo || n > hi) {
        fprintf(stderr, "lmpipe %s: %s: %s is out of range [%lld, %lld]\n", cmd, flag, v, lo, hi);
        return -1;
    }
    *out = n;
    return 0;
}

/* A finite decimal number that a float holds; -1 with a message naming the
 * flag. */
static int parse_float(const char *cmd, const char *flag, const char *v, float *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!decimal(v, true) || *end) {
        fprintf(stderr, "lmpipe %s: %s: '%s' is not a decimal number (such as 0.7 or 1e-3)\n",
                cmd, flag, v);
        return -1;
    }
    if (!isfinite((float)x)) {
        fprintf(stderr, "lmpipe %s: %s: %s is out of range for a float\n", cmd, flag, v);
        return -1;
    }
    *out = (float)x;
    return 0;
}

/* The sampling flags: their parameter, and how to read it. */
static const struct {
    const char *flag, *name;
    enum lp_sampler_field field;
} sampling_flags[] = {
    {"--temperature", "temperature", LP_SP_TEMPERATURE}, {"--seed", "seed", LP_SP_SEED},
    {"--top-k", "top_k", LP_SP_TOP_K}, {"--top-p", "top_p", LP_SP_TOP_P},
    {"--min-p", "min_p", LP_SP_MIN_P},
};

static int take_sampling(lp_gen_args_t *a, const char *cmd, enum lp_sampler_field field,
                         const char *flag, const char *v)
{
    lp_sampler_params_t *p = &a->sp;
    long long n;
    int rc = 0;
    switch (field) {
    case LP_SP_TEMPERATURE: rc = parse_float(cmd, flag, v, &p->temperature); break;
    case LP_SP_TOP_P: rc = parse_float(cmd, flag, v, &p->top_p); break;
    case LP_SP_MIN_P: rc = parse_float(cmd, flag, v, &p->min_p); break;
    case LP_SP_TOP_K:
        if (!(rc = lp_gen_args_int(cmd, flag, v, 0, INT32_MAX, &n))) p->top_k = (int32_t)n;
        break;
    case LP_SP_SEED:
        /* as the "seed" field: -1 (random) up to 2^53 */
        if (!(rc = lp_gen_args_int(cmd, flag, v, -1, (long long)1 << 53, &n))) p->seed = n;
        break;
    default: return -1;
    }
    if (rc) return -1;
    p->set |= 1ull << field;
    /* The parameter's own range (top_p in [0, 1], ...), named by its flag. */
    if (lp_sampler_params_validate(p)) {
        fprintf(stderr, "lmpipe %s: %s: %s\n", cmd, flag, lp_error_msg());
        return -1;
    }
    return 0;
}

int lp_gen_args_take(lp_gen_args_t *a, const char *cmd, int argc, char **argv, int *i)
{
    const char *f = argv[*i];
    static const char *valued[] = {"--prompt", "--params", "--max-tokens", "--stop", "--deadline-ms"};
    if (!strcmp(f, "--ids")) return a->ids = true, 1;
    if (!strcmp(f, "--no-bos")) return a->no_bos = true, 1;
    if (!strcmp(f, "--ignore-eos")) return a->ignore_eos = true, 1;
    size_t k, s;
    for (k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
        if (!strcmp(f, valued[k])) break;
    for (s = 0; s < sizeof(sampling_flags) / sizeof(sampling_flags[0]); s++)
        if (!strcmp(f, sampling_flags[s].flag)) break;
    if (k == sizeof(valued) / sizeof(valued[0]) &&
        s == sizeof(sampling_flags) / sizeof(sampling_flags[0]))
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "lmpipe %s: %s needs a value\n", cmd, f);
        return -1;
    }
    const char *v = argv[++*i];
    if (s < sizeof(sampling_flags) / sizeof(sampling_flags[0]))
        return take_sampling(a, cmd, sampling_flags[s].field, f, v) ? -1 : 1;
    switch (k) {
    case 0: a->prompt = v; break;
    case 1: a->params = v; break;
    case 2: {
        long long n;
        if (lp_gen_args_int(cmd, f, v, -1, 1 << 24, &n)) return -1;
        if (n == 0) {
            fprintf(stderr, "lmpipe %s: --max-tokens: '%s' is not a positive integer (or -1)\n",
                    cmd, v);
            return -1;
        }
        a->max_tokens = (int)n;
        break;
    }
    case 4: {
        long long n;
        if (lp_gen_args_int(cmd, f, v, 1, 86400000, &n)) return -1;
        a->deadline_ms = (uint32_t)n;
        break;
    }
    default:
        if (a->n_stops == 16) {
            fprintf(stderr, "lmpipe %s: at most 16 --stop strings\n", cmd);
            return -1;
        }
        a->stops[a->n_stops++] = v;
    }
    return 1;
}

/* --params: a llama.cpp /completion body read through the request schema
 * (lib/request-schema.h), as lmpipe-http reads one: its sampling fields
 * join the flags' (a field given both ways is refused), its request fields
 * fill g where the flags leave them unset. */
static int take_params(lp_gen_args_t *a, const char *cmd, Lmpipe__GenerateRequest *g)
{
    if (lp_json_parse(a->params, strlen(a->params), &a->doc)) {
        fprintf(stderr, "lmpipe %s: --params: %s\n", cmd, lp_error_msg());
        return -1;
    }
    lp_request_t *rq = &a->rq;
    a->has_rq = true;
    if (lp_request_read(lp_json_root(a->doc), LP_RS_COMPLETION, LP_RS_HTTP | LP_RS_PARTIAL, rq)) {
        fprintf(stderr, "lmpipe %s: --params: %s\n", cmd, lp_error_msg());
        return -1;
    }
    for (size_t s = 0; s < sizeof(sampling_flags) / sizeof(sampling_flags[0]); s++)
        if (rq->sp.set & a->sp.set & (1ull << sampling_flags[s].field)) {
            fprintf(stderr, "lmpipe %s: --params: %s is given by %s too\n", cmd, sampling_flags[s].name,
                    sampling_flags[s].flag);
            return -1;
        }
    lp_sampler_params_overlay(&a->sp, &rq->sp);
    if (rq->n_prompts && rq->prompts[0].ids) {
        fprintf(stderr, "lmpipe %s: --params: prompt: token ids are not taken here; give text\n", cmd);
        return -1;
    }
    /* As --max-tokens. */
    if (rq->n_predict > 1 << 24) {
        fprintf(stderr, "lmpipe %s: --params: n_predict: must be at most %d (or -1)\n", cmd, 1 << 24);
        return -1;
    }
    if (!g->n_predict && rq->n_predict) g->n_predict = rq->n_predict;
    g->ignore_eos = g->ignore_eos || rq->ignore_eos;
    if (!g->deadline_ms) g->deadline_ms = rq->deadline_ms;
    g->t_max_predict_ms = rq->t_max_predict_ms;
    if (!g->n_stop && rq->n_stops) {
        free(a->stop_bin);
        a->stop_bin = calloc(rq->n_stops, sizeof(*a->stop_bin));
        if (!a->stop_bin) {
            fprintf(stderr, "lmpipe %s: out of memory\n", cmd);
            return -1;
        }
        for (size_t i = 0; i < rq->n_stops; i++) {
            a->stop_bin[i].data = (uint8_t *)rq->stops[i];
            a->stop_bin[i].len = rq->stop_lens[i];
        }
        g->stop = a->stop_bin;
        g->n_stop = rq->n_stops;
    }
    if (!g->prompt.len && rq->n_prompts) {
        g->prompt.data = (uint8_t *)rq->prompts[0].text;
        g->prompt.len = rq->prompts[0].len;
    }
    return 0;
}

int lp_gen_args_request(lp_gen_args_t *a, const char *cmd, Lmpipe__GenerateRequest *g)
{
    lmpipe__generate_request__init(g);
    lp_gen_args_clear(a);
    if (!a->prompt) {
        fprintf(stderr, "lmpipe %s: --prompt is required (\"\" for BOS alone)\n", cmd);
        return -1;
    }
    g->prompt.data = (uint8_t *)a->prompt;
    g->prompt.len = strlen(a->prompt);
    g->n_predict = a->max_tokens > 0 ? a->max_tokens : 0; /* 0: --params or until EOS */
    g->deadline_ms = a->deadline_ms;
    g->no_bos = a->no_bos;
    g->ignore_eos = a->ignore_eos;
    if (a->n_stops) {
        a->stop_bin = calloc((size_t)a->n_stops, sizeof(*a->stop_bin));
        if (!a->stop_bin) {
            fprintf(stderr, "lmpipe %s: out of memory\n", cmd);
            return -1;
        }
        for (int i = 0; i < a->n_stops; i++) {
            a->stop_bin[i].data = (uint8_t *)a->stops[i];
            a->stop_bin[i].len = strlen(a->stops[i]);
        }
        g->n_stop = (size_t)a->n_stops;
        g->stop = a->stop_bin;
    }
    if (a->params && take_params(a, cmd, g)) {
        lp_gen_args_clear(a);
        return -1;
    }
    /* the sampling fields given, typed (lib/sampling-wire.h) */
    if (a->sp.set) {
        if (lp_sampling_pb_new(&a->sp, &a->pb)) {
            fprintf(stderr, "lmpipe %s: out of memory\n", cmd);
            lp_gen_args_clear(a);
            return -1;
        }
        g->sampling = lp_sampling_pb_msg(a->pb);
    }
    return 0;
}
int lp_gen_args_print(const lp_gen_args_t *a, const char *cmd, const lp_generation_t *gen)
{
    if (gen->reason == LMPIPE__FINISH_REASON__FINISH_ERROR) {
        fprintf(stderr, "lmpipe %s: %s\n", cmd, gen->error[0] ? gen->error : "generation failed");
        return 1;
    }
    if (a->ids) {
        putchar('[');
        for (size_t i = 0; i < gen->n_ids; i++) printf("%s%d", i ? ", " : "", gen->ids[i]);
        printf("]\n");
    } else {
        fwrite(gen->text, 1, gen->text_len, stdout);
        putchar('\n');
    }
    if (fflush(stdout) != 0) return 1;
    return lp_gen_args_finish(cmd, gen);
}

int lp_gen_args_finish(const char *cmd, const lp_generation_t *gen)
{
    if (gen->reason != LMPIPE__FINISH_REASON__FINISH_CONTEXT) return 0;
    /* Unlike --max-tokens (the caller's own limit), the context cut the
     * text short of what was asked: say so, with the numbers to size it. */
    fprintf(stderr, "lmpipe %s: stopped at the context limit (finish reason \"context\"): %u prompt "
            "tokens + %u generated tokens, context size ", cmd, gen->n_prompt, gen->n_generated);
    if (gen->n_ctx) fprintf(stderr, "%u\n", gen->n_ctx);
    else fprintf(stderr, "unknown\n");
    return LP_GEN_EXIT_CONTEXT;
}
