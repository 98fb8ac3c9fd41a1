/*
 * test_export_noise.c -- the export's scanner of a result's metrics
 * (kf_export_metrics_noise, coordinator/export.c) against the full parse it
 * replaces (kf_export_metrics_noise_parsed): the same cv, speedup range and
 * "noisy" flag, bit for bit, on the metrics the judge writes (as jsonb's
 * text output gives them back), on hostile and malformed ones, and on
 * 200,000 random mutations of them (bytes flipped, cut, duplicated).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "kf_test.h"

static int same(const kf_export_noise *a, const kf_export_noise *b)
{
    if (a->has_cv != b->has_cv || a->has_lo != b->has_lo || a->noisy != b->noisy) return 0;
    if (a->has_cv && memcmp(&a->cv, &b->cv, sizeof(double)) != 0) return 0;
    if (a->has_lo && (memcmp(&a->lo, &b->lo, sizeof(double)) != 0 || memcmp(&a->hi, &b->hi, sizeof(double)) != 0))
        return 0;
    return 1;
}

static int agree(const char *m, size_t n, kf_export_noise *fast)
{
    kf_export_noise ref;
    kf_export_metrics_noise(m, n, fast);
    kf_export_metrics_noise_parsed(m, n, &ref);
    if (!same(fast, &ref)) {
        fprintf(stderr, "disagree on %.*s\n  scan: cv %d %.17g lo %d %.17g %.17g noisy %d\n"
                        "  full: cv %d %.17g lo %d %.17g %.17g noisy %d\n",
                (int)(n > 300 ? 300 : n), m, fast->has_cv, fast->cv, fast->has_lo, fast->lo, fast->hi,
                fast->noisy, ref.has_cv, ref.cv, ref.has_lo, ref.lo, ref.hi, ref.noisy);
        return 0;
    }
    return 1;
}

/* What the judge writes, as jsonb's text output orders and spaces it. */
static const char *const SAMPLES[] = {
    "{\"timing\": {\"flags\": [\"noisy\"], \"shapes\": [{\"gbs\": 291.0, \"calls\": 200, \"sizes\": {\"n\": 4096}, "
    "\"speedup\": 0.97, \"baseline\": {\"cv\": 0.02, \"min_us\": 98, \"median_us\": 100}, \"floor_us\": 10, "
    "\"candidate\": {\"cv\": 0.13, \"min_us\": 97.9381443298969, \"median_us\": 103.09278350515464}}, "
    "{\"gbs\": 800.0, \"calls\": 40, \"sizes\": {\"n\": 1048576}, \"speedup\": 1.03, \"baseline\": {\"cv\": 0.03}, "
    "\"candidate\": {\"cv\": 0.02}}]}, \"compile\": {\"candidate\": {\"ptxas\": [{\"name\": \"k\", \"registers\": 40, "
    "\"smem_bytes\": 4096, \"spill_loads\": 0, \"spill_stores\": 0}]}}}",
    "{\"timing\": {\"flags\": [], \"shapes\": [{\"speedup\": 2, \"candidate\": {\"cv\": 0}}]}}",
    /* flags as an object, a string; cv and speedup as strings */
    "{\"timing\": {\"flags\": {\"noisy\": true}, \"shapes\": [{\"speedup\": \"1.5\", \"candidate\": {\"cv\": \"0.25\"}}]}}",
    "{\"timing\": {\"flags\": \"noisy\", \"shapes\": [{\"speedup\": \"abc\", \"candidate\": {\"cv\": \"\"}}]}}",
    "{\"timing\": {\"flags\": \"quiet\", \"shapes\": []}}",
    "{\"timing\": {\"flags\": {\"other\": 1}}}",
    /* kinds the readers skip: shapes not an array, an element not an object,
     * candidate not an object, cv a boolean or null */
    "{\"timing\": {\"shapes\": {\"speedup\": 3}}}",
    "{\"timing\": {\"shapes\": [1, \"x\", null, [2], {\"speedup\": null, \"candidate\": [1]}, "
    "{\"speedup\": true, \"candidate\": {\"cv\": false}}, {\"speedup\": -0, \"candidate\": {\"cv\": null}}]}}",
    "{\"timing\": 5}",
    "{\"timing\": null, \"x\": 1}",
    "[{\"timing\": {\"shapes\": [{\"speedup\": 2}]}}]",
    "{}",
    "",
    "   ",
    "null",
    "\"timing\"",
    /* duplicate keys: the last one counts */
    "{\"timing\": {\"shapes\": [{\"speedup\": 9}]}, \"timing\": {\"shapes\": [{\"speedup\": 4, \"speedup\": 5}]}}",
    /* escapes: in a key that may spell a name, in a compared string, in
     * skipped text, \u escapes, a \u0000 that jansson refuses */
    "{\"tim\\u0069ng\": {\"shapes\": [{\"speedup\": 2}]}}",
    "{\"timing\": {\"flags\": [\"n\\u006fisy\"], \"shapes\": [{\"speedup\": 2}]}}",
    "{\"timing\": {\"flags\": [\"noisy\\n\"], \"shapes\": [{\"speedup\": 2, \"note\": \"a\\\"b\\\\c\\n\"}]}}",
    "{\"log\": \"x\\u0000y\", \"timing\": {\"shapes\": [{\"speedup\": 2}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": \"1\\u002e5\"}]}}",
    /* numbers: exponents, big integers, overflow, leading zeros, -0 */
    "{\"timing\": {\"shapes\": [{\"speedup\": 1e3, \"candidate\": {\"cv\": 2E-2}}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 12345678901234567890}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 123456789012345678}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 1.7976931348623157e309}]}}",
    "{\"big\": 1e400, \"timing\": {\"shapes\": [{\"speedup\": 2}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 01}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": -0.0, \"candidate\": {\"cv\": -0}}]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 0.1000000000000000055511151231257827}]}}",
    /* non-ASCII text, and an invalid UTF-8 byte */
    "{\"name\": \"h\xc3\xa9\", \"timing\": {\"shapes\": [{\"speedup\": 2}]}}",
    "{\"name\": \"h\xff\", \"timing\": {\"shapes\": [{\"speedup\": 2}]}}",
    /* broken: trailing text, a missing brace, a stray comma, a bare word */
    "{\"timing\": {\"shapes\": [{\"speedup\": 2}]}} x",
    "{\"timing\": {\"shapes\": [{\"speedup\": 2}]}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 2},]}}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 2}]}, \"x\": tru}",
    "{\"timing\": {\"shapes\": [{\"speedup\": 2}]}, \"x\": [1 2]}",
};

