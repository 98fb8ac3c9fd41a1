/*
 * bench_queue.c -- throughput and latency of the PostgreSQL job queue.
 *
 *   bench_queue [--jobs N] [--threads 1,2,4,8] [--task DIR]
 *
 * Against the real database named by $KFARM_DB (migrated here if needed),
 * for each thread count T: create a fresh campaign through the library
 * (kf_campaign_create on tests/tasks/farm_axpy_f32, then kf_campaign_start),
 * add N candidates + N jobs with one INSERT ... SELECT each (a tune expansion
 * of 5,000 variants would take far longer than the benchmark itself), then run
 * T threads, each with its own kf_db connection, doing
 *     kf_queue_lease -> kf_queue_heartbeat -> kf_queue_result("ok")
 * until lease answers NO_JOB. The campaign's only target class is unique to
 * the run ("bench-<pid>-<T>"), so jobs of other campaigns in the same
 * database are never touched and never interfere.
 *
 * Reported per T: wall time, jobs/s, p50/p99 latency (µs) of lease, heartbeat
 * and result (each a separate autocommit statement -> one WAL flush).
 *
 * Verified per T (the benchmark fails, exit 1, if any check fails):
 *   - every result call answered KF_Q_OK and the number for eval jobs
 *     equals N (the farm also queues a verification job for a would-be
 *     best: its results are counted apart);
 *   - in the database, every job of the campaign is 'done' and every eval
 *     job has exactly one evaluation, and it is final (no double store, no
 *     lost job).
 *
 * Output: a human table on stdout, plus one machine-readable line per T:
 *   RESULT queue threads=T jobs=N secs=S jobs_per_s=R lease_p50=.. ...
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "campaign.h"
#include "db.h"
#include "queue.h"

#define MAX_T 64

/* Per-thread state: its connection, its latency samples, its counters. */
typedef struct {
    const char *conninfo;
    const char *cls;            /* target class of this run */
    const kf_queue_config *qc;
    char worker_id[64];
    int cap;                    /* capacity of each sample array */
    int64_t *lease_ns, *hb_ns, *res_ns;
    int n_lease, n_hb, n_res;   /* samples taken */
    long ok_results, other_results, errors; /* ok_results: of eval jobs only */
    char err[512];              /* first fatal error, "" if none */
} worker_ctx;

/* Monotonic clock in ns. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* One worker thread: lease -> heartbeat -> result until NO_JOB. */
static void *worker_main(void *arg)
{
    worker_ctx *w = arg;
    char err[384]; /* shorter than w->err: room for the prefix */
    kf_db *db = kf_db_open(w->conninfo, err, sizeof(err));
    if (!db) {
        snprintf(w->err, sizeof(w->err), "connect: %s", err);
        return NULL;
    }
    const char *cls[1] = { w->cls };
    kf_result res = { .verdict = "ok", .detail = "bench", .metrics_json = "{\"cv\": 0.01}",
                      .compile_log = "", .candidate_us = 10, .baseline_us = 20, .speedup = 2 };
    for (;;) {
        kf_lease l;
        int64_t t0 = now_ns();
        kf_queue_status st = kf_queue_lease(db, w->qc, w->worker_id, cls, 1, &l, err, sizeof(err));
        int64_t t1 = now_ns();
        if (st == KF_Q_NO_JOB) break;
        if (st != KF_Q_OK) {
            /* A database error: count it and retry, but never loop forever. */
            if (++w->errors > 100) {
                snprintf(w->err, sizeof(w->err), "lease: %s", err);
                break;
            }
            continue;
        }
        if (w->n_lease < w->cap) w->lease_ns[w->n_lease++] = t1 - t0;

        t0 = now_ns();
        st = kf_queue_heartbeat(db, w->qc, w->worker_id, l.job_id, l.fencing_token, l.lease_token, 16, err, sizeof(err));
        t1 = now_ns();
        if (st != KF_Q_OK) {
            snprintf(w->err, sizeof(w->err), "heartbeat job %lld: status %d: %s",
                     (long long)l.job_id, (int)st, err);
            break;
        }
        if (w->n_hb < w->cap) w->hb_ns[w->n_hb++] = t1 - t0;

        t0 = now_ns();
        st = kf_queue_result(db, w->qc, w->worker_id, l.job_id, l.fencing_token, l.lease_token, 16, &res, NULL,
                             err, sizeof(err));
        t1 = now_ns();
        if (st == KF_Q_OK) {
            if (!l.verify) w->ok_results++; /* a verification job is checked in the database */
        } else {
            w->other_results++;
            snprintf(w->err, sizeof(w->err), "result job %lld: status %d: %s",
                     (long long)l.job_id, (int)st, err);
            break;
        }
        if (w->n_res < w->cap) w->res_ns[w->n_res++] = t1 - t0;
    }
    kf_db_close(db);
    return NULL;
}

