/*
 * kf_tune.h -- tunables (prefix kf_tune_).
 *
 * A candidate declares compile-time parameters the farm sweeps without asking
 * the LLM again:
 *
 *     // kfarm:tune BLOCK_M=32,64,128
 *     // kfarm:tune UNROLL=1,2,4
 *
 * Each variant is one combination, compiled with -DNAME=VALUE. Variants are
 * numbered in row-major order over the declarations (the last one varies
 * fastest). Names must be C identifiers; values must be plain tokens
 * (letters, digits, '_', '.', '-', '+'): nothing that could smuggle other
 * compiler flags.
 */
#ifndef KF_TUNE_H
#define KF_TUNE_H

#include <stddef.h>

#define KF_TUNE_MAX 8          /* declarations per candidate */
#define KF_TUNE_MAX_VALUES 32  /* values per declaration */

typedef struct {
    char name[64];
    int n;
    char values[KF_TUNE_MAX_VALUES][32];
} kf_tunable;

/* Parse all `// kfarm:tune` lines of source into t[0..*n). Returns 0, or -1
 * with a reason naming the line for malformed or duplicate declarations. */
int kf_tune_parse(const char *source, kf_tunable *t, int max, int *n, char *err, size_t errlen);

/* Number of variants (product of value counts; 1 when there are none). */
long kf_tune_count(const kf_tunable *t, int n);

/* Values of variant i (0 <= i < count): values[k] points into t[k]. */
void kf_tune_variant(const kf_tunable *t, int n, long i, const char *values[]);

/* Whether name/value are acceptable tokens (see header comment). */
int kf_tune_valid_name(const char *name);
int kf_tune_valid_value(const char *value);

#endif
