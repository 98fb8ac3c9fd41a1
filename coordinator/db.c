/*
 * db.c -- PostgreSQL connection, reconnects, migrations. See db.h.
 *
 * Reconnect policy. A statement that fails because the connection broke while
 * no transaction was open is retried once after an immediate PQreset: a
 * database restart between two requests is then invisible to callers. Inside
 * a transaction nothing is retried (the transaction is gone); the caller gets
 * the error and kf_db_ensure() reconnects later with backoff.
 *
 * Migrations. Session-level advisory lock KF_DB_MIGRATE_LOCK serializes
 * concurrent starters (two coordinators, a coordinator and `kfarm db
 * migrate`); under it, schema_version is read and every missing migration is
 * applied in its own transaction together with its schema_version row.
 */
#include "db.h"

#include <ctype.h>
#include <math.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kf_util.h"

#define KF_DB_MIGRATE_LOCK 7162543915L /* arbitrary, "kfarm" */
#define KF_DB_BACKOFF_MIN 0.5
#define KF_DB_BACKOFF_MAX 10.0

#define KF_DB_STMTS 128 /* prepared statements remembered per connection */

/* A prepared statement's cached plan is made again after KF_DB_REPLAN_FIRST_S,
 * then after twice as long each time, at most KF_DB_REPLAN_MAX_S. PostgreSQL
 * keeps a session's generic plan until an invalidation (an ANALYZE of a table
 * it reads, DDL), and picks it after five executions with the table sizes of
 * that moment: a coordinator started on a fresh database planned the group
 * commit's evaluation lookup as a sequential scan of an empty table and ran
 * it that way at 200,000 rows (36 ms instead of 0.05; 25-52 ms statements in
 * the dispatch benchmark's first minute, before autovacuum's first ANALYZE:
 * docs/benchmarks.md, 2026-12-06 evening). Re-preparing costs a DEALLOCATE
 * and five custom plans per statement and connection, ever rarer. */
#define KF_DB_REPLAN_FIRST_S 4.0
#define KF_DB_REPLAN_MAX_S 256.0

typedef struct {
    uint64_t hash;         /* FNV-1a of the text; 0 = empty slot */
    char *sql;
    int unpreparable;      /* PQprepare refused it: run it unprepared */
    double replan_at;      /* monotonic s: make the plan again after this */
    double replan_every;   /* s: the next interval (doubles, KF_DB_REPLAN_MAX_S at most) */
} kf_db_stmt;

struct kf_db {
    PGconn *conn;
    char *conninfo;
    double next_retry_s;   /* monotonic time before which no reset is tried */
    double backoff_s;
    char sqlstate[6];
    int prepare;           /* kf_db_set_prepare: statements are prepared once per session */
    kf_db_stmt stmts[KF_DB_STMTS];
};

static void forget_statements(kf_db *db)
{
    for (int i = 0; i < KF_DB_STMTS; i++) {
        free(db->stmts[i].sql);
        db->stmts[i].sql = NULL;
        db->stmts[i].hash = 0;
        db->stmts[i].unpreparable = 0;
    }
}

void kf_db_set_prepare(kf_db *db, int on) { db->prepare = on; }

/* When st's plan is next made again (KF_DB_REPLAN_*), from now. */
static void replan_schedule(kf_db_stmt *st, double now)
{
    st->replan_at = now + st->replan_every;
    st->replan_every = st->replan_every * 2 < KF_DB_REPLAN_MAX_S ? st->replan_every * 2 : KF_DB_REPLAN_MAX_S;
}

/* PQprepare sql as name into slot st: 1 prepared; 0 not (the statement runs
 * unprepared: a new slot is marked unpreparable, a slot whose plan was being
 * made again is forgotten and tried anew on next use); -1 failed inside a
 * transaction (*r: the error result; the slot is forgotten: a later attempt
 * outside this transaction may work). */
