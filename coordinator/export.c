/*
 * export.c -- writes the static dashboard. See export.h.
 *
 * Files (each a script calling kfarmData(KEY, JSON.parse('...')), see export.h):
 *
 *   data/index.js            generated_at, campaigns[] (summaries only: the
 *                            list stays small whatever the campaign sizes),
 *                            workers[] with per-worker throughput and
 *                            failure counts
 *   data/c<ID>.js            one campaign (the head): settings, counts, best
 *                            per target, the operator's view (blockers,
 *                            bests with noise), its model proposals (props,
 *                            one array per column), chunk_size and the list
 *                            of its chunks
 *   data/c<ID>/r<KID/8192>.js one chunk of the campaign's tables: the
 *                            candidates with ids in [N*8192, N*8192+8191]
 *                            (cands), their results (res) and retried
 *                            attempts (evs), one array per column, with the
 *                            chunk's own lists of details, workers and
 *                            define sets the columns number into; the page
 *                            concatenates the chunks in order
 *   data/c<ID>/b<KID/128>.js 128 candidates by id, each with its source,
 *                            parent's sha256, results with metrics, compile
 *                            logs, every attempt, and its model proposal's
 *                            prompt and reply
 *   data/c<ID>/layout        the folder's layout (KF_EXPORT_LAYOUT): an
 *                            incremental export writes a folder of another
 *                            layout whole
 *   data/c<ID>/p<PID/32>.js  the model proposals that made no candidate, with
 *                            their prompt and reply
 *
 * The index, the heads and the proposal files are built by PostgreSQL
 * (json_build_object/json_agg). The chunks and candidate files, nine
 * tenths of the bytes, are built here from flat rows (CAND_ROWS_SQL:
 * one reading of a range of ids serves both), because json_build_object
 * cost ~100 µs a candidate at 1,000,000 evaluations: each value is
 * written as json_build_object writes its type (json_value(),
 * add_json_string() is escape_json()), and tests/integration/
 * export_parity.sh holds the old queries as the oracle. All queries run in one
 * REPEATABLE READ snapshot, so the index, campaign, chunk and candidate
 * files of one export agree. The work runs on two connections sharing that
 * snapshot (pg_export_snapshot), so two server processes work at once: a
 * plan (PLAN_SQL: which campaigns, chunks and buckets to write), then the
 * operator's views on the second connection while this one builds the
 * index, the fleet and the campaign heads, then the pieces (a chunk, the
 * candidate files of a range of ids, a campaign's proposal files) taken by
 * both from one list. A piece holds the rows of at most one chunk's
 * range of ids (8,192 candidates: ~10 MB of rows at 1,000,000
 * evaluations) and no file is larger than a chunk (~1.6 MB): memory stays
 * bounded for any campaign size. A full export makes a chunk and its
 * candidate files from one reading of the range. A campaign's
 * file is written after its chunks, the index last. Columns another part
 * of the system may add (a result's confirmation state, a worker's
 * quarantine reason) are read through to_jsonb(row)->'name', which is NULL
 * when the column is absent: the export works on either schema.
 *
 * Incremental mode (the coordinator's periodic export): a campaign's head
 * is rewritten when anything in the campaign changed since the previous
 * export began (the campaign, a candidate, job lease, evaluation or
 * proposal newer than that instant), and of its chunks and candidate files
 * only those holding a changed candidate, plus any file missing from the
 * folder. A chunk numbers its details and workers into lists of its own,
 * so it never changes because another one did.
 */
#include "export.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "bests.h"
#include "jscan.h"
#include "health.h"
#include "kf_util.h"
#include "log.h"
#include "queue.h"

/* Candidates per candidate file (data/c<ID>/b<KID / KF_EXPORT_BUCKET>.js):
 * 128 (~200 KB at 1,000,000 evaluations). With 32 a full export of that
 * campaign created 14,219 files and half its system time (3-7 s) was ext4
 * creating them; 128 makes 3,555 (measured 2026-12-06). app.js's BUCKET
 * is the same number. */
#define KF_EXPORT_BUCKET 128
/* Proposals per proposal file (data/c<ID>/p<PID / KF_EXPORT_PROP_BUCKET>.js;
 * app.js's PROP_BUCKET). */
#define KF_EXPORT_PROP_BUCKET 32
/* The layout of a campaign's folder, written to data/c<ID>/layout by an
 * export that writes all of its files: an incremental export of a folder
 * written with another layout (or none) writes the campaign whole, since
 * its candidate files are bucketed differently. */
#define KF_EXPORT_LAYOUT "bucket 128\n"
/* Candidate ids per chunk of a campaign's tables (data/c<ID>/r<KID /
 * KF_EXPORT_CHUNK>.js), a multiple of KF_EXPORT_BUCKET: ~1.5 MB of a
 * campaign of 1,000,000 evaluations, of which an incremental export
 * rewrites the few that changed. */
#define KF_EXPORT_CHUNK 8192

#define EPOCH(x) "round(extract(epoch FROM " x ")::numeric, 3)"
#define R4(x) "round((" x ")::numeric, 4)"

/* Verdict and job state names, in the order the campaign file numbers
 * them (a verdict missing here is written as its name). */
#define VERDICTS "'ok','compile_error','load_error','runtime_error','timeout','incorrect'," \
                 "'rejected_cheat','unsupported','infra_error'"
#define STATES "'queued','leased','done'"
#define CODE(list, x) "COALESCE(to_json(array_position(ARRAY[" list "], " x ") - 1), to_json(" x "))"

/* The campaign file (head): $1 campaign id. The campaign's settings, the
 * names the chunks number their verdicts and states by, and the model
 * proposals without prompt and reply (in the candidate files); the export
 * adds the counts and bests from the index row (INDEX_SQL), the list of
 * chunks and the operator's view (with_operator_view). Times are seconds
 * after t0 (the campaign's creation). */
static const char HEAD_SQL[] =
    "WITH c AS (SELECT *, extract(epoch FROM created_at) t0 FROM campaigns WHERE id = $1::bigint) "
    "SELECT json_build_object("
    " 'id', c.id, 'name', c.name, 'task', t.name, 'task_definition', t.spec->>'definition',"
    " 'strategy', c.strategy, 'state', c.state, 'targets', c.targets,"
    " 'max_candidates', c.max_candidates, 'strategy_state', c.strategy_state, 'config', c.config,"
    " 'created_at', c.created_at, 'started_at', c.started_at, 'finished_at', c.finished_at,"
    " 'generated_at', now(), 't0', c.t0,"
    " 'verdict_names', json_build_array(" VERDICTS "), 'state_names', json_build_array(" STATES "),"
    /* model proposals without prompt and reply (in the candidate files) */
    " 'props', (SELECT json_build_object('id', COALESCE(json_agg(p.id), '[]'), 'round', json_agg(p.round),"
    "          'state', json_agg(p.state), 'model', json_agg(p.model), 'tokens_in', json_agg(p.prompt_tokens),"
    "          'tokens_out', json_agg(p.completion_tokens), 'finish', json_agg(p.finish_reason),"
    "          'candidate', json_agg(p.candidate_id), 'latency_s', json_agg(" R4("p.latency_s") "),"
    "          'reason', json_agg(left(p.reason, 300)),"
    "          't', json_agg(round((extract(epoch FROM p.created_at) - c.t0)::numeric, 1)))"
    "          FROM (SELECT * FROM proposals WHERE campaign_id = c.id ORDER BY id) p)"
    ")::text FROM c JOIN tasks t ON t.id = c.task_id";

/* The candidate files' rows, $1 campaign id, $2 and $3 the range of
 * candidate ids [$2, $3): flat rows, from which cand_files() builds each
 * candidate's object (PostgreSQL's json_build_object cost ~100 µs a
 * candidate at 1,000,000 evaluations, 8x these queries). Every value is
 * written as json_build_object writes its type (json_value()); times come
 * as text in UTC (EXPORT_SETTINGS), written as to_json() would by
 * ts_json() and read as µs by ts_us(). Evaluations are found by their
 * candidate_id (the job's candidate, set when they are written), jobs
 * and evaluations of a candidate in order. */
enum { KR_CANDS, KR_CHILDREN, KR_JOBS, KR_EVALS, KR_PROPS, KR_META, KR_PARENTS, KR_N };
static const char *const CAND_ROWS_SQL[KR_N] = {
    [KR_CANDS] = "SELECT k.id, k.campaign_id, k.parent_id, NULL::text, k.proposer, k.defines, k.sha256,"
                 " k.note, k.created_at, k.source, k.proposal_id"
                 " FROM candidates k"
                 " WHERE k.campaign_id = $1::bigint AND k.id >= $2::bigint AND k.id < $3::bigint ORDER BY k.id",
    /* the children of the range's ids (cand_files() writes the first 500) */
    [KR_CHILDREN] = "SELECT parent_id, id FROM candidates WHERE parent_id >= $2::bigint AND parent_id < $3::bigint"
                    " AND $1::bigint IS NOT NULL ORDER BY parent_id, id",
    /* the sha256 of the parents outside the range: $1 their ids (bigint[]) */
    [KR_PARENTS] = "SELECT id, sha256 FROM candidates WHERE id = ANY($1::bigint[]) ORDER BY id",
    /* %s: the job's confirmation state (conf_columns()) */
    [KR_JOBS] = "SELECT j.candidate_id, j.id, j.target, j.state, j.attempts, j.worker_id, %s, {PURPOSE},"
                " j.campaign_id, j.created_at"
                " {JOBS_OF_CANDS} AND $1::bigint IS NOT NULL ORDER BY j.candidate_id, j.target COLLATE \"C\", j.id",
    /* %s: the evaluation's confirmation state */
    [KR_EVALS] = "SELECT e.job_id, e.id, e.attempt, e.worker_id, e.verdict, e.detail, e.is_final, e.reported,"
                 " e.speedup, e.candidate_us, e.baseline_us, e.created_at, %s, {CONF_BY},"
                 " CASE WHEN e.is_final THEN e.metrics END, left(e.compile_log, 65536)"
                 " FROM evaluations e WHERE e.candidate_id >= $2::bigint AND e.candidate_id < $3::bigint"
                 " AND $1::bigint IS NOT NULL ORDER BY e.job_id, e.id",
    [KR_PROPS] = "SELECT p.id, p.kind, p.round, p.slot, p.lineage, p.state, p.model, p.temperature,"
                 " p.finish_reason, p.reason, p.prompt_tokens, p.completion_tokens, p.attempts, p.latency_s,"
                 " p.reviewer_note, p.created_at, p.prompt, p.reply FROM proposals p"
                 " WHERE p.id IN (SELECT proposal_id FROM candidates WHERE campaign_id = $1::bigint"
                 " AND id >= $2::bigint AND id < $3::bigint) ORDER BY p.id",
    /* the chunk's: the campaign's creation (µs) and its targets in order */
    [KR_META] = "SELECT c.created_at, t.t FROM campaigns c LEFT JOIN LATERAL unnest(c.targets)"
                " WITH ORDINALITY t(t, i) ON true WHERE c.id = $1::bigint AND $2::bigint <= $3::bigint ORDER BY t.i",
};

/* The keys of each candidate row's object, column by column (KR_CANDS's
 * 11th column, proposal_id, and the first of KR_JOBS and KR_EVALS, which
 * say where a row belongs, are not written). */
static const char *const CAND_KEYS[] = { "id", "campaign_id", "parent_id", NULL /* parent_sha256 */, "proposer",
                                         "defines", "sha256", "note", "created_at", "source" };
static const char *const JOB_KEYS[] = { NULL, NULL, "target", "state", "attempts", "worker", "conf", "purpose" };
static const char *const EVAL_KEYS[] = { NULL, "id", "attempt", "worker", "verdict", "detail", "final",
                                         "reported", "speedup", "candidate_us", "baseline_us", "t", "conf",
                                         "conf_by", "metrics", "compile_log" };
static const char *const PROP_KEYS[] = { "id", "kind", "round", "slot", "lineage", "state", "model",
                                         "temperature", "finish_reason", "reason", "prompt_tokens",
                                         "completion_tokens", "attempts", "latency_s", "reviewer_note",
                                         "created_at", "prompt", "reply" };

