-- tests/browser/synth.sql -- a synthetic campaign of :n candidates for the
-- dashboard's browser test and tools/bench/bench_dashboard.sh (no workers, no
-- model: rows as the coordinator would write them). psql -v n=100000 -v
-- name=synth -f synth.sql. Two targets; about 80% of attempts fail with a
-- spread of verdicts; one in ten jobs was retried; tunables BLOCK and UNROLL;
-- rounds of 1000 candidates with an LLM proposal each for every 50th
-- candidate. Deterministic (no random()): the test recomputes its numbers
-- from the database. Candidate :n/2 carries hostile markup in its source,
-- detail, compile log and prompt, and the failed proposal after it in its
-- reply.
\set ON_ERROR_STOP 1
BEGIN;
INSERT INTO tasks (name, spec, spec_text, sha256)
SELECT 'synth_task', '{"definition": "y = x * 2 (synthetic)"}', '{}', 'synth-' || :'name'
ON CONFLICT (sha256) DO NOTHING;
INSERT INTO campaigns (name, task_id, strategy, targets, max_candidates, state, created_at, started_at)
SELECT :'name', id, 'loop', ARRAY['cpu', 'sm_90'], :n, 'running', now() - interval '8 hours 1 minute', now() - interval '8 hours'
FROM tasks WHERE sha256 = 'synth-' || :'name';
INSERT INTO workers (id, hostname, backend, classes, devices, last_seen, quarantined, infra_errors, jobs_done)
VALUES ('synth-w1', 'host-a', 'cpu', '{cpu}', '[{"name": "Synthetic CPU"}]', now(), false, 0, 0),
       ('synth-w2', 'host-b', 'cuda', '{sm_90}', '[{"name": "Synthetic H200", "arch": "sm_90"}]', now(), false, 0, 0),
       ('synth-w3', 'host-c', 'cuda', '{sm_90}', '[{"name": "Synthetic H200", "arch": "sm_90"}]', now() - interval '2 hours', true, 3, 0)
ON CONFLICT (id) DO NOTHING;
-- synth-w1's verifications were disputed by one peer (schema 013)
UPDATE workers SET agreements = 1, disputes = 2, dispute_counts = '{"synth-w2": 2}' WHERE id = 'synth-w1';
-- proposals: one per 25 candidate slots; every other one failed (no code)
INSERT INTO proposals (campaign_id, kind, round, slot, state, model, temperature, finish_reason, reason,
                       prompt_tokens, completion_tokens, attempts, latency_s, prompt, reply, created_at)
SELECT c.id, 'llm', g / 1000, g, CASE WHEN g % 50 = 0 THEN 'done' ELSE 'failed' END, 'synthetic-model', 0.7,
       CASE WHEN g % 50 = 0 THEN 'stop' ELSE 'length' END,
       CASE WHEN g % 50 = 0 THEN NULL ELSE 'reply cut off (finish_reason length), no code block' END,
       1200, 800, 1, 2.5,
       CASE WHEN g = (:n / 2 / 50) * 50 THEN 'Prompt <img src=x onerror="window.KF_PWNED=1"> <b>bold</b> &amp; </script>'
            ELSE 'Make the kernel faster (round ' || g / 1000 || ').' END,
       CASE WHEN g = (:n / 2 / 50) * 50 + 25 THEN 'Reply <script>window.KF_PWNED=2</script> <i>cut'
            ELSE 'Here is a faster kernel.' END, now() - interval '8 hours' + g * interval '250 ms'
FROM campaigns c, generate_series(0, :n - 1, 25) g WHERE c.name = :'name';
INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer, created_at, proposal_id)
SELECT c.id,
       CASE WHEN g = :n / 2 THEN E'// <script>window.KF_PWNED=1</script> <b>not bold</b>\n__global__ void k(float *y, const float *x) {\n  y[0] = x[0] * 2; // & < >\n}\n'
            ELSE E'#include <stdint.h>\n// candidate ' || g || E'\nvoid kernel(float *y, const float *x, int n) {\n  for (int i = 0; i < n; i += UNROLL)\n    y[i] = x[i] * ' || (g % 97) || E';\n}\n' END,
       'sha-' || (CASE WHEN g = :n / 2 THEN -1 ELSE g END),
       jsonb_build_object('BLOCK', (32 << (g % 4))::text, 'UNROLL', (1 + g % 8)::text),
       NULL, CASE WHEN g % 50 = 0 THEN 'llm' ELSE 'tune' END,
       now() - interval '8 hours' + g * interval '250 ms',
       CASE WHEN g % 50 = 0 THEN (SELECT p.id FROM proposals p WHERE p.campaign_id = c.id AND p.round = g / 1000 AND p.slot = g) END
FROM campaigns c, generate_series(0, :n - 1) g WHERE c.name = :'name';
-- lineage: each candidate's parent is the one 97 before it
UPDATE candidates k SET parent_id = p.id FROM candidates p
WHERE k.campaign_id = (SELECT id FROM campaigns WHERE name = :'name') AND p.campaign_id = k.campaign_id
  AND p.id = k.id - 97;