static int prepare_slot(kf_db *db, kf_db_stmt *st, const char *name, const char *sql, int nparams,
                        int again, PGresult **r)
{
    PGresult *p = PQprepare(db->conn, name, sql, nparams, NULL);
    if (p && PQresultStatus(p) == PGRES_COMMAND_OK) {
        PQclear(p);
        replan_schedule(st, kf_util_now_s());
        return 1;
    }
    int inerror = PQtransactionStatus(db->conn) == PQTRANS_INERROR;
    if (inerror || again) {
        free(st->sql);
        st->sql = NULL;
        st->hash = 0;
    }
    if (inerror) {
        *r = p;
        return -1;
    }
    if (p) PQclear(p);
    if (!again) st->unpreparable = 1;
    return 0;
}

/* The prepared statement for sql on this session, preparing it on first use
 * and again when its plan is due (KF_DB_REPLAN_*): its name in name[16], 1;
 * 0 when it is not to be prepared (table full, refused by the server); -1
 * when preparing failed inside a transaction (*r: the error result, the
 * transaction is aborted as the statement itself would have left it). */
static int prepared(kf_db *db, const char *sql, int nparams, char name[16], PGresult **r)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = sql; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    if (!h) h = 1;
    for (int k = 0; k < KF_DB_STMTS; k++) {
        int i = (int)((h + (uint64_t)k) % KF_DB_STMTS);
        kf_db_stmt *st = &db->stmts[i];
        if (st->hash == h && !strcmp(st->sql, sql)) {
            snprintf(name, 16, "kfs%d", i);
            if (st->unpreparable) return 0;
            double now = kf_util_now_s();
            if (now < st->replan_at || PQtransactionStatus(db->conn) == PQTRANS_INERROR) return 1;
            /* time to plan it again: deallocate, then prepare anew */
            char dsql[32];
            snprintf(dsql, sizeof(dsql), "DEALLOCATE %s", name);
            PGresult *d = PQexec(db->conn, dsql);
            if (!d || PQresultStatus(d) != PGRES_COMMAND_OK) {
                st->replan_at = now + st->replan_every; /* keep the old plan; try later */
                if (PQtransactionStatus(db->conn) == PQTRANS_INERROR) {
                    *r = d; /* the transaction is aborted, as the statement would have left it */
                    return -1;
                }
                if (d) PQclear(d);
                return 1;
            }
            PQclear(d);
            return prepare_slot(db, st, name, sql, nparams, 1, r);
        }
        if (st->hash) continue;
        st->sql = strdup(sql);
        if (!st->sql) return 0;
        st->hash = h;
        st->replan_every = KF_DB_REPLAN_FIRST_S;
        snprintf(name, 16, "kfs%d", i);
        return prepare_slot(db, st, name, sql, nparams, 0, r);
    }
    return 0;
}

static void quiet_notice(void *arg, const char *msg) { (void)arg; (void)msg; }

kf_db *kf_db_open(const char *conninfo, char *err, size_t errlen)
{
    return kf_db_open_with(conninfo, NULL, err, errlen);
}

