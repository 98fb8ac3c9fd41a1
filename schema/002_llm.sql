-- 002_llm.sql -- LLM-driven search: proposals, review, hints, reference documents.
--
-- A *proposal* is one request for a new candidate: a slot (campaign, round,
-- slot) of an LLM strategy round, recorded with its prompt *before* the model
-- is called, so a coordinator restarted mid-round re-issues only the slots
-- whose reply never arrived and never creates a slot twice. Human
-- submissions are proposals too (kind 'human', no round). Life:
--
--   requested --(llm service: reply)--> answered --(strategy: code found)--> done
--       |                                  |            \--(review on)--> review --approve--> approved --> done
--       \--(transport error)--> failed     \--(no code / duplicate)--> failed       \--reject--> rejected
--
-- `done` proposals point at the candidate made from them (the first one when
-- the code declares tunables: every variant is its own candidate).
-- Candidates get a normalized-source hash (comments and whitespace removed)
-- so that the same kernel written twice is never evaluated twice.

CREATE TABLE proposals (
    id                bigserial PRIMARY KEY,
    campaign_id       bigint NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    kind              text NOT NULL DEFAULT 'llm' CHECK (kind IN ('llm', 'human')),
    round             integer,                      -- NULL for human submissions
    slot              integer,
    lineage           integer NOT NULL DEFAULT 0,   -- parallel: which lineage
    parent_id         bigint REFERENCES candidates(id),
    state             text NOT NULL DEFAULT 'requested'
                      CHECK (state IN ('requested', 'answered', 'review', 'approved',
                                       'done', 'failed', 'rejected')),
    model             text,
    temperature       double precision,
    llm_seed          bigint,                       -- sampling seed sent (parallel lineages)
    system_prompt     text,
    prompt            text,
    reply             text,
    finish_reason     text,
    code              text,                         -- extracted source (review, approved, done)
    reason            text,                         -- failed/rejected: why
    prompt_tokens     integer,
    completion_tokens integer,
    attempts          integer NOT NULL DEFAULT 0,   -- HTTP attempts
    http_status       integer,
    latency_s         double precision,
    claimed_until     timestamptz,                  -- llm service lease on a requested row
    candidate_id      bigint REFERENCES candidates(id),
    reviewer_note     text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    answered_at       timestamptz,
    finished_at       timestamptz,
    UNIQUE (campaign_id, round, slot)
);
CREATE INDEX proposals_requested ON proposals(id) WHERE state = 'requested';
CREATE INDEX proposals_campaign ON proposals(campaign_id, state);

ALTER TABLE candidates ADD COLUMN norm_sha256 text;
ALTER TABLE candidates ADD COLUMN proposal_id bigint REFERENCES proposals(id);
-- Identical sources (after normalization) with identical defines: once per campaign.
CREATE UNIQUE INDEX candidates_norm ON candidates(campaign_id, norm_sha256, defines)
    WHERE norm_sha256 IS NOT NULL;

CREATE TABLE hints (
    id          bigserial PRIMARY KEY,
    campaign_id bigint NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    text        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Reference documents (hardware and compiler manuals) cut into chunks for
-- full-text retrieval into prompts.
CREATE TABLE doc_chunks (
    id          bigserial PRIMARY KEY,
    campaign_id bigint NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    document    text NOT NULL,
    chunk       integer NOT NULL,
    content     text NOT NULL,
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (campaign_id, document, chunk)
);
CREATE INDEX doc_chunks_tsv ON doc_chunks USING gin(tsv);
