#!/usr/bin/env bash
# The dashboard export with redundant verification of winners
# (jobs.purpose = 'verify', evaluations.confirmation, confirmed_by_worker:
# schema/003_trust.sql): a
# verification job neither counts as a result nor becomes a best, even with a
# huge speedup; each result carries its confirmation state; the candidate
# file shows the verification with the worker that confirmed.
source "$(dirname "$0")/../lib.sh"

kf db migrate >/dev/null
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v n=300 -v name=tr -f "$KFARM_SRC/tests/browser/synth.sql"
best=$(sql "SELECT e.id FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE e.is_final AND e.verdict = 'ok' AND j.target = 'cpu' ORDER BY e.speedup DESC LIMIT 1")
k=$(sql "SELECT candidate_id FROM evaluations WHERE id = $best")
want=$(sql "SELECT round(speedup::numeric, 4) FROM evaluations WHERE id = $best")
sql "UPDATE evaluations SET confirmation = 'confirmed', confirmed_by_worker = 'synth-w9' WHERE id = $best;
     INSERT INTO jobs (candidate_id, campaign_id, target, state, purpose, verifies, attempts, worker_id)
       SELECT candidate_id, campaign_id, target, 'done', 'verify', $best, 1, 'synth-w9' FROM jobs WHERE id = (SELECT job_id FROM evaluations WHERE id = $best);
     INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, speedup, is_final)
       SELECT max(id), $k, 1, 'synth-w9', -1, 'ok', 1000, true FROM jobs WHERE purpose = 'verify';" >/dev/null
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -f "$KFARM_SRC/tests/recount.sql" >/dev/null # the rows above bypassed the counts
kf export --out "$T_DIR/site" >/dev/null
out=$(python3 - "$T_DIR/site/data" "$k" <<'PY'
import json, re, sys
def data(key):
    t = open(f"{sys.argv[1]}/{key}.js").read()
    return json.loads(re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)),
                             t[t.index("JSON.parse('") + 12:t.rindex("'))")]))
k = int(sys.argv[2])
c = data("index")["campaigns"][0]
C = data(f"c{c['id']}")
best = {b["target"]: b for b in C["best"]}
ibest = {b["target"]: b for b in c["best"]}
res = {"k": [], "target": [], "conf": []}
for n in C["chunks"]:  # the tables, in chunks of candidate ids
    r = data(f"c{c['id']}/r{n}")["res"]
    res["k"] += r["k"]
    res["target"] += r["target"]
    res["conf"] += r["conf"] or [None] * len(r["k"])
conf = [res["conf"][i] for i, kk in enumerate(res["k"]) if kk == k and C["targets"][res["target"][i]] == "cpu"]
K = data(f"c{c['id']}/b{k // 128}")[str(k)]
ver = [r for r in K["results"] if r["purpose"] == "verify"]
print(round(best["cpu"]["speedup"], 4), round(ibest["cpu"]["speedup"], 4), len(res["k"]), sum(C["jobs"].values()),
      conf, len(ver), ver[0]["evaluations"][0]["speedup"] if ver else None,
      [e["conf_by"] for r in K["results"] for e in r["evaluations"] if e["conf"] == "confirmed"])
PY
)
jobs=$(sql "SELECT count(*) FROM jobs WHERE purpose = 'eval'")
check "verification jobs are not results, not bests; results carry their confirmation; the candidate shows who confirmed" \
  eq "$out" "$want $want $jobs $jobs ['confirmed'] 1 1000 ['synth-w9']"
finish
