#!/usr/bin/env bash
# The coordinator's periodic dashboard export (--export-dir) rewrites only
# what changed: with nothing new, only data/index.js; after a new evaluation
# of one candidate, that campaign's file, the chunk of its tables that holds
# the candidate and the candidate's bucket (and no other chunk or bucket),
# and they then carry the new attempt. A `kfarm export` into a fresh folder
# writes the same campaign file and chunks, and every candidate once, in its
# bucket.
source "$(dirname "$0")/../lib.sh"

kf db migrate >/dev/null
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v n=1100 -v name=inc -f "$KFARM_SRC/tests/browser/synth.sql"
# paused: the coordinator must not run the campaign's strategy
sql "UPDATE campaigns SET state = 'paused', updated_at = now() - interval '1 hour'" >/dev/null
start_coordinator --export-dir "$T_DIR/site" --export-interval 1
cid=$(sql "SELECT id FROM campaigns WHERE name = 'inc'")
S=$T_DIR/site/data
for _ in $(seq 100); do [ -s "$S/index.js" ] && break; sleep 0.1; done
check "the first export wrote the index, the campaign and its buckets" \
  bash -c "[ -s '$S/index.js' ] && [ -s '$S/c$cid.js' ] && [ \$(ls '$S/c$cid' | grep -c '^b') -eq \$(( $(sql "SELECT count(DISTINCT id / 128) FROM candidates") )) ]"
sleep 1.5
touch "$T_DIR/mark"; sleep 2.5
check "with nothing new, only the index is rewritten" eq "$(cd "$S" && find . -type f -newer "$T_DIR/mark" | sort | tr '\n' ' ')" "./index.js "
k=$(sql "SELECT min(id) + 100 FROM candidates")
touch "$T_DIR/mark"
sql "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, detail, is_final)
     SELECT id, candidate_id, 9, 'synth-w1', -999999, 'infra_error', 'INCREMENTAL-MARK', false
     FROM jobs WHERE candidate_id = $k AND target = 'cpu'" >/dev/null
# one export writes the bucket and the chunk, then the campaign file, then
# the index: wait for all of them (a loaded host took more than 1.5 s from
# the first to the last), then for one more interval
for _ in $(seq 300); do
  grep -q INCREMENTAL-MARK "$S/c$cid/b$((k / 128)).js" 2>/dev/null &&
    grep -q INCREMENTAL-MARK "$S/c$cid/r$((k / 8192)).js" 2>/dev/null &&
    [ "$S/index.js" -nt "$S/c$cid.js" ] && break
  sleep 0.1
done
sleep 1.5
check "after a new evaluation, its campaign file, chunk and bucket are rewritten, no other chunk or bucket" eq \
  "$(cd "$S" && find . -type f -newer "$T_DIR/mark" | sort | tr '\n' ' ')" "./c$cid.js ./c$cid/b$((k / 128)).js ./c$cid/r$((k / 8192)).js ./index.js "
check "the rewritten files carry the new attempt" \
  bash -c "grep -q INCREMENTAL-MARK '$S/c$cid/b$((k / 128)).js' && grep -q INCREMENTAL-MARK '$S/c$cid/r$((k / 8192)).js'"
# a result whose transaction began before an export's snapshot and
# committed after it carries a time (its transaction's start) before that
# export: the periodic export looks a minute further back (WORKERS_SQL in
# coordinator/export.c) and still writes it
k2=$((k + 200))
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 >/dev/null <<SQL
BEGIN;
INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, detail, is_final)
  SELECT id, candidate_id, 11, 'synth-w1', -999997, 'infra_error', 'STRADDLE-MARK', false
  FROM jobs WHERE candidate_id = $k2 AND target = 'cpu';
SELECT pg_sleep(3);
COMMIT;
SQL
for _ in $(seq 100); do grep -q STRADDLE-MARK "$S/c$cid/b$((k2 / 128)).js" 2>/dev/null && break; sleep 0.1; done
check "a result committed after an export that began during its transaction reaches a later export" \
  grep -q STRADDLE-MARK "$S/c$cid/b$((k2 / 128)).js"
kill -TERM "$T_COORD"; wait "$T_COORD" 2>/dev/null || true
kf export --out "$T_DIR/full" >/dev/null
check "a full export writes the same campaign file" \
  bash -c "sed 's/\"generated_at\":\"[^\"]*\"//' '$S/c$cid.js' >'$T_DIR/a'; sed 's/\"generated_at\":\"[^\"]*\"//' '$T_DIR/full/data/c$cid.js' >'$T_DIR/b'; cmp -s '$T_DIR/a' '$T_DIR/b'"
check "a full export writes the same chunks" bash -c "cd '$S/c$cid' && for f in r*.js; do cmp -s \$f '$T_DIR/full/data/c$cid/'\$f || exit 1; done && [ \$(ls r*.js | wc -l) = \$(ls '$T_DIR/full/data/c$cid' | grep -c '^r') ]"
check "the full export has every candidate in exactly its bucket" eq "$(python3 - "$T_DIR/full/data" "$cid" <<'PY'
import glob, json, re, sys
ids = []
for f in glob.glob(f"{sys.argv[1]}/c{sys.argv[2]}/b*.js"):
    t = open(f).read()
    d = json.loads(re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)),
                          t[t.index("JSON.parse('") + 12:t.rindex("'))")]))
    n = int(re.search(r"/b(\d+)\.js$", f).group(1))
    ids += [int(k) for k in d if int(k) // 128 == n and d[k]["id"] == int(k)]
print(len(ids), len(set(ids)))
PY
)" "$(sql "SELECT count(*) || ' ' || count(*) FROM candidates WHERE campaign_id = $cid")"
# the same incremental path from the CLI (`kfarm export --since`)
since=$(sql "SELECT now()")
sql "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict, detail, is_final)
     SELECT id, candidate_id, 10, 'synth-w1', -999998, 'infra_error', 'CLI-SINCE-MARK', false
     FROM jobs WHERE candidate_id = $k + 64 AND target = 'cpu'" >/dev/null
sleep 1.1; touch "$T_DIR/mark2"
kf export --out "$T_DIR/full" --since "$since" >/dev/null
check "kfarm export --since rewrites only the changed campaign file, chunk and bucket (and the static files)" eq \
  "$(cd "$T_DIR/full/data" && find . -type f -newer "$T_DIR/mark2" | sort | tr '\n' ' ')" "./c$cid.js ./c$cid/b$(((k + 64) / 128)).js ./c$cid/r$(((k + 64) / 8192)).js ./index.js "
check "the rewritten bucket carries the new attempt" grep -q CLI-SINCE-MARK "$T_DIR/full/data/c$cid/b$(((k + 64) / 128)).js"
# a folder written with another layout (an older kfarm bucketed its
# candidate files by 32): an incremental export writes the campaign whole
rm "$T_DIR/full/data/c$cid/layout"
rm "$T_DIR/full/data/c$cid/b$((k / 128)).js"
sleep 1.1; touch "$T_DIR/mark3"
kf export --out "$T_DIR/full" --since "$(sql "SELECT now()")" >/dev/null
check "a folder of another layout is written whole by an incremental export" eq \
  "$(cd "$T_DIR/full/data/c$cid" && find . -name 'b*.js' -newer "$T_DIR/mark3" | wc -l) $(cat "$T_DIR/full/data/c$cid/layout")" \
  "$(sql "SELECT count(DISTINCT id / 128) FROM candidates WHERE campaign_id = $cid") bucket 128"
finish
