#!/usr/bin/env bash
# Two coordinators serve one fleet against one database (issue 13): both
# workers are connected to both; one coordinator is killed -9 mid-campaign
# and never comes back. The campaign finishes through the other with every
# job evaluated exactly once (every result after the kill came through the
# survivor).
source "$(dirname "$0")/../lib.sh"

kf db migrate
ADDR2="ipc://$T_DIR/coord2.ipc"
start_coordinator --lease-ms 4000
c1=$T_COORD
"$KFARM_BIN/kfarm-coordinator" --listen "$ADDR2" --lease-ms 4000 --no-migrate >>"$T_DIR/coordinator2.log" 2>&1 &
c2=$!
T_PIDS+=($c2)
kf campaign create tc --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu
kf campaign start tc
start_worker w1 --coordinator "$ADDR2"
start_worker w2 --coordinator "$ADDR2"
wait_for 120 "SELECT count(*) >= 2 FROM evaluations WHERE is_final"
kill -9 "$c1"
log "killed coordinator 1 after $(sql "SELECT count(*) FROM evaluations WHERE is_final") results"
kf campaign wait tc --timeout 300

check "campaign finished with one coordinator left" eq "$(sql "SELECT state FROM campaigns WHERE name='tc'")" done
check "one job per candidate" eq "$(sql "SELECT count(*) FROM jobs WHERE purpose = 'eval'")" 8
check "exactly one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
check "every final verdict ok" eq "$(sql "SELECT count(*) FROM evaluations e WHERE e.is_final AND e.verdict='ok' AND e.job_id IN (SELECT id FROM jobs WHERE purpose = 'eval')")" 8
finish
