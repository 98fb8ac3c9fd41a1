/*
 * test_noise.c -- the speedup interval and ties of coordinator/noise.c, and
 * its scanner (kf_noise_scan, the coordinator's stored results) against the
 * full parse it stands in for: whatever the scanner takes is a JSON object
 * jansson takes, with the same interval bit for bit, on the judge's
 * metrics, hostile and malformed ones, and 200,000 random mutations.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kf_test.h"
#include "noise.h"

/* kf_noise_scan against jansson's parse and kf_noise_of_metrics_obj on
 * m[0..n) at speedup sp: 1 when they agree (or the scanner gave up, which
 * *scanned says), 0 with the case on stderr. */
static int agree(const char *m, size_t n, double sp, int *scanned)
{
    double cv = -7, lo = -7, hi = -7, rcv = -8, rlo = -8, rhi = -8;
    int has = -1;
    *scanned = kf_noise_scan(m, n, sp, &has, &cv, &lo, &hi);
    if (!*scanned) return has == 0 && cv == -7 && lo == -7 && hi == -7;
    json_t *j = json_loadb(m, n, 0, NULL);
    int obj = json_is_object(j);
    int rhas = obj && kf_noise_of_metrics_obj(j, sp, &rcv, &rlo, &rhi) == 0;
    json_decref(j);
    int ok = obj && has == rhas &&
             (!has || (!memcmp(&cv, &rcv, sizeof(cv)) && !memcmp(&lo, &rlo, sizeof(lo)) &&
                       !memcmp(&hi, &rhi, sizeof(hi))));
    if (!ok)
        fprintf(stderr, "disagree at %g on %.*s\n  scan: has %d cv %.17g [%.17g, %.17g]\n"
                        "  full: object %d has %d cv %.17g [%.17g, %.17g]\n",
                sp, (int)(n > 300 ? 300 : n), m, has, cv, lo, hi, obj, rhas, rcv, rlo, rhi);
    return ok;
}

/* The metrics the judge and loadgen write, and what the scanner must leave
 * to the full parse or read exactly as it does. */
