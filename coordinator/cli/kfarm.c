/*
 * kfarm.c -- the `kfarm` CLI dispatcher (git builtin style).
 *
 *     kfarm [--db CONNINFO] COMMAND [ARGS]
 *
 * Looks COMMAND up in the table and calls its kf_cli_cmd_* with argv
 * starting at the command name. A leading --db is exported as $KFARM_DB so
 * every command sees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfarm_cli.h"

#ifndef KFARM_VERSION
#define KFARM_VERSION "0.0.0-dev"
#endif

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} cli_command;

static const cli_command commands[] = {
    { "db", kf_cli_cmd_db, "db migrate | db version: the database schema" },
    { "campaign", kf_cli_cmd_campaign,
      "campaign create|start|pause|status|list|wait|extend|delete: campaigns" },
    { "candidates", kf_cli_cmd_candidates, "candidates NAME: every candidate with its results" },
    { "leaderboard", kf_cli_cmd_leaderboard, "leaderboard NAME: best candidates first" },
    { "best", kf_cli_cmd_best, "best NAME [--out FILE]: the winning source with its defines" },
    { "export", kf_cli_cmd_export, "export --out DIR: write the static dashboard" },
    { "workers", kf_cli_cmd_workers, "workers [release|quarantine ID]: the fleet" },
    { "worker", kf_cli_cmd_worker, "worker add|revoke|list|release|quarantine [NAME]: credentials, quarantine" },
    { "review", kf_cli_cmd_review, "review list|show|approve|reject NAME [ID]: LLM proposals" },
    { "hint", kf_cli_cmd_hint, "hint add|list NAME [TEXT]: hints for the model" },
    { "candidate", kf_cli_cmd_candidate, "candidate submit NAME FILE | show ID: your own kernel; one in full" },
    { "docs", kf_cli_cmd_docs, "docs add|list NAME [FILE...]: reference manuals for prompts" },
    { "ship", kf_cli_cmd_ship, "ship CAMPAIGN... --out DIR [--verify]: the confirmed winners as a library" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: kfarm [--db CONNINFO] COMMAND [ARGS]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nThe database is --db CONNINFO or $KFARM_DB (a libpq connection string).\n"
               "Every command takes --help. Listings take --json (a JSON array for scripts)\n"
               "and --wide (tables wider than %d columns). kfarm --version prints the version.\n",
            KF_CLI_WIDTH);
}

int main(int argc, char **argv)
{
    /* --wide, --json and --version are global: take them out wherever they are */
    int n = 1;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--wide")) kf_cli_wide = 1;
        else if (!strcmp(argv[k], "--json")) kf_cli_json = 1;
        else if (!strcmp(argv[k], "--version")) {
            printf("kfarm %s\n", KFARM_VERSION);
            return 0;
        } else argv[n++] = argv[k];
    }
    argc = n;
    argv[argc] = NULL;
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            setenv("KFARM_DB", argv[i + 1], 1);
            i += 2;
        } else if (strncmp(argv[i], "--db=", 5) == 0) {
            setenv("KFARM_DB", argv[i] + 5, 1);
            i++;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "kfarm: unknown option %s (see kfarm --help)\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[i], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(argv[i], commands[k].name) == 0) return commands[k].fn(argc - i, argv + i);
    fprintf(stderr, "kfarm: unknown command '%s' (see kfarm --help)\n", argv[i]);
    return 2;
}
