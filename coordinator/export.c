/*
 * export.c -- writes the static dashboard. See export.h.
 *
 * data.js layout (window.KFARM_DATA):
 *   generated_at, campaigns[], workers[]
 *   campaign: id, name, task, task_definition, strategy, state, targets,
 *     max_candidates, strategy_state, created_at/started_at/finished_at,
 *     jobs {state: n}, verdicts {verdict: n} (final), attempts {verdict: n}
 *     (every evaluation), best [{target, candidate_id, speedup, speedup_lo,
 *     speedup_hi, cv, ...}], pause_reason, blockers [{kind, text}] (health.h),
 *     bests {targets, overall, not_everywhere} (bests.h),
 *     timeline [{t, target, speedup, candidate_id}] (ok results in time order),
 *     candidates [{id, parent_id, proposer, defines, sha256, created_at,
 *       results [{target, state, attempts, verdict, detail, speedup, speedup_lo,
 *       speedup_hi, cv,
 *       candidate_us, baseline_us, worker, metrics, compile_log, history}]}],
 *     sources {sha256: source}
 */
#include "export.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bests.h"
#include "health.h"
#include "kf_util.h"
#include "log.h"
#include "queue.h"

#define KF_STR2(x) #x
#define KF_STR(x) KF_STR2(x)
#define KF_OFFLINE_SQL KF_STR(KF_QUEUE_OFFLINE_S)

static const char CAMPAIGN_SQL[] =
    "WITH c AS (SELECT * FROM campaigns WHERE id = $1::bigint),"
    " fin AS (SELECT e.*, j.target FROM evaluations e JOIN jobs j ON j.id = e.job_id"
    "         WHERE j.campaign_id = $1::bigint AND j.purpose = 'eval' AND e.is_final) "
    "SELECT json_build_object("
    " 'id', c.id, 'name', c.name, 'task', t.name, 'task_definition', t.spec->>'definition',"
    " 'strategy', c.strategy, 'state', c.state, 'pause_reason', c.pause_reason, 'targets', c.targets,"
    " 'max_candidates', c.max_candidates, 'strategy_state', c.strategy_state,"
    " 'created_at', c.created_at, 'started_at', c.started_at, 'finished_at', c.finished_at,"
    " 'jobs', (SELECT json_object_agg(state, n) FROM (SELECT state, count(*) n FROM jobs"
    "          WHERE campaign_id = c.id GROUP BY state) s),"
    " 'verdicts', (SELECT json_object_agg(verdict, n) FROM (SELECT verdict, count(*) n FROM fin"
    "          GROUP BY verdict) v),"
    " 'attempts', (SELECT json_object_agg(verdict, n) FROM (SELECT e.verdict, count(*) n"
    "          FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = c.id"
    "          GROUP BY e.verdict) v),"
    " 'best', (SELECT json_agg(b ORDER BY b.target) FROM (SELECT DISTINCT ON (target) target,"
    "          candidate_id, speedup, speedup_lo, speedup_hi, cv, candidate_us, baseline_us,"
    "          worker_id, confirmation, confirmed_by_worker FROM fin"
    "          WHERE verdict = 'ok' AND speedup IS NOT NULL AND confirmation <> 'disputed'"
    "          ORDER BY target, confirmation = 'confirmed' DESC, speedup DESC, candidate_id) b),"
    " 'timeline', (SELECT json_agg(json_build_object('t', created_at, 'target', target,"
    "          'speedup', speedup, 'candidate_id', candidate_id) ORDER BY created_at, id)"
    "          FROM fin WHERE verdict = 'ok' AND speedup IS NOT NULL),"
    " 'candidates', (SELECT json_agg(json_build_object('id', k.id, 'parent_id', k.parent_id,"
    "          'proposer', k.proposer, 'defines', k.defines, 'sha256', k.sha256,"
    "          'created_at', k.created_at, 'note', k.note, 'proposal_id', k.proposal_id,"
    "          'results', (SELECT json_agg(json_build_object('target', j.target,"
    "             'state', j.state, 'attempts', j.attempts, 'verdict', f.verdict,"
    "             'detail', f.detail, 'speedup', f.speedup, 'speedup_lo', f.speedup_lo,"
    "             'speedup_hi', f.speedup_hi, 'cv', f.cv, 'candidate_us', f.candidate_us,"
    "             'baseline_us', f.baseline_us, 'worker', f.worker_id, 'metrics', f.metrics,"
    "             'confirmation', f.confirmation, 'confirmed_by', f.confirmed_by_worker,"
    "             'confirmation_detail', f.confirmation_detail,"
    "             'compile_log', left(f.compile_log, 8000),"
    "             'history', (SELECT json_agg(json_build_object('attempt', e.attempt,"
    "                'worker', e.worker_id, 'verdict', e.verdict, 'detail', e.detail,"
    "                't', e.created_at) ORDER BY e.id)"
    "                FROM evaluations e WHERE e.job_id = j.id AND NOT e.is_final))"
    "             ORDER BY j.target)"
    "             FROM jobs j LEFT JOIN fin f ON f.job_id = j.id WHERE j.candidate_id = k.id"
    "               AND j.purpose = 'eval'))"
    "          ORDER BY k.id) FROM candidates k WHERE k.campaign_id = c.id),"
    " 'sources', (SELECT json_object_agg(sha256, source) FROM (SELECT DISTINCT ON (sha256)"
    "          sha256, source FROM candidates WHERE campaign_id = c.id) s),"
    /* Model proposals: why the model did what it did, and the ones that
     * produced no candidate (no code, cut off, endpoint errors). Prompts and
     * replies are cut at 20000 characters; `kfarm review show --prompt` has
     * them whole. */
    " 'proposals', (SELECT json_agg(json_build_object('id', p.id, 'kind', p.kind,"
    "          'round', p.round, 'slot', p.slot, 'lineage', p.lineage, 'parent_id', p.parent_id,"
    "          'state', p.state, 'model', p.model, 'temperature', p.temperature,"
    "          'finish_reason', p.finish_reason, 'reason', p.reason,"
    "          'prompt_tokens', p.prompt_tokens, 'completion_tokens', p.completion_tokens,"
    "          'attempts', p.attempts, 'latency_s', p.latency_s, 'candidate_id', p.candidate_id,"
    "          'reviewer_note', p.reviewer_note, 'created_at', p.created_at,"
    "          'prompt', left(p.prompt, 20000), 'reply', left(p.reply, 20000)) ORDER BY p.id)"
    "          FROM proposals p WHERE p.campaign_id = c.id)"
    ")::text FROM c JOIN tasks t ON t.id = c.task_id";

