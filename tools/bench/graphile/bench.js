#!/usr/bin/env node
// tools/bench/graphile/bench.js -- graphile-worker beside kernelfarm's loadgen
// (issue 13): the same job shape through a well-kept PostgreSQL job queue for
// Node, on the same PostgreSQL, as the anchor for loadgen's numbers.
//
//   node bench.js --workers N [--queue M] [--duration S] [--batched]
//                 [--local-queue K] [--complete-delay MS] [--pool P] [--settle 0|1]
//
// Database: the libpq environment (PGHOST = the socket folder, PGPORT,
// PGUSER, PGDATABASE), read by node-postgres; use a fresh database per run
// (tools/bench/bench_dispatch.sh does).
//
// 1. Setup (not timed as throughput): graphile-worker's schema
//    (runMigrations), then M jobs (default 20,000) of task "eval", payload
//    {candidate_id, campaign, target: "cpu"} (what kernelfarm's job row
//    carries), added with WorkerUtils.addJobs (graphile-worker's bulk insert)
//    in chunks of 1,000; the time it took is printed.
// 2. Run: one worker pool with concurrency N (N simulated workers) whose
//    "eval" task does no work (returns at once). Plain: each worker fetches
//    its own job and completes it (one get and one complete statement per
//    job). --batched: graphile-worker's batching, a local queue of K jobs
//    fetched and locked per query (--local-queue, default max(N + 1, 500):
//    graphile-worker warns when it is below the concurrency) and job
//    completions grouped (completeJobBatchDelay --complete-delay, default 0
//    ms: whatever completions are waiting go in one statement).
//    The pool's PostgreSQL connections: --pool, default min(N + 2, 100)
//    (graphile-worker warns when it is below the concurrency; the devdb
//    cluster allows 200 connections).
// 3. Window: from the first completed job for --duration S (default 15), or
//    until all M jobs are done (the queue ran dry). jobs/s = jobs whose task
//    succeeded inside the window / window length (s). graphile-worker counts
//    a job done when its task returns and commits the completion after
//    (asynchronously, not awaited; batched: grouped), so after the pool has
//    shut down (which flushes pending batched completions) the script checks
//    in the database how many jobs are gone and prints it beside the count;
//    completions still missing after 2 s are reported, not treated as a
//    failure (graphile-worker's own guarantee: such jobs run again once their
//    lock expires).
//
// Output: one human line and one machine-readable line:
//   RESULT graphile workers=N batched=0|1 secs=S jobs=J jobs_per_s=R
//     setup_s=.. completed_in_db=.. ran_dry=0|1
"use strict";

const { run, runMigrations, makeWorkerUtils } = require("graphile-worker");
const { Pool } = require("pg");

