#!/usr/bin/env bash
# tools/bench/bench_eval.sh -- per-evaluation overhead of the worker path (cpu backend).
#
#   tools/bench/bench_eval.sh [BUILD_DIR]        (default: build-bench)
#   env: RUNS (default 10) runs per quick case, FULL_RUNS (default 3, 0 = skip)
#
# Times `kfarm-worker eval --quick` of tests/tasks/farm_axpy_f32/seed.c with
# DELAY_MS=0 UNROLL=4 (the seed's tunables are DELAY_MS=200..203, UNROLL=1,4;
# DELAY_MS=0 removes the deliberate sleep, so what is left is the farm's own
# overhead: compile reference/baseline/candidate, fork the sandboxed child,
# generate inputs, validate, time, report), in three cases:
#   cold  --quick, compile cache emptied before every run (3 cc invocations)
#   warm  --quick, compile cache already holding all three shared objects
#   full  warm cache, without --quick: the timing a farm job really pays
# With hyperfine (apt-get install hyperfine) it reports hyperfine's median;
# otherwise a `date +%s%N` loop and its median. Then one --json run of each
# quick case shows where the time goes (compile / validation / timing phases
# as the worker itself measures them).
#
# Output: a table, plus machine-readable lines:
#   RESULT eval case=cold|warm|full runs=N median_ms=.. min_ms=.. max_ms=..
#   RESULT evalphase case=cold|warm compile_s=.. validation_s=.. timing_s=.. sandbox_s=.. eval_s=..
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build-bench}
case $build in /*) ;; *) build=$PWD/$build ;; esac
worker=$build/kfarm-worker
[ -x "$worker" ] || { echo "bench_eval: $worker not built" >&2; exit 1; }
runs=${RUNS:-10}
full_runs=${FULL_RUNS:-3}
task=$here/tests/tasks/farm_axpy_f32
tmp=$(mktemp -d /tmp/kfbench-eval.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/work"
eval_cmd() { # eval_cmd CACHE_DIR [extra args]: the command line being timed
  local cache=$1; shift
  echo "$worker eval $task $task/seed.c --define DELAY_MS=0 --define UNROLL=4 --seed 1" \
       "--cache-dir $cache --work-dir $tmp/work $*"
}

# median/min/max (ms) of the numbers on stdin (ns)
stats_ms() { sort -n | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2;
  printf "%.1f %.1f %.1f\n", m/1e6, v[1]/1e6, v[NR]/1e6}'; }

# time_case NAME RUNS PREPARE CMD: prints "NAME RUNS median min max"
time_case() {
  local name=$1 n=$2 prep=$3 cmd=$4
  if command -v hyperfine >/dev/null 2>&1; then
    local hp=()
    [ -n "$prep" ] && hp=(--prepare "$prep") || hp=(--warmup 1)
    hyperfine -N --style none --runs "$n" "${hp[@]}" --export-json "$tmp/$name.json" \
      "$cmd" >/dev/null 2>&1 || { echo "bench_eval: hyperfine failed for $name: $cmd" >&2; return 1; }
    python3 - "$tmp/$name.json" "$name" "$n" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(sys.argv[2], sys.argv[3], "%.1f %.1f %.1f" % (r["median"] * 1e3, r["min"] * 1e3, r["max"] * 1e3))
PY
  else
    [ -z "$prep" ] && { $cmd >/dev/null 2>&1 || true; }   # warm-up
    : > "$tmp/$name.ns"
    for _ in $(seq "$n"); do
      [ -n "$prep" ] && sh -c "$prep"
      local t0 t1; t0=$(date +%s%N)
      $cmd >/dev/null 2>&1 || { echo "bench_eval: failed: $cmd" >&2; return 1; }
      t1=$(date +%s%N); echo $((t1 - t0)) >> "$tmp/$name.ns"
    done
    echo "$name $n $(stats_ms < "$tmp/$name.ns")"
  fi
}

# Sanity: the evaluation must succeed, or we would be timing a failure path.
verdict=$($(eval_cmd "$tmp/check" --quick --json) 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["verdict"])')
[ "$verdict" = ok ] || { echo "bench_eval: evaluation verdict '$verdict', expected ok" >&2; exit 1; }

tool=$(command -v hyperfine >/dev/null 2>&1 && hyperfine --version || echo "date +%s%N loop")
echo "eval: kfarm-worker eval tests/tasks/farm_axpy_f32 seed (DELAY_MS=0 UNROLL=4), timed with $tool"
printf '%-6s %5s %11s %9s %9s  %s\n' case runs 'median(ms)' 'min(ms)' 'max(ms)' what
rows=()
rows+=("$(time_case cold "$runs" "rm -rf $tmp/cold" "$(eval_cmd "$tmp/cold" --quick)") --quick, empty compile cache")
rows+=("$(time_case warm "$runs" "" "$(eval_cmd "$tmp/warm" --quick)") --quick, warm compile cache")
if [ "$full_runs" -gt 0 ]; then
  rows+=("$(time_case full "$full_runs" "" "$(eval_cmd "$tmp/warm")") full timing, warm cache")
fi
for r in "${rows[@]}"; do
  set -- $r
  printf '%-6s %5s %11s %9s %9s  %s\n' "$1" "$2" "$3" "$4" "$5" "${*:6}"
done
for r in "${rows[@]}"; do
  set -- $r
  echo "RESULT eval case=$1 runs=$2 median_ms=$3 min_ms=$4 max_ms=$5"
done

# Where the time goes, as the worker measures it (one run each).
echo "phases (one --json run; seconds):"
printf '%-6s %9s %12s %9s %10s %8s\n' case 'compile*' validation timing sandbox eval
for c in cold warm; do
  # cold starts from an empty cache and fills it; warm then reuses it
  if [ $c = cold ]; then rm -rf "$tmp/phase"; fi
  $(eval_cmd "$tmp/phase" --quick --json) 2>/dev/null > "$tmp/phase-$c.json" || true
  python3 - "$tmp/phase-$c.json" "$c" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d.get("metrics", d)
comp = m.get("compile", {})
cs = sum(v.get("seconds", 0) or 0 for v in comp.values() if isinstance(v, dict))
row = (sys.argv[2], cs, m.get("validation_s", 0), m.get("timing_s", 0),
       m.get("sandbox", {}).get("wall_s", 0), m.get("eval_s", 0))
print("%-6s %9.3f %12.3f %9.3f %10.3f %8.3f" % row)
print("RESULT evalphase case=%s compile_s=%.3f validation_s=%.3f timing_s=%.3f sandbox_s=%.3f eval_s=%.3f" % row,
      file=sys.stderr)
PY
done 2> "$tmp/phase.result"
echo "  (*compile: the three builds' seconds added up; sandbox: the child's wall time)"
cat "$tmp/phase.result"
