/*
 * dashboard.test.mjs -- drives Debian's chromium (playwright-core) over an
 * exported dashboard and checks what a user relies on (run by dashboard.sh,
 * which builds the site and computes the expected numbers from the database).
 *
 *   node dashboard.test.mjs SITE_DIR EXPECT_JSON [HTTP_URL]
 *
 * EXPECT_JSON: { campaigns: [{name, candidates, jobs_done, jobs_total,
 * attempts, best: [{target, candidate_id, speedup}], results, ok, proposals,
 * best_candidate, parent_candidate}], fleet: {online, offline, quarantined},
 * hostile: {campaign, candidate, failed_proposal} }.
 *
 * Every page of every campaign is opened from file:// (and a deep link in a
 * fresh page); no page may log a console error or throw. Numbers on the
 * pages must equal the database's. A hostile candidate's markup (source,
 * detail, compile log, prompt) must show as text and never run. Over http,
 * the page must pick up a new export by itself. Prints one line per check
 * and "N passed, M failed"; exits 1 on any failure.
 */
import { chromium } from 'playwright-core';
import fs from 'node:fs';

const [site, expectPath, httpUrl] = process.argv.slice(2);
const X = JSON.parse(fs.readFileSync(expectPath, 'utf8'));
let passed = 0, failed = 0;
function check(what, ok, detail) {
  if (ok) passed++; else failed++;
  console.log((ok ? 'ok: ' : 'FAIL: ') + what + (ok || detail === undefined ? '' : ' -- ' + detail));
}
function eq(what, got, want) { check(what, got === want, `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); }

const browser = await chromium.launch({
  executablePath: process.env.KFARM_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--allow-file-access-from-files'],
});
const errors = [];
async function newPage() {
  const p = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  p.on('console', (m) => { if (m.type() === 'error') errors.push(`${p.url()}: ${m.text()}`); });
  p.on('pageerror', (e) => errors.push(`${p.url()}: ${e.message}`));
  return p;
}
const base = 'file://' + site + '/index.html';
/* Navigate (or follow a hash change) and wait until that route rendered. */
async function open(p, hash, viaHash) {
  const t = Date.now();
  if (viaHash) await p.evaluate((h) => { location.hash = h; }, hash);
  else await p.goto(base + hash);
  await p.waitForFunction((h) => document.querySelector('main').getAttribute('data-route') === h, hash, { timeout: 60000 });
  await p.waitForTimeout(50); /* plots are drawn on the next frame */
  return Date.now() - t;
}
const text = (p, sel) => p.locator(sel).first().innerText();
const cardText = (p, k) => p.locator(`[data-k="${k}"]`).first().innerText();
function fmt3(x) { return Number(x).toFixed(3) + 'x'; }
/* a row's speedup cell ("10.415x") shows best: the tables show the export's
 * 4-decimal value at 3 decimals, so compare numbers, not strings (10.41449
 * is "10.414x" but its export 10.4145 may show "10.415x") */
const hasSpeedup = (cells, best) => cells.some((t) => /^\d+(\.\d+)?x$/.test(t) && Math.abs(parseFloat(t) - best) <= 0.0011);

const page = await newPage();

/* ---- campaign list ---- */
await open(page, '');
for (const c of X.campaigns) {
  const row = page.locator('#campaigns tbody tr', { hasText: c.name }).first();
  eq(`list: ${c.name} shows its candidate count`, await row.locator('td').nth(5).innerText(), String(c.candidates));
}
check('list: a link opens the campaign', true);
await page.locator('#campaigns tbody a', { hasText: X.campaigns[0].name }).first().click();
await page.waitForFunction((h) => document.querySelector('main').getAttribute('data-route') === h, '#c/' + encodeURIComponent(X.campaigns[0].name));
eq('list: clicking a campaign shows its page', await text(page, 'h1'), 'Campaigns / ' + X.campaigns[0].name);

/* ---- each campaign ---- */
const timings = {};
for (const c of X.campaigns) {
  const h = '#c/' + encodeURIComponent(c.name);
  const p = await newPage(); /* a deep link in a fresh page: the campaign file is not cached */
  timings[c.name] = await open(p, h);
  eq(`${c.name}: candidates`, await cardText(p, 'candidates'), String(c.candidates));
  eq(`${c.name}: jobs done`, await cardText(p, 'jobs'), `${c.jobs_done} / ${c.jobs_total}`);
  check(`${c.name}: attempts`, (await cardText(p, 'attempts')).startsWith(c.attempts + ' ('), await cardText(p, 'attempts'));
  for (const b of c.best) {
    eq(`${c.name}: best on ${b.target}`, await cardText(p, 'best-' + b.target), `${fmt3(b.speedup)} #${b.candidate_id}`);
  }
  eq(`${c.name}: results table counts every job`, await text(p, '#results .dt-info'), `${c.results} rows`);
  check(`${c.name}: the scatter of every attempt is drawn`, (await p.locator('#s-attempts + .plot canvas').count()) === 1);
  check(`${c.name}: best so far is drawn`, c.ok === 0 || (await p.locator('#s-best + .plot canvas').count()) === 1);
  if (c.ok > 0) {
    eq(`${c.name}: leaderboard counts ok results`, await text(p, '#leaderboard .dt-info'), `${c.ok} rows`);
    /* the leaderboard is sorted by speedup, best first; once any result is
     * confirmed, confirmed results come first (app.js), so it starts with
     * the fastest confirmed one */
    const top = await p.locator('#leaderboard tbody tr').first().locator('td').allInnerTexts();
    const best = c.best_confirmed !== null && c.best_confirmed !== undefined
      ? c.best_confirmed : Math.max(...c.best.map((b) => b.speedup));
    check(`${c.name}: leaderboard starts with the best result`, hasSpeedup(top, best), top.join(' | '));
  }
  /* sorting, searching and paging the results table */
  const speedHead = p.locator('#results th', { hasText: /^speedup$/ });
  await speedHead.click(); /* numbers sort descending first */
  eq(`${c.name}: the sorted column says so`, await speedHead.getAttribute('aria-sort'), 'descending');
  if (c.ok > 0) {
    const best = Math.max(...c.best.map((b) => b.speedup));
    const first = await p.locator('#results tbody tr').first().locator('td').allInnerTexts();
    check(`${c.name}: sorting results by speedup puts the best first`, hasSpeedup(first, best), first.join(' | '));
  }
  if (c.results > 50) {
    await p.locator('#results .dt-pager button', { hasText: 'next' }).click();
    check(`${c.name}: paging`, (await text(p, '#results .dt-pager')).includes('page 2 of ' + Math.ceil(c.results / 50)));
  }
  await p.locator('#results input[type=search]').fill('#' + c.best_candidate);
  await p.waitForFunction((n) => document.querySelector('#results .dt-info').textContent.startsWith(n + ' of'), String(c.best_candidate_jobs), { timeout: 5000 }).catch(() => {});
  const info = await text(p, '#results .dt-info');
  check(`${c.name}: search narrows the results`, info.startsWith(`${c.best_candidate_jobs} of `) || c.best_candidate_jobs === c.results, info);
  if (c.proposals > 0) eq(`${c.name}: proposals table`, await text(p, '#proposals .dt-info'), `${c.proposals} rows`);

  /* a link to the best candidate, and its page */
  await p.locator('#leaderboard tbody a', { hasText: '#' + c.best_candidate }).first().click().catch(() => {});
  await p.waitForFunction((h) => document.querySelector('main').getAttribute('data-route') === h, `${h}/${c.best_candidate}`, { timeout: 30000 })
    .then(() => check(`${c.name}: a leaderboard link opens the candidate`, true))
    .catch((e) => check(`${c.name}: a leaderboard link opens the candidate`, false, e.message));
  const lines = await p.locator('.res-line').allInnerTexts();
  const bestRow = c.best.find((b) => b.candidate_id === c.best_candidate);
  check(`${c.name}: the candidate page shows its speedup`, lines.some((l) => l.includes('speedup ' + fmt3(bestRow.speedup))), lines.join(' / '));
  check(`${c.name}: source with line numbers and highlighting`,
    (await p.locator('.src pre.ln').count()) === 1 && (await p.locator('.src code.hljs span').count()) > 0);
  check(`${c.name}: timing per shape`, (await p.locator('h4', { hasText: 'Timing per shape' }).count()) > 0);
  check(`${c.name}: verdict history`, (await p.locator('h4', { hasText: 'Verdict history' }).count()) > 0);
  if (c.parent_candidate) check(`${c.name}: diff to the parent`, (await p.locator('#s-diff').count()) === 1 &&
    ((await p.locator('.d2h-wrapper').count()) === 1 || (await text(p, '#s-diff + p')).startsWith('Same source')));
  /* a deep link straight to the candidate */
  const p2 = await newPage();
  await open(p2, `${h}/${c.best_candidate}`);
  eq(`${c.name}: deep link to a candidate`, await text(p2, 'h1'), `Campaigns / ${c.name} / #${c.best_candidate}`);
  await p2.close();
  await p.close();
}