/* $1 campaign id, $2 since (NULL: all), $3 bucket size: the model proposals
 * that made no candidate (cut off, no code, endpoint errors, rejected), with
 * their prompt and reply, in buckets by id like the candidates. One row per
 * proposal: id, json. */
static const char PROPOSALS_SQL[] =
    "SELECT p.id, json_build_object('id', p.id, 'kind', p.kind, 'round', p.round, 'slot', p.slot,"
    " 'lineage', p.lineage, 'parent_id', p.parent_id, 'state', p.state, 'model', p.model,"
    " 'temperature', p.temperature, 'finish_reason', p.finish_reason, 'reason', p.reason,"
    " 'prompt_tokens', p.prompt_tokens, 'completion_tokens', p.completion_tokens, 'attempts', p.attempts,"
    " 'http_status', p.http_status, 'latency_s', p.latency_s, 'reviewer_note', p.reviewer_note,"
    " 'created_at', p.created_at, 'prompt', p.prompt, 'reply', p.reply, 'code', p.code)::text"
    " FROM proposals p WHERE p.campaign_id = $1::bigint AND p.candidate_id IS NULL"
    " AND ($2::timestamptz IS NULL OR p.id / $3::int IN (SELECT id / $3::int FROM proposals"
    "   WHERE campaign_id = $1::bigint AND candidate_id IS NULL AND (created_at >= $2::timestamptz"
    "   OR answered_at >= $2::timestamptz OR finished_at >= $2::timestamptz)))"
    " ORDER BY p.id";

/* What an export has to write, $1 since (NULL: all), $2 the chunk size:
 * one row per campaign, newest first: id; changed since $1; its chunks
 * (json array); the ids of its candidates with something newer than $1
 * (the candidate, a job's creation, lease or end, an evaluation, its model
 * proposal; json array in order, NULL when none). */
static const char PLAN_SQL[] =
    "WITH chg AS MATERIALIZED ("
    "  SELECT campaign_id, id k FROM candidates WHERE $1::timestamptz IS NOT NULL AND created_at >= $1::timestamptz"
    "  UNION ALL SELECT campaign_id, candidate_id FROM jobs WHERE $1::timestamptz IS NOT NULL"
    "   AND (leased_at >= $1::timestamptz OR finished_at >= $1::timestamptz OR created_at >= $1::timestamptz)"
    "  UNION ALL SELECT k.campaign_id, e.candidate_id FROM evaluations e JOIN candidates k ON k.id = e.candidate_id"
    "   WHERE $1::timestamptz IS NOT NULL AND e.created_at >= $1::timestamptz"
    "  UNION ALL SELECT k.campaign_id, k.id FROM candidates k JOIN proposals p ON p.id = k.proposal_id"
    "   WHERE $1::timestamptz IS NOT NULL AND p.created_at >= $1::timestamptz) "
    "SELECT c.id, $1::timestamptz IS NULL OR c.updated_at >= $1::timestamptz"
    " OR EXISTS (SELECT 1 FROM chg WHERE chg.campaign_id = c.id)"
    " OR EXISTS (SELECT 1 FROM proposals p WHERE p.campaign_id = c.id AND (p.created_at >= $1::timestamptz"
    "            OR p.answered_at >= $1::timestamptz OR p.finished_at >= $1::timestamptz)),"
    " COALESCE((SELECT json_agg(DISTINCT id / $2::bigint) FROM candidates k WHERE k.campaign_id = c.id), '[]')::text,"
    " (SELECT json_agg(DISTINCT k) FROM chg WHERE chg.campaign_id = c.id)::text"
    " FROM campaigns c ORDER BY c.id DESC";

/* Summaries for the list: one row per campaign, newest first: id; its
 * summary (json); the counts and bests of the summary again as one object
 * (json: jobs, verdicts, attempts, best), which the campaign file carries
 * too. {VERIFY}: the evaluations of verification jobs, taken off the
 * counts (trust_columns()). */
static const char INDEX_SQL[] =
    "SELECT c.id,"
    " json_build_object('id', c.id, 'name', c.name, 'task', t.name, 'strategy', c.strategy,"
    " 'state', c.state, 'targets', c.targets, 'max_candidates', c.max_candidates,"
    " 'created_at', c.created_at, 'finished_at', c.finished_at,"
    " 'candidates', kk.n, 'first_id', kk.first_id, 'last_id', kk.last_id,"
    " 'jobs', jb.jobs, 'verdicts', v.verdicts, 'attempts', v.attempts, 'best', bb.best)::text,"
    " json_build_object('jobs', jb.jobs, 'verdicts', v.verdicts, 'attempts', v.attempts, 'best', bb.best)::text"
    " FROM campaigns c JOIN tasks t ON t.id = c.task_id"
    " LEFT JOIN LATERAL (SELECT count(*) n, min(id) first_id, max(id) last_id FROM candidates k"
    "   WHERE k.campaign_id = c.id) kk ON true"
    " {COUNTS}"
    /* the best per target: from the top of the campaign's ok results on
     * it by speedup (evaluations_ok_target, {BEST_FROM}), or, with no
     * speedup above 0, from all */
    " LEFT JOIN LATERAL (SELECT json_agg(b ORDER BY b.target) best FROM (SELECT z.tg target, x.*"
    "   FROM (SELECT DISTINCT tg FROM unnest(c.targets) tg) z,"
    "   LATERAL (SELECT * FROM ((SELECT e.candidate_id, e.speedup, e.candidate_us, e.baseline_us, e.worker_id"
    "     {BEST_FROM} AND e.is_final AND e.verdict = 'ok' AND e.speedup > 0 ORDER BY e.speedup DESC, e.candidate_id LIMIT 1)"
    "    UNION ALL (SELECT e.candidate_id, e.speedup, e.candidate_us, e.baseline_us, e.worker_id"
    "     {BEST_FROM} AND e.is_final AND e.verdict = 'ok' AND e.speedup IS NOT NULL ORDER BY e.speedup DESC, e.candidate_id"
    "     LIMIT 1)) u LIMIT 1) x) b) bb ON true"
    " ORDER BY c.id DESC";

/* INDEX_SQL's {COUNTS}: a campaign's jobs by state and its evaluation
 * jobs' results by verdict (final ones and every attempt), where the
 * schema has campaign_counts (schema/006_counts.sql): queued and leased jobs
 * from their indexes, done jobs and verdicts summed from the counts (a job
 * is done exactly when it has its final evaluation), so the list does not
 * read the campaign's history (1,000,000 evaluations: 3.1 s of a 12-14 s
 * export, docs/benchmarks.md 2026-12-05). */
static const char INDEX_COUNTS_SQL[] =
    "LEFT JOIN LATERAL (SELECT json_object_agg(state, n ORDER BY state) jobs FROM ("
    "   SELECT 'queued' state, (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id AND j.state = 'queued'"
    "     AND j.purpose <> 'verify') n"
    "   UNION ALL SELECT 'leased', (SELECT count(*) FROM jobs j WHERE j.campaign_id = c.id"
    "     AND j.state = 'leased' AND j.purpose = 'eval')"
    "   UNION ALL SELECT 'done', (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
    "     AND k.what = 'evaluation' AND k.purpose = 'eval' AND k.is_final)) s WHERE n > 0) jb ON true"
    " LEFT JOIN LATERAL (SELECT json_object_agg(verdict, nf ORDER BY verdict) FILTER (WHERE nf > 0) verdicts,"
    "   json_object_agg(verdict, n ORDER BY verdict) FILTER (WHERE n > 0) attempts FROM (SELECT verdict,"
    "   sum(n) FILTER (WHERE is_final) nf, sum(n) n FROM campaign_counts k WHERE k.campaign_id = c.id"
    "   AND k.what = 'evaluation' AND k.purpose = 'eval' GROUP BY verdict) x) v ON true";
/* The same from the rows themselves, for a database without campaign_counts. */
static const char INDEX_COUNTS_ROWS_SQL[] =
    "LEFT JOIN LATERAL (SELECT json_object_agg(state, n ORDER BY state) jobs FROM (SELECT state, count(*) n"
    "   FROM {JOBS} jobs WHERE campaign_id = c.id GROUP BY state) s) jb ON true"
    /* final verdicts and every attempt by verdict, in one pass (by
     * candidate: a smaller join than by job) */
    " LEFT JOIN LATERAL (SELECT json_object_agg(verdict, nf ORDER BY verdict) FILTER (WHERE nf > 0) verdicts,"
    "   json_object_agg(verdict, n ORDER BY verdict) FILTER (WHERE n > 0) attempts FROM (SELECT verdict,"
    "   sum(nf) nf, sum(n) n FROM (SELECT e.verdict, count(*) FILTER (WHERE e.is_final) nf, count(*) n"
    "   FROM evaluations e JOIN candidates k ON k.id = e.candidate_id WHERE k.campaign_id = c.id"
    "   GROUP BY e.verdict {VERIFY}) y GROUP BY verdict) x) v ON true";

/* The fleet, with each worker's throughput and failures over its evaluations. */
static const char WORKERS_SQL[] =
    /* one pass over the evaluations, by worker and verdict (two passes,
     * by worker and by worker and verdict, were 1.4-1.9 s at 1,000,000) */
    "WITH x AS (SELECT worker_id, verdict, count(*) n,"
    "   count(*) FILTER (WHERE created_at >= now() - interval '1 hour') lh"
    "   FROM evaluations GROUP BY worker_id, verdict),"
    " ev AS (SELECT worker_id, sum(n)::bigint n, sum(n) FILTER (WHERE verdict = 'ok')::bigint ok,"
    "   sum(n) FILTER (WHERE verdict = 'infra_error')::bigint infra, sum(lh)::bigint last_hour,"
    "   json_object_agg(verdict, n) verdicts FROM x GROUP BY worker_id) "
    "SELECT COALESCE(json_agg(json_build_object('id', w.id, 'hostname', w.hostname,"
    " 'backend', w.backend, 'classes', w.classes, 'devices', w.devices, 'slots', w.slots,"
    " 'driver_version', w.driver_version, 'toolkit_version', w.toolkit_version,"
    " 'registered', w.registered, 'last_seen', w.last_seen,"
    " 'seen_s_ago', " EPOCH("now() - w.last_seen") ", 'quarantined', w.quarantined,"
    " 'offline', " EPOCH("now() - w.last_seen") " > $1::int, 'clock_skew_ms', to_jsonb(w)->'clock_skew_ms',"
    " 'quarantine_reason', COALESCE(to_jsonb(w)->'quarantine_reason', to_jsonb(w)->'quarantined_reason',"
    "     to_jsonb(w)->'reason'),"
    " 'infra_errors', w.infra_errors, 'jobs_done', w.jobs_done,"
    " 'agreements', w.agreements, 'disputes', w.disputes, 'disputed_by', w.dispute_counts,"
    " 'evaluations', COALESCE(ev.n, 0), 'ok', COALESCE(ev.ok, 0), 'infra', COALESCE(ev.infra, 0),"
    " 'last_hour', COALESCE(ev.last_hour, 0), 'verdicts', ev.verdicts,"
    " 'leased', (SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state = 'leased'))"
    " ORDER BY w.id), '[]')::text, to_json(now())::text,"
    /* the next incremental export's start: a minute early, for transactions
     * that stamped their rows before this snapshot but committed after it */
    " (now() - interval '1 minute')::text"
    " FROM workers w LEFT JOIN ev ON ev.worker_id = w.id";

/* Another part of the system may add a confirmation state to results
 * (a second worker re-timed the winner): find the column if it is there,
 * under one of the names it may have, and give the SQL expressions that read
 * it for an evaluation (alias f or e) and a job (alias j), or NULL. */
