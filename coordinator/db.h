/*
 * db.h -- PostgreSQL access for the coordinator and the CLI (prefix kf_db_).
 *
 * Design. One kf_db wraps one libpq connection plus what is needed to survive
 * a database restart: the conninfo and a reconnect backoff. Every statement
 * goes through kf_db_exec (PQexecParams, text parameters, never string
 * interpolation of values). When a statement fails because the connection is
 * gone, the failure is returned to the caller (a request is answered ERROR
 * and retried by the worker) and the next kf_db_ensure() call resets the
 * connection with exponential backoff (0.5 s .. 10 s), so the daemon keeps
 * running while PostgreSQL is down.
 *
 * Migrations are the numbered schema/NNN_*.sql files, embedded into the
 * binary at build time (coordinator/embed.c) so no path has to be found at
 * run time; $KFARM_SCHEMA_DIR overrides them with a directory (development).
 * kf_db_migrate takes an advisory lock, then applies every migration not yet
 * in schema_version, each in its own transaction.
 */
#ifndef KF_DB_H
#define KF_DB_H

#include <stddef.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "kf_util.h"

typedef struct kf_db kf_db;

/* Connect. conninfo NULL/empty: $KFARM_DB. Returns the handle, or NULL with a
 * one-line reason in err (no conninfo, connection refused, ...). */
kf_db *kf_db_open(const char *conninfo, char *err, size_t errlen);
/* The same with PostgreSQL session options (the libpq "options" keyword,
 * e.g. "-c lock_timeout=2000 -c statement_timeout=15000"), which a
 * reconnect keeps. They are added after the conninfo's own options (else
 * $PGOPTIONS), which therefore still hold where they do not overlap.
 * pg_options NULL: kf_db_open. */
kf_db *kf_db_open_with(const char *conninfo, const char *pg_options, char *err, size_t errlen);
/* Prepare every parameterized statement once per session from now on
 * (server-side plan cache: the serving loop runs the same few statements
 * millions of times; a one-shot CLI should not, it would pay a round trip
 * more per statement). Forgotten on reconnect. */
void kf_db_set_prepare(kf_db *db, int on);

/* Close and free (NULL is fine). */
void kf_db_close(kf_db *db);

/* The raw connection (for PQescape*, notices). May be in a failed state. */
PGconn *kf_db_conn(kf_db *db);

/* Make sure the connection is usable: if it is not CONNECTION_OK, PQreset it,
 * at most once per backoff period (0.5 s doubling to 10 s). Returns 0 when
 * connected, -1 (with reason) when still down. Never blocks for long beyond
 * libpq's own connect attempt. */
int kf_db_ensure(kf_db *db, char *err, size_t errlen);

/* Run one statement with text parameters (params[i] NULL = SQL NULL).
 * Returns the result (PGRES_TUPLES_OK or PGRES_COMMAND_OK; caller PQclear()s)
 * or NULL with the server's one-line message in err. */
PGresult *kf_db_exec(kf_db *db, const char *sql, int nparams, const char *const *params,
                     char *err, size_t errlen);

/* kf_db_exec with some parameters in PostgreSQL's binary format:
 * formats[i] 1 for params[i] of lengths[i] bytes (a kf_db_bin array),
 * 0 for text (lengths[i] ignored). formats NULL: all text. */
PGresult *kf_db_exec_fmt(kf_db *db, const char *sql, int nparams, const char *const *params,
                         const int *lengths, const int *formats, char *err, size_t errlen);

/* Like kf_db_exec for statements whose result is not needed: 0 or -1. */
int kf_db_cmd(kf_db *db, const char *sql, int nparams, const char *const *params,
              char *err, size_t errlen);

/* SQLSTATE of the last failed kf_db_exec ("" if none / connection lost). */
const char *kf_db_last_sqlstate(const kf_db *db);

/* Transactions. begin/commit return 0 or -1 with reason; rollback is best
 * effort (also fine when no transaction is open). */
int kf_db_begin(kf_db *db, char *err, size_t errlen);
int kf_db_commit(kf_db *db, char *err, size_t errlen);
void kf_db_rollback(kf_db *db);

/* Apply pending migrations. *applied (optional) receives how many were
 * applied now. Returns 0 or -1 with reason (the failing migration's name and
 * the server message; that migration is rolled back). */
int kf_db_migrate(kf_db *db, int *applied, char *err, size_t errlen);

