/* i15_avx512 (field case I15, "instruction set the worker lacks"), task
 * axpy_f32. A correct axpy written with AVX-512F intrinsics
 * (_mm512_loadu_ps, _mm512_fmadd_ps, masked tail) in a function marked
 * __attribute__((target("avx512f"))), called unconditionally -- no cpuid
 * check -- so it builds on any x86-64 worker and dies with SIGILL on one
 * without AVX-512.
 * Before the judge/runner split: runtime_error (SIGILL) on a worker without
 * AVX-512. Expected: ok where the CPU has avx512f; unsupported where it
 * lacks it (case.json verdict_if_cpu_lacks) -- the worker's fault domain,
 * not the candidate's global failure, and the worker's routing class says
 * which ISA it has. */
#include <immintrin.h>
#include "kf_abi.h"

__attribute__((target("avx512f"))) static void axpy512(const float *x, const float *y, float *z, int64_t n)
{
    const __m512 two = _mm512_set1_ps(2.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(z + i, _mm512_fmadd_ps(two, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        __m512 r = _mm512_fmadd_ps(two, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
        _mm512_mask_storeu_ps(z + i, m, r);
    }
}

int kf_entry(const kf_call *call)
{
    axpy512(call->inputs[0].data, call->inputs[1].data, call->outputs[0].data, call->sizes[0]);
    return 0;
}