static void conf_columns(kf_db *db, char *ev_f, char *ev_e, char *job, size_t cap)
{
    snprintf(ev_f, cap, "NULL");
    snprintf(ev_e, cap, "NULL");
    snprintf(job, cap, "NULL");
    char err[256];
    PGresult *r = kf_db_exec(db,
        "SELECT table_name::text, column_name::text FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name IN ('evaluations', 'jobs')"
        " AND column_name IN ('confirmation', 'confirmation_state', 'confirm_state', 'confirmed')"
        " ORDER BY array_position(ARRAY['confirmation', 'confirmation_state', 'confirm_state',"
        " 'confirmed'], column_name::text) DESC", 0, NULL, err, sizeof(err));
    if (!r) return;
    for (int i = 0; i < PQntuples(r); i++) { /* the preferred name last, so it wins */
        const char *col = PQgetvalue(r, i, 1);
        if (strcmp(PQgetvalue(r, i, 0), "evaluations") == 0) {
            snprintf(ev_f, cap, "to_json(f.%s)", col);
            snprintf(ev_e, cap, "to_json(e.%s)", col);
        } else {
            snprintf(job, cap, "to_json(j.%s)", col);
        }
    }
    PQclear(r);
}

/* tmpl with each {NAME} of names replaced by the matching value; malloc'ed,
 * NULL when out of memory. */
static char *sql_subst(const char *tmpl, const char *const *names, const char *const *values, int n)
{
    kf_strbuf b = { 0 };
    for (const char *p = tmpl; *p;) {
        int hit = -1;
        if (*p == '{')
            for (int i = 0; i < n && hit < 0; i++)
                if (strncmp(p, names[i], strlen(names[i])) == 0) hit = i;
        if (hit >= 0) {
            kf_strbuf_add(&b, values[hit]);
            p += strlen(names[hit]);
        } else {
            kf_strbuf_addn(&b, p++, 1);
        }
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* Whether the table or index `name` exists in the database's schema (an
 * export reads databases of older schema versions too); 0 also when the
 * question fails. */
static int relation_exists(kf_db *db, const char *name)
{
    char e2[256];
    const char *p[1] = { name };
    PGresult *r = kf_db_exec(db, "SELECT to_regclass($1) IS NOT NULL", 1, p, e2, sizeof(e2));
    int yes = r && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "t");
    if (r) PQclear(r);
    return yes;
}

/* Columns the trust model may add (jobs.purpose with 'verify' jobs that
 * re-evaluate a winner, evaluations.confirmed_by_worker): whether they are
 * there. Results, counts and bests are read from 'eval' jobs only, so a
 * verification never counts twice or becomes a best by itself. */
static void trust_columns(kf_db *db, int *has_purpose, int *has_conf_by)
{
    *has_purpose = *has_conf_by = 0;
    char err[256];
    PGresult *r = kf_db_exec(db,
        "SELECT table_name::text, column_name::text FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND ((table_name = 'jobs' AND column_name = 'purpose')"
        " OR (table_name = 'evaluations' AND column_name = 'confirmed_by_worker'))", 0, NULL, err, sizeof(err));
    if (!r) return;
    for (int i = 0; i < PQntuples(r); i++) {
        if (strcmp(PQgetvalue(r, i, 1), "purpose") == 0) *has_purpose = 1;
        else *has_conf_by = 1;
    }
    PQclear(r);
}

