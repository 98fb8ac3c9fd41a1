#!/usr/bin/env bash
# tools/bench/bench_dispatch.sh -- dispatch at fleet scale (issue 13): the real
# coordinator under N simulated workers, beside graphile-worker on the same
# PostgreSQL, in one command and one run.
#
#   tools/bench/bench_dispatch.sh
#
# Environment (all optional):
#   WORKERS="10 100 1000"  simulated worker counts
#   RUNS=3                 runs per count and system (the table shows medians)
#   DURATION=10            measured window per run, s
#   QUEUE=20000            kernelfarm jobs queued before each run
#   HISTORY=0              finished jobs (with candidates and evaluations) the
#                          campaign holds before its queue (loadgen --history,
#                          written with generate_series)
#   GRAPHILE_QUEUE=100000  graphile-worker jobs queued before each plain run
#   GRAPHILE_BATCHED_QUEUE=50000 x DURATION  the same for each batched run: enough
#                          that its window lasts DURATION like kernelfarm's
#                          (batched, it did 34,000-47,500 jobs/s on the 2-core
#                          VM; 100,000 ran dry in 2.6 s, a window of its ramp-up)
#   BUILD=build-bench      build folder (configured here when it has no cache)
#   KFARM_DEVDB_DIR=/tmp/kfdispatch-db  the private PostgreSQL cluster
#   KEEP_DB=1              leave the cluster running at the end
#   KEEP_DATA=1            keep each kernelfarm run's database (kfd_N_RUN) for
#                          inspection (pg_stat_user_indexes, EXPLAIN) until
#                          the next run of the same N and RUN replaces it
#   PIGGYBACK=1            loadgen's Results carry the next GetJob (2 messages
#                          per job instead of 3; default 0)
#   SYSTEMS="kfarm graphile"  which systems to run (default both)
#   JOBS_PER_LEASE=1       loadgen --jobs-per-lease: jobs per GetJob (max_jobs),
#                          one heartbeat for all of them (default 1)
#   BATCH_RESULTS=0        loadgen --batch-results: the results of a lease's jobs
#                          in one message (Result.more; default 0)
#   EVAL_MS=0              loadgen --eval-ms: each job is "evaluated" for 0.5-1.5x
#                          this many ms before its heartbeat or result (a fleet
#                          of real GPUs: N workers offer N/EVAL_MS jobs per ms;
#                          default 0, the closed loop of zero-cost evaluations)
#   STAGGER=0              loadgen --stagger: with EVAL_MS, each worker's first
#                          GetJob at a random point of its first lease cycle
#                          (a fleet out of step; 0: all start at once and
#                          their results keep arriving in waves)
#   SETTLE=1               loadgen --settle: VACUUM, CHECKPOINT and sync after
#                          the setup, before the workers start (0: the setup's
#                          autovacuum and writeback may land in the window)
#   TASKS_ONCE=1           loadgen --tasks-once: a task's files once per simulated
#                          worker, as kfarm-worker asks (GetJob.tasks_once);
#                          0: with every job (the protocol before 2026-12-07)
#   SOURCES_ONCE=          loadgen --sources-once: unset, loadgen's default (1:
#                          a source once per reply, as kfarm-worker asks with
#                          GetJob.sources_once; a loadgen older than that has
#                          no such option, and is not passed one); 0: with
#                          every job
#   SLOW_MS=               loadgen --slow-ms: list each reply slower than this
#                          (stderr "slow CALL UNIX_TIME LATENCY ms")
#   HEARTBEATS=1           loadgen --heartbeats: heartbeats per lease
#   COORD_THREADS=         kfarm-coordinator --threads (default: the coordinator's)
#   COORDS=1               coordinator counts to run, e.g. COORDS="1 2 4" (or 1,2,4):
#                          K coordinators on one database, each on its own port,
#                          the fleet spread over them (loadgen worker i to
#                          coordinator i mod K); one kernelfarm run per K,
#                          graphile-worker once per run (it has no such
#                          setting); the summary has one row per N and K
#   HUGEPAGES=             1: PostgreSQL's shared memory in huge pages
#                          (tools/devdb KFARM_DEVDB_HUGEPAGES: reserves them
#                          as root), 0: never; unset: PostgreSQL's default
#                          (huge_pages=try). A cluster already running the
#                          other way must be stopped first. The output's
#                          header says which it ran with.
#   CONNECT_ALL=0          1: every simulated worker connects to all K
#                          coordinators (loadgen --connect-all 1), so one
#                          worker's requests reach different coordinators
#
# What it does:
# 1. builds loadgen, kfarm-coordinator and kfarm (RelWithDebInfo, CUDA off,
#    nice'd, 2 jobs); installs tools/bench/graphile's locked npm packages
#    (npm ci) when node_modules is missing;
# 2. starts a private PostgreSQL (tools/devdb, PostgreSQL 15+, fsync on, unix
#    socket);
# 3. for each N in WORKERS, RUNS times, interleaved so that machine load
#    drifts over all three alike, each in a fresh database (createdb; the
#    schema is applied by the coordinator at start, as in production, and by
#    loadgen's kf_db_migrate):
#    - kernelfarm: starts build/kfarm-coordinator --listen tcp://127.0.0.1:PORT
#      (as tests/lib.sh does, KFARM_DB in the environment, default lease),
#      runs `loadgen --coordinator ADDR --workers N --duration DURATION
#      --queue QUEUE` (tools/bench/loadgen.c: enrolls N identities and queues
#      the jobs in the database, then N REQ sockets speak the real protocol:
#      Register, GetJob -> Heartbeat -> Result ok), stops the coordinator
#      (SIGTERM) and records its CPU time;
#    - graphile-worker, plain and batched: `node tools/bench/graphile/bench.js
#      --workers N --queue GRAPHILE_QUEUE (batched: GRAPHILE_BATCHED_QUEUE)
#      --duration DURATION [--batched]`
#      (concurrency N, a task that does no work; batched: local queue and
#      grouped completions);
# 4. prints every run's RESULT lines, then one table of medians:
#      workers | kernelfarm jobs/s | get-job p99 (ms) | graphile jobs/s |
#      graphile batched jobs/s | ratio
#    where ratio = kernelfarm jobs/s / graphile batched jobs/s (the issue's
#    goal: at least 0.5). Everything is also saved to
#    BUILD/bench-results/dispatch-<timestamp>.txt; coordinator logs are kept
#    beside it (dispatch-<timestamp>-logs/).
# Units: jobs/s = results acknowledged (kernelfarm: stored, then answered
# OK; graphile: task returned) per second of the measured window; latencies
# in ms, from sending a request to its authenticated reply.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
build=${BUILD:-$here/build-bench}
case $build in /*) ;; *) build=$here/$build ;; esac
workers_list=${WORKERS:-10 100 1000}
runs=${RUNS:-3}
duration=${DURATION:-10}
queue=${QUEUE:-20000}
gqueue=${GRAPHILE_QUEUE:-100000}
gbqueue=${GRAPHILE_BATCHED_QUEUE:-$((50000 * ${duration%.*}))}

echo "== build ($build)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  nice -n 10 cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKFARM_CUDA=OFF >/dev/null
fi
nice -n 10 cmake --build "$build" -j2 --target loadgen kfarm-coordinator kfarm >/dev/null
if [ ! -d tools/bench/graphile/node_modules ]; then
  echo "== npm ci (tools/bench/graphile)"
  (cd tools/bench/graphile && npm ci --no-audit --no-fund >/dev/null)
fi

export KFARM_DEVDB_DIR=${KFARM_DEVDB_DIR:-/tmp/kfdispatch-db}
export KFARM_SRC=$here
echo "== database (KFARM_DEVDB_DIR=$KFARM_DEVDB_DIR)"
KFARM_DEVDB_HUGEPAGES=${HUGEPAGES:-} tools/devdb start >/dev/null
# node-postgres reads the libpq environment: the socket folder, port, user
conn=$(tools/devdb conninfo)
export PGHOST=$(sed -n 's/.*host=\([^ ]*\).*/\1/p' <<<"$conn")
export PGPORT=$(sed -n 's/.*port=\([^ ]*\).*/\1/p' <<<"$conn")
export PGUSER=$(sed -n 's/.*user=\([^ ]*\).*/\1/p' <<<"$conn")

