#!/usr/bin/env bash
# tools/bench/bench_ab.sh -- a change against another commit, measured the
# way this project's 2-core VM needs: the dispatch bench (bench_dispatch.sh,
# kernelfarm only) alternated between two builds, round by round, on one
# PostgreSQL cluster, and judged on the median of the per-round ratios.
#
#   tools/bench/bench_ab.sh OLD_REV [ROUNDS]
#
# Why alternated rounds: the same binaries moved by +-15% within minutes on
# that VM (the host's speed moves; docs/benchmarks.md, 2026-12-07), so a
# single run of each side says nothing about a change worth less than that.
# A round runs both builds back to back, old first in odd rounds and new
# first in even ones; its ratio (new / old) cancels what drifts slower
# than a round (~3 min).
#
# OLD_REV (any git revision) is checked out into a temporary worktree and
# built there; NEW is this working tree, built in $BUILD (default
# build-bench); both Release, CUDA off. Each side runs its own loadgen,
# which writes its own schema: a schema change is measured with the schema
# of each side. Both sides are driven by this tree's bench_dispatch.sh and
# task files, so OLD_REV must have a loadgen that takes the options it
# passes (revisions before 52ba470 lack --tasks-once: every old run fails,
# and the round says why). ROUNDS defaults to 5.
#
# Environment: bench_dispatch.sh's settings are passed on (WORKERS, one
# count; DURATION, QUEUE, JOBS_PER_LEASE, ...) except RUNS=1, SYSTEMS=kfarm,
# KEEP_DB=1 and COORDS (one count), which this script sets or checks; unset,
# the 1,000-worker closed loop of docs/benchmarks.md is run: WORKERS=1000
# DURATION=15 QUEUE=400000 PIGGYBACK=1 HEARTBEATS=0 JOBS_PER_LEASE=64
# BATCH_RESULTS=1 EVAL_MS=0 HUGEPAGES=1. The PostgreSQL cluster
# (KFARM_DEVDB_DIR, default /tmp/kfdispatch-db) is left running at the end
# (stop it with tools/devdb stop). KEEP_WORKTREE=1 leaves the old worktree.
#
# A run counts only when bench_dispatch.sh succeeded, loadgen verified every
# result and its queue did not run dry (a queue too short for the fleet and
# window measures the drain, not the rate: raise QUEUE); a failed round is
# printed with the run's last lines, and the script then exits 1.
#
# Output: one line per round (jobs/s and PostgreSQL CPU per job of each
# side, the ratio), then the medians; each run's full output is kept beside
# the table ($BUILD/bench-results/ab-<time>-runs/). Nothing else may run on
# the machine meanwhile (a build, the tests): it would land in some rounds.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
cd "$here"
usage() { echo "usage: tools/bench/bench_ab.sh OLD_REV [ROUNDS]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] && [ -n "$1" ] || usage
old_rev=$1
rounds=${2-5}
case $rounds in ''|*[!0-9]*|0) echo "bench_ab: ROUNDS must be a positive number" >&2; exit 2 ;; esac
old_sha=$(git rev-parse --verify --quiet "$old_rev^{commit}") ||
  { echo "bench_ab: no such revision: $old_rev" >&2; exit 2; }