/* qsort comparator for int64_t. */
static int cmp_i64(const void *a, const void *b);

/* Median (µs) of v[from..to) -- copied, v keeps its order. 0 if empty. */
static double median_us(const int64_t *v, int from, int to)
{
    int n = to - from;
    if (n <= 0) return 0;
    int64_t *c = malloc(sizeof(int64_t) * (size_t)n);
    if (!c) return 0;
    memcpy(c, v + from, sizeof(int64_t) * (size_t)n);
    qsort(c, (size_t)n, sizeof(int64_t), cmp_i64);
    double m = (double)c[n / 2] / 1000.0;
    free(c);
    return m;
}

/* qsort comparator for int64_t. */
static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Percentile p (0..100) of sorted v[0..n), in µs (nearest rank). */
static double pct_us(const int64_t *v, long n, double p)
{
    if (n <= 0) return 0;
    long i = (long)(p / 100.0 * (double)n + 0.5);
    if (i < 1) i = 1;
    if (i > n) i = n;
    return (double)v[i - 1] / 1000.0;
}

/* Gather the samples selected by `which` (0 lease, 1 heartbeat, 2 result)
 * of all threads into one sorted, malloc'ed array; *n receives its length. */
static int64_t *merge_sorted(worker_ctx *w, int t, int which, long *n)
{
    long total = 0;
    for (int i = 0; i < t; i++)
        total += which == 0 ? w[i].n_lease : which == 1 ? w[i].n_hb : w[i].n_res;
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    if (!all) return NULL;
    long k = 0;
    for (int i = 0; i < t; i++) {
        const int64_t *src = which == 0 ? w[i].lease_ns : which == 1 ? w[i].hb_ns : w[i].res_ns;
        int m = which == 0 ? w[i].n_lease : which == 1 ? w[i].n_hb : w[i].n_res;
        memcpy(all + k, src, sizeof(int64_t) * (size_t)m);
        k += m;
    }
    qsort(all, (size_t)total, sizeof(int64_t), cmp_i64);
    *n = total;
    return all;
}

/* First column of the first row of a one-parameter query, as a number;
 * -1 on error (reason in err). */
static long long q1(kf_db *db, const char *sql, const char *param, char *err, size_t errlen)
{
    const char *p[1] = { param };
    PGresult *r = kf_db_exec(db, sql, param ? 1 : 0, param ? p : NULL, err, errlen);
    if (!r) return -1;
    long long v = PQntuples(r) ? kf_db_i64(r, 0, 0, -1) : -1;
    PQclear(r);
    return v;
}

/* Create the campaign of one run (target class cls) with njobs queued jobs.
 * *cid receives its id. Returns 0 or -1 with reason. */
static int setup_campaign(kf_db *db, const char *task_dir, const char *cls, int njobs,
                          int64_t *cid, char *err, size_t errlen)
{
    char name[128];
    snprintf(name, sizeof(name), "bench-queue-%s-%lld", cls, (long long)time(NULL));
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.name = name;
    spec.task_dir = task_dir;
    spec.targets[0] = cls;
    spec.n_targets = 1;
    if (kf_campaign_create(db, &spec, cid, err, errlen) < 0) return -1;
    if (kf_campaign_start(db, name, err, errlen) < 0) return -1;
    char id[32], n[32];
    snprintf(id, sizeof(id), "%lld", (long long)*cid);
    snprintf(n, sizeof(n), "%d", njobs);
    const char *p[2] = { id, n }, *pj[2] = { id, cls };
    /* N variants of the seed (distinct defines, as a tune expansion makes)
     * and one job each on the run's class. */
    if (kf_db_cmd(db,
            "INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer) "
            "SELECT s.campaign_id, s.source, s.sha256, jsonb_build_object('BENCH', g::text),"
            "       s.id, 'human' "
            "FROM candidates s, generate_series(1, $2::int) g "
            "WHERE s.campaign_id = $1::bigint AND s.proposer = 'seed'",
            2, p, err, errlen) < 0)
        return -1;
    if (kf_db_cmd(db,
            "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts) "
            "SELECT id, campaign_id, $2, 3 FROM candidates "
            "WHERE campaign_id = $1::bigint AND proposer = 'human' ORDER BY id",
            2, pj, err, errlen) < 0)
        return -1;
    if (kf_db_cmd(db, "ANALYZE jobs", 0, NULL, err, errlen) < 0) return -1;
    long long q = q1(db, "SELECT count(*) FROM jobs WHERE campaign_id = $1::bigint AND state = 'queued'",
                     id, err, errlen);
    if (q != njobs) {
        if (q >= 0) snprintf(err, errlen, "expected %d queued jobs, found %lld", njobs, q);
        return -1;
    }
    return 0;
}

