/*
 * health.h -- why a campaign is not progressing (prefix kf_health_).
 *
 * Design. A campaign that runs overnight must say in the morning, in words,
 * what held it up. The blockers are derived from the database alone (no
 * coordinator state), so `kfarm campaign status`, `kfarm campaign wait` and
 * the dashboard export read the same answer:
 *
 *   state    created (never started), paused by an operator
 *   task     paused by the farm: the task's reference/baseline failed on a
 *            worker (campaigns.pause_reason, set by queue.c)
 *   llm      the latest proposal got no reply (key variable not set in the
 *            coordinator, HTTP status and message, context too long), or
 *            its reply is suspect (prompt truncated by the server)
 *   review   proposals waiting for a person's review (review on)
 *   workers  queued jobs on a target that no live worker serves, or whose
 *            live workers are all quarantined
 *
 * A blocker is a JSON object {"kind": ..., "text": ...}; the list is empty
 * when nothing holds the campaign up (or it is done).
 */
#ifndef KF_HEALTH_H
#define KF_HEALTH_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "db.h"

/* The blockers of campaign `campaign_id` (name: used in the advice texts;
 * NULL: the campaign's own)
 * as a new JSON array (caller json_decref's). NULL with reason on database
 * errors or an unknown campaign. */
json_t *kf_health_blockers(kf_db *db, int64_t campaign_id, const char *name, char *err,
                           size_t errlen);

/* Progress counters of a campaign as a new JSON object: state, strategy,
 * jobs {queued, leased, done, total}, candidates, round, max_rounds (0: none),
 * rate_jobs_per_s (done jobs per second since the start; 0 when unknown),
 * eta_s (seconds until the jobs known now are done; -1 when unknown).
 * NULL with reason on errors. */
json_t *kf_health_progress(kf_db *db, int64_t campaign_id, char *err, size_t errlen);

#endif
