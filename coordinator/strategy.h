/*
 * strategy.h -- search strategies behind one small interface (prefix kf_strategy).
 *
 * Design. A strategy turns a running campaign's state into new candidates and
 * jobs. The coordinator calls step() for every running campaign about once a
 * second (coordinator/campaign.c, kf_campaign_tick); step() reads what it
 * needs from the database (results so far, its own progress kept in
 * campaigns.strategy_state), writes candidates and jobs, and says whether it
 * will ever propose anything more. A step must be idempotent and
 * transactional: a coordinator killed in the middle of one and restarted
 * runs the same step again and must end with the same rows, never duplicates
 * (candidates are unique on (campaign, sha256, defines), jobs on (candidate,
 * target): insert with ON CONFLICT DO NOTHING and record progress in the same
 * transaction). Slow work (LLM calls) must not be done while holding the
 * campaign's row lock.
 *
 * Implemented: tune (strategy_tune.c); loop, beam, parallel (strategy_llm.c,
 * LLM-driven, with human review: see strategy_llm.h).
 */
#ifndef KF_STRATEGY_H
#define KF_STRATEGY_H

#include <stddef.h>
#include <stdint.h>
#include "db.h"
#include "kf_tune.h"

/* SQL condition: candidate CAND has no evaluation job on target TARGET yet
 * (both SQL expressions). A strategy's INSERT INTO jobs skips those rows:
 * job_keys_candidate (schema/015_job_keys.sql) refuses a second one, and a
 * campaign's strategy runs under its campaign row's lock, so no other
 * writer adds one between this check and the insert. */
#define KF_NO_JOB_KEY(CAND, TARGET)                                              \
    "NOT EXISTS (SELECT 1 FROM job_keys jk WHERE jk.candidate_id = " CAND          \
    " AND jk.target = " TARGET " AND jk.verifies IS NULL)"

/* SQL FROM item: campaign c's targets as column t, each once (a campaign
 * created with a target named twice would otherwise insert its jobs
 * twice in one statement, which KF_NO_JOB_KEY cannot see and
 * job_keys_candidate refuses). */
#define KF_CAMPAIGN_TARGETS "LATERAL (SELECT DISTINCT unnest(c.targets)) kf_t(t)"

typedef struct kf_strategy {
    const char *name;
    /* Advance campaign `campaign_id` (state running). Sets *finished = 1 when
     * the strategy will propose no more candidates (the campaign is done once
     * its remaining jobs are). Returns 0, or -1 with reason. */
    int (*step)(kf_db *db, int64_t campaign_id, int *finished, char *err, size_t errlen);
} kf_strategy;

/* The strategy called name, or NULL if it is not implemented. */
const kf_strategy *kf_strategy_find(const char *name);

/* The tune strategy: expand the seed candidate's `// kfarm:tune` variants
 * (all, or an even sample of max_candidates of them) into candidates with
 * one job per target, in one transaction. */
extern const kf_strategy kf_strategy_tune;

/* The defines of `take` variants of tunables t[0..n) as compact JSON text
 * ([{"NAME": "value", ...}, ...]): every variant when take >= their count,
 * else an even sample (variant k*count/take) so the slow-varying tunables
 * vary too; "[{}]" when n == 0. Shared by tune and the LLM strategies (which
 * sweep the tunables of model-written kernels). Returns malloc'ed text, or
 * NULL when out of memory. */
char *kf_strategy_tune_variants_json(const kf_tunable *t, int n, long take);

#endif