/* Check in the database that every job of campaign cid is done with exactly
 * one evaluation, which is final. Returns 0, or -1 with what is wrong. */
static int verify_campaign(kf_db *db, int64_t cid, int njobs, char *err, size_t errlen)
{
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)cid);
    const char *p[1] = { id };
    PGresult *r = kf_db_exec(db,
        /* the campaign's eval jobs; its verification jobs (queued by the
         * farm for a would-be best) must be done too */
        "SELECT count(*) FILTER (WHERE j.purpose = 'eval'),"
        "       count(*) FILTER (WHERE j.state <> 'done'),"
        "       count(*) FILTER (WHERE j.purpose = 'eval' AND (e.n_final <> 1 OR e.n_final IS NULL)),"
        "       count(*) FILTER (WHERE j.purpose = 'eval' AND (e.n_all <> 1 OR e.n_all IS NULL)),"
        "       COALESCE(sum(e.n_all) FILTER (WHERE j.purpose = 'eval'), 0) "
        "FROM jobs j LEFT JOIN ("
        "  SELECT job_id, count(*) AS n_all, count(*) FILTER (WHERE is_final) AS n_final"
        "  FROM evaluations GROUP BY job_id) e ON e.job_id = j.id "
        "WHERE j.campaign_id = $1::bigint", 1, p, err, errlen);
    if (!r) return -1;
    long long jobs = kf_db_i64(r, 0, 0, -1), not_done = kf_db_i64(r, 0, 1, -1),
              bad_final = kf_db_i64(r, 0, 2, -1), bad_all = kf_db_i64(r, 0, 3, -1),
              evals = kf_db_i64(r, 0, 4, -1);
    PQclear(r);
    if (jobs != njobs || not_done != 0 || bad_final != 0 || bad_all != 0 || evals != njobs) {
        snprintf(err, errlen, "jobs %lld (want %d), not done %lld, without exactly one final "
                 "evaluation %lld, with != 1 evaluation %lld, evaluations %lld",
                 jobs, njobs, not_done, bad_final, bad_all, evals);
        return -1;
    }
    return 0;
}

/* One run with t threads. Prints its table row and RESULT line. Returns 0,
 * or -1 with reason (setup, worker failure, or verification failed). */
static int run_once(const char *conninfo, kf_db *db, const char *task_dir, int t, int njobs,
                    char *err, size_t errlen)
{
    char cls[64];
    snprintf(cls, sizeof(cls), "bench-%d-%d", (int)getpid(), t);
    int64_t cid = 0;
    if (setup_campaign(db, task_dir, cls, njobs, &cid, err, errlen) < 0) return -1;

    kf_queue_config qc;
    kf_queue_config_default(&qc);
    worker_ctx w[MAX_T];
    pthread_t th[MAX_T];
    memset(w, 0, sizeof(w));
    int rc = 0, started = 0;
    for (int i = 0; i < t; i++) {
        w[i].conninfo = conninfo;
        w[i].cls = cls;
        w[i].qc = &qc;
        w[i].cap = njobs;
        snprintf(w[i].worker_id, sizeof(w[i].worker_id), "bench-%d-%d-w%d", (int)getpid(), t, i);
        w[i].lease_ns = malloc(sizeof(int64_t) * (size_t)njobs);
        w[i].hb_ns = malloc(sizeof(int64_t) * (size_t)njobs);
        w[i].res_ns = malloc(sizeof(int64_t) * (size_t)njobs);
        if (!w[i].lease_ns || !w[i].hb_ns || !w[i].res_ns) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            goto out;
        }
    }
    int64_t start = now_ns();
    for (int i = 0; i < t; i++) {
        int e = pthread_create(&th[i], NULL, worker_main, &w[i]);
        if (e) {
            snprintf(err, errlen, "pthread_create: %s", strerror(e));
            rc = -1;
            break;
        }
        started++;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    double secs = (double)(now_ns() - start) / 1e9;
    if (rc < 0) goto out;

    long ok = 0, other = 0, errors = 0;
    for (int i = 0; i < t; i++) {
        ok += w[i].ok_results;
        other += w[i].other_results;
        errors += w[i].errors;
        if (w[i].err[0]) {
            snprintf(err, errlen, "thread %d: %s", i, w[i].err);
            rc = -1;
            goto out;
        }
    }
    if (ok != njobs || other != 0) {
        snprintf(err, errlen, "%ld results stored OK for %d jobs (%ld other answers)", ok, njobs, other);
        rc = -1;
        goto out;
    }
    if (verify_campaign(db, cid, njobs, err, errlen) < 0) {
        rc = -1;
        goto out;
    }

    long nl = 0, nh = 0, nr = 0;
    int64_t *L = merge_sorted(w, t, 0, &nl), *H = merge_sorted(w, t, 1, &nh),
            *R = merge_sorted(w, t, 2, &nr);
    if (!L || !H || !R) {
        free(L), free(H), free(R);
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto out;
    }
    double rate = (double)njobs / secs;
    printf("%7d %6d %8.2f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f  %s\n", t, njobs, secs, rate,
           pct_us(L, nl, 50), pct_us(L, nl, 99), pct_us(H, nh, 50), pct_us(H, nh, 99),
           pct_us(R, nr, 50), pct_us(R, nr, 99), errors ? "(db errors retried)" : "verified");
    printf("RESULT queue threads=%d jobs=%d secs=%.3f jobs_per_s=%.1f lease_p50_us=%.0f "
           "lease_p99_us=%.0f hb_p50_us=%.0f hb_p99_us=%.0f result_p50_us=%.0f result_p99_us=%.0f "
           "db_errors=%ld verified=1\n",
           t, njobs, secs, rate, pct_us(L, nl, 50), pct_us(L, nl, 99), pct_us(H, nh, 50),
           pct_us(H, nh, 99), pct_us(R, nr, 50), pct_us(R, nr, 99), errors);
    /* Does the queue slow down as it drains? Thread 0's samples are in
     * order: compare the first and the last tenth of its leases. */
    int n0 = w[0].n_lease, tenth = n0 / 10;
    if (tenth > 0)
        printf("        drain: lease p50 of thread 0's first / last 10%% of leases: %.0f / %.0f us\n",
               median_us(w[0].lease_ns, 0, tenth), median_us(w[0].lease_ns, n0 - tenth, n0));
    fflush(stdout);
    free(L), free(H), free(R);
out:
    for (int i = 0; i < t; i++) {
        free(w[i].lease_ns);
        free(w[i].hb_ns);
        free(w[i].res_ns);
    }
    return rc;
}

