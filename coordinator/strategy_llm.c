/*
 * strategy_llm.c -- loop, beam and parallel: LLM-driven search in rounds,
 * with human review and human submissions. See strategy_llm.h for the round
 * model and strategy.h for the step contract (idempotent, transactional, no
 * slow work under the campaign's row lock).
 *
 * strategy_state (jsonb) of an LLM campaign:
 *   round         current round (0 = the seed)
 *   best, best_score        best candidate so far and its mean speedup (a
 *                 child replaces it only when the lower end of its noise
 *                 interval lies above best_score: better beyond the noise)
 *   plateau       rounds in a row without an improvement >= min_improvement
 *   lineage_best, lineage_score   parallel: per lineage
 *   stopped       why the campaign stopped proposing ("max_rounds reached")
 *   dead_rounds   rounds in which no proposal got a reply (not counted
 *                 toward max_rounds; the blocker is shown by health.c)
 * Every write happens in one transaction with the proposals/candidates it
 * describes, so a coordinator killed anywhere in a step leaves either the
 * old state and nothing new, or the new state and all its rows.
 */
#include "strategy_llm.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kf_tune.h"
#include "kf_util.h"
#include "llm.h"
#include "log.h"
#include "strategy.h"
#include "prompt.h"

#define KF_LLM_MAX_SLOTS 64      /* proposals per round */
#define KF_LLM_MAX_TEMPS 16

typedef struct {
    kf_llm_config llm;
    int review;
    int children, beam_width, lineages;
    double temps[KF_LLM_MAX_TEMPS];
    int n_temps;
    int tune_max_variants;
    long max_rounds, plateau_rounds, max_tokens;
    double max_hours, target_speedup, min_improvement;
    kf_prompt_opts prompt;
} llm_cfg;

/* Keys the CLI reads from a campaign file (campaign-level, not strategy). */
static const char *const CAMPAIGN_KEYS[] = { "strategy", "task", "targets", "max_candidates",
                                             "max_attempts", "seed_file", "name" };

static int num_field(json_t *v, const char *key, double lo, double hi, double *out, char *err,
                     size_t errlen)
{
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        snprintf(err, errlen, "%s: expected a number in [%g, %g]", key, lo, hi);
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

static int parse_cfg(const char *strategy, json_t *root, llm_cfg *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    kf_prompt_opts_default(&c->prompt);
    c->children = 1;
    c->beam_width = 2;
    c->lineages = 3;
    c->tune_max_variants = 8;
    c->min_improvement = 0.01;
    if (!json_is_object(root)) {
        snprintf(err, errlen, "campaign config must be a JSON object");
        return -1;
    }
    json_t *llm = json_object_get(root, "llm");
    if (!llm) {
        snprintf(err, errlen, "llm: required for the %s strategy (base_url, model, ...)", strategy);
        return -1;
    }
    if (kf_llm_config_from_json(llm, &c->llm, err, errlen) < 0) return -1;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        double d = 0;
        int rc = 0, known = 0;
        for (size_t i = 0; i < sizeof(CAMPAIGN_KEYS) / sizeof(CAMPAIGN_KEYS[0]); i++)
            known |= !strcmp(key, CAMPAIGN_KEYS[i]);
        if (known || !strcmp(key, "llm")) continue;
        if (!strcmp(key, "review")) {
            if (!json_is_boolean(v)) {
                snprintf(err, errlen, "review: expected true or false");
                return -1;
            }
            c->review = json_is_true(v);
        } else if (!strcmp(key, "children")) { if (!(rc = num_field(v, key, 1, KF_LLM_MAX_SLOTS, &d, err, errlen))) c->children = (int)d; }
        else if (!strcmp(key, "beam_width")) { if (!(rc = num_field(v, key, 1, KF_LLM_MAX_SLOTS, &d, err, errlen))) c->beam_width = (int)d; }
        else if (!strcmp(key, "lineages")) { if (!(rc = num_field(v, key, 1, KF_LLM_MAX_SLOTS, &d, err, errlen))) c->lineages = (int)d; }
        else if (!strcmp(key, "tune_max_variants")) { if (!(rc = num_field(v, key, 1, 1024, &d, err, errlen))) c->tune_max_variants = (int)d; }
        else if (!strcmp(key, "max_rounds")) { if (!(rc = num_field(v, key, 1, 1e9, &d, err, errlen))) c->max_rounds = (long)d; }
        else if (!strcmp(key, "plateau_rounds")) { if (!(rc = num_field(v, key, 1, 1e9, &d, err, errlen))) c->plateau_rounds = (long)d; }
        else if (!strcmp(key, "max_tokens")) { if (!(rc = num_field(v, key, 1, 1e15, &d, err, errlen))) c->max_tokens = (long)d; }
        else if (!strcmp(key, "max_hours")) { if (!(rc = num_field(v, key, 1e-6, 1e6, &d, err, errlen))) c->max_hours = d; }
        else if (!strcmp(key, "target_speedup")) { if (!(rc = num_field(v, key, 1e-6, 1e9, &d, err, errlen))) c->target_speedup = d; }
        else if (!strcmp(key, "min_improvement")) { if (!(rc = num_field(v, key, 0, 10, &d, err, errlen))) c->min_improvement = d; }
        else if (!strcmp(key, "docs_limit")) { if (!(rc = num_field(v, key, 0, 100, &d, err, errlen))) c->prompt.docs_limit = (int)d; }
        else if (!strcmp(key, "failures_limit")) { if (!(rc = num_field(v, key, 0, 100, &d, err, errlen))) c->prompt.failures_limit = (int)d; }
        else if (!strcmp(key, "temperatures")) {
            if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > KF_LLM_MAX_TEMPS) {
                snprintf(err, errlen, "temperatures: expected an array of 1..%d numbers", KF_LLM_MAX_TEMPS);
                return -1;
            }
            size_t i;
            json_t *t;
            json_array_foreach(v, i, t) {
                if (num_field(t, "temperatures[]", 0, 2, &d, err, errlen) < 0) return -1;
                c->temps[c->n_temps++] = d;
            }
        } else {
            snprintf(err, errlen, "%s: unknown campaign config field (see docs/campaign-config.md)", key);
            return -1;
        }
        if (rc < 0) return -1;
    }
    int slots = !strcmp(strategy, "beam") ? c->beam_width * c->children
              : !strcmp(strategy, "parallel") ? c->lineages : c->children;
    if (slots > KF_LLM_MAX_SLOTS) {
        snprintf(err, errlen, "%d proposals per round is too many (max %d)", slots, KF_LLM_MAX_SLOTS);
        return -1;
    }
    c->prompt.max_variants = c->tune_max_variants;
    return 0;
}

