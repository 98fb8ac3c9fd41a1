# tests/lib.sh -- helpers for the integration and fault tests (bash).
# Each test gets its own database in the ctest `db` fixture's cluster, its own
# scratch folder and coordinator socket; every worker is enrolled with its own
# credential (kfarm worker add) the first time it starts; every process the
# test starts is killed on exit.
set -euo pipefail
: "${KFARM_BIN:?KFARM_BIN (build dir) not set: run through ctest}"
: "${KFARM_SRC:?KFARM_SRC not set}"
T_NAME=$(basename "$0" .sh)
T_DIR=$(mktemp -d "/tmp/kfarm-$T_NAME.XXXXXX")
T_PIDS=()
export KFARM_DB=$("$KFARM_SRC/tools/devdb" createdb "kft_$T_NAME" 2>/dev/null)
T_ADDR="ipc://$T_DIR/coord.ipc"
T_PASS=0
T_FAIL=0

t_cleanup() {
  local rc=$?
  for p in "${T_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.3
  for p in "${T_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # children a wrapper started (faketime runs the worker as its child):
  # anything still running with this test's scratch folder on its command line
  pkill -9 -f -- "$T_DIR/" 2>/dev/null || true
  { wait; } 2>/dev/null || true
  if [ "$T_FAIL" -eq 0 ] && [ "$rc" -eq 0 ] && [ -z "${T_KEEP:-}" ]; then rm -rf "$T_DIR"; else echo "logs kept in $T_DIR" >&2; fi
}
trap t_cleanup EXIT

log() { echo "[$T_NAME] $*" >&2; }
sql() { psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -c "$1"; }
check() { # check DESCRIPTION TEST-COMMAND...
  local d=$1; shift
  if "$@"; then T_PASS=$((T_PASS + 1)); log "ok: $d"; else T_FAIL=$((T_FAIL + 1)); log "FAIL: $d"; fi
}
eq() { [ "$1" = "$2" ] || { echo "  expected '$2', got '$1'" >&2; return 1; }; }
finish() { echo "$T_PASS passed, $T_FAIL failed"; [ "$T_FAIL" -eq 0 ]; }

start_coordinator() { # extra args passed through
  "$KFARM_BIN/kfarm-coordinator" --listen "$T_ADDR" "$@" >>"$T_DIR/coordinator.log" 2>&1 &
  T_COORD=$!
  T_PIDS+=($T_COORD)
}
enroll() { # enroll ID -- issue worker ID its credential ($T_DIR/ID.cred), once
  [ -f "$T_DIR/$1.cred" ] || "$KFARM_BIN/kfarm" worker add "$1" --out "$T_DIR/$1.cred" 2>/dev/null
}
start_worker() { # start_worker ID [extra args]
  local id=$1; shift
  enroll "$id"
  "$KFARM_BIN/kfarm-worker" run --coordinator "$T_ADDR" --credential "$T_DIR/$id.cred" \
    --work-dir "$T_DIR/$id" \
    --cpu --quick --poll-ms 200 "$@" >>"$T_DIR/$id.log" 2>&1 &
  T_LASTPID=$!
  T_PIDS+=($T_LASTPID)
}
wait_for() { # wait_for SECONDS SQL-RETURNING-t  -- poll until the query prints t
  local deadline=$((SECONDS + $1))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(sql "$2" 2>/dev/null)" = t ] && return 0
    sleep 0.2
  done
  log "timed out waiting for: $2"; return 1
}
kf() { "$KFARM_BIN/kfarm" "$@"; }
