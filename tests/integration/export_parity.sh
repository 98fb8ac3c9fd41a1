#!/usr/bin/env bash
# The dashboard export builds its candidate files and chunks in C from
# flat rows (coordinator/export.c, cand_files() and chunk_text()). Their
# JSON must be what PostgreSQL's json_build_object/json_agg gave before
# (export_parity/oracle.sql, the queries the export used until 2026-12-03):
# the synthetic campaign of tests/browser/synth.sql plus edge rows
# (export_parity/edges.sql: control characters, quotes, backslashes and
# multi-byte text cut at 120 characters, NaN and infinite speedups, values
# that round at a tie, metrics whose flags are an object or a string, a
# verification job, a candidate with 600 children, a parent in another
# chunk, a candidate without jobs). Every candidate and every chunk is
# compared, numbers within 1e-9.
source "$(dirname "$0")/../lib.sh"

kf db migrate >/dev/null
here=$KFARM_SRC/tests/integration/export_parity
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v n=20000 -v name=par -f "$KFARM_SRC/tests/browser/synth.sql" >/dev/null
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v name=par -f "$here/edges.sql" >/dev/null
cid=$(sql "SELECT id FROM campaigns WHERE name = 'par'")
rc=0
kf export --out "$T_DIR/site" >"$T_DIR/export.txt" 2>&1 || rc=$?
check "kfarm export succeeds on the edge rows" eq "$rc" 0
cat "$T_DIR/export.txt" >&2
mkdir -p "$T_DIR/oracle"
read -r lo hi <<<"$(sql "SELECT min(id), max(id) + 1 FROM candidates WHERE campaign_id = $cid" | tr '|' ' ')"
# the oracle's candidates (first statement), then each chunk (second)
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v cid="$cid" -v lo="$lo" -v hi="$hi" \
  -c "SET TimeZone = 'UTC'" -f <(sed -n '/^SELECT k.id, json_build_object/p' "$here/oracle.sql") >"$T_DIR/oracle/cands.txt"
for n in $(sql "SELECT DISTINCT id / 8192 FROM candidates WHERE campaign_id = $cid ORDER BY 1"); do
  psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v cid="$cid" -v lo=$((n * 8192)) -v hi=$((n * 8192 + 8192)) \
    -c "SET TimeZone = 'UTC'" -c "SET enable_nestloop = off" -f <(sed -n '/^WITH c AS/p' "$here/oracle.sql") >"$T_DIR/oracle/r$n.json"
done
check "every candidate file and chunk is what the oracle gives" python3 "$here/compare.py" "$T_DIR/site" "$cid" "$T_DIR/oracle"
finish
