#!/usr/bin/env bash
# run_sweep.sh -- the attack classes that need many parameters and seeds
# (shared/cases/README.md, Integrity II), on the cpu backend:
#
#   i4_stop_after_n           honest for N calls (one global counter), then
#                             returns at once; N in SWEEP_NS x SWEEP_SEEDS
#                             (--define HONEST_CALLS=N --seed S)
#   i4_stop_after_n_per_shape the same with one counter per shape
#   cached_result             C6: memoizes outputs by input pointer/hash
#   i1_copy_from_maps_timing  I1: copies a correct answer (reference or
#                             baseline output) found in its own memory,
#                             computes honestly when it finds none
#   i5_seek_seed              I5: hunts the seed (command lines, environ,
#                             folders, memory), then computes only the calls
#                             it predicts will be checked
#
# Every run is `kfarm-worker eval TASK CANDIDATE --quick --json --seed S`
# and must exit 0 with verdict incorrect or rejected_cheat, or ok with a
# speedup <= SWEEP_SPEEDUP_MAX (1.5): a run that is ok can only be one in
# which the candidate did honest work on every call it was timed on. An ok
# above it whose timing the judge flagged noisy (a shape's cv > 0.10: a
# loaded machine) is run again, up to 3 tries, and is a miss only if every
# try is. A run whose output holds its case's marker (case.json
# "forbid_output", printed by the candidate when its attack worked) is a
# miss whatever its verdict. One line per try, then a summary per family;
# exit status 1 on any miss.
#
# Env: KFARM_BIN (build dir holding kfarm-worker), KFARM_SRC (repo root).
# Optional: SWEEP_NS="1 34", SWEEP_SEEDS="7", SWEEP_I5_SEEDS (large seeds
# for i5_seek_seed), SWEEP_ONLY="i4_stop_after_n cached_result" (family
# names above), SWEEP_SPEEDUP_MAX=1.5.
set -u
SRC=${KFARM_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${KFARM_BIN:-$SRC/build}
WORKER=$BIN/kfarm-worker
[ -x "$WORKER" ] || { echo "run_sweep: $WORKER not found (set KFARM_BIN)"; exit 2; }
command -v python3 >/dev/null || { echo "run_sweep: python3 needed"; exit 2; }

NS=${SWEEP_NS:-"1 2 3 5 8 13 21 34 55 89 144 200"}
SEEDS=${SWEEP_SEEDS:-"7 1001 424242"}
SPEEDUP_MAX=${SWEEP_SPEEDUP_MAX:-1.5}
CASES_DIR=$SRC/tests/cases
AXPY=$SRC/tests/tasks/axpy_f32
SOFTMAX=$SRC/tests/tasks/softmax_rows_f32

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kfarm-sweep.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
runs=0
misses=()
declare -A fam_runs fam_miss

cat >"$TMP/judge.py" <<'EOF'
import json, sys
out, err, rc, label, secs, smax, case = sys.argv[1:8]
rc, smax = int(rc), float(smax)
text = open(out, errors="replace").read()
# the case's markers (case.json "forbid_output"): a candidate prints one
# when its attack worked; its output reaches the verdict's JSON
# (metrics.runners.candidate.output_tail), so a marker is a miss whatever
# the verdict or the speed
try:
    markers = json.load(open(case)).get("forbid_output") or []
except (OSError, ValueError):
    markers = []
for m in markers:
    if m in text:
        print("MISS %s: the candidate printed %s: its attack worked (%ss)" % (label, m, secs))
        sys.exit(1)
if rc != 0:
    tail = " | ".join(open(err, errors="replace").read().strip().splitlines()[-2:])
    print("MISS %s: kfarm-worker exited %d (%ss) %s" % (label, rc, secs, tail[:200]))
    sys.exit(1)
try:
    d = json.loads(text)
except ValueError:
    print("MISS %s: no JSON verdict (%ss)" % (label, secs))
    sys.exit(1)
v, sp, detail = d.get("verdict"), d.get("speedup") or 0, (d.get("detail") or "")[:150]
good = v in ("incorrect", "rejected_cheat") or (v == "ok" and sp <= smax)
shown = "%s%s" % (v, " %.2fx" % sp if v == "ok" else "")
# An ok above smax whose timing the judge itself flagged noisy proves
# nothing either way: on a loaded 2-core machine the honest path of
# i1_copy_from_maps_timing timed 0.28-1.40x against the baseline (2.28x on
# one shape, the baseline's cv 0.88) with no copy made. Exit 3: run_one
# runs it again.
noisy = "noisy" in (((d.get("metrics") or {}).get("timing") or {}).get("flags") or [])
if not good and v == "ok" and noisy:
    print("noisy %s: %s (%ss) -- timing flagged noisy, running again" % (label, shown, secs))
    sys.exit(3)
print("%s %s: %s (%ss) -- %s" % ("ok  " if good else "MISS", label, shown, secs, detail))
sys.exit(0 if good else 1)
EOF

wanted() { [ -z "${SWEEP_ONLY:-}" ] || [[ " $SWEEP_ONLY " == *" $1 "* ]]; }

# run_one FAMILY LABEL TASK CANDIDATE SEED [--define NAME=V]...
run_one() {
    local fam=$1 label=$2 task=$3 cand=$4 seed=$5
    shift 5
    local out=$TMP/run.json t0 rc secs verdict try
    runs=$((runs + 1))
    fam_runs[$fam]=$(( ${fam_runs[$fam]:-0} + 1 ))
    # up to 3 tries while the judge flags the timing of a too-fast ok as
    # noisy (judge.py exit 3); the last such try counts as a miss
    for try in 1 2 3; do
        t0=$(date +%s.%N)
        timeout -k 10 300 "$WORKER" eval "$task" "$cand" --quick --json --seed "$seed" --work-dir "$TMP/work" \
            --cache-dir "$TMP/cache" "$@" >"$out" 2>"$out.err"
        rc=$?
        secs=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
        verdict=0
        python3 "$TMP/judge.py" "$out" "$out.err" "$rc" "$label" "$secs" "$SPEEDUP_MAX" \
            "$(dirname "$cand")/case.json" || verdict=$?
        [ "$verdict" = 3 ] || break
    done
    if [ "$verdict" != 0 ]; then
        misses+=("$label")
        fam_miss[$fam]=$(( ${fam_miss[$fam]:-0} + 1 ))
    fi
}

start=$(date +%s)
for fam in i4_stop_after_n i4_stop_after_n_per_shape; do
    wanted "$fam" || continue
    for n in $NS; do
        for seed in $SEEDS; do
            run_one "$fam" "$fam N=$n seed=$seed" "$AXPY" "$CASES_DIR/$fam/candidate.c" "$seed" \
                --define "HONEST_CALLS=$n"
        done
    done
done
if wanted cached_result; then
    for seed in $SEEDS; do
        run_one cached_result "cached_result seed=$seed" "$SOFTMAX" "$CASES_DIR/cached_result/candidate.c" "$seed"
    done
fi
if wanted i1_copy_from_maps_timing; then
    for seed in $SEEDS; do
        run_one i1_copy_from_maps_timing "i1_copy_from_maps_timing seed=$seed" "$SOFTMAX" \
            "$CASES_DIR/i1_copy_from_maps_timing/candidate.c" "$seed"
    done
fi
if wanted i5_seek_seed; then
    # large seeds: `eval --seed N` derives the inputs from N by design, and a
    # small N can be guessed from any number lying around
    for seed in ${SWEEP_I5_SEEDS:-3141592653589793238 2718281828459045235 1618033988749894848}; do
        run_one i5_seek_seed "i5_seek_seed seed=$seed" "$AXPY" "$CASES_DIR/i5_seek_seed/candidate.c" "$seed"
    done
fi

echo "run_sweep: $runs runs in $(( $(date +%s) - start ))s"
for fam in "${!fam_runs[@]}"; do
    echo "  $fam: ${fam_runs[$fam]} runs, ${fam_miss[$fam]:-0} missed"
done | sort
if [ "${#misses[@]}" -gt 0 ]; then
    echo "missed (${#misses[@]}): ${misses[*]}"
    exit 1
fi
[ "$runs" -gt 0 ] || { echo "run_sweep: nothing ran (SWEEP_ONLY?)"; exit 1; }
echo "all $runs runs incorrect, rejected_cheat, or ok at <= ${SPEEDUP_MAX}x"
