/*
 * log.c -- timestamped one-line logging to stderr. See log.h.
 * The line is formatted into one buffer and written with a single fputs so
 * lines from different threads/processes sharing stderr do not interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

void kf_log(const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ldZ ", ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
