/*
 * export.c -- writes the static dashboard. See export.h.
 *
 * Files (each a script calling kfarmData(KEY, JSON.parse('...')), see export.h):
 *
 *   data/index.js            generated_at, campaigns[] (summaries only: the
 *                            list stays small whatever the campaign sizes),
 *                            workers[] with per-worker throughput and
 *                            failure counts
 *   data/c<ID>.js            one campaign: counts, best per target, and its
 *                            tables (cands, res, evs, props) as one array
 *                            per column
 *   data/c<ID>/b<KID/32>.js  32 candidates by id, each with its source,
 *                            parent's sha256, results with metrics, compile
 *                            logs, every attempt, and its model proposal's
 *                            prompt and reply
 *   data/c<ID>/p<PID/32>.js  the model proposals that made no candidate, with
 *                            their prompt and reply
 *
 * The JSON is built by PostgreSQL (json_build_object/json_build_array), so
 * it is always valid with correct escaping; all queries run in one
 * REPEATABLE READ transaction, so the index, campaign and candidate files of
 * one export agree; the campaign query runs on a second connection sharing
 * that snapshot (pg_export_snapshot) while this one streams the candidate
 * rows, so two server processes work at once. Candidate rows are streamed (libpq's single-row mode:
 * bounded memory for any campaign size). Columns another part of the system may add
 * (a result's confirmation state, a worker's quarantine reason) are read
 * through to_jsonb(row)->'name', which is NULL when the column is absent:
 * the export works on either schema.
 *
 * Incremental mode (the coordinator's periodic export): a campaign or
 * candidate file is rewritten only when something in it changed since the
 * previous export began (a candidate, job lease, evaluation or proposal
 * newer than that instant), or when the file is missing.
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

#define EPOCH(x) "round(extract(epoch FROM " x ")::numeric, 3)"
#define R4(x) "round((" x ")::numeric, 4)"

/* Verdict and job state names, in the order the campaign file numbers
 * them (a verdict missing here is written as its name). */
#define VERDICTS "'ok','compile_error','load_error','runtime_error','timeout','incorrect'," \
                 "'rejected_cheat','unsupported','infra_error'"
#define STATES "'queued','leased','done'"
#define CODE(list, x) "COALESCE(to_json(array_position(ARRAY[" list "], " x ") - 1), to_json(" x "))"

/* $1 campaign id. Times are seconds after t0 (the campaign's creation) to
 * keep 200,000 rows small; values that repeat (targets, verdicts, states,
 * details, workers, sets of defines) are numbers into lists in the file.
 * %s: the evaluation's confirmation state (in fin), then the result's (see
 * conf_columns()); {JOBS}: the jobs whose results count (trust_columns(),
 * sql_subst()). */