static const char *const SAMPLES[] = {
    "{\"timing\":{\"flags\":[],\"shapes\":[{\"gbs\":246.269855,\"calls\":200,\"sizes\":{\"n\":4096},"
    "\"speedup\":0.796272531,\"baseline\":{\"cv\":0.02,\"min_us\":98,\"median_us\":100},\"floor_us\":10,"
    "\"candidate\":{\"cv\":0.0100000000,\"min_us\":119.305886,\"median_us\":125.585143},\"weight\":2},"
    "{\"gbs\":656.719613,\"calls\":40,\"speedup\":0.845526502,\"baseline\":{\"cv\":0.03},"
    "\"candidate\":{\"cv\":0.02}}]},\"compile\":{\"candidate\":{\"ptxas\":[{\"name\":\"k\","
    "\"registers\":32,\"smem_bytes\":4096,\"spill_loads\":0,\"spill_stores\":0}]}}}",
    "{\"loadgen\":true,\"timing\":{\"shapes\":[{\"sizes\":{\"N\":100000},\"weight\":1,"
    "\"candidate\":{\"median_us\":100,\"cv\":0.01,\"n\":10},\"baseline\":{\"median_us\":100,\"cv\":0.01,\"n\":10}}]}}",
    /* weights: absent, zero, negative, a string, a boolean; cv kinds the
     * model skips: a string, null, negative, a shape without one side */
    "{\"timing\": {\"shapes\": [{\"weight\": 0, \"baseline\": {\"cv\": 0.1}, \"candidate\": {\"cv\": 0.2}},"
    " {\"weight\": -3, \"baseline\": {\"cv\": 1}, \"candidate\": {\"cv\": 0}},"
    " {\"weight\": \"9\", \"baseline\": {\"cv\": 0.5}, \"candidate\": {\"cv\": 0.25}},"
    " {\"weight\": true, \"baseline\": {\"cv\": \"0.5\"}, \"candidate\": {\"cv\": 0.25}},"
    " {\"baseline\": {\"cv\": null}, \"candidate\": {\"cv\": 0.25}},"
    " {\"baseline\": {\"cv\": -0.5}, \"candidate\": {\"cv\": 0.25}}, {\"candidate\": {\"cv\": 0.25}},"
    " {\"weight\": 4.5, \"baseline\": {\"cv\": 0.05}, \"candidate\": {\"cv\": -0}}]}}",
    /* kinds skipped: shapes not an array, elements and sides not objects */
    "{\"timing\": {\"shapes\": {\"baseline\": {\"cv\": 0.1}, \"candidate\": {\"cv\": 0.1}}}}",
    "{\"timing\": {\"shapes\": [1, \"x\", null, [2], {\"baseline\": [0.1], \"candidate\": {\"cv\": 0.1}}]}}",
    "{\"timing\": 5}", "{\"timing\": null}", "{}", "", "  ", "null", "[1, 2]", "\"timing\"", "7",
    /* duplicate keys: the last one counts, at every level */
    "{\"timing\": {\"shapes\": []}, \"timing\": {\"shapes\": [{\"baseline\": {\"cv\": 0.1, \"cv\": 0.3},"
    " \"candidate\": {\"cv\": 0.2}, \"weight\": 1, \"weight\": 5}]}}",
    /* escapes: a key that may spell a name, skipped text, \u escapes, NUL */
    "{\"tim\\u0069ng\": {\"shapes\": [{\"baseline\": {\"cv\": 0.1}, \"candidate\": {\"cv\": 0.1}}]}}",
    "{\"note\": \"a\\\"b\\\\c\\n\", \"timing\": {\"shapes\": [{\"baseline\": {\"cv\": 0.1}, \"candidate\": {\"cv\": 0.1}}]}}",
    "{\"log\": \"x\\u0000y\", \"timing\": {\"shapes\": []}}",
    /* numbers: exponents, long ones, big integers, leading zeros, -0 */
    "{\"timing\": {\"shapes\": [{\"baseline\": {\"cv\": 1e-5}, \"candidate\": {\"cv\": 2E-2}}]}}",
    "{\"timing\": {\"shapes\": [{\"baseline\": {\"cv\": 0.1}, \"candidate\": {\"cv\": 0.1}}]},"
    " \"x\": 0.00000000000000000000000000000000000000000000000000000000000000000001}",
    "{\"x\": 12345678901234567890, \"timing\": {\"shapes\": []}}",
    "{\"x\": 123456789012345678, \"timing\": {\"shapes\": []}}",
    "{\"big\": 1e400}", "{\"x\": 01}", "{\"x\": -0.0, \"y\": 1.}",
    /* non-ASCII text, invalid UTF-8, a control byte */
    "{\"name\": \"h\xc3\xa9\", \"timing\": {\"shapes\": []}}", "{\"name\": \"h\xff\"}", "{\"name\": \"a\tb\"}",
    /* broken: trailing text, a missing brace, a stray comma, a bare word */
    "{\"timing\": {}} x", "{\"timing\": {\"shapes\": [1]}", "{\"timing\": {\"shapes\": [1,]}}",
    "{\"x\": tru}", "{\"x\": [1 2]}", "{\"x\" 1}", "{,}",
};

/* The scanner's side of the mutation test below. */
static int mutations(kf_test_state *st)
{
    size_t ns = sizeof(SAMPLES) / sizeof(SAMPLES[0]);
    static const double SPEEDUPS[] = { 1.5, 0.73, 0, -1, 1e-300 };
    unsigned long long x = 88172645463325252ull;
    int bad = 0, scanned = 0, sc;
    char buf[2048];
    const char alphabet[] = "{}[]\":,\\ 0123456789.-eEtrufalsnycvwigh\xc3\xa9u";
    for (int it = 0; it < 200000 && bad < 5; it++) {
        long m = kf_test_mutate(buf, sizeof(buf), SAMPLES, ns, alphabet, &x);
        if (m < 0) continue;
        size_t len = (size_t)m;
        if (!agree(buf, len, SPEEDUPS[(x >> 3) % 5], &sc)) bad++;
        scanned += sc;
    }
    CHECK(st, bad == 0, "200,000 mutations: %d disagreements (%d taken by the scanner)", bad, scanned);
    return scanned;
}