/* Write data to dir/name via a temporary file and rename. */
static int write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        char *err, size_t errlen)
{
    char tmp[4096], path[4096];
    const char *slash = strrchr(name, '/');
    if (slash)
        snprintf(tmp, sizeof(tmp), "%s/%.*s/.%s.tmp", dir, (int)(slash - name), name, slash + 1);
    else
        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (kf_util_write_file(tmp, data, len) < 0 || rename(tmp, path) < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Append json as the body of a single-quoted JavaScript string literal,
 * without the blanks PostgreSQL puts between tokens (a sixth of a campaign
 * file). */
static void add_js_string(kf_strbuf *b, const char *json)
{
    /* written in place: no byte becomes more than two (an escape's two
     * become four); a tenth of a full export's CPU went here when each
     * piece was appended through kf_strbuf_addn */
    size_t n = strlen(json);
    if (kf_strbuf_reserve(b, 2 * n) < 0) return;
    char *o = b->s + b->len;
    int in_str = 0;
    for (const char *p = json; *p; p++) {
        char c = *p;
        switch (c) {
        case '"':
            in_str = !in_str;
            *o++ = c;
            break;
        case '\\':
            *o++ = '\\';
            *o++ = '\\';
            if (in_str && p[1]) { /* an escape: both characters as they are, doubled */
                c = *++p;
                if (c == '\\' || c == '\'') *o++ = '\\';
                *o++ = c;
            }
            break;
        case '\'':
            *o++ = '\\';
            *o++ = '\'';
            break;
        case '\n':
        case '\r':
            if (in_str) {
                *o++ = '\\';
                *o++ = c == '\n' ? 'n' : 'r';
            }
            break;
        case ' ':
        case '\t':
            if (in_str) *o++ = c;
            break;
        default:
            *o++ = c;
        }
    }
    b->len = (size_t)(o - b->s);
    *o = 0;
}

/* Write the data script dir/name: kfarmData("key", JSON.parse('json'));.
 * A JSON string parses several times faster than the same object literal
 * (V8, SpiderMonkey), which matters for a campaign file of 30 MB. */
static int write_data(const char *dir, const char *name, const char *key, const char *json,
                      char *err, size_t errlen)
{
    kf_strbuf b = { 0 };
    kf_strbuf_reserve(&b, 2 * strlen(json) + strlen(key) + 64); /* one allocation */
    kf_strbuf_printf(&b, "kfarmData(\"%s\", JSON.parse('", key);
    add_js_string(&b, json);
    kf_strbuf_add(&b, "'));\n");
    if (b.oom) {
        free(b.s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = write_atomic(dir, name, b.s, b.len, err, errlen);
    free(b.s);
    return rc;
}

static int mkdir_in(const char *dir, const char *sub, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    if (kf_util_mkdirs(path) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int file_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Write the bucket being built in b (its candidates' objects, comma
 * separated) as dir/data/c<cid>/<kind><bk>.js and empty b. */
static int flush_bucket(const char *dir, const char *cid, char kind, long bk, kf_strbuf *b, char *err,
                        size_t errlen)
{
    char name[128], key[64];
    snprintf(name, sizeof(name), "data/c%s/%c%ld.js", cid, kind, bk);
    snprintf(key, sizeof(key), "c%s/%c%ld", cid, kind, bk);
    kf_strbuf_add(b, "}");
    int rc;
    if (b->oom) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    } else {
        rc = write_data(dir, name, key, b->s, err, errlen);
    }
    b->len = 0;
    return rc;
}

/* The proposal files of campaign cid that the rows of PROPOSALS_SQL (with
 * its parameters p) fall in. A file holds the rows of one bucket of ids
 * (KF_EXPORT_BUCKET), like the candidate files: one file per row would
 * cost more in file creation than everything else (100,000 files take
 * ~15 s on a small VM). Rows come in libpq's single-row mode: memory stays
 * bounded, and the server builds the next rows while this process writes
 * files. */
static int export_proposals(PGconn *conn, const char *const *p, const char *dir, const char *cid, char *err,
                            size_t errlen)
{
    const char *sql = PROPOSALS_SQL;
    const int np = 3;
    const char kind = 'p';
    if (!PQsendQueryParams(conn, sql, np, NULL, p, NULL, NULL, 0) || !PQsetSingleRowMode(conn)) {
        snprintf(err, errlen, "%s of campaign %s: %s", "proposals", cid,
                 PQerrorMessage(conn));
        err[strcspn(err, "\n")] = 0;
        PGresult *r;
        while ((r = PQgetResult(conn))) PQclear(r);
        return -1;
    }
    kf_strbuf b = { 0 };
    long cur = -1;
    int rc = 0;
    PGresult *r;
    while ((r = PQgetResult(conn))) { /* read to the end, even after an error */
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_SINGLE_TUPLE && rc == 0) {
            long kid = atol(PQgetvalue(r, 0, 0)), bk = kid / KF_EXPORT_PROP_BUCKET;
            if (cur >= 0 && bk != cur) rc = flush_bucket(dir, cid, kind, cur, &b, err, errlen);
            kf_strbuf_add(&b, b.len ? ",\n" : "{");
            kf_strbuf_printf(&b, "\"%ld\": ", kid);
            kf_strbuf_add(&b, PQgetvalue(r, 0, 1));
            cur = bk;
        } else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && rc == 0) {
            snprintf(err, errlen, "%s of campaign %s: %s", "proposals", cid,
                     PQresultErrorMessage(r));
            err[strcspn(err, "\n")] = 0;
            rc = -1;
        }
        PQclear(r);
    }
    if (rc == 0 && cur >= 0) rc = flush_bucket(dir, cid, kind, cur, &b, err, errlen);
    free(b.s);
    return rc;
}

/* Append s (n bytes) as a JSON string, escaped as PostgreSQL's
 * escape_json() does: \b \f \n \r \t \" \\ by name, other control
 * characters as \u00XX, everything else as it is (the text is UTF-8). */
static void add_json_string(kf_strbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    kf_strbuf_addn(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        kf_strbuf_addn(b, s + run, i - run);
        run = i + 1;
        char e[7] = { '\\', 0 };
        switch (c) {
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
        }
        kf_strbuf_addn(b, e, e[2] ? 6 : 2);
    }
    kf_strbuf_addn(b, s + run, n - run);
    kf_strbuf_addn(b, "\"", 1);
}

/* µs since 1970 of a timestamptz as PostgreSQL writes it with DateStyle
 * ISO and TimeZone UTC (EXPORT_SETTINGS): "2026-12-02 16:48:31.303534+00",
 * the fraction optional. 0, or -1 when s is not one (infinity, a year
 * past 9999). Days from the civil date: H. Hinnant, "chrono-Compatible
 * Low-Level Date Algorithms" (days_from_civil). */
static int ts_us(const char *s, size_t n, int64_t *us)
{
    static const int8_t at[] = { 0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18 };
    if (n < 22 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' ||
        strcmp(s + n - 3, "+00"))
        return -1;
    int v[14];
    for (int i = 0; i < 14; i++) {
        if (s[at[i]] < '0' || s[at[i]] > '9') return -1;
        v[i] = s[at[i]] - '0';
    }
    int64_t y = v[0] * 1000 + v[1] * 100 + v[2] * 10 + v[3], mo = v[4] * 10 + v[5], d = v[6] * 10 + v[7];
    int64_t sec = (v[8] * 10 + v[9]) * 3600 + (v[10] * 10 + v[11]) * 60 + v[12] * 10 + v[13], frac = 0;
    size_t i = 19;
    if (s[i] == '.') {
        int64_t scale = 100000;
        for (i++; i < n - 3 && s[i] >= '0' && s[i] <= '9'; i++, scale /= 10) frac += (s[i] - '0') * scale;
    }
    if (i != n - 3) return -1;
    y -= mo <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400, yoe = y - era * 400;
    int64_t doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1, doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    *us = ((era * 146097 + doe - 719468) * 86400 + sec) * 1000000 + frac;
    return 0;
}

/* Append a timestamptz (text, as ts_us() reads it) as to_json() writes it:
 * "2026-12-02T16:48:31.303534+00:00"; anything else (infinity) as a
 * string of its text. */
static void ts_json(kf_strbuf *b, const char *s, size_t n)
{
    int64_t us;
    if (ts_us(s, n, &us) < 0) {
        add_json_string(b, s, n);
        return;
    }
    kf_strbuf_addn(b, "\"", 1);
    kf_strbuf_addn(b, s, 10);
    kf_strbuf_addn(b, "T", 1);
    kf_strbuf_addn(b, s + 11, n - 14);
    kf_strbuf_addn(b, "+00:00\"", 7);
}

/* Append the value of column col of row as json_build_object() writes it
 * for the column's type: NULL as null; numbers as they are, except NaN and
 * the infinities, which JSON cannot write (quoted, as PostgreSQL does);
 * booleans as true/false; json and jsonb as their text; anything else as a
 * string. Type oids: pg_type.dat. */
static void json_value(kf_strbuf *b, const PGresult *r, int row, int col)
{
    if (PQgetisnull(r, row, col)) {
        kf_strbuf_addn(b, "null", 4);
        return;
    }
    const char *v = PQgetvalue(r, row, col);
    size_t n = (size_t)PQgetlength(r, row, col);
    switch (PQftype(r, col)) {
    case 20: case 21: case 23: case 26: case 700: case 701: case 1700: /* int8 int2 int4 oid float4 float8 numeric */
        if (v[0] == 'N' || v[0] == 'I' || (v[0] == '-' && v[1] == 'I')) add_json_string(b, v, n); /* NaN, Infinity */
        else kf_strbuf_addn(b, v, n);
        return;
    case 16: /* bool */
        kf_strbuf_add(b, v[0] == 't' ? "true" : "false");
        return;
    case 114: case 3802: /* json jsonb */
        kf_strbuf_addn(b, v, n);
        return;
    case 1184: /* timestamptz */
        ts_json(b, v, n);
        return;
    default:
        add_json_string(b, v, n);
    }
}

/* Append "key": value for each named column of row (keys[c] NULL: column
 * c is not written), comma separated, with a leading comma unless first. */
static void json_members(kf_strbuf *b, const PGresult *r, int row, const char *const *keys, int nkeys, int first)
{
    for (int c = 0; c < nkeys; c++) {
        if (!keys[c]) continue;
        kf_strbuf_add(b, first ? "\"" : ",\"");
        kf_strbuf_add(b, keys[c]);
        kf_strbuf_addn(b, "\":", 2);
        json_value(b, r, row, c);
        first = 0;
    }
}

#define NKEYS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The flat rows of one range of candidate ids (CAND_ROWS_SQL), with each
 * result's first column parsed once: the id its rows are sorted by. */
typedef struct {
    PGresult *r[KR_N];
    int64_t *id[KR_N];
} range_rows;

static void range_rows_free(range_rows *rr)
{
    for (int q = 0; q < KR_N; q++) {
        PQclear(rr->r[q]);
        free(rr->id[q]);
    }
}

/* The rows of result q whose first column is id (sorted by it): the first
 * in *first (by bisection), how many returned. */
static int rows_of(const range_rows *rr, int q, int64_t id, int *first)
{
    int lo = 0, hi = PQntuples(rr->r[q]), n = hi;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (rr->id[q][mid] < id) lo = mid + 1;
        else hi = mid;
    }
    *first = lo;
    int c = 0;
    while (lo + c < n && rr->id[q][lo + c] == id) c++;
    return c;
}

/* Run the queries of sql for campaign cid, candidate ids [lo, hi) (texts)
 * into rr. 0, or -1 with reason (rr freed). */
static int range_rows_fetch(PGconn *conn, const char *const *sql, const char *cid, const char *lo,
                            const char *hi, range_rows *rr, char *err, size_t errlen)
{
    const char *p[3] = { cid, lo, hi };
    memset(rr, 0, sizeof(*rr));
    kf_strbuf ids = { 0 };
    for (int q = 0; q < KR_N; q++) {
        if (q == KR_PARENTS) { /* the parents not among the range's candidates, by id */
            kf_strbuf_add(&ids, "{");
            const PGresult *k = rr->r[KR_CANDS];
            for (int i = 0; i < PQntuples(k); i++) {
                int f;
                if (PQgetisnull(k, i, 2) || rows_of(rr, KR_CANDS, strtoll(PQgetvalue(k, i, 2), NULL, 10), &f)) continue;
                kf_strbuf_add(&ids, ids.len > 1 ? "," : "");
                kf_strbuf_add(&ids, PQgetvalue(k, i, 2));
            }
            kf_strbuf_add(&ids, "}");
            const char *pa[1] = { ids.oom ? "{}" : ids.s };
            rr->r[q] = PQexecParams(conn, sql[q], 1, NULL, pa, NULL, NULL, 0);
        } else {
            rr->r[q] = PQexecParams(conn, sql[q], 3, NULL, p, NULL, NULL, 0);
        }
        if (PQresultStatus(rr->r[q]) != PGRES_TUPLES_OK || ids.oom) {
            snprintf(err, errlen, "candidates %s..%s of campaign %s: %s", lo, hi, cid,
                     ids.oom ? "out of memory" : PQresultErrorMessage(rr->r[q]));
            err[strcspn(err, "\n")] = 0;
            range_rows_free(rr);
            free(ids.s);
            return -1;
        }
        int n = PQntuples(rr->r[q]);
        if (!(rr->id[q] = malloc(((size_t)n + 1) * sizeof(int64_t)))) {
            snprintf(err, errlen, "out of memory");
            range_rows_free(rr);
            free(ids.s);
            return -1;
        }
        for (int i = 0; i < n; i++) rr->id[q][i] = strtoll(PQgetvalue(rr->r[q], i, 0), NULL, 10);
    }
    free(ids.s);
    return 0;
}

/* The candidate files of campaign cid from the rows of one range: each
 * candidate with its source, parent's sha256, its first 500 children, its
 * results (one per job: the job's state and its evaluations with metrics
 * and compile logs) and its model proposal's prompt and reply, in files of
 * KF_EXPORT_BUCKET candidates by id; as json_agg of no rows is null, so is
 * each of these lists when empty. Only candidates with ids in [lo, hi). */
static int cand_files(const range_rows *rr, const char *dir, const char *cid, int64_t lo, int64_t hi,
                      char *err, size_t errlen)
{
    const PGresult *k = rr->r[KR_CANDS], *ch = rr->r[KR_CHILDREN], *j = rr->r[KR_JOBS], *e = rr->r[KR_EVALS],
                   *pp = rr->r[KR_PROPS];
    kf_strbuf b = { 0 };
    long cur = -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < PQntuples(k); i++) {
        int64_t kid = rr->id[KR_CANDS][i];
        if (kid < lo || kid >= hi) continue;
        long bk = (long)(kid / KF_EXPORT_BUCKET);
        if (cur >= 0 && bk != cur && (rc = flush_bucket(dir, cid, 'b', cur, &b, err, errlen)) < 0) break;
        cur = bk;
        kf_strbuf_add(&b, b.len ? ",\n" : "{");
        kf_strbuf_printf(&b, "\"%lld\":{", (long long)kid);
        json_members(&b, k, i, CAND_KEYS, NKEYS(CAND_KEYS), 1);
        kf_strbuf_add(&b, ",\"parent_sha256\":");
        int f, n = 0;
        if (!PQgetisnull(k, i, 2)) {
            int64_t par = strtoll(PQgetvalue(k, i, 2), NULL, 10);
            if (rows_of(rr, KR_CANDS, par, &f)) json_value(&b, k, f, 6);
            else if (rows_of(rr, KR_PARENTS, par, &f)) json_value(&b, rr->r[KR_PARENTS], f, 1);
            else n = -1;
        } else {
            n = -1;
        }
        if (n < 0) kf_strbuf_addn(&b, "null", 4);
        n = rows_of(rr, KR_CHILDREN, kid, &f);
        if (n > 500) n = 500; /* the first 500 */
        kf_strbuf_add(&b, n ? ",\"children\":[" : ",\"children\":null");
        for (int c = 0; c < n; c++) {
            if (c) kf_strbuf_addn(&b, ",", 1);
            kf_strbuf_add(&b, PQgetvalue(ch, f + c, 1));
        }
        if (n) kf_strbuf_addn(&b, "]", 1);
        int jf, jn = rows_of(rr, KR_JOBS, kid, &jf);
        kf_strbuf_add(&b, jn ? ",\"results\":[" : ",\"results\":null");
        for (int a = jf; a < jf + jn; a++) {
            kf_strbuf_add(&b, a > jf ? ",{" : "{");
            json_members(&b, j, a, JOB_KEYS, NKEYS(JOB_KEYS), 1);
            int ef, en = rows_of(rr, KR_EVALS, strtoll(PQgetvalue(j, a, 1), NULL, 10), &ef);
            kf_strbuf_add(&b, en ? ",\"evaluations\":[" : ",\"evaluations\":null");
            for (int x = ef; x < ef + en; x++) {
                kf_strbuf_add(&b, x > ef ? ",{" : "{");
                json_members(&b, e, x, EVAL_KEYS, NKEYS(EVAL_KEYS), 1);
                kf_strbuf_addn(&b, "}", 1);
            }
            kf_strbuf_add(&b, en ? "]}" : "}");
        }
        if (jn) kf_strbuf_addn(&b, "]", 1);
        int pf, pn = PQgetisnull(k, i, 10) ? 0 : rows_of(rr, KR_PROPS, strtoll(PQgetvalue(k, i, 10), NULL, 10), &pf);
        kf_strbuf_add(&b, pn ? ",\"proposal\":{" : ",\"proposal\":null");
        if (pn) {
            json_members(&b, pp, pf, PROP_KEYS, NKEYS(PROP_KEYS), 1);
            kf_strbuf_addn(&b, "}", 1);
        }
        kf_strbuf_addn(&b, "}", 1);
    }
    if (rc == 0 && cur >= 0) rc = flush_bucket(dir, cid, 'b', cur, &b, err, errlen);
    free(b.s);
    return rc;
}

/* ---- a chunk of a campaign's tables, from the same rows ---- */

/* Append v as PostgreSQL writes round(v::numeric, nd) (nd <= 6): the
 * float8 to numeric cast keeps 15 significant digits (float8_numeric(),
 * DBL_DIG), which are then rounded half away from zero to nd decimals and
 * written with exactly nd of them ("2.0000"), without a minus sign on
 * zero; NaN and the infinities quoted, as json_agg writes them. */
static void add_round(kf_strbuf *b, double v, int nd)
{
    if (!isfinite(v)) {
        kf_strbuf_add(b, isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    char m[40];
    snprintf(m, sizeof(m), "%.14e", fabs(v)); /* d.dddddddddddddde+XX: 15 digits */
    int e = atoi(strchr(m, 'e') + 1);
    if (e > 12) { /* too large for the integer path below */
        kf_strbuf_printf(b, "%.*f", nd, v);
        return;
    }
    int64_t d = m[0] - '0';
    for (const char *p = m + 2; *p != 'e'; p++) d = d * 10 + (*p - '0');
    int sh = e - 14 + nd; /* v * 10^nd = d * 10^sh */
    int64_t q;
    if (sh >= 0) {
        q = d;
        while (sh-- > 0) q *= 10;
    } else if (sh <= -16) {
        q = 0;
    } else {
        int64_t p10 = 1;
        for (int i = 0; i < -sh; i++) p10 *= 10;
        q = d / p10;
        if ((d % p10) * 2 >= p10) q++;
    }
    int64_t p10 = 1;
    for (int i = 0; i < nd; i++) p10 *= 10;
    kf_strbuf_printf(b, "%s%lld", q && v < 0 ? "-" : "", (long long)(q / p10));
    if (nd) kf_strbuf_printf(b, ".%0*lld", nd, (long long)(q % p10));
}

/* Append the seconds from t0 (µs since 1970) to the timestamptz in column
 * c of row of r as round((extract(epoch FROM t) - t0)::numeric, 1) writes
 * them; null when either is not a time ts_us() reads. */
static void add_secs(kf_strbuf *b, const PGresult *r, int row, int c, int64_t t0, int t0_ok)
{
    int64_t t;
    if (!t0_ok || PQgetisnull(r, row, c) || ts_us(PQgetvalue(r, row, c), (size_t)PQgetlength(r, row, c), &t) < 0) {
        kf_strbuf_addn(b, "null", 4);
        return;
    }
    int64_t d = t - t0, a = d < 0 ? -d : d, q = (a + 50000) / 100000; /* tenths, half away from zero */
    kf_strbuf_printf(b, "%s%lld.%lld", q && d < 0 ? "-" : "", (long long)(q / 10), (long long)(q % 10));
}

/* Append value (text, NULL: null) as its number in list (sorted distinct
 * names, binary search), or as a JSON string when it is not in it. */
static void add_code(kf_strbuf *b, const char *value, const char *const *list, int n)
{
    if (!value) {
        kf_strbuf_addn(b, "null", 4);
        return;
    }
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], value)) {
            kf_strbuf_printf(b, "%d", i);
            return;
        }
    add_json_string(b, value, strlen(value));
}

/* Append the number of target in the campaign's targets (tg, in order:
 * array_position() - 1), or null when it is not one of them. */
