-- 018_lease_beats.sql -- heartbeats outside the jobs row (issue 13).
--
-- A heartbeat extended its lease by rewriting the job's row: lease_deadline
-- is a column of the partial index jobs_leased, so every heartbeat of every
-- held job was a non-HOT update (a new row version, an entry in jobs_pkey
-- and jobs_leased, their WAL, a flush). One heartbeat per lease of 64 jobs
-- cost 19 us of PostgreSQL CPU per job on the 2-core VM, 17% of the
-- dispatch rate (docs/benchmarks.md, 2026-12-07 evening); a worker
-- heartbeats every held job every lease/3, so a job evaluated for longer
-- than that was written more often by its heartbeats than by its lease and
-- its result together.
--
-- The heartbeat now writes only here: an UNLOGGED table (no WAL, no flush)
-- whose one index does not cover the deadline, and whose pages are kept
-- half empty, so an extension is a HOT update. A lease is alive while the
-- later of its row's deadline (set when it was leased) and its beat's
-- deadline (same fencing token) is ahead; `acked` (the worker got the
-- lease: its first heartbeat) lives here too.
--
-- PostgreSQL empties an unlogged table in crash recovery (and a standby
-- has none). The row job_id = 0 is the marker that the table survived:
-- when the reaper finds it missing it first gives every leased job a beat
-- of one lease length from now (the grace period: live workers heartbeat
-- again well within it) and then writes the marker back; a beat rebuilt so
-- is not acknowledged, so a lease lost after a database crash never counts
-- as the candidate's attempt (coordinator/queue.c, kf_queue_reap). The
-- marker's deadline is the time of the last sweep of stale beats (leases
-- that ended on a path that does not delete its beat).
CREATE UNLOGGED TABLE lease_beats (
    job_id        bigint PRIMARY KEY,   -- jobs.id; 0: the marker row
    fencing_token bigint NOT NULL,      -- the lease it extends (jobs.fencing_token)
    deadline      timestamptz NOT NULL, -- alive until then
    acked         boolean NOT NULL DEFAULT true -- the worker heartbeat this lease
) WITH (fillfactor = 50); -- room on each page for the next version of its rows (HOT)
INSERT INTO lease_beats (job_id, fencing_token, deadline, acked) VALUES (0, 0, now(), false);
