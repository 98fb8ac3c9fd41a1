-- 004_operator.sql -- what an operator needs to trust a campaign at a glance.
--
-- campaigns.pause_reason: set when the farm itself paused a campaign (the
--   task's own reference or baseline failed on a worker: a task fault, not
--   the worker's); cleared by `kfarm campaign start`.
-- campaigns.share: the campaign's share of the fleet when several campaigns
--   run at once (equal shares by default; see queue.c, fair scheduling).
-- workers.quarantine_reason: why the worker was quarantined (shown by
--   `kfarm workers` and sent to the worker with every refused lease).
-- workers.clock_skew_ms: the worker's wall clock minus the coordinator's,
--   from the timestamp of its last authenticated message (ms).
-- proposals.warning: an answered proposal whose reply is suspect (the
--   server counted far fewer prompt tokens than the prompt holds: it
--   truncated the prompt).
ALTER TABLE campaigns ADD COLUMN pause_reason text;
ALTER TABLE campaigns ADD COLUMN share double precision NOT NULL DEFAULT 1 CHECK (share > 0);
ALTER TABLE workers ADD COLUMN quarantine_reason text;
ALTER TABLE workers ADD COLUMN clock_skew_ms bigint;
ALTER TABLE proposals ADD COLUMN warning text;

-- Timing noise of every ok result (coordinator/noise.h): the CV of its
-- per-call times and a conservative 95% interval of its speedup. Results
-- whose intervals overlap are ties.
ALTER TABLE evaluations ADD COLUMN cv double precision;
ALTER TABLE evaluations ADD COLUMN speedup_lo double precision;
ALTER TABLE evaluations ADD COLUMN speedup_hi double precision;

-- Fair-share leasing (queue.c) probes running campaigns one by one for
-- their oldest queued job this worker may take (verification jobs first,
-- schema/003_trust.sql): an index per campaign over
-- queued jobs only, and one over worker-blamed infra_error attempts (the
-- "not again on the worker that failed it" rule), keep a lease cheap while
-- a long queue drains (50,000 queued jobs: 3 ms -> 0.35 ms per lease probe).
CREATE INDEX jobs_queued_campaign ON jobs(campaign_id, (purpose <> 'verify'), id) WHERE state = 'queued';
CREATE INDEX evaluations_infra ON evaluations(worker_id, job_id)
    WHERE verdict = 'infra_error' AND reported;
