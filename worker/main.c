/*
 * main.c -- kfarm-worker entry point (minimal placeholder).
 *
 * The full daemon (registration, job loop, heartbeats) is the lead's; this
 * placeholder only dispatches the local evaluation subcommand so the
 * evaluation path can be built and tested:
 *
 *     kfarm-worker eval TASK_DIR CANDIDATE [options]   (see worker/cmd_eval.c)
 */
#include <stdio.h>
#include <string.h>

int kf_worker_cmd_eval(int argc, char **argv);

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "eval")) return kf_worker_cmd_eval(argc - 1, argv + 1);
    fprintf(stderr, "usage: kfarm-worker eval TASK_DIR CANDIDATE [options]\n");
    return 2;
}