kf_db *kf_db_open_with(const char *conninfo, const char *pg_options, char *err, size_t errlen)
{
    if (!conninfo || !*conninfo) conninfo = getenv("KFARM_DB");
    if (!conninfo || !*conninfo) {
        snprintf(err, errlen, "no database: pass --db CONNINFO or set KFARM_DB");
        return NULL;
    }
    kf_db *db = calloc(1, sizeof(*db));
    if (!db || !(db->conninfo = strdup(conninfo))) {
        free(db);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (pg_options && *pg_options) {
        /* the conninfo string expanded as dbname, then the session options
         * (kept by PQreset: a reconnect has them too). A later "options"
         * replaces the conninfo's own and $PGOPTIONS: ours go after theirs
         * in one string, so both hold (and ours win where they overlap). */
        char *merged = NULL, *perr = NULL;
        const char *theirs = NULL;
        PQconninfoOption *ci = PQconninfoParse(conninfo, &perr);
        for (PQconninfoOption *o = ci; o && o->keyword; o++)
            if (!strcmp(o->keyword, "options") && o->val && o->val[0]) theirs = o->val;
        if (!theirs) theirs = getenv("PGOPTIONS");
        size_t ml = (theirs ? strlen(theirs) + 1 : 0) + strlen(pg_options) + 1;
        if ((merged = malloc(ml)))
            snprintf(merged, ml, "%s%s%s", theirs ? theirs : "", theirs ? " " : "", pg_options);
        const char *const kw[] = { "dbname", "options", NULL };
        const char *const val[] = { conninfo, merged ? merged : pg_options, NULL };
        db->conn = PQconnectdbParams(kw, val, 1);
        free(merged);
        PQconninfoFree(ci);
        PQfreemem(perr);
    } else {
        db->conn = PQconnectdb(conninfo);
    }
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
        const char *m = db->conn ? PQerrorMessage(db->conn) : "out of memory";
        snprintf(err, errlen, "cannot connect to the database: %.*s", (int)strcspn(m, "\n"), m);
        kf_db_close(db);
        return NULL;
    }
    PQsetNoticeProcessor(db->conn, quiet_notice, NULL);
    db->backoff_s = KF_DB_BACKOFF_MIN;
    return db;
}

void kf_db_close(kf_db *db)
{
    if (!db) return;
    if (db->conn) PQfinish(db->conn);
    forget_statements(db);
    free(db->conninfo);
    free(db);
}

PGconn *kf_db_conn(kf_db *db) { return db->conn; }

const char *kf_db_last_sqlstate(const kf_db *db) { return db->sqlstate; }

static int try_reset(kf_db *db)
{
    forget_statements(db); /* a new session has none of them */
    PQreset(db->conn);
    if (PQstatus(db->conn) == CONNECTION_OK) {
        PQsetNoticeProcessor(db->conn, quiet_notice, NULL);
        db->backoff_s = KF_DB_BACKOFF_MIN;
        db->next_retry_s = 0;
        return 0;
    }
    db->next_retry_s = kf_util_now_s() + db->backoff_s;
    db->backoff_s *= 2;
    if (db->backoff_s > KF_DB_BACKOFF_MAX) db->backoff_s = KF_DB_BACKOFF_MAX;
    return -1;
}

int kf_db_ensure(kf_db *db, char *err, size_t errlen)
{
    if (PQstatus(db->conn) == CONNECTION_OK) return 0;
    if (kf_util_now_s() < db->next_retry_s) {
        snprintf(err, errlen, "database unavailable (reconnecting)");
        return -1;
    }
    if (try_reset(db) == 0) return 0;
    const char *m = PQerrorMessage(db->conn);
    snprintf(err, errlen, "database unavailable: %.*s", (int)strcspn(m, "\n"), m);
    return -1;
}

static void one_line(char *err, size_t errlen, const char *prefix, const char *m)
{
    if (!m || !*m) m = "unknown error";
    while (*m == ' ') m++;
    if (strncmp(m, "ERROR:  ", 8) == 0) m += 8;
    snprintf(err, errlen, "%s%.*s", prefix, (int)strcspn(m, "\n"), m);
}

PGresult *kf_db_exec(kf_db *db, const char *sql, int nparams, const char *const *params,
                     char *err, size_t errlen)
{
    return kf_db_exec_fmt(db, sql, nparams, params, NULL, NULL, err, errlen);
}

