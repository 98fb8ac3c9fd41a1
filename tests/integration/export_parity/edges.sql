-- Edge rows for the export parity test, on top of tests/browser/synth.sql
-- (campaign :'name'): values whose JSON is easy to get wrong by hand.
\set ON_ERROR_STOP 1
WITH c AS (SELECT id FROM campaigns WHERE name = :'name'),
     k AS (SELECT min(id) k0 FROM candidates WHERE campaign_id = (SELECT id FROM c))
-- details: control characters, quotes, backslashes, a JavaScript quote,
-- multi-byte characters past the chunk's 120-character cut, a lone "NaN"
UPDATE evaluations e SET detail = CASE e.candidate_id - k.k0
    WHEN 2 THEN E'tab\there, "quoted", back\\slash, it''s, bell \x07 unit \x1f\r\nnext'
    WHEN 7 THEN repeat('é→𝄞', 50) || ' tail'
    WHEN 12 THEN 'NaN'
    WHEN 17 THEN E'</script><script>alert(1)</script>\u2028\u2029'
    ELSE detail END
FROM k WHERE e.candidate_id - k.k0 IN (2, 7, 12, 17);
WITH k AS (SELECT min(id) k0 FROM candidates WHERE campaign_id = (SELECT id FROM campaigns WHERE name = :'name'))
UPDATE evaluations e SET speedup = CASE e.candidate_id - k.k0 WHEN 0 THEN 'NaN'::float8 WHEN 5 THEN 'Infinity'::float8
                                        WHEN 10 THEN '-Infinity'::float8 WHEN 15 THEN 1e-300 WHEN 20 THEN 123456789.123456789
                                        WHEN 25 THEN 2.00005 WHEN 30 THEN -0.00004 ELSE speedup END,
                         candidate_us = CASE e.candidate_id - k.k0 WHEN 25 THEN 0.00005 WHEN 30 THEN -1.23455 ELSE candidate_us END,
                         metrics = CASE e.candidate_id - k.k0
                            WHEN 35 THEN jsonb_set(COALESCE(metrics, '{}'), '{timing}', '{"flags": {"noisy": true}, "shapes": []}')
                            WHEN 40 THEN jsonb_set(COALESCE(metrics, '{}'), '{timing}', '{"flags": "noisy", "shapes": [{"speedup": 3, "candidate": {"cv": "0.25"}}]}')
                            WHEN 45 THEN '{"timing": {"shapes": "not a list"}}'
                            ELSE metrics END
FROM k WHERE e.is_final AND e.candidate_id - k.k0 IN (0, 5, 10, 15, 20, 25, 30, 35, 40, 45);
-- a verification job and its evaluation (not counted in the chunk's results)
INSERT INTO jobs (candidate_id, campaign_id, target, state, attempts, worker_id, purpose, verifies, created_at, finished_at)
SELECT j.candidate_id, j.campaign_id, j.target, 'done', 1, 'synth-w2', 'verify', e.id, now(), now()
FROM jobs j JOIN evaluations e ON e.job_id = j.id AND e.is_final AND e.verdict = 'ok'
WHERE j.campaign_id = (SELECT id FROM campaigns WHERE name = :'name') ORDER BY j.id LIMIT 3;
INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, speedup, is_final, confirmation, created_at)
SELECT id, candidate_id, 1, 'synth-w2', id, 'ok', 1.5, true, 'confirmed', now() FROM jobs WHERE purpose = 'verify';
-- a candidate with 600 children (the candidate file lists its first 500),
-- and one whose parent lies in another chunk
WITH c AS (SELECT id FROM campaigns WHERE name = :'name'), p AS (SELECT min(id) + 3 pid FROM candidates WHERE campaign_id = (SELECT id FROM c))
INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer, created_at)
SELECT c.id, 'child ' || g, 'sha-child-' || g, '{}', p.pid, 'tune', now() - interval '1 day' FROM c, p, generate_series(1, 600) g;
UPDATE candidates SET parent_id = (SELECT min(id) FROM candidates), note = E'a note with \\ and "'
WHERE id = (SELECT max(id) FROM candidates);
-- a candidate with no jobs at all
INSERT INTO candidates (campaign_id, source, sha256, defines, proposer, created_at)
SELECT id, E'// \u00e9\n', 'sha-nojobs', '{"A": "1"}', 'human', created_at + interval '0.05 s' FROM campaigns WHERE name = :'name';
