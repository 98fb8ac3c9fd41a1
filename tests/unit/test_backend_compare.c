/*
 * test_backend_compare.c -- a backend's output comparison (judge.h
 * `compare`) must judge exactly as kf_compare does on the host (compare.h):
 * same verdict, same bad-element count and first bad index, same scale,
 * maximum errors, non-finite counts and trivial-output decision, and the
 * same poison (unwritten element) counts and first indices on both sides.
 *
 * Data sets per dtype (f32, f16, bf16, i32, f64): identical outputs; small
 * errors inside and outside tolerance; NaN, +-Inf and -0 on either side;
 * poison runs in the candidate and in the reference; an all-zero reference;
 * a constant candidate against a varying reference; n = 0, 1 and odd sizes.
 *
 * The cpu backend runs everywhere. The cuda backend (reduction on the
 * device, kf_cuda_gen.cu) runs when this build has CUDA and a GPU opens;
 * otherwise it prints "cuda: skipped" -- tools/gpu-check runs this binary on
 * the GPU machine and requires "cuda: compared".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "inputs.h"
#include "judge.h"
#include "kf_test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void put_val(void *buf, int dtype, int64_t i, double v)
{
    switch (dtype) {
    case KF_F32: ((float *)buf)[i] = (float)v; break;
    case KF_F64: ((double *)buf)[i] = v; break;
    case KF_I32: ((int32_t *)buf)[i] = isfinite(v) ? (int32_t)v : 0; break;
    default: kf_inputs_set(buf, dtype, i, v); break;
    }
}

static void put_poison(void *buf, int dtype, int64_t i)
{
    switch (dtype) {
    case KF_F32: ((uint32_t *)buf)[i] = 0xffffffffu; break;
    case KF_I32: ((int32_t *)buf)[i] = KF_INPUTS_I32_POISON; break;
    case KF_F64: ((uint64_t *)buf)[i] = ~0ull; break;
    default: ((uint16_t *)buf)[i] = 0xffffu; break;
    }
}

enum { S_SAME, S_SMALL_ERR, S_BIG_ERR, S_NONFINITE, S_POISON_C, S_POISON_R, S_ZERO_REF, S_CONST_CAND, S_NSETS };

/* Fill ref and cand (n elements of dtype) for data set k. */
static void make_set(int k, int dtype, int64_t n, void *ref, void *cand)
{
    for (int64_t i = 0; i < n; i++) {
        double r = (urand() * 2 - 1) * (dtype == KF_I32 ? 1000 : 3.0);
        if (k == S_ZERO_REF) r = 0;
        put_val(ref, dtype, i, r);
        double c = r;
        if (k == S_SMALL_ERR && i % 7 == 3) c = r * (1 + 1e-7);
        if (k == S_BIG_ERR && i % 97 == 5) c = r + 0.5;
        if (k == S_CONST_CAND) c = 0.25;
        put_val(cand, dtype, i, c);
    }
    if (k == S_NONFINITE && n > 8 && dtype != KF_I32) {
        put_val(cand, dtype, 3, NAN);
        put_val(cand, dtype, 5, INFINITY);
        put_val(ref, dtype, 7, -INFINITY);
        put_val(cand, dtype, 7, -INFINITY);
        put_val(cand, dtype, 1, -0.0);
        put_val(ref, dtype, 1, 0.0);
    }
    if (k == S_POISON_C)
        for (int64_t i = n / 3; i < n / 3 + 5 && i < n; i++) put_poison(cand, dtype, i);
    if (k == S_POISON_R && n > 2) put_poison(ref, dtype, n - 2);
}

