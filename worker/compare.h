/*
 * compare.h -- candidate vs reference output comparison (prefix kf_compare_).
 *
 * One rule decides whether an element matches:
 *
 *     |c - r| <= atol * scale + rtol * |r|,   scale = max |r| over the output
 *
 * Scaling atol by the output's own magnitude is what makes zeros fail on a
 * softmax with very long rows (case C1): every correct value is ~1e-6, so an
 * unscaled atol of 1e-5 would accept all zeros; scaled, it accepts only
 * errors that are small *relative to this output*. (An all-zero reference
 * uses scale 1.)
 *
 * Non-finite values are never the accident of a comparison (case C2): NaN
 * never satisfies `<=`, so it is checked explicitly. Where the reference is
 * finite the candidate must be finite. Where the reference itself is NaN or
 * Inf the task decides: with allow_nonfinite the candidate must match
 * exactly (NaN with NaN, +Inf with +Inf); without it, it is reported as a
 * reference problem (ref_nonfinite), which the harness treats as the task's
 * fault, not the candidate's.
 *
 * A trivial output -- every element equal (all zeros, a constant) while the
 * reference is not constant -- fails even if each element happens to lie in
 * tolerance.
 *
 * The comparison reads elements through kf_inputs_get, so f16/bf16/i32/f64
 * outputs work the same way; poison (unwritten elements) is checked by the
 * harness before comparing.
 */
#ifndef KF_COMPARE_H
#define KF_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include "kf_task.h"

typedef struct {
    int ok;                 /* 1 if the output matches */
    int64_t n;              /* elements compared */
    int64_t n_bad;          /* elements outside tolerance (incl. non-finite) */
    int64_t first_bad;      /* index of the first bad element, -1 if none */
    double first_cand, first_ref; /* values at first_bad */
    double max_abs_err;     /* max |c - r| over finite pairs */
    int64_t max_abs_idx;
    double max_rel_err;     /* max |c - r| / |r| over pairs with r != 0 */
    double scale;           /* max |r| (1 if the reference is all zero) */
    int64_t n_nonfinite;    /* candidate NaN/Inf where the reference is finite */
    int64_t ref_nonfinite;  /* reference NaN/Inf elements (task policy) */
    int trivial;            /* candidate constant, reference not */
    /* pass-1 facts, kept so that a device-side reduction can hand them to
     * kf_compare_conclude */
    double rmin, rmax;      /* range of the finite reference values */
    double c0;              /* candidate element 0 */
    int cand_const;         /* every candidate element equals c0 */
    char reason[256];       /* one line when !ok */
} kf_compare_res;

/* Effective tolerance for dtype: tol's values, except integers compare
 * exactly unless the task set a tolerance. */
void kf_compare_tol(int dtype, const kf_tol *tol, double *rtol, double *atol);

/* Given every counter of res filled by a pass over the data (n, n_bad,
 * first_*, max_*, scale, n_nonfinite, ref_nonfinite, rmin, rmax, c0,
 * cand_const), decide trivial and ok and write reason. Returns res->ok.
 * kf_compare calls it; so does the cuda judge after its reduction. */
int kf_compare_conclude(kf_compare_res *res, int dtype, const kf_tol *tol, int allow_nonfinite);

/* Compare n elements of cand against ref, both of the given dtype, with tol.
 * Fills *res; returns res->ok. */
int kf_compare(const void *cand, const void *ref, int dtype, int64_t n, const kf_tol *tol,
               int allow_nonfinite, kf_compare_res *res);

#endif
