#!/usr/bin/env bash
# kfarm ship: a two-target campaign (cpu and this machine's second cpu class)
# on tests/tasks/ship_scale_f32, whose seed wins at the large benchmark shape
# and loses at the small one; two workers so each target's best is confirmed
# by a second worker. Then:
#   - ship: per class, the small shape goes to the baseline and the large one
#     to the confirmed winner; MANIFEST.json says who confirmed it;
#   - the output builds with its own CMakeLists.txt into one shared library
#     whose kf_entry gives the right answer at both shapes and at a shape that
#     was never measured (the baseline);
#   - each class file is itself a candidate: `kfarm-worker eval` says ok;
#   - a winner that is not confirmed (disputed) is never shipped;
#   - --verify has the farm judge the shipped files: ok, no shape slower;
#   - CUDA, compile only (no GPU here): results on sm_80 and sm_90 written
#     into the database ship as a fat binary with a cubin for each.
source "$(dirname "$0")/../lib.sh"

kf db migrate
task="$KFARM_SRC/tests/tasks/ship_scale_f32"
cls2=$("$KFARM_BIN/kfarm-worker" devices --cpu | python3 -c 'import json,sys; print(json.load(sys.stdin)["classes"][1])')
log "second cpu class: $cls2"
start_coordinator
start_worker w1
kf campaign create sh --task "$task" --strategy tune --target cpu --target "$cls2" --no-task-check
kf campaign start sh
# w1 evaluates alone; w2 joins once the variants are judged, so the
# confirmations run one at a time instead of two workers sharing the cores
wait_for 240 "SELECT count(*) = 4 FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE e.is_final AND j.purpose = 'eval'"
start_worker w2
w2pid=$T_LASTPID
kf campaign wait sh --timeout 240
CONF="SELECT count(DISTINCT j.target) FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'sh' AND e.confirmation = 'confirmed'"
wait_for 120 "SELECT ($CONF) = 2" || true
check "each target's best was confirmed by a second evaluation" eq "$(sql "$CONF")" 2

out=$T_DIR/ship
rc=0
kf ship sh --out "$out" >"$T_DIR/ship.txt" 2>&1 || rc=$?
cat "$T_DIR/ship.txt" >&2
check "ship succeeds" eq "$rc" 0
slug2=$(printf '%s' "$cls2" | tr -c 'A-Za-z0-9_' '_')
man() { python3 -c "import json,sys; m=json.load(open('$1')); print(eval(sys.argv[1]))" "$2"; }
check "two classes in the manifest" eq "$(man "$out/MANIFEST.json" "len(m['classes'])")" 2
# ship's rule (kf_noise_shape) in SQL for class $1: the confirmed ok results
# with their large-shape speedup v and the lower end lo of its interval
# s e^(-1.96 q), q = sqrt(cv_b^2 + cv_c^2)
large_of() {
  echo "FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN campaigns c ON c.id = j.campaign_id,
         LATERAL (SELECT (x->>'speedup')::float AS v, (x->>'speedup')::float * exp(-1.96 * sqrt(power(coalesce((x->'baseline'->>'cv')::float, 0), 2)
                  + power(coalesce((x->'candidate'->>'cv')::float, 0), 2))) AS lo
                  FROM jsonb_array_elements(e.metrics->'timing'->'shapes') x WHERE (x->'sizes'->>'N')::bigint = 4194304) s
         WHERE c.name = 'sh' AND j.target = '$1' AND e.confirmation = 'confirmed' AND e.is_final AND e.verdict = 'ok'"
}
# Per class, the large shape goes to the confirmed result fastest there
# (each result's own per-shape timing) when its interval clears 1; when it
# does not (a loaded CI host timed the 6x seed with an interval reaching
# down to 1 on one class, 2026-12-05), the baseline serves the shape and
# the manifest and ship's output name that result as within the noise.
shipped_large=0
for cls in cpu "$cls2"; do
  sel="[c for c in m['classes'] if c['class'] == '$cls'][0]['shapes']"
  check "$cls: the small shape (seed loses) goes to the baseline" eq \
    "$(man "$out/MANIFEST.json" "$sel[0]['entry']")" baseline
  # ship's rule (kf_noise_shape): the large shape's interval is s e^(+-1.96 q),
  # q = sqrt(cv_b^2 + cv_c^2); the fastest confirmed result whose lower end
  # clears 1 (win), else the fastest faster than 1 within the noise (nwin)
  large=$(large_of "$cls")
  win=$(sql "SELECT e.candidate_id $large AND s.lo > 1 ORDER BY s.v DESC LIMIT 1")
  nwin=$(sql "SELECT e.candidate_id $large AND s.lo <= 1 AND s.v > 1 ORDER BY s.v DESC LIMIT 1")
  if [ "$(man "$out/MANIFEST.json" "$sel[1]['entry']")" != baseline ]; then
    shipped_large=$((shipped_large + 1))
    [ -n "${dcls:-}" ] || dcls=$cls # the class whose winner the checks below dispute
    check "$cls: the large shape goes to the confirmed winner" eq \
      "$(man "$out/MANIFEST.json" "$sel[1].get('candidate_id')")" "$win"
    check "$cls: the manifest names the confirming worker" python3 -c \
      "import json,sys; s=[c for c in json.load(open('$out/MANIFEST.json'))['classes'] if c['class']=='$cls'][0]['shapes'][1]; sys.exit(0 if s['confirmed_by'] in ('w1','w2') and s['speedup_interval'][0] > 1 else 1)"
  else
    log "$cls: the baseline serves the large shape: $(man "$out/MANIFEST.json" "$sel[1].get('within_noise')")"
    check "$cls: the baseline serves the large shape only when no confirmed result clears the noise there" eq "$win" ""
    check "$cls: a baseline large shape names the confirmed winner as within the noise" python3 -c \
      "import json,sys; s=[c for c in json.load(open('$out/MANIFEST.json'))['classes'] if c['class']=='$cls'][0]['shapes'][1]['within_noise']; sys.exit(0 if s['candidate_id'] == ${nwin:-0} and s['speedup_interval'][0] <= 1 < s['speedup'] else 1)"
    check "$cls: ship says so" grep -q "^note: $cls N=4194304: candidate $nwin measured .* not faster beyond the noise" "$T_DIR/ship.txt"
  fi