/* Parse "1,2,4,8" into out[0..max); returns the count, or -1 if invalid. */
static int parse_threads(const char *s, int *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 1 || v > MAX_T || n >= max) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

int main(int argc, char **argv)
{
    int njobs = 5000;
    int threads[16] = { 1, 2, 4, 8 }, nthreads = 4;
    char task_buf[4096];
    const char *src = getenv("KFARM_SRC");
    snprintf(task_buf, sizeof(task_buf), "%s/tests/tasks/farm_axpy_f32",
             src && *src ? src : KFARM_SOURCE_DIR);
    const char *task_dir = task_buf;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--jobs") && i + 1 < argc) {
            njobs = atoi(argv[++i]);
            if (njobs < 1) njobs = 1;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthreads = parse_threads(argv[++i], threads, 16);
            if (nthreads < 1) {
                fprintf(stderr, "bench_queue: --threads wants a list like 1,2,4,8 (each 1..%d)\n", MAX_T);
                return 2;
            }
        } else if (!strcmp(argv[i], "--task") && i + 1 < argc) {
            task_dir = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_queue [--jobs N] [--threads 1,2,4,8] [--task DIR]\n"
                            "  (database: $KFARM_DB)\n");
            return 2;
        }
    }
    const char *conninfo = getenv("KFARM_DB");
    if (!conninfo || !*conninfo) {
        fprintf(stderr, "bench_queue: set $KFARM_DB to a libpq conninfo (tools/devdb start prints one)\n");
        return 2;
    }
    char err[1024];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    if (!db) {
        fprintf(stderr, "bench_queue: %s\n", err);
        return 1;
    }
    if (kf_db_migrate(db, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench_queue: migrate: %s\n", err);
        kf_db_close(db);
        return 1;
    }
    printf("queue: lease -> heartbeat -> result(ok) per job, one connection per thread\n");
    printf("%7s %6s %8s %9s %9s %9s %9s %9s %9s %9s\n", "threads", "jobs", "secs", "jobs/s",
           "lease50", "lease99", "hb50", "hb99", "result50", "result99");
    printf("%7s %6s %8s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "", "", "(us)", "(us)", "(us)",
           "(us)", "(us)", "(us)");
    int status = 0;
    for (int i = 0; i < nthreads; i++) {
        if (run_once(conninfo, db, task_dir, threads[i], njobs, err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_queue: threads=%d: FAILED: %s\n", threads[i], err);
            printf("RESULT queue threads=%d verified=0\n", threads[i]);
            status = 1;
        }
    }
    kf_db_close(db);
    return status;
}