mkdir -p "$build/bench-results"
stamp=$(date +%Y%m%d-%H%M%S)
out=$build/bench-results/dispatch-$stamp.txt
logs=$build/bench-results/dispatch-$stamp-logs
mkdir -p "$logs"
port=$((20000 + RANDOM % 20000))
coords_list=$(tr ',' ' ' <<<"${COORDS:-1}")
clk=$(getconf CLK_TCK)

coord_pids=()
stop_coordinator() {
  local pid
  [ "${#coord_pids[@]}" -gt 0 ] || return 0
  for pid in "${coord_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${coord_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  coord_pids=()
}
trap 'stop_coordinator; [ "${KEEP_DB:-0}" = 1 ] || tools/devdb stop >/dev/null 2>&1 || true' EXIT

run_kfarm() { # N RUN [K coordinators]
  local n=$1 r=$2 k=${3:-1} db log cpu pid i rc=0 args=() pids=()
  db=$(tools/devdb createdb "kfd_${n}_$r" 2>/dev/null)
  # K coordinators on one database, ports port .. port+K-1; the first
  # applies the schema, the others wait for it (--no-migrate)
  for i in $(seq 0 $((k - 1))); do
    log=$logs/coordinator-$n-$r-k$k-$i.log
    KFARM_DB=$db "$build/kfarm-coordinator" --listen "tcp://127.0.0.1:$((port + i))" \
      ${COORD_THREADS:+--threads "$COORD_THREADS"} $([ "$i" = 0 ] || echo --no-migrate) >"$log" 2>&1 &
    pid=$!
    coord_pids+=("$pid")
    pids+=("$pid")
    for _ in $(seq 300); do grep -q "coordinator started" "$log" && break; sleep 0.1; done
    grep -q "coordinator started" "$log" || { echo "coordinator $i did not start (log: $log)"; tail -5 "$log"; stop_coordinator; return 1; }
    args+=(--coordinator "tcp://127.0.0.1:$((port + i))")
  done
  KFARM_DB=$db "$build/tools/bench/loadgen" "${args[@]}" --connect-all "${CONNECT_ALL:-0}" --workers "$n" \
    --duration "$duration" --queue "$queue" --history "${HISTORY:-0}" --piggyback "${PIGGYBACK:-0}" \
    --jobs-per-lease "${JOBS_PER_LEASE:-1}" --batch-results "${BATCH_RESULTS:-0}" \
    --eval-ms "${EVAL_MS:-0}" --stagger "${STAGGER:-0}" ${HEARTBEATS:+--heartbeats "$HEARTBEATS"} \
    ${SLOW_MS:+--slow-ms "$SLOW_MS"} --settle "${SETTLE:-1}" --tasks-once "${TASKS_ONCE:-1}" \
    ${SOURCES_ONCE:+--sources-once "$SOURCES_ONCE"} || rc=$?
  cpu=0
  for pid in "${pids[@]}"; do
    cpu=$(awk -v t="$clk" -v c="$cpu" '{printf "%.2f", c + ($14 + $15) / t}' "/proc/$pid/stat" 2>/dev/null || echo "$cpu")
  done
  echo "RESULT coordinator workers=$n run=$r coords=$k cpu_s=$cpu"
  stop_coordinator
  [ "${KEEP_DATA:-0}" = 1 ] || tools/devdb dropdb "kfd_${n}_$r" >/dev/null 2>&1 || true
  return $rc
}

