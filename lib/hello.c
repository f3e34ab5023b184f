/* hello.c - the connection hello and the vocabulary facts (see hello.h). */
#include "hello.h"

#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *lp_host_id(void)
{
    static char id[320];
    if (id[0]) return id;
    /* An override, for hosts whose boot id does not tell them apart (or
     * containers that do not share /dev/shm), and for tests. */
    const char *env = getenv("LMPIPE_HOST_ID");
    if (env && env[0]) {
        snprintf(id, sizeof(id), "%s", env);
        return id;
    }
    char host[256] = "unknown", boot[64] = "";
    gethostname(host, sizeof(host) - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    snprintf(id, sizeof(id), "%s/%s", host, boot);
    return id;
}

const char *lp_role_name(Lmpipe__Role r)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(&lmpipe__role__descriptor, r);
    return v ? v->name : "unknown role";
}

void lp_hello_init(Lmpipe__Hello *h, Lmpipe__Role role)
{
    lmpipe__hello__init(h);
    h->protocol = (char *)LP_PROTOCOL_NAME;
    h->version = LP_PROTOCOL_VERSION;
    h->role = role;
    h->host_id = (char *)lp_host_id();
    h->pid = (uint32_t)getpid();
    h->bos_id = -1;
    h->eos_id = -1;
}

/* A peer's string, safe to print: at most 32 bytes, others as '?'. */
static const char *printable(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 1 < cap && n < 32; s++)
        buf[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    buf[n] = '\0';
    return buf;
}

int lp_hello_check(const Lmpipe__Hello *h, Lmpipe__Role expect)
{
    char buf[40];
    if (!h->protocol || strcmp(h->protocol, LP_PROTOCOL_NAME) != 0)
        return lp_error_set(LP_ERR(EPROTO), "hello: protocol '%s' is not '%s'",
                            printable(h->protocol, buf, sizeof(buf)), LP_PROTOCOL_NAME);
    if (h->version != LP_PROTOCOL_VERSION)
        return lp_error_set(LP_ERR(EPROTO), "hello: protocol version %u is not supported (this "
                            "side speaks version %u)", h->version, LP_PROTOCOL_VERSION);
    /* A peer must say what it is: the role decides what it may send (the
     * coordinator's role makes it the controller of a service). */
    if (h->role == LMPIPE__ROLE__ROLE_UNKNOWN ||
        !protobuf_c_enum_descriptor_get_value(&lmpipe__role__descriptor, (int)h->role))
        return lp_error_set(LP_ERR(EPROTO), "hello: role %d is not a known role", (int)h->role);
    if (expect != LMPIPE__ROLE__ROLE_UNKNOWN && h->role != expect)
        return lp_error_set(LP_ERR(EPROTO), "hello: peer role is %s, expected %s",
                            lp_role_name(h->role), lp_role_name(expect));
    return 0;
}

int lp_hello_check_vocab(const Lmpipe__Hello *a, const Lmpipe__Hello *b)
{
    const char *an = lp_role_name(a->role), *bn = lp_role_name(b->role);
    if (a->n_vocab && b->n_vocab && a->n_vocab != b->n_vocab)
        return lp_error_set(LP_ERR(EPROTO), "model mismatch: %s has logit rows of %u, %s of %u "
                            "(%s vs %s)", an, a->n_vocab, bn, b->n_vocab, a->model_name,
                            b->model_name);
    if (a->n_tokens && b->n_tokens && a->n_tokens != b->n_tokens)
        return lp_error_set(LP_ERR(EPROTO), "model mismatch: %s has %u tokens, %s has %u (%s vs "
                            "%s)", an, a->n_tokens, bn, b->n_tokens, a->model_name, b->model_name);
    if (a->vocab_hash && b->vocab_hash && a->vocab_hash != b->vocab_hash)
        return lp_error_set(LP_ERR(EPROTO), "model mismatch: %s and %s have different vocabularies "
                            "(hash %016llx vs %016llx; %s vs %s)", an, bn,
                            (unsigned long long)a->vocab_hash, (unsigned long long)b->vocab_hash,
                            a->model_name, b->model_name);
    return 0;
}
