/*
 * bests.c -- per-target and campaign-wide bests with ties. See bests.h.
 */
#include "bests.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "noise.h"

#define KF_STR_(x) #x
#define KF_STR(x) KF_STR_(x)

/* x where it is a positive number, else NULL (SQL) */
#define POS(x) "CASE WHEN " x " > 0 THEN " x " END"

static json_t *num_or_null(PGresult *r, int i, int c)
{
    return PQgetisnull(r, i, c) ? json_null() : json_real(kf_db_f64(r, i, c, 0));
}

/* One result row R from columns off.. (candidate, speedup, lo, hi, cv,
 * candidate_us, baseline_us, worker, defines, confirmation, confirmed by). */
static json_t *row_json(PGresult *r, int i, int off)
{
    json_t *o = json_object();
    json_object_set_new(o, "candidate", json_integer(kf_db_i64(r, i, off, 0)));
    json_object_set_new(o, "speedup", num_or_null(r, i, off + 1));
    json_object_set_new(o, "lo", num_or_null(r, i, off + 2));
    json_object_set_new(o, "hi", num_or_null(r, i, off + 3));
    json_object_set_new(o, "cv", num_or_null(r, i, off + 4));
    json_object_set_new(o, "candidate_us", num_or_null(r, i, off + 5));
    json_object_set_new(o, "baseline_us", num_or_null(r, i, off + 6));
    json_object_set_new(o, "worker", kf_db_str(r, i, off + 7) ? json_string(kf_db_str(r, i, off + 7))
                                                               : json_null());
    json_t *d = json_loads(PQgetvalue(r, i, off + 8), 0, NULL);
    json_object_set_new(o, "defines", d ? d : json_object());
    /* fleet trust (coordinator/verify.h): confirmed by a second evaluation? */
    json_object_set_new(o, "confirmation", json_string(PQgetvalue(r, i, off + 9)));
    json_object_set_new(o, "confirmed_by", kf_db_str(r, i, off + 10) ? json_string(kf_db_str(r, i, off + 10))
                                                                       : json_null());
    return o;
}

