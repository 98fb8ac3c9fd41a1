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
 *   data/c<ID>/b<KID/32>.js  32 candidates by id, each with its source,
 *                            parent's sha256, results with metrics, compile
 *                            logs, every attempt, and its model proposal's
 *                            prompt and reply
 *   data/c<ID>/p<PID/32>.js  the model proposals that made no candidate, with
 *                            their prompt and reply
 *
 * The JSON is built by PostgreSQL (json_build_object/json_build_array), so
 * it is always valid with correct escaping; all queries run in one
 * REPEATABLE READ snapshot, so the index, campaign, chunk and candidate
 * files of one export agree. The work runs on two connections sharing that
 * snapshot (pg_export_snapshot), so two server processes work at once: a
 * plan (PLAN_SQL: which campaigns, chunks and buckets to write), then the
 * operator's views on the second connection while this one builds the
 * index, the fleet and the campaign heads, then the pieces (a chunk, the
 * candidate files of a range of ids, a campaign's proposal files) taken by
 * both from one list. Candidate rows are streamed (libpq's single-row
 * mode) and no file is larger than a chunk (~1.6 MB at 1,000,000
 * evaluations): memory stays bounded for any campaign size. A campaign's
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "bests.h"
#include "health.h"
#include "kf_util.h"
#include "log.h"
#include "queue.h"

/* Candidates per candidate file (data/c<ID>/b<KID / KF_EXPORT_BUCKET>.js). */
#define KF_EXPORT_BUCKET 32
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

/* One chunk of a campaign's tables: $1 campaign id, $2 and $3 the range of
 * candidate ids [$2, $3) (KF_EXPORT_CHUNK of them). Values that repeat
 * (verdicts, states, details, workers, sets of defines) are numbers into
 * lists: the verdict and state names of the head, the others the chunk's
 * own (sorted, numbered by dense_rank), so a chunk never changes because
 * another one did. Both sides of every join are read by the range of ids
 * and the query runs with nested loops off (run_task()): hash joins,
 * linear whatever the statistics say (on the stale statistics of a freshly
 * filled table a nested loop over two ranges ran for minutes). Times are seconds after the campaign's creation. %s:
 * the evaluation's confirmation state (in x), then the result's (see
 * conf_columns()); {JOBS}: the jobs whose results count (trust_columns(),
 * sql_subst()). */
static const char CHUNK_SQL[] =
    "WITH c AS (SELECT id, targets, extract(epoch FROM created_at) t0 FROM campaigns WHERE id = $1::bigint),"
    /* a row per result: the job and its final evaluation, without its
     * large columns, with the noise over its shapes (materialized: read by
     * the lists and the table) */
    " x AS MATERIALIZED (SELECT j.candidate_id k, j.target, j.state, j.attempts, j.created_at,"
    "         f.verdict, f.speedup, f.candidate_us, f.baseline_us, f.created_at f_at,"
    "         left(f.detail, 120) d, f.worker_id w, %s AS conf, sh.cv, sh.lo, sh.hi,"
    "         CASE WHEN f.id IS NULL THEN NULL WHEN f.metrics->'timing'->'flags' ? 'noisy' THEN 1 ELSE 0 END noisy"
    "         FROM {JOBS} j LEFT JOIN evaluations f ON f.job_id = j.id AND f.is_final"
    "         AND f.candidate_id >= $2::bigint AND f.candidate_id < $3::bigint"
    "         LEFT JOIN LATERAL (SELECT " R4("max((s->'candidate'->>'cv')::float8)") " cv,"
    "            " R4("min((s->>'speedup')::float8)") " lo, " R4("max((s->>'speedup')::float8)") " hi"
    "            FROM jsonb_array_elements(CASE WHEN jsonb_typeof(f.metrics->'timing'->'shapes') = 'array'"
    "            THEN f.metrics->'timing'->'shapes' END) s) sh ON f.metrics IS NOT NULL"
    "         WHERE j.campaign_id = $1::bigint AND j.candidate_id >= $2::bigint AND j.candidate_id < $3::bigint) "
    "SELECT json_build_object("
    " 'details', (SELECT COALESCE(json_agg(DISTINCT d), '[]') FROM x WHERE d IS NOT NULL),"
    " 'worker_names', (SELECT COALESCE(json_agg(DISTINCT w), '[]') FROM x WHERE w IS NOT NULL),"
    " 'define_sets', (SELECT COALESCE(json_agg(d::json ORDER BY d), '[]') FROM (SELECT DISTINCT defines::text d"
    "          FROM candidates WHERE campaign_id = $1::bigint AND id >= $2::bigint AND id < $3::bigint) ds),"
    /* tables as columns (one array per column, rows in order): parsing
     * 16 arrays is far cheaper for a browser than 200,000 small ones */
    " 'cands', (SELECT json_build_object('id', COALESCE(json_agg(id), '[]'), 'parent', json_agg(parent_id),"
    "          'proposer', json_agg(proposer), 'defines', json_agg(defines), 't', json_agg(t),"
    "          'round', json_agg(round), 'proposal', json_agg(proposal_id)) FROM (SELECT k.id, k.parent_id,"
    "          k.proposer, dense_rank() OVER (ORDER BY k.defines::text) - 1 defines,"
    "          round((extract(epoch FROM k.created_at) - c.t0)::numeric, 1) t,"
    "          (SELECT p.round FROM proposals p WHERE p.id = k.proposal_id) round, k.proposal_id FROM candidates k"
    "          WHERE k.campaign_id = c.id AND k.id >= $2::bigint AND k.id < $3::bigint ORDER BY k.id) y),"
    " 'res', (SELECT json_build_object('k', COALESCE(json_agg(k), '[]'), 'target', json_agg(target),"
    "          'state', json_agg(state), 'verdict', json_agg(verdict), 'speedup', json_agg(speedup),"
    "          'cand_us', json_agg(cand_us), 'base_us', json_agg(base_us), 'cv', json_agg(cv),"
    "          'lo', json_agg(lo), 'hi', json_agg(hi), 'noisy', json_agg(noisy), 'tries', json_agg(tries),"
    "          'worker', json_agg(worker), 't', json_agg(t), 'detail', json_agg(detail),"
    "          'conf', CASE WHEN bool_or(conf IS NOT NULL) THEN json_agg(conf) END)"
    "          FROM (SELECT x.k, array_position(c.targets, x.target) - 1 target,"
    "          " CODE(STATES, "x.state") " state, " CODE(VERDICTS, "x.verdict") " verdict,"
    "          " R4("x.speedup") " speedup, " R4("x.candidate_us") " cand_us, " R4("x.baseline_us") " base_us,"
    "          x.cv, x.lo, x.hi, x.noisy, x.attempts tries,"
    "          CASE WHEN x.w IS NOT NULL THEN dense_rank() OVER (ORDER BY x.w) - 1 END worker,"
    "          round((extract(epoch FROM COALESCE(x.f_at, x.created_at)) - c.t0)::numeric, 1) t,"
    "          CASE WHEN x.d IS NOT NULL THEN dense_rank() OVER (ORDER BY x.d) - 1 END detail, %s conf"
    "          FROM x ORDER BY x.k, x.target) y),"
    /* the attempts that were retried (the final ones are in res): with res,
     * the scatter of every attempt */
    " 'evs', (SELECT json_build_object('t', COALESCE(json_agg(t), '[]'), 'k', json_agg(k),"
    "          'target', json_agg(target), 'verdict', json_agg(verdict), 'speedup', json_agg(speedup),"
    "          'worker', json_agg(worker), 'detail', json_agg(detail)) FROM (SELECT"
    "          round((extract(epoch FROM e.created_at) - c.t0)::numeric, 1) t, e.candidate_id k,"
    "          array_position(c.targets, j.target) - 1 target, " CODE(VERDICTS, "e.verdict") " verdict,"
    "          " R4("e.speedup") " speedup, e.worker_id worker, left(e.detail, 120) detail"
    "          FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id"
    "          AND j.candidate_id >= $2::bigint AND j.candidate_id < $3::bigint"
    "          AND e.candidate_id >= $2::bigint AND e.candidate_id < $3::bigint"
    "          AND NOT e.is_final ORDER BY e.id) y)"
    ")::text FROM c";

/* $1 campaign id, $2 and $3 the range of candidate ids [$2, $3): one row
 * per candidate of the campaign in it, in id order: id, json.
 * %s: the job's and the evaluation's confirmation state (conf_columns()). */
static const char CANDIDATES_SQL[] =
    "SELECT k.id, json_build_object('id', k.id, 'campaign_id', k.campaign_id,"
    " 'parent_id', k.parent_id, 'parent_sha256', (SELECT sha256 FROM candidates WHERE id = k.parent_id),"
    " 'proposer', k.proposer, 'defines', k.defines, 'sha256', k.sha256, 'note', k.note,"
    " 'created_at', k.created_at, 'source', k.source,"
    " 'children', (SELECT json_agg(id ORDER BY id) FROM (SELECT id FROM candidates"
    "          WHERE parent_id = k.id ORDER BY id LIMIT 500) ch),"
    " 'results', (SELECT json_agg(json_build_object('target', j.target, 'state', j.state,"
    "          'attempts', j.attempts, 'worker', j.worker_id,"
    "          'conf', %s, 'purpose', {PURPOSE},"
    "          'evaluations', (SELECT json_agg(json_build_object('id', e.id, 'attempt', e.attempt,"
    "             'worker', e.worker_id, 'verdict', e.verdict, 'detail', e.detail, 'final', e.is_final,"
    "             'reported', e.reported, 'speedup', e.speedup, 'candidate_us', e.candidate_us,"
    "             'baseline_us', e.baseline_us, 't', e.created_at,"
    "             'conf', %s, 'conf_by', {CONF_BY},"
    "             'metrics', CASE WHEN e.is_final THEN e.metrics END,"
    "             'compile_log', left(e.compile_log, 65536)) ORDER BY e.id)"
    "             FROM evaluations e WHERE e.job_id = j.id)) ORDER BY j.target)"
    "          FROM jobs j WHERE j.candidate_id = k.id),"
    " 'proposal', (SELECT json_build_object('id', p.id, 'kind', p.kind, 'round', p.round,"
    "          'slot', p.slot, 'lineage', p.lineage, 'state', p.state, 'model', p.model,"
    "          'temperature', p.temperature, 'finish_reason', p.finish_reason, 'reason', p.reason,"
    "          'prompt_tokens', p.prompt_tokens, 'completion_tokens', p.completion_tokens,"
    "          'attempts', p.attempts, 'latency_s', p.latency_s, 'reviewer_note', p.reviewer_note,"
    "          'created_at', p.created_at, 'prompt', p.prompt, 'reply', p.reply)"
    "          FROM proposals p WHERE p.id = k.proposal_id)"
    ")::text FROM candidates k WHERE k.campaign_id = $1::bigint"
    " AND k.id >= $2::bigint AND k.id < $3::bigint ORDER BY k.id";

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
    " LEFT JOIN LATERAL (SELECT json_object_agg(state, n ORDER BY state) jobs FROM (SELECT state, count(*) n"
    "   FROM {JOBS} jobs WHERE campaign_id = c.id GROUP BY state) s) jb ON true"
    /* final verdicts and every attempt by verdict, in one pass (by
     * candidate: a smaller join than by job) */
    " LEFT JOIN LATERAL (SELECT json_object_agg(verdict, nf ORDER BY verdict) FILTER (WHERE nf > 0) verdicts,"
    "   json_object_agg(verdict, n ORDER BY verdict) FILTER (WHERE n > 0) attempts FROM (SELECT verdict,"
    "   sum(nf) nf, sum(n) n FROM (SELECT e.verdict, count(*) FILTER (WHERE e.is_final) nf, count(*) n"
    "   FROM evaluations e JOIN candidates k ON k.id = e.candidate_id WHERE k.campaign_id = c.id"
    "   GROUP BY e.verdict {VERIFY}) y GROUP BY verdict) x) v ON true"
    /* the best per target: from the top of the ok results by speedup
     * (evaluations_ok_speedup), or, with no speedup above 0, from all */
    " LEFT JOIN LATERAL (SELECT json_agg(b ORDER BY b.target) best FROM (SELECT z.tg target, x.*"
    "   FROM (SELECT DISTINCT tg FROM unnest(c.targets) tg) z,"
    "   LATERAL (SELECT * FROM ((SELECT e.candidate_id, e.speedup, e.candidate_us, e.baseline_us, e.worker_id"
    "     FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id AND j.target = z.tg"
    "     AND e.is_final AND e.verdict = 'ok' AND e.speedup > 0 ORDER BY e.speedup DESC, e.candidate_id LIMIT 1)"
    "    UNION ALL (SELECT e.candidate_id, e.speedup, e.candidate_us, e.baseline_us, e.worker_id"
    "     FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id AND j.target = z.tg"
    "     AND e.is_final AND e.verdict = 'ok' AND e.speedup IS NOT NULL ORDER BY e.speedup DESC, e.candidate_id"
    "     LIMIT 1)) u LIMIT 1) x) b) bb ON true"
    " ORDER BY c.id DESC";

/* The fleet, with each worker's throughput and failures over its evaluations. */
static const char WORKERS_SQL[] =
    "WITH ev AS (SELECT worker_id, count(*) n, count(*) FILTER (WHERE verdict = 'ok') ok,"
    "   count(*) FILTER (WHERE verdict = 'infra_error') infra,"
    "   count(*) FILTER (WHERE created_at >= now() - interval '1 hour') last_hour"
    "   FROM evaluations GROUP BY worker_id),"
    " vv AS (SELECT worker_id, json_object_agg(verdict, n) verdicts FROM (SELECT worker_id, verdict,"
    "   count(*) n FROM evaluations GROUP BY worker_id, verdict) x GROUP BY worker_id) "
    "SELECT COALESCE(json_agg(json_build_object('id', w.id, 'hostname', w.hostname,"
    " 'backend', w.backend, 'classes', w.classes, 'devices', w.devices, 'slots', w.slots,"
    " 'driver_version', w.driver_version, 'toolkit_version', w.toolkit_version,"
    " 'registered', w.registered, 'last_seen', w.last_seen,"
    " 'seen_s_ago', " EPOCH("now() - w.last_seen") ", 'quarantined', w.quarantined,"
    " 'offline', " EPOCH("now() - w.last_seen") " > $1::int, 'clock_skew_ms', to_jsonb(w)->'clock_skew_ms',"
    " 'quarantine_reason', COALESCE(to_jsonb(w)->'quarantine_reason', to_jsonb(w)->'quarantined_reason',"
    "     to_jsonb(w)->'reason'),"
    " 'infra_errors', w.infra_errors, 'jobs_done', w.jobs_done,"
    " 'evaluations', COALESCE(ev.n, 0), 'ok', COALESCE(ev.ok, 0), 'infra', COALESCE(ev.infra, 0),"
    " 'last_hour', COALESCE(ev.last_hour, 0), 'verdicts', vv.verdicts,"
    " 'leased', (SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state = 'leased'))"
    " ORDER BY w.id), '[]')::text, to_json(now())::text,"
    /* the next incremental export's start: a minute early, for transactions
     * that stamped their rows before this snapshot but committed after it */
    " (now() - interval '1 minute')::text"
    " FROM workers w LEFT JOIN ev ON ev.worker_id = w.id LEFT JOIN vv ON vv.worker_id = w.id";

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
    const char *run = json;
    int in_str = 0;
    for (const char *p = json;; p++) {
        const char *esc = NULL;
        switch (*p) {
        case '"': in_str = !in_str; continue;
        case '\\':
            if (in_str && p[1]) { /* an escape: copy both characters as they are, doubled */
                kf_strbuf_addn(b, run, (size_t)(p - run));
                kf_strbuf_add(b, "\\\\");
                if (p[1] == '\\') kf_strbuf_add(b, "\\\\");
                else if (p[1] == '\'') kf_strbuf_add(b, "\\'");
                else kf_strbuf_addn(b, p + 1, 1);
                p++;
                run = p + 1;
                continue;
            }
            esc = "\\\\";
            break;
        case '\'': esc = "\\'"; break;
        case '\n': esc = in_str ? "\\n" : ""; break;
        case '\r': esc = in_str ? "\\r" : ""; break;
        case ' ':
        case '\t':
            if (in_str) continue;
            esc = "";
            break;
        case '\0': break;
        default: continue;
        }
        kf_strbuf_addn(b, run, (size_t)(p - run));
        if (!*p) return;
        kf_strbuf_add(b, esc);
        run = p + 1;
    }
}