static void add_target(kf_strbuf *b, const char *const *tg, int ntg, const char *target)
{
    int t = 0;
    while (t < ntg && strcmp(tg[t], target)) t++;
    if (t < ntg) kf_strbuf_printf(b, "%d", t);
    else kf_strbuf_addn(b, "null", 4);
}

static const char *const VERDICT_NAMES[] = { "ok", "compile_error", "load_error", "runtime_error", "timeout",
                                             "incorrect", "rejected_cheat", "unsupported", "infra_error" };
static const char *const STATE_NAMES[] = { "queued", "leased", "done" };

/* A sorted list of distinct strings, to number values by; it borrows them
 * (they live in the range's rows or its results). */
typedef struct {
    const char **s;
    int n, cap;
} name_list;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int names_add(name_list *l, const char *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        const char **t = realloc(l->s, (size_t)cap * sizeof(*t));
        if (!t) return -1;
        l->s = t;
        l->cap = cap;
    }
    l->s[l->n++] = s;
    return 0;
}

/* Sort and drop the repeats. */
static void names_seal(name_list *l)
{
    qsort(l->s, (size_t)l->n, sizeof(*l->s), cmp_str);
    int w = 0;
    for (int i = 0; i < l->n; i++)
        if (!w || strcmp(l->s[w - 1], l->s[i])) l->s[w++] = l->s[i];
    l->n = w;
}

/* The number of s in the sealed list (-1: absent). */
static int names_find(const name_list *l, const char *s)
{
    const char *const *hit = bsearch(&s, l->s, (size_t)l->n, sizeof(*l->s), cmp_str);
    return hit ? (int)(hit - l->s) : -1;
}

static void names_free(name_list *l)
{
    free(l->s);
}

/* The first 120 characters of UTF-8 text s (left(s, 120)), malloc'ed. */
static char *left120(const char *s)
{
    size_t i = 0;
    for (int c = 0; s[i] && c < 120; c++) {
        i++;
        while ((s[i] & 0xc0) == 0x80) i++;
    }
    char *o = malloc(i + 1);
    if (o) {
        memcpy(o, s, i);
        o[i] = 0;
    }
    return o;
}

/* A retried attempt: its evaluation id and its row. */
typedef struct {
    int64_t id;
    int row, job;
} ev_ref;

static int cmp_ev_ref(const void *a, const void *b)
{
    int64_t x = ((const ev_ref *)a)->id, y = ((const ev_ref *)b)->id;
    return x < y ? -1 : x > y;
}

/* One result of a chunk: a job of the campaign that counts (purpose eval)
 * and its final evaluation (-1: none yet), with the noise over its shapes
 * from the metrics. */
typedef struct {
    int job, fin;
    char *detail;          /* left(detail, 120) of the final evaluation */
    kf_export_noise nz;    /* nz.noisy -1: no final evaluation */
} chunk_res;

/* ---- the noise of a result, from its metrics (kf_export_metrics_noise) ---- */

/* One shape's candidate cv, and one shape's speedup, into x (both readers). */
static void noise_cv(kf_export_noise *x, double v)
{
    if (!x->has_cv || v > x->cv) x->cv = v;
    x->has_cv = 1;
}

static void noise_speedup(kf_export_noise *x, double v)
{
    if (!x->has_lo || v < x->lo) x->lo = v;
    if (!x->has_lo || v > x->hi) x->hi = v;
    x->has_lo = 1;
}

void kf_export_metrics_noise_parsed(const char *text, size_t len, kf_export_noise *x)
{
    memset(x, 0, sizeof(*x));
    json_t *m = json_loadb(text, len, 0, NULL);
    json_t *t = json_object_get(m, "timing"), *sh = json_object_get(t, "shapes"), *fl = json_object_get(t, "flags");
    size_t i;
    json_t *s;
    json_array_foreach(sh, i, s) {
        json_t *cv = json_object_get(json_object_get(s, "candidate"), "cv"), *sp = json_object_get(s, "speedup");
        if (json_is_number(cv) || json_is_string(cv)) {
            noise_cv(x, json_is_number(cv) ? json_number_value(cv) : strtod(json_string_value(cv), NULL));
        }
        if (json_is_number(sp) || json_is_string(sp)) {
            noise_speedup(x, json_is_number(sp) ? json_number_value(sp) : strtod(json_string_value(sp), NULL));
        }
    }
    if (json_is_array(fl)) {
        json_array_foreach(fl, i, s) if (json_is_string(s) && !strcmp(json_string_value(s), "noisy")) x->noisy = 1;
    } else if (json_is_object(fl)) {
        x->noisy = json_object_get(fl, "noisy") != NULL;
    } else if (json_is_string(fl)) {
        x->noisy = !strcmp(json_string_value(fl), "noisy");
    }
    json_decref(m);
}

/* Is span v the string "noisy"? */
static int is_noisy(kf_jspan v)
{
    return v.a && v.b - v.a == 7 && !memcmp(v.a, "\"noisy\"", 7);
}

int kf_export_metrics_noise(const char *text, size_t len, kf_export_noise *x)
{
    memset(x, 0, sizeof(*x));
    kf_jscan s = { text, text + len, 0 };
    static const char *const top_k[] = { "timing" }, *const tim_k[] = { "shapes", "flags" },
                             *const shp_k[] = { "candidate", "speedup" }, *const can_k[] = { "cv" };
    kf_jspan top[1], tim[2], shp[2], can[1];
    int obj;
    kf_jscan_ws(&s);
    if (s.p >= s.end || (*s.p != '{' && *s.p != '[')) goto full; /* jansson: an object or array at the top */
    kf_jscan_members(&s, top_k, 1, top, &obj);
    kf_jscan_ws(&s);
    if (s.bad || s.p != s.end) goto full;
    if (!obj || !top[0].a) return 1;
    /* everything after this reads inside the spans already checked */
    kf_jscan t = { top[0].a, top[0].b, 0 };
    kf_jscan_members(&t, tim_k, 2, tim, &obj);
    if (t.bad) goto full;
    if (!obj) return 1;
    if (tim[0].a && *tim[0].a == '[') {
        kf_jscan a = { tim[0].a + 1, tim[0].b, 0 };
        int first = 1;
        kf_jspan el;
        while (kf_jscan_next(&a, &first, &el)) {
            kf_jscan e = { el.a, el.b, 0 };
            kf_jscan_members(&e, shp_k, 2, shp, &obj);
            if (e.bad) goto full;
            if (!obj) continue;
            double v;
            if (shp[0].a && *shp[0].a == '{') {
                kf_jscan c = { shp[0].a, shp[0].b, 0 };
                kf_jscan_members(&c, can_k, 1, can, &obj);
                if (c.bad) goto full;
                if (kf_jscan_double(&c, can[0], &v)) noise_cv(x, v);
                if (c.bad) goto full;
            }
            if (kf_jscan_double(&e, shp[1], &v)) noise_speedup(x, v);
            if (e.bad) goto full;
        }
        if (a.bad) goto full;
    }
    kf_jspan f = tim[1];
    if (f.a && *f.a == '[') {
        kf_jscan a = { f.a + 1, f.b, 0 };
        int first = 1;
        kf_jspan el;
        while (kf_jscan_next(&a, &first, &el)) {
            if (*el.a == '"' && memchr(el.a + 1, '\\', (size_t)(el.b - el.a - 1))) goto full;
            if (is_noisy(el)) x->noisy = 1;
        }
        if (a.bad) goto full;
    } else if (f.a && *f.a == '{') {
        static const char *const nk[] = { "noisy" };
        kf_jspan nv[1];
        kf_jscan o = { f.a, f.b, 0 };
        kf_jscan_members(&o, nk, 1, nv, &obj);
        if (o.bad) goto full;
        x->noisy = nv[0].a != NULL;
    } else if (f.a && *f.a == '"') {
        if (memchr(f.a + 1, '\\', (size_t)(f.b - f.a - 1))) goto full;
        x->noisy = is_noisy(f);
    }
    return 1;
full:
    kf_export_metrics_noise_parsed(text, len, x);
    return 0;
}

/* Column c of r at row as a double, from its text (the caller checks for NULL). */
static double num_at(const PGresult *r, int row, int c)
{
    return strtod(PQgetvalue(r, row, c), NULL);
}

/* The text of chunk (campaign cid, candidate ids [lo, hi)) from the rows
 * of its range, as the page reads it (app.js model()): the chunk's own
 * sorted lists of details, worker names and define sets; the candidates
 * (cands), their results (res: one per job that counts, with its final
 * evaluation, in candidate and target order) and the retried attempts
 * (evs, by evaluation id), one array per column. Repeating values are
 * numbers into lists (verdict and state names of the head, or the chunk's
 * lists); times are seconds after the campaign's creation (one decimal),
 * speedups and times in µs rounded to 4 decimals. conf_from_eval: a
 * result's confirmation is its evaluation's column (else the job's). NULL
 * when out of memory. */
