/*
 * screenshots.mjs -- the PNG screenshots in docs/dashboard.md, taken in
 * headless chromium from an exported site:
 *
 *   node tests/browser/screenshots.mjs SITE_DIR OUT_DIR CAMPAIGN CANDIDATE
 *
 * Writes dashboard-list.png, dashboard-campaign.png (two parts),
 * dashboard-candidate.png and dashboard-fleet.png, 1200 px wide.
 */
import { chromium } from 'playwright-core';

const [site, out, campaign, candidate] = process.argv.slice(2);
const b = await chromium.launch({ executablePath: process.env.KFARM_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const p = await b.newPage({ viewport: { width: 1200, height: 900 }, colorScheme: 'light' });
async function shot(hash, file, opts = {}) {
  await p.goto('file://' + site + '/index.html' + hash);
  await p.waitForFunction((h) => document.querySelector('main').getAttribute('data-route') === h, hash, { timeout: 60000 });
  await p.waitForTimeout(400);
  if (opts.scrollTo) await p.evaluate((id) => { document.getElementById(id).scrollIntoView(); }, opts.scrollTo);
  if (opts.click) for (const sel of opts.click) await p.locator(sel).first().click();
  await p.waitForTimeout(200);
  await p.screenshot({ path: `${out}/${file}` });
}
const c = '#c/' + encodeURIComponent(campaign);
await shot('', 'dashboard-list.png');
await shot(c, 'dashboard-campaign.png');
await shot(c, 'dashboard-campaign-tables.png', { scrollTo: 's-tunables' });
await shot(`${c}/${candidate}`, 'dashboard-candidate.png');
await shot(`${c}/${candidate}`, 'dashboard-candidate-source.png', { scrollTo: 's-source' });
await shot('#fleet', 'dashboard-fleet.png');
await b.close();
