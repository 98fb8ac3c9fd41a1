/*
 * kfarm_cli.h -- the `kfarm` user CLI (prefix kf_cli_).
 *
 * Design (git's builtin/ layout). kfarm.c dispatches `kfarm COMMAND ...` to
 * one kf_cli_cmd_* function per file (cmd_*.c); each parses its own options
 * with getopt_long (--db and --help everywhere), talks to PostgreSQL through
 * the coordinator library (no daemon needed): commands read with their own
 * SQL, but every write goes through the coordinator module that owns the
 * table (campaign.c, queue.c, strategy_llm.c, prompt.c, server.c), so one
 * module holds each table's rules. Each returns the exit status:
 * 0 success, 1 failure (one line "kfarm: reason" on stderr), 2 usage error.
 * Shared helpers (option parsing, database connection, tables) live in
 * common.c.
 */
#ifndef KFARM_CLI_H
#define KFARM_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <jansson.h>
#include "campaign.h"
#include "db.h"
#include "status.h"

/* Commands: argv[0] is the command name ("campaign", "db", ...). */
int kf_cli_cmd_db(int argc, char **argv);
int kf_cli_cmd_campaign(int argc, char **argv);
int kf_cli_cmd_candidates(int argc, char **argv);
int kf_cli_cmd_leaderboard(int argc, char **argv);
int kf_cli_cmd_best(int argc, char **argv);
int kf_cli_cmd_export(int argc, char **argv);
int kf_cli_cmd_workers(int argc, char **argv);
int kf_cli_cmd_worker(int argc, char **argv);
int kf_cli_cmd_review(int argc, char **argv);    /* cmd_review.c */
int kf_cli_cmd_hint(int argc, char **argv);      /* cmd_hint.c */
int kf_cli_cmd_candidate(int argc, char **argv); /* cmd_candidate.c */
int kf_cli_cmd_docs(int argc, char **argv);      /* cmd_docs.c */
int kf_cli_cmd_ship(int argc, char **argv);      /* cmd_ship.c */

/* LLM campaigns (campaign_llm.c). Read a campaign file (--config): fills
 * spec fields the command line left unset (strategy, task, targets,
 * max_candidates, max_attempts, seed_file; relative paths are relative to
 * the file) and sets spec->config_json to the file's JSON. *text and *json
 * keep the strings alive (caller frees: free / json_decref). Returns 0, or
 * the exit status after printing the reason. */
int kf_cli_campaign_config(const char *path, kf_campaign_spec *spec, char **text, json_t **json);

/* Print "kfarm: <message>" (printf-style) on stderr and return 1. */
int kf_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "kfarm: <message>\n(see kfarm <cmd> --help)" and return 2. */
int kf_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Connect to conninfo (NULL: $KFARM_DB). NULL after printing the reason. */
kf_db *kf_cli_connect(const char *conninfo);

/* Parse a non-negative decimal integer/number. 0 or -1. */
int kf_cli_parse_long(const char *s, long *out);
int kf_cli_parse_double(const char *s, double *out);

/* Resolve a campaign name to its id; prints the reason and returns -1 when
 * there is none. */
int kf_cli_campaign_id(kf_db *db, const char *name, long long *id);

/* A text table: add cells row by row, then print with aligned columns. */
#define KF_CLI_TABLE_MAXCOLS 16
typedef struct {
    int ncols;
    size_t nrows, cap;
    char **cells;                 /* nrows * ncols, malloc'ed copies */
    int right[KF_CLI_TABLE_MAXCOLS]; /* right-align column (numbers) */
    int keep[KF_CLI_TABLE_MAXCOLS];  /* never shortened to fit the width (names other commands take) */
} kf_cli_table;

/* Output modes, set by kfarm.c from --wide / --json anywhere on the
 * command line: tables at full width, listings as JSON arrays. */
extern int kf_cli_wide, kf_cli_json;
#define KF_CLI_WIDTH 80  /* table width without --wide */

/* Print the rows of r as a JSON array of objects keyed by column name
 * (numbers, booleans and json columns typed; NULL as null). 0 or -1. */
int kf_cli_print_json(PGresult *r, FILE *f);

/* Start a table with the given header cells (ncols of them). */
void kf_cli_table_init(kf_cli_table *t, int ncols, const char *const *header);
/* Add one row of ncols cells (NULL prints as "-"). */
void kf_cli_table_row(kf_cli_table *t, const char *const *cells);
/* Print to f and free the table. Cells are cut at maxw characters (0: no
 * cut) and, unless --wide, the widest columns are narrowed (cut cells end in
 * "~") until the table fits KF_CLI_WIDTH columns. */
void kf_cli_table_print(kf_cli_table *t, FILE *f, int maxw);
/* Free a table without printing it. */
void kf_cli_table_free(kf_cli_table *t);

/* Print a unified diff (3 lines of context) from old_text to new_text on f,
 * "(identical)" when they are. Returns 0, or -1 when out of memory. */
int kf_cli_diff(const char *old_text, const char *new_text, const char *old_name,
                const char *new_name, FILE *f);

/* Format a number with the given precision, or "-" for SQL NULL. */
const char *kf_cli_num(const char *v, int prec, char *buf, size_t cap);

#endif