int main(void)
{
    kf_test_state st = { 0, 0 };
    kf_export_noise n;
    size_t ns = sizeof(SAMPLES) / sizeof(SAMPLES[0]);
    for (size_t i = 0; i < ns; i++)
        CHECK(&st, agree(SAMPLES[i], strlen(SAMPLES[i]), &n), "sample %zu: scanner and full parse agree", i);

    /* the judge's metrics are read by the scanner, not the full parse */
    for (size_t i = 0; i < 3; i++)
        CHECK(&st, kf_export_metrics_noise(SAMPLES[i], strlen(SAMPLES[i]), &n) == 1, "sample %zu is scanned", i);
    CHECK(&st, kf_export_metrics_noise(SAMPLES[17], strlen(SAMPLES[17]), &n) == 0,
          "an escaped key goes to the full parse");
    /* what the scanner reads from the judge's metrics */
    kf_export_metrics_noise(SAMPLES[0], strlen(SAMPLES[0]), &n);
    CHECK(&st, n.has_cv && n.cv == 0.13 && n.has_lo && n.lo == 0.97 && n.hi == 1.03 && n.noisy == 1,
          "sample 0: cv %g, speedups %g..%g, noisy %d", n.cv, n.lo, n.hi, n.noisy);
    kf_export_metrics_noise(SAMPLES[2], strlen(SAMPLES[2]), &n);
    CHECK(&st, n.cv == 0.25 && n.lo == 1.5 && n.noisy == 1, "strings are read as numbers; flags as an object");
    kf_export_metrics_noise(SAMPLES[16], strlen(SAMPLES[16]), &n);
    CHECK(&st, n.has_lo && n.lo == 5 && n.hi == 5, "duplicate keys: the last one (%g..%g)", n.lo, n.hi);

    /* nesting deeper than the scanner goes: the full parse decides */
    size_t depth = 3000;
    char *deep = malloc(2 * depth + 64);
    size_t dl = (size_t)sprintf(deep, "{\"x\": ");
    for (size_t i = 0; i < depth; i++) deep[dl++] = '[';
    for (size_t i = 0; i < depth; i++) deep[dl++] = ']';
    dl += (size_t)sprintf(deep + dl, ", \"timing\": {\"shapes\": [{\"speedup\": 2}]}}");
    CHECK(&st, agree(deep, dl, &n), "3,000 nested arrays");
    free(deep);

    /* random mutations of the samples: every one agrees */
    unsigned long long x = 88172645463325252ull;
    int bad = 0;
    char buf[2048];
    const char alphabet[] = "{}[]\":,\\ 0123456789.-eEtrufalsny\xc3\xa9u";
    for (int it = 0; it < 200000 && bad < 5; it++) {
        long m = kf_test_mutate(buf, sizeof(buf), SAMPLES, ns, alphabet, &x);
        if (m < 0) continue;
        size_t len = (size_t)m;
        if (!agree(buf, len, &n)) bad++;
    }
    CHECK(&st, bad == 0, "200,000 mutations: %d disagreements", bad);
    return kf_test_done(&st);
}
