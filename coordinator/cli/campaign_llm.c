/*
 * campaign_llm.c -- the LLM side of `kfarm campaign`: campaign files
 * (--config, docs/campaign-config.md) and the search progress shown by
 * `kfarm campaign status`.
 *
 * A campaign file is one JSON object. Campaign-level fields (strategy,
 * task, targets, max_candidates, max_attempts, seed_file) fill whatever the
 * command line left unset; the whole object is stored as the campaign's
 * config, where the strategy reads the llm object, budgets and review flag.
 * The API key never appears in it: only the name of the variable.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kf_util.h"
#include "kfarm_cli.h"

/* path relative to the directory of `base` unless absolute; the result is
 * kept in holder (a JSON object) so it lives as long as the config. */
static const char *relpath(json_t *holder, const char *key, const char *base, const char *path)
{
    if (path[0] == '/') return path;
    const char *slash = strrchr(base, '/');
    size_t dl = slash ? (size_t)(slash - base) + 1 : 0;
    char *full = malloc(dl + strlen(path) + 1);
    if (!full) return path;
    memcpy(full, base, dl);
    strcpy(full + dl, path);
    json_object_set_new(holder, key, json_string(full));
    free(full);
    return json_string_value(json_object_get(holder, key));
}

int kf_cli_campaign_config(const char *path, kf_campaign_spec *spec, char **text, json_t **json)
{
    *text = kf_util_read_file(path, NULL, 1u << 20);
    if (!*text) return kf_cli_fail("--config %s: cannot read it", path);
    json_error_t je;
    json_t *root = json_loads(*text, 0, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        return kf_cli_fail("--config %s: line %d: %s", path, je.line,
                           root ? "expected a JSON object" : je.text);
    }
    *json = root;
    json_t *holder = json_object();
    json_object_set_new(root, "\x01paths", holder); /* removed before storing */
    json_t *v;
    if (!spec->strategy && (v = json_object_get(root, "strategy"))) {
        if (!json_is_string(v)) return kf_cli_fail("--config %s: strategy: expected a string", path);
        spec->strategy = json_string_value(v);
    }
    if (!spec->task_dir && (v = json_object_get(root, "task"))) {
        if (!json_is_string(v)) return kf_cli_fail("--config %s: task: expected a directory", path);
        spec->task_dir = relpath(holder, "task", path, json_string_value(v));
    }
    if (!spec->seed_path && (v = json_object_get(root, "seed_file"))) {
        if (!json_is_string(v)) return kf_cli_fail("--config %s: seed_file: expected a file", path);
        spec->seed_path = relpath(holder, "seed_file", path, json_string_value(v));
    }
    if (spec->n_targets == 0 && (v = json_object_get(root, "targets"))) {
        size_t i;
        json_t *t;
        if (!json_is_array(v) || json_array_size(v) > KF_CAMPAIGN_MAX_TARGETS)
            return kf_cli_fail("--config %s: targets: expected an array of classes", path);
        json_array_foreach(v, i, t) {
            if (!json_is_string(t)) return kf_cli_fail("--config %s: targets[%zu]: expected a string", path, i);
            spec->targets[spec->n_targets++] = json_string_value(t);
        }
    }
    if (spec->max_candidates <= 0 && (v = json_object_get(root, "max_candidates"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return kf_cli_fail("--config %s: max_candidates: expected a positive integer", path);
        spec->max_candidates = (long)json_integer_value(v);
    }
    if (spec->max_attempts <= 0 && (v = json_object_get(root, "max_attempts"))) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100)
            return kf_cli_fail("--config %s: max_attempts: expected 1..100", path);
        spec->max_attempts = (int)json_integer_value(v);
    }
    /* Store the file's object without our path holder. */
    json_t *copy = json_deep_copy(root);
    json_object_del(copy, "\x01paths");
    free(*text);
    *text = json_dumps(copy, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(copy);
    if (!*text) return kf_cli_fail("out of memory");
    spec->config_json = *text;
    return 0;
}

int kf_cli_campaign_progress(kf_db *db, const char *name)
{
    const char *p[1] = { name };
    char err[1024];
    PGresult *r = kf_db_exec(db,
        "SELECT c.strategy, c.strategy_state::text, c.max_candidates,"
        " (SELECT COALESCE(sum(n), 0) FROM campaign_counts k WHERE k.campaign_id = c.id"
        "    AND k.what = 'candidate' AND k.proposer <> 'seed'),"
        " pr.states, COALESCE(pr.pt, 0), COALESCE(pr.ct, 0),"
        " c.config->>'max_tokens', c.config->>'max_rounds', c.config->'llm'->>'model',"
        " (c.config->>'review')::boolean, COALESCE(pr.review, 0),"
        " (SELECT count(*) FROM hints WHERE campaign_id = c.id),"
        " (SELECT count(DISTINCT document) FROM doc_chunks WHERE campaign_id = c.id)"
        /* the proposals by state and their tokens from campaign_counts
         * (schema 011): summing 18,200 proposals took 16 ms */
        " FROM campaigns c LEFT JOIN LATERAL (SELECT string_agg(state || ' ' || n, ', ' ORDER BY state)"
        "   FILTER (WHERE n <> 0) states, sum(pt) pt, sum(ct) ct, sum(n) FILTER (WHERE state = 'review') review"
        "   FROM (SELECT proposal_state state, sum(n) n, sum(proposal_prompt_tokens) pt,"
        "    sum(proposal_completion_tokens) ct FROM campaign_counts"
        "    WHERE campaign_id = c.id AND what = 'proposal' GROUP BY 1) s) pr ON true"
        " WHERE c.name = $1", 1, p, err, sizeof(err));
    if (!r) return kf_cli_fail("%s", err);
    if (PQntuples(r) == 0) {
        PQclear(r);
        return kf_cli_fail("no campaign '%s'", name);
    }
    const char *strategy = PQgetvalue(r, 0, 0);
    if (!strcmp(strategy, "tune")) {
        PQclear(r);
        return 0;
    }
    json_t *st = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
    long long ncand = kf_db_i64(r, 0, 3, 0), pt = kf_db_i64(r, 0, 5, 0), ct = kf_db_i64(r, 0, 6, 0);
    long long maxc = kf_db_i64(r, 0, 2, 0), maxt = kf_db_i64(r, 0, 7, 0), maxr = kf_db_i64(r, 0, 8, 0);
    long long round = json_integer_value(json_object_get(st, "round"));
    /* rounds in which the model never answered do not count toward max_rounds */
    long long dead = json_integer_value(json_object_get(st, "dead_rounds"));
    json_t *bs = json_object_get(st, "best_score");
    printf("search:     %s with %s, round %lld%s%s", strategy, PQgetvalue(r, 0, 9), round,
           maxr ? " of " : "", maxr ? PQgetvalue(r, 0, 8) : "");
    if (dead) printf(" (%lld without a reply, not counted)", dead);
    if (json_is_number(bs))
        printf(", best %.3fx (candidate %lld), plateau %lld", json_number_value(bs),
               (long long)json_integer_value(json_object_get(st, "best")),
               (long long)json_integer_value(json_object_get(st, "plateau")));
    printf("\n");
    printf("proposals:  %s\n", kf_db_str(r, 0, 4) ? kf_db_str(r, 0, 4) : "none yet");
    printf("tokens:     %lld (prompt %lld, completion %lld)%s%s\n", pt + ct, pt, ct,
           maxt ? " of " : "", maxt ? PQgetvalue(r, 0, 7) : "");
    if (!strcmp(PQgetvalue(r, 0, 10), "t"))
        printf("review:     on, %s waiting (kfarm review list %s)\n", PQgetvalue(r, 0, 11), name);
    if (kf_db_i64(r, 0, 12, 0) || kf_db_i64(r, 0, 13, 0))
        printf("context:    %s hints, %s reference documents\n", PQgetvalue(r, 0, 12),
               PQgetvalue(r, 0, 13));
    /* progress: the budget closest to running out */
    double frac = -1;
    char what[128] = "";
    if (maxc > 0) {
        frac = (double)ncand / (double)maxc;
        snprintf(what, sizeof(what), "%lld/%lld candidates", ncand, maxc);
    }
    if (maxr > 0 && (double)(round - dead) / (double)maxr > frac) {
        frac = (double)(round - dead) / (double)maxr;
        snprintf(what, sizeof(what), "round %lld/%lld", round - dead, maxr);
    }
    if (maxt > 0 && (double)(pt + ct) / (double)maxt > frac) {
        frac = (double)(pt + ct) / (double)maxt;
        snprintf(what, sizeof(what), "%lld/%lld tokens", pt + ct, maxt);
    }
    json_t *stopped = json_object_get(st, "stopped");
    if (frac >= 0) {
        if (frac > 1) frac = 1;
        if (isatty(STDOUT_FILENO)) {
            char bar[41];
            int fill = (int)(frac * 40 + 0.5);
            for (int i = 0; i < 40; i++) bar[i] = i < fill ? '#' : '.';
            bar[40] = 0;
            printf("progress:   [%s] %3.0f%% %s\n", bar, frac * 100, what);
        } else {
            printf("progress:   %.0f%% %s\n", frac * 100, what);
        }
    }
    if (json_is_string(stopped)) printf("stopped:    %s\n", json_string_value(stopped));
    json_decref(st);
    PQclear(r);
    return 0;
}
