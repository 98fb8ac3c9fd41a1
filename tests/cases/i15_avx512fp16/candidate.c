/* i15_avx512fp16 (field case I15), task axpy_f32. A correct AVX-512F axpy
 * (as i15_avx512) that also executes one AVX512-FP16 instruction per call
 * (vaddph on a scratch register, result unused) with no cpuid check. The
 * instruction exists only on CPUs with avx512_fp16 (Sapphire Rapids and
 * later); AMD Zen 4 and most workers lack it, so this case exercises the
 * "unsupported" path on ordinary machines.
 * Before the judge/runner split: runtime_error (SIGILL). Expected: ok where
 * the CPU has avx512_fp16; unsupported where it lacks it (case.json
 * verdict_if_cpu_lacks). */
#include <immintrin.h>
#include "kf_abi.h"

__attribute__((target("avx512f"))) static void axpy512(const float *x, const float *y, float *z, int64_t n)
{
    /* AVX512-FP16: vaddph zmm (EVEX map 5); a SIGILL without avx512_fp16 */
    __asm__ volatile("vaddph %%zmm16, %%zmm16, %%zmm16" ::: "xmm16");
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
