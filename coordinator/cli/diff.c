/*
 * diff.c -- a unified line diff for `kfarm review show` (kf_cli_diff).
 *
 * Design. Candidates are one source file of at most a few thousand lines,
 * so the classic longest-common-subsequence table (O(n*m) cells of 16 bit)
 * is small and simple; inputs beyond KF_DIFF_MAX_LINES on either side are
 * refused with a note instead of allocating a huge table. Output follows
 * `diff -u` (hunks with 3 lines of context, "@@ -a,b +c,d @@" headers).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"

#define KF_DIFF_MAX_LINES 4000
#define KF_DIFF_CONTEXT 3

typedef struct {
    const char **s;
    size_t *len;
    int n;
} lines;

static int split(const char *text, lines *l)
{
    int cap = 1;
    for (const char *p = text; *p; p++) cap += *p == '\n';
    l->s = malloc((size_t)cap * sizeof(*l->s));
    l->len = malloc((size_t)cap * sizeof(*l->len));
    l->n = 0;
    if (!l->s || !l->len) return -1;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        l->s[l->n] = p;
        l->len[l->n++] = n;
        p += n + (e ? 1 : 0);
    }
    return 0;
}

static int same(const lines *a, int i, const lines *b, int j)
{
    return a->len[i] == b->len[j] && !memcmp(a->s[i], b->s[j], a->len[i]);
}

int kf_cli_diff(const char *old_text, const char *new_text, const char *old_name,
                const char *new_name, FILE *f)
{
    lines a = { 0 }, b = { 0 };
    int rc = -1;
    uint16_t *t = NULL;
    char *op = NULL;
    int *ai = NULL, *bi = NULL;
    if (split(old_text ? old_text : "", &a) < 0 || split(new_text ? new_text : "", &b) < 0) goto out;
    if (a.n > KF_DIFF_MAX_LINES || b.n > KF_DIFF_MAX_LINES) {
        fprintf(f, "(no diff: more than %d lines)\n", KF_DIFF_MAX_LINES);
        rc = 0;
        goto out;
    }
    int W = b.n + 1;
    t = calloc((size_t)(a.n + 1) * (size_t)W, sizeof(*t));
    /* the edit script: ' ' keep, '-' old only, '+' new only; at most n+m */
    op = malloc((size_t)(a.n + b.n + 1));
    ai = malloc((size_t)(a.n + b.n + 1) * sizeof(int));
    bi = malloc((size_t)(a.n + b.n + 1) * sizeof(int));
    if (!t || !op || !ai || !bi) goto out;
    for (int i = a.n - 1; i >= 0; i--)
        for (int j = b.n - 1; j >= 0; j--)
            t[i * W + j] = same(&a, i, &b, j) ? t[(i + 1) * W + j + 1] + 1
                         : t[(i + 1) * W + j] > t[i * W + j + 1] ? t[(i + 1) * W + j] : t[i * W + j + 1];
    int n = 0, i = 0, j = 0;
    while (i < a.n || j < b.n) {
        if (i < a.n && j < b.n && same(&a, i, &b, j)) { op[n] = ' '; ai[n] = i++; bi[n++] = j++; }
        else if (j < b.n && (i == a.n || t[i * W + j + 1] > t[(i + 1) * W + j])) { op[n] = '+'; ai[n] = i; bi[n++] = j++; }
        else { op[n] = '-'; ai[n] = i++; bi[n++] = j; }
    }
    int changed = 0;
    for (int k = 0; k < n; k++) changed |= op[k] != ' ';
    if (!changed) {
        fprintf(f, "(identical)\n");
        rc = 0;
        goto out;
    }
    fprintf(f, "--- %s\n+++ %s\n", old_name, new_name);
    for (int k = 0; k < n;) {
        if (op[k] == ' ') { k++; continue; }
        /* a hunk: from CONTEXT before this change to CONTEXT after the last
         * change that is at most 2*CONTEXT unchanged lines further */
        int s = k - KF_DIFF_CONTEXT < 0 ? 0 : k - KF_DIFF_CONTEXT, e = k;
        for (int q = k; q < n; q++) {
            if (op[q] != ' ') e = q;
            else if (q - e > 2 * KF_DIFF_CONTEXT) break;
        }
        int end = e + KF_DIFF_CONTEXT + 1 > n ? n : e + KF_DIFF_CONTEXT + 1;
        int oa = 0, ob = 0;
        for (int q = s; q < end; q++) { oa += op[q] != '+'; ob += op[q] != '-'; }
        fprintf(f, "@@ -%d,%d +%d,%d @@\n", ai[s] + (oa ? 1 : 0), oa, bi[s] + (ob ? 1 : 0), ob);
        for (int q = s; q < end; q++) {
            const char *line = op[q] == '+' ? b.s[bi[q]] : a.s[ai[q]];
            size_t len = op[q] == '+' ? b.len[bi[q]] : a.len[ai[q]];
            fprintf(f, "%c%.*s\n", op[q], (int)len, line);
        }
        k = end;
    }
    rc = 0;
out:
    free(a.s);
    free(a.len);
    free(b.s);
    free(b.len);
    free(t);
    free(op);
    free(ai);
    free(bi);
    return rc;
}
