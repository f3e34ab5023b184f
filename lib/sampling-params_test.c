/* params_test.c - sampling parameters: llama.cpp's defaults, parsing of
 * /completion fields, overlay, the JSON form (floats as typed: 0.3, not
 * 0.300000012), DRY breakers cut at a character, and refusal of bad values
 * with a message that names the field.  (The request fields besides the
 * sampling ones: lib/request-schema_test.c.) */
#include "sampling-params.h"

#include "check.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static lp_sampler_params_t P;

static int parse(const char *json, unsigned flags)
{
    lp_sampler_params_default(&P);
    return lp_sampler_params_parse(json, strlen(json), flags, &P);
}

/* Must be refused, with a message containing every `needle`. */
static void refuse(const char *json, unsigned flags, const char *needle)
{
    int rc = parse(json, flags);
    CHECK(rc != 0, "accepted bad parameters: %s", json);
    if (rc == 0) return;
    CHECK(strstr(lp_error_msg(), needle), "%s: message '%s' lacks '%s'", json, lp_error_msg(),
          needle);
}

static void test_defaults(void)
{
    /* llama.cpp common_params_sampling */
    lp_sampler_params_default(&P);
    CHECK(P.temperature == 0.8f && P.top_k == 40 && P.top_p == 0.95f && P.min_p == 0.05f);
    CHECK(P.typical_p == 1.0f && P.top_n_sigma == -1.0f && P.repeat_last_n == 64);
    CHECK(P.repeat_penalty == 1.0f && P.frequency_penalty == 0.0f && P.presence_penalty == 0.0f);
    CHECK(P.dry_multiplier == 0.0f && P.dry_base == 1.75f && P.dry_allowed_length == 2);
    CHECK(P.dry_penalty_last_n == -1 && P.xtc_probability == 0.0f && P.xtc_threshold == 0.1f);
    CHECK(P.mirostat == 0 && P.mirostat_tau == 5.0f && P.mirostat_eta == 0.1f);
    CHECK(P.seed == -1 && P.min_keep == 0 && P.n_probs == 0 && P.set == 0);
    static const enum lp_sampler_kind order[] = {
        LP_SAMPLER_PENALTIES, LP_SAMPLER_DRY, LP_SAMPLER_TOP_N_SIGMA, LP_SAMPLER_TOP_K,
        LP_SAMPLER_TYPICAL_P, LP_SAMPLER_TOP_P, LP_SAMPLER_MIN_P, LP_SAMPLER_XTC,
        LP_SAMPLER_TEMPERATURE};
    CHECK(P.n_steps == 9);
    for (int i = 0; i < 9 && i < P.n_steps; i++) CHECK(P.steps[i].kind == order[i]);
    CHECK_RC(lp_sampler_params_validate(&P), 0);
}

