/* curve_test.c - CURVE on real loopback tcp:// sockets (docs/SECURITY.md).
 *
 *   curve_test pipeline MODEL GOLDEN
 *       the four services on tcp:// with CURVE (lmpipe up's way): a client
 *       on the allow list gets the stories260K goldens; a client with no
 *       key, with a key for another server, or with a key not on the allow
 *       list gets no answer from any service and moves its refusal counter
 *       (StatsReply.auth_refused); a SamplerControl from a key that is not
 *       an admin is refused by the coordinator and by sampler-svc, an
 *       admin's is answered; a peer saying hello as coordinator with a key
 *       not in curve.coordinator is refused by every service; the waiting
 *       queue's share is per key, however many connections a key opens;
 *       and the pipeline still gives the goldens afterwards
 *   curve_test controller SAMPLER_SVC MODEL
 *       a fresh sampler-svc on tcp://: a peer with an allowed key says hello
 *       as coordinator first and is refused; the curve.coordinator key then
 *       becomes the controller (its SamplerClose reaches the sessions, the
 *       other's does not) */
#include "client.h"
#include "curve.h"
#include "error.h"
#include "fileio.h"
#include "hello.h"
#include "json.h"
#include "pipeline.h"
#include "sysinfo.h"

#include "check.h"
#include "sp-json.h"
#include "svc-test-util.h"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char dir[64];
static char host_key[128], host_pub[128], admin_key[128], user_key[128], user_pub[128],
    stranger_key[128], admin_pub[128];