case ${WORKERS-1000} in ''|*[!0-9]*|0) echo "bench_ab: WORKERS must be one count (> 0)" >&2; exit 2 ;; esac
case ${COORDS-1} in ''|*[!0-9]*|0) echo "bench_ab: COORDS must be one count (> 0)" >&2; exit 2 ;; esac
new_build=${BUILD:-$here/build-bench}
wt=$(mktemp -d /tmp/kfarm-ab.XXXXXX)
child=
cleanup() {
  # a run still going (the script was interrupted): its whole process group
  if [ -n "$child" ]; then kill -TERM -- "-$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  if [ "${KEEP_WORKTREE:-0}" = 1 ]; then
    echo "bench_ab: old worktree kept: $wt" >&2
  else
    git -C "$here" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"
    git -C "$here" worktree prune >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
git worktree add --detach "$wt" "$old_sha" >/dev/null
echo "== building the old side ($(git log -1 --format='%h %s' "$old_sha" | cut -c1-72))"
cmake -S "$wt" -B "$wt/build-bench" -DCMAKE_BUILD_TYPE=Release -DKFARM_CUDA=OFF >/dev/null
cmake --build "$wt/build-bench" -j2 --target loadgen kfarm-coordinator kfarm >/dev/null
echo "== building the new side (working tree, $new_build)"
cmake -S "$here" -B "$new_build" -DCMAKE_BUILD_TYPE=Release -DKFARM_CUDA=OFF >/dev/null
cmake --build "$new_build" -j2 --target loadgen kfarm-coordinator kfarm >/dev/null

export WORKERS=${WORKERS-1000} COORDS=${COORDS-1} DURATION=${DURATION:-15} QUEUE=${QUEUE:-400000}
export PIGGYBACK=${PIGGYBACK:-1} HEARTBEATS=${HEARTBEATS:-0} JOBS_PER_LEASE=${JOBS_PER_LEASE:-64}
export BATCH_RESULTS=${BATCH_RESULTS:-1} EVAL_MS=${EVAL_MS:-0} HUGEPAGES=${HUGEPAGES:-1}
export SYSTEMS=kfarm RUNS=1 KEEP_DB=1

# run BUILD NAME: one run, its output in $logdir/NAME.log; sets res to
# "jobs_per_s pg_us_per_job", or "0 -1" when it does not count (see above)
run() {
  local rc=0 runlog=$logdir/$2.log out j p v d
  BUILD=$1 setsid tools/bench/bench_dispatch.sh >"$runlog" 2>&1 &
  child=$!
  wait "$child" || rc=$?
  child=
  out=$(grep -m1 '^RESULT loadgen' "$runlog") || true
  j=$(sed -n 's/.* jobs_per_s=\([0-9.]*\).*/\1/p' <<<"$out")
  p=$(sed -n 's/.* pg_us_per_job=\([-0-9.]*\).*/\1/p' <<<"$out")
  v=$(sed -n 's/.* verified=\([0-9]*\).*/\1/p' <<<"$out")
  d=$(sed -n 's/.* ran_dry=\([0-9]*\).*/\1/p' <<<"$out")
  if [ "$rc" != 0 ] || [ "$v" != 1 ] || { [ -n "$d" ] && [ "$d" != 0 ]; } || ! awk -v j="${j:-0}" 'BEGIN { exit !(j > 0) }'; then
    { echo "bench_ab: $2 does not count (exit $rc, verified=${v:-?}, ran_dry=${d:-?}; $runlog):"
      { grep -E '^loadgen:|rror|FAIL|refus|bad option' "$runlog" || grep -v '^$' "$runlog"; } |
        tail -n 3 | cut -c1-300 | sed 's/^/  /'; } >&2
    res="0 -1"
  else
    res="$j ${p:--1}"
  fi
}

log=$new_build/bench-results/ab-$(date -u +%Y%m%d-%H%M%S).txt
logdir=${log%.txt}-runs
mkdir -p "$logdir"
{
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine:  $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "old:      $(git log -1 --format='%h %s' "$old_sha" | cut -c1-72)"
  echo "new:      working tree at $(git log -1 --format='%h' HEAD)$(git diff --quiet HEAD && echo '' || echo ' + changes')"
  echo "settings: WORKERS=$WORKERS COORDS=$COORDS DURATION=$DURATION QUEUE=$QUEUE PIGGYBACK=$PIGGYBACK HEARTBEATS=$HEARTBEATS JOBS_PER_LEASE=$JOBS_PER_LEASE BATCH_RESULTS=$BATCH_RESULTS EVAL_MS=$EVAL_MS HUGEPAGES=$HUGEPAGES"
  printf '%-5s %12s %12s %8s %14s %14s\n' round old_jobs/s new_jobs/s ratio old_pg_us/job new_pg_us/job
} | tee "$log"
ratios=() olds=() news=() failed=0
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    run "$wt/build-bench" "old-$r"; o=$res; run "$new_build" "new-$r"; n=$res
  else
    run "$new_build" "new-$r"; n=$res; run "$wt/build-bench" "old-$r"; o=$res
  fi
  read -r oj op <<<"$o"
  read -r nj np <<<"$n"
  if [ "$oj" = 0 ] || [ "$nj" = 0 ]; then
    failed=$((failed + 1))
    printf '%-5s %12s %12s %8s %14s %14s  (a run does not count: see above)\n' "$r" "$oj" "$nj" - "$op" "$np" | tee -a "$log"
    continue
  fi
  ratio=$(awk -v a="$nj" -v b="$oj" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio") olds+=("$oj") news+=("$nj")
  printf '%-5s %12s %12s %8s %14s %14s\n' "$r" "$oj" "$nj" "$ratio" "$op" "$np" | tee -a "$log"
done
median() { [ $# -gt 0 ] || { echo -; return; }; printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
{
  fails=""
  [ "$failed" = 0 ] || fails=", $failed failed"
  echo "median: old $(median "${olds[@]}") jobs/s, new $(median "${news[@]}") jobs/s, ratio of rounds $(median "${ratios[@]}") (${#ratios[@]} rounds$fails)"
  echo "(this table: $log; each run's output: $logdir/)"
} | tee -a "$log"
[ "$failed" = 0 ]