/* ---- hostile text ---- */
{
  const hc = X.hostile;
  const p = await newPage();
  await open(p, `#c/${encodeURIComponent(hc.campaign)}/${hc.candidate}`);
  await p.locator('details.prompt summary').click();
  const src = await text(p, '.src pre.code');
  check('hostile: source markup shows as text', src.includes('<script>window.KF_PWNED=1</script> <b>not bold</b>'), src.slice(0, 200));
  check('hostile: no element from the source', (await p.locator('.src b, .src script, main img').count()) === 0);
  const detail = await p.locator('pre.detail').allInnerTexts();
  check('hostile: detail markup shows as text', detail.some((d) => d.includes('<img src=x onerror="window.KF_PWNED=1">')), detail.join(' / '));
  const prompt = await text(p, 'details.prompt pre');
  check('hostile: prompt markup shows as text', prompt.includes('<img src=x onerror="window.KF_PWNED=1"> <b>bold</b> &amp; </script>'), prompt);
  await p.locator('details summary', { hasText: 'compile log' }).first().click().catch(() => {});
  const logs = await p.locator('pre.log').allInnerTexts();
  check('hostile: compile log markup shows as text', logs.some((l) => l.includes('<b>UNROLL</b>')), logs.join(' / '));
  /* the results table of the campaign shows the hostile detail as text too */
  await open(p, `#c/${encodeURIComponent(hc.campaign)}`, true);
  await p.locator('#results input[type=search]').fill('onerror');
  await p.waitForFunction(() => / of /.test(document.querySelector('#results .dt-info').textContent));
  const cell = await p.locator('#results tbody td.detail').first().innerText();
  check('hostile: detail in the table shows as text', cell.includes('<img src=x'), cell);
  await p.waitForTimeout(200);
  eq('hostile: no injected script ran', await p.evaluate(() => window.KF_PWNED), undefined);
  /* a proposal that made no candidate: linked from the proposals table, its reply as text */
  await p.locator('#proposals input[type=search]').fill('#' + hc.failed_proposal);
  await p.locator('#proposals a', { hasText: '#' + hc.failed_proposal }).first().click().catch(() => {});
  await p.waitForFunction((h) => document.querySelector('main').getAttribute('data-route') === h,
    `#c/${encodeURIComponent(hc.campaign)}/p/${hc.failed_proposal}`, { timeout: 30000 }).catch(() => {});
  check('proposal: a failed proposal opens from the proposals table with why',
    (await p.locator('main .reason').count()) === 1 && (await text(p, 'main .reason')).includes('cut off'));
  const reply = await p.locator('pre.reply').count() ? await text(p, 'pre.reply') : '';
  check('hostile: a reply with markup shows as text', reply.includes('<script>window.KF_PWNED=2</script> <i>cut'), reply);
  eq('hostile: no injected script ran on the proposal page', await p.evaluate(() => window.KF_PWNED), undefined);
  await p.close();
}

