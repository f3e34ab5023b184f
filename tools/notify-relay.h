/* notify-relay.h - `lmpipe up` as the main process of a systemd unit: the
 * services it starts send their sd_notify messages to lmpipe instead of to
 * systemd, so that the unit is ready only when every service is, and its
 * watchdog is fed only while every service's loop still pings
 * (NotifyAccess=main suffices).
 *
 * The relay is an '@' abstract datagram socket with SO_PASSCRED: a message
 * counts only when the kernel's sender pid is one of lmpipe's children. */
#ifndef LP_TOOLS_NOTIFY_RELAY_H
#define LP_TOOLS_NOTIFY_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct lp_relay lp_relay_t;

/* Which pids are lmpipe's children now: fills out (cap entries at most) and
 * returns the count. */
typedef int (*lp_relay_pids_fn)(void *arg, int *out, int cap);

/* Open the relay on `loop` when NOTIFY_SOCKET is set (else *out is NULL and
 * 0 is returned). */
int lp_relay_new(uv_loop_t *loop, lp_relay_t **out);
/* The children's environment: "NOTIFY_SOCKET=@..." and, when lmpipe has a
 * watchdog, "WATCHDOG_USEC=N" (else NULL).  Borrowed. */
const char *lp_relay_env_socket(const lp_relay_t *r);
const char *lp_relay_env_watchdog(const lp_relay_t *r);
void lp_relay_set_children(lp_relay_t *r, lp_relay_pids_fn fn, void *arg);
/* Every child has sent READY=1. */
bool lp_relay_all_ready(lp_relay_t *r);
/* Every child has pinged (or started) within the watchdog interval; *late
 * gets the pid of one that has not. */
bool lp_relay_all_alive(lp_relay_t *r, int *late);
void lp_relay_destroy(lp_relay_t **self_p);

#endif
