/* request_test.c - lmpipe-nats's request reading without a NATS server:
 * the three body shapes read through the request schema, each refusal
 * naming its field, the ack subject's stream sequence, and the
 * event subjects a request may name. */
#include "request.h"

#include "check.h"
#include "error.h"

#include <stdlib.h>
#include <string.h>

typedef struct parsed {
    lp_json_doc_t *doc;
    lp_request_t rq;
    const char *why;
    int rc;
} parsed_t;

static void parse(parsed_t *p, const char *body)
{
    memset(p, 0, sizeof(*p));
    if (lp_json_parse(body, strlen(body), &p->doc) != 0) {
        p->rc = -2;
        return;
    }
    p->rc = lp__nb_read_request(lp_json_root(p->doc), &p->rq) ? -1 : 0;
    p->why = p->rc ? lp_error_msg() : "";
}

static void done(parsed_t *p)
{
    lp_request_clear(&p->rq);
    lp_json_doc_destroy(&p->doc);
}

#define GIVEN(p, f) (((p)->rq.sp.set >> (f)) & 1)

int main(void)
{
    parsed_t p;
    /* llama.cpp /completion: sampler fields typed, n_predict */
    parse(&p, "{\"v\":1,\"prompt\":\"Once\",\"n_predict\":8,\"temperature\":0,\"top_k\":5,\"id\":\"r1\"}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.rq.ep == LP_RS_COMPLETION && p.rq.n_prompts == 1 && p.rq.prompts[0].len == 4 &&
          !memcmp(p.rq.prompts[0].text, "Once", 4));
    CHECK(p.rq.n_predict == 8 && p.rq.nats_id && !strcmp(p.rq.nats_id, "r1"));
    CHECK(GIVEN(&p, LP_SP_TEMPERATURE) && p.rq.sp.temperature == 0 && GIVEN(&p, LP_SP_TOP_K) && p.rq.sp.top_k == 5);
    CHECK(p.rq.sp.set == ((1ull << LP_SP_TEMPERATURE) | (1ull << LP_SP_TOP_K)), "only the fields given");
    done(&p);
    /* token ids, OpenAI max_tokens, stop as a string, logprobs as a count */
    parse(&p, "{\"prompt\":[1,403,407],\"max_tokens\":3,\"stop\":\"\\n\",\"logprobs\":2,\"model\":\"x\",\"stream\":true}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.rq.ep == LP_RS_COMPLETIONS && p.rq.prompts[0].n_ids == 3 && p.rq.prompts[0].ids[1] == 403 &&
          p.rq.n_predict == 3);
    CHECK(p.rq.n_stops == 1 && p.rq.stop_lens[0] == 1 && p.rq.stops[0][0] == '\n');
    CHECK(p.rq.n_probs == 2 && GIVEN(&p, LP_SP_N_PROBS) && p.rq.sp.n_probs == 2);
    done(&p);
    /* the llama.cpp shape with OpenAI's logprobs: true */
    parse(&p, "{\"prompt\":[1,403],\"n_predict\":3,\"temperature\":0,\"logprobs\":true}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.rq.ep == LP_RS_COMPLETION && p.rq.n_probs == 1 && p.rq.sp.n_probs == 1);
    done(&p);
    /* OpenAI chat, content as text parts too */
    parse(&p, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":\"assistant\",\"content\":"
              "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],"
              "\"max_completion_tokens\":4,\"chat_template\":\"chatml\",\"logprobs\":true,\"top_logprobs\":2}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.rq.ep == LP_RS_CHAT && p.rq.chat_json &&
              !strcmp(p.rq.chat_json, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},{\"role\":"
                                      "\"assistant\",\"content\":\"ab\"}]}"),
          "%s", p.rq.chat_json);
    CHECK(p.rq.n_predict == 4 && !strcmp(p.rq.chat_template, "chatml") && p.rq.n_probs == 2);
    done(&p);
    parse(&p, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_completion_tokens\":4,"
              "\"chat_template\":\"chatml\",\"logprobs\":true}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.rq.chat_json && !strcmp(p.rq.chat_json, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"),
          "%s", p.rq.chat_json);
    CHECK(p.rq.n_predict == 4 && !strcmp(p.rq.chat_template, "chatml"));
    CHECK(p.rq.sp.set == (1ull << LP_SP_N_PROBS) && p.rq.sp.n_probs == 1, "only n_probs given");
    done(&p);

    /* tools, a tool call with content null, a tool result, template kwargs:
     * the conversation as chat_json; the sampling fields typed */
    parse(&p, "{\"messages\":[{\"role\":\"user\",\"content\":\"2+2?\"},{\"role\":\"assistant\",\"content\":null,"
              "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":"
              "\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"4\"}],\"tools\":[{\"type\":"
              "\"function\",\"function\":{\"name\":\"add\"}}],\"tool_choice\":\"auto\",\"chat_template_kwargs\":"
              "{\"enable_thinking\":false},\"temperature\":0}");
    CHECK(p.rc == 0, "%s", p.why);
    CHECK(p.rq.chat_json && strstr(p.rq.chat_json, "\"tool_calls\":[") && strstr(p.rq.chat_json, "\"tools\":[") &&
              strstr(p.rq.chat_json, "\"chat_template_kwargs\":{\"enable_thinking\":false}"),
          "%s", p.rq.chat_json);
    CHECK(p.rq.sp.set == (1ull << LP_SP_TEMPERATURE) && p.rq.sp.temperature == 0, "only temperature given");
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
        /* one schema: unknown and unimplemented fields are refused by name */
        {"{\"prompt\":\"x\",\"temperture\":0.5}", "temperture: unknown field (did you mean temperature?)"},
        {"{\"prompt\":\"x\",\"grammar\":\"root ::= x\"}", "grammar: not supported"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tool_choice\":{\"type\":\"function\"}}",
         "tool_choice: not supported"},
        {"{\"prompt\":\"x\",\"tools\":[]}", "tools: not supported"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}",
         "response_format: not supported"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":\"low\"}",
         "reasoning_effort: not supported"},
        {"{\"prompt\":\"x\",\"echo\":true,\"max_tokens\":2}", "echo:"},
        {"{\"prompt\":\"x\",\"stream\":false}", "stream:"},
        {"{\"prompt\":\"x\",\"max_tokens\":2,\"n_predict\":2}", "n_predict: not a field of /v1/completions"},
        {"{\"prompt\":\"x\",\"max_tokens\":2,\"temperature\":3}", "temperature: must be in [0, 2]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        parse(&p, bad[i][0]);
        CHECK(p.rc == -1 && !strncmp(p.why, bad[i][1], strlen(bad[i][1])), "%s: rc %d, '%s'", bad[i][0], p.rc, p.why);
        /* the field at fault, by itself, for the error event's param */
        size_t n = strcspn(bad[i][1], "[:");
        CHECK(p.rc != -1 || (strlen(p.rq.param) == n && !strncmp(p.rq.param, bad[i][1], n)), "%s: param '%s'",
              bad[i][0], p.rq.param);
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
