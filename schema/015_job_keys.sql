-- 015_job_keys.sql -- a job's fixed keys in a table of their own, written
-- once per job (issue 13: dispatch at fleet scale).
--
-- A job's row is updated twice on the dispatch path (queued -> leased ->
-- done) and neither update can be HOT (`state` is in the queue's index
-- predicates), so each new row version gets an entry in every index whose
-- predicate it meets. Two of the job row's indexes were keyed only by what
-- never changes -- jobs_campaign (campaign_id, state) and
-- jobs_candidate_target (candidate_id, target, verifies), unique -- yet got
-- 4 of the 7 entries a job added on its way (a uniqueness check each in the
-- unique one). Measured with a throwaway build: dropping those two put
-- PostgreSQL at ~9% less CPU per job (docs/benchmarks.md, 2026-12-07
-- afternoon).
--
-- job_keys holds, per job, its campaign, candidate, target and the
-- evaluation it verifies; its rows are inserted once, with the job, and
-- never updated. It carries what those two indexes did:
--  - job_keys_candidate: one evaluation job per (candidate, target), one
--    verification job per evaluation (NULLS NOT DISTINCT on verifies, as
--    jobs_candidate_target), and every lookup of a candidate's jobs;
--  - job_keys_campaign: a campaign's jobs whatever their state (the
--    campaign list's totals, a campaign's deletion); queued and leased jobs
--    are read through the job row's own partial indexes (jobs_queued,
--    jobs_queued_campaign, jobs_leased), which only versions in that state
--    enter.
-- The job row keeps its columns (campaign_id, candidate_id, target,
-- verifies): what reads a job by id reads them there.
--
-- Writers. A statement trigger adds the keys of every job a statement
-- inserts (a plain INSERT: a second evaluation job of a candidate on a
-- target, or a second verification of an evaluation, fails the statement
-- on job_keys_candidate, as it failed on jobs_candidate_target). The
-- coordinator's strategies skip the jobs whose keys exist (NOT EXISTS on
-- job_keys; a campaign's strategy runs under its campaign row's lock), and
-- a verification job is inserted with ON CONFLICT DO NOTHING on
-- jobs_one_verify before its keys are added.
--
-- Deletes. The foreign keys from jobs to candidates and campaigns made
-- PostgreSQL delete a deleted candidate's jobs by candidate_id, which no
-- index of jobs now serves; they move to job_keys (ON DELETE CASCADE,
-- served by its two indexes), and a statement trigger deletes the jobs of
-- the keys deleted (by jobs_pkey), which deletes their evaluations
-- (jobs_forget_evaluations, schema 012). A job deleted directly takes its
-- keys with it. Each trigger does nothing for a statement that deleted
-- nothing, so the two do not call each other without end. Their DELETEs
-- are planned at each call (EXECUTE), for the rows that call has: a plan
-- kept from a first call of thousands of rows (a hash join reading the
-- whole table) and run again for each deleted candidate's one or two jobs
-- made a campaign's deletion quadratic (6 min for 3,000 candidates).
--
-- A coordinator older than this migration must not run beside it: its
-- strategies name the dropped unique index in ON CONFLICT
-- (candidate_id, target, verifies) and fail until it is replaced.
--
-- jobs_one_verify's predicate becomes `verifies IS NOT NULL` (the same rows:
-- the CHECK jobs_verifies_iff_verify of schema 014), which the foreign
-- key's cascade query `DELETE FROM jobs WHERE verifies = $1` implies: with
-- `purpose = 'verify'` it could not use the index and read the whole jobs
-- table once per deleted evaluation.
LOCK TABLE campaigns IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE candidates IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;

CREATE TABLE job_keys (
    job_id       bigint NOT NULL,
    campaign_id  bigint NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    candidate_id bigint NOT NULL REFERENCES candidates(id) ON DELETE CASCADE,
    target       text NOT NULL,
    verifies     bigint                    -- NULL: an evaluation job
);
INSERT INTO job_keys (job_id, campaign_id, candidate_id, target, verifies)
SELECT id, campaign_id, candidate_id, target, verifies FROM jobs ORDER BY id;
CREATE UNIQUE INDEX job_keys_candidate ON job_keys (candidate_id, target, verifies) INCLUDE (job_id)
    NULLS NOT DISTINCT;
CREATE INDEX job_keys_campaign ON job_keys (campaign_id) INCLUDE (job_id, verifies);

CREATE FUNCTION kf_add_job_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_keys (job_id, campaign_id, candidate_id, target, verifies)
    SELECT id, campaign_id, candidate_id, target, verifies FROM kf_new_jobs ORDER BY id;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_add_keys AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS kf_new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION kf_add_job_keys();

CREATE FUNCTION kf_forget_job_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM kf_gone_jobs LIMIT 1;
    IF FOUND THEN
        EXECUTE 'DELETE FROM job_keys k USING kf_gone_jobs g'
                ' WHERE k.candidate_id = g.candidate_id AND k.job_id = g.id';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_forget_keys AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS kf_gone_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION kf_forget_job_keys();

CREATE FUNCTION kf_forget_keyed_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM kf_gone_keys LIMIT 1;
    IF FOUND THEN
        EXECUTE 'DELETE FROM jobs j USING kf_gone_keys g WHERE j.id = g.job_id';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER job_keys_forget_jobs AFTER DELETE ON job_keys
    REFERENCING OLD TABLE AS kf_gone_keys
    FOR EACH STATEMENT EXECUTE FUNCTION kf_forget_keyed_jobs();

ALTER TABLE jobs DROP CONSTRAINT jobs_candidate_id_fkey;
ALTER TABLE jobs DROP CONSTRAINT jobs_campaign_id_fkey;
DROP INDEX jobs_campaign;
DROP INDEX jobs_candidate_target;
DROP INDEX jobs_one_verify;
CREATE UNIQUE INDEX jobs_one_verify ON jobs (verifies) WHERE verifies IS NOT NULL;