int kf_strategy_llm_check_config(const char *strategy, const char *config_json, char *err,
                                 size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(config_json ? config_json : "{}", 0, &je);
    if (!root) {
        snprintf(err, errlen, "campaign config: invalid JSON (line %d: %s)", je.line, je.text);
        return -1;
    }
    llm_cfg c;
    int rc = parse_cfg(strategy, root, &c, err, errlen);
    json_decref(root);
    return rc;
}

static void i64s(char b[24], int64_t v) { snprintf(b, 24, "%lld", (long long)v); }

/* ---- candidates from a source ---- */

/* Variants (defines objects) of source as a JSON array text: all of them, or
 * an even sample of `take`; "[{}]" without tunables. NULL + reason on bad
 * declarations. */
static char *variants_json(const char *source, long max, char *reason, size_t rlen)
{
    kf_tunable t[KF_TUNE_MAX];
    int n = 0;
    char e2[256];
    if (kf_tune_parse(source, t, KF_TUNE_MAX, &n, e2, sizeof(e2)) < 0) {
        snprintf(reason, rlen, "bad // kfarm:tune declaration: %s", e2);
        return NULL;
    }
    char *s = kf_strategy_tune_variants_json(t, n, max < 1 ? 1 : max);
    if (!s) snprintf(reason, rlen, "out of memory");
    return s;
}

/* Insert the candidates of source (one per variant, skipping sources already
 * in the campaign after normalization) and their jobs. Returns 0 with
 * *n_new (0: all duplicates, reason says of what), 1 when the source is
 * refused (reason), -1 on database errors. */
