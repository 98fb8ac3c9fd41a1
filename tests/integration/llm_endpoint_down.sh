#!/usr/bin/env bash
# A campaign whose model cannot be reached (here: the key variable is not
# set in the coordinator's environment) records each failed proposal with
# its reason and backs off between rounds instead of spinning; the campaign
# stays running and can be paused.
source "$(dirname "$0")/../lib.sh"
source "$KFARM_SRC/tests/llm/lib_llm.sh"

kf db migrate
LLM_URL="http://127.0.0.1:9/v1"
llm_config "$T_DIR/down.json" loop kf-down ''
sed -i 's/KF_TEST_LLM_KEY/KF_TEST_UNSET_KEY_VARIABLE/' "$T_DIR/down.json"
unset KF_TEST_UNSET_KEY_VARIABLE
start_coordinator
start_worker w1
kf campaign create dn --config "$T_DIR/down.json"
kf campaign start dn
R="FROM proposals p JOIN campaigns c ON c.id = p.campaign_id WHERE c.name = 'dn'"
wait_for 120 "SELECT count(*) = 1 $R AND p.state = 'failed'"
check "the failure names the missing variable" eq "$(sql "SELECT p.reason $R")" \
  "environment variable KF_TEST_UNSET_KEY_VARIABLE (llm.api_key_env) is not set"
sleep 4
check "no new round while backing off" eq "$(sql "SELECT count(*) $R")" 1
check "the back-off is recorded" eq "$(sql "SELECT (strategy_state->>'endpoint_failures') || ' ' || ((strategy_state->>'resume_at')::float > extract(epoch FROM now())) FROM campaigns WHERE name = 'dn'")" "1 true"
check "the campaign keeps running" eq "$(sql "SELECT state FROM campaigns WHERE name='dn'")" running
check "the coordinator says why" grep -q "no reply from the model in round 1" "$T_DIR/coordinator.log"
kf campaign pause dn
check "pause works" eq "$(sql "SELECT state FROM campaigns WHERE name='dn'")" paused
finish
