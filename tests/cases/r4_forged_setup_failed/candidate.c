/* Red-team case (found by trying the judge as a hostile model would, 2026-11-30); see case.json for the expected verdict. */
/* e1_forged_setup_failed: blame pushed onto the worker. The candidate's
 * constructor runs inside the runner's dlopen(), before the runner sends
 * its KF_RP_LOADED reply. It writes its own well-formed LOADED reply (seq 0
 * is fixed for LOADED) on fd 4 with status KF_RP_ST_SETUP_FAILED and a
 * machine-sounding message, then _exits. judge.c maps a candidate runner's
 * SETUP_FAILED at load time to infra_error blame "worker". */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "kf_abi.h"

typedef struct {
    uint32_t magic, kind;
    uint64_t seq;
    int32_t status, rc, cuda_err, n_kernels;
    double runner_us;
    char msg[224];
} rp_reply; /* worker/rproto.h kf_rp_reply */

__attribute__((constructor)) static void ctor(void)
{
    rp_reply r;
    memset(&r, 0, sizeof(r));
    r.magic = 0x6b667270u;   /* KF_RP_MAGIC */
    r.kind = 10;             /* KF_RP_LOADED */
    r.seq = 0;
    r.status = 3;            /* KF_RP_ST_SETUP_FAILED */
    r.n_kernels = -1;
    strcpy(r.msg, "arena mmap: Cannot allocate memory");
    write(4, &r, sizeof(r));
    _exit(0);
}

int kf_entry(const kf_call *call) { (void)call; return 0; }
