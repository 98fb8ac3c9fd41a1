#!/usr/bin/env bash
# Blockers in words (issue 10): a campaign that cannot progress says why in
# `kfarm campaign status` and `kfarm campaign wait` (which exits 3), and
# rounds that got no reply do not count toward max_rounds:
#   - the key variable is not set in the coordinator's environment;
#   - the server answers "maximum context length" (HTTP 400);
#   - a target no live worker serves, and a fleet that is all quarantined
#     (the quarantine reason in `kfarm workers` and the worker's own log;
#     `kfarm worker release` lifts it).
# Also: a reply whose draft kernel sits in a <think> block yields the final
# kernel; a server that counts far fewer prompt tokens than the prompt holds
# is reported as truncating; api_key_env may not name the fleet key.
source "$(dirname "$0")/../lib.sh"
source "$KFARM_SRC/tests/llm/lib_llm.sh"

has() { grep -q -- "$1" <<<"$2" || { echo "  no '$1' in:" >&2; echo "$2" >&2; return 1; }; }

kf db migrate
start_fake_llm "$KFARM_SRC/tests/llm/blockers_script.json"
start_coordinator
start_worker w1
unset KF_TEST_UNSET_KEY_VARIABLE
for m in nokey ctx think trunc; do
  llm_config "$T_DIR/$m.json" loop "kf-$m" ', "max_rounds": 1'
done
sed -i 's/KF_TEST_LLM_KEY/KF_TEST_UNSET_KEY_VARIABLE/' "$T_DIR/nokey.json"

# api_key_env naming the coordinator's own secret is refused at create
llm_config "$T_DIR/steal.json" loop kf-steal ''
sed -i 's/KF_TEST_LLM_KEY/KFARM_FLEET_KEY/' "$T_DIR/steal.json"
check "api_key_env may not name the fleet key" bash -c \
  "! \"$KFARM_BIN/kfarm\" campaign create steal --config $T_DIR/steal.json --no-task-check 2>$T_DIR/steal.err && grep -q \"coordinator's own variables\" $T_DIR/steal.err"

# a task folder that is not there: said so, without suggesting --no-task-check
check "a missing task is named, not blamed on the check" bash -c \
  "! \"$KFARM_BIN/kfarm\" campaign create gone --task $T_DIR/no-such-task --strategy tune 2>$T_DIR/gone.err && grep -q \"no task at $T_DIR/no-such-task\" $T_DIR/gone.err && ! grep -q no-task-check $T_DIR/gone.err"

for m in nokey ctx think trunc; do
  kf campaign create "$m" --config "$T_DIR/$m.json" --no-task-check >/dev/null
  kf campaign start "$m" >/dev/null
done

P="FROM proposals p JOIN campaigns c ON c.id = p.campaign_id"
# the missing key: round 1 fails, the next round comes (it did not count)
wait_for 120 "SELECT count(*) >= 1 $P WHERE c.name = 'nokey' AND p.state = 'failed'"
out=$(kf campaign status nokey)
check "status names the unset key variable" grep -q \
  "blocked: *\[llm\] the model gave no reply: environment variable KF_TEST_UNSET_KEY_VARIABLE (llm.api_key_env) is not set" <<<"$out"
rc=0; kf campaign wait nokey --blocked-after 1 2>"$T_DIR/wait.err" || rc=$?
check "wait exits 3 on a blocked campaign" eq "$rc" 3
check "wait says why" grep -q "is blocked: \[llm\] .*KF_TEST_UNSET_KEY_VARIABLE" "$T_DIR/wait.err"
check "wait shows progress" grep -q "campaign nokey running: jobs 1/1 done" "$T_DIR/wait.err"
wait_for 60 "SELECT count(*) >= 1 $P WHERE c.name = 'nokey' AND p.round = 2"
check "a round without a reply does not count toward max_rounds (1)" eq \
  "$(sql "SELECT state || ' ' || (strategy_state->>'dead_rounds') FROM campaigns WHERE name = 'nokey'")" "running 1"

# context length exceeded: a final error in words, not retried, not counted
wait_for 120 "SELECT count(*) >= 1 $P WHERE c.name = 'ctx' AND p.state = 'failed'"
check "status says the prompt is too long for the context" grep -q \
  "blocked: *\[llm\] the model gave no reply: prompt too long for the model's context .*HTTP 400: This model's maximum context length is 4096" \
  <<<"$(kf campaign status ctx)"
check "a context error is not retried" eq \
  "$(grep -c '"model": "kf-ctx"' "$LLM_LOG")" 1
wait_for 30 "SELECT (strategy_state->>'dead_rounds')::int >= 1 FROM campaigns WHERE name = 'ctx'"
check "a round ended by the context error does not count toward max_rounds (1)" eq \
  "$(sql "SELECT state FROM campaigns WHERE name = 'ctx'")" running