PGresult *kf_db_exec_fmt(kf_db *db, const char *sql, int nparams, const char *const *params,
                         const int *lengths, const int *formats, char *err, size_t errlen)
{
    db->sqlstate[0] = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (PQstatus(db->conn) != CONNECTION_OK && kf_db_ensure(db, err, errlen) < 0)
            return NULL;
        int idle = PQtransactionStatus(db->conn) == PQTRANS_IDLE;
        PGresult *r = NULL;
        char name[16];
        int prep = db->prepare && nparams > 0 ? prepared(db, sql, nparams, name, &r) : 0;
        if (prep > 0) r = PQexecPrepared(db->conn, name, nparams, params, lengths, formats, 0);
        else if (prep == 0) r = PQexecParams(db->conn, sql, nparams, NULL, params, lengths, formats, 0);
        ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return r;
        const char *ss = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        if (ss) snprintf(db->sqlstate, sizeof(db->sqlstate), "%s", ss);
        one_line(err, errlen, "", r ? PQresultErrorMessage(r) : PQerrorMessage(db->conn));
        if (r) PQclear(r);
        /* A prepared plan whose result type changed under it (a migration
         * while this session was open): forget every statement, retry once. */
        if (attempt == 0 && prep > 0 && idle && !strcmp(db->sqlstate, "0A000")) { /* ss died with r */
            PGresult *d = PQexec(db->conn, "DEALLOCATE ALL");
            if (d) PQclear(d);
            forget_statements(db);
            continue;
        }
        /* Lost connection outside a transaction: reset now and retry once. */
        if (attempt == 0 && idle && PQstatus(db->conn) != CONNECTION_OK) {
            if (try_reset(db) == 0) continue;
        }
        return NULL;
    }
    return NULL;
}

int kf_db_cmd(kf_db *db, const char *sql, int nparams, const char *const *params,
              char *err, size_t errlen)
{
    PGresult *r = kf_db_exec(db, sql, nparams, params, err, errlen);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

int kf_db_begin(kf_db *db, char *err, size_t errlen)
{
    return kf_db_cmd(db, "BEGIN", 0, NULL, err, errlen);
}

int kf_db_commit(kf_db *db, char *err, size_t errlen)
{
    return kf_db_cmd(db, "COMMIT", 0, NULL, err, errlen);
}

void kf_db_rollback(kf_db *db)
{
    if (PQstatus(db->conn) != CONNECTION_OK) return;
    if (PQtransactionStatus(db->conn) == PQTRANS_IDLE) return;
    PGresult *r = PQexec(db->conn, "ROLLBACK");
    if (r) PQclear(r);
}

int64_t kf_db_i64(const PGresult *r, int row, int col, int64_t dflt)
{
    if (row >= PQntuples(r) || PQgetisnull(r, row, col)) return dflt;
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

double kf_db_f64(const PGresult *r, int row, int col, double dflt)
{
    if (row >= PQntuples(r) || PQgetisnull(r, row, col)) return dflt;
    return strtod(PQgetvalue(r, row, col), NULL);
}

const char *kf_db_str(const PGresult *r, int row, int col)
{
    if (row >= PQntuples(r) || PQgetisnull(r, row, col)) return NULL;
    return PQgetvalue(r, row, col);
}

/* Length of the valid UTF-8 sequence at s (max n bytes), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c == 0) return 0;
    if (c < 0x80) return 1;
    size_t len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000;
    else return 0;
    if (len > n) return 0;
    unsigned cp = c & (0x3f >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

int kf_db_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_seq(p + i, len - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

char *kf_db_utf8_sanitize(char *s)
{
    if (!s) return s;
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = utf8_seq(p + i, n - i);
        if (!k) {
            p[i] = '?';
            k = 1;
        }
        i += k;
    }
    return s;
}

char *kf_db_text_array(const char *const *items, int n)
{
    kf_strbuf b = { 0 };
    kf_strbuf_addn(&b, "{", 1);
    for (int i = 0; i < n && !b.oom; i++) {
        const char *s = items[i];
        if (i) kf_strbuf_addn(&b, ",", 1);
        if (!s) {
            kf_strbuf_add(&b, "NULL");
            continue;
        }
        size_t len = strlen(s);
        if (kf_strbuf_reserve(&b, 2 * len + 2) < 0) break;
        char *p = b.s + b.len; /* quoted, '"' and '\\' escaped */
        *p++ = '"';
        for (size_t k = 0; k < len; k++) {
            if (s[k] == '"' || s[k] == '\\') *p++ = '\\';
            *p++ = s[k];
        }
        *p++ = '"';
        b.len = (size_t)(p - b.s);
        b.s[b.len] = 0;
    }
    kf_strbuf_addn(&b, "}", 1);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s; /* the caller frees it */
}

