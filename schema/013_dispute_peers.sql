-- 013_dispute_peers.sql -- a dispute quarantines only a worker that several
-- peers contradict.
--
-- A verification that disagrees with the original result tells that the
-- two workers disagree, not which of them is wrong. Before, both workers'
-- `disputes` rose, and either was quarantined once its disputes reached 3
-- and outnumbered its agreements. Two honest CPU workers timing on one
-- loaded host (CI, the test task_fault_fair_share) disputed each other's
-- results three times and both were quarantined: a healthy campaign was
-- left with no worker, and a fleet of two with one liar would have lost
-- the honest one too.
--
-- Now each worker keeps how often each other worker disputed it
-- (dispute_counts: {"peer": n}; a 33rd peer is not added), and the quarantine
-- rule of coordinator/verify.c also asks that at least two of its disputes
-- came from others than its most frequent accuser: the odd one out of
-- three is caught, while two workers that only contradict each other stay
-- in service (their disputed results never named best, `kfarm workers`
-- shows the disputes), and one liar plus one dispute from timing noise
-- cannot quarantine an honest worker.
ALTER TABLE workers ADD COLUMN dispute_counts jsonb NOT NULL DEFAULT '{}';

-- The disputes recorded before this migration, from the disputed
-- evaluations (original worker, verifier), one scan at migration time.
UPDATE workers w SET dispute_counts = p.counts
FROM (SELECT me, jsonb_object_agg(peer, n) AS counts
      FROM (SELECT d.me, d.peer, count(*) AS n
            FROM evaluations e
            CROSS JOIN LATERAL (VALUES (e.worker_id, e.confirmed_by_worker),
                                       (e.confirmed_by_worker, e.worker_id)) AS d(me, peer)
            WHERE e.confirmation = 'disputed' AND e.worker_id IS NOT NULL
              AND e.confirmed_by_worker IS NOT NULL AND e.worker_id <> e.confirmed_by_worker
            GROUP BY d.me, d.peer) c
      GROUP BY me) p
WHERE w.id = p.me;
