/*
 * test_compare.c -- the tolerance rule (worker/compare.c) and the element
 * helpers it relies on (worker/inputs.c): NaN/Inf (C2), zeros under an
 * absolute atol on ~1e-6 outputs (C1), constant output, rounding noise that
 * must pass, f16/bf16 conversions, error reporting; and the poison/seed
 * properties the harness relies on.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "inputs.h"
#include "kf_test.h"

static kf_tol tol(double rtol, double atol) { return (kf_tol){rtol, atol, 1}; }

/* softmax-like long row: values ~1e-6 that vary */
static void long_row(float *r, int n)
{
    kf_rng g;
    kf_inputs_rng_seed(&g, 42);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (r[i] = (float)exp(kf_inputs_rng_normal(&g)));
    for (int i = 0; i < n; i++) r[i] = (float)(r[i] / sum);
}

static void test_nonfinite(kf_test_state *st)
{
    float ref[64], c[64];
    for (int i = 0; i < 64; i++) ref[i] = c[i] = 0.5f + i * 0.01f;
    kf_tol t = tol(1e-4, 1e-6);
    kf_compare_res r;

    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 0, &r) == 1, "identical must pass: %s", r.reason);

    c[17] = NAN;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 0, &r) == 0, "one NaN must fail");
    CHECK(st, r.first_bad == 17 && r.n_nonfinite == 1, "first_bad %lld n_nonfinite %lld", (long long)r.first_bad,
          (long long)r.n_nonfinite);
    CHECK(st, strstr(r.reason, "non-finite") != NULL, "reason: %s", r.reason);

    c[17] = ref[17];
    c[63] = INFINITY;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 0, &r) == 0, "+Inf must fail");
    CHECK(st, r.first_bad == 63, "first_bad %lld", (long long)r.first_bad);
    c[63] = -INFINITY;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 0, &r) == 0, "-Inf must fail");

    for (int i = 0; i < 64; i++) c[i] = NAN;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 0, &r) == 0, "all NaN must fail");
    CHECK(st, r.n_nonfinite == 64, "n_nonfinite %lld", (long long)r.n_nonfinite);

    /* huge tolerances do not rescue NaN */
    kf_tol loose = tol(1e30, 1e30);
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &loose, 0, &r) == 0, "NaN passes a loose tolerance");

    /* a reference with Inf: without allow_nonfinite it is reported as the task's problem */
    for (int i = 0; i < 64; i++) c[i] = ref[i];
    ref[5] = c[5] = INFINITY;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 0, &r) == 0 && r.ref_nonfinite == 1,
          "reference Inf without allow_nonfinite must be flagged");
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 1, &r) == 1, "matching Inf with allow_nonfinite: %s", r.reason);
    c[5] = NAN;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 1, &r) == 0, "NaN where the reference is Inf must fail");
    ref[5] = NAN;
    CHECK(st, kf_compare(c, ref, KF_F32, 64, &t, 1, &r) == 1, "NaN matching NaN with allow_nonfinite: %s", r.reason);
}

static void test_zeros_long_rows(kf_test_state *st)
{
    enum { N = 1 << 20 };
    float *ref = malloc(N * sizeof(float)), *c = calloc(N, sizeof(float));
    long_row(ref, N);
    kf_tol t = tol(1e-4, 1e-5);
    kf_compare_res r;
    /* every reference value is tiny: an *unscaled* atol 1e-5 would pass all zeros */
    double mx = 0;
    for (int i = 0; i < N; i++) mx = fmax(mx, ref[i]);
    CHECK(st, mx < 1e-4, "test setup: max %g", mx);
    CHECK(st, kf_compare(c, ref, KF_F32, N, &t, 0, &r) == 0, "zeros on ~1e-6 outputs must fail");
    CHECK(st, r.trivial == 1 && strstr(r.reason, "trivial"), "reason: %s", r.reason);
    CHECK(st, r.n_bad > N / 2, "most zeros are out of the scaled tolerance: n_bad %lld", (long long)r.n_bad);

    /* constant 1/N: close to every value in absolute terms, still trivial */
    for (int i = 0; i < N; i++) c[i] = 1.0f / N;
    CHECK(st, kf_compare(c, ref, KF_F32, N, &t, 0, &r) == 0 && r.trivial, "constant must fail: %s", r.reason);

    /* correct values with rounding noise (a few ulp) must pass */
    kf_rng g;
    kf_inputs_rng_seed(&g, 7);
    for (int i = 0; i < N; i++) c[i] = ref[i] * (float)(1.0 + 3e-7 * (kf_inputs_rng_uniform(&g) * 2 - 1));
    CHECK(st, kf_compare(c, ref, KF_F32, N, &t, 0, &r) == 1, "rounding noise must pass: %s", r.reason);
    CHECK(st, r.max_rel_err > 0 && r.max_rel_err < 1e-6, "max rel err %g", r.max_rel_err);

    /* half the row correct, half zero: not trivial, but out of tolerance */
    for (int i = N / 2; i < N; i++) c[i] = 0;
    CHECK(st, kf_compare(c, ref, KF_F32, N, &t, 0, &r) == 0 && !r.trivial, "half zeros must fail");
    CHECK(st, r.first_bad == N / 2, "first bad %lld", (long long)r.first_bad);
    free(ref);
    free(c);
}

