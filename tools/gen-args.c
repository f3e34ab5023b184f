/* gen-args.c - shared generation flags (see gen-args.h). */
#include "gen-args.h"

#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char lp_gen_args_usage[] =
    "  --prompt TEXT        the prompt (\"\" is BOS alone)\n"
    "  --max-tokens N       new tokens at most (default: until EOS)\n"
    "  --temperature T      --seed S  --top-k K  --top-p P  --min-p P\n"
    "  --params JSON        more llama.cpp /completion fields, e.g. '{\"samplers\":[\"top_k\"]}'\n"
    "  --stop TEXT          a stop string (repeatable, up to 16)\n"
    "  --ignore-eos         --no-bos\n"
    "  --ids                print a JSON list of the generated token ids\n";

void lp_gen_args_init(lp_gen_args_t *a)
{
    memset(a, 0, sizeof(*a));
    a->max_tokens = -1;
}

static int is_number(const char *s)
{
    char *end;
    strtod(s, &end);
    return *s && !*end;
}

int lp_gen_args_take(lp_gen_args_t *a, const char *cmd, int argc, char **argv, int *i)
{
    const char *f = argv[*i];
    static const char *valued[] = {"--prompt", "--params", "--max-tokens", "--temperature",
                                   "--seed", "--top-k", "--top-p", "--min-p", "--stop"};
    if (!strcmp(f, "--ids")) return a->ids = true, 1;
    if (!strcmp(f, "--no-bos")) return a->no_bos = true, 1;
    if (!strcmp(f, "--ignore-eos")) return a->ignore_eos = true, 1;
    size_t k;
    for (k = 0; k < sizeof(valued) / sizeof(valued[0]); k++)
        if (!strcmp(f, valued[k])) break;
    if (k == sizeof(valued) / sizeof(valued[0])) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "lmpipe %s: %s needs a value\n", cmd, f);
        return -1;
    }
    const char *v = argv[++*i];
    switch (k) {
    case 0: a->prompt = v; break;
    case 1: a->params = v; break;
    case 2: {
        char *end;
        long n = strtol(v, &end, 10);
        if (!*v || *end || n < -1 || n == 0 || n > 1 << 24) {
            fprintf(stderr, "lmpipe %s: --max-tokens: '%s' is not a positive integer (or -1)\n", cmd, v);
            return -1;
        }
        a->max_tokens = (int)n;
        break;
    }
    case 8:
        if (a->n_stops == 16) {
            fprintf(stderr, "lmpipe %s: at most 16 --stop strings\n", cmd);
            return -1;
        }
        a->stops[a->n_stops++] = v;
        break;
    default:
        if (!is_number(v)) {
            fprintf(stderr, "lmpipe %s: %s: '%s' is not a number\n", cmd, f, v);
            return -1;
        }
        if (k == 3) a->temperature = v;
        else if (k == 4) a->seed = v;
        else if (k == 5) a->top_k = v;
        else if (k == 6) a->top_p = v;
        else a->min_p = v;
    }
    return 1;
}

int lp_gen_args_request(lp_gen_args_t *a, const char *cmd, Lmpipe__GenerateRequest *g)
{
    lmpipe__generate_request__init(g);
    if (!a->prompt) {
        fprintf(stderr, "lmpipe %s: --prompt is required (\"\" for BOS alone)\n", cmd);
        return -1;
    }
    /* Numbers were checked by strtod; they go into the JSON as given. */
    char *j = a->json;
    size_t cap = sizeof(a->json), n = 0;
    const char *names[] = {"temperature", "seed", "top_k", "top_p", "min_p"};
    const char *vals[] = {a->temperature, a->seed, a->top_k, a->top_p, a->min_p};
    n += (size_t)snprintf(j + n, cap - n, "{");
    bool first = true;
    for (int i = 0; i < 5; i++) {
        if (!vals[i]) continue;
        n += (size_t)snprintf(j + n, cap - n, "%s\"%s\":%s", first ? "" : ",", names[i], vals[i]);
        first = false;
    }
    if (a->params) {
        /* Merge: the --params object's members follow ours. */
        const char *p = a->params;
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        size_t len = strlen(p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\n' || p[len - 1] == '\t')) len--;
        if (*p != '{' || len < 2 || p[len - 1] != '}') {
            fprintf(stderr, "lmpipe %s: --params: not a JSON object\n", cmd);
            return -1;
        }
        const char *inner = p + 1;
        size_t ilen = len - 2;
        bool empty = true;
        for (size_t i = 0; i < ilen; i++)
            if (inner[i] != ' ' && inner[i] != '\n' && inner[i] != '\t') empty = false;
        if (!empty) n += (size_t)snprintf(j + n, cap - n, "%s%.*s", first ? "" : ",", (int)ilen, inner);
    }
    n += (size_t)snprintf(j + n, cap - n, "}");
    if (n >= cap) {
        fprintf(stderr, "lmpipe %s: --params is too long\n", cmd);
        return -1;
    }
    g->prompt.data = (uint8_t *)a->prompt;
    g->prompt.len = strlen(a->prompt);
    g->n_predict = a->max_tokens > 0 ? a->max_tokens : 0; /* 0: params or unlimited */
    g->params_json = a->json;
    g->no_bos = a->no_bos;
    g->ignore_eos = a->ignore_eos;
    for (int i = 0; i < a->n_stops; i++) {
        a->stop_bin[i].data = (uint8_t *)a->stops[i];
        a->stop_bin[i].len = strlen(a->stops[i]);
    }
    g->n_stop = (size_t)a->n_stops;
    g->stop = a->stop_bin;
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
    return fflush(stdout) == 0 ? 0 : 1;
}
