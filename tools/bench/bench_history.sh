#!/usr/bin/env bash
# tools/bench/bench_history.sh -- dispatch and `kfarm campaign status` after a
# long campaign (issue 13): the lease rate through the real coordinator when
# the campaign already holds H finished jobs, beside H = 0, and the latency of
# `kfarm campaign status` on that campaign.
#
#   tools/bench/bench_history.sh
#
# Environment (all optional):
#   HISTORIES="0 1000000"  finished jobs (each with its candidate and final
#                          evaluation; every 50th also a failed attempt)
#                          written by loadgen --history with generate_series
#   WORKERS=100            simulated workers; JOBS_PER_LEASE=1, PIGGYBACK=1,
#                          BATCH_RESULTS=0 as in bench_dispatch.sh
#   QUEUE=20000            jobs queued after the history
#   DURATION=10            measured window, s
#   STATUS_RUNS=21         `kfarm campaign status` calls timed per history
#   EXPLAIN=1              also save EXPLAIN (ANALYZE, BUFFERS) of the status
#                          statements (BUILD/bench-results/history-*-explain.txt)
#   BUILD=build-bench      build folder; SKIP_BUILD=1: use the binaries there as they are
#   KFARM_DEVDB_DIR=/tmp/kfhistory-db  the private PostgreSQL cluster
#   HUGEPAGES=             1: PostgreSQL's shared memory in huge pages, 0: never,
#                          unset: PostgreSQL's default (as bench_dispatch.sh)
#
# Per history H, in a fresh database: start kfarm-coordinator, run loadgen
# (its RESULT line: jobs/s and p50/p99 of each call), stop the coordinator,
# start the campaign again (loadgen pauses it; status of a running campaign
# also asks which workers serve it), VACUUM ANALYZE (as autovacuum would
# after a bulk load), then time STATUS_RUNS calls of `kfarm campaign status
# NAME` from process start to exit (the first is dropped: cold cache) and
# print
#   RESULT status history=H runs=N p50_ms=.. p95_ms=.. max_ms=..
# then the same through a coordinator started with --operator-socket
# (RESULT status_operator_socket ...; its answer compared with the direct
# one byte for byte).
# Units: ms of wall-clock time per command, including the process start and
# the database connection.
set -euo pipefail
# time_status LABEL H NAME CMD...: STATUS_RUNS calls of `CMD campaign status
# NAME`, the first dropped (cold); prints RESULT LABEL history=H ...
time_status() {
  local label=$1 h=$2 name=$3 i t0 t1; shift 3
  local ms=()
  for i in $(seq "$sruns"); do
    t0=$(date +%s%N)
    "$@" campaign status "$name" >/dev/null
    t1=$(date +%s%N)
    [ "$i" = 1 ] || ms+=("$(( (t1 - t0) / 1000 ))")
  done
  printf '%s\n' "${ms[@]}" | sort -n | awk -v h="$h" -v l="$label" '{ v[NR] = $1 / 1000 }
    END { printf "RESULT %s history=%s runs=%d p50_ms=%.1f p95_ms=%.1f max_ms=%.1f\n", l, h, NR,
          v[int((NR + 1) / 2)], v[int(NR * 0.95 + 0.5)], v[NR] }'
}
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
build=${BUILD:-$here/build-bench}
case $build in /*) ;; *) build=$here/$build ;; esac
histories=${HISTORIES:-0 1000000}
workers=${WORKERS:-100}
queue=${QUEUE:-20000}
duration=${DURATION:-10}
sruns=${STATUS_RUNS:-21}

echo "== build ($build)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  nice -n 10 cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKFARM_CUDA=OFF >/dev/null
fi
[ "${SKIP_BUILD:-0}" = 1 ] || nice -n 10 cmake --build "$build" -j2 --target loadgen kfarm-coordinator kfarm >/dev/null

export KFARM_DEVDB_DIR=${KFARM_DEVDB_DIR:-/tmp/kfhistory-db}
export KFARM_SRC=$here
KFARM_DEVDB_HUGEPAGES=${HUGEPAGES:-} tools/devdb start >/dev/null
trap '[ -n "${coord:-}" ] && kill "$coord" 2>/dev/null; [ "${KEEP_DB:-0}" = 1 ] || tools/devdb stop >/dev/null 2>&1 || true' EXIT
conn=$(tools/devdb conninfo)
mkdir -p "$build/bench-results"
stamp=$(date +%Y%m%d-%H%M%S)
out=$build/bench-results/history-$stamp.txt
port=$((20000 + RANDOM % 20000))
addr=tcp://127.0.0.1:$port

{
  # this group is a subshell of its own (the pipe): its coordinator is
  # stopped here when a step fails (set -e)
  trap '[ -n "${coord:-}" ] && kill "$coord" 2>/dev/null || true' EXIT
  echo "date:     $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine:  $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
       "$(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "postgres: $(psql "$conn" -tAc 'SHOW server_version') ($(tools/devdb status | sed 's/.*; //'))"
  echo "commit:   $(git rev-parse --short HEAD 2>/dev/null || echo ?)$([ "${SKIP_BUILD:-0}" = 1 ] && echo " (binaries as built before: SKIP_BUILD=1)")"
  echo "settings: HISTORIES='$histories' WORKERS=$workers QUEUE=$queue DURATION=$duration STATUS_RUNS=$sruns"
  for h in $histories; do
    echo
    echo "== history $h (load $(cut -d' ' -f1 /proc/loadavg))"
    dbname=kfh_$h
    tools/devdb dropdb "$dbname" >/dev/null 2>&1 || true
    db=$(tools/devdb createdb "$dbname")
    log=$build/bench-results/history-$stamp-coordinator-$h.log
    KFARM_DB=$db "$build/kfarm-coordinator" --listen "$addr" >"$log" 2>&1 &
    coord=$!
    for _ in $(seq 300); do grep -q "coordinator started" "$log" && break; sleep 0.1; done
    lg=$(KFARM_DB=$db "$build/tools/bench/loadgen" --coordinator "$addr" --workers "$workers" \
      --duration "$duration" --queue "$queue" --history "$h" --piggyback "${PIGGYBACK:-1}" \
      --jobs-per-lease "${JOBS_PER_LEASE:-1}" --batch-results "${BATCH_RESULTS:-0}")
    echo "$lg"
    kill -TERM "$coord"; wait "$coord" 2>/dev/null || true; coord=
    name=$(sed -n 's/.*(campaign \([^)]*\)).*/\1/p' <<<"$lg" | head -1)
    KFARM_DB=$db "$build/kfarm" campaign start "$name" >/dev/null
    psql "$db" -qc "VACUUM ANALYZE" >/dev/null
    KFARM_DB=$db "$build/kfarm" campaign status "$name" | tee "$build/bench-results/history-$stamp-status-$h.txt"
    time_status status "$h" "$name" env KFARM_DB="$db" "$build/kfarm"
    # the same through a coordinator's operator socket (its warm connection)
    ops=$(mktemp -u /tmp/kfh-ops.XXXXXX)
    KFARM_DB=$db "$build/kfarm-coordinator" --listen "$addr" --operator-socket "$ops" >>"$log" 2>&1 &
    coord=$!
    for _ in $(seq 300); do grep -q "operator socket $ops\$" "$log" && break; sleep 0.1; done
    # without a database of its own: only the coordinator can answer it
    env -u KFARM_DB KFARM_OPERATOR_SOCKET="$ops" "$build/kfarm" campaign status "$name" \
      >"$build/bench-results/history-$stamp-status-ops-$h.txt"
    if cmp -s "$build/bench-results/history-$stamp-status-$h.txt" "$build/bench-results/history-$stamp-status-ops-$h.txt"
    then echo "(the operator socket's answer is the database's, byte for byte)"
    else echo "(the operator socket's answer DIFFERS: $build/bench-results/history-$stamp-status-ops-$h.txt)"; fi
    time_status status_operator_socket "$h" "$name" env -u KFARM_DB KFARM_OPERATOR_SOCKET="$ops" "$build/kfarm"
    kill -TERM "$coord"; wait "$coord" 2>/dev/null || true; coord=
    if [ "${EXPLAIN:-1}" = 1 ]; then
      # the plan and time of every statement one `kfarm campaign status`
      # runs (auto_explain into the server's log, cut out of it)
      ex=$build/bench-results/history-$stamp-explain-$h.txt
      slog=$(cat "$KFARM_DEVDB_DIR/location" 2>/dev/null || echo "$KFARM_DEVDB_DIR")/server.log
      off=$(stat -c %s "$slog" 2>/dev/null || echo 0)
      PGOPTIONS="-c session_preload_libraries=auto_explain -c auto_explain.log_min_duration=0 \
-c auto_explain.log_analyze=on -c auto_explain.log_buffers=on" \
        KFARM_DB=$db "$build/kfarm" campaign status "$name" >/dev/null || true
      sleep 0.5
      tail -c +"$((off + 1))" "$slog" >"$ex" 2>/dev/null || true
      echo "(EXPLAIN ANALYZE of the status statements: $ex; the slowest, ms:" \
        "$(grep -o 'duration: [0-9.]* ms' "$ex" | awk '{print $2}' | sort -rn | head -4 | tr '\n' ' '))"
    fi
    tools/devdb dropdb "$dbname" >/dev/null 2>&1 || true
  done
} 2>&1 | tee "$out"
echo "(full output: $out)"