/* The applied migrations whose text differs from this build's: a version
 * recorded under another file name, or with another sha256 of its text (a
 * migration edited after that database applied it, or a branch's version
 * of it), or one this build does not have. Returns how many (0: none, or
 * no schema yet) and describes them in msg ("007_cover.sql applied with
 * sha256 1234abcd5678, this build's is ..."; "; " between them), or -1 with
 * err. Nothing is changed: the schema a database holds is the one its
 * migrations made, and refusing it would refuse every database that
 * applied an older text of a migration edited since (002-006 were). */
int kf_db_schema_drift(kf_db *db, char *msg, size_t msglen, char *err, size_t errlen);

/* Highest applied migration version (0 if none), or -1 on error. */
int kf_db_schema_version(kf_db *db, char *err, size_t errlen);

/* Highest migration version this build carries (embedded, or
 * $KFARM_SCHEMA_DIR's), or -1 with err. A database whose schema is newer
 * was migrated by a newer build, whose statements may mean something this
 * one's do not (018: heartbeats no longer write jobs.lease_deadline, so an
 * older reaper would requeue every heartbeat lease). */
int kf_db_schema_latest(char *err, size_t errlen);

/* Helpers for result fields: NULL-aware conversions (default when NULL). */
int64_t kf_db_i64(const PGresult *r, int row, int col, int64_t dflt);
double kf_db_f64(const PGresult *r, int row, int col, double dflt);
/* Field text, or NULL when SQL NULL. Owned by r. */
const char *kf_db_str(const PGresult *r, int row, int col);

/* Replace every byte sequence that is not valid UTF-8 (and NUL) in s with
 * '?', in place. PostgreSQL rejects invalid UTF-8 in text; data from workers
 * (compiler logs) is sanitized before it is stored. Returns s. */
char *kf_db_utf8_sanitize(char *s);

/* Whether the NUL-terminated string s (len bytes) is valid UTF-8 without NUL. */
int kf_db_utf8_valid(const char *s, size_t len);

/* Format n strings as a PostgreSQL text[] literal ({"a","b"}), quoting and
 * escaping every element. Returns a malloc'ed string (caller frees) or NULL
 * when out of memory. */
char *kf_db_text_array(const char *const *items, int n);

/* A column of many rows as one array parameter in PostgreSQL's binary
 * format (kf_db_exec_fmt, format 1): the layout array_recv() reads
 * (src/backend/utils/adt/arrayfuncs.c: ndim, has-nulls flag, element type
 * OID, then per dimension its length and lower bound 1, then each element
 * as a 4-byte length, -1 for NULL, and its bytes; integers big-endian; an
 * empty array is ndim 0). Numbers go as their 8 bytes (int8send,
 * float8send) and text and bytea as they are, so nothing is printed or
 * escaped here and nothing parsed there: array literals as text
 * ("%.17g" for 7 float columns, every metrics object quoted) cost ~30% of
 * the coordinator's CPU per stored result, and array_in's parse ~10% of
 * PostgreSQL's (docs/benchmarks.md, 2026-12-07 afternoon). Text must be
 * valid UTF-8 without NUL (PostgreSQL checks it and fails the statement).
 * Zero-initialize with the element type (all elements of that type), add
 * elements, then kf_db_bin_data, once, gives the bytes and their count
 * (NULL when an allocation failed on the way). */
enum { KF_DB_BYTEA = 17, KF_DB_INT8 = 20, KF_DB_TEXT = 25, KF_DB_FLOAT8 = 701 }; /* pg_type OIDs */
typedef struct {
    kf_strbuf b; /* the header's 20 bytes, then the elements */
    int n, nulls;
    unsigned oid;
} kf_db_bin;
void kf_db_bin_i64(kf_db_bin *a, int64_t v);
/* v, or NULL when v is not finite. */
void kf_db_bin_f64(kf_db_bin *a, double v);
/* s (text), or NULL when s is NULL. */
void kf_db_bin_str(kf_db_bin *a, const char *s);
/* n bytes at p (bytea), or NULL when p is NULL. */
void kf_db_bin_bytes(kf_db_bin *a, const void *p, size_t n);
const char *kf_db_bin_data(kf_db_bin *a, int *len);
void kf_db_bin_free(kf_db_bin *a);

/* ---- embedded files (coordinator/embed.c) ---- */

typedef struct {
    const char *name;   /* "001_init.sql", "index.html" */
    const char *data;   /* NUL-terminated */
    size_t len;         /* bytes, without the NUL */
} kf_embedded_file;

#define KF_DB_MAX_EMBEDDED 64

/* The embedded schema migrations, in order: fills out[0..max) and returns the
 * total count. */
int kf_db_embedded_schema(kf_embedded_file *out, int max);

/* The embedded dashboard_static files: fills out[0..max), returns the count. */
int kf_db_embedded_dashboard(kf_embedded_file *out, int max);

#endif
