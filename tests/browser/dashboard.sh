#!/usr/bin/env bash
# tests/browser/dashboard.sh -- the dashboard in a real browser: Debian's
# chromium driven by playwright-core (tests/browser/package.json; tools/
# install-deps runs npm ci). A coordinator and a worker run a small `tune`
# campaign to completion (the demo), tests/browser/synth.sql adds a synthetic
# campaign of 100,000 candidates (KFARM_BROWSER_N to change) with a hostile
# candidate, `kfarm export` writes the site, and dashboard.test.mjs opens
# every page from file:// and over http, comparing the numbers shown with the
# ones computed here from the database (expect.json).
source "$(dirname "$0")/../lib.sh"
B=$KFARM_SRC/tests/browser
N=${KFARM_BROWSER_N:-100000}
if [ ! -d "$B/node_modules/playwright-core" ]; then
  (cd "$B" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
fi
command -v chromium >/dev/null || { log "chromium is missing: run tools/install-deps"; exit 1; }

kf db migrate >/dev/null
start_coordinator
start_worker w1
kf campaign create demo --task "$KFARM_SRC/tasks/softmax_f32" --strategy tune --target cpu --max-candidates 4 >/dev/null
kf campaign start demo >/dev/null
kf campaign wait demo --timeout 300 >/dev/null
# stop the farm: the synthetic campaign's queued jobs must stay as written
kill -TERM "$T_LASTPID" "$T_COORD"
wait "$T_LASTPID" "$T_COORD" 2>/dev/null || true
t=$(date +%s.%N)
psql "$KFARM_DB" -qtAX -v ON_ERROR_STOP=1 -v n="$N" -v name=big -f "$B/synth.sql"
log "synthetic campaign of $N candidates made in $(python3 -c "print(round($(date +%s.%N) - $t, 1))") s"
# The fleet as the pages must show it, whenever an export runs: the demo's
# workers are stopped (offline: last seen an hour ago), synth-w1/w2 are live
# (they "heartbeat" every 5 s until the test ends), synth-w3 is quarantined.
# Without this, a slow host moved the live ones past the 60 s offline line
# between the export and the expectation (CI: online got 2, want 0).
sql "UPDATE workers SET last_seen = now() - interval '1 hour' WHERE id NOT LIKE 'synth-%' AND NOT quarantined" >/dev/null
( while :; do sql "UPDATE workers SET last_seen = now() WHERE id IN ('synth-w1', 'synth-w2')" >/dev/null 2>&1; sleep 5; done ) &
T_PIDS+=($!)
t=$(date +%s.%N)
kf export --out "$T_DIR/site" >/dev/null
log "export took $(python3 -c "print(round($(date +%s.%N) - $t, 1))") s (not a pass/fail criterion: see tools/bench)"

# what the pages must show, from the database (the campaign's own jobs:
# verification jobs of fleet trust are not results)
sql "WITH fin AS (SELECT e.*, j.target, j.campaign_id FROM evaluations e JOIN jobs j ON j.id = e.job_id AND j.purpose = 'eval' WHERE e.is_final),
  best AS (SELECT DISTINCT ON (campaign_id, target) campaign_id, target, candidate_id, speedup FROM fin
           WHERE verdict = 'ok' AND speedup IS NOT NULL ORDER BY campaign_id, target, speedup DESC, candidate_id),
  top AS (SELECT DISTINCT ON (campaign_id) campaign_id, candidate_id FROM best ORDER BY campaign_id, speedup DESC, candidate_id)
SELECT json_build_object(
  'campaigns', (SELECT json_agg(json_build_object('name', c.name,
     'candidates', (SELECT count(*) FROM candidates WHERE campaign_id = c.id),
     'jobs_done', (SELECT count(*) FROM jobs WHERE purpose = 'eval' AND campaign_id = c.id AND state = 'done'),
     'jobs_total', (SELECT count(*) FROM jobs WHERE purpose = 'eval' AND campaign_id = c.id),
     'attempts', (SELECT count(*) FROM evaluations e JOIN jobs j ON j.id = e.job_id AND j.purpose = 'eval' WHERE j.campaign_id = c.id),
     'best', (SELECT json_agg(json_build_object('target', target, 'candidate_id', candidate_id, 'speedup', speedup)) FROM best WHERE campaign_id = c.id),
     'results', (SELECT count(*) FROM jobs WHERE purpose = 'eval' AND campaign_id = c.id),
     'ok', (SELECT count(*) FROM fin WHERE campaign_id = c.id AND verdict = 'ok' AND speedup IS NOT NULL),
     'best_confirmed', (SELECT max(speedup) FROM fin WHERE campaign_id = c.id AND verdict = 'ok' AND confirmation = 'confirmed'),
     'proposals', (SELECT count(*) FROM proposals WHERE campaign_id = c.id),
     'best_candidate', top.candidate_id,
     'best_candidate_jobs', (SELECT count(*) FROM jobs j JOIN candidates k ON k.id = j.candidate_id
        LEFT JOIN fin f ON f.job_id = j.id WHERE j.purpose = 'eval' AND k.campaign_id = c.id
        AND (('#' || k.id) LIKE '#' || top.candidate_id || '%' OR ('#' || k.parent_id) LIKE '#' || top.candidate_id || '%'
             OR position('#' || top.candidate_id IN COALESCE(left(f.detail, 120), '')) > 0)),
     'parent_candidate', (SELECT parent_id FROM candidates WHERE id = top.candidate_id)) ORDER BY c.id)
     FROM campaigns c JOIN top ON top.campaign_id = c.id),
  'fleet', json_build_object(
     'online', (SELECT count(*) FROM workers WHERE NOT quarantined AND last_seen >= now() - interval '60 s'),
     'offline', (SELECT count(*) FROM workers WHERE NOT quarantined AND last_seen < now() - interval '60 s'),
     'quarantined', (SELECT count(*) FROM workers WHERE quarantined)),
  'hostile', json_build_object('campaign', 'big', 'candidate', (SELECT id FROM candidates WHERE sha256 = 'sha--1'),
     'failed_proposal', (SELECT id FROM proposals WHERE reply LIKE '%KF_PWNED=2%')),
  'refresh_state', 'paused')" >"$T_DIR/expect.json"
check "both campaigns have a best result to check" eq \
  "$(python3 -c "import json; print(len(json.load(open('$T_DIR/expect.json'))['campaigns']))")" 2

# a static web server for the http part, and a second export once the page asks
port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
python3 -m http.server --bind 127.0.0.1 --directory "$T_DIR/site" "$port" >"$T_DIR/http.log" 2>&1 &
T_PIDS+=($!)
(
  for _ in $(seq 3000); do [ -e "$T_DIR/refresh-ready" ] && break; sleep 0.2; done
  sql "UPDATE campaigns SET state = 'paused' WHERE name = 'demo'" >/dev/null
  kf export --out "$T_DIR/site" >/dev/null
) &
T_PIDS+=($!)
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break; sleep 0.1; done

check "every page renders in chromium with the database's numbers, links, deep links, hostile text as text, refresh over http" \
  node "$B/dashboard.test.mjs" "$T_DIR/site" "$T_DIR/expect.json" "http://127.0.0.1:$port"
finish