/* Write the data script dir/name: kfarmData("key", JSON.parse('json'));.
 * A JSON string parses several times faster than the same object literal
 * (V8, SpiderMonkey), which matters for a campaign file of 30 MB. */
static int write_data(const char *dir, const char *name, const char *key, const char *json,
                      char *err, size_t errlen)
{
    kf_strbuf b = { 0 };
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

/* The candidate files (kind 'b', sql CANDIDATES_SQL) or proposal files
 * (kind 'p', PROPOSALS_SQL) of campaign cid that the rows of sql (with its
 * parameters p) fall in. A file holds the rows of one bucket of ids
 * (KF_EXPORT_BUCKET): one file per candidate would cost more in file
 * creation than everything else (100,000 files take ~15 s on a small VM).
 * Rows come in libpq's single-row mode: memory stays bounded, and the
 * server builds the next rows while this process writes files. */
static int export_buckets(PGconn *conn, const char *sql, const char *const *p, int np, char kind,
                          const char *dir, const char *cid, char *err, size_t errlen)
{
    if (!PQsendQueryParams(conn, sql, np, NULL, p, NULL, NULL, 0) || !PQsetSingleRowMode(conn)) {
        snprintf(err, errlen, "%s of campaign %s: %s", kind == 'b' ? "candidates" : "proposals", cid,
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
            long kid = atol(PQgetvalue(r, 0, 0)), bk = kid / KF_EXPORT_BUCKET;
            if (cur >= 0 && bk != cur) rc = flush_bucket(dir, cid, kind, cur, &b, err, errlen);
            kf_strbuf_add(&b, b.len ? ",\n" : "{");
            kf_strbuf_printf(&b, "\"%ld\": ", kid);
            kf_strbuf_add(&b, PQgetvalue(r, 0, 1));
            cur = bk;
        } else if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK && rc == 0) {
            snprintf(err, errlen, "%s of campaign %s: %s", kind == 'b' ? "candidates" : "proposals", cid,
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

/* Settings of an export's transaction, on either connection: no JIT (its
 * compilation costs a second per large query and saves nothing here), and
 * sorting a chunk's rows in memory, not in temporary files. */
static const char *const EXPORT_SETTINGS[] = { "SET LOCAL work_mem = '64MB'", "SET LOCAL jit = off" };

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
    char kind;         /* 'r' chunk, 'b' candidate files, 'p' proposal files */
    int64_t cid;
    int64_t lo, hi;    /* 'r', 'b': the candidate ids [lo, hi) */
    const char *since; /* 'p': only the buckets changed since then (NULL: all) */
} export_task;

typedef struct {
    const char *dir, *chunk_sql, *cand_sql;
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
    snprintf(bucket, sizeof(bucket), "%d", KF_EXPORT_BUCKET);
    if (t->kind == 'p') {
        const char *p[3] = { cid, t->since, bucket };
        return export_buckets(conn, PROPOSALS_SQL, p, 3, 'p', pl->dir, cid, err, errlen);
    }
    const char *p[3] = { cid, lo, hi };
    if (t->kind == 'b') return export_buckets(conn, pl->cand_sql, p, 3, 'b', pl->dir, cid, err, errlen);
    long long n = (long long)(t->lo / KF_EXPORT_CHUNK);
    PGresult *r = PQexec(conn, "SET LOCAL enable_nestloop = off");
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        r = PQexecParams(conn, pl->chunk_sql, 3, NULL, p, NULL, NULL, 0);
        PQclear(PQexec(conn, "SET LOCAL enable_nestloop = on")); /* for the other statements */
    }
    int rc = -1;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        snprintf(err, errlen, "chunk %lld of campaign %s: %s", n, cid,
                 PQresultStatus(r) == PGRES_TUPLES_OK ? "no row" : PQresultErrorMessage(r));
        err[strcspn(err, "\n")] = 0;
    } else {
        char name[128], key[64];
        snprintf(name, sizeof(name), "data/c%s/r%lld.js", cid, n);
        snprintf(key, sizeof(key), "c%s/r%lld", cid, n);
        rc = write_data(pl->dir, name, key, PQgetvalue(r, 0, 0), err, errlen);
    }
    PQclear(r);
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
    char *text;
    char *view;
} export_campaign;

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
        if ((all || (k >= 0 && k < hi) || !file_exists(dir, name)) && add_task(pl, 'r', cid, lo, hi, NULL) < 0)
            return -1;
        if (all && add_task(pl, 'b', cid, lo, hi, NULL) < 0) return -1;
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
    char *csql = malloc(sizeof(CHUNK_SQL) + 256), *ksql = malloc(sizeof(CANDIDATES_SQL) + 256), *isql = NULL;
    if (!csql || !ksql) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* the confirmation state: the evaluation's column if there is one, else
     * the job's (read into the chunk's rows) */
    snprintf(csql, sizeof(CHUNK_SQL) + 256, CHUNK_SQL,
             strcmp(ev_f, "NULL") ? ev_f : strcmp(job, "NULL") ? job : "NULL::json", "x.conf");
    snprintf(ksql, sizeof(CANDIDATES_SQL) + 256, CANDIDATES_SQL, job, ev_e);
    int has_purpose, has_conf_by;
    trust_columns(db, &has_purpose, &has_conf_by);
    static const char *const names[] = { "{JOBS}", "{PURPOSE}", "{CONF_BY}", "{VERIFY}" };
    const char *values[] = { has_purpose ? "(SELECT * FROM jobs WHERE purpose = 'eval')" : "jobs",
                             has_purpose ? "j.purpose" : "'eval'",
                             has_conf_by ? "e.confirmed_by_worker" : "NULL",
                             has_purpose ? "UNION ALL SELECT e.verdict, -count(*) FILTER (WHERE e.is_final),"
                                           " -count(*) FROM jobs j JOIN evaluations e ON e.job_id = j.id"
                                           " WHERE j.purpose = 'verify' AND j.campaign_id = c.id"
                                           " GROUP BY e.verdict" : "" };
    char *t1 = sql_subst(csql, names, values, 4), *t2 = sql_subst(ksql, names, values, 4);
    isql = sql_subst(INDEX_SQL, names, values, 4);
    free(csql);
    free(ksql);
    csql = t1;
    ksql = t2;
    if (!csql || !ksql || !isql) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    pool.chunk_sql = csql;
    pool.cand_sql = ksql;
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
        if (!changed && exists) continue;
        if (mkdir_in(dir, sub, err, errlen) < 0) goto out;
        camp[ncamp++].row = i;
        if (plan_campaign(&pool, dir, strtoll(cid, NULL, 10), PQgetvalue(plan, i, 2), !since || !exists,
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
    free(csql);
    free(ksql);
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
