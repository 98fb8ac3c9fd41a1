#!/usr/bin/env bash
# Task faults are the task's, and running campaigns share the fleet (issue 10):
#   - a campaign whose task reference does not build on the workers is paused
#     with the reason, and no worker is quarantined or charged an infra_error;
#     `campaign status` shows it as a task blocker, `campaign wait` exits 3;
#   - two healthy campaigns started together share the two workers (leases
#     alternate between them instead of first come, first served) and finish;
#   - a candidate submitted to a finished campaign is refused.
source "$(dirname "$0")/../lib.sh"
has() { grep -q -- "$1" <<<"$2" || { echo "  no '$1' in:" >&2; echo "$2" >&2; return 1; }; }

kf db migrate
cp -r "$KFARM_SRC/tasks/softmax_f32" "$T_DIR/broken"
printf '#include "kf_abi.h"\nint kf_entry(const kf_call *c) { return this is not C; }\n' >"$T_DIR/broken/reference.c"
kf campaign create broken --task "$T_DIR/broken" --strategy tune --max-candidates 2 --no-task-check >/dev/null
kf campaign create fa --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --max-candidates 4 --no-task-check >/dev/null
kf campaign create fb --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --max-candidates 4 --no-task-check >/dev/null
# started (and leased) in this order: first come, first served would run all of
# broken's and fa's jobs before any of fb's
kf campaign start broken >/dev/null; kf campaign start fa >/dev/null; kf campaign start fb >/dev/null
start_coordinator
start_worker w1
start_worker w2

wait_for 120 "SELECT state = 'paused' AND pause_reason IS NOT NULL FROM campaigns WHERE name = 'broken'"
check "the pause reason names the task fault" has "task fault on worker w[12]: the task's reference does not build" \
  "$(sql "SELECT pause_reason FROM campaigns WHERE name = 'broken'")"
out=$(kf campaign status broken)
check "status shows the task blocker" has "blocked: *\[task\] paused by the farm: task fault" "$out"
rc=0; kf campaign wait broken --quiet 2>"$T_DIR/wait.err" || rc=$?
check "wait exits 3 on a campaign the farm paused" eq "$rc" 3
check "wait says why" grep -q "is blocked: \[task\] paused by the farm" "$T_DIR/wait.err"

for c in fa fb; do
  rc=0; kf campaign wait "$c" --timeout 300 --quiet || rc=$?
  check "healthy campaign $c finishes beside the broken one" eq "$rc" 0
done
check "nobody was quarantined" eq "$(sql "SELECT count(*) FROM workers WHERE quarantined")" 0
check "no worker was charged an infra_error" eq "$(sql "SELECT sum(infra_errors) FROM workers")" 0
check "the broken campaign's jobs wait, attempts not counted" eq \
  "$(sql "SELECT count(*) FILTER (WHERE j.state = 'queued' AND j.attempts = 0) || '/' || count(*) FROM jobs j JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'broken'")" "2/2"
# fair share: the first four evaluations of the healthy campaigns alternate
first=$(sql "SELECT string_agg(n, ' ') FROM (SELECT c.name n FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN campaigns c ON c.id = j.campaign_id WHERE c.name IN ('fa', 'fb') ORDER BY e.id LIMIT 4) x")
check "both healthy campaigns got workers from the start ($first)" bash -c "grep -q fa <<<'$first' && grep -q fb <<<'$first'"
check "fb's first job started before fa's last one" eq "$(sql "SELECT (SELECT min(e.created_at) FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'fb') < (SELECT max(e.created_at) FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'fa')")" t

cp "$KFARM_SRC/tests/llm/kernels/softmax_good.c" "$T_DIR/mine.c"
rc=0; kf candidate submit fa "$T_DIR/mine.c" 2>"$T_DIR/submit.err" || rc=$?
check "a candidate for a finished campaign is refused" eq "$rc" 1
check "and says why" grep -q "campaign fa is done" "$T_DIR/submit.err"
check "nothing was queued for it" eq "$(sql "SELECT count(*) FROM jobs WHERE state <> 'done' AND campaign_id = (SELECT id FROM campaigns WHERE name = 'fa')")" 0
# extend a finished campaign, delete one
kf campaign extend fa --max-candidates 6 >/dev/null
check "extend runs a done campaign again" eq "$(sql "SELECT state || ' ' || max_candidates FROM campaigns WHERE name = 'fa'")" "running 6"
rc=0; kf campaign delete fa 2>"$T_DIR/del.err" || rc=$?
check "a running campaign is not deleted" bash -c "[ $rc = 1 ] && grep -q 'is running: pause it first' $T_DIR/del.err"
rc=0; kf campaign wait fa --timeout 300 --quiet || rc=$?
check "the extended campaign finishes with more candidates" eq \
  "$rc $(sql "SELECT count(*) > 4 FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'fa' AND k.proposer = 'tune'")" "0 t"
kf campaign delete fa >/dev/null
check "delete removes the campaign and what it evaluated" eq \
  "$(sql "SELECT count(*) FROM campaigns WHERE name = 'fa'") $(sql "SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM campaigns c WHERE c.id = j.campaign_id)")" "0 0"
check "campaign status --json" eq "$(kf campaign status broken --json | python3 -c 'import json,sys; o=json.load(sys.stdin); print(o["progress"]["state"], o["blockers"][0]["kind"])')" "paused task"
finish
