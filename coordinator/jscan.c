/*
 * jscan.c -- a JSON scanner that reads a few members without a full parse.
 * See jscan.h.
 */
#include "jscan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void kf_jscan_ws(kf_jscan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

/* A string at s->p: its raw bytes (between the quotes) in *v. Escapes are
 * stepped over and *esc set (the bytes are then not the string's value);
 * a \u escape, a control or non-ASCII byte, or no closing quote: bad. */
static void scan_string(kf_jscan *s, kf_jspan *v, int *esc)
{
    const char *q = s->p + 1;
    *esc = 0;
    while (q < s->end && *q != '"') {
        unsigned char c = (unsigned char)*q;
        if (c < 0x20 || c >= 0x80) {
            s->bad = 1;
            return;
        }
        if (c == '\\') {
            if (q + 1 >= s->end || q[1] == 'u' || !strchr("\"\\/bfnrt", q[1])) {
                s->bad = 1;
                return;
            }
            *esc = 1;
            q += 2;
            continue;
        }
        q++;
    }
    if (q >= s->end) {
        s->bad = 1;
        return;
    }
    v->a = s->p + 1;
    v->b = q;
    s->p = q + 1;
}

/* A number at s->p, as JSON writes it, without an exponent; an integer of
 * more than 18 digits or any number longer than s->num_max bytes (0: 300):
 * bad (jansson refuses what overflows). */
static void scan_number(kf_jscan *s, kf_jspan *v)
{
    const char *q = s->p;
    if (q < s->end && *q == '-') q++;
    const char *d = q;
    while (q < s->end && *q >= '0' && *q <= '9') q++;
    size_t nd = (size_t)(q - d);
    if (nd == 0 || (nd > 1 && *d == '0')) {
        s->bad = 1;
        return;
    }
    int real = 0;
    if (q < s->end && *q == '.') {
        real = 1;
        const char *f = ++q;
        while (q < s->end && *q >= '0' && *q <= '9') q++;
        if (q == f) {
            s->bad = 1;
            return;
        }
    }
    if ((q < s->end && (*q == 'e' || *q == 'E')) || (!real && nd > 18) ||
        q - s->p > (s->num_max ? s->num_max : 300)) {
        s->bad = 1;
        return;
    }
    v->a = s->p;
    v->b = q;
    s->p = q;
}

/* Step over one value at s->p (any kind, nested at most KF_JSCAN_MAX_DEPTH
 * deep), its span in *v (a string's with its quotes). */
static void value_at(kf_jscan *s, kf_jspan *v, int depth)
{
    kf_jscan_ws(s);
    if (s->p >= s->end) {
        s->bad = 1;
        return;
    }
    const char *start = s->p;
    char c = *s->p;
    v->a = start;
    if (c == '"') {
        int esc;
        scan_string(s, v, &esc);
        v->a = start;
        v->b = s->p;
        return;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        scan_number(s, v);
        return;
    }
    if (c != '{' && c != '[') {
        static const char *const lit[] = { "true", "false", "null" };
        for (int i = 0; i < 3; i++) {
            size_t n = strlen(lit[i]);
            if ((size_t)(s->end - s->p) >= n && !memcmp(s->p, lit[i], n)) {
                s->p += n;
                v->b = s->p;
                return;
            }
        }
        s->bad = 1;
        return;
    }
    if (depth >= KF_JSCAN_MAX_DEPTH) {
        s->bad = 1;
        return;
    }
    char close = c == '{' ? '}' : ']';
    s->p++;
    kf_jscan_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        v->b = s->p;
        return;
    }
    while (!s->bad) {
        if (c == '{') {
            kf_jspan k;
            int esc;
            kf_jscan_ws(s);
            if (s->p >= s->end || *s->p != '"') {
                s->bad = 1;
                return;
            }
            scan_string(s, &k, &esc);
            kf_jscan_ws(s);
            if (s->bad || s->p >= s->end || *s->p != ':') {
                s->bad = 1;
                return;
            }
            s->p++;
        }
        kf_jspan e;
        value_at(s, &e, depth + 1);
        if (s->bad) return;
        kf_jscan_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == close) {
            s->p++;
            v->b = s->p;
            return;
        }
        s->bad = 1;
    }
}

void kf_jscan_value(kf_jscan *s, kf_jspan *v)
{
    value_at(s, v, 0);
}

/* The members of the object at s->p named in names[0..n): the span of the
 * last value under each name in vals[] ({NULL, NULL}: absent). A key with
 * an escape: bad (it may spell one of the names). *is_obj: the value was
 * an object (else it was stepped over and nothing is filled). */
void kf_jscan_members(kf_jscan *s, const char *const *names, int n, kf_jspan *vals, int *is_obj)
{
    for (int i = 0; i < n; i++) vals[i] = (kf_jspan){ NULL, NULL };
    kf_jscan_ws(s);
    *is_obj = s->p < s->end && *s->p == '{';
    if (!*is_obj) {
        kf_jspan skip;
        kf_jscan_value(s, &skip);
        return;
    }
    s->p++;
    kf_jscan_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return;
    }
    while (!s->bad) {
        kf_jscan_ws(s);
        kf_jspan k = { NULL, NULL }, v = { NULL, NULL };
        int esc;
        if (s->p >= s->end || *s->p != '"') {
            s->bad = 1;
            return;
        }
        scan_string(s, &k, &esc);
        kf_jscan_ws(s);
        if (s->bad || esc || s->p >= s->end || *s->p != ':') {
            s->bad = 1;
            return;
        }
        s->p++;
        kf_jscan_value(s, &v);
        if (s->bad) return;
        for (int i = 0; i < n; i++)
            if ((size_t)(k.b - k.a) == strlen(names[i]) && !memcmp(k.a, names[i], (size_t)(k.b - k.a))) vals[i] = v;
        kf_jscan_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return;
        }
        s->bad = 1;
    }
}

/* The elements of the array at s->p, one at a time: 1 with the next one's
 * span in *v, 0 at the end. */
int kf_jscan_next(kf_jscan *s, int *first, kf_jspan *v)
{
    kf_jscan_ws(s);
    if (s->p >= s->end) {
        s->bad = 1;
        return 0;
    }
    if (*first) {
        *first = 0;
        if (*s->p == ']') {
            s->p++;
            return 0;
        }
    } else if (*s->p == ',') {
        s->p++;
    } else if (*s->p == ']') {
        s->p++;
        return 0;
    } else {
        s->bad = 1;
        return 0;
    }
    kf_jscan_ws(s);
    v->a = s->p;
    kf_jscan_value(s, v);
    return !s->bad;
}

/* The double of a number or numeric string span, as jansson and strtod
 * read it: 1 and *d, or 0 when v is neither (or a string with escapes). */
int kf_jscan_double(kf_jscan *s, kf_jspan v, double *d)
{
    if (!v.a) return 0;
    if (*v.a == '"') {
        for (const char *q = v.a + 1; q < v.b - 1; q++)
            if (*q == '\\') {
                s->bad = 1;
                return 0;
            }
        *d = strtod(v.a + 1, NULL); /* stops at the closing quote */
        return 1;
    }
    if (*v.a != '-' && (*v.a < '0' || *v.a > '9')) return 0;
    int real = memchr(v.a, '.', (size_t)(v.b - v.a)) != NULL;
    *d = real ? strtod(v.a, NULL) : (double)strtoll(v.a, NULL, 10);
    return 1;
}

