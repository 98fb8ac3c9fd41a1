#!/usr/bin/env bash
# A coordinator refuses a database migrated by a newer build: the newer
# schema may change what the older build's statements mean (schema 018:
# heartbeats no longer write jobs.lease_deadline, so an older reaper would
# requeue every heartbeat lease), so it says so and exits instead of
# serving beside the newer coordinators. The same build starts as before.
source "$(dirname "$0")/../lib.sh"

kf db migrate
have=$(sql "SELECT max(version) FROM schema_version")
sql "INSERT INTO schema_version (version, name) VALUES ($have + 1, 'from_a_newer_build.sql')"
rc=0
timeout 30 "$KFARM_BIN/kfarm-coordinator" --listen "$T_ADDR" >"$T_DIR/newer.log" 2>&1 || rc=$?
check "the coordinator exits with an error" eq "$rc" 1
check "... saying the schema is newer than its own" \
  grep -q "schema is at version $((have + 1)), newer than this build's $have" "$T_DIR/newer.log"
check "... before serving (no listen)" bash -c "! grep -q 'listening' '$T_DIR/newer.log'"

sql "DELETE FROM schema_version WHERE version = $have + 1"
start_coordinator
wait_for 30 "SELECT count(*) = 1 FROM coordinator_pulse WHERE last_alive > now() - interval '5 seconds'"
check "at its own version it starts" kill -0 "$T_COORD"
finish