static int insert_variants(kf_db *db, const char *cid, const char *source, const char *parent,
                           const char *proposer, const char *proposal, long max_variants,
                           int64_t *first, int *n_new, char *reason, size_t rlen, char *err,
                           size_t errlen)
{
    *n_new = 0;
    *first = 0;
    char sha[65], norm[65];
    kf_util_sha256_hex(source, strlen(source), sha);
    if (kf_prompt_norm_sha256(source, norm) < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *vj = variants_json(source, max_variants, reason, rlen);
    if (!vj) return 1;
    const char *p[8] = { cid, source, sha, norm, parent, proposer, proposal, vj };
    PGresult *r = kf_db_exec(db,
        "INSERT INTO candidates (campaign_id, source, sha256, norm_sha256, defines, parent_id,"
        "  proposer, proposal_id) "
        "SELECT $1::bigint, $2, $3, $4, d, $5::bigint, $6, $7::bigint "
        "FROM jsonb_array_elements($8::jsonb) WITH ORDINALITY AS v(d, i) ORDER BY i "
        "ON CONFLICT DO NOTHING RETURNING id", 8, p, err, errlen);
    free(vj);
    if (!r) return -1;
    int n = PQntuples(r);
    if (n == 0) {
        PQclear(r);
        const char *pd[2] = { cid, norm };
        r = kf_db_exec(db, "SELECT id FROM candidates WHERE campaign_id = $1::bigint AND "
                           "norm_sha256 = $2 ORDER BY id LIMIT 1", 2, pd, err, errlen);
        if (!r) return -1;
        snprintf(reason, rlen, "duplicate of candidate %s (same source after removing comments "
                 "and whitespace)", PQntuples(r) ? PQgetvalue(r, 0, 0) : "?");
        PQclear(r);
        return 0;
    }
    /* bigint[] literal of the new ids */
    size_t cap = (size_t)n * 24 + 4;
    char *ids = malloc(cap), *o = ids;
    if (!ids) {
        PQclear(r);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    *o++ = '{';
    for (int i = 0; i < n; i++) o += sprintf(o, "%s%s", i ? "," : "", PQgetvalue(r, i, 0));
    strcpy(o, "}");
    *first = kf_db_i64(r, 0, 0, 0);
    PQclear(r);
    const char *pj[2] = { cid, ids };
    int rc = kf_db_cmd(db,
        "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts) "
        "SELECT k, c.id, t, c.max_attempts FROM campaigns c, " KF_CAMPAIGN_TARGETS ","
        "  unnest($2::bigint[]) k WHERE c.id = $1::bigint AND " KF_NO_JOB_KEY("k", "t")
        " ORDER BY k, t", 2, pj, err, errlen);
    free(ids);
    if (rc < 0) return -1;
    *n_new = n;
    return 0;
}

/* Candidates still allowed by max_candidates (the seed is not counted);
 * LONG_MAX-ish when there is no budget. -1 on errors. */
static long budget_left(kf_db *db, const char *cid, char *err, size_t errlen)
{
    const char *p[1] = { cid };
    PGresult *r = kf_db_exec(db,
        "SELECT c.max_candidates, (SELECT count(*) FROM candidates k WHERE k.campaign_id = c.id"
        "  AND k.proposer <> 'seed') FROM campaigns c WHERE c.id = $1::bigint", 1, p, err, errlen);
    if (!r) return -1;
    long left = PQgetisnull(r, 0, 0) ? 1000000000L
              : (long)(kf_db_i64(r, 0, 0, 0) - kf_db_i64(r, 0, 1, 0));
    PQclear(r);
    return left < 0 ? 0 : left;
}

int kf_strategy_llm_materialize(kf_db *db, int64_t proposal_id, char *err, size_t errlen)
{
    char pid[24];
    i64s(pid, proposal_id);
    const char *p[1] = { pid };
    PGresult *r = kf_db_exec(db,
        "SELECT p.campaign_id, p.state, p.code, p.parent_id, p.kind,"
        "  COALESCE((c.config->>'tune_max_variants')::int, 8) "
        "FROM proposals p JOIN campaigns c ON c.id = p.campaign_id WHERE p.id = $1::bigint "
        "FOR UPDATE OF p", 1, p, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "no proposal %s", pid);
        return -1;
    }
    const char *state = PQgetvalue(r, 0, 1);
    if (strcmp(state, "answered") && strcmp(state, "approved")) {
        PQclear(r);
        return 0; /* already handled */
    }
    char cid[24], parent[24];
    snprintf(cid, sizeof(cid), "%s", PQgetvalue(r, 0, 0));
    snprintf(parent, sizeof(parent), "%s", PQgetvalue(r, 0, 3));
    int has_parent = !PQgetisnull(r, 0, 3);
    const char *proposer = strcmp(PQgetvalue(r, 0, 4), "human") == 0 ? "human" : "llm";
    long maxv = (long)kf_db_i64(r, 0, 5, 8);
    char *code = kf_db_str(r, 0, 2) ? strdup(PQgetvalue(r, 0, 2)) : NULL;
    PQclear(r);
    char reason[512] = "";
    int64_t first = 0;
    int n_new = 0, rc = 1;
    if (!code) {
        snprintf(reason, sizeof(reason), "no code to evaluate");
    } else {
        long left = budget_left(db, cid, err, errlen);
        if (left < 0) {
            free(code);
            return -1;
        }
        if (left == 0) {
            snprintf(reason, sizeof(reason), "candidate budget (max_candidates) exhausted");
        } else {
            rc = insert_variants(db, cid, code, has_parent ? parent : NULL, proposer, pid,
                                 maxv < left ? maxv : left, &first, &n_new, reason,
                                 sizeof(reason), err, errlen);
            if (rc < 0) {
                free(code);
                return -1;
            }
        }
    }
    free(code);
    if (rc == 0 && n_new > 0) {
        char f[24];
        i64s(f, first);
        const char *pu[2] = { pid, f };
        return kf_db_cmd(db, "UPDATE proposals SET state = 'done', candidate_id = $2::bigint,"
                             " finished_at = now() WHERE id = $1::bigint", 2, pu, err, errlen);
    }
    const char *pf[2] = { pid, reason };
    return kf_db_cmd(db, "UPDATE proposals SET state = 'failed', reason = $2, finished_at = now() "
                         "WHERE id = $1::bigint", 2, pf, err, errlen);
}

/* ---- the step ---- */

typedef struct {
    int64_t id;
    double score;
    double lo;            /* lower end of the noise interval (geometric mean over targets) */
    int lineage;          /* -1: seed family (seed, its variants) */
    char norm[65];
} scored;

/* Every candidate with a final ok verdict (with a speedup) on every target,
 * best first. *out malloc'ed. Returns the count or -1. */
static int load_scores(kf_db *db, const char *cid, scored **out, char *err, size_t errlen)
{
    const char *p[1] = { cid };
    PGresult *r = kf_db_exec(db,
        "SELECT k.id, avg(e.speedup), COALESCE(min(p.lineage), -1), COALESCE(k.norm_sha256, k.sha256),"
        "  exp(avg(ln(CASE WHEN COALESCE(e.speedup_lo, e.speedup) > 0 THEN COALESCE(e.speedup_lo, e.speedup) END))) "
        /* a candidate's evaluation jobs (verifies IS NULL) by job_keys_candidate */
        "FROM candidates k JOIN job_keys jk ON jk.candidate_id = k.id AND jk.verifies IS NULL "
        "JOIN evaluations e ON e.job_id = jk.job_id AND e.is_final "
        "LEFT JOIN proposals p ON p.id = k.proposal_id "
        "WHERE k.campaign_id = $1::bigint GROUP BY k.id "
        "HAVING bool_and(e.verdict = 'ok' AND e.speedup IS NOT NULL AND e.speedup > 0"
        "                 AND e.confirmation <> 'disputed') " /* confirmed or confirmable */
        "  AND count(*) = (SELECT cardinality(targets) FROM campaigns WHERE id = $1::bigint) "
        "ORDER BY 2 DESC, 1", 1, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    *out = calloc((size_t)n + 1, sizeof(scored));
    if (!*out) {
        PQclear(r);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        (*out)[i].id = kf_db_i64(r, i, 0, 0);
        (*out)[i].score = kf_db_f64(r, i, 1, 0);
        (*out)[i].lineage = (int)kf_db_i64(r, i, 2, -1);
        snprintf((*out)[i].norm, sizeof((*out)[i].norm), "%s", PQgetvalue(r, i, 3));
        (*out)[i].lo = kf_db_f64(r, i, 4, (*out)[i].score);
    }
    PQclear(r);
    return n;
}

static int64_t jint(json_t *o, const char *k, int64_t d)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : d;
}

static double jnum(json_t *o, const char *k, double d)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : d;
}

