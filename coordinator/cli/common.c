/*
 * common.c -- helpers shared by the kfarm commands. See kfarm_cli.h.
 */
#include "kfarm_cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int kf_cli_fail(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "kfarm: %s\n", msg);
    return 1;
}

int kf_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "kfarm: %s (see kfarm %s --help)\n", msg, cmd);
    return 2;
}

kf_db *kf_cli_connect(const char *conninfo)
{
    char err[1024];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    if (!db) kf_cli_fail("%s", err);
    return db;
}

int kf_cli_parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0) return -1;
    *out = v;
    return 0;
}

int kf_cli_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0)) return -1;
    *out = v;
    return 0;
}

int kf_cli_campaign_id(kf_db *db, const char *name, long long *id)
{
    char err[1024];
    int64_t v = 0;
    int rc = kf_campaign_lookup(db, name, &v, NULL, err, sizeof(err));
    if (rc == 1) return kf_cli_fail("no campaign '%s' (see kfarm campaign list)", name), -1;
    if (rc < 0) return kf_cli_fail("%s", err), -1;
    *id = v;
    return 0;
}

void kf_cli_table_init(kf_cli_table *t, int ncols, const char *const *header)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols > KF_CLI_TABLE_MAXCOLS ? KF_CLI_TABLE_MAXCOLS : ncols;
    kf_cli_table_row(t, header);
}

void kf_cli_table_row(kf_cli_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        char **c = realloc(t->cells, cap * (size_t)t->ncols * sizeof(char *));
        if (!c) return;
        t->cells = c;
        t->cap = cap;
    }
    for (int i = 0; i < t->ncols; i++) {
        const char *v = cells[i] ? cells[i] : "-";
        /* One line per cell: cut at the first newline. */
        size_t n = strcspn(v, "\r\n");
        char *c = malloc(n + 1);
        if (c) {
            memcpy(c, v, n);
            c[n] = 0;
        }
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] = c;
    }
    t->nrows++;
}

/* Display width of a UTF-8 string: code points (good enough for tables). */
static size_t u8len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xc0) != 0x80) n++;
    return n;
}

/* Byte offset of the first maxw code points. */
static size_t u8cut(const char *s, size_t maxw)
{
    size_t n = 0, i = 0;
    for (; s[i]; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (n == maxw) break;
            n++;
        }
    }
    return i;
}

int kf_cli_wide, kf_cli_json;

void kf_cli_table_print(kf_cli_table *t, FILE *f, int maxw)
{
    size_t w[KF_CLI_TABLE_MAXCOLS] = { 0 };
    if (kf_cli_wide) maxw = 0;
    for (size_t r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            const char *v = t->cells[r * (size_t)t->ncols + (size_t)c];
            size_t n = v ? u8len(v) : 0;
            if (maxw > 0 && n > (size_t)maxw && !t->keep[c]) n = (size_t)maxw;
            if (n > w[c]) w[c] = n;
        }
    /* Fit KF_CLI_WIDTH columns: narrow the widest column, one character at
     * a time, down to 6, never a kept one (--wide: no limit). */
    if (!kf_cli_wide) {
        for (;;) {
            size_t total = 0;
            int widest = -1;
            for (int c = 0; c < t->ncols; c++) {
                total += w[c] + (c ? 2 : 0);
                if (!t->keep[c] && w[c] > 6 && (widest < 0 || w[c] > w[widest])) widest = c;
            }
            if (total <= KF_CLI_WIDTH || widest < 0) break;
            w[widest]--;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            const char *v = t->cells[r * (size_t)t->ncols + (size_t)c];
            if (!v) v = "";
            size_t n = u8len(v), bytes = strlen(v);
            if (n > w[c]) {
                bytes = u8cut(v, w[c] - 1);
                n = w[c];
            }
            size_t pad = w[c] > n ? w[c] - n : 0;
            int last = c == t->ncols - 1;
            if (t->right[c] && r > 0) fprintf(f, "%*s", (int)pad, "");
            fwrite(v, 1, bytes, f);
            if (bytes < strlen(v)) fputs("~", f);
            if (!(t->right[c] && r > 0) && !last) fprintf(f, "%*s", (int)pad, "");
            if (!last) fputs("  ", f);
        }
        fputc('\n', f);
    }
    kf_cli_table_free(t);
}

int kf_cli_print_json(PGresult *r, FILE *f)
{
    json_t *a = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *o = json_object();
        for (int c = 0; c < PQnfields(r); c++) {
            json_t *v;
            if (PQgetisnull(r, i, c)) {
                v = json_null();
            } else {
                const char *s = PQgetvalue(r, i, c);
                Oid ty = PQftype(r, c);
                /* int2/4/8, float4/8, numeric: numbers; bool; json/jsonb: nested */
                if (ty == 20 || ty == 21 || ty == 23) v = json_integer(strtoll(s, NULL, 10));
                else if (ty == 700 || ty == 701 || ty == 1700) v = json_real(strtod(s, NULL));
                else if (ty == 16) v = json_boolean(s[0] == 't');
                else if (ty == 114 || ty == 3802) v = json_loads(s, JSON_DECODE_ANY, NULL);
                else v = json_string(s);
                if (!v) v = json_string(s);
            }
            json_object_set_new(o, PQfname(r, c), v);
        }
        json_array_append_new(a, o);
    }
    int rc = json_dumpf(a, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(a);
    return rc < 0 ? -1 : 0;
}

void kf_cli_table_free(kf_cli_table *t)
{
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof(*t));
}

const char *kf_cli_num(const char *v, int prec, char *buf, size_t cap)
{
    if (!v) return "-";
    snprintf(buf, cap, "%.*f", prec, strtod(v, NULL));
    return buf;
}
