#!/usr/bin/env bash
# Chaos: kill -9 of a worker and of the coordinator, a PostgreSQL restart, a
# PostgreSQL crash (immediate shutdown: crash recovery empties the unlogged
# lease_beats, schema 018) and a frozen coordinator (SIGSTOP for longer than
# a lease), all during one campaign. It still ends with 0 lost, 0
# duplicated, 0 stuck jobs, and no job is charged an attempt for an outage:
# the only leases that expired are the killed worker's.
source "$(dirname "$0")/../lib.sh"
lost_leases() { sql "SELECT count(*) FROM evaluations WHERE NOT reported AND worker_id <> 'victim'"; }

kf db migrate
start_coordinator --lease-ms 3000
kf campaign create ch --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu
kf campaign start ch
start_worker victim
victim=$T_LASTPID
start_worker w2
wait_for 120 "SELECT count(*) > 0 FROM jobs WHERE state = 'leased' AND worker_id = 'victim'"
kill -9 "$victim"
log "killed worker victim"
start_worker w3

wait_for 120 "SELECT count(*) > 0 FROM jobs WHERE state = 'leased' AND worker_id IN ('w2', 'w3')"
kill -STOP "$T_COORD"
log "coordinator frozen for 8 s (lease 3 s)"
sleep 8
kill -CONT "$T_COORD"

wait_for 120 "SELECT count(*) > 0 FROM jobs WHERE state = 'leased' AND worker_id IN ('w2', 'w3')"
"$KFARM_SRC/tools/devdb" stop >/dev/null
log "PostgreSQL stopped for 8 s"
sleep 8
"$KFARM_SRC/tools/devdb" start >/dev/null

# a crash while a heartbeat lease is held: its beat is lost with the table
wait_for 120 "SELECT count(*) > 0 FROM jobs j JOIN lease_beats b ON b.job_id = j.id AND b.fencing_token = j.fencing_token
              WHERE j.state = 'leased' AND j.worker_id IN ('w2', 'w3')"
"$KFARM_SRC/tools/devdb" crash >/dev/null
log "PostgreSQL crashed, down for 5 s"
sleep 5
"$KFARM_SRC/tools/devdb" start >/dev/null
wait_for 60 "SELECT count(*) = 1 FROM lease_beats WHERE job_id = 0"

wait_for 120 "SELECT count(*) > 0 FROM jobs WHERE state = 'leased' AND worker_id IN ('w2', 'w3')"
kill -9 "$T_COORD"
log "coordinator killed for 6 s"
sleep 6
start_coordinator --lease-ms 3000
kf campaign wait ch --timeout 600

check "campaign finished" eq "$(sql "SELECT state FROM campaigns WHERE name='ch'")" done
check "0 stuck: every job done" eq "$(sql "SELECT count(*) FROM jobs WHERE state <> 'done'")" 0
check "8 candidates, one eval job each" eq "$(sql "SELECT count(*) FROM jobs WHERE purpose = 'eval'")" 8
check "0 lost, 0 duplicated: one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
check "every candidate ok" eq "$(sql "SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'")" 8
check "no lease expired for the outages (only the killed worker's)" eq "$(lost_leases)" 0
check "the outages were seen and leases pushed back" grep -q "lease(s) extended by the gap" "$T_DIR/coordinator.log"
check "the crash's lost heartbeats rebuilt with a grace period" grep -q "lease heartbeats lost" "$T_DIR/coordinator.log"
finish
