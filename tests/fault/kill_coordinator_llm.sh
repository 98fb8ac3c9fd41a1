#!/usr/bin/env bash
# kill -9 the coordinator of a `loop` campaign twice: first while a model
# request is in flight (the proposal is recorded, its reply never arrives),
# then while the last round's candidates are being evaluated. Each time a
# new coordinator takes over: it re-issues only the unanswered proposal once
# its claim lapses, never creates a (round, slot) twice, never creates a
# candidate twice, and the campaign finishes its rounds.
source "$(dirname "$0")/../lib.sh"
source "$KFARM_SRC/tests/llm/lib_llm.sh"

kf db migrate
start_fake_llm "$KFARM_SRC/tests/llm/restart_script.json"
llm_config "$T_DIR/restart.json" loop kf-restart ', "max_rounds": 3'
start_coordinator --lease-ms 5000
start_worker w1
start_worker w2
kf campaign create kr --config "$T_DIR/restart.json"
kf campaign start kr
R="FROM proposals p JOIN campaigns c ON c.id = p.campaign_id WHERE c.name = 'kr'"
wait_for 120 "SELECT count(*) = 1 $R AND p.round = 1 AND p.state = 'requested' AND p.claimed_until IS NOT NULL"
sleep 1
kill -9 "$T_COORD"
log "killed the coordinator with round 1's request in flight"
check "the proposal survives, unanswered" eq "$(sql "SELECT p.state $R AND p.round = 1")" requested
start_coordinator --lease-ms 5000
wait_for 90 "SELECT count(*) > 0 FROM jobs j JOIN candidates k ON k.id = j.candidate_id JOIN proposals p ON p.id = k.proposal_id WHERE p.round = 3 AND j.state = 'leased'"
kill -9 "$T_COORD"
log "killed the coordinator while round 3 was being evaluated"
sleep 1
start_coordinator --lease-ms 5000
kf campaign wait kr --timeout 180

check "campaign is done" eq "$(sql "SELECT state FROM campaigns WHERE name='kr'")" done
check "stopped by its budget" eq "$(sql "SELECT strategy_state->>'stopped' FROM campaigns WHERE name='kr'")" "max_rounds (3) reached"
check "exactly one proposal per round" eq "$(sql "SELECT string_agg(p.round::text, ',' ORDER BY p.round) $R")" "1,2,3"
check "only the unanswered proposal was re-issued (4 requests for 3 proposals)" eq \
  "$(grep -c 'sent to kf-restart' "$T_DIR/coordinator.log")" 4
check "round 1 was answered by the re-issued request" grep -q "Vectorize the exponential" <<<"$(sql "SELECT p.reply $R AND p.round = 1")"
check "no duplicate candidates" eq \
  "$(sql "SELECT count(*) - count(DISTINCT (norm_sha256, defines)) FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='kr'")" 0
check "candidates: seed + 2 + 1 + 2" eq \
  "$(sql "SELECT count(*) FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='kr'")" 6
check "exactly one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
finish
