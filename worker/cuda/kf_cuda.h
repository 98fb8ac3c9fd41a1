/*
 * kf_cuda.h -- the CUDA backend of the worker (prefix kf_cuda_).
 *
 * Design. The worker process itself never touches the CUDA runtime: CUDA
 * does not survive fork(), and the worker forks a judge per evaluation
 * (worker/judge.c). The judge creates its own context on the device and
 * shares arenas with runner processes (worker/runner.c, built as
 * kfarm-runner-cuda), each with a context of its own; a sticky device error
 * (illegal address) therefore ends only that runner's context (R1).
 *
 * The binary links the CUDA runtime and CUPTI as shared libraries found
 * through an rpath to the toolkit; neither needs libcuda.so.1 at load time
 * (cudart dlopens the driver on first use and reports cudaErrorInsufficient-
 * Driver / NoDevice), so a CUDA build starts and does cpu work on a machine
 * with no driver. NVML (clocks, temperature) is dlopen'ed ("libnvidia-ml.so.1")
 * and optional. Candidates are built with `-cudart shared` so that a runner
 * holds exactly one runtime instance (streams and errors are shared).
 *
 * Files:
 *   kf_cuda_model.c    pure, GPU-independent logic (always compiled, unit-
 *                      tested in CI): ptxas -v parsing, per-SM peak tables,
 *                      roofline bound classification, CUPTI kernel-record
 *                      bookkeeping, statistics.
 *   kf_cuda_compile.c  nvcc to a shared object for one exact arch, with a
 *                      cache (always compiled: it only execs nvcc).
 *   kf_cuda_discover.c discovery from the worker (runs the child below).
 *   kf_cuda_judge.c    the judge's cuda backend (worker/judge.h): the judge's
 *                      context, arenas shared with runners as POSIX file
 *                      descriptors, L2 flush, fence, peaks, NVML; and the
 *                      discovery child. Evaluation itself is worker/judge.c
 *                      (one pipeline for every backend) and worker/runner.c.
 */
#ifndef KF_CUDA_H
#define KF_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "kf_task.h"
#include "kf_eval.h"

/* ---------------- model: ptxas -v ---------------- */

#define KF_CUDA_MAX_PTXAS 64

typedef struct {
    char name[160];        /* mangled entry name */
    int registers;         /* per thread */
    int smem_bytes;        /* static shared memory */
    int stack_bytes;       /* stack frame */
    int spill_stores;      /* bytes */
    int spill_loads;       /* bytes */
} kf_cuda_ptxas_fn;

/* Parse `nvcc -Xptxas -v` output: one entry per "Compiling entry function"
 * (kernels only; device functions' properties are ignored). Returns the
 * number of entries written to out (at most cap). */
int kf_cuda_parse_ptxas(const char *log, kf_cuda_ptxas_fn *out, int cap);

/* ---------------- model: peaks and roofline ---------------- */

typedef struct {
    int cc;                /* major*10+minor, e.g. 90 */
    const char *family;    /* "Hopper" */
    /* dense FLOP per SM per clock (FMA = 2) */
    double fp32, fp64, fp16_tc, bf16_tc, tf32_tc;
    double densest;        /* the fastest dense tensor format (fp8/int8/int4/fp4) */
} kf_cuda_peak_row;

/* Row of the per-SM rate table for compute capability cc (major*10+minor),
 * or the nearest lower generation's row; NULL below sm_75. Sources are named
 * in kf_cuda_model.c (CUDA C++ Programming Guide arithmetic-throughput table;
 * NVIDIA architecture whitepapers for tensor-core rates). */
const kf_cuda_peak_row *kf_cuda_peak_lookup(int cc);

/* Peak dense FLOP rate in GFLOP/s for a task dtype (kf_dtype) on a device:
 * per-SM-per-clock rate x SMs x max SM clock (MHz). f16/bf16 use tensor-core
 * rates; f32/i32 the FP32 pipe; f64 the larger of FP64 pipe and FP64 tensor.
 * 0 if unknown. An upper bound (GeForce parts accumulate in fp32 at half rate). */
double kf_cuda_peak_gflops(int cc, int dtype, int sm_count, double sm_clock_mhz);

