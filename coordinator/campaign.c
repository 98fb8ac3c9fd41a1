/*
 * campaign.c -- campaign creation, state changes and progression.
 * See campaign.h.
 *
 * Task storage. Every regular, non-hidden file of the task directory is
 * stored in tasks.files ({name: content}); each must be UTF-8 text (PostgreSQL
 * text) and the total is capped so a GetJob reply stays far below the wire
 * limit. The task row is keyed by a SHA-256 over the canonical JSON of
 * {spec_text, files}: two campaigns on the same unchanged task share it.
 */
#include "campaign.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kf_task.h"
#include "kf_tune.h"
#include "kf_util.h"
#include "log.h"
#include "strategy.h"
#include "strategy_llm.h"

/* Read the task directory's files into a JSON object {name: content}. */
static json_t *read_task_files(const char *dir, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return NULL;
    }
    json_t *files = json_object();
    size_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) continue;
        size_t len = 0;
        char *text = kf_util_read_file(path, &len, KF_CAMPAIGN_MAX_FILE);
        if (!text) {
            snprintf(err, errlen, "%s: %s", path,
                     errno == EFBIG ? "file too large (limit 1 MiB)" : strerror(errno));
            goto fail;
        }
        if (!kf_db_utf8_valid(text, len)) {
            snprintf(err, errlen, "%s: not UTF-8 text (task files must be text)", path);
            free(text);
            goto fail;
        }
        total += len;
        if (total > KF_CAMPAIGN_MAX_TASK) {
            snprintf(err, errlen, "%s: task files exceed %u MiB together", dir,
                     KF_CAMPAIGN_MAX_TASK >> 20);
            free(text);
            goto fail;
        }
        json_object_set_new(files, e->d_name, json_stringn(text, len));
        free(text);
    }
    closedir(d);
    return files;
fail:
    closedir(d);
    json_decref(files);
    return NULL;
}

