#!/usr/bin/env bash
# A `parallel` campaign: 2 independent lineages, each with its own
# temperature and sampling seed, each continuing from its own best. The
# scripted server answers 4 requests; the campaign runs its 2 rounds. With
# llm.max_in_flight 1 the two lineages' requests go one at a time.
source "$(dirname "$0")/../lib.sh"
source "$KFARM_SRC/tests/llm/lib_llm.sh"

kf db migrate
start_fake_llm "$KFARM_SRC/tests/llm/parallel_script.json"
llm_config "$T_DIR/par.json" parallel kf-par ', "lineages": 2, "temperatures": [0.2, 0.9], "max_rounds": 2, "tune_max_variants": 2'
sed -i 's/"backoff_max_s": 0.5}/"backoff_max_s": 0.5, "max_in_flight": 1}/' "$T_DIR/par.json"
start_coordinator
start_worker w1
start_worker w2
kf campaign create pl --config "$T_DIR/par.json"
kf campaign start pl
kf campaign wait pl --timeout 240

P="FROM proposals p JOIN campaigns c ON c.id = p.campaign_id WHERE c.name = 'pl'"
check "campaign is done after 2 rounds" eq "$(sql "SELECT state || ' ' || (strategy_state->>'stopped') FROM campaigns WHERE name='pl'")" "done max_rounds (2) reached"
check "one slot per lineage per round" eq \
  "$(sql "SELECT string_agg(p.round || ':' || p.lineage, ',' ORDER BY p.round, p.lineage) $P")" "1:0,1:1,2:0,2:1"
check "lineages use their own temperature and seed" eq \
  "$(sql "SELECT string_agg(p.lineage || '=' || p.temperature || '/' || p.llm_seed, ',' ORDER BY p.lineage) $P AND p.round = 1")" "0=0.2/1,1=0.9/2"
check "temperature and seed were sent to the server" eq \
  "$(python3 -c "import json; print(sorted({(json.loads(l)['temperature'], json.loads(l)['seed']) for l in open('$LLM_LOG')}))")" \
  "[(0.2, 1), (0.9, 2)]"
check "round 2 continues each lineage from its own best (or the seed when it failed)" eq \
  "$(sql "SELECT count(*) $P AND p.round = 2 AND p.parent_id NOT IN (SELECT k.id FROM candidates k LEFT JOIN proposals q ON q.id = k.proposal_id WHERE k.campaign_id = c.id AND (k.proposer = 'seed' OR q.lineage = p.lineage))")" 0
check "every proposal has prompt, reply and tokens" eq "$(sql "SELECT count(*) $P AND p.prompt <> '' AND p.reply <> '' AND p.completion_tokens > 0")" 4
check "max_in_flight 1: the 1 s replies of round 1 did not overlap" python3 -c "
import json, sys
t = sorted(json.loads(l)['t'] for l in open('$LLM_LOG'))
sys.exit(0 if t[1] - t[0] >= 0.9 else 1)"
finish