/* The fastest any computation can run on a device, in GFLOP/s: the largest
 * per-SM rate of its generation over every pipe and dense tensor format
 * (fp8/int8/int4/fp4 included: a kernel may emulate any dtype on them by
 * splitting operands) x SMs x max SM clock (MHz). The judge's physical floor
 * uses it, never the task dtype's own peak: a bf16 gemm with an f32 output
 * runs on bf16 tensor cores far above the f32 pipe. 0 if unknown. */
double kf_cuda_peak_ceiling_gflops(int cc, int sm_count, double sm_clock_mhz);

/* Peak DRAM bandwidth in GB/s from the memory clock (kHz, as CUDA reports it)
 * and bus width (bits): 2 (double data rate) x clock x width/8. */
double kf_cuda_peak_bandwidth_gbs(double mem_clock_khz, int bus_width_bits);

typedef enum { KF_BOUND_UNKNOWN = 0, KF_BOUND_MEMORY, KF_BOUND_COMPUTE, KF_BOUND_LATENCY } kf_cuda_bound;

/* Roofline classification of one timed call: time_us (µs), flops and bytes
 * from the task's formulas, device peaks (GFLOP/s, GB/s). latency/launch when
 * the call is short (< 10 µs) or its roofline time -- max(bytes/peak_bw,
 * flops/peak_flops) -- is under 1 µs; else memory when the intensity
 * (flop/byte) is below the ridge point peak_gflops/peak_gbs, compute above it.
 * *roof_frac (optional) receives roofline time / measured time. */
kf_cuda_bound kf_cuda_classify(double time_us, double flops, double bytes, double peak_gflops,
                               double peak_gbs, double *roof_frac);
const char *kf_cuda_bound_name(kf_cuda_bound b);

/* ---------------- model: CUPTI kernel records ---------------- */

typedef struct {
    char name[128];
    uint32_t correlation;   /* CUPTI correlation id of the launch */
    uint32_t stream;        /* CUPTI stream id */
    uint64_t start_ns, end_ns;
    int grid[3], block[3];
    int registers;
    int smem_static, smem_dynamic;
} kf_cuda_kernel_rec;

/* A growable list of records (malloc'ed), filled by the child's CUPTI buffer
 * callback. */
typedef struct {
    kf_cuda_kernel_rec *v;
    int n, cap;
    int dropped;            /* records CUPTI reported as dropped */
} kf_cuda_kernels;

/* Append a record; 0 or -1 on allocation failure. */
int kf_cuda_kernels_add(kf_cuda_kernels *k, const kf_cuda_kernel_rec *r);
void kf_cuda_kernels_clear(kf_cuda_kernels *k);
void kf_cuda_kernels_free(kf_cuda_kernels *k);

/* What one call launched: the records whose correlation id lies in
 * (corr_lo, corr_hi] -- the ids CUPTI handed out while the call ran. */
typedef struct {
    int n;                  /* kernels launched by the call */
    int n_task_stream;      /* ... on the task stream */
    int n_side;             /* ... on other streams */
    int n_side_late;        /* ... on other streams, still running when the call returned */
    double sum_us;          /* summed kernel durations, µs */
    uint64_t first_start_ns, last_end_ns;
    char names[512];        /* "name<<<grid,block>>> [stream] 12.3us; ..." (truncated) */
} kf_cuda_call_kernels;

/* Summarize the records of one call (see kf_cuda_call_kernels). return_ns is
 * the CUPTI timestamp taken right after the call returned (0 = unknown). */
void kf_cuda_kernels_for_call(const kf_cuda_kernels *k, uint32_t corr_lo, uint32_t corr_hi,
                              uint32_t task_stream, uint64_t return_ns, kf_cuda_call_kernels *out);

/* ---------------- model: statistics ---------------- */

typedef struct {
    double median, min, max, mean, cv; /* cv = stddev/mean */
    int n;
} kf_cuda_stats;

/* Statistics of n samples (v is sorted in place). */
void kf_cuda_stats_of(double *v, int n, kf_cuda_stats *s);

/* ---------------- compile ---------------- */

typedef enum {
    KF_CUDA_BUILD_OK = 0,
    KF_CUDA_BUILD_FAILED,   /* compile_error: the source does not build */
    KF_CUDA_BUILD_ARCH,     /* unsupported: builds only for another architecture */
    KF_CUDA_BUILD_INFRA     /* infra_error: nvcc missing, disk full, killed, ... */
} kf_cuda_build_status;

