#!/usr/bin/env bash
# tools/bench/bench_cpu_tasks.sh -- evaluations per core-hour on the built-in
# cpu tasks (issue 8), an old worker and a new one side by side in one run.
#
#   tools/bench/bench_cpu_tasks.sh NEW_TREE OLD_TREE [RUNS]
#
# NEW_TREE and OLD_TREE are checkouts with a build in build/ (kfarm-worker
# and kfarm-runner); each worker evaluates its own tree's tasks/T/seed.c
# (tasks change with the code: a faster reference is part of the change).
# Full timing (no --quick), warm compile cache (one untimed run first),
# old and new alternating run by run so both see the same machine load.
# Prints one line per run and a table: median wall seconds per evaluation,
# the ratio old/new (= the gain in evaluations per core-hour, one evaluation
# at a time per worker), and the new worker's phase split (validation /
# timing) from its --json metrics.
set -uo pipefail
NEW=$(cd "${1:?usage: bench_cpu_tasks.sh NEW_TREE OLD_TREE [RUNS]}" && pwd)
OLD=$(cd "${2:?usage: bench_cpu_tasks.sh NEW_TREE OLD_TREE [RUNS]}" && pwd)
RUNS=${3:-3}
TASKS=${TASKS:-softmax_f32 layernorm_f32 sgemm_f32}
W=$(mktemp -d /tmp/kfbct.XXXXXX)
trap 'rm -rf "$W"' EXIT
one() { # one TREE TASK -> "wall_s verdict validation_s timing_s"
  local t0 t1 j
  t0=$(date +%s.%N)
  j=$("$1/build/kfarm-worker" eval "$1/tasks/$2" "$1/tasks/$2/seed.c" --json --cache-dir "$W/cache-$(basename "$1")" --work-dir "$W" 2>/dev/null)
  t1=$(date +%s.%N)
  python3 -c "
import json, sys
try: d = json.loads(sys.argv[1])
except Exception: d = {}
m = d.get('metrics', {})
print('%.3f %s %.2f %.2f' % (float(sys.argv[3]) - float(sys.argv[2]), d.get('verdict', 'none'), m.get('validation_s') or 0, m.get('timing_s') or 0))" "$j" "$t0" "$t1"
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "old: $(git -C "$OLD" log --oneline -1 | cut -c1-60)"
echo "new: $(git -C "$NEW" log --oneline -1 | cut -c1-60)"
declare -A OW NW NV NT
for t in $TASKS; do
  one "$OLD" "$t" >/dev/null; one "$NEW" "$t" >/dev/null # warm the caches
  for i in $(seq 1 "$RUNS"); do
    o=$(one "$OLD" "$t"); n=$(one "$NEW" "$t")
    echo "  $t run $i: old ${o}   new ${n}"
    OW[$t]+="${o%% *} "; NW[$t]+="${n%% *} "
    NV[$t]+="$(echo "$n" | cut -d' ' -f3) "; NT[$t]+="$(echo "$n" | cut -d' ' -f4) "
  done
done
echo
echo "| task | old s/eval (median) | new s/eval (median) | old/new | new validation s | new timing s |"
echo "|---|---:|---:|---:|---:|---:|"
for t in $TASKS; do
  python3 -c "
import statistics, sys
o = [float(x) for x in sys.argv[2].split()]; n = [float(x) for x in sys.argv[3].split()]
v = [float(x) for x in sys.argv[4].split()]; tt = [float(x) for x in sys.argv[5].split()]
mo, mn = statistics.median(o), statistics.median(n)
print('| %s | %.2f | %.2f | %.2fx | %.2f | %.2f |' % (sys.argv[1], mo, mn, mo / mn, statistics.median(v), statistics.median(tt)))" \
    "$t" "${OW[$t]}" "${NW[$t]}" "${NV[$t]}" "${NT[$t]}"
done