enum { BIN_HEAD = 20 }; /* ndim, flags, element type, length, lower bound */

static void put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

/* Room for an element of need bytes after the header; 0 or -1 (oom set). */
static int bin_room(kf_db_bin *a, size_t need)
{
    if (need > (size_t)INT32_MAX) a->b.oom = 1;
    if (!a->b.len && kf_strbuf_reserve(&a->b, BIN_HEAD) == 0) a->b.len = BIN_HEAD;
    return kf_strbuf_reserve(&a->b, need);
}

/* One element: n bytes at p, or NULL when p is NULL. */
static void bin_put(kf_db_bin *a, const void *p, size_t n)
{
    if (bin_room(a, 4 + (p ? n : 0)) < 0) return;
    unsigned char *o = (unsigned char *)a->b.s + a->b.len;
    put_be32(o, p ? (uint32_t)n : 0xffffffffu); /* -1: NULL */
    a->b.len += 4;
    if (p) {
        memcpy(o + 4, p, n);
        a->b.len += n;
    } else {
        a->nulls = 1;
    }
    a->n++;
}

static void bin_put8(kf_db_bin *a, uint64_t bits)
{
    unsigned char b[8];
    put_be32(b, (uint32_t)(bits >> 32));
    put_be32(b + 4, (uint32_t)bits);
    bin_put(a, b, 8);
}

void kf_db_bin_i64(kf_db_bin *a, int64_t v)
{
    bin_put8(a, (uint64_t)v);
}

void kf_db_bin_f64(kf_db_bin *a, double v)
{
    if (!isfinite(v)) {
        bin_put(a, NULL, 0);
        return;
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits)); /* IEEE 754 binary64, as float8send() */
    bin_put8(a, bits);
}

void kf_db_bin_str(kf_db_bin *a, const char *s)
{
    bin_put(a, s, s ? strlen(s) : 0);
}

void kf_db_bin_bytes(kf_db_bin *a, const void *p, size_t n)
{
    bin_put(a, p, n);
}

const char *kf_db_bin_data(kf_db_bin *a, int *len)
{
    if (bin_room(a, 0) < 0 || a->b.len > (size_t)INT32_MAX) return NULL;
    unsigned char *h = (unsigned char *)a->b.s;
    put_be32(h, a->n ? 1 : 0);
    put_be32(h + 4, (uint32_t)a->nulls);
    put_be32(h + 8, a->oid);
    put_be32(h + 12, (uint32_t)a->n);
    put_be32(h + 16, 1);
    *len = a->n ? (int)a->b.len : 12; /* an empty array: no dimension */
    return a->b.s;
}

void kf_db_bin_free(kf_db_bin *a)
{
    free(a->b.s);
    memset(a, 0, sizeof(*a));
}

/* ---- migrations ---- */

typedef struct {
    int version;
    char name[256];
    char *sql;      /* malloc'ed when read from a directory */
    const char *text;
} migration;

static int parse_version(const char *name)
{
    if (!isdigit((unsigned char)name[0])) return -1;
    int v = atoi(name);
    size_t n = strlen(name);
    if (v <= 0 || n < 5 || strcmp(name + n - 4, ".sql") != 0) return -1;
    return v;
}

static int cmp_migration(const void *a, const void *b)
{
    const migration *x = a, *y = b;
    return (x->version > y->version) - (x->version < y->version);
}