int kf_campaign_create(kf_db *db, const kf_campaign_spec *spec, int64_t *id,
                       char *err, size_t errlen)
{
    const char *strategy = spec->strategy ? spec->strategy : "tune";
    if (!spec->name || !*spec->name || strlen(spec->name) > 200) {
        snprintf(err, errlen, "campaign name must be 1..200 characters");
        return -1;
    }
    if (!kf_strategy_find(strategy)) {
        snprintf(err, errlen, "strategy '%s' is not implemented (available: tune, loop, beam, "
                 "parallel)", strategy);
        return -1;
    }
    if (strcmp(strategy, "tune") != 0 &&
        kf_strategy_llm_check_config(strategy, spec->config_json, err, errlen) < 0)
        return -1;
    kf_task t;
    char e2[1024];
    if (kf_task_load(spec->task_dir, &t, e2, sizeof(e2)) < 0) {
        snprintf(err, errlen, "invalid task: %s", e2);
        return -1;
    }
    char backend[8], task_name[128], seed_file[128];
    snprintf(backend, sizeof(backend), "%s", t.backend);
    snprintf(task_name, sizeof(task_name), "%s", t.name);
    snprintf(seed_file, sizeof(seed_file), "%s", t.seed);
    kf_task_free(&t);

    int rc = -1;
    json_t *files = NULL, *canon = NULL;
    char *spec_text = NULL, *seed = NULL, *files_text = NULL, *canon_text = NULL, *targets = NULL;
    char path[4096];
    snprintf(path, sizeof(path), "%s/task.json", spec->task_dir);
    if (!(spec_text = kf_util_read_file(path, NULL, KF_CAMPAIGN_MAX_FILE))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!(files = read_task_files(spec->task_dir, err, errlen))) goto out;

    /* The seed candidate. */
    if (spec->seed_path) snprintf(path, sizeof(path), "%s", spec->seed_path);
    else if (seed_file[0]) snprintf(path, sizeof(path), "%s/%s", spec->task_dir, seed_file);
    else {
        snprintf(err, errlen, "task %s names no seed file: pass --seed FILE", task_name);
        goto out;
    }
    size_t seed_len = 0;
    if (!(seed = kf_util_read_file(path, &seed_len, KF_CAMPAIGN_MAX_FILE))) {
        snprintf(err, errlen, "seed %s: %s", path, strerror(errno));
        goto out;
    }
    if (!kf_db_utf8_valid(seed, seed_len)) {
        snprintf(err, errlen, "seed %s: not UTF-8 text", path);
        goto out;
    }
    kf_tunable tun[KF_TUNE_MAX];
    int ntun = 0;
    if (kf_tune_parse(seed, tun, KF_TUNE_MAX, &ntun, e2, sizeof(e2)) < 0) {
        snprintf(err, errlen, "seed %s: %s", path, e2);
        goto out;
    }

    /* Targets: default cpu for cpu tasks. */
    const char *tg[KF_CAMPAIGN_MAX_TARGETS];
    int ntg = spec->n_targets;
    for (int i = 0; i < ntg; i++) tg[i] = spec->targets[i];
    if (ntg == 0) {
        if (strcmp(backend, "cpu") != 0) {
            snprintf(err, errlen, "task %s is a %s task: name the GPU classes with --target "
                     "(e.g. --target sm_90)", task_name, backend);
            goto out;
        }
        tg[ntg++] = "cpu";
    }
    for (int i = 0; i < ntg; i++) {
        if (!*tg[i] || strlen(tg[i]) > 100) {
            snprintf(err, errlen, "target class '%s' must be 1..100 characters", tg[i]);
            goto out;
        }
        /* Lists print classes joined by ',': "cpu,sm_90" would be one class
         * no worker serves, and its jobs would wait forever. */
        if (strchr(tg[i], ',')) {
            snprintf(err, errlen, "target class '%s' holds a ',': give each class its own --target",
                     tg[i]);
            goto out;
        }
        /* one evaluation job per candidate and target: a class named twice
         * would mean the same job twice */
        for (int k = 0; k < i; k++)
            if (!strcmp(tg[k], tg[i])) {
                snprintf(err, errlen, "target class '%s' is named twice", tg[i]);
                goto out;
            }
        /* The obvious backend mismatches: a cpu task on a GPU class or the
         * other way round would only produce `unsupported` verdicts. */
        int cpu_class = strcmp(tg[i], "cpu") == 0, sm_class = strncmp(tg[i], "sm_", 3) == 0;
        if ((strcmp(backend, "cpu") == 0 && sm_class) || (strcmp(backend, "cuda") == 0 && cpu_class)) {
            snprintf(err, errlen, "task %s is a %s task: target class '%s' cannot run it",
                     task_name, backend, tg[i]);
            goto out;
        }
    }
    if (!(targets = kf_db_text_array(tg, ntg))) goto oom;

    canon = json_pack("{s:s, s:O}", "spec_text", spec_text, "files", files);
    if (!canon || !(canon_text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS)) ||
        !(files_text = json_dumps(files, JSON_COMPACT)))
        goto oom;
    char task_sha[65], seed_sha[65];
    kf_util_sha256_hex(canon_text, strlen(canon_text), task_sha);
    kf_util_sha256_hex(seed, seed_len, seed_sha);

    if (kf_db_begin(db, err, errlen) < 0) goto out;
    const char *pt[4] = { task_name, spec_text, files_text, task_sha };
    PGresult *r = kf_db_exec(db,
        "INSERT INTO tasks (name, spec, spec_text, files, sha256) "
        "VALUES ($1, $2::jsonb, $2, $3::jsonb, $4) "
        "ON CONFLICT (sha256) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        4, pt, err, errlen);
    if (!r) goto fail;
    char task_id[24];
    snprintf(task_id, sizeof(task_id), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);

    char maxc[24], maxa[24], share[32];
    snprintf(maxc, sizeof(maxc), "%ld", spec->max_candidates);
    snprintf(maxa, sizeof(maxa), "%d", spec->max_attempts > 0 ? spec->max_attempts : 3);
    snprintf(share, sizeof(share), "%.17g", spec->share > 0 ? spec->share : 1.0);
    const char *pc[8] = { spec->name, task_id, strategy, spec->config_json ? spec->config_json : "{}",
                          targets, spec->max_candidates > 0 ? maxc : NULL, maxa, share };
    r = kf_db_exec(db,
        "INSERT INTO campaigns (name, task_id, strategy, config, targets, max_candidates,"
        "  max_attempts, share) VALUES ($1, $2::bigint, $3, $4::jsonb, $5::text[], $6::int, $7::int,"
        "  $8::float8) RETURNING id", 8, pc, err, errlen);
    if (!r) {
        if (strcmp(kf_db_last_sqlstate(db), "23505") == 0)
            snprintf(err, errlen, "campaign '%s' already exists", spec->name);
        goto fail;
    }
    char cid[24];
    snprintf(cid, sizeof(cid), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    const char *ps[3] = { cid, seed, seed_sha };
    if (kf_db_cmd(db,
            "INSERT INTO candidates (campaign_id, source, sha256, proposer) "
            "VALUES ($1::bigint, $2, $3, 'seed')", 3, ps, err, errlen) < 0)
        goto fail;
    if (kf_db_commit(db, err, errlen) < 0) goto fail;
    if (id) *id = strtoll(cid, NULL, 10);
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "out of memory");
    goto out;
fail:
    kf_db_rollback(db);
out:
    json_decref(files);
    json_decref(canon);
    free(spec_text);
    free(seed);
    free(files_text);
    free(canon_text);
    free(targets);
    return rc;
}