/* Round 0: the seed's normalized hash, and its jobs (or its variants). */
static int start_seed(kf_db *db, const char *cid, const llm_cfg *c, json_t *state, char *err,
                      size_t errlen)
{
    const char *p[1] = { cid };
    PGresult *r = kf_db_exec(db, "SELECT id, source FROM candidates WHERE campaign_id = $1::bigint "
                                 "AND proposer = 'seed' ORDER BY id LIMIT 1", 1, p, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(err, errlen, "campaign has no seed candidate");
        return -1;
    }
    char seed[24], norm[65];
    snprintf(seed, sizeof(seed), "%s", PQgetvalue(r, 0, 0));
    char *src = strdup(PQgetvalue(r, 0, 1));
    PQclear(r);
    if (!src || kf_prompt_norm_sha256(src, norm) < 0) {
        free(src);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    kf_tunable t[KF_TUNE_MAX];
    int n = 0;
    char e2[256];
    if (kf_tune_parse(src, t, KF_TUNE_MAX, &n, e2, sizeof(e2)) < 0) n = 0;
    const char *pu[2] = { seed, norm };
    int rc = kf_db_cmd(db, "UPDATE candidates SET norm_sha256 = $2 WHERE id = $1::bigint AND "
                           "norm_sha256 IS NULL", 2, pu, err, errlen);
    if (rc == 0 && n == 0) {
        const char *pj[2] = { cid, seed };
        rc = kf_db_cmd(db,
            "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts) "
            "SELECT $2::bigint, c.id, t, c.max_attempts FROM campaigns c, " KF_CAMPAIGN_TARGETS " "
            "WHERE c.id = $1::bigint AND " KF_NO_JOB_KEY("$2::bigint", "t"), 2, pj, err, errlen);
    } else if (rc == 0) {
        int64_t first;
        int n_new;
        char reason[256];
        long left = budget_left(db, cid, err, errlen);
        if (left < 0) rc = -1;
        else if (insert_variants(db, cid, src, seed, "tune", NULL,
                                 c->tune_max_variants < left ? c->tune_max_variants : (left ? left : 1),
                                 &first, &n_new, reason, sizeof(reason), err, errlen) < 0)
            rc = -1;
    }
    free(src);
    if (rc < 0) return -1;
    json_object_set_new(state, "round", json_integer(0));
    json_object_set_new(state, "seed", json_integer(strtoll(seed, NULL, 10)));
    json_object_set_new(state, "plateau", json_integer(0));
    return 0;
}

/* Answered proposals -> review / candidates; approved -> candidates. */
static int process_proposals(kf_db *db, const char *cid, const llm_cfg *c, char *err, size_t errlen)
{
    const char *p[1] = { cid };
    PGresult *r = kf_db_exec(db,
        "SELECT id, reply, finish_reason, state FROM proposals WHERE campaign_id = $1::bigint "
        "AND state IN ('answered', 'approved') ORDER BY id", 1, p, err, errlen);
    if (!r) return -1;
    int rc = 0;
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        const char *id = PQgetvalue(r, i, 0);
        if (!strcmp(PQgetvalue(r, i, 3), "approved")) {
            rc = kf_strategy_llm_materialize(db, kf_db_i64(r, i, 0, 0), err, errlen);
            continue;
        }
        char reason[256];
        char *code = kf_prompt_extract_code(kf_db_str(r, i, 1), kf_db_str(r, i, 2), reason,
                                            sizeof(reason));
        if (!code) {
            const char *pf[2] = { id, reason };
            rc = kf_db_cmd(db, "UPDATE proposals SET state = 'failed', reason = $2, finished_at = now() "
                               "WHERE id = $1::bigint", 2, pf, err, errlen);
            kf_log("proposal %s: failed: %s", id, reason);
            continue;
        }
        kf_db_utf8_sanitize(code);
        const char *pc[3] = { id, code, c->review ? "review" : "answered" };
        rc = kf_db_cmd(db, "UPDATE proposals SET code = $2, state = $3 WHERE id = $1::bigint",
                       3, pc, err, errlen);
        free(code);
        if (rc == 0 && !c->review) rc = kf_strategy_llm_materialize(db, kf_db_i64(r, i, 0, 0), err, errlen);
        else if (rc == 0) kf_log("proposal %s: waiting for review (kfarm review show)", id);
    }
    PQclear(r);
    return rc;
}

