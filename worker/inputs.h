/*
 * inputs.h -- seeded input generation and element helpers (prefix kf_inputs_).
 *
 * Validation and timing need inputs that are reproducible (the same job id
 * gives the same numbers on every worker, so a failure can be replayed) yet
 * new for every trial (a candidate cannot cache answers). Seeds are derived
 * by mixing (job seed, shape index, trial, tensor index) through splitmix64;
 * the generator is xoshiro256**, which is fast enough to fill 100 MB inputs.
 *
 * Values follow the task's distribution (normal or uniform) and a fraction of
 * elements is replaced by the task's special values (negative zero, values
 * that overflow fp16, ...). Floats are generated in double and rounded to the
 * tensor's dtype with round-to-nearest-even; f16 and bf16 conversion helpers
 * live here because the comparison and the tests need them too.
 *
 * Poison: outputs and workspace are filled with a pattern before every call
 * so that an element the candidate did not write is detectable. For floating
 * dtypes the pattern is all 0xFF bytes (a NaN no arithmetic produces: real
 * NaNs are quiet NaNs with a clear payload such as 0x7fc00000); for i32 it is
 * KF_INPUTS_I32_POISON.
 */
#ifndef KF_INPUTS_H
#define KF_INPUTS_H

#include <stddef.h>
#include <stdint.h>
#include "kf_task.h"
#include "gen.h"

#define KF_INPUTS_I32_POISON ((int32_t)0x80000001) /* -2147483647 */
#define KF_INPUTS_F32_POISON 0xffffffffu          /* an f32 of the floating pattern, as a word */

/* xoshiro256** state. */
typedef struct {
    uint64_t s[4];
} kf_rng;

/* Seed a generator from a 64-bit value (splitmix64 expansion). */
void kf_inputs_rng_seed(kf_rng *r, uint64_t seed);
/* Next 64 random bits. */
uint64_t kf_inputs_rng_next(kf_rng *r);
/* Uniform double in [0, 1). */
double kf_inputs_rng_uniform(kf_rng *r);
/* Standard normal (Box-Muller; one value per call). */
double kf_inputs_rng_normal(kf_rng *r);

/* Derive the seed of one tensor of one trial: a hash of all four parts, so
 * that neighbouring trials are unrelated streams. */
uint64_t kf_inputs_derive_seed(uint64_t job_seed, uint64_t shape_index, uint64_t trial,
                               uint64_t tensor_index);

/* Fill n elements of buf (dtype of ts) with values from ts's distribution and
 * special values, reproducibly from seed. */
void kf_inputs_fill(void *buf, int dtype, int64_t n, const kf_tensor_spec *ts, uint64_t seed);

/* Replace k pseudo-random elements (always including the first and the last)
 * with fresh values from ts's distribution; used to make every timed call's
 * inputs differ from all earlier ones. */
void kf_inputs_perturb(void *buf, int dtype, int64_t n, const kf_tensor_spec *ts, uint64_t seed,
                       int k);

/* The counter-based generator's description of tensor ts for seed (gen.h):
 * the same spec fills the same bits on the host and on the GPU. */
void kf_inputs_gen_spec(const kf_tensor_spec *ts, uint64_t seed, kf_gen_spec *g);
/* Host fill of n elements of g's dtype with gen.h's counter-based values. */
void kf_inputs_gen_fill(void *buf, int64_t n, const kf_gen_spec *g);

/* Fill n elements with the poison pattern of dtype. */
void kf_inputs_poison(void *buf, int dtype, int64_t n);
/* Whether element i holds the poison pattern. */
int kf_inputs_is_poison(const void *buf, int dtype, int64_t i);

/* Element i of buf as a double (f16/bf16 widened exactly). */
double kf_inputs_get(const void *buf, int dtype, int64_t i);
/* Store v into element i, rounded to dtype (RNE; i32 rounds and saturates). */
void kf_inputs_set(void *buf, int dtype, int64_t i, double v);

/* IEEE binary16 and bfloat16 conversions, round-to-nearest-even, NaN kept
 * NaN (quiet), overflow to Inf as IEEE does. */
uint16_t kf_inputs_f32_to_f16(float f);
float kf_inputs_f16_to_f32(uint16_t h);
uint16_t kf_inputs_f32_to_bf16(float f);
float kf_inputs_bf16_to_f32(uint16_t b);

#endif