static char *chunk_text(const range_rows *rr, int64_t cid, int conf_from_eval)
{
    const PGresult *k = rr->r[KR_CANDS], *j = rr->r[KR_JOBS], *e = rr->r[KR_EVALS], *pp = rr->r[KR_PROPS],
                   *meta = rr->r[KR_META];
    int nk = PQntuples(k), nj = PQntuples(j), ne = PQntuples(e);
    int64_t t0 = 0;
    int t0_ok = PQntuples(meta) && ts_us(PQgetvalue(meta, 0, 0), (size_t)PQgetlength(meta, 0, 0), &t0) == 0;
    int ntg = 0;
    const char *tg[64];
    for (int i = 0; i < PQntuples(meta) && ntg < 64; i++)
        if (!PQgetisnull(meta, i, 1)) tg[ntg++] = PQgetvalue(meta, i, 1);
    name_list det = { 0 }, wn = { 0 }, ds = { 0 };
    chunk_res *x = calloc((size_t)nj + 1, sizeof(*x));
    ev_ref *rs = malloc(((size_t)ne + 1) * sizeof(*rs)); /* the retried attempts */
    int nx = 0, nr = 0, oom = !x || !rs;
    char *out = NULL;
    /* the results, and the retried attempts of the jobs that count */
    for (int a = 0; !oom && a < nj; a++) {
        if (strtoll(PQgetvalue(j, a, 8), NULL, 10) != cid || strcmp(PQgetvalue(j, a, 7), "eval")) continue;
        chunk_res *r = &x[nx++];
        r->job = a;
        r->fin = -1;
        r->nz.noisy = -1;
        int ef, en = rows_of(rr, KR_EVALS, strtoll(PQgetvalue(j, a, 1), NULL, 10), &ef);
        for (int i = ef; i < ef + en; i++) {
            if (PQgetvalue(e, i, 6)[0] != 't') {
                rs[nr++] = (ev_ref){ strtoll(PQgetvalue(e, i, 1), NULL, 10), i, a };
                continue;
            }
            r->fin = i;
            r->nz.noisy = 0;
            if (!PQgetisnull(e, i, 14))
                kf_export_metrics_noise(PQgetvalue(e, i, 14), (size_t)PQgetlength(e, i, 14), &r->nz);
            if (!PQgetisnull(e, i, 5)) {
                oom |= !(r->detail = left120(PQgetvalue(e, i, 5)));
                oom |= r->detail && names_add(&det, r->detail) < 0;
            }
            if (!PQgetisnull(e, i, 3)) oom |= names_add(&wn, PQgetvalue(e, i, 3)) < 0;
        }
    }
    for (int i = 0; !oom && i < nk; i++) oom |= names_add(&ds, PQgetvalue(k, i, 5)) < 0;
    if (oom) goto done;
    names_seal(&det);
    names_seal(&wn);
    names_seal(&ds);
    qsort(rs, (size_t)nr, sizeof(*rs), cmp_ev_ref); /* by evaluation id */
    kf_strbuf b = { 0 };
    kf_strbuf_add(&b, "{\"details\":[");
    for (int i = 0; i < det.n; i++) {
        if (i) kf_strbuf_addn(&b, ",", 1);
        add_json_string(&b, det.s[i], strlen(det.s[i]));
    }
    kf_strbuf_add(&b, "],\"worker_names\":[");
    for (int i = 0; i < wn.n; i++) {
        if (i) kf_strbuf_addn(&b, ",", 1);
        add_json_string(&b, wn.s[i], strlen(wn.s[i]));
    }
    kf_strbuf_add(&b, "],\"define_sets\":[");
    for (int i = 0; i < ds.n; i++) {
        if (i) kf_strbuf_addn(&b, ",", 1);
        kf_strbuf_add(&b, ds.s[i]);
    }
    /* json_agg of no rows is null: only the first column of an empty table is [] */
#define NUL_IF_EMPTY(n) if (!(n)) { kf_strbuf_addn(&b, "null", 4); } else
    kf_strbuf_add(&b, "],\"cands\":{\"id\":[");
    for (int i = 0; i < nk; i++) kf_strbuf_printf(&b, i ? ",%s" : "%s", PQgetvalue(k, i, 0));
    kf_strbuf_add(&b, "]");
    static const char *const kcol[] = { "parent", "proposer", "defines", "t", "round", "proposal" };
    for (int c = 0; c < 6; c++) {
        kf_strbuf_printf(&b, ",\"%s\":", kcol[c]);
        NUL_IF_EMPTY(nk) {
            kf_strbuf_addn(&b, "[", 1);
            for (int i = 0; i < nk; i++) {
                if (i) kf_strbuf_addn(&b, ",", 1);
                switch (c) {
                case 0: json_value(&b, k, i, 2); break;
                case 1: json_value(&b, k, i, 4); break;
                case 2: kf_strbuf_printf(&b, "%d", names_find(&ds, PQgetvalue(k, i, 5))); break;
                case 3: add_secs(&b, k, i, 8, t0, t0_ok); break;
                case 4: {
                    int pf;
                    if (!PQgetisnull(k, i, 10) && rows_of(rr, KR_PROPS, strtoll(PQgetvalue(k, i, 10), NULL, 10), &pf))
                        json_value(&b, pp, pf, 2);
                    else
                        kf_strbuf_addn(&b, "null", 4);
                    break;
                }
                default: json_value(&b, k, i, 10);
                }
            }
            kf_strbuf_addn(&b, "]", 1);
        }
    }
    kf_strbuf_add(&b, "},\"res\":{\"k\":[");
    for (int i = 0; i < nx; i++) kf_strbuf_printf(&b, i ? ",%s" : "%s", PQgetvalue(j, x[i].job, 0));
    kf_strbuf_add(&b, "]");
    static const char *const rcol[] = { "target", "state", "verdict", "speedup", "cand_us", "base_us", "cv", "lo",
                                        "hi", "noisy", "tries", "worker", "t", "detail", "conf" };
    int any_conf = 0;
    for (int i = 0; i < nx; i++) {
        const chunk_res *r = &x[i];
        any_conf |= conf_from_eval ? r->fin >= 0 && !PQgetisnull(e, r->fin, 12) : !PQgetisnull(j, r->job, 6);
    }
    for (int c = 0; c < 15; c++) {
        kf_strbuf_printf(&b, ",\"%s\":", rcol[c]);
        NUL_IF_EMPTY(nx && (c < 14 || any_conf)) {
            kf_strbuf_addn(&b, "[", 1);
            for (int i = 0; i < nx; i++) {
                const chunk_res *r = &x[i];
                int a = r->job, f = r->fin;
                if (i) kf_strbuf_addn(&b, ",", 1);
                switch (c) {
                case 0: add_target(&b, tg, ntg, PQgetvalue(j, a, 2)); break;
                case 1: add_code(&b, PQgetvalue(j, a, 3), STATE_NAMES, NKEYS(STATE_NAMES)); break;
                case 2: add_code(&b, f >= 0 ? PQgetvalue(e, f, 4) : NULL, VERDICT_NAMES, NKEYS(VERDICT_NAMES)); break;
                case 3: case 4: case 5:
                    if (f >= 0 && !PQgetisnull(e, f, 5 + c)) add_round(&b, num_at(e, f, 5 + c), 4);
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                case 6:
                    if (r->nz.has_cv) add_round(&b, r->nz.cv, 4);
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                case 7: case 8:
                    if (r->nz.has_lo) add_round(&b, c == 7 ? r->nz.lo : r->nz.hi, 4);
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                case 9:
                    if (r->nz.noisy >= 0) kf_strbuf_printf(&b, "%d", r->nz.noisy);
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                case 10: json_value(&b, j, a, 4); break;
                case 11:
                    if (f >= 0 && !PQgetisnull(e, f, 3)) kf_strbuf_printf(&b, "%d", names_find(&wn, PQgetvalue(e, f, 3)));
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                case 12:
                    if (f >= 0) add_secs(&b, e, f, 11, t0, t0_ok);
                    else add_secs(&b, j, a, 9, t0, t0_ok);
                    break;
                case 13:
                    if (r->detail) kf_strbuf_printf(&b, "%d", names_find(&det, r->detail));
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                default:
                    if (conf_from_eval && f < 0) kf_strbuf_addn(&b, "null", 4);
                    else if (conf_from_eval) json_value(&b, e, f, 12);
                    else json_value(&b, j, a, 6);
                }
            }
            kf_strbuf_addn(&b, "]", 1);
        }
    }
    kf_strbuf_add(&b, "},\"evs\":{\"t\":[");
    for (int i = 0; i < nr; i++) {
        if (i) kf_strbuf_addn(&b, ",", 1);
        add_secs(&b, e, rs[i].row, 11, t0, t0_ok);
    }
    kf_strbuf_add(&b, "]");
    static const char *const ecol[] = { "k", "target", "verdict", "speedup", "worker", "detail" };
    for (int c = 0; c < 6; c++) {
        kf_strbuf_printf(&b, ",\"%s\":", ecol[c]);
        NUL_IF_EMPTY(nr) {
            kf_strbuf_addn(&b, "[", 1);
            for (int i = 0; i < nr; i++) {
                int r = rs[i].row, a = rs[i].job;
                if (i) kf_strbuf_addn(&b, ",", 1);
                switch (c) {
                case 0: kf_strbuf_add(&b, PQgetvalue(j, a, 0)); break;
                case 1: add_target(&b, tg, ntg, PQgetvalue(j, a, 2)); break;
                case 2: add_code(&b, PQgetvalue(e, r, 4), VERDICT_NAMES, NKEYS(VERDICT_NAMES)); break;
                case 3:
                    if (!PQgetisnull(e, r, 8)) add_round(&b, num_at(e, r, 8), 4);
                    else kf_strbuf_addn(&b, "null", 4);
                    break;
                case 4: json_value(&b, e, r, 3); break;
                default:
                    if (PQgetisnull(e, r, 5)) {
                        kf_strbuf_addn(&b, "null", 4);
                    } else {
                        char *d = left120(PQgetvalue(e, r, 5));
                        if (d) add_json_string(&b, d, strlen(d));
                        else b.oom = 1;
                        free(d);
                    }
                }
            }
            kf_strbuf_addn(&b, "]", 1);
        }
    }
#undef NUL_IF_EMPTY
    kf_strbuf_add(&b, "}}");
    if (b.oom) free(b.s);
    else out = b.s;
done:
    for (int i = 0; i < nx; i++) free(x[i].detail);
    free(x);
    free(rs);
    names_free(&det);
    names_free(&wn);
    names_free(&ds);
    return out;
}

/* Settings of an export's transaction, on either connection: no JIT (its
 * compilation costs a second per large query and saves nothing here), and
 * sorting a chunk's rows in memory, not in temporary files. */
static const char *const EXPORT_SETTINGS[] = { "SET LOCAL work_mem = '64MB'", "SET LOCAL jit = off",
                                               /* times as ts_json() and ts_us() read them */
                                               "SET LOCAL TimeZone = 'UTC'", "SET LOCAL DateStyle = 'ISO, MDY'" };

/* A second connection to the same database that sees the same snapshot as
 * db's open transaction: pieces of the export run on it while db runs
 * others (two server processes, one snapshot). NULL when it cannot be
 * made: the caller then runs everything on db. */
static kf_db *open_twin(kf_db *db)
{
    PQconninfoOption *opts = PQconninfo(kf_db_conn(db));
    if (!opts) return NULL;
    kf_strbuf ci = { 0 };
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val) continue;
        kf_strbuf_printf(&ci, "%s%s='", ci.len ? " " : "", o->keyword);
        for (const char *v = o->val; *v; v++) {
            if (*v == '\'' || *v == '\\') kf_strbuf_add(&ci, "\\");
            kf_strbuf_addn(&ci, v, 1);
        }
        kf_strbuf_add(&ci, "'");
    }
    PQconninfoFree(opts);
    char err[256];
    kf_db *twin = ci.oom || !ci.s ? NULL : kf_db_open(ci.s, err, sizeof(err));
    free(ci.s);
    if (!twin) return NULL;
    PGresult *snap = kf_db_exec(db, "SELECT pg_export_snapshot()", 0, NULL, err, sizeof(err));
    int ok = snap && PQntuples(snap) == 1 &&
             kf_db_cmd(twin, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err, sizeof(err)) == 0;
    if (ok) {
        /* SET TRANSACTION SNAPSHOT takes no parameters: quote the id */
        const char *id = PQgetvalue(snap, 0, 0);
        char *q = PQescapeLiteral(kf_db_conn(twin), id, strlen(id));
        char sql[256];
        snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT %s", q ? q : "''");
        PQfreemem(q);
        ok = kf_db_cmd(twin, sql, 0, NULL, err, sizeof(err)) == 0;
    }
    for (size_t i = 0; ok && i < sizeof(EXPORT_SETTINGS) / sizeof(EXPORT_SETTINGS[0]); i++)
        ok = kf_db_cmd(twin, EXPORT_SETTINGS[i], 0, NULL, err, sizeof(err)) == 0;
    if (snap) PQclear(snap);
    if (!ok) {
        kf_db_close(twin);
        return NULL;
    }
    return twin;
}

/* The operator's view of campaign cid as members to add to its campaign
 * object (malloc'ed: , "blockers": ..., "bests": ..., "pause_reason": ...):
 * why the campaign does not progress (health.h) and its bests with noise
 * and confirmation (bests.h), as `kfarm campaign status` and `kfarm best`
 * say. NULL with reason. */
static char *operator_view(kf_db *db, int64_t cid, char *err, size_t errlen)
{
    json_t *bl = kf_health_blockers(db, cid, NULL, err, errlen);
    json_t *be = bl ? kf_bests(db, cid, err, errlen) : NULL;
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)cid);
    const char *p[1] = { id };
    PGresult *r = be ? kf_db_exec(db, "SELECT COALESCE(to_json(pause_reason)::text, 'null') FROM campaigns WHERE id = $1::bigint", 1, p,
                                  err, errlen) : NULL;
    char *out = NULL;
    if (bl && be && r && PQntuples(r) == 1) {
        char *bls = json_dumps(bl, JSON_COMPACT), *bes = json_dumps(be, JSON_COMPACT);
        kf_strbuf b = { 0 };
        kf_strbuf_add(&b, ", \"blockers\": ");
        kf_strbuf_add(&b, bls);
        kf_strbuf_add(&b, ", \"bests\": ");
        kf_strbuf_add(&b, bes);
        kf_strbuf_add(&b, ", \"pause_reason\": ");
        kf_strbuf_add(&b, PQgetvalue(r, 0, 0));
        free(bls);
        free(bes);
        if (b.oom || !bls || !bes) {
            free(b.s);
            snprintf(err, errlen, "out of memory");
        } else {
            out = b.s;
        }
    } else if (r && PQntuples(r) != 1) {
        snprintf(err, errlen, "campaign %lld is gone", (long long)cid);
    }
    if (r) PQclear(r);
    json_decref(bl);
    json_decref(be);
    return out;
}

/* ---- the pieces of an export, on two connections ---- */

/* One piece: a chunk of a campaign's tables (data/c<ID>/r<N>.js), the
 * candidate files of a range of ids, or a campaign's proposal files. */
