#!/usr/bin/env bash
# tools/bench/bench_export.sh -- `kfarm export` on a large campaign (issue 13:
# the dashboard export in <= 10 s at 1,000,000 evaluations). Builds the
# synthetic campaign of tests/browser/synth.sql with N candidates (two
# targets, one job in ten retried: N = 455,000 gives ~1,000,000 evaluations,
# ~20% of the final ones ok with speedups), then R times a full export, each
# into a fresh folder of its own, under /usr/bin/time -v: wall time, the
# export process's CPU, peak RSS, what it wrote. Then R incremental exports
# (`kfarm export --since`, as the coordinator's periodic export does) after
# one new evaluation, into the last full export's folder.
# Then `kfarm campaign status big` STATUS_RUNS times (default 11; 0: none),
# and as many times the status of a campaign that does not exist (the
# process start and the database connection alone): p50 and max in ms of
# wall time, from process start to exit.
#
#   tools/bench/bench_export.sh [N [R]]      (default 455000 3)
#
# Needs a build in build/. Uses its own database `kfbench_export` in the
# tools/devdb cluster ($KFARM_DEVDB_DIR); KEEP=1 reuses its data when the
# database already holds the campaign. Numbers go to docs/benchmarks.md by hand.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
N=${1:-455000}
R=${2:-3}
W=$(mktemp -d /tmp/kfbench-export.XXXXXX)
trap 'rm -rf "$W"' EXIT
tools/devdb start >/dev/null
# `devdb createdb` drops the database first: only when it is not there yet
DB=$(tools/devdb conninfo kfbench_export)
psql "$DB" -qtAX -c "SELECT 1" >/dev/null 2>&1 || DB=$(tools/devdb createdb kfbench_export 2>/dev/null)
KFARM_DB=$DB build/kfarm db migrate >/dev/null
if [ "${KEEP:-0}" != 1 ] || [ "$(psql "$DB" -qtAX -c "SELECT count(*) FROM campaigns WHERE name = 'big'")" = 0 ]; then
  psql "$DB" -qtAX -c "SET client_min_messages = warning" -c "TRUNCATE campaigns, tasks, workers, jobs, evaluations CASCADE" >/dev/null
  s=$(date +%s.%N)
  psql "$DB" -qtAX -v ON_ERROR_STOP=1 -v n="$N" -v name=big -f tests/browser/synth.sql
  # synth.sql stamps candidate g at start + g * 250 ms: past 115,200
  # candidates that is in the future, and every incremental export would
  # rewrite those buckets. One day earlier, all of it lies in the past.
  psql "$DB" -qtAX -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
BEGIN;
UPDATE campaigns SET created_at = created_at - interval '1 day', started_at = started_at - interval '1 day';
UPDATE candidates SET created_at = created_at - interval '1 day';
UPDATE jobs SET created_at = created_at - interval '1 day', finished_at = finished_at - interval '1 day',
  leased_at = leased_at - interval '1 day';
UPDATE evaluations SET created_at = created_at - interval '1 day';
UPDATE proposals SET created_at = created_at - interval '1 day', answered_at = answered_at - interval '1 day',
  finished_at = finished_at - interval '1 day';
COMMIT;
VACUUM ANALYZE;
SQL
  echo "synthetic data in $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
fi
# the counts the campaign list reads, as the coordinator would have kept them
# (a database kept from before synth.sql rebuilt them has none)
psql "$DB" -qtAX -v ON_ERROR_STOP=1 -f tests/recount.sql >/dev/null
psql "$DB" -qtAX -c "SELECT 'data: ' || (SELECT count(*) FROM candidates) || ' candidates, ' ||
  (SELECT count(*) FROM jobs) || ' jobs, ' || (SELECT count(*) FROM evaluations) || ' evaluations (' ||
  (SELECT count(*) FROM evaluations WHERE is_final AND verdict = 'ok') || ' final ok)'"
run() { # label, site folder, then the kfarm export arguments
  local label=$1 site=$2; shift 2
  KFARM_DB=$DB /usr/bin/time -v -o "$W/time" build/kfarm export --out "$site" "$@" >/dev/null
  local wall rss cpu
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$W/time")
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$W/time")
  cpu=$(awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {printf "%.2f / %.2f", u, s}' "$W/time")
  echo "$label: wall ${wall} s, export process user / system CPU ${cpu} s, peak RSS ${rss} MiB, site $(du -sm "$site" | cut -f1) MiB in $(find "$site" -type f | wc -l) files, campaign file $(du -m "$site"/data/c[0-9]*.js | cut -f1 | head -1) MiB"
}
# Each full export into a folder of its own, none deleted before the end:
# on an ext4 without a journal (this project's dev VM), creating files
# right after thousands were deleted makes the inode allocator step over
# each recently freed inode (find_inode_bit -> recently_deleted), and a
# full export that followed an `rm -rf` of the previous one spent 3-5 s of
# system CPU instead of 0.7 (docs/benchmarks.md, 2026-12-07 afternoon).
for i in $(seq "$R"); do
  run "full export $i" "$W/site$i"
done
mv "$W/site$R" "$W/site"
for i in $(seq "$((R - 1))"); do rm -rf "$W/site$i"; done
if build/kfarm export --help | grep -q -- --since; then
  for i in $(seq "$R"); do
    since=$(psql "$DB" -qtAX -c "SELECT now()")
    psql "$DB" -qtAX -c "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, detail, is_final)
      SELECT id, candidate_id, 9, 'synth-w1', -1000000 - $i, 'infra_error', 'bench mark', false FROM jobs
      WHERE candidate_id = (SELECT min(id) + 100 * $i FROM candidates) AND target = 'cpu'" >/dev/null
    touch "$W/mark"
    run "incremental export $i (one new evaluation)" "$W/site" --since "$since"
    echo "  files rewritten: $(find "$W/site" -type f -newer "$W/mark" | wc -l)"
  done
  psql "$DB" -qtAX -c "DELETE FROM evaluations WHERE detail = 'bench mark'" >/dev/null
fi
# campaign status: the two-target campaign, then the fixed cost of the command
status_runs=${STATUS_RUNS:-11}
if [ "$status_runs" -gt 0 ]; then
  time_ms() { # runs "$@" once; prints its wall time in ms
    local t0 t1
    t0=$(date +%s%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000000 ))
  }
  stats() { sort -n | awk '{v[NR] = $1} END {printf "p50 %d ms, max %d ms (%d runs)", v[int((NR + 1) / 2)], v[NR], NR}'; }
  KFARM_DB=$DB build/kfarm campaign status big >/dev/null # warm the cache
  echo "campaign status big: $(for i in $(seq "$status_runs"); do KFARM_DB=$DB time_ms build/kfarm campaign status big; done | stats)"
  echo "campaign status of no campaign (process start + connection): $(for i in $(seq "$status_runs"); do
    KFARM_DB=$DB time_ms build/kfarm campaign status no-such-campaign; done | stats)"
fi
