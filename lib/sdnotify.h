/* sdnotify.h - systemd's service notification protocol (sd_notify(3))
 * without libsystemd: one AF_UNIX datagram to $NOTIFY_SOCKET per message.
 *
 *   READY=1 and a STATUS= line once a service serves (Type=notify units),
 *   WATCHDOG=1 every half WATCHDOG_USEC from the process's libuv loop, so
 *   that a wedged loop stops the pings and systemd restarts the unit,
 *   STOPPING=1 when a signal stops it.
 *
 * With no NOTIFY_SOCKET in the environment nothing is sent and every call
 * returns 0.  A name starting with '@' is an abstract socket (Linux). */
#ifndef LP_SDNOTIFY_H
#define LP_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* Send one notification ("READY=1\nSTATUS=serving").  0 when sent or when
 * NOTIFY_SOCKET is unset; a negative code with lp_error_set() when the
 * variable is malformed or the send fails. */
int lp_sdnotify_send(const char *state);
/* The same with a printf format. */
int lp_sdnotify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether NOTIFY_SOCKET names a socket. */
bool lp_sdnotify_enabled(void);

/* The watchdog interval asked of this process in microseconds, or 0: from
 * WATCHDOG_USEC, when WATCHDOG_PID is unset or names this process (systemd
 * sets it for the main process; a child that inherits it must not ping). */
uint64_t lp_sdnotify_watchdog_usec(void);

typedef struct lp_sdnotify lp_sdnotify_t;

/* Start WATCHDOG=1 pings on `loop` every half interval.  *out is NULL (and
 * 0 returned) when there is no NOTIFY_SOCKET or no watchdog. */
int lp_sdnotify_watchdog_new(uv_loop_t *loop, lp_sdnotify_t **out);
/* Stop the pings; the timer is freed by its close callback, so the loop
 * runs once more before it closes.  Safe on NULL. */
void lp_sdnotify_watchdog_destroy(lp_sdnotify_t **self_p);

#endif
