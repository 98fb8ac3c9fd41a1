#!/usr/bin/env bash
# kill -9 the coordinator mid-campaign and restart it: workers reconnect and
# the campaign finishes with nothing lost or duplicated (campaign state lives
# only in PostgreSQL).
source "$(dirname "$0")/../lib.sh"

kf db migrate
start_coordinator --lease-ms 5000
kf campaign create kc --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu
kf campaign start kc
start_worker w1
start_worker w2
wait_for 120 "SELECT count(*) >= 2 FROM evaluations WHERE is_final"
kill -9 "$T_COORD"
log "killed coordinator after $(sql "SELECT count(*) FROM evaluations WHERE is_final") results"
sleep 2
start_coordinator --lease-ms 5000
kf campaign wait kc --timeout 300

check "campaign finished" eq "$(sql "SELECT state FROM campaigns WHERE name='kc'")" done
check "no duplicate candidates" eq "$(sql "SELECT count(*) FROM candidates c JOIN campaigns p ON p.id=c.campaign_id WHERE p.name='kc' AND proposer='tune'")" 8
check "one job per candidate" eq "$(sql "SELECT count(*) FROM jobs WHERE purpose = 'eval'")" 8
check "exactly one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
check "every final verdict ok" eq "$(sql "SELECT count(*) FROM evaluations e WHERE e.is_final AND e.verdict='ok' AND e.job_id IN (SELECT id FROM jobs WHERE purpose = 'eval')")" 8
finish