/* Score a completed round: best, plateau, lineages. */
static int score_round(kf_db *db, const char *cid, const char *strategy, const llm_cfg *c,
                       json_t *state, char *err, size_t errlen)
{
    scored *s = NULL;
    int n = load_scores(db, cid, &s, err, errlen);
    if (n < 0) return -1;
    int64_t round = jint(state, "round", 0);
    double old = jnum(state, "best_score", 0);
    int improved = 0;
    if (n > 0) {
        /* better only beyond the noise: the whole interval above the old best */
        int first = !json_object_get(state, "best_score");
        int beyond = s[0].lo > old;
        if (first || (beyond && s[0].score > old * (1 + c->min_improvement)))
            improved = 1;
        if (first || (s[0].score > old && beyond)) {
            json_object_set_new(state, "best", json_integer(s[0].id));
            json_object_set_new(state, "best_score", json_real(s[0].score));
        }
    }
    if (!strcmp(strategy, "parallel")) {
        json_t *lb = json_array(), *ls = json_array();
        json_t *olds = json_object_get(state, "lineage_score");
        for (int l = 0; l < c->lineages; l++) {
            int64_t best = jint(state, "seed", 0);
            double sc = 0;
            for (int i = 0; i < n; i++)
                if (s[i].lineage == l || s[i].lineage == -1) {
                    best = s[i].id;
                    sc = s[i].score;
                    break;
                }
            json_t *o = json_array_get(olds, (size_t)l);
            if (json_is_number(o) && sc > json_number_value(o) * (1 + c->min_improvement)) improved = 1;
            json_array_append_new(lb, json_integer(best));
            json_array_append_new(ls, json_real(sc));
        }
        json_object_set_new(state, "lineage_best", lb);
        json_object_set_new(state, "lineage_score", ls);
    }
    if (round > 0 && !jint(state, "endpoint_failures", 0)) { /* dead rounds do not count */
        int64_t plateau = improved ? 0 : jint(state, "plateau", 0) + 1;
        json_object_set_new(state, "plateau", json_integer(plateau));
    }
    /* beam: the parents of the next round */
    json_t *beam = json_array();
    for (int i = 0; i < n && (int)json_array_size(beam) < c->beam_width; i++) {
        int dup = 0;
        for (int k = 0; k < i; k++) dup |= !strcmp(s[k].norm, s[i].norm);
        if (!dup) json_array_append_new(beam, json_integer(s[i].id));
    }
    json_object_set_new(state, "beam", beam);
    free(s);
    return 0;
}

/* Why the campaign should stop proposing, or NULL. */
static const char *stop_reason(kf_db *db, const char *cid, const llm_cfg *c, json_t *state,
                               double hours, char *buf, size_t cap, int *dberr, char *err,
                               size_t errlen)
{
    *dberr = 0;
    int64_t round = jint(state, "round", 0);
    double best = jnum(state, "best_score", 0);
    if (c->target_speedup > 0 && best >= c->target_speedup) {
        snprintf(buf, cap, "target speedup %.3gx reached (%.3fx)", c->target_speedup, best);
        return buf;
    }
    if (c->plateau_rounds > 0 && jint(state, "plateau", 0) >= c->plateau_rounds) {
        snprintf(buf, cap, "no improvement in %ld rounds", c->plateau_rounds);
        return buf;
    }
    if (c->max_rounds > 0 && round - jint(state, "dead_rounds", 0) >= c->max_rounds) {
        snprintf(buf, cap, "max_rounds (%ld) reached", c->max_rounds);
        return buf;
    }
    if (c->max_hours > 0 && hours >= c->max_hours) {
        snprintf(buf, cap, "max_hours (%g) reached", c->max_hours);
        return buf;
    }
    long left = budget_left(db, cid, err, errlen);
    if (left < 0) {
        *dberr = 1;
        return NULL;
    }
    if (left == 0) {
        snprintf(buf, cap, "max_candidates reached");
        return buf;
    }
    if (c->max_tokens > 0) {
        const char *p[1] = { cid };
        /* the tokens from campaign_counts (schema 011), not every proposal */
        PGresult *r = kf_db_exec(db, "SELECT COALESCE(sum(proposal_prompt_tokens + proposal_completion_tokens), 0)"
                                     " FROM campaign_counts WHERE campaign_id = $1::bigint"
                                     " AND what = 'proposal'", 1, p, err, errlen);
        if (!r) {
            *dberr = 1;
            return NULL;
        }
        long used = (long)kf_db_i64(r, 0, 0, 0);
        PQclear(r);
        if (used >= c->max_tokens) {
            snprintf(buf, cap, "max_tokens (%ld) reached (%ld used)", c->max_tokens, used);
            return buf;
        }
    }
    return NULL;
}