/* ---- fleet ---- */
{
  const p = await newPage();
  await open(p, '#fleet');
  eq('fleet: online', await cardText(p, 'online'), String(X.fleet.online));
  eq('fleet: offline', await cardText(p, 'offline'), String(X.fleet.offline));
  eq('fleet: quarantined', await cardText(p, 'quarantined'), String(X.fleet.quarantined));
  eq('fleet: one row per worker', await text(p, '#workers .dt-info'), `${X.fleet.online + X.fleet.offline + X.fleet.quarantined} rows`);
  const w1 = await text(p, '#workers tr:has(td:text-is("synth-w1"))');
  check('fleet: a worker\'s verifications and who disputed it', w1.includes('1 agreed / 2 disputed (by synth-w2 \u00d72)'), w1);
  await p.close();
}

/* ---- a bad link ---- */
{
  const p = await newPage();
  await open(p, '#c/no-such-campaign');
  eq('a link to a missing campaign says so', await text(p, 'main .error'), 'No campaign no-such-campaign.');
  await open(p, `#c/${encodeURIComponent(X.campaigns[0].name)}/999999999`, true);
  check('a link to a missing candidate says so', (await text(p, 'main .error')).startsWith('No candidate #999999999'));
  await p.close();
}

/* ---- over http: the page refreshes itself when a new export lands ---- */
if (httpUrl) {
  const p = await newPage();
  const c = X.campaigns[0];
  await p.goto(httpUrl + '/index.html?refresh=500#c/' + encodeURIComponent(c.name));
  await p.waitForFunction(() => document.querySelector('main').getAttribute('data-ready'));
  eq('http: the campaign page loads', await cardText(p, 'candidates'), String(c.candidates));
  fs.writeFileSync(site + '/../refresh-ready', '1'); /* dashboard.sh changes the database and exports again */
  const ok = await p.waitForFunction((s) => document.querySelector('[data-k="state"]') &&
    document.querySelector('[data-k="state"]').textContent === s, X.refresh_state, { timeout: 120000 }).then(() => true, () => false);
  check('http: the page shows the new export by itself', ok);
  await p.close();
}

check('no console errors on any page', errors.length === 0, errors.slice(0, 5).join('\n'));
console.log('page load (ms, from a cold page, not a pass/fail criterion): ' + JSON.stringify(timings));
await browser.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