static const char CAMPAIGN_SQL[] =
    "WITH c AS (SELECT *, extract(epoch FROM created_at) t0 FROM campaigns WHERE id = $1::bigint),"
    /* the final evaluations, without their large columns (this CTE is
     * materialized: metrics and logs would be copied for nothing) */
    " fin AS (SELECT e.job_id, e.candidate_id, e.verdict, e.speedup, e.candidate_us, e.baseline_us,"
    "         e.worker_id, e.created_at, e.detail, j.target, %s AS conf, sh.cv, sh.lo, sh.hi,"
    "         CASE WHEN e.metrics->'timing'->'flags' ? 'noisy' THEN 1 ELSE 0 END noisy"
    "         FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id"
    "         LEFT JOIN LATERAL (SELECT " R4("max((s->'candidate'->>'cv')::float8)") " cv,"
    "            " R4("min((s->>'speedup')::float8)") " lo, " R4("max((s->>'speedup')::float8)") " hi"
    "            FROM jsonb_array_elements(CASE WHEN jsonb_typeof(e.metrics->'timing'->'shapes') = 'array'"
    "            THEN e.metrics->'timing'->'shapes' END) s) sh ON e.metrics IS NOT NULL"
    "         WHERE j.campaign_id = $1::bigint AND e.is_final),"
    " dd AS (SELECT d, row_number() OVER (ORDER BY d) - 1 i FROM (SELECT DISTINCT left(detail, 120) d"
    "         FROM fin WHERE detail IS NOT NULL) x),"
    " ww AS (SELECT w, row_number() OVER (ORDER BY w) - 1 i FROM (SELECT DISTINCT worker_id w"
    "         FROM fin WHERE worker_id IS NOT NULL) x),"
    " ds AS (SELECT d, row_number() OVER (ORDER BY d::text) - 1 i FROM (SELECT DISTINCT defines d"
    "         FROM candidates WHERE campaign_id = $1::bigint) x) "
    "SELECT json_build_object("
    " 'id', c.id, 'name', c.name, 'task', t.name, 'task_definition', t.spec->>'definition',"
    " 'strategy', c.strategy, 'state', c.state, 'targets', c.targets,"
    " 'max_candidates', c.max_candidates, 'strategy_state', c.strategy_state, 'config', c.config,"
    " 'created_at', c.created_at, 'started_at', c.started_at, 'finished_at', c.finished_at,"
    " 'generated_at', now(), 't0', c.t0,"
    " 'jobs', (SELECT json_object_agg(state, n) FROM (SELECT state, count(*) n FROM {JOBS} jobs"
    "          WHERE campaign_id = c.id GROUP BY state) s),"
    " 'verdicts', (SELECT json_object_agg(verdict, n) FROM (SELECT verdict, count(*) n FROM fin"
    "          GROUP BY verdict) v),"
    " 'attempts', (SELECT json_object_agg(verdict, n) FROM (SELECT e.verdict, count(*) n"
    "          FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id"
    "          GROUP BY e.verdict) v),"
    " 'best', (SELECT json_agg(b ORDER BY b.target) FROM (SELECT DISTINCT ON (target) target,"
    "          candidate_id, speedup, candidate_us, baseline_us, worker_id FROM fin"
    "          WHERE verdict = 'ok' AND speedup IS NOT NULL"
    "          ORDER BY target, speedup DESC, candidate_id) b),"
    " 'verdict_names', json_build_array(" VERDICTS "), 'state_names', json_build_array(" STATES "),"
    " 'details', (SELECT COALESCE(json_agg(d ORDER BY i), '[]') FROM dd),"
    " 'worker_names', (SELECT COALESCE(json_agg(w ORDER BY i), '[]') FROM ww),"
    " 'define_sets', (SELECT COALESCE(json_agg(d ORDER BY i), '[]') FROM ds),"
    /* tables as columns (one array per column, rows in order): parsing
     * 16 arrays is far cheaper for a browser than 200,000 small ones */
    " 'cands', (SELECT json_build_object('id', COALESCE(json_agg(id), '[]'), 'parent', json_agg(parent_id),"
    "          'proposer', json_agg(proposer), 'defines', json_agg(defines), 't', json_agg(t),"
    "          'round', json_agg(round), 'proposal', json_agg(proposal_id)) FROM (SELECT k.id, k.parent_id,"
    "          k.proposer, ds.i defines, round((extract(epoch FROM k.created_at) - c.t0)::numeric, 1) t,"
    "          p.round, k.proposal_id FROM candidates k LEFT JOIN proposals p ON p.id = k.proposal_id"
    "          LEFT JOIN ds ON ds.d = k.defines WHERE k.campaign_id = c.id ORDER BY k.id) x),"
    " 'res', (SELECT json_build_object('k', COALESCE(json_agg(k), '[]'), 'target', json_agg(target),"
    "          'state', json_agg(state), 'verdict', json_agg(verdict), 'speedup', json_agg(speedup),"
    "          'cand_us', json_agg(cand_us), 'base_us', json_agg(base_us), 'cv', json_agg(cv),"
    "          'lo', json_agg(lo), 'hi', json_agg(hi), 'noisy', json_agg(noisy), 'tries', json_agg(tries),"
    "          'worker', json_agg(worker), 't', json_agg(t), 'detail', json_agg(detail),"
    "          'conf', CASE WHEN bool_or(conf IS NOT NULL) THEN json_agg(conf) END)"
    "          FROM (SELECT j.candidate_id k, array_position(c.targets, j.target) - 1 target,"
    "          " CODE(STATES, "j.state") " state, " CODE(VERDICTS, "f.verdict") " verdict,"
    "          " R4("f.speedup") " speedup, " R4("f.candidate_us") " cand_us, " R4("f.baseline_us") " base_us,"
    "          f.cv, f.lo, f.hi, f.noisy,"
    "          j.attempts tries, ww.i worker,"
    "          round((extract(epoch FROM COALESCE(f.created_at, j.created_at)) - c.t0)::numeric, 1) t,"
    "          dd.i detail, %s conf"
    "          FROM {JOBS} j LEFT JOIN fin f ON f.job_id = j.id LEFT JOIN dd ON dd.d = left(f.detail, 120)"
    "          LEFT JOIN ww ON ww.w = f.worker_id"
    "          WHERE j.campaign_id = c.id ORDER BY j.candidate_id, j.target) x),"
    /* the attempts that were retried (the final ones are in res): with res,
     * the scatter of every attempt */
    " 'evs', (SELECT json_build_object('t', COALESCE(json_agg(t), '[]'), 'k', json_agg(k),"
    "          'target', json_agg(target), 'verdict', json_agg(verdict), 'speedup', json_agg(speedup),"
    "          'worker', json_agg(worker), 'detail', json_agg(detail)) FROM (SELECT"
    "          round((extract(epoch FROM e.created_at) - c.t0)::numeric, 1) t, e.candidate_id k,"
    "          array_position(c.targets, j.target) - 1 target, " CODE(VERDICTS, "e.verdict") " verdict,"
    "          " R4("e.speedup") " speedup, e.worker_id worker, left(e.detail, 120) detail"
    "          FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id"
    "          AND NOT e.is_final ORDER BY e.id) x),"
    /* model proposals without prompt and reply (in the candidate files) */
    " 'props', (SELECT json_build_object('id', COALESCE(json_agg(p.id), '[]'), 'round', json_agg(p.round),"
    "          'state', json_agg(p.state), 'model', json_agg(p.model), 'tokens_in', json_agg(p.prompt_tokens),"
    "          'tokens_out', json_agg(p.completion_tokens), 'finish', json_agg(p.finish_reason),"
    "          'candidate', json_agg(p.candidate_id), 'latency_s', json_agg(" R4("p.latency_s") "),"
    "          'reason', json_agg(left(p.reason, 300)),"
    "          't', json_agg(round((extract(epoch FROM p.created_at) - c.t0)::numeric, 1)))"
    "          FROM (SELECT * FROM proposals WHERE campaign_id = c.id ORDER BY id) p)"
    ")::text FROM c JOIN tasks t ON t.id = c.task_id";

