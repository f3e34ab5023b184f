/* cmd-stats.c - `lmpipe stats`: a running service's StatsReply: its
 * message counters, and for the coordinator its requests and each engine
 * group (docs/PIPELINE.md). */
#include "lmpipe.h"

#include "client.h"
#include "error.h"
#include "frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "usage: lmpipe stats --endpoint EP [--timeout MS] [--curve-key F.key --server-key KEY]\n" \
              "Prints a service's message counts; for the coordinator also its requests\n" \
              "and one line per engine group."

static void print_stats(const Lmpipe__StatsReply *s, Lmpipe__Role role)
{
    printf("messages: %llu, malformed %llu, errors %llu\n", (unsigned long long)s->n_msgs,
           (unsigned long long)s->n_malformed, (unsigned long long)s->n_errors);
    printf("auth refused: %llu\n", (unsigned long long)s->auth_refused);
    if (role != LMPIPE__ROLE__ROLE_COORDINATOR) return;
    printf("requests: %llu active, %llu running, %llu waiting\n", (unsigned long long)s->n_active,
           (unsigned long long)s->n_running, (unsigned long long)s->n_waiting);
    printf("tokens: %llu prompt, %llu generated\n", (unsigned long long)s->prompt_tokens,
           (unsigned long long)s->generation_tokens);
    if (s->kv_blocks_total || s->prefix_cache_queries) {
        double rate = s->prefix_cache_queries ? 100.0 * (double)s->prefix_cache_hits / (double)s->prefix_cache_queries : 0;
        printf("prefix cache: %llu of %llu prompt tokens reused (%.1f%%); kv blocks %u used, %u cached, "
               "%u total; %llu preempted\n", (unsigned long long)s->prefix_cache_hits,
               (unsigned long long)s->prefix_cache_queries, rate, s->kv_blocks_used, s->kv_blocks_cached,
               s->kv_blocks_total, (unsigned long long)s->kv_preemptions);
        printf("kv blocks held at most: %u\n", s->kv_blocks_peak);
    }
    if (s->kv_swa_blocks_total)
        printf("sliding-window layers' kv: blocks %u used, %u cached, %u total; %u held at most\n",
               s->kv_swa_blocks_used, s->kv_swa_blocks_cached, s->kv_swa_blocks_total,
               s->kv_swa_blocks_peak);
    printf("finished:");
    for (size_t i = 0; i < s->n_finish_reasons; i++)
        printf(" %s %llu", s->finish_reasons[i]->kind, (unsigned long long)s->finish_reasons[i]->n);
    printf("\nrestarts:");
    for (size_t i = 0; i < s->n_stage_restarts; i++)
        printf(" %s %llu", s->stage_restarts[i]->kind, (unsigned long long)s->stage_restarts[i]->n);
    printf(", requests re-driven %llu\n", (unsigned long long)s->requests_redriven);
    for (size_t i = 0; i < s->n_groups; i++) {
        const Lmpipe__GroupStats *g = s->groups[i];
        printf("group %s: %s, slots %u/%u, running %llu, waiting %llu, steps %llu, requests %llu, "
               "dropped %llu, rows %s, engine %s, sampler %s\n",
               g->name, g->ready ? "ready" : "down", g->slots_used, g->slots_total,
               (unsigned long long)g->n_running, (unsigned long long)g->n_waiting,
               (unsigned long long)g->steps, (unsigned long long)g->n_requests,
               (unsigned long long)g->n_dropped, g->ready ? (g->shm ? "ring" : "inline") : "-",
               g->engine, g->sampler);
        if (g->kv_blocks_total)
            printf("group %s kv: blocks %u used, %u cached, %u total; %llu prompt tokens reused\n", g->name,
                   g->kv_blocks_used, g->kv_blocks_cached, g->kv_blocks_total,
                   (unsigned long long)g->prefix_cache_hits);
        if (g->ready)
            printf("group %s prefix cache: %s%s\n", g->name,
                   g->prefix_cache_off && g->prefix_cache_off[0] ? "off, " : "on",
                   g->prefix_cache_off ? g->prefix_cache_off : "");
        if (g->kv_swa_blocks_total)
            printf("group %s sliding-window kv (window %u): blocks %u used, %u cached, %u total\n",
                   g->name, g->kv_swa_window, g->kv_swa_blocks_used, g->kv_swa_blocks_cached,
                   g->kv_swa_blocks_total);
    }
}

int lp_cmd_stats(int argc, char **argv)
{
    const char *endpoint = NULL, *key = NULL, *server_key = NULL;
    int timeout = 10000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts(USAGE);
            return 0;
        }
        if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
        else if (!strcmp(argv[i], "--curve-key") && i + 1 < argc) key = argv[++i];
        else if (!strcmp(argv[i], "--server-key") && i + 1 < argc) server_key = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (!*argv[i] || *end || v < 1 || v > 3600000)
                return lp_cmd_usage_error("stats", "--timeout: '%s' is not 1..3600000 ms", argv[i]);
            timeout = (int)v;
        } else
            return lp_cmd_usage_error("stats", "unknown or incomplete option '%s'\n%s", argv[i], USAGE);
    }
    if (!endpoint) return lp_cmd_usage_error("stats", "%s", USAGE);
    lp_client_t *c = NULL;
    int rc = lp_client_new_curve(endpoint, key, server_key, &c);
    /* Any service: the coordinator's hello waits for its pipeline. */
    if (!rc) rc = lp_client_hello_as(c, LMPIPE__ROLE__ROLE_UNKNOWN, timeout);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__StatsRequest sr = LMPIPE__STATS_REQUEST__INIT;
    m.id = 1;
    m.body_case = LMPIPE__MSG__BODY_STATS;
    m.stats = &sr;
    if (!rc) rc = lp_frame_send(lp_client_socket(c), NULL, 0, &m, NULL, 0);
    lp_frame_t f = {0};
    while (!rc) {
        rc = lp_client_recv(c, timeout, &f);
        if (rc) break;
        if (f.msg->id == 1) break;
        lp_frame_clear(&f);
    }
    if (!rc && f.msg->body_case == LMPIPE__MSG__BODY_STATS_REPLY) print_stats(f.msg->stats_reply, lp_client_server_hello(c)->role);
    else if (!rc) rc = lp_error_set(LP_ERR(EPROTO), "%s", f.msg->body_case == LMPIPE__MSG__BODY_ERROR
                                                              ? f.msg->error->message : "not a StatsReply");
    if (rc) fprintf(stderr, "lmpipe stats: %s: %s\n", endpoint, lp_error_msg());
    lp_frame_clear(&f);
    lp_client_destroy(&c);
    return rc ? 1 : 0;
}
