#!/usr/bin/env bash
# kill -9 a worker while it holds a lease: the lease expires, the job is
# re-leased to the other worker and finishes; the lost lease is recorded
# (consumed as an attempt only if the victim had acknowledged it with a
# heartbeat, schema/005_dispatch.sql), and every job ends with exactly one
# final evaluation.
source "$(dirname "$0")/../lib.sh"

kf db migrate
start_coordinator --lease-ms 3000
kf campaign create kw --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu
kf campaign start kw
start_worker victim
victim=$T_LASTPID
wait_for 60 "SELECT count(*) > 0 FROM jobs WHERE state='leased' AND worker_id='victim'"
job=$(sql "SELECT id FROM jobs WHERE state='leased' AND worker_id='victim' LIMIT 1")
kill -9 "$victim"
log "killed worker victim holding job $job"
start_worker survivor
kf campaign wait kw --timeout 300

check "campaign finished" eq "$(sql "SELECT state FROM campaigns WHERE name='kw'")" done
check "the killed worker's job was re-leased and finished by the survivor" eq \
  "$(sql "SELECT worker_id FROM evaluations WHERE job_id=$job AND is_final")" survivor
check "the job was leased more than once: the lost lease is kept as an attempt record" eq \
  "$(sql "SELECT count(*) >= 1 FROM evaluations WHERE job_id=$job AND NOT is_final AND NOT reported AND verdict='infra_error' AND worker_id='victim'")" t
check "one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
check "all 8 variants ok" eq "$(sql "SELECT count(*) FROM evaluations e WHERE e.is_final AND e.verdict='ok' AND e.job_id IN (SELECT id FROM jobs WHERE purpose = 'eval')")" 8
finish