static void test_parse(void)
{
    CHECK_RC(parse("{\"temperature\":0.5,\"top_k\":10,\"top_p\":0.9,\"min_p\":0.1,"
                   "\"typical_p\":0.8,\"top_n_sigma\":2,\"repeat_penalty\":1.1,"
                   "\"repeat_last_n\":32,\"frequency_penalty\":0.2,\"presence_penalty\":0.3,"
                   "\"dry_multiplier\":0.8,\"dry_base\":2,\"dry_allowed_length\":3,"
                   "\"dry_penalty_last_n\":128,\"xtc_probability\":0.5,\"xtc_threshold\":0.2,"
                   "\"mirostat\":2,\"mirostat_tau\":4,\"mirostat_eta\":0.2,\"seed\":1234,"
                   "\"n_probs\":5,\"min_keep\":2,"
                   "\"samplers\":[\"top_k\",\"typ_p\",\"temperature\",\"plugin:mask-tokens\"],"
                   "\"logit_bias\":[[15,-1.5],[7,false]],"
                   "\"dry_sequence_breakers\":[[13],[25,26]]}",
                   LP_SAMPLER_PARAMS_STRICT),
             0);
    CHECK(P.temperature == 0.5f && P.top_k == 10 && P.top_p == 0.9f && P.min_p == 0.1f);
    CHECK(P.typical_p == 0.8f && P.top_n_sigma == 2.0f && P.repeat_penalty == 1.1f);
    CHECK(P.repeat_last_n == 32 && P.frequency_penalty == 0.2f && P.presence_penalty == 0.3f);
    CHECK(P.dry_multiplier == 0.8f && P.dry_base == 2.0f && P.dry_allowed_length == 3);
    CHECK(P.dry_penalty_last_n == 128 && P.xtc_probability == 0.5f && P.xtc_threshold == 0.2f);
    CHECK(P.mirostat == 2 && P.mirostat_tau == 4.0f && P.mirostat_eta == 0.2f);
    CHECK(P.seed == 1234 && P.n_probs == 5 && P.min_keep == 2);
    CHECK(P.n_steps == 4 && P.steps[0].kind == LP_SAMPLER_TOP_K &&
          P.steps[1].kind == LP_SAMPLER_TYPICAL_P && P.steps[2].kind == LP_SAMPLER_TEMPERATURE &&
          P.steps[3].kind == LP_SAMPLER_PLUGIN && !strcmp(P.steps[3].plugin, "mask-tokens"));
    CHECK(P.n_bias == 2 && P.bias[0].id == 15 && P.bias[0].bias == -1.5f && P.bias[1].id == 7 &&
          isinf(P.bias[1].bias) && P.bias[1].bias < 0);
    CHECK(P.n_breakers == 2 && P.breaker_len[1] == 2 && P.breakers[1][1] == 26);
    CHECK(P.n_text_breakers == 0); /* the list given replaces the default text breakers */
    /* llama.cpp's form: strings (kept for the vocabulary to resolve); the default is
     * "\n" ":" "\"" "*" */
    lp_sampler_params_default(&P);
    CHECK(P.n_text_breakers == 4 && P.text_breakers[0][0] == '\n' && P.text_breakers[3][0] == '*');
    CHECK_RC(parse("{\"dry_sequence_breakers\":[\"\\nUser:\",\"\",[7]]}", 0), 0);
    CHECK(P.n_text_breakers == 1 && P.text_breaker_len[0] == 6 &&
          !strcmp(P.text_breakers[0], "\nUser:") && P.n_breakers == 1 && P.breakers[0][0] == 7);

    /* logit_bias as an object, samplers as letters, llama.cpp's alternative names */
    CHECK_RC(parse("{\"logit_bias\":{\"42\":2.5,\"7\":false},\"samplers\":\"kypmt\"}", 0), 0);
    CHECK(P.n_bias == 2 && P.bias[0].id == 42 && P.bias[0].bias == 2.5f);
    CHECK(P.n_steps == 5 && P.steps[0].kind == LP_SAMPLER_TOP_K &&
          P.steps[1].kind == LP_SAMPLER_TYPICAL_P && P.steps[4].kind == LP_SAMPLER_TEMPERATURE);
    CHECK_RC(parse("{\"samplers\":[\"top-k\",\"nucleus\",\"min-p\",\"temp\",\"typical\"]}", 0), 0);
    CHECK(P.n_steps == 5 && P.steps[1].kind == LP_SAMPLER_TOP_P &&
          P.steps[4].kind == LP_SAMPLER_TYPICAL_P);
    /* a /completion request carries other fields: ignored unless strict */
    CHECK_RC(parse("{\"prompt\":\"hi\",\"n_predict\":8,\"stream\":true,\"top_k\":5}", 0), 0);
    CHECK(P.top_k == 5);
    /* seed 0xFFFFFFFF is llama.cpp's "random" */
    CHECK_RC(parse("{\"seed\":4294967295}", 0), 0);
    CHECK(P.seed == -1);
    /* an empty chain is allowed: only the final choice remains */
    CHECK_RC(parse("{\"samplers\":[]}", 0), 0);
    CHECK(P.n_steps == 0);
}