typedef struct {
    const char *source_path;   /* .cu file */
    const char *out_path;      /* shared object to produce */
    const char *scratch_dir;   /* existing dir: nvcc's cwd/TMPDIR */
    const char *cache_dir;     /* NULL = no cache; entries under <cache_dir>/cuda/ */
    const char *arch;          /* "sm_90", "sm_90a", "sm_86" ... */
    int n_defines;
    const char *const *define_names;
    const char *const *define_values;
    int n_libs;                /* extra -l libraries (reference/baseline only) */
    const char *const *libs;   /* "cublas" */
    double timeout_s;          /* 0 = 300 s */
    int (*tick)(void *arg);
    void *tick_arg;
} kf_cuda_build_req;

typedef struct {
    kf_cuda_build_status status;
    int cached;                /* out_path came from the cache */
    double seconds;            /* build wall time (0 on a hit) */
    char key[65];              /* cache key (sha256 hex) */
    char nvcc[512];            /* resolved nvcc path */
    char *log;                 /* nvcc output incl. ptxas -v (malloc'ed, never NULL) */
    char detail[512];          /* one line */
    int n_fn;                  /* parsed ptxas info */
    kf_cuda_ptxas_fn fn[KF_CUDA_MAX_PTXAS];
} kf_cuda_build_res;

/* Locate nvcc: $KFARM_NVCC if set (must be executable: a set but broken value
 * is "not found", never silently replaced), else the compile-time KFARM_NVCC
 * (the toolkit CMake found), else `nvcc` on PATH, else
 * /usr/local/cuda/bin/nvcc. 0, or -1 if none found. */
int kf_cuda_find_nvcc(char *out, size_t cap);

/* Whether an arch string is valid: "sm_" + 2-3 digits + optional 'a' or 'f'. */
int kf_cuda_arch_valid(const char *arch);

/* Whether NAME=VALUE is an acceptable define (C identifier; value of
 * [A-Za-z0-9_.+-], at most 64 chars): nothing that could smuggle a flag. */
int kf_cuda_define_valid(const char *name, const char *value);

/* Classify a failed nvcc log: 1 if the failure is architecture-only
 * ("not supported on .target", "requires .target sm_90a", ...), and then
 * writes the offending line into line. */
int kf_cuda_log_is_arch_error(const char *log, char *line, size_t cap);

/* Build with `nvcc -O3 -shared -Xcompiler -fPIC -gencode arch=compute_XY,
 * code=sm_XY -Xptxas -v -cudart shared`. Cache key = sha256 of the source,
 * every flag and define, the arch, the ABI header and `nvcc --version`;
 * only successful builds are stored (with their log, so ptxas info survives
 * a hit). Returns 0 and fills *res for every outcome; -1 on bad arguments. */
int kf_cuda_build(const kf_cuda_build_req *req, kf_cuda_build_res *res);
void kf_cuda_build_res_free(kf_cuda_build_res *res);

/* ---------------- discovery ---------------- */

#define KF_CUDA_MAX_GPUS 16

typedef struct {
    int index;
    char name[128];
    int cc_major, cc_minor;
    char arch[16];             /* "sm_90" */
    int sm_count;
    uint64_t memory_bytes;
    int bus_width_bits;
    double mem_clock_khz;
    double sm_clock_mhz;       /* max SM clock (NVML max, else CUDA's) */
    double peak_gbs;           /* from bus width and memory clock */
    uint64_t l2_bytes;
    double peak_gflops_f32, peak_gflops_bf16, peak_gflops_f16, peak_gflops_f64;
    int driver_version, runtime_version; /* CUDA's 13000 = 13.0 */
    char driver[64];           /* NVML driver version string, "" if no NVML */
    double cur_sm_mhz, temp_c; /* NVML sample, 0 if unavailable */
    char pci[32];
} kf_cuda_gpu;

/* Discover the visible GPUs in a sandboxed child (the parent never
 * initializes CUDA). Returns the count (0 = none / no driver, with err saying
 * why), or -1 when the child could not run. */
int kf_cuda_discover(kf_cuda_gpu *gpus, int cap, char *err, size_t errlen);

/* The JSON text for one GPU (malloc'ed), for `kfarm-worker devices` and logs. */
char *kf_cuda_gpu_json(const kf_cuda_gpu *g);

/* Discovery child (a kf_sandbox_fn; arg is the 33-byte report nonce):
 * writes one "R <nonce> {"gpus": [...], "error": ...}" line. */
int kf_cuda_discover_child(void *arg, int report_fd);

#endif
