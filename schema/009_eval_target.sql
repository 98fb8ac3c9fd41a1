-- 009_eval_target.sql -- an evaluation carries its job's campaign, target
-- and purpose (issue 13: the bests at 1,000,000 evaluations).
--
-- The bests of a campaign on a target (coordinator/bests.c, verify.c, the
-- export's campaign list) walked evaluations_ok_speedup -- every campaign's
-- final ok results by speedup -- from the top, probing each result's job
-- for its campaign and target. Where the campaign's other target (or
-- another campaign) is faster, every one of those results lies above the
-- first that counts: ~90,000 probes per lookup on the synthetic campaign of
-- tests/browser/synth.sql, four lookups per export, 3.5 s of an export's
-- statement time. With the three columns on the row, one index per
-- (campaign, target) reads from the first that counts.
--
-- The columns never change (a job's campaign, target and purpose are fixed
-- when it is made). The coordinator writes them with each evaluation; the
-- trigger fills them for any other writer (tools, tests, older code), from
-- the job, only when one is missing (WHEN: no function call otherwise).
--
-- Their names (job_campaign_id, job_target, job_purpose) appear in no other
-- table, so no query that joins evaluations with jobs, candidates or
-- campaign_counts and names campaign_id, target or purpose unqualified --
-- ours, an operator's, a dashboard test's -- becomes ambiguous.
ALTER TABLE evaluations ADD COLUMN job_campaign_id bigint, ADD COLUMN job_target text,
    ADD COLUMN job_purpose text;
UPDATE evaluations e SET job_campaign_id = j.campaign_id, job_target = j.target, job_purpose = j.purpose
FROM jobs j WHERE j.id = e.job_id;

CREATE FUNCTION kf_evaluation_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT j.campaign_id, j.target, j.purpose INTO NEW.job_campaign_id, NEW.job_target, NEW.job_purpose
    FROM jobs j WHERE j.id = NEW.job_id;
    RETURN NEW;
END
$$;
CREATE TRIGGER evaluations_job BEFORE INSERT ON evaluations FOR EACH ROW
    WHEN (NEW.job_campaign_id IS NULL OR NEW.job_target IS NULL OR NEW.job_purpose IS NULL)
    EXECUTE FUNCTION kf_evaluation_job();

-- The best of a (campaign, target) from the top; and the columns of the
-- overall best and of a best's ties, for an index-only scan of one
-- campaign (or one campaign's target: 70 ms at 1,000,000 evaluations where
-- the walk down evaluations_ok_hi took 1.1 s). They replace three indexes
-- of every campaign at once (evaluations_ok_speedup, evaluations_ok_hi,
-- evaluations_ok_cover): an ok result now costs one index entry fewer.
CREATE INDEX evaluations_ok_target ON evaluations (job_campaign_id, job_target, speedup DESC, candidate_id)
    WHERE is_final AND verdict = 'ok' AND speedup > 0 AND job_purpose = 'eval';
CREATE INDEX evaluations_ok_campaign ON evaluations (job_campaign_id, job_target)
    INCLUDE (id, candidate_id, speedup, speedup_lo, speedup_hi, cv, confirmation)
    WHERE is_final AND verdict = 'ok' AND speedup > 0 AND job_purpose = 'eval';
DROP INDEX evaluations_ok_speedup;
DROP INDEX evaluations_ok_hi;
DROP INDEX evaluations_ok_cover;
