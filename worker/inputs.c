/*
 * inputs.c -- seeded input generation, poison patterns and the f16/bf16
 * conversions. See inputs.h for the design. Compiled with -ffp-contract=off
 * (CMakeLists.txt): the counter-based fill must round exactly like the GPU's.
 */
#include "inputs.h"
#include "gen.h"

_Static_assert(KF_F32 == 0 && KF_F16 == 1 && KF_BF16 == 2 && KF_I32 == 3 && KF_F64 == 4,
               "gen.h stores elements by these dtype numbers");
_Static_assert(KF_MAX_SPECIAL <= KF_GEN_MAX_SPECIAL, "gen.h holds every special value");

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void kf_inputs_rng_seed(kf_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t kf_inputs_rng_next(kf_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kf_inputs_rng_uniform(kf_rng *r) { return (double)(kf_inputs_rng_next(r) >> 11) * 0x1.0p-53; }

double kf_inputs_rng_normal(kf_rng *r)
{
    double u1 = kf_inputs_rng_uniform(r), u2 = kf_inputs_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t kf_inputs_derive_seed(uint64_t job_seed, uint64_t shape_index, uint64_t trial,
                               uint64_t tensor_index)
{
    uint64_t x = job_seed;
    uint64_t h = splitmix64(&x);
    x = h ^ (shape_index * 0x100000001b3ULL + 0x51);
    h = splitmix64(&x);
    x = h ^ (trial * 0xd6e8feb86659fd93ULL + 0x77);
    h = splitmix64(&x);
    x = h ^ (tensor_index * 0xa0761d6478bd642fULL + 0x3);
    return splitmix64(&x);
}

/* ---- f16 / bf16 ---- */

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kf_inputs_f32_to_bf16(float f) { return kf_gen_f32_to_bf16(f); }

float kf_inputs_bf16_to_f32(uint16_t b) { return u2f((uint32_t)b << 16); }

uint16_t kf_inputs_f32_to_f16(float f) { return kf_gen_f32_to_f16(f); }

float kf_inputs_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return u2f(sign);
        float v = (float)m * 0x1.0p-24f;
        return sign ? -v : v;
    }
    if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- elements ---- */

double kf_inputs_get(const void *buf, int dtype, int64_t i)
{
    switch (dtype) {
    case KF_F32: return ((const float *)buf)[i];
    case KF_F16: return kf_inputs_f16_to_f32(((const uint16_t *)buf)[i]);
    case KF_BF16: return kf_inputs_bf16_to_f32(((const uint16_t *)buf)[i]);
    case KF_I32: return ((const int32_t *)buf)[i];
    case KF_F64: return ((const double *)buf)[i];
    }
    return NAN;
}

void kf_inputs_set(void *buf, int dtype, int64_t i, double v)
{
    switch (dtype) {
    case KF_F32: ((float *)buf)[i] = (float)v; break;
    case KF_F16: ((uint16_t *)buf)[i] = kf_inputs_f32_to_f16((float)v); break;
    case KF_BF16: ((uint16_t *)buf)[i] = kf_inputs_f32_to_bf16((float)v); break;
    case KF_I32: {
        double r = nearbyint(v);
        if (!(r == r)) r = 0;
        if (r > 2147483647.0) r = 2147483647.0;
        if (r < -2147483648.0) r = -2147483648.0;
        ((int32_t *)buf)[i] = (int32_t)r;
        break;
    }
    case KF_F64: ((double *)buf)[i] = v; break;
    }
}

static double draw(kf_rng *r, const kf_tensor_spec *ts)
{
    if (ts->dist == KF_DIST_UNIFORM) return ts->p0 + (ts->p1 - ts->p0) * kf_inputs_rng_uniform(r);
    return ts->p0 + ts->p1 * kf_inputs_rng_normal(r);
}

void kf_inputs_fill(void *buf, int dtype, int64_t n, const kf_tensor_spec *ts, uint64_t seed)
{
    kf_rng r;
    kf_inputs_rng_seed(&r, seed);
    /* Special values replace a fraction of elements; the threshold compares
     * against 53 random bits so tiny fractions (1e-6) still work. */
    uint64_t thresh = 0;
    if (ts->n_special > 0 && ts->special_fraction > 0)
        thresh = (uint64_t)(ts->special_fraction * 9007199254740992.0); /* 2^53 */
    for (int64_t i = 0; i < n; i++) {
        double v = draw(&r, ts);
        if (thresh && (kf_inputs_rng_next(&r) >> 11) < thresh)
            v = ts->special[kf_inputs_rng_next(&r) % (uint64_t)ts->n_special];
        kf_inputs_set(buf, dtype, i, v);
    }
}

void kf_inputs_perturb(void *buf, int dtype, int64_t n, const kf_tensor_spec *ts, uint64_t seed,
                       int k)
{
    if (n <= 0) return;
    kf_rng r;
    kf_inputs_rng_seed(&r, seed);
    kf_inputs_set(buf, dtype, 0, draw(&r, ts));
    kf_inputs_set(buf, dtype, n - 1, draw(&r, ts));
    for (int j = 0; j < k; j++) {
        int64_t i = (int64_t)(kf_inputs_rng_next(&r) % (uint64_t)n);
        kf_inputs_set(buf, dtype, i, draw(&r, ts));
    }
}

void kf_inputs_poison(void *buf, int dtype, int64_t n)
{
    if (dtype == KF_I32) {
        int32_t *p = buf;
        for (int64_t i = 0; i < n; i++) p[i] = KF_INPUTS_I32_POISON;
        return;
    }
    memset(buf, 0xff, (size_t)n * kf_dtype_size(dtype));
}

int kf_inputs_is_poison(const void *buf, int dtype, int64_t i)
{
    switch (dtype) {
    case KF_F32: case KF_I32: {
        uint32_t u;
        memcpy(&u, (const char *)buf + 4 * i, 4);
        return dtype == KF_I32 ? u == (uint32_t)KF_INPUTS_I32_POISON : u == KF_INPUTS_F32_POISON;
    }
    case KF_F16: case KF_BF16: return ((const uint16_t *)buf)[i] == 0xffffu;
    case KF_F64: {
        uint64_t u;
        memcpy(&u, (const char *)buf + 8 * i, 8);
        return u == ~0ULL;
    }
    }
    return 0;
}

void kf_inputs_gen_spec(const kf_tensor_spec *ts, uint64_t seed, kf_gen_spec *g)
{
    memset(g, 0, sizeof(*g));
    g->seed = seed;
    g->dtype = ts->dtype;
    g->dist = ts->dist == KF_DIST_UNIFORM ? 1 : 0;
    g->p0 = ts->p0;
    g->p1 = ts->dist == KF_DIST_UNIFORM ? ts->p1 - ts->p0 : ts->p1;
    if (ts->n_special > 0 && ts->special_fraction > 0) {
        g->n_special = ts->n_special;
        for (int k = 0; k < ts->n_special; k++) g->special[k] = ts->special[k];
        g->thresh = (uint64_t)(ts->special_fraction * 9007199254740992.0); /* 2^53 */
        if (!g->thresh) g->thresh = 1;
    }
}

/* kf_gen's loop with the spec's dtype, distribution and special-value
 * test fixed (constants once inlined: no switch per element). The same
 * kf_gen_value() and kf_gen_store(), so the same bits. */
static inline __attribute__((always_inline)) void gen_as(void *buf, int64_t n, const kf_gen_spec *g, int dtype,
                                                         int dist, int special)
{
    kf_gen_spec s = *g;
    s.dtype = dtype;
    s.dist = dist;
    if (!special) s.thresh = 0;
    for (int64_t i = 0; i < n; i++) kf_gen_store(buf, dtype, (uint64_t)i, kf_gen_value(&s, (uint64_t)i));
}

void kf_inputs_gen_fill(void *buf, int64_t n, const kf_gen_spec *g)
{
    if (g->dtype == KF_F32 && !g->thresh && g->dist == 0) gen_as(buf, n, g, KF_F32, 0, 0);
    else if (g->dtype == KF_F32 && !g->thresh && g->dist == 1) gen_as(buf, n, g, KF_F32, 1, 0);
    else if (g->dtype == KF_F32 && g->dist == 0) gen_as(buf, n, g, KF_F32, 0, 1);
    else if (g->dtype == KF_F32 && g->dist == 1) gen_as(buf, n, g, KF_F32, 1, 1);
    else
        for (int64_t i = 0; i < n; i++) kf_gen_store(buf, g->dtype, (uint64_t)i, kf_gen_value(g, (uint64_t)i));
}
