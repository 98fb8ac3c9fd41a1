/*
 * operator.h -- the coordinator's operator socket: an operator's reads
 * answered from a warm database connection (prefix kf_ops_).
 *
 * Design. `kfarm campaign status` run as its own process pays, before its
 * first row, for the dynamic loader (libpq's ~25 libraries), a new
 * PostgreSQL backend (fork, authentication) and that backend's first reads
 * of every table's catalog entries: ~45 ms on the project's 2-core VM
 * whatever the campaign's size (docs/benchmarks.md, 2026-12-06). The
 * coordinator is a long-lived process with a connection that has paid all
 * of it once. So a coordinator started with --operator-socket PATH listens
 * on a local Unix socket (nanomsg REP over ipc://PATH) in a thread of its
 * own with a connection of its own (statements prepared once, JIT off,
 * the serving statements' lock and statement timeouts), and answers
 * OperatorRequest with the bytes the command would have written
 * (status.h writes them in both places).
 *
 * Trust. The socket carries no credentials: access is the socket file's
 * (made 0600 right after it is bound, the coordinator's user only), and
 * only read-only commands are answered ("campaign status"). A request from
 * another build, an unknown command or a malformed message is answered
 * `refused` with the reason, and the CLI reads the database itself; so is
 * everything when no coordinator listens. One request at a time: a slow
 * status never touches dispatch (the serving threads have their own
 * connections).
 */
#ifndef KF_OPERATOR_H
#define KF_OPERATOR_H

#include <stddef.h>

typedef struct kf_ops_service kf_ops_service;

/* Bind the operator socket at path (a file name, at most 100 bytes; a stale
 * socket file left by a dead coordinator is replaced, a live one is
 * EADDRINUSE), make it 0600, connect to conninfo (NULL: $KFARM_DB; a
 * database that is down is retried per request) and start the thread.
 * Returns the service, or NULL with the reason in err. */
kf_ops_service *kf_ops_service_start(const char *conninfo, const char *path, char *err, size_t errlen);

/* Stop the thread (within ~0.25 s: the request in progress is finished),
 * close the socket, remove its file and free. NULL is fine. */
void kf_ops_service_stop(kf_ops_service *s);

/* What the coordinator answered. */
typedef struct {
    int exit_code;   /* the command's exit status: 0, or 1 with error */
    char *out;       /* what the command wrote to stdout (malloc'ed, NUL-terminated) */
    size_t out_len;  /* bytes in out, without the NUL */
    char error[1024];
} kf_ops_answer;

/* Ask the coordinator listening at path for campaign `campaign`'s status
 * (json: the --json object; tty: draw the budget as a bar), waiting at most
 * ~0.25 s to reach it and timeout_ms for the answer. Returns 0 with *ans
 * filled (free ans->out); 1 when no socket file exists at path (no
 * coordinator started with it: err says so); -1 when it could not be
 * asked or refused the request (a socket file nobody listens on, another
 * build, no answer in time: the reason in err). On 1 and -1 the caller
 * reads the database itself. */
int kf_ops_status(const char *path, const char *campaign, int json, int tty, int timeout_ms,
                  kf_ops_answer *ans, char *err, size_t errlen);

#endif
