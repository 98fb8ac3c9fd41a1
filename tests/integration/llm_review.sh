#!/usr/bin/env bash
# Human review on top of `loop`: with "review": true the model's proposals
# wait until a person approves them -- nothing is compiled or evaluated
# before. Also: a person's own kernel (kfarm candidate submit) is queued at
# once, a rejected proposal never becomes a candidate, and `kfarm review`
# list/show/approve/reject behave.
source "$(dirname "$0")/../lib.sh"
source "$KFARM_SRC/tests/llm/lib_llm.sh"

kf db migrate
start_fake_llm "$KFARM_SRC/tests/llm/review_script.json"
llm_config "$T_DIR/review.json" loop kf-review ', "review": true, "max_rounds": 2'
start_coordinator
start_worker w1
start_worker w2
kf campaign create rv --config "$T_DIR/review.json"
kf campaign start rv
R="FROM proposals p JOIN campaigns c ON c.id = p.campaign_id WHERE c.name = 'rv'"
wait_for 120 "SELECT count(*) = 1 $R AND p.state = 'review'"
sleep 4
check "nothing of the model's is evaluated before approval" eq \
  "$(sql "SELECT count(*) FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='rv' AND k.proposer <> 'seed'") $(sql "SELECT count(*) FROM jobs WHERE purpose = 'eval'")" "0 1"
pid=$(sql "SELECT p.id $R AND p.round = 1")
check "review list shows the proposal" grep -qE "^ *$pid +llm" <<<"$(kf review list rv)"
show=$(kf review show rv "$pid")
check "review show prints the code" grep -q "int kf_entry" <<<"$show"
check "review show prints a diff to the parent" bash -c \
  "grep -q '^--- candidate [0-9]* (parent)' <<<\"\$0\" && grep -q '^+++ proposal $pid' <<<\"\$0\" && grep -q '^@@ -[0-9]*,[0-9]* +[0-9]*,[0-9]* @@' <<<\"\$0\"" "$show"
check "the campaign is not done while a proposal waits" eq "$(sql "SELECT state FROM campaigns WHERE name='rv'")" running
check "status says a proposal waits for review" grep -q "blocked: *\[review\] 1 proposal waits for a person's review (kfarm review list rv)" <<<"$(kf campaign status rv)"

seed=$(sql "SELECT k.id FROM candidates k JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='rv' AND k.proposer='seed'")
out=$(kf candidate submit rv "$KFARM_SRC/tests/llm/kernels/softmax_good2.c" --parent "$seed")
check "a person's kernel is queued at once (its tunables swept)" grep -q "queued (2 variants" <<<"$out"
check "submitting the same kernel again is refused as a duplicate" \
  bash -c "! '$KFARM_BIN/kfarm' candidate submit rv '$KFARM_SRC/tests/llm/kernels/softmax_good2.c' 2>'$T_DIR/dup.txt' && grep -q duplicate '$T_DIR/dup.txt'"
head -c $((9 << 20)) /dev/zero | tr '\0' ' ' >"$T_DIR/huge.c"
check "a source over 1 MiB is refused as too large" \
  bash -c "! '$KFARM_BIN/kfarm' candidate submit rv '$T_DIR/huge.c' 2>'$T_DIR/big.txt' && grep -q 'larger than 1 MiB' '$T_DIR/big.txt'"
check "a missing file is refused as missing" \
  bash -c "! '$KFARM_BIN/kfarm' candidate submit rv '$T_DIR/none.c' 2>'$T_DIR/none.txt' && grep -q 'No such file' '$T_DIR/none.txt'"

out=$(kf review approve rv "$pid" --note "looks sound")
check "approve queues the proposal's candidates" grep -q "approved: candidate .* queued (2 variants)" <<<"$out"
check "approved candidates have jobs" eq \
  "$(sql "SELECT count(*) FROM jobs j JOIN candidates k ON k.id = j.candidate_id WHERE k.proposal_id = $pid AND j.purpose = 'eval'")" 2
check "approving twice is an error" bash -c "! '$KFARM_BIN/kfarm' review approve rv $pid 2>/dev/null"

wait_for 120 "SELECT count(*) = 1 $R AND p.round = 2 AND p.state = 'review'"
pid2=$(sql "SELECT p.id $R AND p.round = 2")
kf hint add rv "Prefer a static schedule."
kf review reject rv "$pid2" --note "two hard-coded threads"
kf campaign wait rv --timeout 120
check "rejected proposal never became a candidate" eq \
  "$(sql "SELECT count(*) FROM candidates WHERE proposal_id = $pid2") $(sql "SELECT state || ': ' || reason FROM proposals WHERE id = $pid2")" \
  "0 rejected: rejected by reviewer: two hard-coded threads"
check "campaign done after its rounds" eq "$(sql "SELECT state FROM campaigns WHERE name='rv'")" done
check "the person's and the approved candidates were evaluated" eq \
  "$(sql "SELECT string_agg(k.proposer || '=' || e.verdict, ',' ORDER BY k.id) FROM candidates k JOIN evaluations e ON e.candidate_id = k.id AND e.is_final AND e.job_id IN (SELECT id FROM jobs WHERE purpose = 'eval') JOIN campaigns c ON c.id = k.campaign_id WHERE c.name='rv' AND k.proposer <> 'seed'")" \
  "human=ok,human=ok,llm=ok,llm=ok"
check "the reviewer's note is recorded" eq "$(sql "SELECT reviewer_note FROM proposals WHERE id = $pid")" "looks sound"
finish
