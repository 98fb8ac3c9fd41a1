/*
 * rproto.h -- the judge <-> runner protocol (prefix kf_rp_).
 *
 * A runner (worker/runner.c, the kfarm-runner binary) is exec'ed by the
 * judge (worker/judge.c) for one shared object -- reference, baseline or
 * candidate -- and lives for one evaluation. It inherits exactly these
 * descriptors and nothing else:
 *
 *     0  /dev/null
 *     1  stdout -> a pipe the judge drains and caps
 *     2  stderr -> the same pipe
 *     3  commands from the judge (pipe, read end)
 *     4  replies to the judge (pipe, write end)
 *     5  the arena: the only memory the runner shares with the judge
 *        (cpu: a memfd; cuda: a POSIX file descriptor exported from a
 *        cuMemCreate allocation the judge owns)
 *
 * argv: kfarm-runner ROLE BACKEND SO_PATH ARENA_BYTES GPU
 * (ROLE is reference|baseline|candidate, for messages only; BACKEND is cpu|cuda.)
 *
 * The runner maps the arena [cuda: sets up the device], answers KF_RP_READY,
 * waits for KF_RP_LOAD (so the judge can set up every runner at once and
 * still let the candidate's code run only after the task's runners are
 * loaded), loads SO_PATH (dlopen: its constructors run here, after
 * confinement), answers one KF_RP_LOADED reply, then serves
 * commands until KF_RP_QUIT or EOF. Every command is one kf_rp_cmd; every
 * answer one kf_rp_reply, both fixed-size, so a short or malformed record is
 * a protocol violation the judge blames on the runner.
 *
 * What the runner says is never trusted for anything but its own verdict:
 * "returned" is checked by the judge (outputs, CPU time, late writes), and a
 * candidate runner's own error report can only blame the candidate.
 */
#ifndef KF_RPROTO_H
#define KF_RPROTO_H

#include <stdint.h>
#include "kf_abi.h"

#define KF_RP_MAGIC 0x6b667270u /* "kfrp" */
#define KF_RP_MAX_T 8             /* tensors per side (= KF_MAX_TENSORS) */
#define KF_RP_MAX_SIZES 8
#define KF_RP_MAX_BATCH 4096      /* calls per doorbell */

#define KF_RP_FD_CMD 3
#define KF_RP_FD_REPLY 4
#define KF_RP_FD_ARENA 5

enum {
    KF_RP_CALL = 1,   /* call kf_entry count times, call i on the layout shifted by
                         i x stride (a batch: one doorbell, one answer) */
    KF_RP_NOOP = 2,   /* answer at once (cuda: after a device synchronize) */
    KF_RP_QUIT = 3,
    KF_RP_RESET = 4,  /* cuda, trusted runners: reset persisting-L2 state, untimed */
    KF_RP_LOAD = 5    /* after KF_RP_READY, once: load the shared object now */
};

enum {
    KF_RP_LOADED = 10, /* after dlopen: status 0 = loaded, else msg says why */
    KF_RP_DONE = 11,   /* after a call or noop */
    KF_RP_READY = 12   /* before dlopen: arena and device set up (status), sent
                          before any code of the shared object ran, so only this
                          reply can report a setup failure the runner is not to blame for */
};

enum {
    KF_RP_ST_OK = 0,
    KF_RP_ST_LOAD_FAILED = 1,   /* dlopen or dlsym failed (msg) */
    KF_RP_ST_CUDA_ERROR = 2,    /* a CUDA error after the call (cuda_err, msg) */
    KF_RP_ST_SETUP_FAILED = 3,  /* arena or device setup failed before loading (msg) */
    KF_RP_ST_ARCH = 4           /* no kernel image for this device (msg) */
};

/* One tensor: where it lies in the arena. */
typedef struct {
    uint64_t offset;             /* bytes from the arena start (64-byte aligned) */
    int32_t dtype, ndim;
    int64_t shape[KF_MAX_DIMS];
} kf_rp_tensor;

typedef struct {
    uint32_t magic, op;
    uint64_t seq;                /* echoed in the reply */
    int32_t n_in, n_out, n_sizes;
    int32_t flags;               /* KF_RP_F_* */
    int32_t count;               /* KF_RP_CALL: calls in this batch (0 = 1) */
    uint64_t stride;             /* bytes between the sets of a batch: call i uses every
                                    offset below plus i x stride */
    kf_rp_tensor in[KF_RP_MAX_T], out[KF_RP_MAX_T];
    int64_t sizes[KF_RP_MAX_SIZES];
    uint64_t ws_offset, ws_bytes;
} kf_rp_cmd;

#define KF_RP_F_KERNELS 2        /* cuda: count the kernels the call launched (CUPTI) */

typedef struct {
    uint32_t magic, kind;
    uint64_t seq;
    int32_t status;              /* KF_RP_ST_* */
    int32_t rc;                  /* kf_entry's return value */
    int32_t cuda_err;            /* cudaError_t after the call, 0 = none */
    int32_t n_kernels;           /* KF_RP_F_KERNELS: kernels seen, -1 = unknown */
    double runner_us;            /* the runner's own clock around the call (evidence only) */
    char msg[224];               /* NUL-terminated */
} kf_rp_reply;

#endif