/* $1 campaign id, $2 since (NULL: all), $3 bucket size: every candidate of
 * a bucket with a change. One row per candidate: id, json.
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
    ")::text FROM candidates k WHERE k.campaign_id = $1::bigint AND ($2::timestamptz IS NULL"
    " OR k.id / $3::int IN (SELECT k2.id / $3::int FROM candidates k2 WHERE k2.campaign_id = $1::bigint AND ("
    "   k2.created_at >= $2::timestamptz"
    "   OR EXISTS (SELECT 1 FROM jobs j WHERE j.candidate_id = k2.id AND (j.leased_at >= $2::timestamptz"
    "              OR j.finished_at >= $2::timestamptz OR j.created_at >= $2::timestamptz))"
    "   OR EXISTS (SELECT 1 FROM evaluations e WHERE e.candidate_id = k2.id AND e.created_at >= $2::timestamptz)"
    "   OR EXISTS (SELECT 1 FROM proposals p WHERE p.id = k2.proposal_id AND p.created_at >= $2::timestamptz))))"
    " ORDER BY k.id";

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

/* Summaries for the list: one row per campaign: id, changed since $1, json. */
static const char INDEX_SQL[] =
    "SELECT c.id, $1::timestamptz IS NULL OR c.updated_at >= $1::timestamptz"
    " OR EXISTS (SELECT 1 FROM candidates k WHERE k.campaign_id = c.id AND k.created_at >= $1::timestamptz)"
    " OR EXISTS (SELECT 1 FROM jobs j WHERE j.campaign_id = c.id AND (j.leased_at >= $1::timestamptz"
    "            OR j.finished_at >= $1::timestamptz OR j.created_at >= $1::timestamptz))"
    " OR EXISTS (SELECT 1 FROM proposals p WHERE p.campaign_id = c.id AND p.created_at >= $1::timestamptz)"
    " OR EXISTS (SELECT 1 FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = c.id"
    "            AND e.created_at >= $1::timestamptz),"
    " json_build_object('id', c.id, 'name', c.name, 'task', t.name, 'strategy', c.strategy,"
    " 'state', c.state, 'targets', c.targets, 'max_candidates', c.max_candidates,"
    " 'created_at', c.created_at, 'finished_at', c.finished_at,"
    " 'candidates', (SELECT count(*) FROM candidates k WHERE k.campaign_id = c.id),"
    " 'first_id', (SELECT min(id) FROM candidates k WHERE k.campaign_id = c.id),"
    " 'last_id', (SELECT max(id) FROM candidates k WHERE k.campaign_id = c.id),"
    " 'jobs', (SELECT json_object_agg(state, n) FROM (SELECT state, count(*) n FROM {JOBS} jobs"
    "          WHERE campaign_id = c.id GROUP BY state) s),"
    " 'verdicts', (SELECT json_object_agg(verdict, n) FROM (SELECT e.verdict, count(*) n"
    "          FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id WHERE j.campaign_id = c.id"
    "          AND e.is_final GROUP BY e.verdict) v),"
    " 'best', (SELECT json_agg(b ORDER BY b.target) FROM (SELECT DISTINCT ON (j.target) j.target,"
    "          e.candidate_id, e.speedup FROM evaluations e JOIN {JOBS} j ON j.id = e.job_id"
    "          WHERE j.campaign_id = c.id AND e.is_final AND e.verdict = 'ok' AND e.speedup IS NOT NULL"
    "          ORDER BY j.target, e.speedup DESC, e.candidate_id) b)"
    ")::text FROM campaigns c JOIN tasks t ON t.id = c.task_id ORDER BY c.id DESC";

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
 * (kind 'p', PROPOSALS_SQL) of campaign cid: all, or those with a row that
 * changed since since. A file holds the rows of one bucket of ids
 * (KF_EXPORT_BUCKET): one file per candidate would cost more in file
 * creation than everything else (100,000 files take ~15 s on a small VM).
 * Rows come in libpq's single-row mode: memory stays bounded, and the
 * server builds the next rows while this process writes files. */