/* Record the next round's proposals with their prompts. */
static int new_round(kf_db *db, const char *cid, const char *strategy, const llm_cfg *c,
                     json_t *state, char *err, size_t errlen)
{
    int64_t round = jint(state, "round", 0) + 1;
    int64_t seed = jint(state, "seed", 0), best = jint(state, "best", seed);
    int64_t parents[KF_LLM_MAX_SLOTS];
    int lineage[KF_LLM_MAX_SLOTS], n = 0;
    if (!strcmp(strategy, "beam")) {
        json_t *beam = json_object_get(state, "beam");
        for (int b = 0; b < c->beam_width; b++) {
            json_t *v = json_array_get(beam, (size_t)b);
            int64_t par = json_is_integer(v) ? (int64_t)json_integer_value(v) : best;
            for (int k = 0; k < c->children && n < KF_LLM_MAX_SLOTS; k++) {
                parents[n] = par;
                lineage[n++] = b;
            }
        }
    } else if (!strcmp(strategy, "parallel")) {
        json_t *lb = json_object_get(state, "lineage_best");
        for (int l = 0; l < c->lineages && n < KF_LLM_MAX_SLOTS; l++) {
            json_t *v = json_array_get(lb, (size_t)l);
            parents[n] = json_is_integer(v) ? (int64_t)json_integer_value(v) : seed;
            lineage[n++] = l;
        }
    } else {
        for (int k = 0; k < c->children && n < KF_LLM_MAX_SLOTS; k++) {
            parents[n] = best;
            lineage[n++] = 0;
        }
    }
    long left = budget_left(db, cid, err, errlen);
    if (left < 0) return -1;
    if (n > left) n = (int)left;
    char rs[24];
    i64s(rs, round);
    char *sys = NULL, *user = NULL;
    int64_t prompt_parent = -1;
    for (int i = 0; i < n; i++) {
        if (parents[i] != prompt_parent) {
            free(sys);
            free(user);
            sys = user = NULL;
            if (kf_prompt_build(db, strtoll(cid, NULL, 10), parents[i], &c->prompt, &sys, &user,
                                err, errlen) < 0)
                return -1;
            prompt_parent = parents[i];
        }
        double temp = c->llm.temperature;
        long lseed = c->llm.seed;
        if (!strcmp(strategy, "parallel")) {
            if (c->n_temps) temp = c->temps[lineage[i] % c->n_temps];
            lseed = (c->llm.seed >= 0 ? c->llm.seed : 0) + lineage[i] + 1;
        }
        char slot[16], lin[16], par[24], ts[32], sd[24];
        snprintf(slot, sizeof(slot), "%d", i);
        snprintf(lin, sizeof(lin), "%d", lineage[i]);
        i64s(par, parents[i]);
        snprintf(ts, sizeof(ts), "%.17g", temp);
        i64s(sd, lseed);
        const char *p[10] = { cid, rs, slot, lin, par, c->llm.model, temp >= 0 ? ts : NULL,
                              lseed >= 0 ? sd : NULL, sys, user };
        if (kf_db_cmd(db,
                "INSERT INTO proposals (campaign_id, kind, round, slot, lineage, parent_id, model,"
                "  temperature, llm_seed, system_prompt, prompt) "
                "VALUES ($1::bigint, 'llm', $2::int, $3::int, $4::int, $5::bigint, $6,"
                "  $7::double precision, $8::bigint, $9, $10) "
                "ON CONFLICT (campaign_id, round, slot) DO NOTHING", 10, p, err, errlen) < 0) {
            free(sys);
            free(user);
            return -1;
        }
    }
    free(sys);
    free(user);
    json_object_set_new(state, "round", json_integer(round));
    return n;
}

/* After a completed round: when none of its proposals got a reply from the
 * endpoint, set state.resume_at (epoch s) and count the failures; reset
 * once any reply arrives. Round 0 (the seed) has no proposals. */
