#!/usr/bin/env bash
# A `beam` campaign (beam_width 2 x children 2) against the scripted
# OpenAI-compatible server on the cpu backend with real workers: round 1
# asks 4 children of the seed at once (the requests are in flight
# concurrently), round 2 asks 2 children of each of the 2 best distinct
# sources. The script mixes good, broken, wrong, duplicate, code-less and
# cut-off replies; the campaign runs to its budget (max_rounds 2), records
# every prompt, reply and verdict, and improves on the seed.
source "$(dirname "$0")/../lib.sh"
source "$KFARM_SRC/tests/llm/lib_llm.sh"

kf db migrate
start_fake_llm "$KFARM_SRC/tests/llm/beam_script.json"
llm_config "$T_DIR/beam.json" beam kf-beam \
  ', "beam_width": 2, "children": 2, "max_rounds": 2, "tune_max_variants": 2'
start_coordinator
start_worker w1
start_worker w2
kf campaign create bm --config "$T_DIR/beam.json"
kf campaign start bm
kf campaign wait bm --timeout 240

P="FROM proposals p JOIN campaigns c ON c.id = p.campaign_id WHERE c.name = 'bm'"
check "campaign is done" eq "$(sql "SELECT state FROM campaigns WHERE name='bm'")" done
check "stopped by its budget (max_rounds)" eq \
  "$(sql "SELECT strategy_state->>'stopped' FROM campaigns WHERE name='bm'")" "max_rounds (2) reached"
check "beam_width x children = 4 slots per round" eq \
  "$(sql "SELECT string_agg(p.round || ':' || p.slot, ',' ORDER BY p.round, p.slot) $P")" "1:0,1:1,1:2,1:3,2:0,2:1,2:2,2:3"
check "round 1: children of the seed" eq "$(sql "SELECT count(DISTINCT p.parent_id) $P AND p.round = 1") $(sql "SELECT count(*) $P AND p.round = 1 AND p.parent_id = (SELECT k.id FROM candidates k WHERE k.campaign_id = c.id AND k.proposer = 'seed')")" "1 4"
check "round 1 requests were in flight together (4 x 1 s replies in < 2.5 s)" python3 -c "
import json, sys
t = sorted(json.loads(l)['t'] for l in open('$LLM_LOG'))[:4]
sys.exit(0 if t[3] - t[0] < 1.0 else 1)"
check "round 1 answered concurrently" eq "$(sql "SELECT extract(epoch FROM max(p.answered_at) - min(p.created_at)) < 2.5 $P AND p.round = 1")" t
check "round 2: 2 parents x 2 children" eq \
  "$(sql "SELECT string_agg(n::text, ',') FROM (SELECT count(*) n $P AND p.round = 2 GROUP BY p.parent_id) s")" "2,2"
# a disputed result is never a parent (verify.h): on a busy runner two
# workers timed one kernel 9.5x and 2.7x
check "round 2 parents are the two best distinct sources of round 1, none disputed" eq \
  "$(sql "SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT DISTINCT p.parent_id AS id $P AND p.round = 2) s")" \
  "$(sql "SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT id FROM (SELECT DISTINCT ON (k.norm_sha256) k.id, e.speedup FROM candidates k JOIN evaluations e ON e.candidate_id = k.id AND e.is_final JOIN jobs j ON j.id = e.job_id AND j.purpose = 'eval' JOIN campaigns c ON c.id = k.campaign_id WHERE c.name = 'bm' AND e.verdict = 'ok' AND e.created_at < (SELECT min(q.created_at) FROM proposals q WHERE q.campaign_id = c.id AND q.round = 2) AND NOT (e.confirmation = 'disputed' AND e.confirmed_at < (SELECT min(q.created_at) FROM proposals q WHERE q.campaign_id = c.id AND q.round = 2)) ORDER BY k.norm_sha256, e.speedup DESC) b ORDER BY speedup DESC LIMIT 2) t")"
check "every prompt and reply stored" eq "$(sql "SELECT count(*) $P AND p.prompt <> '' AND p.reply <> '' AND p.prompt_tokens > 0")" 8
check "failed proposals name their reason" eq \
  "$(sql "SELECT string_agg(DISTINCT split_part(p.reason, ' (', 1), '|' ORDER BY split_part(p.reason, ' (', 1)) $P AND p.state = 'failed'")" \
  "duplicate of candidate $(sql "SELECT min(k.id) FROM candidates k JOIN proposals p ON p.id = k.proposal_id JOIN campaigns c ON c.id = p.campaign_id WHERE c.name='bm' AND p.reply LIKE '%Vectorize the exponential; threads%'")|no code block in the reply|reply cut off"
check "verdicts recorded for every candidate" eq \
  "$(sql "SELECT count(*) FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='bm' AND NOT EXISTS (SELECT 1 FROM evaluations e WHERE e.candidate_id = k.id AND e.is_final)")" 0
check "broken and wrong kernels got their verdicts" eq \
  "$(sql "SELECT string_agg(DISTINCT e.verdict, ',' ORDER BY e.verdict) FROM evaluations e JOIN candidates k ON k.id = e.candidate_id JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='bm' AND e.is_final")" "compile_error,incorrect,ok"
seed=$(sql "SELECT e.speedup FROM evaluations e JOIN candidates k ON k.id = e.candidate_id JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='bm' AND k.proposer='seed' AND e.is_final AND e.job_id IN (SELECT id FROM jobs WHERE purpose = 'eval')")
best=$(sql "SELECT max(e.speedup) FROM evaluations e JOIN candidates k ON k.id = e.candidate_id JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='bm' AND k.proposer='llm' AND e.is_final AND e.verdict='ok'")
log "seed speedup $seed, best LLM speedup $best"
check "the beam improves on the seed" python3 -c "import sys; sys.exit(0 if $best > 1.3 * $seed else 1)"
finish