/* Collect migrations from $KFARM_SCHEMA_DIR or the embedded copies.
 * Returns the count (<= max) or -1. */
static int load_migrations(migration *m, int max, char *err, size_t errlen)
{
    const char *dir = getenv("KFARM_SCHEMA_DIR");
    int n = 0;
    if (dir && *dir) {
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, errlen, "KFARM_SCHEMA_DIR %s: %s", dir, strerror(errno));
            return -1;
        }
        struct dirent *e;
        while ((e = readdir(d)) && n < max) {
            int v = parse_version(e->d_name);
            if (v < 0) continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            char *sql = kf_util_read_file(path, NULL, 16u << 20);
            if (!sql) {
                snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
                closedir(d);
                for (int i = 0; i < n; i++) free(m[i].sql);
                return -1;
            }
            m[n].version = v;
            snprintf(m[n].name, sizeof(m[n].name), "%s", e->d_name);
            m[n].sql = sql;
            m[n].text = sql;
            n++;
        }
        closedir(d);
    } else {
        kf_embedded_file f[KF_DB_MAX_EMBEDDED];
        int total = kf_db_embedded_schema(f, KF_DB_MAX_EMBEDDED);
        for (int i = 0; i < total && i < KF_DB_MAX_EMBEDDED && n < max; i++) {
            m[n].version = parse_version(f[i].name);
            snprintf(m[n].name, sizeof(m[n].name), "%s", f[i].name);
            m[n].sql = NULL;
            m[n].text = f[i].data;
            n++;
        }
    }
    qsort(m, (size_t)n, sizeof(*m), cmp_migration);
    for (int i = 1; i < n; i++)
        if (m[i].version == m[i - 1].version) {
            snprintf(err, errlen, "two migrations with version %d (%s, %s)", m[i].version,
                     m[i - 1].name, m[i].name);
            for (int j = 0; j < n; j++) free(m[j].sql);
            return -1;
        }
    return n;
}

int kf_db_schema_version(kf_db *db, char *err, size_t errlen)
{
    PGresult *r = kf_db_exec(db,
        "SELECT COALESCE(max(version), 0) FROM schema_version", 0, NULL, err, errlen);
    if (!r) {
        if (strcmp(db->sqlstate, "42P01") == 0) return 0; /* undefined_table */
        return -1;
    }
    int v = (int)kf_db_i64(r, 0, 0, 0);
    PQclear(r);
    return v;
}

int kf_db_schema_drift(kf_db *db, char *msg, size_t msglen, char *err, size_t errlen)
{
    if (msglen) msg[0] = 0;
    migration m[KF_DB_MAX_EMBEDDED];
    int n = load_migrations(m, KF_DB_MAX_EMBEDDED, err, errlen);
    if (n < 0) return -1;
    PGresult *r = kf_db_exec(db, "SELECT version, name, COALESCE(sha256, '') FROM schema_version ORDER BY version",
                             0, NULL, err, errlen);
    int drift = 0;
    if (!r) {
        drift = strcmp(db->sqlstate, "42P01") == 0 ? 0 : -1; /* no schema yet: nothing applied */
    } else {
        size_t used = 0;
        for (int i = 0; i < PQntuples(r); i++) {
            int v = (int)kf_db_i64(r, i, 0, 0);
            const char *name = PQgetvalue(r, i, 1), *sha = PQgetvalue(r, i, 2);
            const migration *mine = NULL;
            for (int k = 0; k < n; k++)
                if (m[k].version == v) mine = &m[k];
            char hex[65] = "";
            if (mine) kf_util_sha256_hex(mine->text, strlen(mine->text), hex);
            if (mine && !strcmp(name, mine->name) && (!*sha || !strcmp(sha, hex))) continue;
            drift++;
            int w;
            if (!mine)
                w = snprintf(msg + used, msglen - used, "%s%03d (%s) is not among this build's migrations",
                             used ? "; " : "", v, name);
            else if (!*sha || strcmp(name, mine->name))
                w = snprintf(msg + used, msglen - used, "%s%03d applied as %s, this build has %s",
                             used ? "; " : "", v, name, mine->name);
            else
                w = snprintf(msg + used, msglen - used, "%s%s applied with sha256 %.12s, this build's is %.12s",
                             used ? "; " : "", name, sha, hex);
            if (w > 0 && used + (size_t)w < msglen) {
                used += (size_t)w;
            } else if (msglen > 4) { /* the rest does not fit: say so, keep what does */
                size_t at = used + 4 < msglen ? used : msglen - 4;
                snprintf(msg + at, msglen - at, "...");
                used = msglen - 1;
            }
        }
        PQclear(r);
    }
    for (int i = 0; i < n; i++) free(m[i].sql);
    return drift;
}

