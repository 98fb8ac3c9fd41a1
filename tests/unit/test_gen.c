/*
 * test_gen.c -- the counter-based input generator (worker/gen.h) that fills
 * timed inputs and large validation inputs in place: element i depends on
 * (seed, i) only, so a partial fill equals the same range of a full fill; two
 * seeds share no element positions' values; the normal has the task's mean
 * and standard deviation and stays within the Irwin-Hall bound; the uniform
 * stays in [lo, hi); the special-value fraction is honoured; f16/bf16/i32
 * rounding is the same as inputs.c's element store; and the cpu backend's
 * in-place fill and byte comparison (judge_cpu.c) agree with the host loop.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inputs.h"
#include "judge.h"
#include "kf_test.h"

static kf_tensor_spec spec(int dtype, int dist, double p0, double p1)
{
    kf_tensor_spec ts;
    memset(&ts, 0, sizeof(ts));
    ts.dtype = dtype;
    ts.dist = dist;
    ts.p0 = p0;
    ts.p1 = p1;
    return ts;
}

static void test_counter(kf_test_state *st)
{
    kf_tensor_spec ts = spec(KF_F32, KF_DIST_NORMAL, 0, 1);
    kf_gen_spec g;
    kf_inputs_gen_spec(&ts, 1234, &g);
    int n = 100000;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    kf_inputs_gen_fill(a, n, &g);
    /* element i depends on (seed, i) only: a fill of the tail alone gives the same bits */
    kf_gen_spec g2 = g;
    for (int i = 0; i < n; i++) b[i] = 0;
    for (int i = 50000; i < n; i++) kf_gen_store(b, KF_F32, (uint64_t)i, kf_gen_value(&g2, (uint64_t)i));
    CHECK(st, !memcmp(a + 50000, b + 50000, 50000 * sizeof(float)), "partial fill differs");
    /* another seed: almost no element keeps its value */
    kf_inputs_gen_spec(&ts, 1235, &g2);
    kf_inputs_gen_fill(b, n, &g2);
    int same = 0;
    for (int i = 0; i < n; i++) same += a[i] == b[i];
    CHECK(st, same < 10, "%d of %d elements equal across seeds", same, n);
    /* moments and bound of the unit normal */
    double m = 0, v = 0, mx = 0;
    for (int i = 0; i < n; i++) m += a[i];
    m /= n;
    for (int i = 0; i < n; i++) {
        v += (a[i] - m) * (a[i] - m);
        mx = fmax(mx, fabs(a[i]));
    }
    v /= n - 1;
    CHECK(st, fabs(m) < 0.02 && fabs(v - 1) < 0.03, "mean %g variance %g", m, v);
    CHECK(st, mx <= 1.7320508075688772 * 2 + 1e-6 && mx > 3.0, "max |z| %g", mx);
    free(a);
    free(b);
}

