-- 011_proposal_counts.sql -- a campaign's model calls without reading them
-- (issue 13: `kfarm campaign status` <= 50 ms).
--
-- The status's progress line (coordinator/cli/campaign_llm.c) and the
-- strategy's token budget (coordinator/strategy_llm.c, every tick) summed a
-- campaign's proposals: counts by state and the prompt and completion
-- tokens. At 18,200 proposals that read took 16 ms of the status's ~60 ms
-- of statements, and grows with the campaign.
--
-- Now campaign_counts (schema 006) also holds, per campaign and proposal
-- state, how many proposals are in that state and the tokens they used
-- (what = 'proposal'). Unlike candidates and evaluations, a proposal
-- changes state (requested -> answered -> review -> done ...), so a
-- statement trigger adds the difference a statement made: the new rows
-- counted +1 with their tokens, the old rows -1 with theirs, grouped by
-- campaign and state, groups that net to zero dropped (a lease renewal or
-- an attempt count changes nothing counted and adds no row). Proposals are
-- written by the LLM service, the strategy and review, a handful per
-- model call: never on the dispatch path. Readers sum a campaign's rows as
-- for the other counts; kf_compact_counts folds them, now by state too, and
-- drops groups that net to zero.
--
-- The new columns' names are used by no other table (as in schema 009), so
-- a query joining campaign_counts with proposals, jobs or campaigns never
-- finds them ambiguous, nor binds an outer unqualified `state` to them.
-- Locks in the order the coordinator takes them (a proposal written, then
-- its counts), so that a coordinator still running beside this migration
-- cannot deadlock with it.
LOCK TABLE proposals IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE campaign_counts IN ACCESS EXCLUSIVE MODE;
ALTER TABLE campaign_counts
    ADD COLUMN proposal_state             text   NOT NULL DEFAULT '',  -- proposal: its state
    ADD COLUMN proposal_prompt_tokens     bigint NOT NULL DEFAULT 0,   -- proposal
    ADD COLUMN proposal_completion_tokens bigint NOT NULL DEFAULT 0;   -- proposal
ALTER TABLE campaign_counts DROP CONSTRAINT campaign_counts_what_check;
ALTER TABLE campaign_counts ADD CONSTRAINT campaign_counts_what_check
    CHECK (what IN ('candidate', 'evaluation', 'proposal'));

-- The difference one statement made to its campaigns' proposals. A
-- proposal deleted with its campaign (ON DELETE CASCADE) adds nothing: its
-- campaign's counts are deleted with it (kf_forget_counts) and must not
-- come back as negative rows of a campaign that no longer exists.
CREATE FUNCTION kf_count_proposals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO campaign_counts (campaign_id, what, proposal_state, n, proposal_prompt_tokens,
                                     proposal_completion_tokens)
        SELECT p.campaign_id, 'proposal', p.state, count(*),
               COALESCE(sum(p.prompt_tokens), 0), COALESCE(sum(p.completion_tokens), 0)
        FROM kf_new_proposals p GROUP BY p.campaign_id, p.state;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO campaign_counts (campaign_id, what, proposal_state, n, proposal_prompt_tokens,
                                     proposal_completion_tokens)
        SELECT d.campaign_id, 'proposal', d.state, sum(d.n), sum(d.pt), sum(d.ct)
        FROM (SELECT campaign_id, state, 1 n, COALESCE(prompt_tokens, 0) pt,
                     COALESCE(completion_tokens, 0) ct FROM kf_new_proposals
              UNION ALL
              SELECT campaign_id, state, -1, -COALESCE(prompt_tokens, 0),
                     -COALESCE(completion_tokens, 0) FROM kf_old_proposals) d
        GROUP BY d.campaign_id, d.state
        HAVING sum(d.n) <> 0 OR sum(d.pt) <> 0 OR sum(d.ct) <> 0;
    ELSE
        INSERT INTO campaign_counts (campaign_id, what, proposal_state, n, proposal_prompt_tokens,
                                     proposal_completion_tokens)
        SELECT p.campaign_id, 'proposal', p.state, -count(*),
               -COALESCE(sum(p.prompt_tokens), 0), -COALESCE(sum(p.completion_tokens), 0)
        FROM kf_old_proposals p
        WHERE EXISTS (SELECT 1 FROM campaigns c WHERE c.id = p.campaign_id)
        GROUP BY p.campaign_id, p.state;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER proposals_count_insert AFTER INSERT ON proposals
    REFERENCING NEW TABLE AS kf_new_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION kf_count_proposals();
CREATE TRIGGER proposals_count_update AFTER UPDATE ON proposals
    REFERENCING OLD TABLE AS kf_old_proposals NEW TABLE AS kf_new_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION kf_count_proposals();
CREATE TRIGGER proposals_count_delete AFTER DELETE ON proposals
    REFERENCING OLD TABLE AS kf_old_proposals
    FOR EACH STATEMENT EXECUTE FUNCTION kf_count_proposals();

-- Fold as before (schema 006), by state too, summing the tokens; a group
-- that nets to zero is dropped.
CREATE OR REPLACE FUNCTION kf_compact_counts() RETURNS bigint LANGUAGE sql AS $$
    WITH d AS (DELETE FROM campaign_counts WHERE pg_try_advisory_xact_lock(7471006)
                 AND campaign_id IN (SELECT campaign_id FROM campaign_counts
                                     GROUP BY campaign_id HAVING count(*) > 64)
               RETURNING *),
         i AS (INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, proposer,
                                            proposal_state, n, proposal_prompt_tokens,
                                            proposal_completion_tokens)
               SELECT campaign_id, what, target, purpose, verdict, is_final, proposer, proposal_state,
                      sum(n), sum(proposal_prompt_tokens), sum(proposal_completion_tokens)
               FROM d GROUP BY campaign_id, what, target, purpose, verdict, is_final, proposer, proposal_state
               HAVING sum(n) <> 0 OR sum(proposal_prompt_tokens) <> 0 OR sum(proposal_completion_tokens) <> 0
               RETURNING 1)
    SELECT count(*) FROM d
$$;

-- What exists already.
INSERT INTO campaign_counts (campaign_id, what, proposal_state, n, proposal_prompt_tokens,
                             proposal_completion_tokens)
SELECT campaign_id, 'proposal', state, count(*),
       COALESCE(sum(prompt_tokens), 0), COALESCE(sum(completion_tokens), 0)
FROM proposals GROUP BY campaign_id, state;
