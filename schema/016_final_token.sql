-- 016_final_token.sql -- a final evaluation's uniqueness by one index, not
-- two (issue 13: dispatch at fleet scale).
--
-- Every evaluation entered two unique indexes: evaluations_one_final
-- (job_id) WHERE is_final and evaluations_job_token (job_id,
-- fencing_token). For a final one the second adds nothing: its job_id is
-- unique among the finals, so is its (job_id, fencing_token). And no final
-- and non-final evaluation share a (job_id, fencing_token): every path that
-- stores an evaluation moves the job off that lease in the same
-- transaction (done, or queued again), and the next lease draws a new
-- token. evaluations_job_token now holds the non-final ones only (retries,
-- the reaper's lost leases): one index entry and one uniqueness check fewer
-- per stored result, which is final on the dispatch path.
--
-- A lookup by (job_id, fencing_token) reads both indexes
-- (coordinator/queue.c: the finals by evaluations_one_final, the others by
-- this one); so does deleting a job's evaluations (the trigger below,
-- its DELETEs planned at each call for the rows it has: see 015).
DROP INDEX evaluations_job_token;
CREATE UNIQUE INDEX evaluations_job_token ON evaluations (job_id, fencing_token) WHERE NOT is_final;

CREATE OR REPLACE FUNCTION kf_forget_evaluations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM gone LIMIT 1;
    IF FOUND THEN
        EXECUTE 'DELETE FROM evaluations e USING gone g WHERE e.job_id = g.id AND e.is_final';
        EXECUTE 'DELETE FROM evaluations e USING gone g WHERE e.job_id = g.id AND NOT e.is_final';
    END IF;
    RETURN NULL;
END $$;
