/*
 * jscan.h -- a JSON scanner that reads a few members without a full parse
 * (prefix kf_jscan_).
 *
 * Design. Reading a result's metrics with a full parse (jansson: every
 * value allocated, then freed) was a fifth of a full dashboard export's
 * CPU and a fifth of the coordinator's per stored result. The scanner steps
 * over the text once and hands back spans [a, b) of the members asked for;
 * it never allocates. It takes a conservative subset of JSON -- ASCII
 * text without \u escapes, numbers without an exponent (integers of at most
 * 18 digits), nesting at most KF_JSCAN_MAX_DEPTH deep -- and sets bad on
 * anything else, valid or not: the caller then parses the text whole with
 * jansson, which stays the reference (tests/unit/test_export_noise.c and
 * test_noise.c check the two agree on samples and random mutations). Text
 * the scanner accepts whole is JSON jansson accepts.
 */
#ifndef KF_JSCAN_H
#define KF_JSCAN_H

#include <stddef.h>

#define KF_JSCAN_MAX_DEPTH 512

/* A scan of text [p, end): bad set means "give up, parse it whole";
 * num_max: the longest number taken, in bytes (0: 300). */
typedef struct {
    const char *p, *end;
    int bad;
    int num_max;
} kf_jscan;

/* A value in the text, its first byte telling its kind (a string's span
 * includes its quotes); a NULL: absent. */
typedef struct {
    const char *a, *b;
} kf_jspan;

/* Step over white space at s->p. */
void kf_jscan_ws(kf_jscan *s);

/* Step over one value at s->p (any kind), its span in *v. */
void kf_jscan_value(kf_jscan *s, kf_jspan *v);

/* The members of the object at s->p named in names[0..n): the span of the
 * last value under each name in vals[] (absent: {NULL, NULL}), as jansson
 * keeps the last of duplicate keys. A key with an escape: bad (it may spell
 * one of the names). *is_obj: the value was an object (else it was stepped
 * over and nothing is filled). */
void kf_jscan_members(kf_jscan *s, const char *const *names, int n, kf_jspan *vals, int *is_obj);

/* The elements of the array whose '[' is just before s->p, one per call:
 * 1 with the next one's span in *v, 0 at the end (*first: 1 before the
 * first call). */
int kf_jscan_next(kf_jscan *s, int *first, kf_jspan *v);

/* The double of a number or numeric string span, as jansson and strtod
 * read it: 1 and *d, or 0 when v is neither (a string with escapes: bad). */
int kf_jscan_double(kf_jscan *s, kf_jspan v, double *d);

#endif