done
check "the 6x seed is shipped at the large shape of at least one class" test "$shipped_large" -ge 1

# the library builds with its own CMakeLists.txt and answers right
( cmake -S "$out" -B "$out/build" -DCMAKE_BUILD_TYPE=Release && cmake --build "$out/build" ) >"$T_DIR/build.log" 2>&1 || true
check "the shipped library builds (cmake)" test -f "$out/build/libkfship_ship_scale_f32.so"
check "it exports kf_entry" bash -c "nm -D --defined-only '$out/build/libkfship_ship_scale_f32.so' | grep -qw kf_entry"
cat >"$T_DIR/drive.c" <<'C'
/* load the shipped library, call kf_entry at N, compare with 3x+1 */
#include <dlfcn.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include "kf_abi.h"
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    int (*entry)(const kf_call *) = (int (*)(const kf_call *))dlsym(h, "kf_entry");
    for (int a = 2; a < argc; a++) {
        int64_t n = atoll(argv[a]);
        float *x = malloc(n * sizeof(float)), *o = malloc(n * sizeof(float));
        for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000) / 1000.0f - 0.5f;
        kf_tensor in = { x, KF_F32, 1, { n } }, out = { o, KF_F32, 1, { n } };
        kf_call c = { &in, 1, &out, 1, &n, 1, NULL, NULL, 0 };
        if (!entry || entry(&c) != 0) return 1;
        for (int64_t i = 0; i < n; i++)
            if (fabsf(o[i] - (3.0f * x[i] + 1.0f)) > 1e-6f * (1.0f + fabsf(o[i]))) { fprintf(stderr, "N=%lld: out[%lld] wrong\n", (long long)n, (long long)i); return 1; }
        free(x); free(o);
    }
    puts("right");
    return 0;
}
C
cc -O1 -I"$out/include" "$T_DIR/drive.c" -o "$T_DIR/drive" -ldl -lm
check "the library's kf_entry is right at both shapes and an unmeasured one" eq \
  "$("$T_DIR/drive" "$out/build/libkfship_ship_scale_f32.so" 65536 4194304 1000 2>&1)" right

# each class file is a valid candidate
v=$("$KFARM_BIN/kfarm-worker" eval "$task" "$out/classes/cpu.c" --quick --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])' || true)
check "the class file is ok as a candidate (kfarm-worker eval)" eq "$v" ok
check "the class file renamed the shared helper apart" grep -q "ship_scale__" "$out/classes/cpu.c"