static double jd(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

/* ---- the overall best of a campaign with several targets ----
 *
 * The overall best is the candidate ok on every target, confirmed on every
 * target first, then by the geometric mean of its speedups, then by id; its
 * ties are the candidates whose geometric-mean interval overlaps its own.
 * OVERALL_SQL computes them over the candidates in $2 (NULL: all of the
 * campaign's, grouping every ok result: 180 ms at 1,000,000 evaluations).
 *
 * overall_walk finds a set of candidates that holds the winner and every
 * tie, reading each target's results from the top (Fagin's threshold
 * algorithm, "Optimal aggregation algorithms for middleware", PODS 2001):
 * a candidate not among the first m results of any target has, on each
 * target, at most the m-th value there, so its geometric mean is at most
 * the geometric mean of those m-th values (tau). Then:
 *   1. the candidates with a confirmed result (few: evaluations_confirming):
 *      a candidate confirmed on every target is among them, and if one is,
 *      the winner is;
 *   2. else the first m results by speedup of each target
 *      (evaluations_ok_target), m doubling, until the best of the set is
 *      faster than tau, or a target has no more results (then every
 *      candidate ok on every target has been seen);
 *   3. the ties: by the upper end of the interval
 *      (evaluations_ok_campaign, schema/010_status.sql) until tau is below
 *      the winner's lower end: a candidate not seen cannot reach it.
 * OVERALL_SQL over that set then ranks exactly as over the whole campaign.
 * Where the bound does not hold -- a value that is not a positive finite
 * number (ln() of it is skipped or infinite), a winner whose lower end is
 * not positive (everything ties with it) -- or the walk grows past
 * WALK_MAX, the whole campaign is grouped instead. */
#define OK_PRED                                                                                    \
    "e.is_final AND e.verdict = 'ok' AND e.speedup > 0 AND e.job_purpose = 'eval'"
static const char OVERALL_SQL[] =
    /* from the final ok results only: a job per target and candidate
     * (job_keys_candidate, schema 015), so a candidate is ok on every target when it has
     * that many of them. ln() only of positive values (an interval's end
     * may be missing). evaluations_ok_campaign holds every column read
     * here: an index-only scan without a join (or, for a set, the
     * candidates' results by evaluations_candidate) */
    /* each mean summed in target order: a float sum depends on its order,
     * and the rows of a candidate arrive in index order over the whole
     * campaign but in heap order over a set, so equal candidates would
     * otherwise rank by the plan. Only the campaign's targets count (the
     * walk reads those) */
    "WITH g AS MATERIALIZED (SELECT e.candidate_id id,"
    "  exp(avg(ln(e.speedup) ORDER BY e.job_target)) sp,"
    "  exp(avg(ln(" POS("COALESCE(e.speedup_lo, e.speedup)") ") ORDER BY e.job_target)) lo,"
    "  exp(avg(ln(" POS("COALESCE(e.speedup_hi, e.speedup)") ") ORDER BY e.job_target)) hi, max(e.cv) cv,"
    "  bool_and(e.confirmation = 'confirmed') conf "
    " FROM evaluations e"
    " WHERE " OK_PRED " AND e.confirmation <> 'disputed' AND e.job_campaign_id = $1::bigint"
    "  AND e.job_target = ANY((SELECT targets FROM campaigns WHERE id = $1::bigint)::text[])"
    "  AND ($2::bigint[] IS NULL OR e.candidate_id = ANY($2::bigint[]))"
    " GROUP BY e.candidate_id"
    " HAVING count(*) = (SELECT cardinality(targets) FROM campaigns WHERE id = $1::bigint)),"
    /* the winner, then only the rows whose interval overlaps its own (the
     * ties, as kf_noise_tie below reads them: a missing end is 0): the
     * campaign's other candidates are not sent, nor their defines */
    " top AS (SELECT * FROM g ORDER BY conf DESC, sp DESC, id LIMIT 1) "
    "SELECT g.id, g.sp, g.lo, g.hi, g.cv, CASE WHEN g.id = top.id THEN"
    "  (SELECT k.defines::text FROM candidates k WHERE k.id = g.id) END, g.conf"
    " FROM g, top WHERE g.id = top.id OR (COALESCE(g.lo, 0) <= COALESCE(top.hi, 0)"
    "  AND COALESCE(top.lo, 0) <= COALESCE(g.hi, 0)) "
    "ORDER BY g.id <> top.id, g.conf DESC, g.sp DESC, g.id";

/* the first $2 results of each target of campaign $1 by speedup (by the
 * interval's upper end: WALK_HI_SQL), not disputed: target ordinal,
 * candidate, value */
#define WALK_SQL(V)                                                                                \
    "SELECT t.o, x.candidate_id, x.v FROM campaigns c CROSS JOIN unnest(c.targets) WITH ORDINALITY t(t, o)" \
    " CROSS JOIN LATERAL (SELECT e.candidate_id, " V " AS v FROM evaluations e"                     \
    "   WHERE " OK_PRED " AND e.confirmation <> 'disputed'"                                         \
    "   AND e.job_campaign_id = c.id AND e.job_target = t.t ORDER BY " V " DESC LIMIT $2::int) x"    \
    " WHERE c.id = $1::bigint"
static const char WALK_SP_SQL[] = WALK_SQL("e.speedup");
static const char WALK_HI_SQL[] = WALK_SQL("COALESCE(e.speedup_hi, e.speedup)");

#define WALK_FIRST 64      /* results per target read first; doubled each round */
#define WALK_MAX 65536     /* past this many per target, or candidates in the set: group them all */
#define WALK_EPS 1e-9      /* relative margin for the threshold: tau is computed here, the means
                            * in PostgreSQL, each with its own rounding */
#define WALK_MAX_TARGETS 64

/* a set of candidate ids */
typedef struct {
    int64_t *v;
    size_t n, cap;
} idset;

static int idset_add(idset *s, int64_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        int64_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* sorts and dedupes s */
static void idset_unique(idset *s)
{
    if (s->n) qsort(s->v, s->n, sizeof(*s->v), cmp_i64);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (k == 0 || s->v[i] != s->v[k - 1]) s->v[k++] = s->v[i];
    s->n = k;
}

/* s deduped; its PostgreSQL array literal, malloc'd, or NULL */
static char *idset_text(idset *s)
{
    idset_unique(s);
    char *t = malloc(s->n * 21 + 3), *p = t;
    if (!t) return NULL;
    *p++ = '{';
    for (size_t i = 0; i < s->n; i++) p += sprintf(p, i ? ",%lld" : "%lld", (long long)s->v[i]);
    *p++ = '}';
    *p = 0;
    return t;
}

/* OVERALL_SQL over the candidates of s (NULL: all) */
static PGresult *overall_rows(kf_db *db, const char *cid, idset *s, char *err, size_t errlen)
{
    char *ids = s ? idset_text(s) : NULL;
    if (s && !ids) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    const char *p[2] = { cid, ids };
    PGresult *r = kf_db_exec(db, OVERALL_SQL, 2, p, err, errlen);
    free(ids);
    return r;
}

/* One round of the walk over the nt targets: the first m results of each
 * (sql: WALK_SP_SQL or WALK_HI_SQL) into s, and into *tau the geometric
 * mean of each target's last value read. 1: a target has fewer than m (all
 * of its results read), 0: not, 2: a value is not a positive finite number
 * (the bound does not hold), -1: error in err. */
static int walk_round(kf_db *db, const char *cid, const char *sql, int nt, int m, idset *s, double *tau,
                      char *err, size_t errlen)
{
    char ms[24];
    snprintf(ms, sizeof(ms), "%d", m);
    const char *p[2] = { cid, ms };
    PGresult *r = kf_db_exec(db, sql, 2, p, err, errlen);
    if (!r) return -1;
    int count[WALK_MAX_TARGETS + 1] = { 0 };
    double last[WALK_MAX_TARGETS + 1] = { 0 };
    for (int i = 0; i < PQntuples(r); i++) {
        int o = (int)kf_db_i64(r, i, 0, 0);
        double v = kf_db_f64(r, i, 2, 0);
        if (o < 1 || o > nt || !(v > 0) || !isfinite(v)) {
            PQclear(r);
            return 2;
        }
        if (idset_add(s, kf_db_i64(r, i, 1, 0)) < 0) {
            PQclear(r);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        if (count[o] == 0 || v < last[o]) last[o] = v;
        count[o]++;
    }
    PQclear(r);
    idset_unique(s); /* each round reads the first rows again */
    double lsum = 0;
    for (int o = 1; o <= nt; o++) {
        if (count[o] < m) return 1;
        lsum += log(last[o]);
    }
    *tau = exp(lsum / nt);
    return 0;
}

/* overall_walk's statements, in the caller's transaction */
static PGresult *overall_walk_in(kf_db *db, const char *cid, int nt, int *read, char *err, size_t errlen)
{
    *read = -1;
    if (nt < 2 || nt > WALK_MAX_TARGETS) return overall_rows(db, cid, NULL, err, errlen);
    idset s = { 0 };
    PGresult *g = NULL;
    double tau = 0;
    int rc = 0;
    /* 1. the candidates with a confirmed result (few; evaluations_confirming) */
    const char *p[1] = { cid };
    PGresult *r = kf_db_exec(db,
        "SELECT DISTINCT e.candidate_id FROM evaluations e WHERE e.confirmation IN ('confirmed', 'pending')"
        " AND e.confirmation = 'confirmed' AND " OK_PRED " AND e.job_campaign_id = $1::bigint"
        " LIMIT " KF_STR(WALK_MAX), 1, p, err, errlen);
    if (!r) goto fail;
    for (int i = 0; i < PQntuples(r); i++)
        if (idset_add(&s, kf_db_i64(r, i, 0, 0)) < 0) {
            PQclear(r);
            goto oom;
        }
    int many = PQntuples(r) >= WALK_MAX;
    PQclear(r);
    if (many) goto whole;
    if (s.n) {
        if (!(g = overall_rows(db, cid, &s, err, errlen))) goto fail;
    }
    /* 2. no candidate confirmed everywhere: the fastest by speedup */
    if (!g || PQntuples(g) == 0 || *PQgetvalue(g, 0, 6) != 't') {
        for (int m = WALK_FIRST;; m *= 2) {
            if (m > WALK_MAX || s.n > WALK_MAX) goto whole;
            rc = walk_round(db, cid, WALK_SP_SQL, nt, m, &s, &tau, err, errlen);
            if (rc < 0) goto fail;
            if (rc == 2) goto whole;
            PQclear(g);
            if (!(g = overall_rows(db, cid, &s, err, errlen))) goto fail;
            if (rc == 1) break; /* a target read whole: every candidate ok everywhere is in s */
            if (PQntuples(g) > 0 && kf_db_f64(g, 0, 1, 0) > tau * (1 + WALK_EPS)) break;
        }
    }
    if (PQntuples(g) == 0) goto done; /* no candidate is ok on every target */
    /* 3. its ties: down each target by the interval's upper end */
    double lo = kf_db_f64(g, 0, 2, 0);
    if (PQgetisnull(g, 0, 2) || !(lo > 0) || !isfinite(lo)) goto whole;
    /* an upper end <= 0 lower down is left out of its candidate's mean
     * (POS): that mean is then not bounded by the walk */
    r = kf_db_exec(db,
        "SELECT count(*) FROM campaigns c CROSS JOIN unnest(c.targets) t(t) CROSS JOIN LATERAL"
        " (SELECT 1 FROM evaluations e WHERE " OK_PRED " AND e.job_campaign_id = c.id AND e.job_target = t.t"
        "  AND e.confirmation <> 'disputed' AND COALESCE(e.speedup_hi, e.speedup) <= 0 LIMIT 1) x"
        " WHERE c.id = $1::bigint", 1, p, err, errlen);
    if (!r) goto fail;
    int nonpos = kf_db_i64(r, 0, 0, 0) > 0;
    PQclear(r);
    if (nonpos) goto whole;
    for (int m = WALK_FIRST;; m *= 2) {
        if (m > WALK_MAX || s.n > WALK_MAX) goto whole;
        rc = walk_round(db, cid, WALK_HI_SQL, nt, m, &s, &tau, err, errlen);
        if (rc < 0) goto fail;
        if (rc == 2) goto whole;
        if (rc == 1 || tau < lo * (1 - WALK_EPS)) break;
    }
    PQclear(g);
    g = overall_rows(db, cid, &s, err, errlen);
done:
    *read = (int)s.n;
    free(s.v);
    return g;
whole:
    PQclear(g);
    free(s.v);
    return overall_rows(db, cid, NULL, err, errlen);
oom:
    snprintf(err, errlen, "out of memory");
fail:
    PQclear(g);
    free(s.v);
    return NULL;
}

/* The overall best and its ties of campaign cid with nt targets: rows of
 * OVERALL_SQL over the set the walk above finds, or over the whole
 * campaign where the bound does not hold. Its statements read one
 * snapshot (a REPEATABLE READ transaction of its own, or the caller's: the
 * export's is one): a result that changed between them -- the winner's
 * pending result disputed, a candidate completed on its last target --
 * could otherwise leave a candidate the walk did not read ranked above
 * the ones it did. NULL with err on errors. */
static PGresult *overall_walk(kf_db *db, const char *cid, int nt, int *read, char *err, size_t errlen)
{
    int own = PQtransactionStatus(kf_db_conn(db)) == PQTRANS_IDLE;
    if (own && kf_db_cmd(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err, errlen) < 0)
        return NULL;
    PGresult *g = overall_walk_in(db, cid, nt, read, err, errlen);
    if (own) {
        char e2[256];
        if (!g) kf_db_rollback(db);
        else if (kf_db_commit(db, e2, sizeof(e2)) < 0) {
            snprintf(err, errlen, "%s", e2);
            PQclear(g);
            return NULL;
        }
    }
    return g;
}

int kf_bests_overall_read(kf_db *db, int64_t campaign_id, char *err, size_t errlen)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    const char *p[1] = { cid };
    PGresult *r = kf_db_exec(db, "SELECT cardinality(targets) FROM campaigns WHERE id = $1::bigint", 1, p, err,
                             errlen);
    if (!r) return -2;
    int nt = PQntuples(r) ? (int)kf_db_i64(r, 0, 0, 0) : 0;
    PQclear(r);
    int read = -1;
    PGresult *g = overall_walk(db, cid, nt, &read, err, errlen);
    if (!g) return -2;
    PQclear(g);
    return read;
}

json_t *kf_bests(kf_db *db, int64_t campaign_id, char *err, size_t errlen)
{
    return kf_bests_top(db, campaign_id, 0, err, errlen);
}

/* The columns and conditions of a tie of the best evaluation $3 (candidate
 * $4) of campaign $1 on target $2; see kf_bests_top. TIE_WHERE is the
 * condition on `evaluations t` alone. */
#define TIE_COLS                                                                                    \
    "SELECT e.candidate_id, e.speedup, COALESCE(e.speedup_lo, e.speedup), COALESCE(e.speedup_hi, e.speedup)," \
    "  e.cv, e.candidate_us, e.baseline_us, e.worker_id, k.defines::text,"                        \
    "  COALESCE(e.confirmation, 'none'), e.confirmed_by_worker, e.confirmation = 'confirmed' AS conf "
#define TIE_WHERE                                                                                   \
    "  WHERE t.is_final AND t.verdict = 'ok' AND t.speedup > 0 AND t.confirmation <> 'disputed'"     \
    "  AND COALESCE(t.speedup_hi, t.speedup) >="                                                  \
    "      (SELECT COALESCE(b.speedup_lo, b.speedup) FROM evaluations b WHERE b.id = $3::bigint)" \
    "  AND COALESCE(t.speedup_lo, t.speedup) <="                                                  \
    "      (SELECT COALESCE(b.speedup_hi, b.speedup) FROM evaluations b WHERE b.id = $3::bigint)" \
    "  AND t.job_campaign_id = $1::bigint AND t.job_target = $2 AND t.job_purpose = 'eval'"       \
    "  AND t.candidate_id <> $4::bigint "
#define TIE_FROM                                                                                    \
    "FROM evaluations e JOIN candidates k ON k.id = e.candidate_id "                                 \
    "WHERE e.id IN (SELECT t.id FROM evaluations t" TIE_WHERE ") "
/* The same ties, cut before any heap row is read: one part of them (the
 * condition on t.confirmation follows) picked and ordered from
 * evaluations_ok_campaign alone, whose INCLUDE columns hold everything the
 * conditions and the order need (schema 010: an index-only scan). */
#define TIE_PICK                                                                                    \
    "SELECT t.id, t.confirmation = 'confirmed' AS conf, t.speedup, t.candidate_id FROM evaluations t" TIE_WHERE

json_t *kf_bests_top(kf_db *db, int64_t campaign_id, int max_ties, char *err, size_t errlen)
{
    char cid[24];
    snprintf(cid, sizeof(cid), "%lld", (long long)campaign_id);
    const char *p[1] = { cid };
    /* the best of each target: the fastest confirmed result, else the
     * fastest not disputed (a disputed result is never named); intervals
     * default to the point (results stored before noise was recorded).
     * Each branch reads the top of an index (evaluations_ok_target: the
     * campaign's results on the target, schema/009_eval_target.sql; or
     * evaluations_confirming for the few confirmed), not the campaign's
     * results. */
    PGresult *r = kf_db_exec(db,
        "SELECT t.t, b.cand, b.speedup, b.lo, b.hi, b.cv, b.candidate_us, b.baseline_us, b.worker_id,"
        "  k.defines::text, b.confirmation, b.confirmed_by_worker, b.eid "
        "FROM campaigns c CROSS JOIN unnest(c.targets) WITH ORDINALITY t(t, o)"
        " LEFT JOIN LATERAL (SELECT * FROM ("
        "   (SELECT 0 AS pri, e.id AS eid, e.candidate_id AS cand, e.speedup,"
        "      COALESCE(e.speedup_lo, e.speedup) AS lo, COALESCE(e.speedup_hi, e.speedup) AS hi, e.cv,"
        "      e.candidate_us, e.baseline_us, e.worker_id, e.confirmation, e.confirmed_by_worker"
        "    FROM evaluations e"
        "    WHERE e.confirmation IN ('confirmed', 'pending') AND e.confirmation = 'confirmed'"
        "      AND e.is_final AND e.verdict = 'ok' AND e.speedup > 0"
        "      AND e.job_campaign_id = c.id AND e.job_target = t.t AND e.job_purpose = 'eval'"
        "    ORDER BY e.speedup DESC, e.candidate_id LIMIT 1)"
        "   UNION ALL"
        "   (SELECT 1, e.id, e.candidate_id, e.speedup,"
        "      COALESCE(e.speedup_lo, e.speedup), COALESCE(e.speedup_hi, e.speedup), e.cv,"
        "      e.candidate_us, e.baseline_us, e.worker_id, e.confirmation, e.confirmed_by_worker"
        "    FROM evaluations e"
        "    WHERE e.is_final AND e.verdict = 'ok' AND e.speedup > 0 AND e.confirmation <> 'disputed'"
        "      AND e.job_campaign_id = c.id AND e.job_target = t.t AND e.job_purpose = 'eval'"
        "    ORDER BY e.speedup DESC, e.candidate_id LIMIT 1)) x ORDER BY pri LIMIT 1) b ON true"
        " LEFT JOIN candidates k ON k.id = b.cand "
        "WHERE c.id = $1::bigint ORDER BY t.o", 1, p, err, errlen);
    if (!r) return NULL;
    json_t *out = json_object(), *targets = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        const char *t = PQgetvalue(r, i, 0);
        json_t *cur = json_object(), *ties = json_array();
        json_object_set_new(cur, "target", json_string(t));
        json_object_set_new(cur, "best", PQgetisnull(r, i, 1) ? json_null() : row_json(r, i, 1));
        json_object_set_new(cur, "ties", ties);
        json_array_append_new(targets, cur);
        if (PQgetisnull(r, i, 1)) continue;
        /* its ties: the results whose interval overlaps the best's
         * (kf_noise_tie), in the order above (confirmed, fastest, id): the
         * campaign's results on the target whose upper end reaches the
         * best's lower end, a range of evaluations_ok_campaign (schema
         * 010). All of them; or at most max_ties: the confirmed ones first,
         * then the others, each part cut at max_ties + 1 (one more says
         * there are more). Where there are fewer, that is all of them in
         * the same order, so no count is read first. The cut is made on
         * the index's columns before the rows are fetched (TIE_PICK): a
         * best tied with 15,543 results fetched every one of them from
         * the heap to keep 101 (84 ms; docs/benchmarks.md, 2026-12-06). */
        char lim[24];
        snprintf(lim, sizeof(lim), "%d", max_ties > 0 ? max_ties + 1 : 0);
        const char *pt[5] = { cid, t, PQgetvalue(r, i, 12), PQgetvalue(r, i, 1), lim };
        PGresult *rt = max_ties <= 0
            ? kf_db_exec(db, TIE_COLS TIE_FROM
                  "ORDER BY e.confirmation = 'confirmed' DESC, e.speedup DESC, e.candidate_id", 4, pt, err, errlen)
            : kf_db_exec(db,
                  TIE_COLS "FROM (("
                  TIE_PICK "AND t.confirmation IN ('confirmed', 'pending') AND t.confirmation = 'confirmed'"
                  "  ORDER BY t.speedup DESC, t.candidate_id LIMIT $5::int)"
                  " UNION ALL (" TIE_PICK "AND t.confirmation <> 'confirmed'"
                  "  ORDER BY t.speedup DESC, t.candidate_id LIMIT $5::int)) s"
                  " JOIN evaluations e ON e.id = s.id JOIN candidates k ON k.id = e.candidate_id "
                  "ORDER BY s.conf DESC, s.speedup DESC, s.candidate_id LIMIT $5::int", 5, pt, err, errlen);
        if (!rt) {
            PQclear(r);
            json_decref(out);
            json_decref(targets);
            return NULL;
        }
        int nt = PQntuples(rt);
        if (max_ties > 0 && nt > max_ties) {
            nt = max_ties;
            json_object_set_new(cur, "ties_more", json_true());
        }
        for (int k = 0; k < nt; k++) json_array_append_new(ties, row_json(rt, k, 0));
        PQclear(rt);
    }
    PQclear(r);
    json_object_set_new(out, "targets", targets);

    /* overall: ok on every target, geometric mean of the speedups. With one
     * target that is the target's best and its ties, in the same order
     * (confirmed, fastest, id), without grouping every candidate of the
     * campaign; with several, the candidates are grouped. */
    json_t *overall = json_null();
    if (json_array_size(targets) == 1) {
        json_t *t0 = json_array_get(targets, 0), *b0 = json_object_get(t0, "best");
        if (!json_is_null(b0)) {
            overall = json_object();
            json_object_set(overall, "candidate", json_object_get(b0, "candidate"));
            json_object_set(overall, "speedup", json_object_get(b0, "speedup"));
            json_object_set(overall, "lo", json_object_get(b0, "lo"));
            json_object_set(overall, "hi", json_object_get(b0, "hi"));
            json_object_set(overall, "cv", json_object_get(b0, "cv"));
            json_object_set(overall, "defines", json_object_get(b0, "defines"));
            json_object_set_new(overall, "confirmed",
                                json_boolean(!strcmp(json_string_value(json_object_get(b0, "confirmation")),
                                                     "confirmed")));
            json_t *ties = json_array(), *x;
            size_t k;
            json_array_foreach(json_object_get(t0, "ties"), k, x)
                json_array_append(ties, json_object_get(x, "candidate"));
            json_object_set_new(overall, "ties", ties);
        }
    } else {
        int read;
        r = overall_walk(db, cid, (int)json_array_size(targets), &read, err, errlen);
        if (!r) {
            json_decref(out);
            return NULL;
        }
        if (PQntuples(r) > 0) {
            overall = json_object();
            int64_t id = kf_db_i64(r, 0, 0, 0);
            double lo = kf_db_f64(r, 0, 2, 0), hi = kf_db_f64(r, 0, 3, 0);
            json_object_set_new(overall, "candidate", json_integer(id));
            json_object_set_new(overall, "speedup", json_real(kf_db_f64(r, 0, 1, 0)));
            json_object_set_new(overall, "lo", json_real(lo));
            json_object_set_new(overall, "hi", json_real(hi));
            json_object_set_new(overall, "cv", num_or_null(r, 0, 4));
            json_t *d = json_loads(PQgetvalue(r, 0, 5), 0, NULL);
            json_object_set_new(overall, "defines", d ? d : json_object());
            json_object_set_new(overall, "confirmed", json_boolean(*PQgetvalue(r, 0, 6) == 't'));
            json_t *ties = json_array();
            for (int i = 1; i < PQntuples(r); i++)
                if (kf_noise_tie(kf_db_f64(r, i, 2, 0), kf_db_f64(r, i, 3, 0), lo, hi))
                    json_array_append_new(ties, json_integer(kf_db_i64(r, i, 0, 0)));
            json_object_set_new(overall, "ties", ties);
        }
        PQclear(r);
    }

    /* the winner's result on each target, and the per-target bests that are
     * not ok everywhere (where not, and their verdict there) */
    json_t *notev = json_array(), *per = json_array();
    size_t ti;
    json_t *tv;
    json_array_foreach(targets, ti, tv) {
        json_t *best = json_object_get(tv, "best");
        if (json_is_null(best)) continue;
        int64_t bid = json_integer_value(json_object_get(best, "candidate"));
        char bs[24];
        snprintf(bs, sizeof(bs), "%lld", (long long)bid);
        const char *pb[2] = { cid, bs };
        r = kf_db_exec(db,
            "SELECT t, COALESCE(e.verdict, 'none yet') FROM campaigns c CROSS JOIN unnest(c.targets) t"
            /* its evaluation job's final result on each target, by
             * evaluations_candidate and the evaluation's own target and
             * purpose (schema 009; one evaluation job per candidate and
             * target, one final result per job) */
            " LEFT JOIN evaluations e ON e.candidate_id = $2::bigint AND e.job_target = t"
            "   AND e.job_purpose = 'eval' AND e.is_final "
            "WHERE c.id = $1::bigint AND (e.verdict IS DISTINCT FROM 'ok') ORDER BY t", 2, pb, err, errlen);
        if (!r) goto fail;
        if (PQntuples(r) > 0) {
            json_t *o = json_object(), *no = json_array();
            json_object_set_new(o, "candidate", json_integer(bid));
            json_object_set_new(o, "fast_on", json_string(json_string_value(json_object_get(tv, "target"))));
            json_object_set_new(o, "speedup", json_real(jd(best, "speedup")));
            for (int i = 0; i < PQntuples(r); i++) {
                json_t *x = json_object();
                json_object_set_new(x, "target", json_string(PQgetvalue(r, i, 0)));
                json_object_set_new(x, "verdict", json_string(PQgetvalue(r, i, 1)));
                json_array_append_new(no, x);
            }
            json_object_set_new(o, "not_ok", no);
            json_array_append_new(notev, o);
        }
        PQclear(r);
    }
    if (!json_is_null(overall)) {
        char os[24];
        snprintf(os, sizeof(os), "%lld", (long long)json_integer_value(json_object_get(overall, "candidate")));
        const char *po[2] = { cid, os };
        r = kf_db_exec(db,
            "SELECT e.job_target, k.id, e.speedup, COALESCE(e.speedup_lo, e.speedup),"
            "  COALESCE(e.speedup_hi, e.speedup), e.cv, e.candidate_us, e.baseline_us, e.worker_id,"
            "  k.defines::text, e.confirmation, e.confirmed_by_worker"
            " FROM campaigns c CROSS JOIN unnest(c.targets) WITH ORDINALITY t(tn, o)"
            " JOIN evaluations e ON e.candidate_id = $2::bigint AND e.job_target = t.tn"
            "   AND e.job_purpose = 'eval' AND e.is_final AND e.job_campaign_id = c.id"
            " JOIN candidates k ON k.id = e.candidate_id "
            "WHERE c.id = $1::bigint ORDER BY t.o", 2, po, err, errlen);
        if (!r) goto fail;
        for (int i = 0; i < PQntuples(r); i++) {
            json_t *row = row_json(r, i, 1);
            json_object_set_new(row, "target", json_string(PQgetvalue(r, i, 0)));
            json_array_append_new(per, row);
        }
        PQclear(r);
        json_object_set(overall, "per_target", per);
    }
    json_decref(per);
    json_object_set_new(out, "overall", overall);
    json_object_set_new(out, "not_everywhere", notev);
    return out;
fail:
    json_decref(out);
    json_decref(overall);
    json_decref(notev);
    json_decref(per);
    return NULL;
}
