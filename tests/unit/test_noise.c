/*
 * test_noise.c -- the speedup interval and ties of coordinator/noise.c.
 */
#include <math.h>
#include <stdio.h>

#include "kf_test.h"
#include "noise.h"

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
    return kf_test_done(&st);
}
