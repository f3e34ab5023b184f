/* request_test.c - lmpipe-nats's request reading without a NATS server:
 * the three body shapes, what goes to the coordinator as params_json, each
 * refusal naming its field, the ack subject's stream sequence, and the
 * event subjects a request may name. */
#include "request.h"

#include "check.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct parsed {
    lp_json_doc_t *doc;
    Lmpipe__GenerateRequest q;
    char *params;
    int32_t *ids;
    ProtobufCBinaryData *stops;
    char *chat_json;
    char why[512];
    int rc;
} parsed_t;

static void parse(parsed_t *p, const char *body)
{
    memset(p, 0, sizeof(*p));
    lmpipe__generate_request__init(&p->q);
    if (lp_json_parse(body, strlen(body), &p->doc) != 0) {
        p->rc = -2;
        return;
    }
    p->rc = lp__nb_read_request(lp_json_root(p->doc), &p->q, &p->params, &p->ids, &p->stops, &p->chat_json,
                                p->why, sizeof(p->why));
}

static void done(parsed_t *p)
{
    free(p->params);
    free(p->ids);
    free(p->stops);
    free(p->chat_json);
    lp_json_doc_destroy(&p->doc);
}

int main(void)
{
    parsed_t p;
    /* llama.cpp /completion: sampler fields and n_predict go on as params_json */
    parse(&p, "{\"v\":1,\"prompt\":\"Once\",\"n_predict\":8,\"temperature\":0,\"top_k\":5,\"id\":\"r1\"}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.q.prompt.len == 4 && !memcmp(p.q.prompt.data, "Once", 4));
    CHECK(p.params && !strcmp(p.params, "{\"n_predict\":8,\"temperature\":0,\"top_k\":5}"), "%s", p.params);
    done(&p);
    /* token ids, OpenAI max_tokens, stop as a string, logprobs */
    parse(&p, "{\"prompt\":[1,403,407],\"max_tokens\":3,\"stop\":\"\\n\",\"logprobs\":2,\"model\":\"x\",\"stream\":true}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.q.n_prompt_ids == 3 && p.q.prompt_ids[1] == 403 && p.q.n_predict == 3);
    CHECK(p.q.n_stop == 1 && p.q.stop[0].len == 1 && p.q.stop[0].data[0] == '\n');
    CHECK(p.params && !strcmp(p.params, "{\"n_probs\":2}"), "%s", p.params);
    done(&p);
    /* OpenAI chat */
    parse(&p, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_completion_tokens\":4,"
              "\"chat_template\":\"chatml\",\"logprobs\":true}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.q.chat_json && !strcmp(p.q.chat_json, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"),
          "%s", p.q.chat_json);
    CHECK(p.q.n_predict == 4 && !strcmp(p.q.chat_template, "chatml"));
    CHECK(p.params && !strcmp(p.params, "{\"n_probs\":1}"), "%s", p.params);
    done(&p);

    /* tools, a tool call with content null, a tool result, template kwargs */
    parse(&p, "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"},{\"role\":\"assistant\",\"content\":null,"
              "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":"
              "\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"4\"}],\"tools\":[{\"type\":"
              "\"function\",\"function\":{\"name\":\"add\"}}],\"tool_choice\":\"auto\",\"chat_template_kwargs\":"
              "{\"enable_thinking\":false},\"temperature\":0}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.q.chat_json && strstr(p.q.chat_json, "\"tool_calls\":[") && strstr(p.q.chat_json, "\"tools\":[") &&
              strstr(p.q.chat_json, "\"chat_template_kwargs\":{\"enable_thinking\":false}"),
          "%s", p.q.chat_json);
    CHECK(p.params && !strcmp(p.params, "{\"temperature\":0}"), "%s", p.params);
    done(&p);

    /* refusals, each naming its field */
    const char *bad[][2] = {
        {"[1]", "body:"},
        {"{\"v\":2,\"prompt\":\"x\"}", "v:"},
        {"{\"v\":\"1\",\"prompt\":\"x\"}", "v:"},
        {"{\"n_predict\":3}", "prompt:"},
        {"{\"prompt\":7}", "prompt:"},
        {"{\"prompt\":[]}", "prompt:"},
        {"{\"prompt\":[1,-2]}", "prompt[1]:"},
        {"{\"prompt\":\"x\",\"n\":2}", "n:"},
        {"{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens:"},
        {"{\"prompt\":\"x\",\"logprobs\":21}", "logprobs:"},
        {"{\"prompt\":\"x\",\"stop\":[\"a\",\"\"]}", "stop[1]:"},
        {"{\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]}",
         "stop:"},
        {"{\"prompt\":\"x\",\"messages\":[]}", "prompt:"},
        {"{\"messages\":[]}", "messages:"},
        {"{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content:"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"colour\":1}]}", "messages[0].colour:"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages[0].content[0]:"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"x\"}]}", "tools[0].type:"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":\"required\"}", "tool_choice:"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template_kwargs\":[]}", "chat_template_kwargs:"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"chat_template\":3}", "chat_template:"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        parse(&p, bad[i][0]);
        CHECK(p.rc == -1 && !strncmp(p.why, bad[i][1], strlen(bad[i][1])), "%s: rc %d, '%s'", bad[i][0], p.rc, p.why);
        done(&p);
    }

    /* ack subjects: the old form, the form with a domain and account hash */
    CHECK(lp__nb_ack_sseq("$JS.ACK.LMPIPE_REQ.lmpipe-bridge.1.42.7.1700000000000000000.3") == 42);
    CHECK(lp__nb_ack_sseq("$JS.ACK.hub.ACCHASH.LMPIPE_REQ.lmpipe-bridge.2.43.8.1700000000000000000.0.rnd") == 43);
    CHECK(lp__nb_ack_sseq("_INBOX.abc") == 0 && lp__nb_ack_sseq("$JS.ACK.a.b") == 0);

    /* event subjects */
    CHECK(lp__nb_reply_ok("lmpipe.evt.r1") && lp__nb_reply_ok("_INBOX.x.y"));
    /* subject matching, for the bridge's own subjects */
    CHECK(lp__nb_subject_match("lmpipe.req.>", "lmpipe.req.x") && lp__nb_subject_match("lmpipe.req.>", "lmpipe.req.a.b"));
    CHECK(!lp__nb_subject_match("lmpipe.req.>", "lmpipe.req") && !lp__nb_subject_match("lmpipe.req.>", "lmpipe.reqx.a"));
    CHECK(lp__nb_subject_match("lmpipe.control.sampler", "lmpipe.control.sampler"));
    CHECK(!lp__nb_subject_match("lmpipe.control.sampler", "lmpipe.control.sampler.x"));
    CHECK(!lp__nb_subject_match("lmpipe.control.sampler", "lmpipe.control"));
    CHECK(lp__nb_subject_match("a.*.c", "a.b.c") && !lp__nb_subject_match("a.*.c", "a.b.d") &&
          !lp__nb_subject_match("a.*.c", "a.c") && lp__nb_subject_match("*.>", "x.y"));
    CHECK(lp__nb_subject_match(">", "x") && !lp__nb_subject_match("a.*", "a.b.c") && !lp__nb_subject_match("a", "ab"));
    const char *refused[] = {"", "$JS.API.STREAM.DELETE.LMPIPE_REQ", "$SYS.REQ.SERVER.PING", "_lmpipe.deliver.x",
                             "a.*", "a.>", "a b", "a..b", ".a", "a.", "a\tb"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        CHECK(!lp__nb_reply_ok(refused[i]), "'%s' accepted", refused[i]);
    return CHECK_DONE();
}