run_graphile() { # N RUN [--batched]
  local n=$1 r=$2 rc=0 q=$gqueue
  shift 2
  [ "${1:-}" = --batched ] && q=$gbqueue
  tools/devdb createdb "gwd_${n}_$r" >/dev/null 2>&1
  (cd tools/bench/graphile && PGDATABASE="gwd_${n}_$r" node bench.js --workers "$n" --queue "$q" \
    --duration "$duration" --settle "${SETTLE:-1}" "$@" 2> >(grep -v "smaller than concurrency" >&2)) || rc=$?
  tools/devdb dropdb "gwd_${n}_$r" >/dev/null 2>&1 || true
  return $rc
}

status=0
{
  trap stop_coordinator EXIT # this group runs in a subshell of its own (the pipe)
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine:  $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
       "$(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "postgres: $(psql "$conn" -tAc 'SHOW server_version' 2>/dev/null || echo '?') (devdb: fsync on, unix socket; $(tools/devdb status | sed 's/.*; //'))"
  echo "node:     $(node --version), graphile-worker $(node -p 'require("./tools/bench/graphile/node_modules/graphile-worker/package.json").version')"
  echo "commit:   $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
  echo "settings: WORKERS='$workers_list' RUNS=$runs DURATION=$duration QUEUE=$queue GRAPHILE_QUEUE=$gqueue GRAPHILE_BATCHED_QUEUE=$gbqueue PIGGYBACK=${PIGGYBACK:-0} JOBS_PER_LEASE=${JOBS_PER_LEASE:-1} BATCH_RESULTS=${BATCH_RESULTS:-0} EVAL_MS=${EVAL_MS:-0} STAGGER=${STAGGER:-0} HEARTBEATS=${HEARTBEATS:-1} COORD_THREADS=${COORD_THREADS:-default} COORDS='$coords_list' CONNECT_ALL=${CONNECT_ALL:-0} HISTORY=${HISTORY:-0} HUGEPAGES=${HUGEPAGES:-try} TASKS_ONCE=${TASKS_ONCE:-1} SOURCES_ONCE=${SOURCES_ONCE:-default}"
  rc=0
  for n in $workers_list; do
    for r in $(seq "$runs"); do
      for k in $coords_list; do
        echo
        echo "== workers=$n run=$r coordinators=$k: kernelfarm (load $(cut -d' ' -f1 /proc/loadavg))"
        run_kfarm "$n" "$r" "$k" || rc=1
      done
      [[ " ${SYSTEMS:-kfarm graphile} " == *" graphile "* ]] || continue
      echo "== workers=$n run=$r: graphile-worker"
      run_graphile "$n" "$r" || rc=1
      echo "== workers=$n run=$r: graphile-worker, batched"
      run_graphile "$n" "$r" --batched || rc=1
    done
  done
  echo
  echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit $rc
} 2>&1 | tee "$out" || status=1