static void test_overlay_and_json(void)
{
    lp_sampler_params_t base, req;
    lp_sampler_params_default(&base);
    base.top_k = 7;
    lp_sampler_params_default(&req);
    const char *rq = "{\"temperature\":0.1,\"samplers\":[\"min_p\"]}";
    CHECK_RC(lp_sampler_params_parse(rq, strlen(rq), 0, &req), 0);
    lp_sampler_params_overlay(&base, &req);
    CHECK(base.temperature == 0.1f && base.top_k == 7 && base.n_steps == 1 &&
          base.steps[0].kind == LP_SAMPLER_MIN_P);

    /* the JSON form reads back to the same values */
    lp_sampler_params_t a, b;
    lp_sampler_params_default(&a);
    const char *src = "{\"temperature\":0.3,\"top_k\":3,\"logit_bias\":[[1,2],[5,false]],"
                      "\"samplers\":[\"xtc\",\"plugin:abc\"],\"seed\":9,"
                      "\"dry_sequence_breakers\":[[4,5]]}";
    CHECK_RC(lp_sampler_params_parse(src, strlen(src), 0, &a), 0);
    char buf[4096];
    size_t n = lp_sampler_params_to_json(&a, buf, sizeof(buf));
    CHECK(n < sizeof(buf));
    lp_sampler_params_default(&b);
    CHECK_RC(lp_sampler_params_parse(buf, n, LP_SAMPLER_PARAMS_STRICT, &b), 0);
    a.set = b.set = 0;
    CHECK(!memcmp(&a, &b, sizeof(a)));

    /* only the given fields: each kind once, and nothing at all */
    lp_sampler_params_default(&a);
    CHECK_RC(lp_sampler_params_parse(src, strlen(src), 0, &a), 0);
    n = lp_sampler_params_given_to_json(&a, buf, sizeof(buf));
    CHECK(!strcmp(buf, "{\"temperature\":0.3,\"top_k\":3,\"seed\":9,"
                       "\"samplers\":[\"xtc\",\"plugin:abc\"],\"logit_bias\":[[1,2],[5,false]],"
                       "\"dry_sequence_breakers\":[[4,5]]}"), "%s", buf);
    CHECK(n == strlen(buf));
    lp_sampler_params_default(&b);
    CHECK_RC(lp_sampler_params_parse(buf, n, LP_SAMPLER_PARAMS_STRICT, &b), 0);
    CHECK(b.set == a.set && !memcmp(&a, &b, sizeof(a)));
    lp_sampler_params_default(&a);
    a.min_p = 0.25f;
    a.set = 1ull << LP_SP_MIN_P;
    CHECK(lp_sampler_params_given_to_json(&a, buf, sizeof(buf)) == 14 &&
          !strcmp(buf, "{\"min_p\":0.25}"), "%s", buf);
    a.set = 0;
    CHECK(lp_sampler_params_given_to_json(&a, buf, sizeof(buf)) == 2 && !strcmp(buf, "{}"), "%s",
          buf);
}

