#!/usr/bin/env bash
# A coordinator and two workers (separate processes, nanomsg over ipc, real
# PostgreSQL) run a `tune` campaign on a real task to completion. Afterwards
# the database holds exactly one final evaluation per job, every candidate has
# a verdict, both workers took part, and the CLI and export show the results.
source "$(dirname "$0")/../lib.sh"

kf db migrate
start_coordinator
start_worker w1
start_worker w2
kf campaign create tc --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --target cpu --max-candidates 6
kf campaign start tc
kf campaign wait tc --timeout 600

ncand=$(sql "SELECT count(*) FROM candidates c JOIN campaigns p ON p.id=c.campaign_id WHERE p.name='tc' AND c.proposer='tune'")
check "tune expanded up to the budget (6 candidates)" eq "$ncand" 6
check "campaign is done" eq "$(sql "SELECT state FROM campaigns WHERE name='tc'")" done
check "every job is done" eq "$(sql "SELECT count(*) FROM jobs WHERE state<>'done'")" 0
check "one final evaluation per job" eq \
  "$(sql "SELECT count(*) FROM jobs j WHERE (SELECT count(*) FROM evaluations e WHERE e.job_id=j.id AND e.is_final) <> 1")" 0
check "final evaluations = jobs" eq "$(sql "SELECT count(*) FROM evaluations WHERE is_final")" \
  "$(sql "SELECT count(*) FROM jobs")"
check "at least one candidate is ok with a measured speedup" eq \
  "$(sql "SELECT count(*) > 0 FROM evaluations WHERE is_final AND verdict='ok' AND speedup > 0 AND candidate_us > 0 AND baseline_us > 0")" t
check "both workers evaluated jobs" eq "$(sql "SELECT count(DISTINCT worker_id) FROM evaluations WHERE is_final")" 2
check "workers registered with their devices" eq \
  "$(sql "SELECT count(*) FROM workers WHERE 'cpu' = ANY(classes) AND jsonb_array_length(devices) > 0")" 2

out=$(kf candidates tc)
check "kfarm candidates lists verdicts" grep -q "ok" <<<"$out"
kf leaderboard tc >"$T_DIR/leaderboard.txt"
check "leaderboard prints" grep -qi "speedup" "$T_DIR/leaderboard.txt"
kf best tc --out "$T_DIR/best.c"
check "best writes the winning source with its defines" grep -q "#define" "$T_DIR/best.c"
kf export --out "$T_DIR/site"
check "export writes a static site" test -s "$T_DIR/site/index.html"
check "export data names the campaign" grep -q '"name":"tc"' "$T_DIR/site/data/index.js"
# the campaign list's counts (kept in campaign_counts by the coordinator)
# are what the rows say
cid=$(sql "SELECT id FROM campaigns WHERE name = 'tc'")
check "the export's campaign list counts jobs, verdicts and attempts as the rows do" eq "$(python3 - "$T_DIR/site/data/index.js" <<'PY'
import json, re, sys
t = open(sys.argv[1]).read()
d = json.loads(re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), t[t.index("JSON.parse('") + 12:t.rindex("'))")]))
c = [c for c in d["campaigns"] if c["name"] == "tc"][0]
print(json.dumps([c["jobs"], c["verdicts"], c["attempts"]], sort_keys=True))
PY
)" "$(sql "SELECT json_build_array((SELECT json_object_agg(state, n) FROM (SELECT state, count(*) n FROM jobs WHERE campaign_id = $cid AND purpose = 'eval' GROUP BY state) s),
  (SELECT json_object_agg(verdict, n) FROM (SELECT e.verdict, count(*) n FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $cid AND j.purpose = 'eval' AND e.is_final GROUP BY 1) s),
  (SELECT json_object_agg(verdict, n) FROM (SELECT e.verdict, count(*) n FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $cid AND j.purpose = 'eval' GROUP BY 1) s))" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))')"

check "a target class holding a ',' is refused (one class per --target)" \
  bash -c "! \"$KFARM_BIN/kfarm\" campaign create tc-comma --task \"$KFARM_SRC/tasks/softmax_f32\" --target cpu,sm_90 2>$T_DIR/err.txt && grep -q 'its own --target' $T_DIR/err.txt"
check "no campaign was created for it" eq "$(sql "SELECT count(*) FROM campaigns WHERE name='tc-comma'")" 0

check "an unknown campaign subcommand is named as such" \
  bash -c "! \"$KFARM_BIN/kfarm\" campaign bogus 2>$T_DIR/err.txt && grep -q \"unknown subcommand 'bogus'\" $T_DIR/err.txt"
check "kfarm fails with a one-line reason on a missing campaign" \
  bash -c "! \"$KFARM_BIN/kfarm\" candidates no-such-campaign 2>$T_DIR/err.txt && [ \$(wc -l <$T_DIR/err.txt) -ge 1 ]"
printf '  \n' >"$T_DIR/empty.c"
check "candidate submit refuses an empty file" bash -c \
  "out=\$(\"$KFARM_BIN/kfarm\" candidate submit tc $T_DIR/empty.c 2>&1); [ \$? -ne 0 ] && grep -q 'empty file' <<<\"\$out\""
check "candidates refuses an unknown verdict filter" bash -c "! \"$KFARM_BIN/kfarm\" candidates tc --verdict bogus 2>/dev/null"
finish