static void make_keys(void)
{
    snprintf(dir, sizeof(dir), "/tmp/curve-test-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    const char *names[4] = {"host", "admin", "user", "stranger"};
    char *keys[4] = {host_key, admin_key, user_key, stranger_key};
    for (int i = 0; i < 4; i++) {
        char base[96];
        snprintf(base, sizeof(base), "%s/%s", dir, names[i]);
        CHECK_RC(lp_curve_keygen(base), 0);
        snprintf(keys[i], 128, "%s.key", base);
    }
    snprintf(host_pub, sizeof(host_pub), "%s/host.pub", dir);
    snprintf(admin_pub, sizeof(admin_pub), "%s/admin.pub", dir);
    snprintf(user_pub, sizeof(user_pub), "%s/user.pub", dir);
}

static void remove_keys(void)
{
    const char *names[8] = {"host.key", "host.pub", "admin.key", "admin.pub",
                            "user.key", "user.pub", "stranger.key", "stranger.pub"};
    for (int i = 0; i < 8; i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Hello as `as` (ROLE_CLIENT or ROLE_COORDINATOR) on a fresh CURVE client;
 * 1: a Hello came back, 0: an Error did (`err` gets it), -1: nothing in
 * timeout_ms. */
static int try_hello(const char *ep, const char *key, const char *server_key, Lmpipe__Role as,
                     int timeout_ms, char *err, size_t cap, lp_client_t **keep)
{
    lp_client_t *c;
    if (err) err[0] = '\0';
    if (lp_client_new_curve(ep, key, server_key, &c) != 0) {
        CHECK(!"lp_client_new_curve", "%s", lp_error_msg());
        return -2;
    }
    Lmpipe__Hello h;
    lp_hello_init(&h, as);
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.id = 7;
    m.body_case = LMPIPE__MSG__BODY_HELLO;
    m.hello = &h;
    int got = -1;
    double deadline = lp_now_ms() + timeout_ms;
    /* Sends fail (EAGAIN) until a handshake succeeds: retry them. */
    while (got == -1 && lp_now_ms() < deadline) {
        if (lp_frame_send(lp_client_socket(c), NULL, 0, &m, NULL, 0) != 0) {
            struct timespec ts = {0, 50 * 1000000};
            nanosleep(&ts, NULL);
            continue;
        }
        int wait = (int)(deadline - lp_now_ms());
        if (wait <= 0) break;
        lp_frame_t f;
        if (lp_client_recv(c, wait, &f) == 0) {
            got = f.msg->body_case == LMPIPE__MSG__BODY_HELLO ? 1 : 0;
            if (!got && err) snprintf(err, cap, "%s", f.msg->error ? f.msg->error->message : "?");
        }
        lp_frame_clear(&f);
    }
    if (keep && got == 1) *keep = c;
    else lp_client_destroy(&c);
    return got;
}

/* One request on a client that has said hello; its reply (caller frees). */
static Lmpipe__Msg *ask(lp_client_t *c, Lmpipe__Msg *m)
{
    static uint64_t next = 1000;
    m->id = ++next;
    if (lp_frame_send(lp_client_socket(c), NULL, 0, m, NULL, 0) != 0) return NULL;
    for (;;) {
        lp_frame_t f;
        if (lp_client_recv(c, 10000, &f) != 0) {
            lp_frame_clear(&f);
            return NULL;
        }
        if (f.msg->id == m->id) {
            Lmpipe__Msg *r = f.msg;
            f.msg = NULL;
            lp_frame_clear(&f);
            return r;
        }
        lp_frame_clear(&f);
    }
}

static int64_t refused(const char *ep, Lmpipe__Role role)
{
    lp_client_t *c;
    int64_t n = -1;
    if (lp_client_new_curve(ep, host_key, host_pub, &c) != 0) return -1;
    if (lp_client_hello_as(c, role, 10000) == 0) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__StatsRequest st = LMPIPE__STATS_REQUEST__INIT;
        m.body_case = LMPIPE__MSG__BODY_STATS;
        m.stats = &st;
        Lmpipe__Msg *r = ask(c, &m);
        if (r && r->body_case == LMPIPE__MSG__BODY_STATS_REPLY) n = (int64_t)r->stats_reply->auth_refused;
        if (r) lmpipe__msg__free_unpacked(r, NULL);
    }
    lp_client_destroy(&c);
    return n;
}

/* A SamplerControl `get`; 1: answered with a reply, 0: an Error (err). */
static int control(const char *ep, Lmpipe__Role role, const char *key, char *err, size_t cap)
{
    lp_client_t *c;
    int got = -1;
    err[0] = '\0';
    if (lp_client_new_curve(ep, key, host_pub, &c) != 0) return -2;
    if (lp_client_hello_as(c, role, 10000) == 0) {
        Lmpipe__Msg m = LMPIPE__MSG__INIT;
        Lmpipe__SamplerControl sc = LMPIPE__SAMPLER_CONTROL__INIT;
        sc.json = "{\"op\":\"get\"}";
        m.body_case = LMPIPE__MSG__BODY_SAMPLER_CONTROL;
        m.sampler_control = &sc;
        Lmpipe__Msg *r = ask(c, &m);
        if (r && r->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY) got = r->sampler_control_reply->ok;
        else if (r && r->body_case == LMPIPE__MSG__BODY_ERROR) {
            got = 0;
            snprintf(err, cap, "%s", r->error->message);
        }
        if (r) lmpipe__msg__free_unpacked(r, NULL);
    } else {
        snprintf(err, cap, "hello: %s", lp_error_msg());
    }
    lp_client_destroy(&c);
    return got;
}

/* ---- the stories260K goldens through the CURVE pipeline -------------------- */

static void ids_from_json(const lp_json_t *arr, int32_t *out, size_t cap, size_t *n)
{
    *n = 0;
    for (size_t i = 0; arr && arr->type == LP_JSON_ARRAY && i < arr->n && i < cap; i++) {
        int64_t v = 0;
        lp_json_int(&arr->u.items[i], 0, 1 << 30, &v);
        out[(*n)++] = (int32_t)v;
    }
}

/* Every case's greedy continuation up to the first step whose top-1 margin
 * is below stories260K's tau (goldens/README.md), as pipeline-goldens. */
static void goldens(const char *ep, const char *golden)
{
    char *text = NULL;
    size_t len;
    CHECK_RC(lp_read_file(golden, &text, &len), 0);
    lp_json_doc_t *doc = NULL;
    if (text) CHECK_RC(lp_json_parse(text, len, &doc), 0);
    lp_client_t *c = NULL;
    if (doc) CHECK_RC(lp_client_new_curve(ep, user_key, host_pub, &c), 0);
    if (c) CHECK_RC(lp_client_hello(c, 10000), 0);
    const lp_json_t *cases = doc ? lp_json_get(lp_json_root(doc), "cases") : NULL;
    for (size_t k = 0; c && cases && k < cases->n; k++) {
        const lp_json_t *cs = &cases->u.items[k];
        static int32_t prompt[512], want[512];
        size_t n_prompt, n_want;
        ids_from_json(lp_json_get(cs, "prompt_ids"), prompt, 512, &n_prompt);
        ids_from_json(lp_json_get(cs, "continuation_ids"), want, 512, &n_want);
        const lp_json_t *steps = lp_json_get(cs, "steps");
        size_t n_check = n_want;
        for (size_t i = 0; i < steps->n && i < n_want; i++) {
            const lp_json_t *s = &steps->u.items[i];
            if (s->u.items[0].u.items[1].u.num - s->u.items[1].u.items[1].u.num < 0.01) {
                n_check = i;
                break;
            }
        }
        Lmpipe__GenerateRequest g;
        lmpipe__generate_request__init(&g);
        g.n_prompt_ids = n_prompt;
        g.prompt_ids = prompt;
        g.n_predict = (int32_t)(n_check ? n_check : 1);
        g.sampling = sp_json("{\"temperature\": 0}");
        g.ignore_eos = true;
        lp_generation_t out;
        CHECK_RC(lp_client_generate(c, 100 + k, &g, 60000, NULL, NULL, &out), 0);
        size_t same = 0;
        while (same < n_check && same < out.n_ids && out.ids[same] == want[same]) same++;
        printf("golden case %zu: %zu of %zu checked tokens match%s\n", k, same, n_check, out.error);
        CHECK(same == n_check && n_check > 0, "case %zu", k);
        lp_generation_clear(&out);
    }
    lp_client_destroy(&c);
    lp_json_doc_destroy(&doc);
    free(text);
}

/* One key's share of the waiting queue (max_queued_per_client = 3, two
 * slots) is the same over three connections: of its 12 requests at most the
 * two running and three waiting are taken (keyed by connection, up to 11
 * would be), the rest refused; another key's request, sent meanwhile, is
 * taken and finishes. */
static void fair_per_key(const char *ep)
{
    enum { CONNS = 3, EACH = 4 };
    lp_client_t *c[CONNS] = {NULL};
    for (int i = 0; i < CONNS; i++) {
        int rc = lp_client_new_curve(ep, user_key, host_pub, &c[i]);
        if (!rc) rc = lp_client_hello(c[i], 10000);
        CHECK(rc == 0, "user connection %d: %s", i, lp_error_msg());
    }
    Lmpipe__GenerateRequest g = LMPIPE__GENERATE_REQUEST__INIT;
    g.prompt.data = (uint8_t *)"Once upon a time";
    g.prompt.len = strlen("Once upon a time");
    g.n_predict = 200;
    g.ignore_eos = true;
    for (int i = 0; i < CONNS; i++)
        for (uint64_t id = 1; c[i] && id <= EACH; id++) CHECK_RC(lp_client_send_generate(c[i], id, &g), 0);
    lp_client_t *adm = NULL;
    int rc = lp_client_new_curve(ep, admin_key, host_pub, &adm);
    if (!rc) rc = lp_client_hello(adm, 10000);
    if (!rc) rc = lp_client_send_generate(adm, 99, &g);
    CHECK(rc == 0, "admin connection: %s", lp_error_msg());
    int taken = 0, refused_n = 0, other = 0;
    for (int i = 0; i < CONNS; i++) {
        for (int k = 0; c[i] && k < EACH;) {
            lp_frame_t f;
            if (lp_client_recv(c[i], 30000, &f)) {
                other += EACH - k;
                break;
            }
            Lmpipe__Msg *m = f.msg;
            if (m->body_case == LMPIPE__MSG__BODY_FINAL) {
                taken++;
                k++;
            } else if (m->body_case == LMPIPE__MSG__BODY_ERROR) {
                if (strstr(m->error->message, "max_queued_per_client")) refused_n++;
                else other++;
                k++;
            }
            lp_frame_clear(&f);
        }
    }
    printf("one key over %d connections: %d requests taken, %d refused for its share\n", CONNS, taken,
           refused_n);
    CHECK(taken >= 3 && taken <= 5 && taken + refused_n == CONNS * EACH && other == 0,
          "one key's share over %d connections: %d taken, %d refused, %d other", CONNS, taken, refused_n, other);
    lp_generation_t ga = {0};
    if (adm) {
        for (;;) {
            lp_frame_t f;
            if (lp_client_recv(adm, 30000, &f)) break;
            int end = f.msg->id == 99 && lp_generation_add(&ga, f.msg) == 1;
            lp_frame_clear(&f);
            if (end) break;
        }
    }
    CHECK(ga.reason == LMPIPE__FINISH_REASON__FINISH_LENGTH && ga.n_ids == 200,
          "another key's request beside a full share: %zu tokens (%s)", ga.n_ids, ga.error);
    lp_generation_clear(&ga);
    lp_client_destroy(&adm);
    for (int i = 0; i < CONNS; i++) lp_client_destroy(&c[i]);
}

static void test_pipeline(const char *model, const char *golden)
{
    make_keys();
    int port = test_free_ports(4);
    CHECK(port > 0, "no four free loopback ports");
    char eps[4][64];
    for (int i = 0; i < 4; i++) snprintf(eps[i], sizeof(eps[i]), "tcp://127.0.0.1:%d", port + i);
    char allow[300];
    snprintf(allow, sizeof(allow), "%s,%s", user_pub, admin_pub);
    lp_pipeline_opts_t o = {0};
    lp_config_t *cfg = lp_config_new();
    lp_config_set(cfg, "model", model);
    lp_config_set(cfg, "threads", "1");
    lp_config_set(cfg, "endpoint", eps[0]);
    lp_config_set(cfg, "tokenizer.endpoint", eps[1]);
    lp_config_set(cfg, "engine.endpoint", eps[2]);
    lp_config_set(cfg, "sampler.endpoint", eps[3]);
    lp_config_set(cfg, "curve.key", host_key);
    lp_config_set(cfg, "curve.allow", allow);
    lp_config_set(cfg, "curve.admin", admin_pub);
    lp_config_set(cfg, "max_seqs", "2");
    lp_config_set(cfg, "max_queued_per_client", "3");
    o.cfg = cfg;
    uv_loop_t loop;
    uv_loop_init(&loop);
    lp_pipeline_t *p = NULL;
    int rc = lp_pipeline_start(&loop, &o, &p);
    lp_config_destroy(&cfg);
    if (!rc) rc = lp_pipeline_wait_ready(p, 60000);
    CHECK_RC(rc, 0);
    const Lmpipe__Role roles[4] = {LMPIPE__ROLE__ROLE_COORDINATOR, LMPIPE__ROLE__ROLE_TOKENIZER,
                                   LMPIPE__ROLE__ROLE_ENGINE, LMPIPE__ROLE__ROLE_SAMPLER};
    const char *names[4] = {"coordinator", "tokenizer-svc", "engine-svc", "sampler-svc"};
    if (!rc) {
        goldens(eps[0], golden);

        /* No answer for a peer the allow list does not name, and counted. */
        const char *bad_keys[3] = {NULL, user_key, stranger_key};
        const char *bad_servers[3] = {NULL, admin_pub, host_pub};
        const char *what[3] = {"no key", "a key for another server", "a key not on the allow list"};
        for (int s = 0; s < 4; s++) {
            for (int b = 0; b < 3; b++) {
                int64_t before = refused(eps[s], roles[s]);
                int got = try_hello(eps[s], bad_keys[b], bad_servers[b], LMPIPE__ROLE__ROLE_CLIENT, 1500,
                                    NULL, 0, NULL);
                int64_t after = refused(eps[s], roles[s]);
                printf("%s, %s: %s, refusals %lld -> %lld\n", names[s], what[b],
                       got == -1 ? "no answer" : "ANSWERED", (long long)before, (long long)after);
                CHECK(got == -1, "%s answered %s", names[s], what[b]);
                CHECK(before >= 0 && after > before, "%s did not count %s", names[s], what[b]);
            }
            /* An allowed key is answered, by each service. */
            CHECK(try_hello(eps[s], user_key, host_pub, LMPIPE__ROLE__ROLE_CLIENT, 10000, NULL, 0, NULL) == 1,
                  "%s did not answer an allowed key", names[s]);
        }

        /* Control: admins only, at the coordinator and at sampler-svc. */
        char err[512];
        int got = control(eps[0], roles[0], user_key, err, sizeof(err));
        printf("coordinator, SamplerControl from a user key: %s\n", got == 0 ? err : "ANSWERED");
        CHECK(got == 0 && strstr(err, "admin"), "%s", err);
        got = control(eps[3], roles[3], user_key, err, sizeof(err));
        printf("sampler-svc, SamplerControl from a user key: %s\n", got == 0 ? err : "ANSWERED");
        CHECK(got == 0 && strstr(err, "admin"), "%s", err);
        CHECK(control(eps[0], roles[0], admin_key, err, sizeof(err)) == 1, "admin via coordinator: %s", err);
        CHECK(control(eps[3], roles[3], admin_key, err, sizeof(err)) == 1, "admin at sampler-svc: %s", err);

        /* A peer that is not a curve.coordinator key cannot be coordinator. */
        for (int s = 1; s < 4; s++) {
            got = try_hello(eps[s], user_key, host_pub, LMPIPE__ROLE__ROLE_COORDINATOR, 10000, err,
                            sizeof(err), NULL);
            printf("%s, hello as coordinator from a user key: %s\n", names[s], got == 0 ? err : "ACCEPTED");
            CHECK(got == 0 && strstr(err, "curve.coordinator"), "%s: %s", names[s], err);
        }
        fair_per_key(eps[0]);
        goldens(eps[0], golden); /* and the pipeline goes on */
    }
    const char *who;
    CHECK(p && !lp_pipeline_failed(p, &who));
    if (p) CHECK_RC(lp_pipeline_stop(p), 0);
    lp_pipeline_destroy(&p);
    uv_loop_close(&loop);
    remove_keys();
}

/* ---- the controller role over TCP ------------------------------------------ */

/* SamplerClose of a session nobody opened: the controller hears "no
 * session", anyone else that the sessions are the coordinator's. */
static bool acts_as_controller(lp_client_t *c)
{
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__SamplerClose sc = LMPIPE__SAMPLER_CLOSE__INIT;
    sc.session = 424242;
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_CLOSE;
    m.sampler_close = &sc;
    Lmpipe__Msg *r = ask(c, &m);
    bool ctl = r && r->body_case == LMPIPE__MSG__BODY_ERROR && strstr(r->error->message, "no session");
    if (r && r->body_case == LMPIPE__MSG__BODY_ERROR) printf("  SamplerClose: %s\n", r->error->message);
    if (r) lmpipe__msg__free_unpacked(r, NULL);
    return ctl;
}

static void test_controller(const char *sampler_svc, const char *model)
{
    make_keys();
    char ep[64];
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", test_free_ports(1));
    char allow[300];
    snprintf(allow, sizeof(allow), "%s,%s", user_pub, host_pub);
    char *argv[] = {(char *)sampler_svc, "--model", (char *)model, "--endpoint", ep, "--no-shm",
                    "--curve-key", host_key, "--curve-allow", allow, "--curve-coordinator",
                    host_pub, NULL};
    pid_t pid;
    CHECK_RC(posix_spawn(&pid, sampler_svc, NULL, NULL, argv, environ), 0);
    char err[512];
    /* The attacker is first. */
    lp_client_t *user = NULL, *coord = NULL;
    int got = try_hello(ep, user_key, host_pub, LMPIPE__ROLE__ROLE_COORDINATOR, 20000, err, sizeof(err), NULL);
    printf("hello as coordinator first, from a user key: %s\n", got == 0 ? err : got == 1 ? "ACCEPTED" : "no answer");
    CHECK(got == 0 && strstr(err, "curve.coordinator"), "%s", err);
    /* Then it says hello as a client, and the real coordinator comes. */
    CHECK(try_hello(ep, user_key, host_pub, LMPIPE__ROLE__ROLE_CLIENT, 10000, NULL, 0, &user) == 1);
    got = try_hello(ep, host_key, host_pub, LMPIPE__ROLE__ROLE_COORDINATOR, 10000, err, sizeof(err), &coord);
    CHECK(got == 1, "the curve.coordinator key was refused: %s", err);
    if (user) CHECK(!acts_as_controller(user), "the user key acts as controller");
    if (coord) CHECK(acts_as_controller(coord), "the curve.coordinator key is not the controller");
    lp_client_destroy(&user);
    lp_client_destroy(&coord);
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sampler-svc status %d", status);
    remove_keys();
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (argc == 4 && !strcmp(argv[1], "pipeline")) test_pipeline(argv[2], argv[3]);
    else if (argc == 4 && !strcmp(argv[1], "controller")) test_controller(argv[2], argv[3]);
    else {
        fprintf(stderr, "usage: curve_test pipeline MODEL GOLDEN | controller SAMPLER_SVC MODEL\n");
        return 2;
    }
    sp_free_all();
    return CHECK_DONE();
}
