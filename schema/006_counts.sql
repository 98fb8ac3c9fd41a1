-- 006_counts.sql -- a campaign's status without counting its history
-- (issue 13: `kfarm campaign status` <= 50 ms at 1,000,000 evaluations).
--
-- campaign_counts: how many candidates (by proposer) and evaluations (by
--   target, purpose, verdict, final or not) a campaign has, kept as rows of
--   counts that only ever get added: every statement that inserts
--   evaluations adds one row per group it touched in the same statement
--   (coordinator/queue.c: the result, the group commit -- a handful of rows
--   for 200 results -- and the reaper; a statement trigger over the
--   inserted rows cost 17% of the dispatch rate, since it copies every
--   inserted row and joins it to its job), every INSERT into candidates
--   one row per proposer (a statement trigger: candidates are not on the
--   dispatch path), and the coordinator's tick folds a campaign's rows into
--   one per group (kf_compact_counts) once it has more than 64. A reader
--   sums a campaign's rows: a few dozen, whatever the campaign's size.
--   Adding rows instead of updating one counter keeps concurrent results
--   (threads and coordinators) from queueing on a counter row's lock.
--   Evaluations are never updated in these columns nor deleted but with
--   their campaign, so the counts stay exact as long as every INSERT into
--   evaluations adds its counts (queue.c has the only three). No foreign key: its share
--   lock on the campaign row would make results wait for a strategy that
--   holds the campaign row (SELECT ... FOR UPDATE); rows of a deleted
--   campaign are deleted with it (trigger below).
CREATE TABLE campaign_counts (
    campaign_id bigint NOT NULL,
    what        text NOT NULL CHECK (what IN ('candidate', 'evaluation')),
    target      text NOT NULL DEFAULT '',     -- evaluation: its job's target
    purpose     text NOT NULL DEFAULT '',     -- evaluation: its job's purpose
    verdict     text NOT NULL DEFAULT '',     -- evaluation
    is_final    boolean NOT NULL DEFAULT false, -- evaluation
    proposer    text NOT NULL DEFAULT '',     -- candidate
    n           bigint NOT NULL
);
CREATE INDEX campaign_counts_campaign ON campaign_counts(campaign_id);

CREATE FUNCTION kf_count_candidates() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_counts (campaign_id, what, proposer, n)
    SELECT k.campaign_id, 'candidate', k.proposer, count(*)
    FROM kf_new_candidates k GROUP BY k.campaign_id, k.proposer;
    RETURN NULL;
END $$;
CREATE TRIGGER candidates_count AFTER INSERT ON candidates
    REFERENCING NEW TABLE AS kf_new_candidates
    FOR EACH STATEMENT EXECUTE FUNCTION kf_count_candidates();

CREATE FUNCTION kf_forget_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM campaign_counts c USING kf_old_campaigns o WHERE c.campaign_id = o.id;
    RETURN NULL;
END $$;
CREATE TRIGGER campaigns_forget_counts AFTER DELETE ON campaigns
    REFERENCING OLD TABLE AS kf_old_campaigns
    FOR EACH STATEMENT EXECUTE FUNCTION kf_forget_counts();

-- Fold the rows of every campaign that has more than 64 into one per group;
-- returns the rows folded. One caller at a time (a transaction-scoped
-- advisory lock; another coordinator's tick returns 0 at once). Sums are
-- kept exactly: a row added while this runs is not deleted by it.
CREATE FUNCTION kf_compact_counts() RETURNS bigint LANGUAGE sql AS $$
    WITH d AS (DELETE FROM campaign_counts WHERE pg_try_advisory_xact_lock(7471006)
                 AND campaign_id IN (SELECT campaign_id FROM campaign_counts
                                     GROUP BY campaign_id HAVING count(*) > 64)
               RETURNING *),
         i AS (INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, proposer, n)
               SELECT campaign_id, what, target, purpose, verdict, is_final, proposer, sum(n)
               FROM d GROUP BY campaign_id, what, target, purpose, verdict, is_final, proposer
               RETURNING 1)
    SELECT count(*) FROM d
$$;

-- What exists already, folded.
INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n)
SELECT j.campaign_id, 'evaluation', j.target, j.purpose, e.verdict, e.is_final, count(*)
FROM evaluations e JOIN jobs j ON j.id = e.job_id
GROUP BY j.campaign_id, j.target, j.purpose, e.verdict, e.is_final;
INSERT INTO campaign_counts (campaign_id, what, proposer, n)
SELECT campaign_id, 'candidate', proposer, count(*) FROM candidates GROUP BY campaign_id, proposer;

-- The bests (coordinator/bests.c) reach a campaign's fastest final ok
-- results from the top of these instead of reading them all: by speedup
-- for the best, by the upper end of the noise interval for its ties.
CREATE INDEX evaluations_ok_speedup ON evaluations (speedup DESC, candidate_id)
    WHERE is_final AND verdict = 'ok' AND speedup > 0;
CREATE INDEX evaluations_ok_hi ON evaluations ((COALESCE(speedup_hi, speedup)) DESC)
    WHERE is_final AND verdict = 'ok' AND speedup > 0;