typedef struct {
    char kind;         /* 'r' chunk, 'b' candidate files, 'a' both, 'p' proposal files */
    int64_t cid;
    int64_t lo, hi;    /* 'r', 'b', 'a': the candidate ids [lo, hi) */
    const char *since; /* 'p': only the buckets changed since then (NULL: all) */
} export_task;

typedef struct {
    const char *dir;
    int conf_from_eval;         /* a result's confirmation: its evaluation's column */
    const char *cand_sql[KR_N]; /* CAND_ROWS_SQL for this schema */
    export_task *t;
    size_t n, cap, next;
    int failed;
    char err[512];
    pthread_mutex_t mu;
} export_pool;

typedef struct {
    export_pool *pool;
    PGconn *conn;
} export_worker;

static int add_task(export_pool *pl, char kind, int64_t cid, int64_t lo, int64_t hi, const char *since)
{
    if (pl->n == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 256;
        export_task *t = realloc(pl->t, cap * sizeof(*t));
        if (!t) return -1;
        pl->t = t;
        pl->cap = cap;
    }
    pl->t[pl->n++] = (export_task){ .kind = kind, .cid = cid, .lo = lo, .hi = hi, .since = since };
    return 0;
}

static int run_task(PGconn *conn, const export_pool *pl, const export_task *t, char *err, size_t errlen)
{
    char cid[24], lo[24], hi[24], bucket[16];
    snprintf(cid, sizeof(cid), "%lld", (long long)t->cid);
    snprintf(lo, sizeof(lo), "%lld", (long long)t->lo);
    snprintf(hi, sizeof(hi), "%lld", (long long)t->hi);
    snprintf(bucket, sizeof(bucket), "%d", KF_EXPORT_PROP_BUCKET);
    if (t->kind == 'p') {
        const char *p[3] = { cid, t->since, bucket };
        return export_proposals(conn, p, pl->dir, cid, err, errlen);
    }
    range_rows rr;
    if (range_rows_fetch(conn, pl->cand_sql, cid, lo, hi, &rr, err, errlen) < 0) return -1;
    int rc = 0;
    if (t->kind != 'b') { /* the chunk */
        long long n = (long long)(t->lo / KF_EXPORT_CHUNK);
        char *text = chunk_text(&rr, t->cid, pl->conf_from_eval);
        if (!text) {
            snprintf(err, errlen, "chunk %lld of campaign %s: out of memory", n, cid);
            rc = -1;
        } else {
            char name[128], key[64];
            snprintf(name, sizeof(name), "data/c%s/r%lld.js", cid, n);
            snprintf(key, sizeof(key), "c%s/r%lld", cid, n);
            rc = write_data(pl->dir, name, key, text, err, errlen);
            free(text);
        }
    }
    if (rc == 0 && t->kind != 'r') rc = cand_files(&rr, pl->dir, cid, t->lo, t->hi, err, errlen);
    range_rows_free(&rr);
    return rc;
}

/* Stop the pool, keeping reason as the export's error unless one is
 * kept already. */
static void pool_error(export_pool *pl, const char *reason)
{
    pthread_mutex_lock(&pl->mu);
    if (!pl->failed) snprintf(pl->err, sizeof(pl->err), "%s", reason && *reason ? reason : "export failed");
    pl->failed = 1;
    pthread_mutex_unlock(&pl->mu);
}

static void pool_fail(export_pool *pl)
{
    pthread_mutex_lock(&pl->mu);
    pl->failed = 1;
    pthread_mutex_unlock(&pl->mu);
}

/* Take pieces from the pool and do them on the worker's connection until
 * none is left or one failed (the first failure's reason is kept). */
static void *pool_run(void *arg)
{
    export_worker *w = arg;
    export_pool *pl = w->pool;
    char err[512];
    for (;;) {
        pthread_mutex_lock(&pl->mu);
        const export_task *t = !pl->failed && pl->next < pl->n ? &pl->t[pl->next++] : NULL;
        pthread_mutex_unlock(&pl->mu);
        if (!t) break;
        err[0] = 0;
        if (run_task(w->conn, pl, t, err, sizeof(err)) < 0) {
            pool_error(pl, err);
            break;
        }
    }
    return NULL;
}


/* A campaign whose file is rewritten: its index row, and (once built) the
 * file's text without its closing brace and the operator's view. */
typedef struct {
    int row;
    int whole;       /* all of its files are written (then its layout marker) */
    char *text;
    char *view;
} export_campaign;

/* Is dir's folder of campaign cid in this export's layout
 * (KF_EXPORT_LAYOUT in data/c<cid>/layout)? */
static int layout_ok(const char *dir, const char *cid)
{
    char path[4096];
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/data/c%s/layout", dir, cid);
    char *t = kf_util_read_file(path, &len, 256);
    int ok = t && len == strlen(KF_EXPORT_LAYOUT) && memcmp(t, KF_EXPORT_LAYOUT, len) == 0;
    free(t);
    return ok;
}

/* The next id of a JSON array of integers (INDEX_SQL's changed ids) at *s,
 * or -1 at its end. */
static int64_t next_id(const char **s)
{
    while (**s && (**s < '0' || **s > '9')) (*s)++;
    if (!**s) return -1;
    char *end;
    int64_t v = strtoll(*s, &end, 10);
    *s = end;
    return v;
}

/* The pieces of campaign cid: every chunk and candidate file (all), or
 * those with a changed candidate (changed: INDEX_SQL's JSON array of ids,
 * in order; NULL: none) and the chunks missing from dir; and its proposal
 * files. chunks: INDEX_SQL's JSON array of the campaign's chunks. 0, or -1
 * when out of memory. */
static int plan_campaign(export_pool *pl, const char *dir, int64_t cid, const char *chunks, int all,
                         const char *changed, const char *since)
{
    const char *cs = chunks, *ks = changed ? changed : "";
    int64_t n, k = next_id(&ks);
    while ((n = next_id(&cs)) >= 0) {
        int64_t lo = n * KF_EXPORT_CHUNK, hi = lo + KF_EXPORT_CHUNK;
        while (k >= 0 && k < lo) k = next_id(&ks);
        char name[128];
        snprintf(name, sizeof(name), "data/c%lld/r%lld.js", (long long)cid, (long long)n);
        /* all: the chunk and its candidate files from one reading of its rows */
        if ((all || (k >= 0 && k < hi) || !file_exists(dir, name)) && add_task(pl, all ? 'a' : 'r', cid, lo, hi, NULL) < 0)
            return -1;
    }
    /* the changed candidates' buckets, runs of neighbours as one range */
    ks = changed && !all ? changed : "";
    k = next_id(&ks);
    while (k >= 0) {
        int64_t b0 = k / KF_EXPORT_BUCKET, b1 = b0;
        while ((k = next_id(&ks)) >= 0 && k / KF_EXPORT_BUCKET <= b1 + 1) b1 = k / KF_EXPORT_BUCKET;
        if (add_task(pl, 'b', cid, b0 * KF_EXPORT_BUCKET, (b1 + 1) * KF_EXPORT_BUCKET, NULL) < 0) return -1;
    }
    return add_task(pl, 'p', cid, 0, 0, all ? NULL : since);
}

/* The campaign file's text without its closing brace (malloc'ed): the head
 * (HEAD_SQL) with the counts and bests of its index row (sums: INDEX_SQL's
 * fourth column) and its chunks. NULL with reason. */
static char *head_text(kf_db *db, const char *cid, const char *sums, const char *chunks, char *err,
                       size_t errlen)
{
    const char *p[1] = { cid };
    PGresult *h = kf_db_exec(db, HEAD_SQL, 1, p, err, errlen);
    if (!h) return NULL;
    char *out = NULL;
    const char *head = PQntuples(h) == 1 ? PQgetvalue(h, 0, 0) : "";
    size_t hn = strlen(head), sn = strlen(sums);
    if (hn < 2 || head[hn - 1] != '}' || sn < 2 || sums[0] != '{' || sums[sn - 1] != '}') {
        snprintf(err, errlen, "campaign %s: not a JSON object", cid);
    } else {
        kf_strbuf b = { 0 };
        kf_strbuf_addn(&b, head, hn - 1);
        kf_strbuf_add(&b, ", ");
        kf_strbuf_addn(&b, sums + 1, sn - 2);
        kf_strbuf_printf(&b, ", \"chunk_size\": %d, \"chunks\": %s", KF_EXPORT_CHUNK, chunks);
        if (b.oom) {
            snprintf(err, errlen, "out of memory");
            free(b.s);
        } else {
            out = b.s;
        }
    }
    PQclear(h);
    return out;
}

/* What the twin does: the operator's views of the campaigns, then pieces
 * from the pool. */
typedef struct {
    kf_db *db;
    export_pool *pool;
    export_campaign *camp;
    int ncamp;
    PGresult *plan;
} twin_job;

/* Fill in the operator's view of each campaign (ids: PLAN_SQL's rows) on
 * db, then do pieces. */
static void views_then_pieces(kf_db *db, export_pool *pl, export_campaign *camp, int ncamp, PGresult *plan)
{
    char err[512];
    for (int i = 0; i < ncamp; i++) {
        int64_t cid = strtoll(PQgetvalue(plan, camp[i].row, 0), NULL, 10);
        err[0] = 0;
        if (!(camp[i].view = operator_view(db, cid, err, sizeof(err)))) {
            pool_error(pl, err);
            return;
        }
    }
    export_worker w = { pl, kf_db_conn(db) };
    pool_run(&w);
}

static void *twin_run(void *arg)
{
    twin_job *j = arg;
    views_then_pieces(j->db, j->pool, j->camp, j->ncamp, j->plan);
    return NULL;
}

/* Export the data files; since NULL: all, else only what changed since then
 * (a timestamptz text). *now_out receives the database time the export's
 * snapshot was taken (malloc'ed). The work is shared by db and, when it
 * can be made, a second connection sharing db's snapshot (open_twin) in a
 * thread of its own: once the plan is made here (PLAN_SQL), the operator's
 * views there while the index, the fleet and the campaign heads are built
 * here, then the pieces (chunks, candidate and proposal files) on both. The campaign files are written after their chunks, and the index
 * last. */
