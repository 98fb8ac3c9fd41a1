/*
 * kf_task.h -- task specs (prefix kf_task_).
 *
 * A task is a directory holding task.json (the spec), the reference, the
 * baseline and usually a tunable seed candidate. docs/task-format.md is the
 * user-facing description of every field; this module parses and validates a
 * spec (clear, field-naming errors for bad files), evaluates the size-symbol
 * expressions used for FLOP/byte formulas and workspace sizes, and computes
 * tensor shapes for a given shape set.
 *
 * The spec is parsed into fixed-size arrays: a task never needs more than a
 * handful of tensors and shape sets, and fixed arrays keep the harness free of
 * allocation failures mid-evaluation. Exceeding a limit is a parse error.
 */
#ifndef KF_TASK_H
#define KF_TASK_H

#include <stddef.h>
#include <stdint.h>
#include "kf_abi.h"

#define KF_MAX_SIZES 8
#define KF_MAX_TENSORS 8
#define KF_MAX_SHAPES 16
#define KF_MAX_FORBID 16
#define KF_MAX_SPECIAL 8
#define KF_NDTYPES 5

typedef enum { KF_DIST_NORMAL = 0, KF_DIST_UNIFORM = 1 } kf_dist;

typedef struct {
    char name[64];
    int dtype;                       /* kf_dtype */
    int ndim;
    char dims[KF_MAX_DIMS][32];      /* size symbol ("M") or integer literal */
    int dist;                        /* kf_dist */
    double p0, p1;                   /* normal: mean, std; uniform: lo, hi */
    int n_special;                   /* special values mixed into inputs */
    double special[KF_MAX_SPECIAL];  /* e.g. -0.0, 65504, 1e30 */
    double special_fraction;         /* fraction of elements replaced, 0..1 */
} kf_tensor_spec;

typedef struct {
    int64_t sizes[KF_MAX_SIZES];     /* in spec order of size symbols */
    double weight;                   /* benchmark weight (1 for validation) */
} kf_shape;

typedef struct {
    double rtol, atol;               /* |c - r| <= atol * scale + rtol * |r| */
    int set;
} kf_tol;

typedef struct {
    char name[128];
    char backend[8];                 /* "cpu" or "cuda" */
    char *definition;                /* math definition in prose (malloc'ed) */
    int n_sizes;
    char size_names[KF_MAX_SIZES][32];
    int n_inputs, n_outputs;
    kf_tensor_spec inputs[KF_MAX_TENSORS], outputs[KF_MAX_TENSORS];
    int n_validation, n_benchmark;
    kf_shape validation[KF_MAX_SHAPES], benchmark[KF_MAX_SHAPES];
    kf_tol tol[KF_NDTYPES];          /* indexed by kf_dtype */
    char flops[256], bytes[256], workspace[256]; /* expressions over sizes */
    int n_forbid;
    char forbid[KF_MAX_FORBID][64];  /* symbol names or prefixes ending in '*' */
    int require_kernel;              /* cuda: candidate must launch its own kernel */
    int allow_nonfinite;             /* reference may produce Inf/NaN: must match */
    int trials;                      /* validation trials per shape (>= 2) */
    double timeout_s;                /* wall-clock limit for one evaluation */
    char reference[128], baseline[128], seed[128]; /* file names in the task dir */
    int n_link;
    char link[4][32];                /* extra libraries for reference/baseline ("cublas") */
} kf_task;

/* Parse and validate a task spec from JSON text. On error returns -1 and a
 * one-line reason naming the field ("inputs[0].dtype: unknown dtype 'f8'").
 * kf_task_free releases what a successful parse allocated. */
int kf_task_parse(const char *json_text, kf_task *t, char *err, size_t errlen);

/* Read DIR/task.json and parse it; also checks that the reference, baseline
 * and seed files it names exist in DIR. */
int kf_task_load(const char *dir, kf_task *t, char *err, size_t errlen);

void kf_task_free(kf_task *t);

/* Evaluate an arithmetic expression over the task's size symbols
 * (+ - * / parentheses, integer and float literals), e.g. "2*M*N*K".
 * Returns 0 and *out, or -1 with reason (unknown symbol, syntax). */
int kf_task_eval_expr(const kf_task *t, const char *expr, const int64_t *sizes,
                      double *out, char *err, size_t errlen);

/* Shape of tensor `ts` for `sizes`: fills shape[] (ndim entries) and returns
 * the element count, or -1 if a dimension is unknown or not positive, or the
 * count exceeds INT64_MAX / 8 (its byte size would not fit in 64 bits). */
int64_t kf_task_shape(const kf_task *t, const kf_tensor_spec *ts, const int64_t *sizes,
                      int64_t shape[KF_MAX_DIMS]);

/* dtype helpers: name <-> enum ("f32","f16","bf16","i32","f64"), size in bytes. */
int kf_dtype_parse(const char *name);       /* -1 if unknown */
const char *kf_dtype_name(int dtype);
size_t kf_dtype_size(int dtype);

#endif
