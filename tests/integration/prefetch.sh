#!/usr/bin/env bash
# Compile-ahead (`kfarm-worker run --prefetch`, the default on GPU workers):
# while one job evaluates, the worker leases the next one, keeps both leases
# alive with heartbeats and compiles the next candidate into the compile
# cache, so its evaluation finds the build cached. Every job still ends with
# exactly one final evaluation. A candidate that does not build is reported
# from its compile-ahead (compile_error, the compiler's log kept), not
# rebuilt on the evaluation's time.
source "$(dirname "$0")/../lib.sh"

kf db migrate
start_coordinator --lease-ms 3000
kf campaign create pf --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu
for i in 1 2 3; do
  printf '#include "kf_abi.h"\nint kf_entry(const kf_call *c) { (void)c; return undefined_name_%d; }\n' "$i" >"$T_DIR/broken$i.c"
  kf candidate submit pf "$T_DIR/broken$i.c" >/dev/null
done
kf campaign start pf
start_worker solo --prefetch
kf campaign wait pf --timeout 300

check "campaign finished" eq "$(sql "SELECT state FROM campaigns WHERE name='pf'")" done
check "one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
check "all 8 variants ok" eq "$(sql "SELECT count(*) FROM evaluations e WHERE e.is_final AND e.verdict='ok' AND e.job_id IN (SELECT id FROM jobs WHERE purpose = 'eval')")" 8
check "no lease was lost while a job waited its turn" eq "$(sql "SELECT count(*) FROM evaluations WHERE NOT is_final")" 0
check "the worker compiled jobs ahead" grep -q "compiling ahead" "$T_DIR/solo.log"
check "jobs compiled ahead found their candidate build cached" eq \
  "$(sql "SELECT count(*) >= 5 FROM evaluations WHERE is_final AND (metrics->'compile'->'candidate'->>'cached')::boolean")" t
check "the three broken candidates are compile_error with their compiler log" eq \
  "$(sql "SELECT count(*) FROM evaluations WHERE is_final AND verdict = 'compile_error' AND detail LIKE '%undefined_name_%'")" 3
check "a broken candidate compiled ahead was not rebuilt" eq \
  "$(sql "SELECT count(*) >= 1 FROM evaluations WHERE is_final AND verdict = 'compile_error' AND (metrics->>'from_compile_ahead')::boolean")" t
check "the worker log says so" grep -q "found by its compile-ahead (not rebuilt" "$T_DIR/solo.log"
finish