static void test_constant_reference(kf_test_state *st)
{
    float ref[100], c[100];
    for (int i = 0; i < 100; i++) ref[i] = c[i] = 1.0f;
    kf_tol t = tol(1e-5, 1e-6);
    kf_compare_res r;
    CHECK(st, kf_compare(c, ref, KF_F32, 100, &t, 0, &r) == 1, "constant output of a constant reference: %s",
          r.reason);
    for (int i = 0; i < 100; i++) ref[i] = c[i] = 0.0f;
    CHECK(st, kf_compare(c, ref, KF_F32, 100, &t, 0, &r) == 1, "all-zero reference and output: %s", r.reason);
    CHECK(st, r.scale == 1.0, "scale of an all-zero reference is 1: %g", r.scale);
}

static void test_error_report(kf_test_state *st)
{
    float ref[10], c[10];
    for (int i = 0; i < 10; i++) ref[i] = c[i] = (float)(i + 1);
    c[3] = 4.5f;   /* abs 0.5, rel 0.125 */
    c[8] = 9.25f;  /* abs 0.25, rel 0.0278 */
    kf_tol t = tol(1e-3, 0);
    kf_compare_res r;
    CHECK(st, kf_compare(c, ref, KF_F32, 10, &t, 0, &r) == 0, "two bad elements");
    CHECK(st, r.n_bad == 2 && r.first_bad == 3, "n_bad %lld first %lld", (long long)r.n_bad, (long long)r.first_bad);
    CHECK(st, r.first_cand == 4.5 && r.first_ref == 4.0, "first values %g %g", r.first_cand, r.first_ref);
    CHECK(st, fabs(r.max_abs_err - 0.5) < 1e-12 && r.max_abs_idx == 3, "max abs %g at %lld", r.max_abs_err,
          (long long)r.max_abs_idx);
    CHECK(st, fabs(r.max_rel_err - 0.125) < 1e-12, "max rel %g", r.max_rel_err);
    CHECK(st, r.scale == 10.0, "scale %g", r.scale);
    CHECK(st, strstr(r.reason, "element 3") && strstr(r.reason, "2 of 10"), "reason: %s", r.reason);
    /* atol scaled by max|r| = 10: 0.5 <= 0.06*10 passes */
    t = tol(0, 0.06);
    CHECK(st, kf_compare(c, ref, KF_F32, 10, &t, 0, &r) == 1, "scaled atol: %s", r.reason);
}

