/*
 * strategy_tune.c -- the `tune` strategy: a parameter sweep, no LLM.
 *
 * Design. On the first step of a running campaign, under the campaign's row
 * lock (SELECT ... FOR UPDATE) and in one transaction:
 *   1. read the seed candidate (proposer 'seed', lowest id) and parse its
 *      `// kfarm:tune` declarations (common/kf_tune.h);
 *   2. pick the variants: all of them, or when there are more than
 *      max_candidates, an even sample (variant floor(k * count / budget) for
 *      k = 0 .. budget-1), which is deterministic and covers every
 *      declaration, not just the fastest-varying one;
 *   3. insert one candidate per variant (source = the seed's, defines =
 *      {NAME: value}, parent = the seed, proposer 'tune') ON CONFLICT DO
 *      NOTHING, and one job per candidate per target where it has none
 *      (KF_NO_JOB_KEY: job_keys, schema 015);
 *      a seed without tunables gets its own jobs instead;
 *   4. record {"expanded": true, "variants": N} in strategy_state.
 * A coordinator killed before COMMIT leaves nothing; one killed after leaves
 * the expansion complete. Running the step again is a no-op either way.
 */
#include "strategy.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kf_tune.h"
#include "log.h"

char *kf_strategy_tune_variants_json(const kf_tunable *t, int n, long take)
{
    long count = kf_tune_count(t, n);
    if (take > count) take = count;
    json_t *arr = json_array();
    if (!arr) return NULL;
    for (long k = 0; k < take; k++) {
        long i = take == count ? k : (long)((__int128)k * count / take);
        const char *vals[KF_TUNE_MAX];
        kf_tune_variant(t, n, i, vals);
        json_t *o = json_object();
        for (int d = 0; d < n; d++) json_object_set_new(o, t[d].name, json_string(vals[d]));
        json_array_append_new(arr, o);
    }
    char *s = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return s;
}

/* Build the JSON array of defines objects for the selected variants. */
static char *variants_json(const kf_tunable *t, int n, long count, long budget)
{
    return kf_strategy_tune_variants_json(t, n, count < budget ? count : budget);
}

static int tune_step(kf_db *db, int64_t campaign_id, int *finished, char *err, size_t errlen)
{
    *finished = 0;
    char id[24];
    snprintf(id, sizeof(id), "%lld", (long long)campaign_id);
    const char *p[1] = { id };
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    PGresult *r = kf_db_exec(db,
        "SELECT COALESCE(strategy_state->>'expanded', 'false'), max_candidates, name "
        "FROM campaigns WHERE id = $1::bigint AND state = 'running' FOR UPDATE",
        1, p, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) == 0 || strcmp(PQgetvalue(r, 0, 0), "true") == 0) {
        /* Not running any more, or already expanded. */
        *finished = 1;
        PQclear(r);
        return kf_db_commit(db, err, errlen);
    }
    long budget = PQgetisnull(r, 0, 1) ? 100000 : (long)kf_db_i64(r, 0, 1, 0);
    char name[256];
    snprintf(name, sizeof(name), "%s", PQgetvalue(r, 0, 2));
    PQclear(r);

    r = kf_db_exec(db,
        "SELECT id, source FROM candidates WHERE campaign_id = $1::bigint AND proposer = 'seed' "
        "ORDER BY id LIMIT 1", 1, p, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "campaign %s has no seed candidate", name);
        goto fail;
    }
    char seed_id[24];
    snprintf(seed_id, sizeof(seed_id), "%s", PQgetvalue(r, 0, 0));
    kf_tunable t[KF_TUNE_MAX];
    int n = 0;
    char e2[512];
    int prc = kf_tune_parse(PQgetvalue(r, 0, 1), t, KF_TUNE_MAX, &n, e2, sizeof(e2));
    PQclear(r);
    if (prc < 0) {
        snprintf(err, errlen, "campaign %s: seed tunables: %s", name, e2);
        goto fail;
    }
    long count = kf_tune_count(t, n), made = 1;
    if (n == 0) {
        /* Nothing to sweep: evaluate the seed itself. */
        if (kf_db_cmd(db,
                "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts) "
                "SELECT $2::bigint, c.id, t, c.max_attempts FROM campaigns c, " KF_CAMPAIGN_TARGETS " "
                "WHERE c.id = $1::bigint AND " KF_NO_JOB_KEY("$2::bigint", "t"),
                2, (const char *[]){ id, seed_id }, err, errlen) < 0)
            goto fail;
    } else {
        char *vj = variants_json(t, n, count, budget > 0 ? budget : 1);
        if (!vj) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        const char *pc[3] = { id, seed_id, vj };
        r = kf_db_exec(db,
            "INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer) "
            "SELECT $1::bigint, s.source, s.sha256, d, s.id, 'tune' "
            "FROM candidates s, jsonb_array_elements($3::jsonb) d WHERE s.id = $2::bigint "
            "ON CONFLICT (campaign_id, sha256, defines) DO NOTHING RETURNING id",
            3, pc, err, errlen);
        free(vj);
        if (!r) goto fail;
        made = PQntuples(r);
        PQclear(r);
        if (kf_db_cmd(db,
                "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts) "
                "SELECT k.id, c.id, t, c.max_attempts "
                "FROM campaigns c JOIN candidates k ON k.campaign_id = c.id, " KF_CAMPAIGN_TARGETS " "
                "WHERE c.id = $1::bigint AND k.proposer = 'tune' AND k.parent_id = $2::bigint "
                "  AND " KF_NO_JOB_KEY("k.id", "t") " ORDER BY k.id, t",
                2, (const char *[]){ id, seed_id }, err, errlen) < 0)
            goto fail;
    }
    char variants[24], space[24];
    snprintf(variants, sizeof(variants), "%ld", n == 0 ? 1 : (count < budget ? count : budget));
    snprintf(space, sizeof(space), "%ld", count);
    const char *pu[3] = { id, variants, space };
    if (kf_db_cmd(db,
            "UPDATE campaigns SET updated_at = now(), strategy_state = strategy_state || "
            "jsonb_build_object('expanded', true, 'variants', $2::bigint, 'space', $3::bigint) "
            "WHERE id = $1::bigint", 3, pu, err, errlen) < 0)
        goto fail;
    kf_log("campaign %s: tune expanded %s of %s variants (%ld new candidates)", name, variants,
           space, n == 0 ? 0 : made);
    *finished = 1;
    return kf_db_commit(db, err, errlen);
fail:
    kf_db_rollback(db);
    return -1;
}

const kf_strategy kf_strategy_tune = { "tune", tune_step };
