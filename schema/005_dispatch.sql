-- 005_dispatch.sql -- dispatch at fleet scale (issue 13).
--
-- jobs.acked: the lease holder has acknowledged the lease (its first
--   heartbeat, or its result). A lease that expires unacknowledged most
--   likely never reached its worker (a reply lost under overload, a worker
--   that died before starting): it is requeued without consuming one of the
--   job's attempts, so lost replies can never add up to a false
--   "lost 3 workers" runtime_error against the candidate.
-- jobs.unacked_lost: such expiries of this job; at 5 the job ends as
--   infra_error (the farm's fault, never the candidate's).
ALTER TABLE jobs ADD COLUMN acked boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN unacked_lost int NOT NULL DEFAULT 0;

-- The verification bar (coordinator/verify.c): the best confirmed or pending
-- result of a campaign and target, read on every ok result. Few rows are
-- ever confirmed or pending, so this index keeps that read from scanning the
-- campaign's growing results (at 20,000 results it was the slowest part of
-- storing one).
CREATE INDEX evaluations_confirming ON evaluations(job_id)
    WHERE confirmation IN ('confirmed', 'pending');
