/*
 * kf_abi.h -- the kernelfarm kernel ABI.
 *
 * Every reference, baseline and candidate includes this header and exports
 * one function, `kf_entry`, which the worker's harness calls through dlopen.
 * The same ABI serves both backends:
 *
 *   cuda: the shared object is built by nvcc for the worker's own sm_XY;
 *         kf_tensor.data are *device* pointers, `stream` is the cudaStream_t
 *         the harness times on. All device work must be enqueued on `stream`
 *         (work left on other streams is detected and rejected).
 *   cpu:  the shared object is built by the system C compiler with
 *         -O3 -march=native -fopenmp; pointers are host pointers and
 *         `stream` is NULL. All work must be finished when kf_entry returns.
 *
 * Shapes are given twice: in each tensor (`shape`, row-major, contiguous)
 * and as the task's size symbols in spec order (`sizes`), so a kernel can
 * use whichever is handier. `workspace` is scratch the farm allocates
 * (workspace_bytes from the task spec), poisoned before each call.
 *
 * Return 0 on success; any other value is reported as runtime_error.
 */
#ifndef KF_ABI_H
#define KF_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KF_ABI_VERSION 1
#define KF_MAX_DIMS 8

/* Element types. Values are part of the wire contract: never renumber. */
typedef enum {
    KF_F32 = 0,  /* IEEE binary32 */
    KF_F16 = 1,  /* IEEE binary16 */
    KF_BF16 = 2, /* bfloat16: top 16 bits of a binary32 */
    KF_I32 = 3,  /* two's complement int32 */
    KF_F64 = 4   /* IEEE binary64 */
} kf_dtype;

typedef struct {
    void *data;                  /* device pointer (cuda) or host pointer (cpu) */
    int32_t dtype;               /* kf_dtype */
    int32_t ndim;
    int64_t shape[KF_MAX_DIMS];  /* row-major, contiguous */
} kf_tensor;

typedef struct {
    const kf_tensor *inputs;  int32_t n_inputs;
    kf_tensor       *outputs; int32_t n_outputs;
    const int64_t   *sizes;   int32_t n_sizes;   /* task size symbols, spec order */
    void *stream;                                /* cudaStream_t on CUDA, NULL on CPU */
    void *workspace; size_t workspace_bytes;     /* farm-allocated scratch */
} kf_call;

#if defined(_WIN32)
#define KF_EXPORT __declspec(dllexport)
#else
#define KF_EXPORT __attribute__((visibility("default")))
#endif

/* The entry point every kernel implements. 0 = success. */
KF_EXPORT int kf_entry(const kf_call *call);

#ifdef __cplusplus
}
#endif

#endif /* KF_ABI_H */