static void test_refusals(void)
{
    refuse("{\"top_k\":-1}", 0, "top_k: must be >= 0");
    refuse("{\"top_p\":1.5}", 0, "top_p: must be in [0, 1], got 1.5");
    refuse("{\"min_p\":-0.1}", 0, "min_p");
    refuse("{\"typical_p\":2}", 0, "typical_p");
    refuse("{\"temperature\":NaN}", 0, "json: byte 15");
    refuse("{\"temperature\":\"hot\"}", 0, "temperature: must be a number, got string");
    refuse("{\"temperature\":1e300}", 0, "temperature: 1e+300 is out of range");
    refuse("{\"top_k\":2.5}", 0, "top_k: must be an integer");
    refuse("{\"samplers\":[\"top_k\",\"warp_drive\"]}", 0, "unknown sampler \"warp_drive\" at 1");
    refuse("{\"samplers\":\"kq\"}", 0, "unknown sampler letter 'q'");
    refuse("{\"samplers\":[\"plugin:Bad Name\"]}", 0, "unknown sampler");
    refuse("{\"samplers\":[\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\","
           "\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\",\"top_k\","
           "\"top_k\",\"top_k\"]}",
           0, "samplers: a chain of 17 steps is longer than the limit of 16");
    refuse("{\"samplers\":7}", 0, "samplers: must be a list");
    refuse("{\"mirostat\":3}", 0, "mirostat: must be 0 (off), 1 or 2");
    refuse("{\"repeat_penalty\":0}", 0, "repeat_penalty: must be > 0");
    refuse("{\"repeat_last_n\":-2}", 0, "repeat_last_n");
    refuse("{\"repeat_last_n\":100000}", 0, "repeat_last_n");
    refuse("{\"seed\":-5}", 0, "seed");
    refuse("{\"n_probs\":33}", 0, "n_probs: must be in [0, 32]");
    refuse("{\"logit_bias\":[[1]]}", 0, "logit_bias: entry 0 must be [id, bias]");
    refuse("{\"logit_bias\":[[-1,2]]}", 0, "logit_bias: entry 0: the token ID must be");
    refuse("{\"logit_bias\":[[\"hello\",2]]}", 0, "token text needs the tokenizer");
    refuse("{\"logit_bias\":[[1,true]]}", 0, "a bias of true means nothing");
    refuse("{\"logit_bias\":{\"abc\":1}}", 0, "key \"abc\" is not a token ID");
    refuse("{\"logit_bias\":5}", 0, "logit_bias: must be");
    refuse("{\"dry_sequence_breakers\":[[1,2,3,4,5,6,7,8,9]]}", 0, "1 to 8 token IDs");
    refuse("{\"temprature\":0.5}", LP_SAMPLER_PARAMS_STRICT, "temprature: not a sampling parameter");
    refuse("[1,2]", 0, "must be a JSON object");

    /* values set from C are validated too */
    lp_sampler_params_default(&P);
    P.temperature = NAN;
    CHECK_RC(lp_sampler_params_validate(&P), LP_ERR(EINVAL));
    CHECK(strstr(lp_error_msg(), "temperature: must be a finite number") != NULL);
    lp_sampler_params_default(&P);
    P.top_p = INFINITY;
    CHECK_RC(lp_sampler_params_validate(&P), LP_ERR(EINVAL));
    lp_sampler_params_default(&P);
    P.n_steps = LP_SAMPLER_MAX_CHAIN + 1;
    CHECK_RC(lp_sampler_params_validate(&P), LP_ERR(EINVAL));

    /* hostile sizes: a huge logit_bias list is refused, not overflowed */
    size_t cap = 40 * 2000 + 64;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "{\"logit_bias\":[");
    for (int i = 0; i < 2000; i++) n += (size_t)snprintf(big + n, cap - n, "%s[%d,1]", i ? "," : "", i);
    n += (size_t)snprintf(big + n, cap - n, "]}");
    refuse(big, 0, "2000 entries exceed the limit of 1024");
    free(big);
}

/* A text breaker longer than llama.cpp's 40 bytes is cut before the
 * character that crosses the limit, so that it stays UTF-8 and writes back
 * as JSON the strict reader takes. */
static void test_breaker_cut(void)
{
    /* 13 three-byte characters: 39 bytes; a 14th would end at byte 42 */
    char src[256], json[512];
    size_t n = 0;
    for (int i = 0; i < 14; i++) n += (size_t)snprintf(src + n, sizeof(src) - n, "\xe2\x82\xac");
    snprintf(json, sizeof(json), "{\"dry_sequence_breakers\":[\"%s\",\"ab\xf0\x9f\x98\x80\"]}", src);
    CHECK_RC(parse(json, 0), 0);
    CHECK(P.n_text_breakers == 2 && P.text_breaker_len[0] == 39 && !memcmp(P.text_breakers[0], src, 39),
          "cut at %d", P.text_breaker_len[0]);
    CHECK(P.text_breaker_len[1] == 6);
    CHECK(lp_sampler_breaker_cut(src, 42) == 39 && lp_sampler_breaker_cut("abc", 3) == 3);
    char ascii[64];
    memset(ascii, 'x', sizeof(ascii));
    CHECK(lp_sampler_breaker_cut(ascii, sizeof(ascii)) == 40);
    /* written, read back strictly, the same */
    char buf[4096];
    size_t len = lp_sampler_params_to_json(&P, buf, sizeof(buf));
    lp_sampler_params_t back;
    lp_sampler_params_default(&back);
    CHECK_RC(lp_sampler_params_parse(buf, len, LP_SAMPLER_PARAMS_STRICT, &back), 0);
    CHECK(back.n_text_breakers == 2 && back.text_breaker_len[0] == 39 && !memcmp(back.text_breakers[0], src, 39));
}

int main(void)
{
    test_breaker_cut();
    test_defaults();
    test_parse();
    test_overlay_and_json();
    test_refusals();
    return CHECK_DONE();
}
