/* chat_service_test.c - tokenizer-svc serves apply-chat-template: the real
 * binary, over a real ipc:// socket, formats a conversation with the chatml
 * template (expected text written by hand from the format's definition),
 * tokenizes it with the control tokens as their ids, and refuses an unknown
 * template, an empty conversation and a message without a role with an
 * Error that names the problem.
 * Usage: chat_service_test TOKENIZER_SVC VOCAB.gguf */
#include "frame.h"
#include "hello.h"
#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

typedef struct reply {
    int body;          /* body case of the answer, 0 when none came */
    char text[1024];   /* ChatTemplateReply.text or Error.message */
    int32_t ids[256];
    size_t n_ids;
} reply_t;

/* Say hello as a client, send `m`, and wait up to 5 s for its answer. */
static void ask(void *sock, Lmpipe__Msg *m, uint64_t id, reply_t *r)
{
    memset(r, 0, sizeof(*r));
    m->id = id;
    lp_frame_send(sock, NULL, 0, m, NULL, 0);
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    while (zmq_poll(&it, 1, 5000) == 1) {
        lp_frame_t f;
        if (lp_frame_recv(sock, false, &f)) continue;
        if (f.msg->id == id) {
            r->body = f.msg->body_case;
            if (r->body == LMPIPE__MSG__BODY_ERROR) {
                snprintf(r->text, sizeof(r->text), "%s", f.msg->error->message);
            } else if (r->body == LMPIPE__MSG__BODY_CHAT_TEMPLATE_REPLY) {
                const Lmpipe__ChatTemplateReply *c = f.msg->chat_template_reply;
                size_t n = c->text.len < sizeof(r->text) - 1 ? c->text.len : sizeof(r->text) - 1;
                memcpy(r->text, c->text.data, n);
                r->n_ids = c->n_ids < 256 ? c->n_ids : 256;
                memcpy(r->ids, c->ids, r->n_ids * sizeof(int32_t));
            }
            lp_frame_clear(&f);
            return;
        }
        lp_frame_clear(&f);
    }
}

static void chat(void *sock, uint64_t id, const char *tmpl, Lmpipe__ChatMessage **msgs, size_t n,
                 bool tokenize, reply_t *r)
{
    Lmpipe__ChatTemplateRequest c = LMPIPE__CHAT_TEMPLATE_REQUEST__INIT;
    c.messages = msgs;
    c.n_messages = n;
    c.template_ = (char *)tmpl;
    c.add_assistant = true;
    c.tokenize = tokenize;
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    m.body_case = LMPIPE__MSG__BODY_CHAT_TEMPLATE;
    m.chat_template = &c;
    ask(sock, &m, id, r);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: chat_service_test TOKENIZER_SVC VOCAB.gguf\n");
        return 2;
    }
    char dir[] = "/tmp/lmpipe-chat-XXXXXX", ep[128];
    if (!mkdtemp(dir)) return 1;
    snprintf(ep, sizeof(ep), "ipc://%s/tok", dir);
    pid_t pid = fork();
    if (pid == 0) {
        execl(argv[1], argv[1], "--model", argv[2], "--endpoint", ep, (char *)NULL);
        _exit(127);
    }
    void *ctx = zmq_ctx_new(), *sock = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_connect(sock, ep);
    Lmpipe__Hello h;
    lp_hello_init(&h, LMPIPE__ROLE__ROLE_CLIENT);
    Lmpipe__Msg hm = LMPIPE__MSG__INIT;
    hm.body_case = LMPIPE__MSG__BODY_HELLO;
    hm.hello = &h;
    reply_t r;
    for (int i = 0; i < 50; i++) { /* the service may still be loading */
        ask(sock, &hm, 1, &r);
        if (r.body == LMPIPE__MSG__BODY_HELLO) break;
        usleep(100000);
    }
    CHECK(r.body == LMPIPE__MSG__BODY_HELLO, "no hello from tokenizer-svc (%d)", r.body);

    Lmpipe__ChatMessage sys = LMPIPE__CHAT_MESSAGE__INIT, user = LMPIPE__CHAT_MESSAGE__INIT;
    sys.role = "system";
    sys.content = "You are helpful.";
    user.role = "user";
    user.content = "Hi";
    Lmpipe__ChatMessage *msgs[] = {&sys, &user};

    /* chatml: each turn is <|im_start|>ROLE\nCONTENT<|im_end|>\n, and the
     * assistant's opening is <|im_start|>assistant\n */
    chat(sock, 2, "chatml", msgs, 2, true, &r);
    CHECK(r.body == LMPIPE__MSG__BODY_CHAT_TEMPLATE_REPLY, "chatml: no reply (%d: %s)", r.body,
          r.text);
    CHECK(!strcmp(r.text, "<|im_start|>system\nYou are helpful.<|im_end|>\n"
                          "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
          "chatml text: '%s'", r.text);
    /* <|im_start|> is 151644 and <|im_end|> 151645 in the qwen2 vocabulary;
     * "system" and "\n" are ordinary tokens between them. */
    CHECK(r.n_ids > 6 && r.ids[0] == 151644, "first id %d of %zu", r.n_ids ? r.ids[0] : -1,
          r.n_ids);
    int n_start = 0, n_end = 0;
    for (size_t i = 0; i < r.n_ids; i++) {
        n_start += r.ids[i] == 151644;
        n_end += r.ids[i] == 151645;
    }
    CHECK(n_start == 3 && n_end == 2, "control tokens: %d im_start, %d im_end", n_start, n_end);

    chat(sock, 3, "no-such-template", msgs, 2, false, &r);
    CHECK(r.body == LMPIPE__MSG__BODY_ERROR && strstr(r.text, "no-such-template"),
          "unknown template: %d '%s'", r.body, r.text);
    chat(sock, 4, "chatml", msgs, 0, false, &r);
    CHECK(r.body == LMPIPE__MSG__BODY_ERROR && strstr(r.text, "messages"),
          "empty conversation: %d '%s'", r.body, r.text);
    user.role = "";
    chat(sock, 5, "chatml", msgs, 2, false, &r);
    CHECK(r.body == LMPIPE__MSG__BODY_ERROR && strstr(r.text, "messages[1]"),
          "missing role: %d '%s'", r.body, r.text);

    zmq_close(sock);
    zmq_ctx_term(ctx);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tokenizer-svc did not exit cleanly (%d)", st);
    char sockpath[160];
    snprintf(sockpath, sizeof(sockpath), "%s/tok", dir);
    unlink(sockpath);
    rmdir(dir);
    if (!lp_check_failures) printf("chat template service: all passed\n");
    return CHECK_DONE();
}
