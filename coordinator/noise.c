/*
 * noise.c -- CV and speedup interval from a result's timing metrics. See
 * noise.h for the model and why it is conservative.
 */
#include "noise.h"

#include <jansson.h>
#include <math.h>

int kf_noise_of_metrics(const char *metrics_json, double speedup, double *cv, double *lo,
                        double *hi)
{
    if (!metrics_json || !(speedup > 0) || !isfinite(speedup)) return -1;
    json_t *m = json_loads(metrics_json, 0, NULL);
    int rc = kf_noise_of_metrics_obj(m, speedup, cv, lo, hi);
    json_decref(m);
    return rc;
}

int kf_noise_of_metrics_obj(const json_t *m, double speedup, double *cv, double *lo, double *hi)
{
    if (!m || !(speedup > 0) || !isfinite(speedup)) return -1;
    json_t *shapes = json_object_get(json_object_get(m, "timing"), "shapes");
    double wsum = 0, ssum = 0, csum = 0;
    size_t i;
    json_t *sh;
    json_array_foreach(shapes, i, sh) {
        json_t *b = json_object_get(json_object_get(sh, "baseline"), "cv");
        json_t *c = json_object_get(json_object_get(sh, "candidate"), "cv");
        if (!json_is_number(b) || !json_is_number(c)) continue;
        double cb = json_number_value(b), cc = json_number_value(c);
        if (!(cb >= 0) || !(cc >= 0) || !isfinite(cb) || !isfinite(cc)) continue;
        json_t *wj = json_object_get(sh, "weight");
        double w = json_is_number(wj) && json_number_value(wj) > 0 ? json_number_value(wj) : 1;
        wsum += w;
        ssum += w * sqrt(cb * cb + cc * cc);
        csum += w * (cb > cc ? cb : cc);
    }
    if (wsum <= 0) return -1;
    double s = ssum / wsum;
    *cv = csum / wsum;
    *lo = speedup * exp(-KF_NOISE_Z * s);
    *hi = speedup * exp(KF_NOISE_Z * s);
    return 0;
}

void kf_noise_shape(double s, double cv_b, double cv_c, double *lo, double *hi)
{
    if (!(cv_b >= 0) || !isfinite(cv_b)) cv_b = 0;
    if (!(cv_c >= 0) || !isfinite(cv_c)) cv_c = 0;
    double q = sqrt(cv_b * cv_b + cv_c * cv_c);
    *lo = s * exp(-KF_NOISE_Z * q);
    *hi = s * exp(KF_NOISE_Z * q);
}

int kf_noise_tie(double lo1, double hi1, double lo2, double hi2)
{
    return lo1 <= hi2 && lo2 <= hi1;
}
