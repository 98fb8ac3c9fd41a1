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
 * on a local Unix stream socket in a thread of its own, with a connection
 * of its own (statements prepared once, JIT off, read-only transactions,
 * a 1 s lock and 2 s statement timeout, added to the conninfo's own
 * options), and answers each OperatorRequest
 * (proto/kfarm.proto: one request per connection, length-prefixed) with
 * the bytes the command would have written: status.h writes them in both
 * places.
 *
 * Trust. Only peers of the coordinator's own user id are answered
 * (SO_PEERCRED, checked on every connection; the file is also made 0600),
 * and only the read-only "campaign status". A path that exists and is not
 * a socket is never replaced.
 *
 * Trust, the other way: the CLI asks only a listener of its own user id
 * (SO_PEERCRED), and reads at most 4 MB of answer.
 *
 * When the CLI reads the database itself instead (it says why on stderr,
 * except when no socket file exists): no coordinator listens, or its queue
 * of connections is full; it refuses the request because it runs another
 * build or status format, serves another database (kf_ops_db_identity
 * differs, so the bytes could differ), or hit a database error (a lock
 * held elsewhere, the database away); or it does not answer within the
 * CLI's timeout. Requests are served one at a time: a request can hold the
 * thread for each of its ~6 statements' 2 s timeout, while the CLI waits
 * 5 s in all.
 */
#ifndef KF_OPERATOR_H
#define KF_OPERATOR_H

#include <stddef.h>

typedef struct kf_ops_service kf_ops_service;

/* Listen at path (a file name of at most 100 bytes): a socket file left by
 * a coordinator that died is replaced; a live one (another coordinator
 * listens) or a path that is not a socket is refused. Connects to conninfo
 * (NULL: $KFARM_DB; a database that is down is retried per request) and
 * starts the thread. Returns the service, or NULL with the reason in err. */
kf_ops_service *kf_ops_service_start(const char *conninfo, const char *path, char *err, size_t errlen);

/* Stop the thread (0.25 s after the request in progress, if any, is
 * done: see above for how long one may take), close the
 * socket, remove its file if it is still this service's, and free. NULL
 * is fine. */
void kf_ops_service_stop(kf_ops_service *s);

/* The database conninfo (NULL: $KFARM_DB) stands for, as the operator
 * socket compares it: "host=.. hostaddr=.. port=.. dbname=.. user=..
 * options=.. client_encoding=.. service=.. servicefile=.. tz=..
 * datestyle=.. sysconfdir=..", each keyword from the conninfo (a URI too),
 * else its variable (PGHOST, PGHOSTADDR, PGPORT, PGDATABASE, PGUSER,
 * PGOPTIONS, PGCLIENTENCODING, PGSERVICE, PGSERVICEFILE), then PGTZ,
 * PGDATESTYLE and PGSYSCONFDIR, which change what status prints or which
 * service file is read. It errs on the side of difference: one database
 * spelled two ways gives two identities (the CLI then reads it itself).
 * "" when no conninfo is set. Returns 0, or -1 when the conninfo does not
 * parse or its identity passes cap bytes (err says why). */
int kf_ops_db_identity(const char *conninfo, char *out, size_t cap, char *err, size_t errlen);

/* What the coordinator answered. */
typedef struct {
    int exit_code;   /* the command's exit status: 0, or 1 with error */
    char *out;       /* what the command wrote to stdout (malloc'ed, NUL-terminated) */
    size_t out_len;  /* bytes in out, without the NUL */
    char error[1024];
} kf_ops_answer;

/* Ask the coordinator listening at path for campaign `campaign`'s status
 * as the CLI would print it against conninfo (NULL: $KFARM_DB; json: the
 * --json object; tty: the budget as a bar), waiting at most timeout_ms
 * (ms) for the whole exchange (connect(2) does not wait). Returns 0 with
 * *ans filled (free ans->out); 1 when no socket file exists at path (no
 * coordinator was started with it); -1 when it could not be asked or did
 * not answer the request (no coordinator listens or it is busy, another
 * user's socket, not permitted, refused, timed out: the reason in err). On
 * 1 and -1 the caller reads the database itself. */
int kf_ops_status(const char *path, const char *conninfo, const char *campaign, int json, int tty,
                  int timeout_ms, kf_ops_answer *ans, char *err, size_t errlen);

#endif
