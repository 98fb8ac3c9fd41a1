-- 007_cover.sql -- the columns the overall best reads, in one index
-- (issue 13: the dashboard export and `kfarm best` at 1,000,000 evaluations).
--
-- The overall best (coordinator/bests.c, kf_bests: ok on every target,
-- geometric mean of the speedups) groups every final ok result of a
-- campaign. Read through evaluations_ok_hi it fetched each of them from the
-- heap, where they lie scattered among the others (wide rows: metrics):
-- 2.97 s at 1,000,000 evaluations, 182,000 of them final ok. With the
-- columns it reads in the index, the same query is an index-only scan:
-- 0.59 s. Only final ok results with a speedup are in it (a fifth of the
-- rows at that scale), so the dispatch path pays one more index entry per
-- ok result only.
CREATE INDEX evaluations_ok_cover ON evaluations (job_id)
    INCLUDE (speedup, speedup_lo, speedup_hi, cv, confirmation)
    WHERE is_final AND verdict = 'ok' AND speedup > 0;