# an unconfirmed winner is never shipped
# the result ship chose for a class's large shape (dcls: cpu, unless the
# baseline serves it there) (the best overall speedup need
# not be the best at that shape: then disputing it would change nothing)
dis=$(man "$out/MANIFEST.json" "[c for c in m['classes'] if c['class'] == '${dcls:-cpu}'][0]['shapes'][1]['evaluation_id']")
discand=$(sql "SELECT candidate_id FROM evaluations WHERE id = $dis")
sql "UPDATE evaluations SET confirmation = 'disputed' WHERE id = $dis"
kf ship sh --out "$T_DIR/ship2" >"$T_DIR/ship2.txt" 2>&1 || true
check "a disputed winner is not shipped" python3 -c "
import json, sys
m = json.load(open('$T_DIR/ship2/MANIFEST.json'))
c = [c for c in m['classes'] if c['class'] == '${dcls:-cpu}'][0]
sys.exit(0 if all(s.get('candidate_id') != $discand for s in c['shapes']) else 1)"
# pending = its verification job still to run (else the reaper would call a
# pending result whose verification job is done inconclusive at once)
vstate=$(sql "SELECT state FROM jobs WHERE purpose = 'verify' AND verifies = $dis")
sql "UPDATE jobs SET state = 'queued', not_before = now() + interval '1 hour' WHERE purpose = 'verify' AND verifies = $dis"
sql "UPDATE evaluations SET confirmation = 'pending' WHERE id = $dis"
kf ship sh --out "$T_DIR/ship3" >"$T_DIR/ship3.txt" 2>&1 || true
check "nor a pending one, and ship says one is waiting" bash -c "grep -q 'unconfirmed result' '$T_DIR/ship3.txt' && ! grep -q '\"candidate_id\": $discand' <(python3 -c \"import json; print(json.dumps([c for c in json.load(open('$T_DIR/ship3/MANIFEST.json'))['classes'] if c['class']=='${dcls:-cpu}']))\")"
sql "UPDATE evaluations SET confirmation = 'confirmed' WHERE id = $dis"
sql "UPDATE jobs SET state = '${vstate:-done}', not_before = NULL WHERE purpose = 'verify' AND verifies = $dis"

# confirmed winners timed faster but not beyond the noise (the large
# shape's candidate CV of every confirmed result of class dcls made 2.0:
# each interval reaches far below 1) are not shipped there: the baseline
# serves the shape, and the manifest and ship's output name the fastest of
# them with its interval
sql "CREATE TABLE ship_saved AS SELECT e.id, e.metrics FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.target = '${dcls:-cpu}' AND e.confirmation = 'confirmed' AND e.is_final AND e.verdict = 'ok'"
sql "UPDATE evaluations e SET metrics = jsonb_set(e.metrics, '{timing,shapes}', (SELECT jsonb_agg(CASE WHEN (x.s->'sizes'->>'N')::bigint = 4194304 THEN jsonb_set(x.s, '{candidate,cv}', '2.0') ELSE x.s END ORDER BY x.o) FROM jsonb_array_elements(e.metrics->'timing'->'shapes') WITH ORDINALITY x(s, o))) FROM ship_saved v WHERE v.id = e.id"
cls=${dcls:-cpu}
large=$(large_of "$cls")
nwin=$(sql "SELECT e.candidate_id || ' ' || e.id $large AND s.lo <= 1 AND s.v > 1 ORDER BY s.v DESC LIMIT 1")
kf ship sh --out "$T_DIR/ship6" >"$T_DIR/ship6.txt" 2>&1 || true
check "winners within the noise: the baseline serves the shape, the manifest names the fastest" python3 -c "
import json, sys
m = json.load(open('$T_DIR/ship6/MANIFEST.json'))
s = [c for c in m['classes'] if c['class'] == '$cls'][0]['shapes'][1]
w = s.get('within_noise') or {}
sys.exit(0 if '$nwin' and s['entry'] == 'baseline' and '%s %s' % (w.get('candidate_id'), w.get('evaluation_id')) == '$nwin'
         and w['speedup_interval'][0] < 1 < w['speedup'] else 1)"
check "winners within the noise: ship says so" grep -q "^note: $cls N=4194304: candidate ${nwin%% *} measured [0-9.]*x \[0\.[0-9]*, [0-9.]*\], not faster beyond the noise" "$T_DIR/ship6.txt"
sql "UPDATE evaluations e SET metrics = v.metrics FROM ship_saved v WHERE v.id = e.id"

# the farm judges the shipped files -- on w1 alone: two cpu evaluations side
# by side on this machine's cores disturb each other's timings, and --verify
# compares the shipped library's speedup with the winners' intervals
kill "$w2pid" 2>/dev/null || true
wait "$w2pid" 2>/dev/null || true
vrc=0
vrounds=1
kf ship sh --out "$T_DIR/ship4" --verify --verify-timeout 200 >"$T_DIR/verify.txt" 2>&1 || vrc=$?
if [ "$vrc" != 0 ] && grep -q "shipped baseline 1.000x .*: SLOWER" "$T_DIR/verify.txt"; then
  # Known open bias (docs/benchmarks.md): on a loaded 2-core machine the
  # shipped library on a baseline-served ~20 us shape sometimes times 0.67x
  # against the baseline it calls. One more verification; a real regression
  # fails both.
  log "verify: a baseline-served shape timed SLOWER; verifying once more"
  vrounds=2
  vrc=0
  kf ship sh --out "$T_DIR/ship5" --verify --verify-timeout 200 >"$T_DIR/verify.txt" 2>&1 || vrc=$?
