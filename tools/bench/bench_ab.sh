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
# Each round runs the old build, then the new one, back to back; a round's
# ratio (new / old) cancels what drifts slower than a round (~3 min).
#
# OLD_REV (any git revision) is checked out into a temporary worktree and
# built there (Release, CUDA off); NEW is this working tree, built in
# $BUILD (default build-bench). Each side runs its own loadgen, which
# writes its own schema: a schema change is measured with the schema of
# each side. ROUNDS defaults to 5.
#
# Environment: anything bench_dispatch.sh reads is passed on (WORKERS,
# DURATION, QUEUE, JOBS_PER_LEASE, ...); unset, the 1,000-worker closed loop
# of docs/benchmarks.md is run: WORKERS=1000 DURATION=15 QUEUE=400000
# PIGGYBACK=1 HEARTBEATS=0 JOBS_PER_LEASE=64 BATCH_RESULTS=1 EVAL_MS=0
# HUGEPAGES=1. KEEP_WORKTREE=1 leaves the old worktree and its build.
#
# Output: one line per round (jobs/s and PostgreSQL CPU per job of each
# side, the ratio), then the medians. Nothing else may run on the machine
# meanwhile (a build, the tests): it would land in one side's rounds.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
old_rev=${1:?usage: tools/bench/bench_ab.sh OLD_REV [ROUNDS]}
rounds=${2:-5}
case $rounds in ''|*[!0-9]*|0) echo "bench_ab: ROUNDS must be a positive number" >&2; exit 2 ;; esac
old_sha=$(git rev-parse --verify --quiet "$old_rev^{commit}") ||
  { echo "bench_ab: no such revision: $old_rev" >&2; exit 2; }
case ${WORKERS:-1000} in ''|*[!0-9]*) echo "bench_ab: WORKERS must be one count" >&2; exit 2 ;; esac
new_build=${BUILD:-$here/build-bench}
wt=$(mktemp -d /tmp/kfarm-ab.XXXXXX)
cleanup() {
  if [ "${KEEP_WORKTREE:-0}" = 1 ]; then
    echo "bench_ab: old worktree kept: $wt" >&2
  else
    git -C "$here" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"
    git -C "$here" worktree prune >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
git worktree add --detach "$wt" "$old_sha" >/dev/null
echo "== building the old side ($(git log -1 --format='%h %s' "$old_sha" | cut -c1-72))"
cmake -S "$wt" -B "$wt/build-bench" -DCMAKE_BUILD_TYPE=Release -DKFARM_CUDA=OFF >/dev/null
cmake --build "$wt/build-bench" -j2 --target loadgen kfarm-coordinator kfarm >/dev/null
echo "== building the new side (working tree, $new_build)"
if [ ! -f "$new_build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$new_build" -DCMAKE_BUILD_TYPE=Release -DKFARM_CUDA=OFF >/dev/null
fi
cmake --build "$new_build" -j2 --target loadgen kfarm-coordinator kfarm >/dev/null

export WORKERS=${WORKERS:-1000} DURATION=${DURATION:-15} QUEUE=${QUEUE:-400000}
export PIGGYBACK=${PIGGYBACK:-1} HEARTBEATS=${HEARTBEATS:-0} JOBS_PER_LEASE=${JOBS_PER_LEASE:-64}
export BATCH_RESULTS=${BATCH_RESULTS:-1} EVAL_MS=${EVAL_MS:-0} HUGEPAGES=${HUGEPAGES:-1}
export SYSTEMS=kfarm RUNS=1 KEEP_DB=1

# run BUILD: prints "jobs_per_s pg_us_per_job" of one run (0 -1 if it failed)
run() {
  local out
  out=$(BUILD=$1 tools/bench/bench_dispatch.sh 2>&1 | grep '^RESULT loadgen' | head -1) || true
  local j p v
  j=$(sed -n 's/.* jobs_per_s=\([0-9.]*\).*/\1/p' <<<"$out")
  p=$(sed -n 's/.* pg_us_per_job=\([-0-9.]*\).*/\1/p' <<<"$out")
  v=$(sed -n 's/.* verified=\([0-9]*\).*/\1/p' <<<"$out")
  if [ -z "$j" ] || [ "$v" != 1 ]; then echo "0 -1"; else echo "$j ${p:--1}"; fi
}

log=$new_build/bench-results/ab-$(date -u +%Y%m%d-%H%M%S).txt
mkdir -p "$(dirname "$log")"
{
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine:  $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "old:      $(git log -1 --format='%h %s' "$old_sha" | cut -c1-72)"
  echo "new:      working tree at $(git log -1 --format='%h' HEAD)$(git diff --quiet HEAD && echo '' || echo ' + changes')"
  echo "settings: WORKERS=$WORKERS DURATION=$DURATION QUEUE=$QUEUE PIGGYBACK=$PIGGYBACK HEARTBEATS=$HEARTBEATS JOBS_PER_LEASE=$JOBS_PER_LEASE BATCH_RESULTS=$BATCH_RESULTS EVAL_MS=$EVAL_MS HUGEPAGES=$HUGEPAGES"
  printf '%-5s %12s %12s %8s %14s %14s\n' round old_jobs/s new_jobs/s ratio old_pg_us/job new_pg_us/job
} | tee "$log"
ratios=() olds=() news=() failed=0
for r in $(seq 1 "$rounds"); do
  read -r oj op < <(run "$wt/build-bench")
  read -r nj np < <(run "$new_build")
  if [ "$oj" = 0 ] || [ "$nj" = 0 ]; then
    failed=$((failed + 1))
    printf '%-5s %12s %12s %8s %14s %14s  (a run failed or was not verified)\n' "$r" "$oj" "$nj" - "$op" "$np" | tee -a "$log"
    continue
  fi
  ratio=$(awk -v a="$nj" -v b="$oj" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio") olds+=("$oj") news+=("$nj")
  printf '%-5s %12s %12s %8s %14s %14s\n' "$r" "$oj" "$nj" "$ratio" "$op" "$np" | tee -a "$log"
done
median() { [ $# -gt 0 ] || { echo -; return; }; printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
{
  fails=""
  [ "$failed" = 0 ] || fails=", $failed failed"
  echo "median: old $(median "${olds[@]}") jobs/s, new $(median "${news[@]}") jobs/s, ratio of rounds $(median "${ratios[@]}") (${#ratios[@]} rounds$fails)"
  echo "(full output: $log)"
} | tee -a "$log"
[ "$failed" = 0 ]
