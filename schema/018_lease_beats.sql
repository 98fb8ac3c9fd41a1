-- 018_lease_beats.sql -- heartbeats outside the jobs row (issue 13).
--
-- A heartbeat extended its lease by rewriting the job's row: lease_deadline
-- is a column of the partial index jobs_leased, so every heartbeat of every
-- held job was a non-HOT update (a new row version, an entry in jobs_pkey
-- and jobs_leased, their WAL). One heartbeat per lease of 64 jobs cost 19
-- us of PostgreSQL CPU per job on the 2-core VM, 17% of the dispatch rate
-- (docs/benchmarks.md, 2026-12-07 (17:46-19:30 UTC)); a worker
-- heartbeats every held job every lease/3, so a job evaluated for longer
-- than that was written more often by its heartbeats than by its lease and
-- its result together.
--
-- The heartbeat now writes here: an UNLOGGED table (no WAL)
-- whose one index does not cover the deadline, and whose pages are kept
-- half empty, so an extension is a HOT update. A lease is alive while the
-- later of its row's deadline (set when it was leased) and its beat's
-- deadline (same fencing token) is ahead. The first heartbeat of a lease
-- still writes its row once (jobs.acked: the worker got the lease), so
-- that a lease's acknowledgement survives a crash: a candidate that kills
-- its worker and takes the database down with it (one host, out of
-- memory) is charged its attempts like any other.
--
-- PostgreSQL empties an unlogged table in crash recovery (and a standby
-- has none). The row job_id = 0 is the marker that the table survived:
-- when the reaper finds it missing it first gives every leased job a beat
-- of one lease length from now (the grace period: live workers heartbeat
-- again well within it) and then writes the marker back
-- (coordinator/queue.c, kf_queue_reap). The marker's deadline is the time
-- of the last sweep of stale beats (expired beats of leases that ended on
-- a path that does not delete its beat).
--
-- Every coordinator must run this version or later before this migration
-- is applied: an older one reaps by jobs.lease_deadline alone, and would
-- requeue every lease its workers heartbeat here (stop them all, migrate,
-- start the new ones). From this version on a coordinator refuses to start
-- on a schema newer than the one it carries.
CREATE UNLOGGED TABLE lease_beats (
    job_id        bigint PRIMARY KEY,   -- jobs.id; 0: the marker row
    fencing_token bigint NOT NULL,      -- the lease it extends (jobs.fencing_token)
    deadline      timestamptz NOT NULL  -- alive until then
) WITH (fillfactor = 50); -- room on each page for the next version of its rows (HOT)
INSERT INTO lease_beats (job_id, fencing_token, deadline) VALUES (0, 0, now());