fi
cat "$T_DIR/verify.txt" >&2
check "ship --verify: every class ok, no shape slower" bash -c "[ $vrc = 0 ] && grep -q 'every class ok' '$T_DIR/verify.txt'"
# one verification campaign per class (cpu and the CPU's model) per round
check "verification campaigns are in the database" eq \
  "$(sql "SELECT count(*) FROM campaigns WHERE name LIKE 'sh-ship-%'")" "$((2 * vrounds))"

brc=0
bad=$(kf ship sh nosuch --out "$T_DIR/x" 2>&1) || brc=$?
check "an unknown campaign is a clear error" bash -c '[ "$1" = 1 ] && grep -q "no campaign .nosuch." <<<"$2"' _ "$brc" "$bad"

# CUDA, compile only: confirmed results for sm_80 and sm_90 written into the database
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$NVCC" ] && [ -x "$NVCC" ]; then
  ct="$KFARM_SRC/tests/cases_cuda/task"
  kf campaign create cu --task "$ct" --strategy tune --target sm_80 --target sm_90 --no-task-check >/dev/null
  kf candidate submit cu "$KFARM_SRC/tests/cases_cuda/good/candidate.cu" >/dev/null
  kf candidate submit cu "$KFARM_SRC/tests/cases_cuda/t1_sync/candidate.cu" >/dev/null
  # candidate "good" wins on sm_90, "t1_sync" on sm_80 (both confirmed): two different files per class
  sql "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, verdict, metrics, speedup, is_final, confirmation, confirmed_by_worker)
       SELECT j.id, j.candidate_id, 1, 'gpu-w', 'ok',
              json_build_object('timing', json_build_object('shapes', json_build_array(json_build_object(
                'sizes', json_build_object('N', 16777216), 'speedup', s,
                'candidate', json_build_object('cv', 0.01, 'reps', 50), 'baseline', json_build_object('cv', 0.01, 'reps', 50)))))::jsonb,
              s, true, 'confirmed', 'gpu-v'
       FROM (SELECT j.*, CASE WHEN (k.source LIKE '%t1_sync%' OR k.source LIKE '%T1%') = (j.target = 'sm_80') THEN 2.0 ELSE 1.5 END AS s
             FROM jobs j JOIN candidates k ON k.id = j.candidate_id JOIN campaigns c ON c.id = j.campaign_id
             WHERE c.name = 'cu' AND j.purpose = 'eval') j"
  sql "UPDATE jobs SET state = 'done' WHERE campaign_id = (SELECT id FROM campaigns WHERE name = 'cu')" || true
  crc=0
  kf ship cu --out "$T_DIR/shipcu" --nvcc "$NVCC" >"$T_DIR/shipcu.txt" 2>&1 || crc=$?
  cat "$T_DIR/shipcu.txt" >&2
  check "CUDA: ship writes and compiles a class file per arch" bash -c "[ $crc = 0 ] && [ -f '$T_DIR/shipcu/classes/sm_80.cu' ] && [ -f '$T_DIR/shipcu/classes/sm_90.cu' ]"
  ( cmake -S "$T_DIR/shipcu" -B "$T_DIR/shipcu/build" -DCMAKE_CUDA_COMPILER="$NVCC" && cmake --build "$T_DIR/shipcu/build" ) \
    >"$T_DIR/buildcu.log" 2>&1 || true
  lib=$T_DIR/shipcu/build/libkfship_cases_axpy_f32_cuda.so
  check "CUDA: the library builds (cmake, nvcc)" test -f "$lib"
  # each embedded cubin keeps the ptxas command line it was built with
  check "CUDA: a fat binary with a cubin for sm_80 and for sm_90" bash -c \
    "strings '$lib' | grep -q -- '-arch sm_80 ' && strings '$lib' | grep -q -- '-arch sm_90 '"
  check "CUDA: each class's kernels in their own namespace" bash -c \
    "strings '$lib' | grep -q kf_ship_ns_sm_80_e0 && strings '$lib' | grep -q kf_ship_ns_sm_90_e0"
else
  log "nvcc not found: the CUDA compile-only part is skipped"
fi
finish
