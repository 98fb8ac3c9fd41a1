-- 014_job_entries.sql -- fewer index entries per job (issue 13).
--
-- A job's row is updated twice on its way (queued -> leased -> done), and
-- neither update can be HOT: `state` is in the key or the predicate of
-- several indexes. A non-HOT update adds an entry to every index whose
-- predicate the new row version meets. Before this migration the lease's
-- version went into 5 indexes (jobs_pkey, jobs_campaign, jobs_candidate,
-- jobs_one_eval, jobs_leased) and the done version into 4: 9 entries per
-- job, two of them in a unique index (a uniqueness check each). Now 4 and
-- 3 (7 per job), and a new job's first version 6 instead of 7:
--
-- 1. jobs_leased is keyed by (campaign_id, lease_deadline): it serves a
--    campaign's leases by its first column and the fleet's expired leases
--    by its second (the reaper reads the index's entries, one per leased
--    job, and no row it does not take). jobs_campaign (campaign_id, state)
--    stays: the campaign list, the leaderboard, a ship and a campaign's
--    deletion read a campaign's jobs whatever their state (dropped too,
--    one entry less per version, those became 2-10x slower at 266,000
--    jobs). jobs_queued_campaign stays too: without it the lease's generic
--    plan read the queue through jobs_campaign and sorted it (a third fewer
--    jobs/s at 1,000 workers).
-- 2. jobs_candidate (candidate_id) and jobs_one_eval (candidate_id, target)
--    WHERE purpose = 'eval' become one unique index on (candidate_id,
--    target, verifies) with NULLS NOT DISTINCT: an evaluation job has no
--    `verifies` (the CHECK below), so two of them for one candidate and
--    target collide as before; a verification job's `verifies` is unique
--    by jobs_one_verify. It serves every lookup by candidate (the foreign
--    key's cascade from candidates included).
-- 3. A campaign's verification results are read by evaluations_verify
--    (entries for verification results only).
ALTER TABLE jobs ADD CONSTRAINT jobs_verifies_iff_verify
    CHECK ((purpose = 'verify') = (verifies IS NOT NULL));
CREATE UNIQUE INDEX jobs_candidate_target ON jobs (candidate_id, target, verifies) NULLS NOT DISTINCT;
DROP INDEX jobs_one_eval;
DROP INDEX jobs_candidate;
DROP INDEX jobs_leased;
CREATE INDEX jobs_leased ON jobs (campaign_id, lease_deadline) WHERE state = 'leased';
CREATE INDEX evaluations_verify ON evaluations (job_campaign_id) WHERE job_purpose = 'verify';
