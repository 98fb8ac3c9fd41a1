/* Red-team case (found by trying the judge as a hostile model would, 2026-11-30); see case.json for the expected verdict. */
/* h1_close_reply_pipe_hang: worker hangs, blame pushed onto the worker.
 * In its first call the candidate closes its reply pipe (fd 4) and then
 * sleeps. The judge's runner_wait() sees EOF on the reply pipe and calls a
 * BLOCKING waitpid() on a runner that never exits: the judge's own deadline
 * no longer applies, the judge hangs until the outer sandbox limit kills it,
 * and eval.c reports infra_error blame "worker" ("the judge exceeded the
 * limit"). */
#include <unistd.h>
#include "kf_abi.h"

int kf_entry(const kf_call *call)
{
    (void)call;
    close(4);
    for (;;) pause();
}
