// CASE C9 forbidden_cublas: calls cuBLAS (forbidden by the task). expect: rejected_cheat naming cublas
#include "kf_abi.h"
#include <cuda_runtime.h>
extern "C" int cublasCreate_v2(void **);
extern "C" int kf_entry(const kf_call *c)
{
    void *h;
    return cublasCreate_v2(&h);
}
