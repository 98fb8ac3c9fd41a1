#!/usr/bin/env bash
# tools/bench/bench_split.sh -- the cost of the judge/runner split on the cpu
# backend: the same candidates through two kfarm-worker builds (before and
# after), full timing, warm compile cache, R runs each; prints one row per
# (task, build): median wall seconds, median speedup, its spread.
#
#   OLD=/path/to/old/build NEW=build tools/bench/bench_split.sh [R]
#
# The "before" build is any checkout from before the split (e.g. a worktree of
# 4f0f448 built with cmake). Run it on an otherwise idle machine.
set -u
R=${1:-3}
OLD=${OLD:?set OLD to the build folder of the old worker}
NEW=${NEW:-build}
W=$(mktemp -d /tmp/kfbench-split.XXXXXX)
trap 'rm -rf "$W"' EXIT
printf '%-16s %-5s %9s %9s %9s\n' task build wall_s speedup sp_range
for t in softmax_f32 layernorm_f32 sgemm_f32; do
    for b in old new; do
        bin=$OLD; [ $b = new ] && bin=$NEW
        mkdir -p "$W/cache-$b"
        "$bin/kfarm-worker" eval tasks/$t tasks/$t/seed.c --json --cache-dir "$W/cache-$b" --work-dir "$W" >/dev/null 2>&1 # warm the cache
        : >"$W/rows"
        for i in $(seq "$R"); do
            s=$(date +%s.%N)
            "$bin/kfarm-worker" eval tasks/$t tasks/$t/seed.c --json --cache-dir "$W/cache-$b" --work-dir "$W" >"$W/r.json" 2>/dev/null
            e=$(date +%s.%N)
            python3 -c "import json,sys; r=json.load(open('$W/r.json')); print($e-$s, r.get('speedup') or 0, r['verdict'])" >>"$W/rows"
        done
        python3 - "$t" "$b" "$W/rows" <<'PY'
import sys, statistics as st
t, b, p = sys.argv[1:4]
rows = [l.split() for l in open(p)]
w = [float(r[0]) for r in rows]; sp = [float(r[1]) for r in rows]; v = {r[2] for r in rows}
print("%-16s %-5s %9.2f %9.2f %4.2f-%4.2f %s" % (t, b, st.median(w), st.median(sp), min(sp), max(sp), ",".join(sorted(v))))
PY
    done
done