function parseArgs(argv) {
  const o = { workers: 0, queue: 20000, duration: 15, batched: false, localQueue: 0, completeDelay: 0, pool: 0, settle: 1 };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const num = () => {
      const v = Number(argv[++i]);
      if (!Number.isFinite(v) || v < 0) throw new Error(`bad value for ${a}`);
      return v;
    };
    if (a === "--workers") o.workers = num();
    else if (a === "--queue") o.queue = num();
    else if (a === "--duration") o.duration = num();
    else if (a === "--batched") o.batched = true;
    else if (a === "--local-queue") o.localQueue = num();
    else if (a === "--complete-delay") o.completeDelay = num();
    else if (a === "--pool") o.pool = num();
    else if (a === "--settle") o.settle = num();
    else throw new Error(`unknown option ${a}`);
  }
  if (!(o.workers >= 1)) throw new Error("--workers N is required");
  if (!o.pool) o.pool = Math.min(o.workers + 2, 100);
  if (!o.localQueue) o.localQueue = Math.max(o.workers + 1, 500);
  return o;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const o = parseArgs(process.argv);
  const pgPool = new Pool({ max: o.pool });
  pgPool.on("error", (e) => console.error(`graphile bench: idle connection: ${e.message}`));
  pgPool.on("connect", (c) => c.on("error", (e) => console.error(`graphile bench: connection: ${e.message}`)));
  const quiet = { logger: undefined };
  const { Logger } = require("@graphile/logger");
  // graphile-worker logs every job at info level: keep warnings and errors only
  quiet.logger = new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`graphile-worker ${level}: ${message}`);
  });

  // 1. setup
  const t0 = process.hrtime.bigint();
  await runMigrations({ pgPool, ...quiet });
  const utils = await makeWorkerUtils({ pgPool, ...quiet });
  for (let at = 0; at < o.queue; at += 1000) {
    const specs = [];
    for (let i = at; i < Math.min(at + 1000, o.queue); i++)
      specs.push({ identifier: "eval", payload: { candidate_id: i + 1, campaign: 1, target: "cpu" } });
    await utils.addJobs(specs);
  }
  await utils.release();
  const setupS = Number(process.hrtime.bigint() - t0) / 1e9;
  // as loadgen --settle: the setup's autovacuum and writeback before the
  // window, not in it
  if (o.settle) {
    await pgPool.query("VACUUM (ANALYZE)");
    await pgPool.query("CHECKPOINT").catch(() => {});
    require("child_process").execFileSync("sync");
  }

  // 2. run
  let done = 0, inWindow = 0, tStart = 0n, tEnd = 0n, ranDry = false;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const now = () => process.hrtime.bigint();
  const taskList = {
    eval: async () => {}, // a zero-cost evaluation
  };
  const preset = {
    worker: o.batched
      ? { localQueue: { size: o.localQueue }, completeJobBatchDelay: o.completeDelay, failJobBatchDelay: o.completeDelay }
      : {},
  };
  const runner = await run({ pgPool, concurrency: o.workers, noHandleSignals: true, pollInterval: 500, taskList, preset, ...quiet });
  runner.events.on("job:success", () => {
    done++;
    if (tStart === 0n) tStart = now();
    if (tEnd === 0n) {
      inWindow++;
      if (done >= o.queue) {
        tEnd = now();
        ranDry = true;
        finish();
      }
    }
  });
  const deadline = Date.now() + (o.duration + 120) * 1000; // the first job must come
  while (tStart === 0n && Date.now() < deadline) await sleep(5);
  if (tStart !== 0n) {
    await Promise.race([finished, sleep(o.duration * 1000)]);
    if (tEnd === 0n) tEnd = now();
  }
  await runner.stop(); // flushes pending batched completions
  // plain mode completes jobs without awaiting the statement: give the last
  // ones up to 2 s to land before counting what the database holds
  let completedInDb = -1;
  for (let k = 0; k < 20; k++) {
    const r = await pgPool.query("SELECT count(*)::int AS n FROM graphile_worker._private_jobs");
    completedInDb = o.queue - r.rows[0].n;
    if (completedInDb >= done) break;
    await sleep(100);
  }
  await pgPool.end();

  const secs = tStart && tEnd > tStart ? Number(tEnd - tStart) / 1e9 : 0;
  const rate = secs > 0 ? inWindow / secs : 0;
  console.log(
    `graphile-worker ${require("graphile-worker/package.json").version}: ${o.workers} workers` +
      `${o.batched ? `, batched (local queue ${o.localQueue}, completions grouped after ${o.completeDelay} ms)` : ""}` +
      `, pool ${o.pool}; ${o.queue} jobs added in ${setupS.toFixed(2)} s; window ${secs.toFixed(2)} s` +
      `${ranDry ? " (the queue ran dry)" : ""}; ${inWindow} jobs, ${rate.toFixed(1)} jobs/s;` +
      ` ${completedInDb} completions in the database after shutdown, ${done} tasks succeeded` +
      `${completedInDb < done ? ` (${done - completedInDb} completions never committed: those jobs stay locked until graphile-worker's lock expires)` : ""}`
  );
  console.log(
    `RESULT graphile workers=${o.workers} batched=${o.batched ? 1 : 0} secs=${secs.toFixed(3)} jobs=${inWindow}` +
      ` jobs_per_s=${rate.toFixed(1)} setup_s=${setupS.toFixed(2)} completed_in_db=${completedInDb}` +
      ` ran_dry=${ranDry ? 1 : 0}`
  );
  if (inWindow === 0) process.exitCode = 1;
}

main().catch((e) => {
  console.error(`graphile bench: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