int kf_campaign_lookup(kf_db *db, const char *name, int64_t *id, char state[16],
                       char *err, size_t errlen)
{
    const char *p[1] = { name };
    PGresult *r = kf_db_exec(db, "SELECT id, state FROM campaigns WHERE name = $1", 1, p,
                             err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "no campaign '%s'", name);
        return 1;
    }
    if (id) *id = kf_db_i64(r, 0, 0, 0);
    if (state) snprintf(state, 16, "%s", PQgetvalue(r, 0, 1));
    PQclear(r);
    return 0;
}

/* Move name from one of the states in `from` (a text[] literal) to `to`. */
static int set_state(kf_db *db, const char *name, const char *from, const char *to,
                     char *err, size_t errlen)
{
    char state[16];
    if (kf_campaign_lookup(db, name, NULL, state, err, errlen) != 0) return -1;
    if (strcmp(state, to) == 0) return 0;
    const char *p[3] = { name, from, to };
    PGresult *r = kf_db_exec(db,
        "UPDATE campaigns SET state = $3, updated_at = now(),"
        "  started_at = CASE WHEN $3 = 'running' THEN COALESCE(started_at, now()) ELSE started_at END,"
        "  pause_reason = NULL "
        "WHERE name = $1 AND state = ANY($2::text[]) RETURNING id", 3, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 0) {
        snprintf(err, errlen, "campaign '%s' is %s: cannot make it %s", name, state, to);
        return -1;
    }
    return 0;
}

int kf_campaign_start(kf_db *db, const char *name, char *err, size_t errlen)
{
    return set_state(db, name, "{created,paused}", "running", err, errlen);
}

int kf_campaign_pause(kf_db *db, const char *name, char *err, size_t errlen)
{
    return set_state(db, name, "{running}", "paused", err, errlen);
}

int kf_campaign_extend(kf_db *db, const char *name, const kf_campaign_budget *b, char *err,
                       size_t errlen)
{
    char mc[24], mr[24], mh[32], mt[24];
    snprintf(mc, sizeof(mc), "%ld", b->max_candidates);
    snprintf(mr, sizeof(mr), "%ld", b->max_rounds);
    snprintf(mh, sizeof(mh), "%.17g", b->max_hours);
    snprintf(mt, sizeof(mt), "%ld", b->max_tokens);
    const char *p[5] = { name, b->max_candidates > 0 ? mc : NULL, b->max_rounds > 0 ? mr : NULL,
                         b->max_hours > 0 ? mh : NULL, b->max_tokens > 0 ? mt : NULL };
    /* Budgets only grow; the strategy forgets that it stopped (tune: it
     * expands again, adding the variants of the larger even sample not yet
     * tried; LLM strategies: new rounds, plateau counted afresh) and a done
     * campaign runs again. */
    PGresult *r = kf_db_exec(db,
        "UPDATE campaigns SET"
        "  max_candidates = CASE WHEN $2::bigint IS NULL THEN max_candidates"
        "    ELSE GREATEST(COALESCE(max_candidates, 0), $2::bigint) END,"
        "  config = config"
        "    || CASE WHEN $3::bigint IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('max_rounds',"
        "         GREATEST(COALESCE((config->>'max_rounds')::numeric, 0), $3::bigint)) END"
        "    || CASE WHEN $4::float8 IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('max_hours',"
        "         GREATEST(COALESCE((config->>'max_hours')::numeric, 0), $4::float8::numeric)) END"
        "    || CASE WHEN $5::bigint IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('max_tokens',"
        "         GREATEST(COALESCE((config->>'max_tokens')::numeric, 0), $5::bigint)) END,"
        "  strategy_state = (strategy_state - 'stopped' - 'expanded')"
        "    || CASE WHEN strategy_state ? 'plateau' THEN '{\"plateau\": 0}'::jsonb ELSE '{}'::jsonb END,"
        "  state = CASE WHEN state = 'done' THEN 'running' ELSE state END,"
        "  finished_at = NULL, updated_at = now() "
        "WHERE name = $1 RETURNING state", 5, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 0) {
        snprintf(err, errlen, "no campaign '%s'", name);
        return -1;
    }
    return 0;
}

int kf_campaign_set_share(kf_db *db, const char *name, double share, char *err, size_t errlen)
{
    if (!(share > 0) || share > 1e6) {
        snprintf(err, errlen, "share: expected a number > 0");
        return -1;
    }
    char sh[32];
    snprintf(sh, sizeof(sh), "%.17g", share);
    const char *p[2] = { name, sh };
    PGresult *r = kf_db_exec(db, "UPDATE campaigns SET share = $2::float8, updated_at = now() "
                                 "WHERE name = $1 RETURNING id", 2, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 0) {
        snprintf(err, errlen, "no campaign '%s'", name);
        return -1;
    }
    return 0;
}

