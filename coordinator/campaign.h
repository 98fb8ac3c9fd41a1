/*
 * campaign.h -- campaigns: creation, state changes, progression (prefix kf_campaign_).
 *
 * Design. A campaign binds a task (stored whole in the database: spec and
 * every file of the task directory, so workers never need the directory), a
 * strategy, target routing classes and budgets. Creating one stores the task
 * (deduplicated by content hash), the campaign row and its seed candidate in
 * one transaction; nothing is evaluated until `start` sets it running. The
 * coordinator's tick (kf_campaign_tick) then calls the campaign's strategy
 * (strategy.h) and marks the campaign done once the strategy is finished and
 * every job is done. States: created -> running <-> paused, running -> done.
 */
#ifndef KF_CAMPAIGN_H
#define KF_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>
#include "db.h"

#define KF_CAMPAIGN_MAX_TARGETS 32
#define KF_CAMPAIGN_MAX_FILE (1u << 20)       /* bytes per task file */
#define KF_CAMPAIGN_MAX_TASK (4u << 20)       /* bytes, all task files together */

typedef struct {
    const char *name;           /* unique campaign name */
    const char *task_dir;       /* directory with task.json */
    const char *strategy;       /* "tune" (default when NULL) */
    const char *targets[KF_CAMPAIGN_MAX_TARGETS];
    int n_targets;              /* 0: "cpu" for cpu tasks; cuda tasks need one */
    long max_candidates;        /* <= 0: no budget */
    const char *seed_path;      /* seed candidate file; NULL: the task's seed */
    int max_attempts;           /* leases per job; <= 0: 3 */
    const char *config_json;    /* strategy config object; NULL: {} */
    double share;               /* share of the fleet among running campaigns; <= 0: 1 */
} kf_campaign_spec;

/* Validate the task directory and create the campaign (task + campaign + seed
 * candidate, one transaction). *id (optional) receives the campaign id.
 * Returns 0, or -1 with a one-line reason (invalid task, name taken, ...). */
int kf_campaign_create(kf_db *db, const kf_campaign_spec *spec, int64_t *id,
                       char *err, size_t errlen);

/* Look up a campaign by name: *id and (optional) state[16]. Returns 0; 1
 * when there is none (err: "no campaign 'NAME'"); -1 on a database error
 * (err says it). */
int kf_campaign_lookup(kf_db *db, const char *name, int64_t *id, char state[16],
                       char *err, size_t errlen);

/* Start (created|paused -> running) or pause (running -> paused) a campaign.
 * Starting a running campaign is a no-op. Returns 0, or -1 with reason
 * (unknown campaign, done, unknown strategy). */
int kf_campaign_start(kf_db *db, const char *name, char *err, size_t errlen);
int kf_campaign_pause(kf_db *db, const char *name, char *err, size_t errlen);

/* Budgets to raise with kf_campaign_extend; <= 0 leaves one as it is. */
typedef struct {
    long max_candidates;
    long max_rounds;     /* LLM strategies */
    double max_hours;    /* LLM strategies */
    long max_tokens;     /* LLM strategies */
} kf_campaign_budget;

/* Raise a campaign's budgets (never lowers them), make its strategy carry
 * on (tune re-expands with the larger sample; LLM strategies resume
 * rounds) and run a done campaign again. Returns 0, or -1 with reason. */
int kf_campaign_extend(kf_db *db, const char *name, const kf_campaign_budget *b, char *err,
                       size_t errlen);

/* Set a campaign's share of the fleet (> 0; running campaigns get leases in
 * proportion to their shares, queue.h). Returns 0, or -1 with reason. */
int kf_campaign_set_share(kf_db *db, const char *name, double share, char *err, size_t errlen);

/* Delete a campaign that is not running, with its candidates, jobs,
 * evaluations, proposals, hints and documents (the task stays). Returns 0,
 * or -1 with reason (unknown, running). */
int kf_campaign_delete(kf_db *db, const char *name, char *err, size_t errlen);

/* Advance one running campaign: run its strategy's step, then mark it done
 * when the strategy is finished and all its jobs are done. *done (optional)
 * is set when this call finished the campaign. Returns 0 or -1 with reason. */
int kf_campaign_step(kf_db *db, int64_t campaign_id, int *done, char *err, size_t errlen);

/* kf_campaign_step for every running campaign. Errors of single campaigns
 * are logged and do not stop the others. Returns 0, or -1 when the list of
 * campaigns could not be read. */
int kf_campaign_tick(kf_db *db, char *err, size_t errlen);

/* Fold the rows of campaign_counts (schema/006_counts.sql: counts of
 * candidates and evaluations that statements only add to) into one per
 * group for every campaign that has more than 64, so that status reads a
 * few rows. Safe beside other coordinators doing the same (one at a time;
 * the others return at once). *folded (optional): rows folded. Returns 0
 * or -1 with reason. */
int kf_campaign_compact_counts(kf_db *db, long *folded, char *err, size_t errlen);

#endif
