/*
 * noise.c -- CV and speedup interval from a result's timing metrics. See
 * noise.h for the model and why it is conservative.
 */
#include "noise.h"

#include <jansson.h>
#include <math.h>

#include "jscan.h"

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

/* The cv of one side of a shape (the "cv" member of the object at span v)
 * as kf_noise_of_metrics_obj takes it: 1 and *d when it is a JSON number
 * (not a numeric string), 0 when absent or another kind. */
static int side_cv(kf_jscan *parent, kf_jspan v, double *d)
{
    static const char *const cv_k[] = { "cv" };
    kf_jspan cv[1];
    int obj;
    if (!v.a || *v.a != '{') return 0;
    kf_jscan o = { v.a, v.b, 0, parent->num_max };
    kf_jscan_members(&o, cv_k, 1, cv, &obj);
    if (o.bad) parent->bad = 1;
    if (o.bad || !cv[0].a || (*cv[0].a != '-' && (*cv[0].a < '0' || *cv[0].a > '9'))) return 0;
    return kf_jscan_double(&o, cv[0], d);
}

/* The longest number kf_noise_scan takes as it is: the limit under which
 * the coordinator stores metrics as sent (queue.c's json_numbers_fit). */
enum { SCAN_NUM_MAX = 64 };

int kf_noise_scan(const char *metrics, size_t len, double speedup, int *has, double *cv, double *lo,
                  double *hi)
{
    static const char *const top_k[] = { "timing" }, *const tim_k[] = { "shapes" },
                             *const shp_k[] = { "baseline", "candidate", "weight" };
    kf_jspan top[1], tim[1], shp[3];
    int obj;
    *has = 0;
    kf_jscan s = { metrics, metrics + len, 0, SCAN_NUM_MAX };
    kf_jscan_ws(&s);
    if (s.p >= s.end || *s.p != '{') return 0;
    kf_jscan_members(&s, top_k, 1, top, &obj); /* steps over (checks) the whole object */
    kf_jscan_ws(&s);
    if (s.bad || s.p != s.end) return 0;
    if (!(speedup > 0) || !isfinite(speedup) || !top[0].a) return 1;
    kf_jscan t = { top[0].a, top[0].b, 0, SCAN_NUM_MAX };
    kf_jscan_members(&t, tim_k, 1, tim, &obj);
    if (t.bad) return 0;
    if (!obj || !tim[0].a || *tim[0].a != '[') return 1;
    double wsum = 0, ssum = 0, csum = 0;
    kf_jscan a = { tim[0].a + 1, tim[0].b, 0, SCAN_NUM_MAX };
    int first = 1;
    kf_jspan el;
    while (kf_jscan_next(&a, &first, &el)) {
        kf_jscan e = { el.a, el.b, 0, SCAN_NUM_MAX };
        kf_jscan_members(&e, shp_k, 3, shp, &obj);
        if (e.bad) return 0;
        if (!obj) continue;
        double cb, cc, w = 1;
        int nb = side_cv(&e, shp[0], &cb), nc = side_cv(&e, shp[1], &cc);
        if (e.bad) return 0;
        if (!nb || !nc) continue;
        if (!(cb >= 0) || !(cc >= 0) || !isfinite(cb) || !isfinite(cc)) continue;
        kf_jspan wv = shp[2];
        double wd;
        if (wv.a && (*wv.a == '-' || (*wv.a >= '0' && *wv.a <= '9')) && kf_jscan_double(&e, wv, &wd) && wd > 0)
            w = wd;
        /* the same sums in the same order as kf_noise_of_metrics_obj */
        wsum += w;
        ssum += w * sqrt(cb * cb + cc * cc);
        csum += w * (cb > cc ? cb : cc);
    }
    if (a.bad) return 0;
    if (wsum <= 0) return 1;
    double sd = ssum / wsum;
    *cv = csum / wsum;
    *lo = speedup * exp(-KF_NOISE_Z * sd);
    *hi = speedup * exp(KF_NOISE_Z * sd);
    *has = 1;
    return 1;
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
