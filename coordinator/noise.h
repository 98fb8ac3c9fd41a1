/*
 * noise.h -- timing noise of a result: CV and speedup interval (prefix kf_noise_).
 *
 * Design. The worker times baseline and candidate interleaved and reports,
 * per benchmark shape, the coefficient of variation (CV) of each side's
 * per-call times and the number of timed calls (metrics.timing.shapes[]).
 * On a shared machine the noise is bursty (another process takes the core
 * for a while), so the median of one run moves between runs by about as
 * much as single calls spread -- far more than the i.i.d. standard error
 * cv/sqrt(n) would promise (issue 10: identical tune variants measured
 * 1.25x..1.80x at CV 0.25..0.43). The interval is therefore deliberately
 * conservative: per shape the log-speedup spreads with
 *     s_i = sqrt(cv_b^2 + cv_c^2)          (log-normal approximation)
 * shapes are treated as fully correlated (same machine state), so the
 * weighted geometric-mean speedup S spreads with s = sum(w_i s_i) / sum(w_i),
 * and the 95% interval is [S e^(-1.96 s), S e^(1.96 s)]. The CV shown for a
 * result is sum(w_i max(cv_b, cv_c)) / sum(w_i).
 *
 * A result confirmed by a second run (verify.h) keeps its speedup, and its
 * interval becomes the hull of both runs' intervals: two runs that differ by
 * more than their within-run CVs allow show drift that neither CV saw (CI:
 * one identical variant timed 0.958x at CV 3.6%, then 1.562x at CV 9.2%).
 *
 * Two results whose intervals overlap are a tie: neither is faster beyond
 * the noise.
 */
#ifndef KF_NOISE_H
#define KF_NOISE_H

#include <stddef.h>

#define KF_NOISE_Z 1.96 /* two-sided 95% */

/* From a result's metrics JSON text and its speedup: *cv, *lo, *hi.
 * Returns 0, or -1 when the metrics hold no timing shapes with CVs (then
 * the outputs are untouched). */
int kf_noise_of_metrics(const char *metrics_json, double speedup, double *cv, double *lo,
                        double *hi);

/* The same from metrics already parsed (a jansson object; NULL: -1). */
struct json_t;
int kf_noise_of_metrics_obj(const struct json_t *metrics, double speedup, double *cv, double *lo,
                            double *hi);

/* kf_noise_of_metrics without a full parse, for the coordinator's stored
 * results (jansson's parse and free of each result's metrics was a fifth of
 * the coordinator's CPU per result: docs/benchmarks.md, 2026-12-07
 * afternoon). Returns 1 when metrics[0..len) is a JSON object the scanner
 * (jscan.h) takes whole -- text jansson accepts, each number at most 64
 * bytes without an exponent, so jsonb takes it as sent -- with *has 1 and
 * *cv, *lo, *hi as kf_noise_of_metrics gives them, or *has 0 where that
 * returns -1. Returns 0 (outputs untouched but *has 0) when the scanner
 * gives up: anything else, valid or not, is for the full parse. */
int kf_noise_scan(const char *metrics, size_t len, double speedup, int *has, double *cv, double *lo,
                  double *hi);

/* The interval of one benchmark shape's speedup s from its two sides' CVs
 * (the per-shape term of the model above): [s e^(-z q), s e^(z q)] with
 * q = sqrt(cv_b^2 + cv_c^2). A negative or non-finite CV counts as 0. */
void kf_noise_shape(double s, double cv_b, double cv_c, double *lo, double *hi);

/* Whether the intervals [lo1, hi1] and [lo2, hi2] overlap (a tie). */
int kf_noise_tie(double lo1, double hi1, double lo2, double hi2);

#endif
