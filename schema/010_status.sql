-- 010_status.sql -- what `kfarm campaign status` reads, by index (issue 13:
-- status at 1,000,000 evaluations took 0.42-0.64 s against a 50 ms goal).
--
-- 1. A campaign's ok results by the upper end of their speedup interval.
-- The ties of a best are the results whose interval overlaps the best's:
-- those whose upper end reaches the best's lower end, and whose lower end
-- does not pass its upper end (coordinator/noise.h). evaluations_ok_campaign
-- (schema 009) was keyed by (campaign, target) only, so every tie lookup
-- read all of a target's ok results (91,000 entries, ~20 ms; four lookups
-- per status of a two-target campaign). Keyed by the upper end, descending,
-- the first condition is a range of the index and a lookup reads the ties
-- and little else; the overall best of a campaign with several targets
-- walks these entries from the top (coordinator/bests.c, a threshold walk)
-- instead of grouping all of them. Same columns, same predicate: no entry
-- more per result.
DROP INDEX evaluations_ok_campaign;
CREATE INDEX evaluations_ok_campaign ON evaluations
    (job_campaign_id, job_target, (COALESCE(speedup_hi, speedup)) DESC)
    INCLUDE (id, candidate_id, speedup, speedup_lo, speedup_hi, cv, confirmation)
    WHERE is_final AND verdict = 'ok' AND speedup > 0 AND job_purpose = 'eval';

-- 2. The queued jobs of a campaign's target (the "no live worker serves
-- target T: N jobs" blocker, coordinator/health.c). jobs_queued (schema
-- 001: target, id) no longer serves the lease (jobs_queued_next, schema
-- 008) and made this count fetch every queued job of the target, of every
-- campaign, from the heap. Entries only for queued jobs, as before.
DROP INDEX jobs_queued;
CREATE INDEX jobs_queued ON jobs (campaign_id, target) WHERE state = 'queued';

-- 3. A campaign's latest answered model call (health.c: "the model gave no
-- reply"): it sorted all of the campaign's proposals (18,200: 29 ms).
CREATE INDEX proposals_latest ON proposals
    (campaign_id, (COALESCE(answered_at, finished_at, created_at)) DESC, id DESC)
    WHERE kind = 'llm' AND state <> 'requested';