static int export_data(kf_db *db, const char *dir, const char *since, char **now_out,
                       char *err, size_t errlen)
{
    if (mkdir_in(dir, "data", err, errlen) < 0) return -1;
    if (kf_db_cmd(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(EXPORT_SETTINGS) / sizeof(EXPORT_SETTINGS[0]); i++)
        if (kf_db_cmd(db, EXPORT_SETTINGS[i], 0, NULL, err, errlen) < 0) {
            kf_db_rollback(db);
            return -1;
        }
    int rc = -1, nrows = 0, ncamp = 0, started = 0;
    PGresult *w = NULL, *idx = NULL, *plan = NULL;
    pthread_t thread;
    export_pool pool = { .dir = dir };
    pthread_mutex_init(&pool.mu, NULL);
    export_campaign *camp = NULL;
    kf_strbuf b = { 0 };
    twin_job tj = { 0 };
    kf_db *twin = open_twin(db);
    char ev_f[128], ev_e[128], job[128];
    conf_columns(db, ev_f, ev_e, job, sizeof(ev_f));
    char *isql = NULL, *ksql[KR_N] = { 0 };
    /* a chunk's confirmation state: the evaluation's column if there is
     * one, else the job's */
    pool.conf_from_eval = strcmp(ev_f, "NULL") != 0;
    int has_purpose, has_conf_by, has_eval_verify = relation_exists(db, "evaluations_verify");
    trust_columns(db, &has_purpose, &has_conf_by);
    static const char *const names[] = { "{JOBS}", "{PURPOSE}", "{CONF_BY}", "{VERIFY}", "{JOBS_OF_CANDS}" };
    /* a campaign's verification results: by evaluations_verify (schema
     * 014: entries for verification results only), else through its jobs */
    const char *values[] = { has_purpose ? "(SELECT * FROM jobs WHERE purpose = 'eval')" : "jobs",
                             has_purpose ? "j.purpose" : "'eval'",
                             has_conf_by ? "e.confirmed_by_worker" : "NULL",
                             !has_purpose ? ""
                             : has_eval_verify ? "UNION ALL SELECT e.verdict, -count(*) FILTER (WHERE e.is_final),"
                                                 " -count(*) FROM evaluations e WHERE e.job_purpose = 'verify'"
                                                 " AND e.job_campaign_id = c.id GROUP BY e.verdict"
                                               : "UNION ALL SELECT e.verdict, -count(*) FILTER (WHERE e.is_final),"
                                                 " -count(*) FROM jobs j JOIN evaluations e ON e.job_id = j.id"
                                                 " WHERE j.purpose = 'verify' AND j.campaign_id = c.id"
                                                 " GROUP BY e.verdict",
                             /* a chunk's jobs by their candidates' ids: through job_keys
                              * (schema 015: the job row has no index by candidate) */
                             /* each job by its id (OFFSET 0 keeps the lookup per key: joined
                              * plainly, the plan read every job of the database per chunk,
                              * 162 ms a chunk instead of 13 at 1,000,000 evaluations) */
                             relation_exists(db, "job_keys")
                                 ? "FROM job_keys jk CROSS JOIN LATERAL (SELECT * FROM jobs x"
                                   " WHERE x.id = jk.job_id OFFSET 0) j"
                                   " WHERE jk.candidate_id >= $2::bigint AND jk.candidate_id < $3::bigint"
                                 : "FROM jobs j WHERE j.candidate_id >= $2::bigint AND j.candidate_id < $3::bigint" };
    /* the list's counts: from campaign_counts where the schema has it */
    int has_counts = has_purpose && relation_exists(db, "campaign_counts");
    /* the best per target: from the evaluations' own campaign and target
     * where the schema has them (schema/009_eval_target.sql) */
    int has_eval_target = relation_exists(db, "evaluations_ok_target");
    static const char *const cname[] = { "{COUNTS}", "{BEST_FROM}" };
    const char *cval[] = { has_counts ? INDEX_COUNTS_SQL : INDEX_COUNTS_ROWS_SQL,
                           has_eval_target
                               ? "FROM evaluations e WHERE e.job_campaign_id = c.id AND e.job_target = z.tg"
                                 " AND e.job_purpose = 'eval'"
                               : "FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id"
                                 " AND j.target = z.tg" };
    char *isql0 = sql_subst(INDEX_SQL, cname, cval, 2);
    isql = isql0 ? sql_subst(isql0, names, values, 5) : NULL;
    free(isql0);
    int oom = !isql;
    for (int q = 0; q < KR_N; q++) { /* the confirmation states: job's, evaluation's */
        const char *conf = q == KR_JOBS ? job : q == KR_EVALS ? ev_e : NULL;
        size_t tn = conf ? strlen(CAND_ROWS_SQL[q]) + strlen(conf) + 1 : 0;
        char *t = conf ? malloc(tn) : NULL;
        if (t) snprintf(t, tn, CAND_ROWS_SQL[q], conf);
        ksql[q] = sql_subst(conf ? (t ? t : "") : CAND_ROWS_SQL[q], names, values, 5);
        oom |= !ksql[q] || (conf && !t);
        free(t);
        pool.cand_sql[q] = ksql[q];
    }
    if (oom) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    char off[16], csize[16];
    snprintf(off, sizeof(off), "%d", KF_QUEUE_OFFLINE_S); /* shown offline after this (queue.h) */
    snprintf(csize, sizeof(csize), "%d", KF_EXPORT_CHUNK);
    const char *wp[1] = { off }, *pp[2] = { since, csize };
    if (!(plan = kf_db_exec(db, PLAN_SQL, 2, pp, err, errlen))) goto out;
    nrows = PQntuples(plan);
    if (!(camp = calloc((size_t)nrows + 1, sizeof(*camp)))) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* what to write: the campaigns with a change (all of them, or their
     * changed chunks and buckets), and every campaign whose file is missing */
    for (int i = 0; i < nrows; i++) {
        const char *cid = PQgetvalue(plan, i, 0);
        char name[128], sub[64];
        snprintf(name, sizeof(name), "data/c%s.js", cid);
        snprintf(sub, sizeof(sub), "data/c%s", cid);
        int changed = PQgetvalue(plan, i, 1)[0] == 't', exists = file_exists(dir, name);
        /* a folder written with another layout: its candidate files are
         * bucketed otherwise, so it is written whole */
        int same = exists && layout_ok(dir, cid);
        if (!changed && same) continue;
        if (mkdir_in(dir, sub, err, errlen) < 0) goto out;
        camp[ncamp].whole = !since || !same;
        camp[ncamp++].row = i;
        if (plan_campaign(&pool, dir, strtoll(cid, NULL, 10), PQgetvalue(plan, i, 2), !since || !same,
                          PQgetisnull(plan, i, 3) ? NULL : PQgetvalue(plan, i, 3), since) < 0) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    /* the fleet and the operator's views on the twin while the index and
     * the heads are built here, then the pieces on both */
    tj = (twin_job){ .db = twin, .pool = &pool, .camp = camp, .ncamp = ncamp, .plan = plan };
    started = twin && pthread_create(&thread, NULL, twin_run, &tj) == 0;
    if (!(idx = kf_db_exec(db, isql, 0, NULL, err, errlen)) ||
        !(w = kf_db_exec(db, WORKERS_SQL, 1, wp, err, errlen))) {
        pool_fail(&pool);
        goto out;
    }
    if (PQntuples(idx) != nrows) {
        snprintf(err, errlen, "the campaigns changed during the export");
        pool_fail(&pool);
        goto out;
    }
    for (int i = 0; i < ncamp; i++) {
        int r = camp[i].row;
        if (strcmp(PQgetvalue(idx, r, 0), PQgetvalue(plan, r, 0)) != 0) {
            snprintf(err, errlen, "the campaigns changed during the export");
            camp[i].text = NULL;
        } else {
            camp[i].text = head_text(db, PQgetvalue(idx, r, 0), PQgetvalue(idx, r, 2), PQgetvalue(plan, r, 2),
                                     err, errlen);
        }
        if (!camp[i].text) {
            pool_fail(&pool);
            goto out;
        }
    }
    if (started) {
        export_worker me = { &pool, kf_db_conn(db) };
        pool_run(&me);
        pthread_join(thread, NULL);
        started = 0;
    } else {
        views_then_pieces(db, &pool, camp, ncamp, plan);
    }
    if (pool.failed) {
        snprintf(err, errlen, "%s", pool.err);
        goto out;
    }
    /* a campaign file after its chunks: a page that sees it finds every
     * chunk it names */
    for (int i = 0; i < ncamp; i++) {
        const char *cid = PQgetvalue(plan, camp[i].row, 0);
        char name[128], key[64];
        snprintf(name, sizeof(name), "data/c%s.js", cid);
        snprintf(key, sizeof(key), "c%s", cid);
        kf_strbuf f = { 0 };
        kf_strbuf_add(&f, camp[i].text);
        kf_strbuf_add(&f, camp[i].view);
        kf_strbuf_add(&f, "}");
        int wr = f.oom ? -1 : write_data(dir, name, key, f.s, err, errlen);
        if (f.oom) snprintf(err, errlen, "out of memory");
        free(f.s);
        if (wr < 0) goto out;
        snprintf(name, sizeof(name), "data/c%s/layout", cid);
        if (camp[i].whole && write_atomic(dir, name, KF_EXPORT_LAYOUT, strlen(KF_EXPORT_LAYOUT), err, errlen) < 0)
            goto out;
    }
    kf_strbuf_add(&b, "{\"generated_at\": ");
    kf_strbuf_add(&b, PQgetvalue(w, 0, 1));
    kf_strbuf_add(&b, ",\n\"workers\": ");
    kf_strbuf_add(&b, PQgetvalue(w, 0, 0));
    kf_strbuf_add(&b, ",\n\"campaigns\": [");
    for (int i = 0; i < nrows; i++) {
        if (i) kf_strbuf_add(&b, ",\n");
        kf_strbuf_add(&b, PQgetvalue(idx, i, 1));
    }
    kf_strbuf_add(&b, "]}");
    if (b.oom) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* the index last: a page that sees it finds every campaign file it names */
    if (write_data(dir, "data/index.js", "index", b.s, err, errlen) < 0) goto out;
    if (now_out) *now_out = strdup(PQgetvalue(w, 0, 2));
    rc = 0;
out:
    if (started) pthread_join(thread, NULL);
    kf_db_close(twin); /* its transaction ends with it */
    for (int i = 0; camp && i < ncamp; i++) {
        free(camp[i].text);
        free(camp[i].view);
    }
    free(camp);
    free(pool.t);
    pthread_mutex_destroy(&pool.mu);
    for (int q = 0; q < KR_N; q++) free(ksql[q]);
    free(isql);
    free(b.s);
    PQclear(w);
    PQclear(idx);
    PQclear(plan);
    kf_db_rollback(db);
    return rc;
}

/* The static files (embedded, or from $KFARM_DASHBOARD_DIR). */
static int export_static(const char *dir, char *err, size_t errlen)
{
    kf_embedded_file f[KF_DB_MAX_EMBEDDED];
    int n = kf_db_embedded_dashboard(f, KF_DB_MAX_EMBEDDED);
    const char *over = getenv("KFARM_DASHBOARD_DIR");
    if (mkdir_in(dir, "vendor/licenses", err, errlen) < 0) return -1;
    for (int i = 0; i < n && i < KF_DB_MAX_EMBEDDED; i++) {
        int rc;
        if (over && *over) {
            char path[4096];
            size_t len = 0;
            snprintf(path, sizeof(path), "%s/%s", over, f[i].name);
            char *data = kf_util_read_file(path, &len, 16u << 20);
            if (!data) {
                snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
                return -1;
            }
            rc = write_atomic(dir, f[i].name, data, len, err, errlen);
            free(data);
        } else {
            rc = write_atomic(dir, f[i].name, f[i].data, f[i].len, err, errlen);
        }
        if (rc < 0) return -1;
    }
    return 0;
}

/* The whole site, or (since non-NULL) only what changed. */
static int export_site_since(kf_db *db, const char *dir, const char *since, char **now_out,
                             char *err, size_t errlen)
{
    if (kf_util_mkdirs(dir) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (export_data(db, dir, since, now_out, err, errlen) < 0) return -1;
    return export_static(dir, err, errlen);
}

int kf_export_site(kf_db *db, const char *dir, char *err, size_t errlen)
{
    return export_site_since(db, dir, NULL, NULL, err, errlen);
}

int kf_export_site_since(kf_db *db, const char *dir, const char *since, char *err, size_t errlen)
{
    return export_site_since(db, dir, since, NULL, err, errlen);
}

/* ---- periodic export thread ---- */

struct kf_export_service {
    kf_db *db;
    char *dir;
    double interval_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

static void *export_thread(void *arg)
{
    kf_export_service *s = arg;
    char err[512];
    char *since = NULL; /* the previous successful export's snapshot time */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int stopping = s->stop;
        pthread_mutex_unlock(&s->mu);
        char *now = NULL;
        if (kf_db_ensure(s->db, err, sizeof(err)) < 0 ||
            export_site_since(s->db, s->dir, since, &now, err, sizeof(err)) < 0) {
            kf_log("export: %s", err);
        } else {
            free(since);
            since = now;
        }
        pthread_mutex_lock(&s->mu);
        if (stopping) break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)s->interval_s;
        until.tv_nsec += (long)((s->interval_s - (double)(time_t)s->interval_s) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(since);
    return NULL;
}

kf_export_service *kf_export_service_start(const char *conninfo, const char *dir, double interval_s,
                                           char *err, size_t errlen)
{
    kf_export_service *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->interval_s = interval_s > 0 ? interval_s : 10;
    s->dir = strdup(dir);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (!s->dir || !(s->db = kf_db_open(conninfo, err, errlen))) goto fail;
    int rc = pthread_create(&s->thread, NULL, export_thread, s);
    if (rc != 0) {
        snprintf(err, errlen, "export thread: %s", strerror(rc));
        goto fail;
    }
    return s;
fail:
    if (s->db) kf_db_close(s->db);
    free(s->dir);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
}

void kf_export_service_stop(kf_export_service *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    kf_db_close(s->db);
    free(s->dir);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
