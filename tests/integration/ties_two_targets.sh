#!/usr/bin/env bash
# Noise and per-target bests (issue 10), over a real coordinator and worker:
#   - every ok result carries its CV and a speedup interval;
#   - identical tune variants (a tunable the code never reads) are reported
#     as ties in the leaderboard, per target;
#   - `kfarm best` with two targets: the best overall must be ok on every
#     target; a faster candidate that is incorrect on one target is named
#     with where it is not ok, and per-target bests are there with --target.
source "$(dirname "$0")/../lib.sh"
has() { grep -q -- "$1" <<<"$2" || { echo "  no '$1' in:" >&2; echo "$2" >&2; return 1; }; }

kf db migrate
start_coordinator
start_worker w1   # one evaluating worker: timings do not disturb each other
wait_for 60 "SELECT count(*) = 1 FROM workers WHERE cardinality(classes) >= 2"
model=$(sql "SELECT classes[2] FROM workers WHERE id = 'w1'")
{ echo "// kfarm:tune UNUSED=1,2,3,4"; cat "$KFARM_SRC/tests/llm/kernels/softmax_seed.c"; } >"$T_DIR/seed.c"
# One tune campaign of the four identical variants on both targets; prints
# its leaderboard's "count [(rank, tie)]" (and, when they are not all ties,
# the leaderboard and the results it came from on stderr).
tie_campaign() {
  kf campaign create "$1" --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --seed "$T_DIR/seed.c" \
    --target cpu --target "$model" --no-task-check >/dev/null
  kf campaign start "$1" >/dev/null
  kf campaign wait "$1" --timeout 600 --quiet >/dev/null
  local r
  r=$(kf leaderboard "$1" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(len(r), sorted(set((x["rank"], x["tie"]) for x in r)))')
  if [ "$r" != "8 [(1, True)]" ] || [ -n "${T_VERBOSE:-}" ]; then # what the ranks came from
    kf leaderboard "$1" >&2
    sql "SELECT j.purpose, j.target, j.candidate_id, e.verdict, round(e.speedup::numeric, 3), round(e.cv::numeric, 3), e.confirmation, left(coalesce(e.confirmation_detail, e.detail), 200) FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN candidates c ON c.id = j.candidate_id JOIN campaigns g ON g.id = c.campaign_id WHERE e.is_final AND g.name = '$1' ORDER BY j.id" >&2
  fi
  echo "$r"
}
# The ranks rest on timing, and one cpu evaluation can be off as a whole:
# on this 2-core VM (2026-12-06, nothing else running) ~1 in 8 quick
# evaluations of these identical variants timed one side ~1.6x slower than
# the other for the whole run (0.64x, 1.45x, 1.62x; the same seed again
# gave 1.00x), beyond the noise the judge sees inside the evaluation, and CI
# ranked one variant 0.646x [0.57-0.73]. The farm reports such a result as
# it was measured; this test asks for a campaign with no such evaluation,
# and runs the campaign again (tt2, tt3) when one had one. Everything below
# reads the campaign that ran last.
C=tt
ranks=$(tie_campaign "$C")
for again in tt2 tt3; do
  [ "$ranks" != "8 [(1, True)]" ] || break
  echo "[ties_two_targets] note: campaign $C ranked $ranks (an evaluation off as a whole?): once more as $again" >&2
  C=$again
  ranks=$(tie_campaign "$C")
done
check "every ok result has a CV and an interval around its speedup" eq \
  "$(sql "SELECT count(*) FILTER (WHERE e.cv >= 0 AND e.speedup_lo < e.speedup AND e.speedup < e.speedup_hi) || '/' || count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id JOIN candidates c ON c.id = j.candidate_id JOIN campaigns g ON g.id = c.campaign_id WHERE j.purpose = 'eval' AND e.is_final AND e.verdict = 'ok' AND g.name = '$C'")" "8/8"
check "identical variants are ties on both targets (rank 1 everywhere)" eq "$ranks" "8 [(1, True)]"
out=$(kf leaderboard "$C")
check "the leaderboard shows the interval and CV" has "95% INTERVAL *CV" "$out"
check "the leaderboard marks ties" has "^ *=1  cpu" "$out"
check "the leaderboard fits 80 columns" bash -c "[ \$(awk '{ if (length > m) m = length } END { print m }' <<<\"\$0\") -le 80 ]" "$out"

# make the fastest on cpu incorrect on the other target
fast=$(kf best "$C" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["targets"][0]["best"]["candidate"])')
sql "UPDATE evaluations e SET verdict = 'incorrect', speedup = NULL, speedup_lo = NULL, speedup_hi = NULL FROM jobs j WHERE j.id = e.job_id AND e.is_final AND j.candidate_id = $fast AND j.target = '$model'"
kf best "$C" --out "$T_DIR/best.c" 2>/dev/null
hdr=$(head -12 "$T_DIR/best.c")
check "best overall is ok on every target" has "^/\* kfarm best of campaign $C: candidate [0-9]*, ok on every target" "$hdr"
check "best overall is not the candidate that fails a target" bash -c "! grep -q 'candidate $fast, ok on every' <<<\"\$0\"" "$hdr"
check "best lists each target with interval and CV" has " \*   $model: [0-9.]*x \[[0-9.]*x, [0-9.]*x\] CV " "$hdr"
check "best says where the fastest is not ok" has "candidate $fast is fastest on cpu ([0-9.]*x) but not ok on $model (incorrect)" "$hdr"
check "best names the ties" has "tied within the noise with candidate" "$hdr"
check "the file still compiles as a candidate (defines on top)" has "^#define UNUSED " "$(cat "$T_DIR/best.c")"
check "best --target cpu is per target" has "kfarm best of campaign $C on cpu: candidate $fast" "$(kf best "$C" --target cpu)"
st=$(kf campaign status "$C")
check "status: a best per target" bash -c "grep -q '^best: *cpu: ' <<<\"\$0\" && grep -q \"^best: *$model: \" <<<\"\$0\"" "$st"
check "status: the overall best and the candidate not ok everywhere" has "not ok: *candidate $fast (fastest on cpu) is not ok on $model (incorrect)" "$st"
sql "UPDATE evaluations e SET verdict = 'incorrect' FROM jobs j WHERE j.id = e.job_id AND e.is_final AND j.target = '$model'"
rc=0; kf best "$C" 2>"$T_DIR/best.err" || rc=$?
check "no candidate ok everywhere: best refuses and says so" bash -c \
  "[ $rc = 1 ] && grep -q 'no candidate that is ok on every target yet' $T_DIR/best.err"
check "kfarm candidates --json carries cv and the interval" eq \
  "$(kf candidates "$C" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(sum(1 for x in r if x["verdict"] == "ok" and x["cv"] is not None and x["speedup_lo"] is not None))')" 4
kf export --out "$T_DIR/site" >/dev/null
cid=$(sql "SELECT id FROM campaigns WHERE name = '$C'")
check "the dashboard data carries bests per target, ties and noise" eq "$(node -e '
global.kfarmData = function (k, v) { global.D = v; };
require(process.argv[1]);
var c = global.D, ok = 0, withCv = 0;
c.chunks.forEach(function (n) { /* the tables, in chunks of candidate ids */
  require(process.argv[1].replace(/\.js$/, "/r" + n + ".js"));
  global.D.res.verdict.forEach(function (v, i) { if (v === 0) { ok++; if (global.D.res.cv[i] !== null) withCv++; } });
});
console.log(c.bests.targets.length, c.bests.not_everywhere[0].candidate === Number(process.argv[2]),
  ok > 0 && ok === withCv, JSON.stringify(c.blockers));
' "$T_DIR/site/data/c$cid.js" "$fast")" "2 true true []"
show=$(kf candidate show "$fast")
check "candidate show: per target verdict, interval and CV, then the source" bash -c \
  "grep -q '^results: *cpu: ok [0-9.]*x \[[0-9.]*-[0-9.]*x\] CV ' <<<\"\$0\" && grep -q \"$model: incorrect\" <<<\"\$0\" && grep -q '^#define UNUSED' <<<\"\$0\" && grep -q 'int kf_entry' <<<\"\$0\"" "$show"
check "candidate show --json" eq "$(kf candidate show "$fast" --json | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print(r["id"], len(r["results"]))')" "$fast 2"
finish