static const char WORKERS_SQL[] =
    "SELECT COALESCE(json_agg(json_build_object('id', id, 'hostname', hostname,"
    " 'backend', backend, 'classes', classes, 'devices', devices,"
    " 'driver_version', driver_version, 'toolkit_version', toolkit_version,"
    " 'registered', registered, 'last_seen', last_seen, 'quarantined', quarantined,"
    " 'infra_errors', infra_errors, 'jobs_done', jobs_done,"
    " 'quarantine_reason', quarantine_reason, 'clock_skew_ms', clock_skew_ms,"
    " 'offline', last_seen < now() - " KF_OFFLINE_SQL " * interval '1 second',"
    " 'leased', (SELECT count(*) FROM jobs j WHERE j.worker_id = w.id AND j.state = 'leased'))"
    " ORDER BY id), '[]')::text, to_json(now())::text FROM workers w";

char *kf_export_data_js(kf_db *db, char *err, size_t errlen)
{
    kf_strbuf b = { 0 };
    PGresult *w = kf_db_exec(db, WORKERS_SQL, 0, NULL, err, errlen);
    if (!w) return NULL;
    PGresult *ids = kf_db_exec(db, "SELECT id FROM campaigns ORDER BY id DESC", 0, NULL, err,
                               errlen);
    if (!ids) {
        PQclear(w);
        return NULL;
    }
    kf_strbuf_add(&b, "window.KFARM_DATA = {\"generated_at\": ");
    kf_strbuf_add(&b, PQgetvalue(w, 0, 1));
    kf_strbuf_add(&b, ",\n\"workers\": ");
    kf_strbuf_add(&b, PQgetvalue(w, 0, 0));
    kf_strbuf_add(&b, ",\n\"campaigns\": [");
    for (int i = 0; i < PQntuples(ids); i++) {
        const char *p[1] = { PQgetvalue(ids, i, 0) };
        PGresult *c = kf_db_exec(db, CAMPAIGN_SQL, 1, p, err, errlen);
        if (!c) {
            PQclear(w);
            PQclear(ids);
            free(b.s);
            return NULL;
        }
        if (PQntuples(c) == 1) {
            /* the operator's view (health.h, bests.h) spliced into the
             * object: the campaign text itself is never re-parsed */
            int64_t cid = strtoll(p[0], NULL, 10);
            json_t *bl = kf_health_blockers(db, cid, NULL, err, errlen);
            json_t *be = bl ? kf_bests(db, cid, err, errlen) : NULL;
            char *bls = bl ? json_dumps(bl, JSON_COMPACT) : NULL;
            char *bes = be ? json_dumps(be, JSON_COMPACT) : NULL;
            json_decref(bl);
            json_decref(be);
            const char *text = PQgetvalue(c, 0, 0);
            size_t n = strlen(text);
            if (!bls || !bes || n < 2 || text[n - 1] != '}') {
                free(bls);
                free(bes);
                PQclear(c);
                PQclear(w);
                PQclear(ids);
                free(b.s);
                if (!bl || !be) return NULL;
                snprintf(err, errlen, "out of memory");
                return NULL;
            }
            if (i) kf_strbuf_add(&b, ",\n");
            kf_strbuf_addn(&b, text, n - 1);
            kf_strbuf_add(&b, ", \"blockers\": ");
            kf_strbuf_add(&b, bls);
            kf_strbuf_add(&b, ", \"bests\": ");
            kf_strbuf_add(&b, bes);
            kf_strbuf_add(&b, "}");
            free(bls);
            free(bes);
        }
        PQclear(c);
    }
    kf_strbuf_add(&b, "]};\n");
    PQclear(w);
    PQclear(ids);
    if (b.oom) {
        free(b.s);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return b.s;
}

/* Write data to dir/name via a temporary file and rename. */
static int write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        char *err, size_t errlen)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (kf_util_write_file(tmp, data, len) < 0 || rename(tmp, path) < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int kf_export_site(kf_db *db, const char *dir, char *err, size_t errlen)
{
    if (kf_util_mkdirs(dir) < 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char *js = kf_export_data_js(db, err, errlen);
    if (!js) return -1;
    int rc = write_atomic(dir, "data.js", js, strlen(js), err, errlen);
    free(js);
    if (rc < 0) return -1;
    kf_embedded_file f[KF_DB_MAX_EMBEDDED];
    int n = kf_db_embedded_dashboard(f, KF_DB_MAX_EMBEDDED);
    const char *over = getenv("KFARM_DASHBOARD_DIR");
    for (int i = 0; i < n && i < KF_DB_MAX_EMBEDDED; i++) {
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
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int stopping = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (kf_db_ensure(s->db, err, sizeof(err)) < 0 || kf_export_site(s->db, s->dir, err, sizeof(err)) < 0)
            kf_log("export: %s", err);
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
