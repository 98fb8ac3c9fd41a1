#!/usr/bin/env bash
# `kfarm-worker run --batch N`: several leases per GetJob, evaluated in turn
# and reported in one Result message (Result.more, one group commit):
#   - every job still ends with exactly one final evaluation, all ok;
#   - the results of a batch are stored together (one transaction: one
#     created_at), and the worker says it leased them together;
#   - a short queue is shared: one worker gets at most half of it;
#   - kill -9 of a worker holding a batch: every lease of the batch expires,
#     the jobs are re-leased and finished by another worker, none lost, none
#     stored twice.
source "$(dirname "$0")/../lib.sh"

kf db migrate
start_coordinator --lease-ms 3000
# part 1: one worker, batches of 2 (6 candidates; the coordinator grants at
# most half of a short queue: 2, 2, 1, 1)
kf campaign create b1 --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu --max-candidates 6 >/dev/null
kf campaign start b1 >/dev/null
start_worker w1 --batch 2
kf campaign wait b1 --timeout 300 --quiet
b1=$(sql "SELECT id FROM campaigns WHERE name = 'b1'")
check "batches: campaign done" eq "$(sql "SELECT state FROM campaigns WHERE name = 'b1'")" done
check "batches: one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE j.campaign_id = $b1 AND (SELECT count(*) FROM evaluations e WHERE e.job_id = j.id AND e.is_final) <> 1")" 0
check "batches: all 6 variants ok" eq \
  "$(sql "SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $b1 AND j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'")" 6
check "batches: the worker leased 2 jobs together" grep -q "2 jobs leased together" "$T_DIR/w1.log"
# fewer transactions than results: a batch's results are stored together
# (one job per lease would take one transaction each)
check "batches: results of a batch stored in one transaction" eq \
  "$(sql "SELECT count(DISTINCT e.created_at) < count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $b1 AND j.purpose = 'eval' AND e.is_final")" t
kill "$T_LASTPID"; wait "$T_LASTPID" 2>/dev/null || true

# part 2: kill -9 a worker holding a batch (4 asked, half of the 5 queued
# granted: 3)
kf campaign create b2 --task "$KFARM_SRC/tests/tasks/farm_axpy_f32" --strategy tune --target cpu --max-candidates 5 >/dev/null
kf campaign start b2 >/dev/null
b2=$(sql "SELECT id FROM campaigns WHERE name = 'b2'")
start_worker victim --batch 4
victim=$T_LASTPID
wait_for 60 "SELECT count(*) = 3 FROM jobs WHERE state = 'leased' AND worker_id = 'victim' AND campaign_id = $b2"
held=$(sql "SELECT string_agg(id::text, ',' ORDER BY id) FROM jobs WHERE state = 'leased' AND worker_id = 'victim' AND campaign_id = $b2")
kill -9 "$victim"
log "killed worker victim holding jobs $held"
start_worker survivor --batch 4
kf campaign wait b2 --timeout 300 --quiet
check "kill: campaign done" eq "$(sql "SELECT state FROM campaigns WHERE name = 'b2'")" done
check "kill: every job of the victim's batch finished by the survivor" eq \
  "$(sql "SELECT count(*) FROM evaluations WHERE job_id IN ($held) AND is_final AND worker_id = 'survivor'")" 3
check "kill: one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE j.campaign_id = $b2 AND (SELECT count(*) FROM evaluations e WHERE e.job_id = j.id AND e.is_final) <> 1")" 0
check "kill: all 5 variants ok" eq \
  "$(sql "SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $b2 AND j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok'")" 5
check "bad --batch is refused with a clear error" bash -c \
  "\"$KFARM_BIN/kfarm-worker\" run --coordinator '$T_ADDR' --batch 17 2>&1 | grep -q -- '--batch: expected 1-16 or auto'"
# the coordinator says, once a minute and when it stops, where its
# requests' time went: every line readable, requests counted, every phase's
# p50 <= p99 <= max; in the last line (written after the serving threads
# stopped, so no request is half counted) no phase outlasts the whole
kill -TERM "$T_COORD"; wait "$T_COORD" 2>/dev/null || true
check "the coordinator's lines of service times: read, ordered, no phase longer than the whole" \
  python3 - "$T_DIR/coordinator.log" "$(sql "SELECT count(*) FROM evaluations")" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
ms = [re.search(r"served (\d+) requests in \d+ s \(\d+/s\); ms p50/p99/max: (.*)$", l)
      for l in text.splitlines() if " served " in l]
assert ms and all(ms), "no line, or one unreadable"
assert sum(int(m.group(1)) for m in ms) > 0
stored = False
for m in ms:
    phases = dict((k.strip(), tuple(map(float, v.split("/"))))
                  for k, v in re.findall(r"([a-z ]+) ([0-9.e+]+/[0-9.e+]+/[0-9.e+]+)", m.group(2)))
    for k, (p50, p99, mx) in phases.items():  # a phase no request had is left out
        assert 0 <= p50 <= p99 <= mx, (k, phases[k])
        if m is ms[-1]:
            assert mx <= phases["whole"][2], (k, phases[k], phases["whole"])
    stored = stored or "results stored" in phases
assert stored, "no window names the results stored"
# the results the group commits stored: some, and never more than were stored
grouped = sum(int(g) for g in re.findall(r"; (\d+) results stored in \d+ group transactions", text))
assert 0 < grouped <= int(sys.argv[2]), (grouped, sys.argv[2])
PY
finish