INSERT INTO jobs (candidate_id, campaign_id, target, state, attempts, worker_id, created_at, finished_at)
SELECT k.id, k.campaign_id, t, CASE WHEN k.id % 1000 = 999 THEN 'queued' ELSE 'done' END,
       CASE WHEN k.id % 10 = 3 THEN 2 ELSE 1 END,
       CASE WHEN t = 'cpu' THEN 'synth-w1' ELSE 'synth-w2' END, k.created_at, k.created_at + interval '2 s'
FROM candidates k, unnest(ARRAY['cpu', 'sm_90']) t
WHERE k.campaign_id = (SELECT id FROM campaigns WHERE name = :'name');
-- the retried first attempts (infra_error, not final)
INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, detail, is_final, created_at)
SELECT j.id, j.candidate_id, 1, 'synth-w3', -j.id, 'infra_error', 'worker lost the device', false, j.created_at + interval '1 s'
FROM jobs j WHERE j.campaign_id = (SELECT id FROM campaigns WHERE name = :'name') AND j.attempts = 2;
-- final verdicts: ~20% ok, the rest failures of several kinds
INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, detail, metrics,
                         candidate_us, baseline_us, speedup, compile_log, is_final, created_at)
SELECT j.id, j.candidate_id, j.attempts, j.worker_id, j.id,
       v.verdict,
       CASE WHEN k.sha256 = 'sha--1' THEN 'hostile <img src=x onerror="window.KF_PWNED=1"> detail'
            WHEN v.verdict = 'ok' THEN NULL
            WHEN v.verdict = 'compile_error' THEN 'error: use of undeclared identifier ''UNROLL'''
            WHEN v.verdict = 'incorrect' THEN 'output 0 differs at index ' || (j.candidate_id % 512)
            ELSE v.verdict || ' after ' || (j.candidate_id % 7) || ' s' END,
       CASE WHEN v.verdict = 'ok' THEN jsonb_build_object('timing', jsonb_build_object('flags',
              CASE WHEN j.candidate_id % 3 = 0 THEN '["noisy"]'::jsonb ELSE '[]'::jsonb END,
              'shapes', jsonb_build_array(
                jsonb_build_object('sizes', '{"n": 4096}'::jsonb, 'calls', 200, 'speedup', s.sp * 0.97,
                  'baseline', jsonb_build_object('median_us', 100, 'min_us', 98, 'cv', 0.02),
                  'candidate', jsonb_build_object('median_us', 100 / (s.sp * 0.97), 'min_us', 95 / (s.sp * 0.97),
                                                  'cv', 0.01 + (j.candidate_id % 40) / 100.0),
                  'gbs', 300 * s.sp, 'floor_us', 10),
                jsonb_build_object('sizes', '{"n": 1048576}'::jsonb, 'calls', 40, 'speedup', s.sp * 1.03,
                  'baseline', jsonb_build_object('median_us', 900, 'min_us', 880, 'cv', 0.03),
                  'candidate', jsonb_build_object('median_us', 900 / (s.sp * 1.03), 'min_us', 870 / (s.sp * 1.03),
                                                  'cv', 0.02),
                  'gbs', 800 * s.sp, 'floor_us', 80))),
              'compile', jsonb_build_object('candidate', jsonb_build_object('ptxas',
                jsonb_build_array(jsonb_build_object('name', 'k', 'registers', 32 + j.candidate_id % 32,
                                  'smem_bytes', 4096, 'spill_stores', 0, 'spill_loads', 0)))))
       END,
       CASE WHEN v.verdict = 'ok' THEN 300 / s.sp END, CASE WHEN v.verdict = 'ok' THEN 300 END,
       CASE WHEN v.verdict = 'ok' THEN s.sp END,
       CASE WHEN v.verdict = 'compile_error' THEN 'cc: error <b>UNROLL</b> undeclared' END,
       true, j.created_at + interval '2 s'
FROM jobs j JOIN candidates k ON k.id = j.candidate_id
     CROSS JOIN (SELECT min(id) c0 FROM candidates WHERE campaign_id = (SELECT id FROM campaigns WHERE name = :'name')) b,
     LATERAL (SELECT CASE WHEN j.candidate_id % 5 = 0 THEN 'ok'
                          WHEN j.candidate_id % 5 = 1 THEN 'compile_error'
                          WHEN j.candidate_id % 5 = 2 THEN 'incorrect'
                          WHEN j.candidate_id % 10 = 3 THEN 'runtime_error'
                          ELSE 'timeout' END AS verdict) v,
     LATERAL (SELECT 0.5 + ((j.candidate_id * 7919) % 1000) / 1000.0 * (1 + (j.candidate_id - b.c0)::float8 / :n)
                     * CASE WHEN j.target = 'cpu' THEN 1 ELSE 2 END AS sp) s
WHERE j.campaign_id = (SELECT id FROM campaigns WHERE name = :'name') AND j.state = 'done';
COMMIT;
\ir ../recount.sql
