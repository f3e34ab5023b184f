/* sysinfo.h - monotonic clock and this process's memory, for timings and
 * --stats output. */
#ifndef LP_SYSINFO_H
#define LP_SYSINFO_H

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds. */
static inline uint64_t lp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double lp_now_s(void) { return (double)lp_now_ns() * 1e-9; }
static inline double lp_now_ms(void) { return (double)lp_now_ns() * 1e-6; }
static inline double lp_now_us(void) { return (double)lp_now_ns() * 1e-3; }

/* A "Name:  N kB" field of /proc/self/status ("VmRSS", "VmHWM") in kB;
 * -1 when it cannot be read. */
long lp_proc_status_kb(const char *field);

#endif
