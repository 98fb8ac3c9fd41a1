/*
 * log.h -- one-line event log of the coordinator (prefix kf_log).
 *
 * Every event is one line on stderr: an ISO-8601 UTC timestamp with
 * milliseconds, then the message. No state: safe from any module.
 */
#ifndef KF_LOG_H
#define KF_LOG_H

/* printf-style; a trailing newline is added. */
void kf_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