static void test_bf16_f16(kf_test_state *st)
{
    /* exact round trips */
    const float exact[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0.5f, 3.0f, -1024.0f};
    for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++) {
        float f = exact[i];
        if (f != 65504.0f) /* 11 significant bits: exact in f16, not in bf16 */
            CHECK(st, kf_inputs_bf16_to_f32(kf_inputs_f32_to_bf16(f)) == f, "bf16 round trip %g", f);
        CHECK(st, kf_inputs_f16_to_f32(kf_inputs_f32_to_f16(f)) == f, "f16 round trip %g", f);
    }
    CHECK(st, kf_inputs_bf16_to_f32(kf_inputs_f32_to_bf16(65504.0f)) == 65536.0f, "bf16(65504) rounds to 65536");
    CHECK(st, kf_inputs_f32_to_bf16(-0.0f) == 0x8000, "bf16 -0 keeps its sign");
    CHECK(st, kf_inputs_f32_to_f16(-0.0f) == 0x8000, "f16 -0 keeps its sign");
    /* every bf16 / f16 bit pattern that is not NaN survives widen + narrow */
    int bad_b = 0, bad_h = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        float fb = kf_inputs_bf16_to_f32((uint16_t)u), fh = kf_inputs_f16_to_f32((uint16_t)u);
        if (!isnan(fb) && kf_inputs_f32_to_bf16(fb) != u) bad_b++;
        if (!isnan(fh) && kf_inputs_f32_to_f16(fh) != u) bad_h++;
        if (isnan(fb) && !isnan(kf_inputs_bf16_to_f32(kf_inputs_f32_to_bf16(fb)))) bad_b++;
        if (isnan(fh) && !isnan(kf_inputs_f16_to_f32(kf_inputs_f32_to_f16(fh)))) bad_h++;
    }
    CHECK(st, bad_b == 0, "%d bf16 patterns do not round-trip", bad_b);
    CHECK(st, bad_h == 0, "%d f16 patterns do not round-trip", bad_h);
    /* round to nearest even */
    CHECK(st, kf_inputs_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie rounds to even (down)");
    CHECK(st, kf_inputs_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "bf16 tie rounds to even (up)");
    CHECK(st, kf_inputs_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81, "bf16 above the tie rounds up");
    CHECK(st, kf_inputs_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "f16 tie rounds to even");
    CHECK(st, kf_inputs_f32_to_f16(65520.0f) == 0x7c00, "f16 overflow to Inf");
    CHECK(st, kf_inputs_f32_to_f16(65519.0f) == 0x7bff, "f16 just below overflow");
    CHECK(st, kf_inputs_f32_to_f16(0x1p-24f) == 0x0001, "f16 smallest subnormal");
    CHECK(st, kf_inputs_f32_to_f16(0x1p-25f) == 0x0000, "f16 half the smallest subnormal ties to 0");
    CHECK(st, kf_inputs_f32_to_f16(0x1.8p-25f) == 0x0001, "f16 above half rounds up");
    CHECK(st, kf_inputs_f32_to_bf16(3.4e38f) == 0x7f80, "bf16 overflow to Inf");
    CHECK(st, isnan(kf_inputs_bf16_to_f32(kf_inputs_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
    /* bf16 comparison through kf_compare */
    uint16_t rb[4], cb[4];
    for (int i = 0; i < 4; i++) rb[i] = cb[i] = kf_inputs_f32_to_bf16(1.0f + i);
    kf_tol t = tol(1e-2, 0);
    kf_compare_res r;
    CHECK(st, kf_compare(cb, rb, KF_BF16, 4, &t, 0, &r) == 1, "bf16 equal: %s", r.reason);
    cb[2] = 0x7fc0; /* NaN */
    CHECK(st, kf_compare(cb, rb, KF_BF16, 4, &t, 0, &r) == 0 && r.first_bad == 2, "bf16 NaN fails");
}

static void test_poison_and_seeds(kf_test_state *st)
{
    float f[8];
    kf_inputs_poison(f, KF_F32, 8);
    CHECK(st, kf_inputs_is_poison(f, KF_F32, 7) && isnan(f[0]), "f32 poison is a NaN pattern");
    f[3] = NAN; /* an arithmetic NaN is not the poison pattern */
    CHECK(st, !kf_inputs_is_poison(f, KF_F32, 3), "quiet NaN is not poison");
    int32_t iv[4];
    kf_inputs_poison(iv, KF_I32, 4);
    CHECK(st, kf_inputs_is_poison(iv, KF_I32, 2) && iv[2] == KF_INPUTS_I32_POISON, "i32 poison");
    uint16_t h[4];
    kf_inputs_poison(h, KF_BF16, 4);
    CHECK(st, kf_inputs_is_poison(h, KF_BF16, 1) && isnan(kf_inputs_get(h, KF_BF16, 1)), "bf16 poison");

    kf_tensor_spec ts;
    memset(&ts, 0, sizeof(ts));
    ts.dist = KF_DIST_NORMAL;
    ts.p1 = 1;
    float a[256], b[256], c[256];
    kf_inputs_fill(a, KF_F32, 256, &ts, kf_inputs_derive_seed(1, 0, 0, 0));
    kf_inputs_fill(b, KF_F32, 256, &ts, kf_inputs_derive_seed(1, 0, 0, 0));
    kf_inputs_fill(c, KF_F32, 256, &ts, kf_inputs_derive_seed(1, 0, 1, 0));
    CHECK(st, !memcmp(a, b, sizeof(a)), "same seed, same inputs");
    int same = 0;
    for (int i = 0; i < 256; i++) same += a[i] == c[i];
    CHECK(st, same < 4, "a new trial gives new values (%d equal)", same);
    /* special values appear at about the requested fraction */
    ts.n_special = 1;
    ts.special[0] = -0.0;
    ts.special_fraction = 0.25;
    static float big[40000];
    kf_inputs_fill(big, KF_F32, 40000, &ts, 9);
    int negz = 0;
    for (int i = 0; i < 40000; i++) negz += big[i] == 0.0f && signbit(big[i]);
    CHECK(st, negz > 9000 && negz < 11000, "special fraction: %d of 40000 are -0", negz);
    /* uniform stays in range */
    ts.dist = KF_DIST_UNIFORM;
    ts.p0 = -2;
    ts.p1 = 3;
    ts.n_special = 0;
    kf_inputs_fill(big, KF_F32, 40000, &ts, 10);
    int out = 0;
    for (int i = 0; i < 40000; i++) out += big[i] < -2 || big[i] > 3;
    CHECK(st, out == 0, "%d uniform values out of range", out);
}

int main(void)
{
    kf_test_state st = {0, 0};
    test_nonfinite(&st);
    test_zeros_long_rows(&st);
    test_constant_reference(&st);
    test_error_report(&st);
    test_bf16_f16(&st);
    test_poison_and_seeds(&st);
    return kf_test_done(&st);
}