int kf_db_schema_latest(char *err, size_t errlen)
{
    migration m[KF_DB_MAX_EMBEDDED];
    int n = load_migrations(m, KF_DB_MAX_EMBEDDED, err, errlen);
    if (n < 0) return -1;
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (m[i].version > v) v = m[i].version;
        free(m[i].sql);
    }
    return v;
}

int kf_db_migrate(kf_db *db, int *applied, char *err, size_t errlen)
{
    migration m[KF_DB_MAX_EMBEDDED];
    int n = load_migrations(m, KF_DB_MAX_EMBEDDED, err, errlen);
    if (n < 0) return -1;
    if (applied) *applied = 0;
    int rc = -1, locked = 0;
    char lockkey[32];
    snprintf(lockkey, sizeof(lockkey), "%ld", KF_DB_MIGRATE_LOCK);
    const char *lp[1] = { lockkey };
    if (kf_db_cmd(db, "SELECT pg_advisory_lock($1::bigint)", 1, lp, err, errlen) < 0) goto out;
    locked = 1;
    if (kf_db_cmd(db,
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version integer PRIMARY KEY, name text NOT NULL, sha256 text,"
            " applied_at timestamptz NOT NULL DEFAULT now())", 0, NULL, err, errlen) < 0)
        goto out;
    for (int i = 0; i < n; i++) {
        char ver[16];
        snprintf(ver, sizeof(ver), "%d", m[i].version);
        const char *p1[1] = { ver };
        PGresult *r = kf_db_exec(db, "SELECT 1 FROM schema_version WHERE version = $1",
                                 1, p1, err, errlen);
        if (!r) goto out;
        int have = PQntuples(r) > 0;
        PQclear(r);
        if (have) continue;
        if (kf_db_begin(db, err, errlen) < 0) goto out;
        PGresult *x = PQexec(db->conn, m[i].text);
        if (!x || PQresultStatus(x) != PGRES_COMMAND_OK) {
            char msg[512];
            one_line(msg, sizeof(msg), "", x ? PQresultErrorMessage(x) : PQerrorMessage(db->conn));
            snprintf(err, errlen, "migration %s failed: %s", m[i].name, msg);
            if (x) PQclear(x);
            kf_db_rollback(db);
            goto out;
        }
        PQclear(x);
        char sha[65];
        kf_util_sha256_hex(m[i].text, strlen(m[i].text), sha);
        const char *p3[3] = { ver, m[i].name, sha };
        if (kf_db_cmd(db, "INSERT INTO schema_version (version, name, sha256) VALUES ($1, $2, $3)",
                      3, p3, err, errlen) < 0 ||
            kf_db_commit(db, err, errlen) < 0) {
            kf_db_rollback(db);
            goto out;
        }
        if (applied) (*applied)++;
    }
    rc = 0;
out:
    if (locked) {
        char e2[256];
        kf_db_cmd(db, "SELECT pg_advisory_unlock($1::bigint)", 1, lp, e2, sizeof(e2));
    }
    for (int i = 0; i < n; i++) free(m[i].sql);
    return rc;
}