static int same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void compare_backend(kf_test_state *st, const kf_judge_backend *be, kf_judge_dev *d)
{
    static const int dtypes[] = {KF_F32, KF_F16, KF_BF16, KF_I32, KF_F64};
    static const int64_t sizes[] = {0, 1, 2, 1000, 100003, 1 << 20};
    char err[256];
    kf_jarena ca, ra;
    uint64_t cap = (uint64_t)(1 << 20) * 8 + 8192;
    CHECK(st, be->arena_new(d, cap, 0, &ca, err, sizeof(err)) == 0, "%s arena: %s", be->name, err);
    CHECK(st, be->arena_new(d, cap, 0, &ra, err, sizeof(err)) == 0, "%s arena: %s", be->name, err);
    void *ref = malloc(cap), *cand = malloc(cap);
    int runs = 0;
    for (size_t di = 0; di < sizeof(dtypes) / sizeof(dtypes[0]); di++)
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (int k = 0; k < S_NSETS; k++)
                for (int allow = 0; allow < 2; allow++) {
                    int dt = dtypes[di];
                    int64_t n = sizes[si];
                    uint64_t bytes = (uint64_t)n * kf_dtype_size(dt);
                    make_set(k, dt, n, ref, cand);
                    kf_tol tol = {.rtol = dt == KF_F16 || dt == KF_BF16 ? 1e-2 : 1e-5,
                                  .atol = dt == KF_F16 || dt == KF_BF16 ? 1e-2 : 1e-6,
                                  .set = dt != KF_I32};
                    /* an odd offset of whole elements: the device code must not assume alignment beyond the dtype's */
                    uint64_t off = 64 + kf_dtype_size(dt) * 3;
                    CHECK(st, be->put(d, &ca, off, cand, bytes) == 0 && be->put(d, &ra, off, ref, bytes) == 0 &&
                                  be->sync(d) == 0, "%s put", be->name);
                    kf_compare_res want, got;
                    kf_judge_poison pz;
                    kf_compare(cand, ref, dt, n, &tol, allow, &want);
                    int64_t pc = 0, pcf = -1, pr = 0, prf = -1;
                    for (int64_t i = 0; i < n; i++) {
                        if (kf_inputs_is_poison(cand, dt, i) && !pc++) pcf = i;
                        if (kf_inputs_is_poison(ref, dt, i) && !pr++) prf = i;
                    }
                    int rc = be->compare(d, &ca, off, &ra, off, dt, n, &tol, allow, &got, &pz);
                    runs++;
                    const char *what = NULL;
                    if (rc) what = "returned an error";
                    else if (got.ok != want.ok) what = "ok";
                    else if (got.n_bad != want.n_bad) what = "n_bad";
                    else if (got.first_bad != want.first_bad) what = "first_bad";
                    else if (!same_double(got.scale, want.scale)) what = "scale";
                    else if (!same_double(got.max_abs_err, want.max_abs_err)) what = "max_abs_err";
                    else if (!same_double(got.max_rel_err, want.max_rel_err)) what = "max_rel_err";
                    else if (got.n_nonfinite != want.n_nonfinite) what = "n_nonfinite";
                    else if (got.ref_nonfinite != want.ref_nonfinite) what = "ref_nonfinite";
                    else if (got.trivial != want.trivial) what = "trivial";
                    else if (got.first_bad >= 0 && (!same_double(got.first_cand, want.first_cand) ||
                                                    !same_double(got.first_ref, want.first_ref)))
                        what = "first values";
                    else if (strcmp(got.reason, want.reason)) what = "reason";
                    else if (pz.cand != pc || pz.cand_first != pcf || pz.ref != pr || pz.ref_first != prf)
                        what = "poison counts";
                    CHECK(st, what == NULL, "%s: dtype %d n %lld set %d allow_nonfinite %d: %s differs (host: ok %d "
                          "n_bad %lld first %lld; backend: ok %d n_bad %lld first %lld) [%s | %s]", be->name, dt,
                          (long long)n, k, allow, what ? what : "", want.ok, (long long)want.n_bad,
                          (long long)want.first_bad, got.ok, (long long)got.n_bad, (long long)got.first_bad,
                          want.reason, got.reason);
                }
    printf("%s: compared %d data sets\n", be->name, runs);
    /* out of range is an error, not a read past the arena */
    kf_compare_res r;
    kf_judge_poison pz;
    kf_tol tol = {.rtol = 1e-5, .atol = 0, .set = 1};
    CHECK(st, be->compare(d, &ca, ca.bytes - 8, &ra, 0, KF_F32, 16, &tol, 0, &r, &pz) == -1,
          "%s: a range past the arena was accepted", be->name);
    free(ref);
    free(cand);
    be->arena_free(d, &ca);
    be->arena_free(d, &ra);
}

int main(void)
{
    kf_test_state st = {0, 0};
    char err[256];
    kf_judge_dev *d = NULL;
    const kf_judge_backend *cpu = &kf_judge_backend_cpu;
    CHECK(&st, cpu->open(&d, 0, 0, err, sizeof(err)) == 0, "cpu open: %s", err);
    if (d) {
        compare_backend(&st, cpu, d);
        cpu->close(d);
    }
    const kf_judge_backend *cuda = kf_judge_backend_cuda();
    d = NULL;
    if (cuda && cuda->open(&d, 0, 0, err, sizeof(err)) == 0) {
        compare_backend(&st, cuda, d);
        cuda->close(d);
    } else {
        printf("cuda: skipped (%s)\n", cuda ? err : "built without CUDA");
    }
    return kf_test_done(&st);
}
