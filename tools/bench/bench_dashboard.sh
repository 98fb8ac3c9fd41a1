#!/usr/bin/env bash
# tools/bench/bench_dashboard.sh -- the static dashboard at scale: a synthetic
# campaign of N candidates (tests/browser/synth.sql: two targets, ~80% failed
# attempts, one retry in ten, LLM proposals), then R times: `kfarm export`
# wall time and the size of what it wrote; and in headless chromium
# (playwright-core from tests/browser) the time from navigation to a
# rendered page for the campaign list, the campaign page and a candidate
# page, each in a fresh tab with nothing cached. Prints one row per measure:
# median, min and max over the runs.
#
#   tools/bench/bench_dashboard.sh [N [R [CAMPAIGNS]]]   (default 100000 5 1)
#
# CAMPAIGNS > 1 adds that many small campaigns (100 candidates each) to
# measure the list page against the number of campaigns. Needs a build in
# build/ and tools/install-deps (chromium, npm ci in tests/browser). Uses its
# own database `kfbench_dash` in the checkout's tools/devdb cluster. Run it on
# an otherwise idle machine; numbers go to docs/benchmarks.md by hand.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
N=${1:-100000}
R=${2:-5}
NC=${3:-1}
W=$(mktemp -d /tmp/kfbench-dash.XXXXXX)
trap 'rm -rf "$W"' EXIT
tools/devdb start >/dev/null
DB=$(tools/devdb createdb kfbench_dash 2>/dev/null)
KFARM_DB=$DB build/kfarm db migrate >/dev/null
s=$(date +%s.%N)
psql "$DB" -qtAX -v ON_ERROR_STOP=1 -v n="$N" -v name=big -f tests/browser/synth.sql
for i in $(seq 2 "$NC"); do
  psql "$DB" -qtAX -v ON_ERROR_STOP=1 -v n=100 -v name="small$i" -f tests/browser/synth.sql
done
echo "synthetic data: $N candidates (+ $((NC - 1)) campaigns of 100) in $(python3 -c "print(round($(date +%s.%N) - $s, 1))") s"
: >"$W/export"
for i in $(seq "$R"); do
  rm -rf "$W/site"
  s=$(date +%s.%N)
  KFARM_DB=$DB build/kfarm export --out "$W/site" >/dev/null
  python3 -c "print($(date +%s.%N) - $s)" >>"$W/export"
done
cid=$(psql "$DB" -qtAX -c "SELECT id FROM campaigns WHERE name = 'big'")
kid=$(psql "$DB" -qtAX -c "SELECT e.candidate_id FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $cid AND e.is_final AND e.verdict = 'ok' ORDER BY e.speedup DESC LIMIT 1")
echo "export of the whole site: $(du -sh "$W/site" | cut -f1) in $(find "$W/site" -type f | wc -l) files;" \
  "campaign file $(du -h "$W/site/data/c$cid.js" | cut -f1) and its chunks $(cat "$W"/site/data/c$cid/r*.js | wc -c | awk '{printf "%.1fM", $1 / 1048576}'),"
  "index $(du -h "$W/site/data/index.js" | cut -f1)," \
  "candidate bucket $(du -h "$W/site/data/c$cid/b$((kid / 32)).js" | cut -f1)"
cat >"$W/pages.mjs" <<'JS'
import { createRequire } from 'node:module';
const require = createRequire(process.argv[2] + '/tests/browser/');
const { chromium } = require('playwright-core');
const [, , , site, runs, ...hashes] = process.argv;
const b = await chromium.launch({ executablePath: process.env.KFARM_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
for (let i = 0; i < Number(runs); i++) {
  for (const h of hashes) {
    const ctx = await b.newContext({ viewport: { width: 1400, height: 900 } });
    const p = await ctx.newPage();
    await p.goto('file://' + site + '/index.html' + h);
    await p.waitForFunction((h) => document.querySelector('main').getAttribute('data-route') === h, h, { timeout: 60000 });
    /* + the frame that draws the plots */
    const ms = await p.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
    console.log(h || '#', ms);
    await ctx.close();
  }
}
await b.close();
JS
node "$W/pages.mjs" "$here" "$W/site" "$R" '' "#c/big" "#c/big/$kid" >"$W/pages"
python3 - "$W/export" "$W/pages" "$N" <<'PY'
import statistics, sys
rows = [("export (s)", [float(x) for x in open(sys.argv[1])])]
pages = {}
for line in open(sys.argv[2]):
    h, ms = line.split()
    pages.setdefault(h, []).append(float(ms) / 1000)
names = {"#": "campaign list page (s)", "#c/big": "campaign page, %s candidates (s)" % sys.argv[3]}
for h, v in pages.items():
    rows.append((names.get(h, "candidate page (s)"), v))
print("%-42s %8s %8s %8s" % ("measure", "median", "min", "max"))
for n, v in rows:
    print("%-42s %8.2f %8.2f %8.2f" % (n, statistics.median(v), min(v), max(v)))
PY
