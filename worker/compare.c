/*
 * compare.c -- tolerance comparison of candidate and reference outputs.
 * See compare.h for the rule and why atol is scaled.
 *
 * Two passes over the data: the first finds the scale (max |r|) and whether
 * the reference and the candidate are constant; the second applies the rule
 * and records errors. Everything is computed in double.
 */
#include "compare.h"
#include "inputs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void kf_compare_tol(int dtype, const kf_tol *tol, double *rtol, double *atol)
{
    *rtol = tol ? tol->rtol : 0;
    *atol = tol ? tol->atol : 0;
    if (dtype == KF_I32 && (!tol || !tol->set)) *rtol = *atol = 0; /* integers: exact by default */
}

/* Element i of buf as a double: kf_inputs_get(), with the common dtypes
 * read directly so that compare_as() specialised on a constant dtype has
 * no call and no switch per element (kf_compare was 17% of a cpu
 * evaluation's CPU time with them). */
static inline __attribute__((always_inline)) double elem(const void *buf, int dtype, int64_t i)
{
    if (dtype == KF_F32) return ((const float *)buf)[i];
    if (dtype == KF_F64) return ((const double *)buf)[i];
    if (dtype == KF_I32) return ((const int32_t *)buf)[i];
    return kf_inputs_get(buf, dtype, i);
}

static inline __attribute__((always_inline)) int compare_as(const void *cand, const void *ref, int dtype, int64_t n,
                                                            const kf_tol *tol, int allow_nonfinite,
                                                            kf_compare_res *res)
{
    memset(res, 0, sizeof(*res));
    res->n = n;
    res->first_bad = -1;
    res->max_abs_idx = -1;
    double rtol, atol;
    kf_compare_tol(dtype, tol, &rtol, &atol);

    /* Pass 1: scale and constancy. */
    double scale = 0, rmin = INFINITY, rmax = -INFINITY;
    double c0 = n > 0 ? elem(cand, dtype, 0) : 0;
    int cand_const = 1;
    for (int64_t i = 0; i < n; i++) {
        double r = elem(ref, dtype, i), c = elem(cand, dtype, i);
        if (isfinite(r)) {
            double a = fabs(r);
            if (a > scale) scale = a;
            if (r < rmin) rmin = r;
            if (r > rmax) rmax = r;
        } else {
            res->ref_nonfinite++;
        }
        /* bitwise-ish equality: NaN != NaN makes an all-NaN output non-constant,
         * which is fine: it fails as non-finite anyway. */
        if (cand_const && c != c0) cand_const = 0;
    }
    if (scale == 0) scale = 1;
    res->scale = scale;
    res->rmin = rmin;
    res->rmax = rmax;
    res->c0 = c0;
    res->cand_const = cand_const;

    /* Pass 2: the rule. */
    for (int64_t i = 0; i < n; i++) {
        double r = elem(ref, dtype, i), c = elem(cand, dtype, i);
        int bad = 0;
        if (!isfinite(r)) {
            if (!allow_nonfinite) continue; /* counted in ref_nonfinite, judged by the caller */
            bad = !(isnan(r) ? isnan(c) : c == r);
        } else if (!isfinite(c)) {
            res->n_nonfinite++;
            bad = 1;
        } else {
            double e = fabs(c - r);
            if (e > res->max_abs_err || res->max_abs_idx < 0) {
                res->max_abs_err = e;
                res->max_abs_idx = i;
            }
            if (r != 0) {
                double rel = e / fabs(r);
                if (rel > res->max_rel_err) res->max_rel_err = rel;
            }
            bad = !(e <= atol * scale + rtol * fabs(r));
        }
        if (bad) {
            if (res->first_bad < 0) {
                res->first_bad = i;
                res->first_cand = c;
                res->first_ref = r;
            }
            res->n_bad++;
        }
    }

    return kf_compare_conclude(res, dtype, tol, allow_nonfinite);
}

int kf_compare(const void *cand, const void *ref, int dtype, int64_t n, const kf_tol *tol,
               int allow_nonfinite, kf_compare_res *res)
{
    switch (dtype) { /* one copy of the loops per common dtype */
    case KF_F32: return compare_as(cand, ref, KF_F32, n, tol, allow_nonfinite, res);
    case KF_F64: return compare_as(cand, ref, KF_F64, n, tol, allow_nonfinite, res);
    case KF_I32: return compare_as(cand, ref, KF_I32, n, tol, allow_nonfinite, res);
    default: return compare_as(cand, ref, dtype, n, tol, allow_nonfinite, res);
    }
}

int kf_compare_conclude(kf_compare_res *res, int dtype, const kf_tol *tol, int allow_nonfinite)
{
    double rtol, atol;
    kf_compare_tol(dtype, tol, &rtol, &atol);
    double scale = res->scale, rmin = res->rmin, rmax = res->rmax, c0 = res->c0;
    int64_t n = res->n;
    res->trivial = 0;
    res->ok = 0;
    /* Trivial output: constant candidate, non-constant reference. "Not
     * constant" means the reference spread exceeds what the tolerance would
     * call equal, so a genuinely constant reference (all ones) is fine. */
    if (n > 1 && res->cand_const && rmax > rmin &&
        (rmax - rmin) > atol * scale + rtol * fmax(fabs(rmax), fabs(rmin)))
        res->trivial = 1;

    if (res->ref_nonfinite && !allow_nonfinite) {
        res->ok = 0;
        snprintf(res->reason, sizeof(res->reason),
                 "reference produced %lld non-finite values but the task does not allow them",
                 (long long)res->ref_nonfinite);
        return 0;
    }
    if (res->n_bad == 0 && !res->trivial) {
        res->ok = 1;
        return 1;
    }
    if (res->trivial)
        snprintf(res->reason, sizeof(res->reason),
                 "trivial output: every element is %.6g but the reference varies (%.6g .. %.6g)", c0,
                 rmin, rmax);
    else if (res->n_nonfinite)
        snprintf(res->reason, sizeof(res->reason),
                 "%lld non-finite values where the reference is finite; first at element %lld: "
                 "got %.9g, expected %.9g",
                 (long long)res->n_nonfinite, (long long)res->first_bad, res->first_cand, res->first_ref);
    else
        snprintf(res->reason, sizeof(res->reason),
                 "%lld of %lld elements out of tolerance (rtol %.3g, atol %.3g x scale %.3g); first at "
                 "element %lld: got %.9g, expected %.9g; max abs err %.3g, max rel err %.3g",
                 (long long)res->n_bad, (long long)n, rtol, atol, scale, (long long)res->first_bad,
                 res->first_cand, res->first_ref, res->max_abs_err, res->max_rel_err);
    return 0;
}