# <think> drafts are never the kernel
rc=0; kf campaign wait think --timeout 300 --quiet || rc=$?
check "the think campaign finishes" eq "$rc" 0
src=$(sql "SELECT k.source FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'think' AND k.proposer = 'llm' ORDER BY k.id LIMIT 1")
check "the final kernel was taken, not the draft in <think>" bash -c \
  "grep -q 'schedule(static, 16)' <<<\"\$0\" && ! grep -q 'schedule(dynamic' <<<\"\$0\"" "$src"

# a server that truncated the prompt
rc=0; kf campaign wait trunc --timeout 300 --quiet || rc=$?
check "the trunc campaign finishes" eq "$rc" 0
check "status warns that the server truncated the prompt" grep -q \
  "warning: *\[llm\] prompt truncated by the server: it counted 40 prompt tokens" <<<"$(kf campaign status trunc)"

# workers: a target nobody serves, then an all-quarantined fleet
kf campaign pause nokey >/dev/null; kf campaign pause ctx >/dev/null
kf campaign create orphan --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --target cpu \
  --target cpu-nobody --max-candidates 2 --no-task-check >/dev/null
kf campaign start orphan >/dev/null
wait_for 120 "SELECT count(*) FILTER (WHERE j.target = 'cpu-nobody' AND j.state = 'queued') = 2 AND count(*) FILTER (WHERE j.target = 'cpu' AND j.state <> 'done') = 0 FROM jobs j JOIN campaigns c ON c.id = j.campaign_id WHERE c.name = 'orphan'"
check "status: no live worker for the target" has \
  "blocked: *\[workers\] no live worker serves target cpu-nobody: 2 jobs no worker may take" "$(kf campaign status orphan)"
rc=0; kf campaign wait orphan --blocked-after 1 --quiet 2>"$T_DIR/wait2.err" || rc=$?
check "wait exits 3 when no worker serves a target" eq "$rc" 3

sql "UPDATE workers SET quarantined = true, quarantine_reason = '5 consecutive infra_error results, the last: scripted' WHERE id = 'w1'"
kf campaign create quar --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --max-candidates 1 --no-task-check >/dev/null
kf campaign start quar >/dev/null
sleep 1
check "status: all workers quarantined" grep -q \
  "blocked: *\[workers\] all 1 live worker for target cpu is quarantined (w1)" <<<"$(kf campaign status quar)"
out=$(kf workers)
check "kfarm workers shows the quarantine reason" grep -q "w1: quarantined: 5 consecutive infra_error results" <<<"$out"
check "the table of kfarm workers fits 80 columns" bash -c "[ \$(grep -v ': quarantined: ' <<<\"\$0\" | awk '{ if (length > m) m = length } END { print m }') -le 80 ]" "$out"
check "kfarm workers --json" eq "$(kf workers --json | python3 -c 'import json,sys; w=json.load(sys.stdin)[0]; print(w["name"], w["state"])')" "w1 quarantined"
for i in $(seq 100); do grep -q "is quarantined: 5 consecutive" "$T_DIR/w1.log" && break; sleep 0.2; done
check "the worker's log says it is quarantined, and why" grep -q "w1 is quarantined: 5 consecutive infra_error" "$T_DIR/w1.log"
kf worker release w1 >/dev/null
rc=0; kf campaign wait quar --timeout 300 --quiet || rc=$?
check "after kfarm worker release the campaign finishes" eq "$rc" 0
check "kfarm --version" grep -q "^kfarm [0-9]" <<<"$(kf --version)"

# a worker whose clock runs 90 s ahead still shows up (liveness is the
# database's clock), with its skew; one not heard from for 15 min is offline
enroll wskew
FAKETIME_DONT_FAKE_MONOTONIC=1 faketime -f "+90s" "$KFARM_BIN/kfarm-worker" run --coordinator "$T_ADDR" \
  --credential "$T_DIR/wskew.cred" --work-dir "$T_DIR/wskew" --cpu --quick --poll-ms 200 >>"$T_DIR/wskew.log" 2>&1 &
T_PIDS+=($!)
wait_for 60 "SELECT clock_skew_ms IS NOT NULL FROM workers WHERE id = 'wskew'"
sql "INSERT INTO workers (id, classes, last_seen) VALUES ('wdead', '{cpu}', now() - interval '15 minutes')"
check "a skewed worker is ok, with its skew; a silent one is offline" eq \
  "$(kf workers --json | python3 -c 'import json,sys; w={x["name"]: x for x in json.load(sys.stdin)}; print(w["wskew"]["state"], 85000 <= w["wskew"]["clock_skew_ms"] <= 95000, w["wdead"]["state"])')" "ok True offline"
check "kfarm workers shows the skew" has "wskew .* ok .* +[89][0-9]\.[0-9]s" "$(kf workers)"
finish
