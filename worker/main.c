/*
 * main.c -- kfarm-worker entry point (git-style subcommands).
 *
 *     kfarm-worker run --coordinator ADDR [options]    the networked daemon (daemon.c)
 *     kfarm-worker eval TASK_DIR CANDIDATE [options]   one local evaluation, no
 *                                                      coordinator or database (cmd_eval.c)
 */
#include <stdio.h>
#include <string.h>

#include "daemon.h"

int kf_worker_cmd_eval(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm-worker <command> [options]\n"
               "  run   --coordinator ADDR ...       serve jobs from a coordinator\n"
               "  eval  TASK_DIR CANDIDATE [...]     evaluate one candidate locally, print JSON\n"
               "Run 'kfarm-worker <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "eval")) return kf_worker_cmd_eval(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run")) return kf_daemon_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kfarm-worker: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