static int endpoint_backoff(kf_db *db, const char *cid, const char *name, json_t *state,
                            double now_epoch, char *err, size_t errlen)
{
    int64_t round = jint(state, "round", 0);
    if (round == 0 || jint(state, "backoff_round", -1) == round)
        return 0; /* no proposals, or this round was already judged */
    char rs[24];
    i64s(rs, round);
    const char *p[2] = { cid, rs };
    PGresult *r = kf_db_exec(db,
        "SELECT count(*), count(*) FILTER (WHERE reply IS NULL AND kind = 'llm' AND state = 'failed'),"
        "  max(reason) FILTER (WHERE reply IS NULL) "
        "FROM proposals WHERE campaign_id = $1::bigint AND round = $2::int", 2, p, err, errlen);
    if (!r) return -1;
    long total = (long)kf_db_i64(r, 0, 0, 0), dead = (long)kf_db_i64(r, 0, 1, 0);
    char reason[256];
    snprintf(reason, sizeof(reason), "%s", kf_db_str(r, 0, 2) ? kf_db_str(r, 0, 2) : "");
    PQclear(r);
    json_object_set_new(state, "backoff_round", json_integer(round));
    if (total == 0 || dead < total) {
        json_object_del(state, "endpoint_failures");
        json_object_del(state, "resume_at");
        return 0;
    }
    /* a round without a single reply does not count toward max_rounds */
    json_object_set_new(state, "dead_rounds", json_integer(jint(state, "dead_rounds", 0) + 1));
    int64_t n = jint(state, "endpoint_failures", 0) + 1;
    double wait = 5.0 * pow(2.0, (double)(n - 1 < 6 ? n - 1 : 6));
    if (wait > 300) wait = 300;
    json_object_set_new(state, "endpoint_failures", json_integer(n));
    json_object_set_new(state, "resume_at", json_real(now_epoch + wait));
    kf_log("campaign %s: no reply from the model in round %lld (%s); next round in %.0f s",
           name, (long long)round, reason, wait);
    return 0;
}

static int save_state(kf_db *db, const char *cid, json_t *state, char *err, size_t errlen)
{
    char *s = json_dumps(state, JSON_COMPACT);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *p[2] = { cid, s };
    int rc = kf_db_cmd(db, "UPDATE campaigns SET strategy_state = $2::jsonb, updated_at = now() "
                           "WHERE id = $1::bigint", 2, p, err, errlen);
    free(s);
    return rc;
}

static int llm_step(const char *strategy, kf_db *db, int64_t campaign_id, int *finished,
                    char *err, size_t errlen)
{
    *finished = 0;
    char cid[24];
    i64s(cid, campaign_id);
    const char *p[1] = { cid };
    json_t *cfgj = NULL, *state = NULL;
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    PGresult *r = kf_db_exec(db,
        "SELECT config::text, strategy_state::text, name,"
        "  extract(epoch FROM now() - COALESCE(started_at, now())) / 3600.0,"
        "  extract(epoch FROM now()) "
        "FROM campaigns WHERE id = $1::bigint AND state = 'running' FOR UPDATE", 1, p, err, errlen);
    if (!r) goto fail;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return kf_db_commit(db, err, errlen);
    }
    char name[256];
    snprintf(name, sizeof(name), "%s", PQgetvalue(r, 0, 2));
    double hours = kf_db_f64(r, 0, 3, 0), now_epoch = kf_db_f64(r, 0, 4, 0);
    cfgj = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
    state = json_loads(PQgetvalue(r, 0, 1), 0, NULL);
    PQclear(r);
    if (!state) state = json_object();
    llm_cfg c;
    char e2[512];
    if (parse_cfg(strategy, cfgj, &c, e2, sizeof(e2)) < 0) {
        snprintf(err, errlen, "campaign %s: config: %s", name, e2);
        goto fail;
    }
    if (!json_object_get(state, "round")) {
        if (start_seed(db, cid, &c, state, err, errlen) < 0) goto fail;
        kf_log("campaign %s: %s: round 0 (the seed)", name, strategy);
        goto save;
    }
    if (process_proposals(db, cid, &c, err, errlen) < 0) goto fail;
    if (json_object_get(state, "stopped")) {
        *finished = 1;
        goto save;
    }
    r = kf_db_exec(db,
        "SELECT (SELECT count(*) FROM proposals WHERE campaign_id = $1::bigint AND"
        "          state IN ('requested', 'answered', 'review', 'approved')),"
        /* queued and leased by their partial indexes (schema 015) */
        "       (SELECT count(*) FROM jobs WHERE campaign_id = $1::bigint AND state = 'queued')"
        "     + (SELECT count(*) FROM jobs WHERE campaign_id = $1::bigint AND state = 'leased')",
        1, p, err, errlen);
    if (!r) goto fail;
    long open = (long)(kf_db_i64(r, 0, 0, 0) + kf_db_i64(r, 0, 1, 0));
    PQclear(r);
    if (open > 0) goto save;
    /* The round is complete. A round in which the endpoint never answered
     * (unreachable, key variable unset, every request failing) must not
     * spin: wait before the next one, doubling up to 5 minutes. */
    if (jnum(state, "resume_at", 0) > now_epoch) goto save;
    if (endpoint_backoff(db, cid, name, state, now_epoch, err, errlen) < 0) goto fail;
    if (jnum(state, "resume_at", 0) > now_epoch) goto save;
    if (score_round(db, cid, strategy, &c, state, err, errlen) < 0) goto fail;
    char why[256];
    int dberr = 0;
    const char *stop = stop_reason(db, cid, &c, state, hours, why, sizeof(why), &dberr, err, errlen);
    if (dberr) goto fail;
    if (stop) {
        json_object_set_new(state, "stopped", json_string(stop));
        kf_log("campaign %s: %s stops: %s (best %.3fx, candidate %lld)", name, strategy, stop,
               jnum(state, "best_score", 0), (long long)jint(state, "best", 0));
        *finished = 1;
        goto save;
    }
    int made = new_round(db, cid, strategy, &c, state, err, errlen);
    if (made < 0) goto fail;
    kf_log("campaign %s: %s: round %lld, %d proposals requested (best %.3fx, plateau %lld)", name,
           strategy, (long long)jint(state, "round", 0), made, jnum(state, "best_score", 0),
           (long long)jint(state, "plateau", 0));
