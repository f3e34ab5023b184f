/* edge.c - the process shell of lmpipe-http and lmpipe-nats (see edge.h). */
#include "edge.h"

#include "sdnotify.h"
#include "service.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static void on_signal(uv_signal_t *h, int signum)
{
    (void)signum;
    lp_sdnotify_send("STOPPING=1");
    uv_stop(h->loop);
}

void lp_edge_init(lp_edge_t *e)
{
    signal(SIGPIPE, SIG_IGN);
    lp_service_watch_parent();
    uv_loop_init(&e->loop);
    uv_signal_init(&e->loop, &e->sigint);
    uv_signal_init(&e->loop, &e->sigterm);
    uv_signal_start(&e->sigint, on_signal, SIGINT);
    uv_signal_start(&e->sigterm, on_signal, SIGTERM);
}

void lp_edge_run(lp_edge_t *e)
{
    lp_sdnotify_t *watchdog = NULL;
    if (lp_sdnotify_watchdog_new(&e->loop, &watchdog) == 0) uv_run(&e->loop, UV_RUN_DEFAULT);
    lp_sdnotify_watchdog_destroy(&watchdog);
}

void lp_edge_close(lp_edge_t *e)
{
    uv_close((uv_handle_t *)&e->sigint, NULL);
    uv_close((uv_handle_t *)&e->sigterm, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT); /* the close callbacks */
}

int lp_edge_int_arg(const char *prog, const char *flag, const char *s, long long lo, long long hi,
                    long long *out)
{
    char *end;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || x < lo || x > hi) {
        fprintf(stderr, "%s: %s: '%s' is not an integer in [%lld, %lld]\n", prog, flag, s, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int lp_edge_http_status(enum lp_error_kind kind)
{
    switch (kind) {
    case LP_EK_INVALID_REQUEST:
    case LP_EK_CONTEXT_LENGTH: return 400;
    case LP_EK_NOT_FOUND: return 404;
    case LP_EK_RATE_LIMITED: return 429;
    case LP_EK_UNAVAILABLE: return 503;
    case LP_EK_DEADLINE: return 504;
    default: return 500;
    }
}

const char *lp_edge_openai_type(enum lp_error_kind kind)
{
    switch (kind) {
    case LP_EK_INVALID_REQUEST:
    case LP_EK_CONTEXT_LENGTH:
    case LP_EK_NOT_FOUND: return "invalid_request_error";
    case LP_EK_RATE_LIMITED: return "requests"; /* as OpenAI writes a 429, so that SDKs back off */
    default: return "server_error";
    }
}

const char *lp_edge_openai_code(enum lp_error_kind kind)
{
    switch (kind) {
    case LP_EK_CONTEXT_LENGTH: return "context_length_exceeded";
    case LP_EK_RATE_LIMITED: return "rate_limit_exceeded";
    case LP_EK_DEADLINE: return "deadline_exceeded";
    default: return NULL;
    }
}

const char *lp_edge_nats_code(enum lp_error_kind kind)
{
    switch (kind) {
    case LP_EK_INVALID_REQUEST:
    case LP_EK_CONTEXT_LENGTH:
    case LP_EK_NOT_FOUND: return "invalid_request";
    case LP_EK_DEADLINE: return "deadline_exceeded";
    default: return "internal";
    }
}