echo
echo "== summary (medians of $runs runs; ratio = kernelfarm / graphile batched)" | tee -a "$out"
awk '
function kv(line, key,   i, n, f, p) {
  n = split(line, f, " ")
  for (i = 1; i <= n; i++) { p = index(f[i], "="); if (substr(f[i], 1, p - 1) == key) return substr(f[i], p + 1) }
  return ""
}
function median(list,   v, n, i, j, t) {
  n = split(list, v, " ")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
  if (n == 0) return -1
  if (n % 2) return v[(n + 1) / 2]
  return (v[n / 2] + v[n / 2 + 1]) / 2
}
/^RESULT loadgen / { w = kv($0, "workers"); k = kv($0, "coords"); if (k == "") k = 1; key = w " " k
                     if (!(key in seen)) { seen[key] = 1; order[++no] = key }
                     kf[key] = kf[key] " " kv($0, "jobs_per_s"); p99[key] = p99[key] " " kv($0, "getjob_p99_ms")
                     r99[key] = r99[key] " " kv($0, "result_p99_ms") }
/^RESULT graphile / { w = kv($0, "workers")
                      if (kv($0, "batched") == 1) gb[w] = gb[w] " " kv($0, "jobs_per_s"); else g[w] = g[w] " " kv($0, "jobs_per_s") }
END {
  printf "| %7s | %6s | %17s | %16s | %15s | %15s | %23s | %7s |\n", "workers", "coords", "kernelfarm jobs/s", "get-job p99 (ms)", "result p99 (ms)", "graphile jobs/s", "graphile batched jobs/s", "ratio"
  printf "|--------:|-------:|------------------:|-----------------:|----------------:|----------------:|------------------------:|--------:|\n"
  for (i = 1; i <= no; i++) {
    split(order[i], wk, " "); w = wk[1]
    mk = median(kf[order[i]]); mp = median(p99[order[i]]); mr = median(r99[order[i]]); mg = median(g[w]); mb = median(gb[w])
    printf "| %7s | %6s | %17.1f | %16.1f | %15.1f | %15.1f | %23.1f | %7.4f |\n", w, wk[2], mk, mp, mr, mg, mb, (mb > 0 ? mk / mb : 0)
  }
}' "$out" | tee -a "$out"
echo "(full output: $out; coordinator logs: $logs)"
[ "$status" = 0 ] || echo "bench_dispatch: SOME RUN FAILED (see above)" >&2
exit "$status"