save:
    if (save_state(db, cid, state, err, errlen) < 0) goto fail;
    json_decref(cfgj);
    json_decref(state);
    return kf_db_commit(db, err, errlen);
fail:
    kf_db_rollback(db);
    json_decref(cfgj);
    json_decref(state);
    return -1;
}

static int loop_step(kf_db *db, int64_t id, int *finished, char *err, size_t errlen)
{
    return llm_step("loop", db, id, finished, err, errlen);
}
static int beam_step(kf_db *db, int64_t id, int *finished, char *err, size_t errlen)
{
    return llm_step("beam", db, id, finished, err, errlen);
}
static int parallel_step(kf_db *db, int64_t id, int *finished, char *err, size_t errlen)
{
    return llm_step("parallel", db, id, finished, err, errlen);
}

const kf_strategy kf_strategy_loop = { "loop", loop_step };
const kf_strategy kf_strategy_beam = { "beam", beam_step };
const kf_strategy kf_strategy_parallel = { "parallel", parallel_step };

int kf_strategy_llm_submit(kf_db *db, int64_t campaign_id, const char *parent, const char *code,
                           int64_t *proposal_id, char *err, size_t errlen)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    /* the campaign's row lock: the same one the strategy step takes */
    const char *pl[1] = { cid };
    PGresult *r = kf_db_exec(db, "SELECT state FROM campaigns WHERE id = $1::bigint FOR UPDATE", 1, pl, err, errlen);
    if (!r) goto fail;
    int finished = PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "done");
    PQclear(r);
    if (finished) { /* its jobs would never be handed out: refuse instead of queueing */
        kf_db_rollback(db);
        snprintf(err, errlen, "is done: it evaluates nothing more (create a new campaign with this file "
                              "as --seed, or kfarm campaign extend it)");
        return -2;
    }
    if (parent) {
        const char *pp[2] = { cid, parent };
        r = kf_db_exec(db, "SELECT 1 FROM candidates WHERE campaign_id = $1::bigint AND id = $2::bigint", 2, pp, err,
                       errlen);
        if (!r) goto fail;
        int ok = PQntuples(r) == 1;
        PQclear(r);
        if (!ok) {
            kf_db_rollback(db);
            snprintf(err, errlen, "has no candidate %s (--parent)", parent);
            return -2;
        }
    }
    const char *pi[3] = { cid, parent, code };
    r = kf_db_exec(db,
        "INSERT INTO proposals (campaign_id, kind, state, parent_id, code, model, answered_at) "
        "VALUES ($1::bigint, 'human', 'approved', $2::bigint, $3, 'human', now()) RETURNING id",
        3, pi, err, errlen);
    if (!r) goto fail;
    int64_t pid = kf_db_i64(r, 0, 0, 0);
    PQclear(r);
    if (kf_strategy_llm_materialize(db, pid, err, errlen) < 0) goto fail;
    if (kf_db_commit(db, err, errlen) < 0) goto fail;
    *proposal_id = pid;
    return 0;
fail:
    kf_db_rollback(db);
    return -1;
}

int kf_strategy_llm_review(kf_db *db, int64_t campaign_id, int64_t id, int approve, const char *note,
                           char *err, size_t errlen)
{
    char cid[24], pid[24], reason[1024];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    snprintf(pid, sizeof(pid), "%lld", (long long)id);
    snprintf(reason, sizeof(reason), "rejected by reviewer%s%s", note ? ": " : "", note ? note : "");
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    const char *pl[1] = { cid };
    if (kf_db_cmd(db, "SELECT 1 FROM campaigns WHERE id = $1::bigint FOR UPDATE", 1, pl, err, errlen) < 0) goto fail;
    const char *p[4] = { cid, pid, note, reason };
    PGresult *r = kf_db_exec(db, approve
        ? "UPDATE proposals SET state = 'approved', reviewer_note = $3 WHERE campaign_id = $1::bigint"
          " AND id = $2::bigint AND state = 'review' AND $4::text IS NOT NULL RETURNING id"
        : "UPDATE proposals SET state = 'rejected', reviewer_note = $3, reason = $4,"
          " finished_at = now() WHERE campaign_id = $1::bigint AND id = $2::bigint"
          " AND state = 'review' RETURNING id", 4, p, err, errlen);
    if (!r) goto fail;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 0) {
        kf_db_rollback(db);
        return 0;
    }
    if (approve && kf_strategy_llm_materialize(db, id, err, errlen) < 0) goto fail;
    if (kf_db_commit(db, err, errlen) < 0) goto fail;
    return 1;
fail:
    kf_db_rollback(db);
    return -1;
}