int kf_campaign_delete(kf_db *db, const char *name, char *err, size_t errlen)
{
    char state[16];
    if (kf_campaign_lookup(db, name, NULL, state, err, errlen) != 0) return -1;
    if (!strcmp(state, "running")) {
        snprintf(err, errlen, "campaign '%s' is running: pause it first (kfarm campaign pause %s)",
                 name, name);
        return -1;
    }
    const char *p[1] = { name };
    /* Under the campaign row's lock (a `campaign start` waits, then finds
     * it gone): its jobs in one statement (their keys: the trigger of
     * job_keys deletes the jobs, theirs the evaluations), then the
     * campaign; candidates, proposals, hints and documents go with it (ON
     * DELETE CASCADE). The task stays (other campaigns may use it). */
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    PGresult *r = kf_db_exec(db, "SELECT id FROM campaigns WHERE name = $1 AND state <> 'running' FOR UPDATE",
                             1, p, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) != 1) {
        PQclear(r);
        snprintf(err, errlen, "campaign '%s' is running: pause it first (kfarm campaign pause %s)", name, name);
        goto fail;
    }
    char id[24];
    snprintf(id, sizeof(id), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    const char *pi[1] = { id };
    if (kf_db_cmd(db, "DELETE FROM job_keys WHERE campaign_id = $1::bigint", 1, pi, err, errlen) < 0 ||
        kf_db_cmd(db, "DELETE FROM campaigns WHERE id = $1::bigint", 1, pi, err, errlen) < 0 ||
        kf_db_commit(db, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    kf_db_rollback(db);
    return -1;
}

int kf_campaign_step(kf_db *db, int64_t campaign_id, int *done, char *err, size_t errlen)
{
    if (done) *done = 0;
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)campaign_id);
    const char *p[1] = { id };
    PGresult *r = kf_db_exec(db, "SELECT strategy, name FROM campaigns WHERE id = $1::bigint "
                                 "AND state = 'running'", 1, p, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return 0;
    }
    const kf_strategy *s = kf_strategy_find(PQgetvalue(r, 0, 0));
    char name[256];
    snprintf(name, sizeof(name), "%s", PQgetvalue(r, 0, 1));
    if (!s) {
        snprintf(err, errlen, "campaign %s: strategy '%s' not implemented", name,
                 PQgetvalue(r, 0, 0));
        PQclear(r);
        return -1;
    }
    PQclear(r);
    int finished = 0;
    if (s->step(db, campaign_id, &finished, err, errlen) < 0) return -1;
    if (!finished) return 0;
    r = kf_db_exec(db,
        "UPDATE campaigns SET state = 'done', finished_at = now(), updated_at = now() "
        "WHERE id = $1::bigint AND state = 'running' "
        /* queued and leased jobs by their partial indexes (jobs_queued,
         * jobs_leased): no index of jobs reads a campaign's jobs whatever
         * their state (schema/015_job_keys.sql) */
        "  AND NOT EXISTS (SELECT 1 FROM jobs WHERE campaign_id = $1::bigint AND state = 'queued') "
        "  AND NOT EXISTS (SELECT 1 FROM jobs WHERE campaign_id = $1::bigint AND state = 'leased') "
        "RETURNING id", 1, p, err, errlen);
    if (!r) return -1;
    int fin = PQntuples(r) == 1;
    PQclear(r);
    if (fin) {
        kf_log("campaign %s: done", name);
        if (done) *done = 1;
    }
    return 0;
}

int kf_campaign_tick(kf_db *db, char *err, size_t errlen)
{
    PGresult *r = kf_db_exec(db, "SELECT id FROM campaigns WHERE state = 'running' ORDER BY id",
                             0, NULL, err, errlen);
    if (!r) return -1;
    for (int i = 0; i < PQntuples(r); i++) {
        char e2[512];
        if (kf_campaign_step(db, kf_db_i64(r, i, 0, 0), NULL, e2, sizeof(e2)) < 0)
            kf_log("campaign %s: step failed: %s", PQgetvalue(r, i, 0), e2);
    }
    PQclear(r);
    return 0;
}

int kf_campaign_compact_counts(kf_db *db, long *folded, char *err, size_t errlen)
{
    PGresult *r = kf_db_exec(db, "SELECT kf_compact_counts()", 0, NULL, err, errlen);
    if (!r) return -1;
    if (folded) *folded = (long)kf_db_i64(r, 0, 0, 0);
    PQclear(r);
    return 0;
}
