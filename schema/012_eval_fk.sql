-- 012_eval_fk.sql -- an evaluation's row stored without two foreign-key
-- checks (issue 13: dispatch at fleet scale).
--
-- evaluations.job_id REFERENCES jobs and evaluations.candidate_id
-- REFERENCES candidates made PostgreSQL run, for every evaluation stored,
-- two RI queries that each lock their parent row FOR KEY SHARE (a row lock
-- written to the page and to WAL). Measured on one worker storing groups
-- of 64 results (docs/benchmarks.md, 2026-12-06 evening): the group's
-- insert took 2.74 ms with them and 1.51 ms without, ~19 us of ~40 per
-- result.
--
-- What the checks guarded is kept otherwise:
--  - only the coordinator writes evaluations, and every path (a group,
--    one result, the reaper, a verification) locks the job's row in the same
--    transaction before it inserts the evaluation from that row, so the job
--    exists and cannot be deleted under it; candidate_id is the job's own;
--  - ON DELETE CASCADE: a job deleted (jobs are deleted only with their
--    candidate or campaign, by their own cascades) takes its evaluations
--    with it through the statement trigger below, one DELETE per deleting
--    statement, by the evaluations_job_token index (job_id first).
-- tests/db/test_dispatch.c deletes a campaign with results, verifications
-- and confirmations and finds no evaluation left behind.
--
-- Locks in the order the coordinator takes them (a candidate, its jobs,
-- then their evaluations), so that a coordinator still running beside this
-- migration cannot deadlock with it.
LOCK TABLE candidates IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE evaluations IN ACCESS EXCLUSIVE MODE;

ALTER TABLE evaluations DROP CONSTRAINT evaluations_job_id_fkey;
ALTER TABLE evaluations DROP CONSTRAINT evaluations_candidate_id_fkey;

CREATE FUNCTION kf_forget_evaluations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM evaluations e USING gone g WHERE e.job_id = g.id;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_forget_evaluations AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION kf_forget_evaluations();