int main(void)
{
    kf_test_state st = { 0, 0 };
    double cv = -1, lo = -1, hi = -1;
    const char *m =
        "{\"timing\": {\"shapes\": ["
        " {\"weight\": 1, \"baseline\": {\"cv\": 0.03, \"reps\": 20}, \"candidate\": {\"cv\": 0.04, \"reps\": 20}},"
        " {\"weight\": 3, \"baseline\": {\"cv\": 0.03, \"reps\": 20}, \"candidate\": {\"cv\": 0.04, \"reps\": 20}}]}}";
    CHECK(&st, kf_noise_of_metrics(m, 2.0, &cv, &lo, &hi) == 0, "metrics with shapes");
    /* s = sqrt(0.03^2 + 0.04^2) = 0.05 on both shapes */
    CHECK(&st, fabs(cv - 0.04) < 1e-12, "cv is the weighted larger side: %g", cv);
    CHECK(&st, fabs(lo - 2.0 * exp(-1.96 * 0.05)) < 1e-9 && fabs(hi - 2.0 * exp(1.96 * 0.05)) < 1e-9,
          "interval [%g, %g]", lo, hi);
    CHECK(&st, lo < 2.0 && hi > 2.0, "the interval holds the speedup");
    double lo2 = 0, hi2 = 0, cv2 = 0;
    CHECK(&st, kf_noise_of_metrics(m, 2.1, &cv2, &lo2, &hi2) == 0, "second");
    CHECK(&st, kf_noise_tie(lo, hi, lo2, hi2), "2.0x and 2.1x at CV 0.04 are a tie");
    CHECK(&st, kf_noise_of_metrics(m, 3.0, &cv2, &lo2, &hi2) == 0 && !kf_noise_tie(lo, hi, lo2, hi2),
          "2.0x and 3.0x at CV 0.04 are not");
    CHECK(&st, kf_noise_of_metrics("{\"timing\": {}}", 2.0, &cv, &lo, &hi) < 0, "no shapes: no noise");
    CHECK(&st, kf_noise_of_metrics("not json", 2.0, &cv, &lo, &hi) < 0, "bad json");
    CHECK(&st, kf_noise_of_metrics(m, 0.0, &cv, &lo, &hi) < 0, "no speedup");

    /* the scanner against the full parse */
    size_t ns = sizeof(SAMPLES) / sizeof(SAMPLES[0]);
    int sc;
    for (size_t i = 0; i < ns; i++) {
        CHECK(&st, agree(SAMPLES[i], strlen(SAMPLES[i]), 1.25, &sc), "sample %zu: scanner and full parse agree", i);
        CHECK(&st, agree(SAMPLES[i], strlen(SAMPLES[i]), NAN, &sc), "sample %zu at no speedup", i);
    }
    int has = 0;
    for (size_t i = 0; i < 3; i++)
        CHECK(&st, kf_noise_scan(SAMPLES[i], strlen(SAMPLES[i]), 1.25, &has, &cv, &lo, &hi) == 1 && has,
              "sample %zu (the judge's, loadgen's, odd weights) is scanned, with an interval", i);
    CHECK(&st, kf_noise_scan(SAMPLES[16], strlen(SAMPLES[16]), 1.25, &has, &cv, &lo, &hi) == 1 && has,
          "escapes in a string the model does not read are stepped over");
    /* what the scanner must leave to the full parse */
    static const size_t LEFT[] = { 8, 10, 11, 15, 17, 18, 19, 20, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34 };
    for (size_t i = 0; i < sizeof(LEFT) / sizeof(LEFT[0]); i++)
        CHECK(&st, kf_noise_scan(SAMPLES[LEFT[i]], strlen(SAMPLES[LEFT[i]]), 1.25, &has, &cv, &lo, &hi) == 0,
              "sample %zu goes to the full parse: %.60s", LEFT[i], SAMPLES[LEFT[i]]);
    kf_noise_scan(SAMPLES[14], strlen(SAMPLES[14]), 2.0, &has, &cv, &lo, &hi);
    CHECK(&st, has && cv == 0.3 * 5 / 5 && fabs(lo - 2.0 * exp(-1.96 * sqrt(0.09 + 0.04))) < 1e-12,
          "duplicate keys: the last cv and weight (cv %g)", cv);
    /* 3,000 nested arrays: deeper than the scanner goes */
    size_t depth = 3000;
    char *deep = malloc(2 * depth + 64);
    size_t dl = (size_t)sprintf(deep, "{\"x\": ");
    for (size_t i = 0; i < depth; i++) deep[dl++] = '[';
    for (size_t i = 0; i < depth; i++) deep[dl++] = ']';
    dl += (size_t)sprintf(deep + dl, "}");
    CHECK(&st, agree(deep, dl, 1.5, &sc) && !sc, "3,000 nested arrays go to the full parse");
    free(deep);
    CHECK(&st, mutations(&st) > 1000, "the mutations exercise the scanner, not only its refusals");
    return kf_test_done(&st);
}
