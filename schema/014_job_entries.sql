-- 014_job_entries.sql -- fewer index entries per job (issue 13).
--
-- A job's row is updated twice on its way (queued -> leased -> done), and
-- neither update can be HOT: `state` is in the key or the predicate of
-- several indexes. A non-HOT update adds an entry to every index whose
-- predicate the new row version meets. Before this migration the lease's
-- version went into 5 indexes (jobs_pkey, jobs_campaign, jobs_candidate,
-- jobs_one_eval, jobs_leased) and the done version into 4: 9 entries per
-- job, two of them in a unique index (a uniqueness check each). Now 3 and
-- 2 (5 per job):
--
-- 1. jobs_campaign (campaign_id, state) had an entry for every version of
--    every job. What reads it counts or finds a campaign's jobs that are not
--    done (leased counts, "any job left?"); done jobs are counted in
--    campaign_counts. jobs_open keeps only versions that are not done.
-- 2. jobs_candidate (candidate_id) and jobs_one_eval (candidate_id, target)
--    WHERE purpose = 'eval' become one unique index on (candidate_id,
--    target, verifies) with NULLS NOT DISTINCT: an evaluation job has no
--    `verifies` (the CHECK below), so two of them for one candidate and
--    target collide as before; a verification job's `verifies` is unique
--    by jobs_one_verify. It serves every lookup by candidate (the foreign
--    key's cascade from candidates included).
-- 3. What read a campaign's jobs through jobs_campaign whatever their state
--    now reads them otherwise: verification jobs by jobs_verify (entries
--    for verification jobs only, a few per campaign's winners); a ship of
--    a campaign's winners through its candidates (candidates_norm, then
--    jobs_candidate_target); a prompt's recent failures from the
--    evaluations' own campaign column. Deleting a campaign reads the jobs
--    table once for the foreign key's cascade.
ALTER TABLE jobs ADD CONSTRAINT jobs_verifies_iff_verify
    CHECK ((purpose = 'verify') = (verifies IS NOT NULL));
CREATE UNIQUE INDEX jobs_candidate_target ON jobs (candidate_id, target, verifies) NULLS NOT DISTINCT;
DROP INDEX jobs_one_eval;
DROP INDEX jobs_candidate;
CREATE INDEX jobs_open ON jobs (campaign_id, state) WHERE state <> 'done';
DROP INDEX jobs_campaign;
CREATE INDEX jobs_verify ON jobs (campaign_id) WHERE purpose = 'verify';
