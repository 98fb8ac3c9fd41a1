-- 017_delete_paths.sql -- a campaign's deletion in time linear in its size
-- (issue 13: a campaign of 1,000,000 evaluations).
--
-- Deleting a row that other rows may reference makes PostgreSQL check, for
-- each deleted row, that no row references it any more (`SELECT 1 FROM
-- fktable WHERE fkcol = $1`, per row). Four such columns had no index, so
-- each check read its whole table, once per deleted row: a campaign's
-- deletion grew with the square of its size (20,000 jobs with their
-- evaluations and 2,000 proposals: 13-19 s; 5,000: 1.3 s, of it 0.86 s in
-- the checks of evaluations.confirmed_by and 0.27 s in those of
-- candidates.proposal_id). The indexes hold only the rows that do
-- reference something (a check's `fkcol = $1` implies `fkcol IS NOT NULL`,
-- so it can use them): a confirmed result, a model's candidate, a proposal
-- with a parent or a candidate -- none of them written on the dispatch
-- path.
CREATE INDEX evaluations_confirmed_by ON evaluations (confirmed_by) WHERE confirmed_by IS NOT NULL;
CREATE INDEX candidates_proposal ON candidates (proposal_id) WHERE proposal_id IS NOT NULL;
CREATE INDEX proposals_candidate ON proposals (candidate_id) WHERE candidate_id IS NOT NULL;
CREATE INDEX proposals_parent ON proposals (parent_id) WHERE parent_id IS NOT NULL;

-- A campaign's counts deleted with it after a fold in flight (the tick's
-- kf_compact_counts, under advisory lock 7471006) has committed: the rows a
-- fold inserts for a campaign being deleted were invisible to the delete
-- trigger's statement and stayed behind. The trigger takes the fold's lock
-- (a fold only tries it, so the tick skips while a deletion holds it).
CREATE OR REPLACE FUNCTION kf_forget_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7471006);
    DELETE FROM campaign_counts c USING kf_old_campaigns o WHERE c.campaign_id = o.id;
    RETURN NULL;
END $$;
