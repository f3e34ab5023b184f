/* sampler-ctl.c - one control message to sampler-svc (see sampler-ctl.h). */
#include "sampler-ctl.h"

#include "client.h"
#include "error.h"
#include "hello.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lp_sampler_ctl(const char *endpoint, const char *json, int timeout_ms, bool *ok,
                   uint64_t *version, char **reply_json)
{
    return lp_sampler_ctl_curve(endpoint, NULL, NULL, json, timeout_ms, ok, version, reply_json);
}

int lp_sampler_ctl_curve(const char *endpoint, const char *key_path, const char *server_key,
                         const char *json, int timeout_ms, bool *ok, uint64_t *version,
                         char **reply_json)
{
    *ok = false;
    *version = 0;
    *reply_json = NULL;
    lp_client_t *c;
    int rc = lp_client_new_curve(endpoint, key_path, server_key, &c);
    if (rc) return rc;
    /* sampler-svc itself, or the coordinator, which passes the message to
     * every group's sampler and answers with their reply. */
    if ((rc = lp_client_hello_as(c, LMPIPE__ROLE__ROLE_UNKNOWN, timeout_ms))) {
        lp_error_prefix("%s: ", endpoint);
        goto out;
    }
    Lmpipe__Role role = lp_client_server_hello(c)->role;
    if (role != LMPIPE__ROLE__ROLE_SAMPLER && role != LMPIPE__ROLE__ROLE_COORDINATOR) {
        rc = lp_error_set(LP_ERR(EPROTO), "%s: %s is neither sampler-svc nor the coordinator", endpoint,
                          lp_role_name(role));
        goto out;
    }
    Lmpipe__Msg m = LMPIPE__MSG__INIT;
    Lmpipe__SamplerControl sc = LMPIPE__SAMPLER_CONTROL__INIT;
    sc.json = (char *)json;
    m.id = 1000000 + (uint64_t)getpid();
    m.body_case = LMPIPE__MSG__BODY_SAMPLER_CONTROL;
    m.sampler_control = &sc;
    if ((rc = lp_frame_send(lp_client_socket(c), NULL, 0, &m, NULL, 0))) goto out;
    for (;;) {
        lp_frame_t f;
        rc = lp_client_recv(c, timeout_ms, &f);
        if (rc) {
            lp_frame_clear(&f);
            break;
        }
        if (f.msg->id != m.id) { /* not ours */
            lp_frame_clear(&f);
            continue;
        }
        if (f.msg->body_case == LMPIPE__MSG__BODY_SAMPLER_CONTROL_REPLY) {
            const Lmpipe__SamplerControlReply *r = f.msg->sampler_control_reply;
            *ok = r->ok;
            *version = r->version;
            *reply_json = strdup(r->json ? r->json : "");
            rc = *reply_json ? 0 : lp_error_set(LP_ERR(ENOMEM), "out of memory");
        } else if (f.msg->body_case == LMPIPE__MSG__BODY_ERROR) {
            rc = lp_error_set(f.msg->error->code ? f.msg->error->code : LP_ERR(EPROTO),
                              "sampler-svc: %s", f.msg->error->message);
        } else {
            rc = lp_error_set(LP_ERR(EPROTO), "sampler-svc answered with '%s'",
                              lp_msg_body_name(f.msg->body_case));
        }
        lp_frame_clear(&f);
        break;
    }
out:
    lp_client_destroy(&c);
    return rc;
}