static void test_dists(kf_test_state *st)
{
    int n = 200000;
    double *d = malloc(n * sizeof(double));
    kf_tensor_spec ts = spec(KF_F64, KF_DIST_UNIFORM, -2, 6);
    kf_gen_spec g;
    kf_inputs_gen_spec(&ts, 7, &g);
    kf_inputs_gen_fill(d, n, &g);
    double lo = 1e300, hi = -1e300, m = 0;
    for (int i = 0; i < n; i++) {
        lo = fmin(lo, d[i]);
        hi = fmax(hi, d[i]);
        m += d[i];
    }
    CHECK(st, lo >= -2 && hi < 6 && lo < -1.99 && hi > 5.99, "uniform range [%g, %g]", lo, hi);
    CHECK(st, fabs(m / n - 2) < 0.03, "uniform mean %g", m / n);
    /* mean and std of a shifted normal */
    ts = spec(KF_F64, KF_DIST_NORMAL, 10, 4);
    kf_inputs_gen_spec(&ts, 8, &g);
    kf_inputs_gen_fill(d, n, &g);
    m = 0;
    double v = 0;
    for (int i = 0; i < n; i++) m += d[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (d[i] - m) * (d[i] - m);
    v = sqrt(v / (n - 1));
    CHECK(st, fabs(m - 10) < 0.05 && fabs(v - 4) < 0.05, "normal(10, 4): mean %g std %g", m, v);
    /* special values at their fraction */
    ts.n_special = 2;
    ts.special[0] = -0.0;
    ts.special[1] = 65504;
    ts.special_fraction = 0.01;
    kf_inputs_gen_spec(&ts, 9, &g);
    kf_inputs_gen_fill(d, n, &g);
    int negz = 0, big = 0;
    for (int i = 0; i < n; i++) {
        negz += d[i] == 0 && signbit(d[i]);
        big += d[i] == 65504;
    }
    CHECK(st, negz > 700 && negz < 1300 && big > 700 && big < 1300, "specials: %d -0, %d 65504 of %d", negz, big, n);
    free(d);
}

static void test_rounding(kf_test_state *st)
{
    /* the store rounds like inputs.c's kf_inputs_set for every dtype */
    static const int dts[] = {KF_F32, KF_F16, KF_BF16, KF_I32, KF_F64};
    kf_tensor_spec ts = spec(KF_F32, KF_DIST_NORMAL, 0, 3000);
    int n = 50000, bad = 0;
    for (size_t k = 0; k < sizeof(dts) / sizeof(dts[0]); k++) {
        ts.dtype = dts[k];
        kf_gen_spec g;
        kf_inputs_gen_spec(&ts, 11 + k, &g);
        unsigned char *a = calloc(n, 8), *b = calloc(n, 8);
        kf_inputs_gen_fill(a, n, &g);
        for (int i = 0; i < n; i++) kf_inputs_set(b, dts[k], i, kf_gen_value(&g, (uint64_t)i));
        if (memcmp(a, b, (size_t)n * kf_dtype_size(dts[k]))) bad++;
        free(a);
        free(b);
    }
    CHECK(st, bad == 0, "%d dtypes round differently from kf_inputs_set", bad);
    /* the fill's specialised loops (f32: normal or uniform, with or
     * without special values) give the bits of the per-element formula */
    bad = 0;
    for (int dist = 0; dist < 2; dist++)
        for (int sp = 0; sp < 2; sp++) {
            ts = spec(KF_F32, dist ? KF_DIST_UNIFORM : KF_DIST_NORMAL, -1, 3);
            ts.n_special = sp;
            ts.special[0] = 1e30;
            ts.special_fraction = sp ? 0.05 : 0;
            kf_gen_spec g;
            kf_inputs_gen_spec(&ts, 77 + dist * 2 + sp, &g);
            float *a = calloc(n, 4), *b = calloc(n, 4);
            kf_inputs_gen_fill(a, n, &g);
            for (int i = 0; i < n; i++) kf_gen_store(b, KF_F32, (uint64_t)i, kf_gen_value(&g, (uint64_t)i));
            if (memcmp(a, b, (size_t)n * 4)) bad++;
            free(a);
            free(b);
        }
    CHECK(st, bad == 0, "%d of the 4 f32 fills differ from the per-element formula", bad);
}

static void test_cpu_backend(kf_test_state *st)
{
    const kf_judge_backend *be = &kf_judge_backend_cpu;
    kf_judge_dev *d = NULL;
    char err[256];
    CHECK(st, be->open(&d, 0, 0, err, sizeof(err)) == 0, "open: %s", err);
    if (!d) return;
    kf_jarena a, b;
    CHECK(st, be->arena_new(d, 1 << 20, 1, &a, err, sizeof(err)) == 0, "arena: %s", err);
    CHECK(st, be->arena_new(d, 1 << 20, 0, &b, err, sizeof(err)) == 0, "arena: %s", err);
    kf_tensor_spec ts = spec(KF_BF16, KF_DIST_NORMAL, 0, 1);
    kf_gen_spec g;
    kf_inputs_gen_spec(&ts, 99, &g);
    int n = 100000;
    CHECK(st, be->gen(d, &a, 4096, &g, n) == 0, "gen");
    CHECK(st, be->gen(d, &b, 4096, &g, n) == 0, "gen");
    uint16_t *h = malloc(n * 2);
    kf_inputs_gen_fill(h, n, &g);
    CHECK(st, !memcmp((char *)a.host + 4096, h, (size_t)n * 2), "in-place fill differs from the host loop");
    uint64_t first = 0;
    CHECK(st, be->same(d, &a, 4096, &b, 4096, (uint64_t)n * 2, &first) == 1, "equal ranges reported different");
    ((unsigned char *)b.host)[4096 + 777] ^= 1;
    CHECK(st, be->same(d, &a, 4096, &b, 4096, (uint64_t)n * 2, &first) == 0 && first == 777,
          "difference not found at 777 (first %llu)", (unsigned long long)first);
    CHECK(st, be->gen(d, &a, (1 << 20) - 10, &g, n) == -1, "fill past the arena accepted");
    be->flush(d, &a, a.bytes); /* evicting a whole arena must not fault */
    free(h);
    be->arena_free(d, &a);
    be->arena_free(d, &b);
    be->close(d);
}

int main(void)
{
    kf_test_state st = {0, 0};
    test_counter(&st);
    test_dists(&st);
    test_rounding(&st);
    test_cpu_backend(&st);
    return kf_test_done(&st);
}
