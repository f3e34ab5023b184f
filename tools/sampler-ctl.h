/* sampler-ctl.h - send one live-swap control message to sampler-svc
 * (`lmpipe sampler`, and the live-swap pipeline test). */
#ifndef LP_TOOLS_SAMPLER_CTL_H
#define LP_TOOLS_SAMPLER_CTL_H

#include <stdbool.h>
#include <stdint.h>

/* Connect to sampler-svc at `endpoint`, say hello, send `json` (see
 * docs/SAMPLER.md) and wait for the reply.  *reply_json (caller frees) is
 * the store's reply, *ok whether the change was made, *version the strategy
 * in place after it.  Returns 0 when a reply came (ok or not); a negative
 * code with lp_error_msg() when none did. */
int lp_sampler_ctl(const char *endpoint, const char *json, int timeout_ms, bool *ok,
                   uint64_t *version, char **reply_json);
/* The same over CURVE (lp_client_new_curve: key_path, server_key). */
int lp_sampler_ctl_curve(const char *endpoint, const char *key_path, const char *server_key,
                         const char *json, int timeout_ms, bool *ok, uint64_t *version,
                         char **reply_json);

#endif
