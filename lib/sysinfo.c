/* sysinfo.c - fields of /proc/self/status. */
#include "sysinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long lp_proc_status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    size_t n = strlen(field);
    long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, n) && line[n] == ':') kb = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return kb;
}