static int export_buckets(kf_db *db, const char *sql, char kind, const char *dir, const char *cid,
                          const char *since, char *err, size_t errlen)
{
    char bucket[32], sub[64];
    snprintf(bucket, sizeof(bucket), "%d", KF_EXPORT_BUCKET);
    snprintf(sub, sizeof(sub), "data/c%s", cid);
    if (mkdir_in(dir, sub, err, errlen) < 0) return -1;
    const char *p[3] = { cid, since, bucket };
    PGconn *conn = kf_db_conn(db);
    if (!PQsendQueryParams(conn, sql, 3, NULL, p, NULL, NULL, 0) || !PQsetSingleRowMode(conn)) {
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

/* A second connection to the same database that sees the same snapshot as
 * db's open transaction: the campaign query runs on it while db streams the
 * candidate rows (two server processes, one snapshot). NULL when it cannot
 * be made: the caller then runs everything on db. */
static PGconn *open_twin(kf_db *db)
{
    PGconn *c1 = kf_db_conn(db);
    PQconninfoOption *opts = PQconninfo(c1);
    if (!opts) return NULL;
    const char *kw[64], *val[64];
    int n = 0;
    for (PQconninfoOption *o = opts; o->keyword && n < 63; o++) {
        if (!o->val || !*o->val) continue;
        kw[n] = o->keyword;
        val[n++] = o->val;
    }
    kw[n] = val[n] = NULL;
    PGconn *c2 = PQconnectdbParams(kw, val, 0);
    PQconninfoFree(opts);
    PGresult *snap = NULL, *r = NULL;
    int ok = PQstatus(c2) == CONNECTION_OK;
    if (ok) {
        snap = PQexec(c1, "SELECT pg_export_snapshot()");
        ok = PQresultStatus(snap) == PGRES_TUPLES_OK && PQntuples(snap) == 1;
    }
    if (ok) {
        r = PQexec(c2, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    if (ok) {
        const char *p[1] = { PQgetvalue(snap, 0, 0) };
        /* SET TRANSACTION SNAPSHOT takes no parameters: quote the id */
        char *q = PQescapeLiteral(c2, p[0], strlen(p[0]));
        char sql[256];
        snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT %s", q ? q : "''");
        PQfreemem(q);
        r = PQexec(c2, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    if (ok) {
        r = PQexec(c2, "SET LOCAL work_mem = '64MB'");
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
    }
    PQclear(snap);
    if (!ok) {
        PQfinish(c2);
        return NULL;
    }
    return c2;
}

/* Wait for the single-row result of a query sent on c; NULL with reason. */
static PGresult *twin_result(PGconn *c, char *err, size_t errlen)
{
    PGresult *r, *keep = NULL;
    while ((r = PQgetResult(c))) {
        if (!keep && PQresultStatus(r) == PGRES_TUPLES_OK) {
            keep = r;
            continue;
        }
        if (PQresultStatus(r) != PGRES_TUPLES_OK && err[0] == 0) {
            snprintf(err, errlen, "campaign: %s", PQresultErrorMessage(r));
            err[strcspn(err, "\n")] = 0;
        }
        PQclear(r);
    }
    return keep;
}

/* Export the data files; since NULL: all, else only what changed since then
 * (a timestamptz text). *now_out receives the database time the export's
 * snapshot was taken (malloc'ed). */
/* The campaign object text with "blockers", "bests" and "pause_reason"
 * added (malloc'ed), or NULL with reason. */
static char *with_operator_view(kf_db *db, int64_t cid, const char *text, char *err, size_t errlen)
{
    size_t n = strlen(text);
    if (n < 2 || text[n - 1] != '}') {
        snprintf(err, errlen, "campaign %lld: not a JSON object", (long long)cid);
        return NULL;
    }
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
        kf_strbuf_addn(&b, text, n - 1);
        kf_strbuf_add(&b, ", \"blockers\": ");
        kf_strbuf_add(&b, bls);
        kf_strbuf_add(&b, ", \"bests\": ");
        kf_strbuf_add(&b, bes);
        kf_strbuf_add(&b, ", \"pause_reason\": ");
        kf_strbuf_add(&b, PQgetvalue(r, 0, 0));
        kf_strbuf_add(&b, "}");
        free(bls);
        free(bes);
        if (b.oom || !bls || !bes) {
            free(b.s);
            snprintf(err, errlen, "out of memory");
        } else {
            out = b.s;
        }
    }
    if (r) PQclear(r);
    json_decref(bl);
    json_decref(be);
    return out;
}

static int export_data(kf_db *db, const char *dir, const char *since, char **now_out,
                       char *err, size_t errlen)
{
    if (mkdir_in(dir, "data", err, errlen) < 0) return -1;
    if (kf_db_cmd(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err, errlen) < 0)
        return -1;
    /* sorting 200,000 rows of a campaign in memory, not in temporary files */
    if (kf_db_cmd(db, "SET LOCAL work_mem = '64MB'", 0, NULL, err, errlen) < 0) {
        kf_db_rollback(db);
        return -1;
    }
    int rc = -1;
    PGresult *w = NULL, *idx = NULL;
    PGconn *twin = NULL;
    kf_strbuf b = { 0 };
    char ev_f[128], ev_e[128], job[128];
    conf_columns(db, ev_f, ev_e, job, sizeof(ev_f));
    char *csql = malloc(sizeof(CAMPAIGN_SQL) + 256), *ksql = malloc(sizeof(CANDIDATES_SQL) + 256), *isql = NULL;
    if (!csql || !ksql) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* the confirmation state: the evaluation's column if there is one (read
     * into fin), else the job's */
    snprintf(csql, sizeof(CAMPAIGN_SQL) + 256, CAMPAIGN_SQL, strcmp(ev_e, "NULL") ? ev_e : "NULL::json",
             strcmp(ev_e, "NULL") ? "f.conf" : job);
    snprintf(ksql, sizeof(CANDIDATES_SQL) + 256, CANDIDATES_SQL, job, ev_e);
    int has_purpose, has_conf_by;
    trust_columns(db, &has_purpose, &has_conf_by);
    static const char *const names[] = { "{JOBS}", "{PURPOSE}", "{CONF_BY}" };
    const char *values[] = { has_purpose ? "(SELECT * FROM jobs WHERE purpose = 'eval')" : "jobs",
                             has_purpose ? "j.purpose" : "'eval'",
                             has_conf_by ? "e.confirmed_by_worker" : "NULL" };
    char *t1 = sql_subst(csql, names, values, 3), *t2 = sql_subst(ksql, names, values, 3);
    isql = sql_subst(INDEX_SQL, names, values, 3);
    free(csql);
    free(ksql);
    csql = t1;
    ksql = t2;
    if (!csql || !ksql || !isql) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    char off[16];
    snprintf(off, sizeof(off), "%d", KF_QUEUE_OFFLINE_S); /* shown offline after this (queue.h) */
    const char *wp[1] = { off };
    if (!(w = kf_db_exec(db, WORKERS_SQL, 1, wp, err, errlen))) goto out;
    const char *p[1] = { since };
    if (!(idx = kf_db_exec(db, isql, 1, p, err, errlen))) goto out;
    twin = open_twin(db);
    for (int i = 0; i < PQntuples(idx); i++) {
        const char *cid = PQgetvalue(idx, i, 0);
        char name[128], key[64];
        snprintf(name, sizeof(name), "data/c%s.js", cid);
        snprintf(key, sizeof(key), "c%s", cid);
        int changed = PQgetvalue(idx, i, 1)[0] == 't';
        if (!changed && file_exists(dir, name)) continue;
        const char *cp[1] = { cid };
        /* the campaign file's query on the twin, while the buckets stream here */
        int sent = twin && PQsendQueryParams(twin, csql, 1, NULL, cp, NULL, NULL, 0);
        if (export_buckets(db, ksql, 'b', dir, cid, changed ? since : NULL, err, errlen) < 0 ||
            export_buckets(db, PROPOSALS_SQL, 'p', dir, cid, changed ? since : NULL, err, errlen) < 0) {
            if (sent) PQclear(twin_result(twin, err, 0));
            goto out;
        }
        err[0] = 0;
        PGresult *c = sent ? twin_result(twin, err, errlen) : kf_db_exec(db, csql, 1, cp, err, errlen);
        if (!c) {
            if (!err[0]) snprintf(err, errlen, "campaign %s: the database sent no result", cid);
            goto out;
        }
        int wr = 0;
        if (PQntuples(c) == 1) {
            /* the operator's view spliced in: why the campaign does not
             * progress (health.h) and its bests with noise and confirmation
             * (bests.h), as `kfarm campaign status` and `kfarm best` say */
            char *full = with_operator_view(db, strtoll(cid, NULL, 10), PQgetvalue(c, 0, 0), err, errlen);
            wr = full ? write_data(dir, name, key, full, err, errlen) : -1;
            free(full);
        }
        PQclear(c);
        if (wr < 0) goto out;
    }
    kf_strbuf_add(&b, "{\"generated_at\": ");
    kf_strbuf_add(&b, PQgetvalue(w, 0, 1));
    kf_strbuf_add(&b, ",\n\"workers\": ");
    kf_strbuf_add(&b, PQgetvalue(w, 0, 0));
    kf_strbuf_add(&b, ",\n\"campaigns\": [");
    for (int i = 0; i < PQntuples(idx); i++) {
        if (i) kf_strbuf_add(&b, ",\n");
        kf_strbuf_add(&b, PQgetvalue(idx, i, 2));
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
    if (twin) PQfinish(twin); /* its transaction ends with it */
    free(csql);
    free(ksql);
    free(isql);
    free(b.s);
    PQclear(w);
    PQclear(idx);
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
