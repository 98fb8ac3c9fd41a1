/*
 * loadgen.c -- N simulated workers against a real, running kfarm-coordinator.
 *
 *   loadgen --coordinator ADDR [--coordinator ADDR2 ...] [--connect-all 0|1]
 *           --workers N [--duration S] [--jobs J]
 *           [--queue M] [--history H] [--heartbeats K] [--piggyback 0|1] [--jobs-per-lease L]
 *           [--batch-results 0|1]
 *           [--procs P] [--poll-ms MS] [--eval-ms MS] [--stagger 0|1] [--slow-ms MS]
 *           [--settle 0|1] [--tasks-once 0|1]
 *           [--timeout-ms MS] [--warmup S|auto] [--warmup-max S]
 *           [--drain-s S] [--prefix NAME] [--task DIR]
 *   (database: $KFARM_DB, the coordinator's; migrated here if needed)
 *
 * What it does (issue 13, "Dispatch at fleet scale"):
 *
 * 1. Setup, straight in the database (no coordinator involved, not timed):
 *    - a queue of M jobs (default 20,000): one campaign through the library
 *      (kf_campaign_create on tests/tasks/farm_axpy_f32, target class "cpu",
 *      strategy tune, then kf_campaign_start), then M candidates (the seed's
 *      source with distinct defines {"LOADGEN": i}) and one 'eval' job each on
 *      "cpu", with one INSERT ... SELECT each, in one transaction; with
 *      --history H, the campaign first gets H finished jobs, candidates and
 *      evaluations (setup_history: a mix of verdicts), also written with
 *      generate_series, so that dispatch is measured after a long campaign;
 *    - N worker identities "<prefix>-<i>", enrolled the way `kfarm worker add`
 *      does (kf_cred_new_secret, kf_cred_derive, kf_server_cred_store with the
 *      derived key K), all in one transaction; the secrets stay in memory.
 *    Several --coordinator addresses (coordinators sharing one database,
 *    issue 13): simulated worker i connects to address i mod K, so the fleet
 *    is spread evenly over the K coordinators; with --connect-all 1 every
 *    worker connects to all K (as `kfarm-worker --coordinator A
 *    --coordinator B` does) and nanomsg's REQ socket spreads its requests
 *    over them, so one worker's consecutive requests reach different
 *    coordinators.
 * 2. Registration (timed as "register"): every simulated worker has its own
 *    nanomsg REQ socket and credential, and speaks the real protocol through
 *    proto/kf_wire.h (sealed v2 frames, replies authenticated with the
 *    worker's key, counter and instance checked). All N send Register at
 *    once; the warm-up starts when all of them are answered OK.
 * 3. Warm-up, then the measured window. Each simulated worker loops
 *       GetJob -> K x Heartbeat (default K = 1) -> Result
 *    (with --jobs-per-lease L > 1: GetJob asks for L jobs (max_jobs), each
 *    heartbeat covers every job held (Heartbeat.more), then one Result per
 *    job; --heartbeats then counts heartbeats per lease of L jobs; with
 *    --batch-results 1 the L results travel in one Result, Result.more)
 *    with verdict ok and a zero-cost evaluation (filled like worker/daemon.c:
 *    the job's fencing token and lease token, a metrics JSON with one timed
 *    shape, candidate_us = baseline_us = 100, speedup 1.0, empty compile log).
 *    All N start together, so the first round is a burst (with --eval-ms,
 *    the fleet then stays in step: every worker's lease cycle is ~L x MS
 *    long and they all began at once, so results arrive in waves; with
 *    --stagger 1 each worker's first GetJob waits a uniform [0, L x MS)
 *    instead, a fleet whose GPUs joined at different times); the window opens
 *    after the warm-up (--warmup auto, the default: once every worker had a
 *    Result answered, at most --warmup-max 60 s; or a fixed --warmup S) and
 *    lasts --duration S (default 15 s; with the auto warm-up at least
 *    --min-rounds 2 warm-up lengths, so that it spans whole rounds of the
 *    closed loop: at 1,000 workers one round is ~3,000 requests), or until J
 *    results are acknowledged (--jobs), or until a GetJob is answered NO_JOB
 *    (the queue ran dry). Calls are counted and timed when they were sent
 *    inside the window.
 *    NO_JOB: it polls again after --poll-ms (default 500, as kfarm-worker).
 *    ERROR: again after 200 ms. A request unanswered after --timeout-ms
 *    (default 15,000, the worker's receive timeout) counts as a timeout and
 *    is sent again (sealed anew, as the worker does).
 *    P driving processes (default: one per 500 workers, since nanomsg allows
 *    512 sockets per process; forked after the setup, sharing the counters
 *    through a MAP_SHARED page), one thread each, drive their share of the
 *    workers with epoll on the sockets' NN_RCVFD / NN_SNDFD: no thread per
 *    worker, no blocking call.
 * 4. Drain: no new requests; the window's requests still in flight are
 *    waited for (at most --drain-s, default 60 s), so their latencies are
 *    not cut short (their results do not count toward jobs/s; those still
 *    unanswered are reported). Then the campaign is paused (so a later run in the
 *    same database starts from its own queue) and the database is checked:
 *    the final `ok` evaluations stored under this run's worker names must be
 *    at least the jobs acknowledged OK ("durable before acknowledged"), and
 *    no job of the database may hold more than one final evaluation, and
 *    with --tasks-once 1 (the default, as kfarm-worker) no job may name a
 *    task without its files that its worker was not sent before (the run
 *    fails, exit 1, otherwise).
 *
 * Output: one table (calls, p50 / p99 / max latency in ms from send to
 * authenticated reply, and the count of every reply status), and one
 * machine-readable line:
 *   RESULT loadgen workers=N procs=P secs=S jobs=J jobs_per_s=R
 *     register_p50_ms=.. register_p99_ms=.. getjob_p50_ms=.. getjob_p99_ms=..
 *     getjob_max_ms=.. hb_p50_ms=.. hb_p99_ms=.. result_p50_ms=..
 *     result_p99_ms=.. result_max_ms=.. no_job=.. errors=.. timeouts=..
 *     loadgen_cpu_s=.. warmup_s=.. ran_dry=0|1 verified=0|1 per_lease=..
 *     batch_results=.. coords=K connect_all=0|1 dup_finals=.. history=H
 *     eval_ms=.. stagger=0|1 tcp_retrans=.. tcp_timeouts=.. listen_drops=..
 *     tasks_once=0|1 task_missing=.. sources_once=0|1 source_missing=..
 *     pg_us_per_job=.. coord_us_per_job=..
 *     machine_us_per_job=.. steal_s=..
 * jobs/s = results acknowledged OK inside the window / window length (s).
 * loadgen_cpu_s is the driving processes' own CPU time (user + system) in
 * the window, s: on a small machine the load generator competes with the
 * coordinator and PostgreSQL for the same cores. tcp_retrans, tcp_timeouts
 * and listen_drops: the machine's TCP counters (all its connections) over
 * the window: retransmitted segments, retransmission timer expiries (each
 * >= 200 ms of latency for the request it carried), SYNs dropped on a full
 * listen queue. pg_us_per_job, coord_us_per_job, machine_us_per_job: CPU
 * time (user + system) in the window per job of the window, µs, of the
 * PostgreSQL cluster (its postmaster and children, when it runs on this
 * machine), of the processes named kfarm-coordinator, and of the whole
 * machine (/proc/stat); steal_s: CPU time the hypervisor gave to others in
 * the window, s, all CPUs (-1: unknown, e.g. a remote database or
 * coordinator). Where a job's CPU goes; on this project's 2-core VM it
 * moved 69-78 µs for the same binaries minutes apart, so it does not
 * replace alternated runs (docs/benchmarks.md, 2026-12-07).
 *
 * Exit status: 0 ok, 1 failure (setup, nothing measured, verification), 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <openssl/crypto.h>

#include "campaign.h"
#include "db.h"
#include "kf_wire.h"
#include "queue.h"
#include "server.h"

#define LG_MAX_PROCS 64
#define LG_PER_PROC 500   /* nanomsg allows 512 sockets per process */
#define LG_SNDTAG 0x80000000u /* epoll data: the sim's send fd, not its receive fd */
#define LG_MAX_ADDRS 16       /* --coordinator addresses at most */
#define LG_TASKS 8            /* tasks a simulated worker remembers (the newest) */

enum { C_REGISTER, C_GETJOB, C_HEARTBEAT, C_RESULT, C_N };
/* phases of a run (lg.phase) */
enum { PH_REGISTER, PH_WARMUP, PH_MEASURE, PH_DRAIN, PH_STOP };
static const char *const CALL_NAME[C_N] = { "register", "get-job", "heartbeat", "result" };
/* reply statuses 0..6 (kfarm.proto), then the outcomes without a reply */
enum { X_TIMEOUT = 7, X_NOTICE, X_AUTH, X_N };
static const char *const X_NAME[X_N] = { "OK", "NO_JOB", "STALE", "DUPLICATE", "REJECTED",
                                         "ERROR", "CONFLICT", "timeout", "notice", "bad-reply" };

/* The metrics of a zero-cost `ok` evaluation: one timed shape, as the judge
 * reports it (docs/metrics.md), enough for the coordinator's noise model. */
static const char *const METRICS =
    "{\"loadgen\":true,\"timing\":{\"shapes\":[{\"sizes\":{\"N\":100000},\"weight\":1,"
    "\"candidate\":{\"median_us\":100,\"cv\":0.01,\"n\":10},"
    "\"baseline\":{\"median_us\":100,\"cv\":0.01,\"n\":10}}]}}";

typedef struct {
    int64_t *v; /* latencies, ns */
    size_t n, cap;
} samples;

/* One simulated worker. */
typedef struct {
    kf_wire_client cl;
    int has_sock;        /* cl.sock is an open nanomsg socket */
    int rcvfd, sndfd;
    int call;            /* the request in flight or to send next (C_*) */
    int in_flight;       /* waiting for the reply to the request sent at sent_ns */
    int send_blocked;    /* nn_send said EAGAIN: sndfd is in the epoll set */
    int registered;
    int warmed;          /* a Result of this worker has been answered */
    int sent_phase;      /* the phase the request in flight was sent in */
    int hb_left;         /* heartbeats still to send for the job held */
    int64_t sent_ns;
    int64_t wake_ns;     /* > 0: sleeping (poll interval, backoff) until then */
    Kfarm__Reply *job;   /* the GetJob reply holding the leased job(s), or NULL */
    int nheld;           /* jobs in that reply: job + more_jobs */
    int next_res;        /* the job whose Result is to be sent next */
    int batched;         /* results sent in Result.more with the one in flight */
    unsigned char gone[KF_QUEUE_MAX_LEASES]; /* leases the coordinator cancelled */
    char task_sha[LG_TASKS][72]; /* the tasks this worker holds (--tasks-once): Job.task_sha256 */
    int ntasks;
    uint64_t rng;        /* the evaluation times' xorshift state */
} sim;

typedef struct lg lg;

/* One driving process (one thread) and the simulated workers it owns. */
typedef struct {
    lg *g;
    int idx;
    sim *sims;
    int n;
    int ep;
    samples lat[C_N];
    long count[C_N][X_N];
    long ok_in_window;
    long acked_jobs;      /* jobs whose result was acknowledged OK, any phase */
    long task_missing;    /* jobs naming a task without its files that the worker did not hold */
    long source_missing;  /* jobs without a source or naming one (Job.source_job) not earlier in their reply */
    long pending_at_end;
    double cpu_window_s;  /* this process's CPU time inside the window, s */
    char err[256];
} driver;

/* Shared by the parent and every driving process (MAP_SHARED). */
struct lg {
    const char *addr[LG_MAX_ADDRS]; /* the coordinators' addresses */
    int naddr;
    int connect_all;     /* each worker connects to every address (else worker i to i mod naddr) */
    int workers, procs, heartbeats, poll_ms, timeout_ms;
    int piggyback;       /* each Result carries the next GetJob */
    int per_lease;       /* jobs asked for per GetJob (max_jobs) */
    int batch_results;   /* one Result message for every job of a lease (Result.more) */
    int eval_ms;         /* a job's simulated evaluation: the sim waits 0.5-1.5x this after a lease (0: none) */
    int slow_ms;         /* > 0: print each reply of the window slower than this (stderr) */
    int stagger;         /* first GetJob at a uniform point of one lease cycle (per_lease x eval_ms) */
    int tasks_once;      /* GetJob.tasks_once and have_tasks: a task's files once per worker */
    int sources_once;    /* GetJob.sources_once: a source once per reply */
    double duration_s, drain_s;
    long job_limit;
    char prefix[64];
    kf_wire_key *keys;     /* copied into each process by fork */
    atomic_long ok_total;  /* results acknowledged OK in the window, all processes */
    atomic_int phase;      /* PH_* */
    atomic_int registered; /* workers whose Register was answered OK */
    atomic_int warmed;     /* workers that had a Result answered */
    atomic_int ran_dry;    /* the window ended on NO_JOB: the queue was empty */
    atomic_int pending;    /* requests sent inside the window, not answered yet */
    atomic_llong t_end_ns; /* end of the window (CLOCK_MONOTONIC is system-wide) */
};

/* The machine's TCP counters named in want (Linux: /proc/net/snmp "Tcp:"
 * and /proc/net/netstat "TcpExt:", header line then value line), into
 * out[i]; -1 where absent. For the window's retransmissions: a segment lost
 * on loopback (a full backlog) waits for the retransmission timer, at least
 * 200 ms, which no statement of the coordinator explains. */
static void tcp_counters(const char *const *want, int n, long *out)
{
    for (int i = 0; i < n; i++) out[i] = -1;
    static const char *const files[2] = { "/proc/net/snmp", "/proc/net/netstat" };
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp) continue;
        char hdr[8192], val[8192];
        while (fgets(hdr, sizeof(hdr), fp) && fgets(val, sizeof(val), fp)) {
            char *hs = NULL, *vs = NULL;
            char *h = strtok_r(hdr, " \n", &hs), *v = strtok_r(val, " \n", &vs);
            if (!h || !v || (strcmp(h, "Tcp:") && strcmp(h, "TcpExt:"))) continue;
            while ((h = strtok_r(NULL, " \n", &hs)) && (v = strtok_r(NULL, " \n", &vs)))
                for (int i = 0; i < n; i++)
                    if (!strcmp(h, want[i])) out[i] = strtol(v, NULL, 10);
        }
        fclose(fp);
    }
}

/* One /proc/PID/stat: its parent's pid, comm (at most 15 characters) and
 * CPU times in clock ticks (user + system of the process, and of the
 * children it has waited for). Returns 0, or -1 (gone, unreadable). */
static int proc_stat(const char *pid, long *ppid, char *comm, size_t commlen, unsigned long long *self,
                     unsigned long long *reaped)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%s/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = 0;
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (!l || !r || r < l) return -1;
    snprintf(comm, commlen, "%.*s", (int)(r - l - 1), l + 1);
    unsigned long long ut, st, cut, cst;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime cutime cstime (proc(5)) */
    if (sscanf(r + 1, " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", ppid, &ut, &st,
               &cut, &cst) != 5)
        return -1;
    *self = ut + st;
    *reaped = cut + cst;
    return 0;
}

/* CPU time, s, of everything the run costs on this machine: the
 * PostgreSQL cluster whose postmaster is `postmaster` (it and its children,
 * with the children it has reaped: backends that ended, autovacuum
 * workers), the processes named kfarm-coordinator, and the whole machine's
 * busy and stolen time (/proc/stat). -1 where unknown. A window's
 * difference divided by its jobs is the CPU each job cost. */
typedef struct {
    double pg, coord, busy, steal;
} cpu_snap;

static void cpu_snapshot(long postmaster, cpu_snap *c)
{
    double hz = (double)sysconf(_SC_CLK_TCK);
    unsigned long long pg = 0, co = 0;
    int seen_pm = 0, seen_co = 0;
    DIR *dir = opendir("/proc");
    struct dirent *de;
    while (dir && (de = readdir(dir))) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        long pid = strtol(de->d_name, NULL, 10), ppid = 0;
        char comm[32];
        unsigned long long self, reaped;
        if (proc_stat(de->d_name, &ppid, comm, sizeof(comm), &self, &reaped) < 0) continue;
        if (postmaster > 0 && pid == postmaster) {
            pg += self + reaped;
            seen_pm = 1;
        } else if (postmaster > 0 && ppid == postmaster) {
            pg += self;
        } else if (!strcmp(comm, "kfarm-coordinat")) {
            co += self;
            seen_co = 1;
        }
    }
    if (dir) closedir(dir);
    c->pg = seen_pm ? (double)pg / hz : -1;
    c->coord = seen_co ? (double)co / hz : -1; /* -1: none here (a remote coordinator) */
    c->busy = c->steal = -1;
    FILE *fp = fopen("/proc/stat", "r");
    unsigned long long v[8];
    if (fp && fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                     &v[5], &v[6], &v[7]) == 8) {
        c->busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / hz; /* user nice system irq softirq */
        c->steal = (double)v[7] / hz;
    }
    if (fp) fclose(fp);
}

/* CPU µs per job between two snapshots' values (s); -1 when unknown. */
static double per_job(double before, double after, long jobs)
{
    return before >= 0 && after >= 0 && jobs > 0 ? (after - before) * 1e6 / (double)jobs : -1;
}

/* Monotonic clock, ns. */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* This process's CPU time (user + system), s. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Append one latency (ns). Returns 0, or -1 out of memory (sample dropped). */
static int samples_add(samples *s, int64_t v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4096;
        int64_t *nv = realloc(s->v, cap * sizeof(*nv));
        if (!nv) return -1;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Percentile p (0..100, nearest rank) of sorted v[0..n), in ms; 0 if empty. */
static double pct_ms(const int64_t *v, size_t n, double p)
{
    if (!n) return 0;
    size_t i = (size_t)(p / 100.0 * (double)n + 0.5);
    if (i < 1) i = 1;
    if (i > n) i = n;
    return (double)v[i - 1] / 1e6;
}

/* ---- one simulated worker's requests ---- */

/* Job k (0..nheld) of the reply sim s holds. */
static const Kfarm__Job *held_job(const sim *s, int k)
{
    return k == 0 ? s->job->job : s->job->more_jobs[k - 1];
}

/* The first held job not cancelled, or -1. */
static int first_live(const sim *s)
{
    for (int k = 0; k < s->nheld; k++)
        if (!s->gone[k]) return k;
    return -1;
}

/* The next held job after k not cancelled, or -1. */
static int next_live(const sim *s, int k)
{
    for (k++; k < s->nheld; k++)
        if (!s->gone[k]) return k;
    return -1;
}

/* Build, seal and send the request s->call of sim s. Returns 0 (sent or
 * waiting for the socket), -1 with reason in d->err on a fatal failure. */
static int send_call(driver *d, int i)
{
    sim *s = &d->sims[i];
    char err[200];
    char *cls[1] = { "cpu" };
    Kfarm__Request req = KFARM__REQUEST__INIT;
    Kfarm__Register reg = KFARM__REGISTER__INIT;
    Kfarm__Device dev = KFARM__DEVICE__INIT;
    Kfarm__Device *devs[1] = { &dev };
    Kfarm__GetJob gj = KFARM__GET_JOB__INIT;
    Kfarm__Heartbeat hb = KFARM__HEARTBEAT__INIT;
    Kfarm__Result r = KFARM__RESULT__INIT;
    Kfarm__LeaseRef refs[KF_QUEUE_MAX_LEASES], *refp[KF_QUEUE_MAX_LEASES];
    Kfarm__ResultItem more[KF_QUEUE_MAX_LEASES], *morep[KF_QUEUE_MAX_LEASES];
    const Kfarm__Job *job = s->job ? held_job(s, s->call == C_RESULT ? s->next_res : first_live(s)) : NULL;
    if (d->g->per_lease > 1) {
        gj.has_max_jobs = 1;
        gj.max_jobs = (uint32_t)d->g->per_lease;
    }
    char *have[LG_TASKS];
    for (int t = 0; t < s->ntasks; t++) have[t] = s->task_sha[t];
    if (d->g->tasks_once) {
        gj.has_tasks_once = gj.tasks_once = 1;
        gj.n_have_tasks = (size_t)s->ntasks;
        gj.have_tasks = have;
    }
    if (d->g->sources_once) gj.has_sources_once = gj.sources_once = 1;
    switch (s->call) {
    case C_REGISTER:
        dev.name = "loadgen cpu";
        dev.arch = "x86_64";
        dev.has_sm_count = 1;
        dev.sm_count = 1;
        reg.worker_id = s->cl.id;
        reg.hostname = "loadgen";
        reg.backend = "cpu";
        reg.n_devices = 1;
        reg.devices = devs;
        reg.n_classes = 1;
        reg.classes = cls;
        reg.has_slots = 1;
        reg.slots = 1;
        req.msg_case = KFARM__REQUEST__MSG_REGISTER;
        req.register_ = &reg;
        break;
    case C_GETJOB:
        gj.worker_id = s->cl.id;
        gj.n_classes = 1;
        gj.classes = cls;
        req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
        req.get_job = &gj;
        break;
    case C_HEARTBEAT:
        hb.worker_id = s->cl.id;
        hb.job_id = job->job_id;
        hb.fencing_token = job->fencing_token;
        hb.has_lease_token = job->has_lease_token;
        hb.lease_token = job->lease_token;
        /* one heartbeat for every job held */
        for (int k = 0; k < s->nheld; k++) {
            const Kfarm__Job *o = held_job(s, k);
            if (s->gone[k] || o == job) continue;
            Kfarm__LeaseRef lr = KFARM__LEASE_REF__INIT;
            lr.job_id = o->job_id;
            lr.fencing_token = o->fencing_token;
            lr.has_lease_token = o->has_lease_token;
            lr.lease_token = o->lease_token;
            refs[hb.n_more] = lr;
            refp[hb.n_more] = &refs[hb.n_more];
            hb.n_more++;
        }
        hb.more = refp;
        req.msg_case = KFARM__REQUEST__MSG_HEARTBEAT;
        req.heartbeat = &hb;
        break;
    case C_RESULT:
        r.worker_id = s->cl.id;
        r.job_id = job->job_id;
        r.fencing_token = job->fencing_token;
        r.has_lease_token = job->has_lease_token;
        r.lease_token = job->lease_token;
        r.verdict = "ok";
        r.detail = "";
        r.metrics_json = (char *)METRICS;
        r.compile_log = "";
        r.has_candidate_us = r.has_baseline_us = r.has_speedup = 1;
        r.candidate_us = 100;
        r.baseline_us = 100;
        r.speedup = 1.0;
        s->batched = 0;
        if (d->g->batch_results) /* every other job held, in the same message */
            for (int k = next_live(s, s->next_res); k >= 0; k = next_live(s, k)) {
                const Kfarm__Job *o = held_job(s, k);
                Kfarm__ResultItem ri = KFARM__RESULT_ITEM__INIT;
                ri.worker_id = r.worker_id;
                ri.verdict = r.verdict;
                ri.detail = r.detail;
                ri.metrics_json = r.metrics_json;
                ri.compile_log = r.compile_log;
                ri.has_candidate_us = ri.has_baseline_us = ri.has_speedup = 1;
                ri.candidate_us = r.candidate_us;
                ri.baseline_us = r.baseline_us;
                ri.speedup = r.speedup;
                more[s->batched] = ri;
                more[s->batched].job_id = o->job_id;
                more[s->batched].fencing_token = o->fencing_token;
                more[s->batched].has_lease_token = o->has_lease_token;
                more[s->batched].lease_token = o->lease_token;
                morep[s->batched] = &more[s->batched];
                s->batched++;
            }
        r.n_more = (size_t)s->batched;
        r.more = morep;
        if (d->g->piggyback && atomic_load(&d->g->phase) == PH_MEASURE &&
            (s->batched > 0 || next_live(s, s->next_res) < 0)) {
            gj.worker_id = s->cl.id;
            gj.n_classes = 1;
            gj.classes = cls;
            r.next = &gj;
        }
        req.msg_case = KFARM__REQUEST__MSG_RESULT;
        req.result = &r;
        break;
    }
    uint8_t *frame;
    size_t flen;
    if (kf_wire_client_seal(&s->cl, &req, &frame, &flen, err, sizeof(err)) < 0) {
        snprintf(d->err, sizeof(d->err), "%.60s: seal: %.150s", s->cl.id, err);
        return -1;
    }
    int rc = nn_send(s->cl.sock, frame, flen, NN_DONTWAIT);
    free(frame);
    if (rc < 0) {
        int e = nn_errno();
        if (e != EAGAIN && e != EINTR) {
            snprintf(d->err, sizeof(d->err), "%.60s: nn_send: %s", s->cl.id, nn_strerror(e));
            return -1;
        }
        /* not connected yet: wait for the send fd, then seal anew */
        if (!s->send_blocked) {
            struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i | LG_SNDTAG };
            if (epoll_ctl(d->ep, EPOLL_CTL_ADD, s->sndfd, &ev) < 0) {
                snprintf(d->err, sizeof(d->err), "epoll_ctl: %s", strerror(errno));
                return -1;
            }
            s->send_blocked = 1;
        }
        return 0;
    }
    if (s->send_blocked) {
        epoll_ctl(d->ep, EPOLL_CTL_DEL, s->sndfd, NULL);
        s->send_blocked = 0;
    }
    s->in_flight = 1;
    s->sent_phase = atomic_load(&d->g->phase);
    if (s->sent_phase == PH_MEASURE) atomic_fetch_add(&d->g->pending, 1);
    s->sent_ns = now_ns();
    return 0;
}

/* Authenticate and decode the reply in buf (as kf_wire_call does). Returns
 * the reply, or NULL with *outcome X_NOTICE / X_AUTH. */
static Kfarm__Reply *open_reply(sim *s, const uint8_t *buf, size_t n, int *outcome)
{
    char err[256];
    kf_frame f;
    *outcome = X_AUTH;
    if (kf_frame_parse(buf, n, KF_WIRE_MAX_MSG, &f, err, sizeof(err)) < 0) return NULL;
    if (f.kind == KF_FRAME_NOTICE) {
        *outcome = X_NOTICE;
        return NULL;
    }
    if (f.kind != KF_FRAME_REPLY || strcmp(f.id, s->cl.id) != 0 ||
        kf_frame_check_header(&f, s->cl.key.down) < 0 || kf_frame_check_body(&f, s->cl.key.down) < 0 ||
        f.counter != s->cl.counter || memcmp(f.instance, s->cl.instance, KF_WIRE_INSTANCE_LEN) != 0 ||
        !kf_frame_fresh(&f, kf_wire_now_ms()))
        return NULL;
    return kfarm__reply__unpack(NULL, f.body_len, f.body);
}

static void drop_job(sim *s)
{
    if (s->job) kfarm__reply__free_unpacked(s->job, NULL);
    s->job = NULL;
    s->nheld = 0;
}

/* Hold the jobs of reply rep (job + more_jobs). A job that names its task
 * only must name the one this worker holds (or one an earlier job of the
 * reply carried in full, which the worker then holds): else it counts in
 * d->task_missing (a worker could not evaluate it). A job must carry its
 * source or name (Job.source_job) an earlier job of the reply that does, as
 * kfarm-worker resolves it: else it counts in d->source_missing. */
static void adopt_jobs(driver *d, sim *s, Kfarm__Reply *rep)
{
    s->job = rep;
    s->nheld = 1 + (int)(rep->n_more_jobs < KF_QUEUE_MAX_LEASES - 1 ? rep->n_more_jobs : KF_QUEUE_MAX_LEASES - 1);
    s->next_res = 0;
    memset(s->gone, 0, sizeof(s->gone));
    for (int k = 0; k < s->nheld; k++) {
        const Kfarm__Job *j = held_job(s, k);
        const char *sha = j->task_sha256 ? j->task_sha256 : "";
        int held = -1;
        for (int t = 0; t < s->ntasks && held < 0; t++)
            if (!strcmp(s->task_sha[t], sha)) held = t;
        if (j->task_json[0] || j->n_task_files > 0) { /* in full: now held */
            if (held < 0 && sha[0]) {
                if (s->ntasks == LG_TASKS) {
                    memmove(s->task_sha[0], s->task_sha[1], sizeof(s->task_sha[0]) * (LG_TASKS - 1));
                    s->ntasks--;
                }
                snprintf(s->task_sha[s->ntasks++], sizeof(s->task_sha[0]), "%s", sha);
            }
        } else if (!sha[0] || held < 0) {
            d->task_missing++;
        }
        int src = !j->has_source_job && j->source.len > 0;
        for (int e = 0; e < k && !src && j->has_source_job; e++) {
            const Kfarm__Job *o = held_job(s, e);
            src = o->job_id == j->source_job && !o->has_source_job && o->source.len > 0;
        }
        if (!src) d->source_missing++;
    }
}

static void sleep_then(sim *s, int call, int ms)
{
    s->call = call;
    s->wake_ns = now_ns() + (int64_t)ms * 1000000LL;
}

/* A uniform draw in [0, 1) from sim s's xorshift64 generator. */
static double sim_uniform(sim *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (double)(s->rng >> 11) / 9007199254740992.0;
}

/* After a lease, and before each further result of it: the call waits for
 * the simulated evaluation of the jobs it reports, each uniform in [0.5, 1.5]
 * x eval_ms, evaluated one after the other as a worker does (a fleet of real
 * GPUs whose jobs take that long: N workers offer N / eval_ms jobs per ms
 * whatever the lease size); njobs: the jobs the next call reports (the
 * whole lease with --batch-results, else one). Goes at once when eval_ms is
 * 0 (the closed loop of zero-cost evaluations). */
static void evaluate_then(sim *s, const lg *g, int njobs)
{
    if (g->eval_ms <= 0) {
        s->wake_ns = 0;
        return;
    }
    double f = 0;
    for (int k = 0; k < (njobs > 0 ? njobs : 1); k++) f += 0.5 + sim_uniform(s);
    s->wake_ns = now_ns() + (int64_t)(f * g->eval_ms * 1e6);
}

/* What sim s does after the reply (or lack of one: rep NULL, outcome x) to
 * its request. Returns 0, or -1 fatal (d->err). */
static int on_reply(driver *d, int i, Kfarm__Reply *rep, int x, int64_t lat_ns)
{
    sim *s = &d->sims[i];
    lg *g = d->g;
    int call = s->call, phase = atomic_load(&g->phase);
    s->in_flight = 0;
    /* counted: registrations, and requests sent inside the window */
    if (s->sent_phase == PH_MEASURE) atomic_fetch_sub(&g->pending, 1);
    if (call == C_REGISTER || s->sent_phase == PH_MEASURE) {
        d->count[call][x]++;
        if (x != X_TIMEOUT) samples_add(&d->lat[call], lat_ns);
        if (g->slow_ms > 0 && call != C_REGISTER && lat_ns > (int64_t)g->slow_ms * 1000000) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            fprintf(stderr, "slow %s %lld.%03ld %.1f ms\n", CALL_NAME[call], (long long)ts.tv_sec,
                    ts.tv_nsec / 1000000, (double)lat_ns / 1e6);
        }
    }
    if (call == C_RESULT && x != X_TIMEOUT && !s->warmed) {
        s->warmed = 1;
        atomic_fetch_add(&g->warmed, 1);
    }
    if (phase >= PH_DRAIN) { /* no new requests */
        if (call == C_RESULT && rep) { /* acknowledged in the drain: counted for the check */
            d->acked_jobs += x == KFARM__STATUS__OK;
            for (size_t k = 0; s->batched > 0 && k < rep->n_more_status; k++)
                d->acked_jobs += rep->more_status[k] == KFARM__STATUS__OK;
        }
        if (rep) kfarm__reply__free_unpacked(rep, NULL);
        return 0;
    }
    switch (call) {
    case C_REGISTER:
        if (x == KFARM__STATUS__OK) {
            s->registered = 1;
            atomic_fetch_add(&g->registered, 1);
            s->call = C_GETJOB;
            s->wake_ns = -1; /* parked until every worker is registered */
        } else if (x == X_TIMEOUT) {
            s->wake_ns = 0; /* send again at once */
        } else {
            sleep_then(s, C_REGISTER, x == KFARM__STATUS__CONFLICT ? 1000 : 200);
        }
        break;
    case C_GETJOB:
        if (x == KFARM__STATUS__OK && rep->job) {
            adopt_jobs(d, s, rep);
            rep = NULL;
            s->hb_left = g->heartbeats;
            s->call = s->hb_left > 0 ? C_HEARTBEAT : C_RESULT;
            evaluate_then(s, g, g->batch_results ? s->nheld : 1);
        } else if (x == KFARM__STATUS__NO_JOB) {
            /* the queue ran dry: the window ends here */
            int m = PH_MEASURE;
            if (phase == PH_MEASURE && atomic_compare_exchange_strong(&g->phase, &m, PH_DRAIN)) {
                atomic_store(&g->t_end_ns, now_ns());
                atomic_store(&g->ran_dry, 1);
            }
            sleep_then(s, C_GETJOB, g->poll_ms);
        } else if (x == KFARM__STATUS__CONFLICT) {
            sleep_then(s, C_REGISTER, 1000);
        } else if (x == X_TIMEOUT) {
            s->wake_ns = 0;
        } else {
            sleep_then(s, C_GETJOB, 200);
        }
        break;
    case C_HEARTBEAT:
        if (rep && s->job) { /* the leases the coordinator cancelled */
            int primary = first_live(s); /* the heartbeat's job_id */
            for (size_t k = 0; k < rep->n_cancel_jobs; k++)
                for (int h = 0; h < s->nheld; h++)
                    if (held_job(s, h)->job_id == rep->cancel_jobs[k]) s->gone[h] = 1;
            if (primary >= 0 && (x == KFARM__STATUS__STALE || x == KFARM__STATUS__REJECTED ||
                                 (rep->has_cancel && rep->cancel)))
                s->gone[primary] = 1;
        }
        if (x == KFARM__STATUS__CONFLICT || !s->job || first_live(s) < 0) {
            drop_job(s); /* the leases are gone: abandon the jobs */
            s->call = x == KFARM__STATUS__CONFLICT ? C_REGISTER : C_GETJOB;
            s->wake_ns = 0;
        } else {
            /* OK, or the coordinator away (ERROR, timeout): carry on */
            s->next_res = first_live(s);
            if (--s->hb_left <= 0) s->call = C_RESULT;
            s->wake_ns = 0;
        }
        break;
    case C_RESULT:
        if (x == KFARM__STATUS__OK || x == KFARM__STATUS__DUPLICATE || x == KFARM__STATUS__STALE ||
            x == KFARM__STATUS__REJECTED || x == KFARM__STATUS__CONFLICT) {
            /* this result's, and those of the jobs batched with it */
            long nok = x == KFARM__STATUS__OK;
            if (rep && s->batched > 0) {
                if (rep->n_more_status != (size_t)s->batched) {
                    snprintf(d->err, sizeof(d->err), "%.60s: %d results batched, %zu statuses in the reply",
                             s->cl.id, s->batched, rep->n_more_status);
                    kfarm__reply__free_unpacked(rep, NULL);
                    return -1;
                }
                for (size_t k = 0; k < rep->n_more_status; k++) nok += rep->more_status[k] == KFARM__STATUS__OK;
                s->next_res = s->nheld; /* the batch covered every job left */
            }
            d->acked_jobs += nok;
            if (nok > 0 && phase == PH_MEASURE) {
                d->ok_in_window += nok;
                long tot = atomic_fetch_add(&g->ok_total, nok) + nok;
                int m = PH_MEASURE;
                if (g->job_limit > 0 && tot >= g->job_limit &&
                    atomic_compare_exchange_strong(&g->phase, &m, PH_DRAIN))
                    atomic_store(&g->t_end_ns, now_ns());
            }
            int more = x != KFARM__STATUS__CONFLICT ? next_live(s, s->next_res) : -1;
            if (more >= 0) { /* the next job of this lease, once evaluated */
                s->next_res = more;
                s->call = C_RESULT;
                evaluate_then(s, g, 1);
                break;
            }
            drop_job(s);
            s->call = x == KFARM__STATUS__CONFLICT ? C_REGISTER : C_GETJOB;
            s->wake_ns = 0;
            if (rep && rep->job && x != KFARM__STATUS__CONFLICT) { /* the next job came with the reply */
                adopt_jobs(d, s, rep);
                rep = NULL;
                s->hb_left = g->heartbeats;
                s->call = s->hb_left > 0 ? C_HEARTBEAT : C_RESULT;
                evaluate_then(s, g, g->batch_results ? s->nheld : 1);
            }
        } else if (x == X_TIMEOUT) {
            s->wake_ns = 0; /* resend (sealed anew), as the worker does */
        } else {
            sleep_then(s, C_RESULT, 200); /* ERROR or unreadable: retry */
        }
        break;
    }
    if (rep) kfarm__reply__free_unpacked(rep, NULL);
    return 0;
}

/* Receive and handle the reply waiting on sim i's socket, if any. */
static int recv_one(driver *d, int i)
{
    sim *s = &d->sims[i];
    void *buf = NULL;
    int n = nn_recv(s->cl.sock, &buf, NN_MSG, NN_DONTWAIT);
    if (n < 0) {
        int e = nn_errno();
        if (e == EAGAIN || e == EINTR) return 0;
        snprintf(d->err, sizeof(d->err), "%.60s: nn_recv: %s", s->cl.id, nn_strerror(e));
        return -1;
    }
    int64_t lat = now_ns() - s->sent_ns;
    if (!s->in_flight) { /* a reply to a request given up on */
        nn_freemsg(buf);
        return 0;
    }
    int x;
    Kfarm__Reply *rep = open_reply(s, buf, (size_t)n, &x);
    nn_freemsg(buf);
    if (rep) x = rep->status <= KFARM__STATUS__CONFLICT ? (int)rep->status : X_AUTH;
    if (rep && x == X_AUTH) {
        kfarm__reply__free_unpacked(rep, NULL);
        rep = NULL;
    }
    return on_reply(d, i, rep, x, lat);
}

/* The driving thread: register every sim, wait for the others, then run
 * the loop until the phase says stop. */
static void driver_main(driver *d)
{
    lg *g = d->g;
    double cpu_open = 0, cpu_close = -1;
    int opened = 0, unparked = 0;
    struct epoll_event evs[256];
    for (int i = 0; i < d->n; i++) {
        struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        if (epoll_ctl(d->ep, EPOLL_CTL_ADD, d->sims[i].rcvfd, &ev) < 0) {
            snprintf(d->err, sizeof(d->err), "epoll_ctl: %s", strerror(errno));
            goto out;
        }
        d->sims[i].call = C_REGISTER;
        d->sims[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(d->idx * 100003 + i + 1) | 1;
        d->sims[i].wake_ns = 0;
    }
    int64_t next_scan = 0;
    for (;;) {
        int phase = atomic_load(&g->phase);
        int64_t now = now_ns();
        if (phase >= PH_DRAIN && cpu_close < 0) cpu_close = cpu_s();
        if (phase >= PH_WARMUP && !unparked) {
            /* main saw every worker registered: unpark them all */
            unparked = 1;
            for (int i = 0; i < d->n; i++) {
                sim *s = &d->sims[i];
                if (s->wake_ns >= 0) continue;
                s->wake_ns = 0;
                if (g->stagger && g->eval_ms > 0)
                    s->wake_ns = now + (int64_t)(sim_uniform(s) * g->per_lease * g->eval_ms * 1e6) + 1;
            }
        }
        if (phase >= PH_MEASURE && !opened) {
            opened = 1;
            cpu_open = cpu_s();
        }
        if (phase >= PH_STOP) break;
        /* timers: sends due, requests timed out (a scan every 2 ms) */
        if (now >= next_scan) {
            next_scan = now + 2000000;
            for (int i = 0; i < d->n; i++) {
                sim *s = &d->sims[i];
                if (s->in_flight) {
                    if (now - s->sent_ns > (int64_t)g->timeout_ms * 1000000LL &&
                        on_reply(d, i, NULL, X_TIMEOUT, now - s->sent_ns) < 0)
                        goto out;
                    continue;
                }
                if (phase >= PH_DRAIN || s->send_blocked || s->wake_ns < 0 || s->wake_ns > now) continue;
                if (phase == PH_REGISTER && s->call != C_REGISTER) continue;
                s->wake_ns = 0;
                if (send_call(d, i) < 0) goto out;
            }
        }
        int n = epoll_wait(d->ep, evs, 256, 2);
        if (n < 0) {
            if (errno == EINTR) continue;
            snprintf(d->err, sizeof(d->err), "epoll_wait: %s", strerror(errno));
            goto out;
        }
        for (int k = 0; k < n; k++) {
            uint32_t tag = evs[k].data.u32;
            int i = (int)(tag & ~LG_SNDTAG);
            sim *s = &d->sims[i];
            if (tag & LG_SNDTAG) {
                if (s->send_blocked && !s->in_flight && atomic_load(&g->phase) < PH_DRAIN &&
                    send_call(d, i) < 0)
                    goto out;
                continue;
            }
            if (recv_one(d, i) < 0) goto out;
            /* the next request at once, unless the sim sleeps or is parked */
            int ph = atomic_load(&g->phase);
            if (!s->in_flight && !s->send_blocked && s->wake_ns == 0 && ph < PH_DRAIN &&
                (ph != PH_REGISTER || s->call == C_REGISTER) && send_call(d, i) < 0)
                goto out;
        }
    }
out:
    for (int i = 0; i < d->n; i++)
        d->pending_at_end += d->sims[i].in_flight && d->sims[i].sent_phase == PH_MEASURE;
    if (d->err[0]) atomic_store(&g->phase, PH_STOP); /* a fatal error: stop everyone */
    if (cpu_close < 0) cpu_close = cpu_s();
    d->cpu_window_s = opened ? cpu_close - cpu_open : 0;
}

/* ---- setup in the database ---- */

/* History (--history H): H finished jobs of campaign cid, each with its
 * candidate and one final evaluation, written with generate_series as a
 * long campaign would have left them (older ids than the queue, finished
 * over the past hours by 1,000 workers "hist-<k>"): verdicts about 20% ok
 * (speedup 0.5-2.0 with its noise interval and the metrics of a timed
 * shape), 35% compile_error (with a compile log), 25% incorrect, 10%
 * runtime_error, 6% timeout, 4% load_error; every 50th job also has a
 * non-final infra_error attempt before its final one. Inside the caller's
 * transaction. Returns 0 or -1 with reason. */
static int setup_history(kf_db *db, int64_t cid, long h, char *err, size_t errlen)
{
    char id[32], n[32];
    snprintf(id, sizeof(id), "%lld", (long long)cid);
    snprintf(n, sizeof(n), "%ld", h);
    const char *p[2] = { id, n };
    const char *pm[2] = { id, METRICS };
    if (kf_db_cmd(db,
            "INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer, created_at) "
            "SELECT s.campaign_id, s.source, s.sha256, jsonb_build_object('HIST', g::text), s.id, 'human',"
            "       now() - interval '1 millisecond' * 36 * ($2::int - g) - interval '1 minute' "
            "FROM candidates s, generate_series(1, $2::int) g "
            "WHERE s.campaign_id = $1::bigint AND s.proposer = 'seed'", 2, p, err, errlen) < 0 ||
        kf_db_cmd(db,
            "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts, purpose, state, attempts,"
            "                  fencing_token, worker_id, leased_at, finished_at, acked, created_at) "
            "SELECT id, campaign_id, 'cpu', 3, 'eval', 'done', CASE WHEN id % 50 = 0 THEN 2 ELSE 1 END,"
            "       nextval('fencing_seq'), 'hist-' || (id % 1000), created_at, created_at + interval '2 s', true,"
            "       created_at "
            "FROM candidates WHERE campaign_id = $1::bigint AND defines ? 'HIST' ORDER BY id",
            1, p, err, errlen) < 0 ||
        kf_db_cmd(db,
            "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict,"
            "                         detail, created_at) "
            "SELECT id, candidate_id, 1, 'hist-' || ((id + 1) % 1000), fencing_token - 1000000000000,"
            "       'infra_error', 'loadgen history: a worker failed', finished_at - interval '1 s' "
            "FROM jobs WHERE campaign_id = $1::bigint AND state = 'done' AND attempts = 2",
            1, p, err, errlen) < 0 ||
        kf_db_cmd(db,
            "INSERT INTO evaluations (job_id, candidate_id, attempt, worker_id, fencing_token, verdict,"
            "   detail, metrics, candidate_us, baseline_us, speedup, compile_log, is_final, created_at,"
            "   cv, speedup_lo, speedup_hi) "
            "SELECT j.id, j.candidate_id, j.attempts, j.worker_id, j.fencing_token, v.verdict,"
            "   CASE WHEN v.verdict <> 'ok' THEN 'loadgen history: ' || v.verdict END,"
            "   CASE WHEN v.verdict = 'ok' THEN $2::jsonb END,"
            "   CASE WHEN v.verdict = 'ok' THEN 100 / v.sp END, CASE WHEN v.verdict = 'ok' THEN 100 END,"
            "   CASE WHEN v.verdict = 'ok' THEN v.sp END,"
            "   CASE WHEN v.verdict = 'compile_error' THEN 'candidate.c:12:5: error: expected'';'' before ''}'' token' END,"
            "   true, j.finished_at, CASE WHEN v.verdict = 'ok' THEN 0.01 END,"
            "   CASE WHEN v.verdict = 'ok' THEN v.sp * 0.97 END, CASE WHEN v.verdict = 'ok' THEN v.sp * 1.03 END "
            "FROM jobs j CROSS JOIN LATERAL (SELECT CASE WHEN j.id % 100 < 20 THEN 'ok'"
            "   WHEN j.id % 100 < 55 THEN 'compile_error' WHEN j.id % 100 < 80 THEN 'incorrect'"
            "   WHEN j.id % 100 < 90 THEN 'runtime_error' WHEN j.id % 100 < 96 THEN 'timeout'"
            "   ELSE 'load_error' END AS verdict,"
            "   0.5 + 1.5 * ((j.id * 7919) % 10007) / 10007.0 AS sp) v "
            "WHERE j.campaign_id = $1::bigint AND j.state = 'done'", 2, pm, err, errlen) < 0 ||
        /* their counts, as the coordinator adds them (schema/006_counts.sql) */
        kf_db_cmd(db,
            "INSERT INTO campaign_counts (campaign_id, what, target, purpose, verdict, is_final, n) "
            "SELECT j.campaign_id, 'evaluation', j.target, j.purpose, e.verdict, e.is_final, count(*) "
            "FROM evaluations e JOIN jobs j ON j.id = e.job_id WHERE j.campaign_id = $1::bigint "
            "GROUP BY 1, 3, 4, 5, 6", 1, p, err, errlen) < 0)
        return -1;
    return 0;
}

/* Create the campaign, its H finished jobs (setup_history; h = 0: none)
 * and its M queued jobs. *cid receives its id. Returns 0 or -1 with
 * reason. */
static int setup_queue(kf_db *db, const char *task_dir, const char *name, long h, long m, int64_t *cid,
                       char *err, size_t errlen)
{
    kf_campaign_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.name = name;
    spec.task_dir = task_dir;
    spec.strategy = "tune";
    spec.targets[0] = "cpu";
    spec.n_targets = 1;
    if (kf_campaign_create(db, &spec, cid, err, errlen) < 0) return -1;
    char id[32], n[32];
    snprintf(id, sizeof(id), "%lld", (long long)*cid);
    snprintf(n, sizeof(n), "%ld", m);
    const char *p[2] = { id, n };
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    if ((h > 0 && setup_history(db, *cid, h, err, errlen) < 0) ||
        kf_db_cmd(db,
            "INSERT INTO candidates (campaign_id, source, sha256, defines, parent_id, proposer) "
            "SELECT s.campaign_id, s.source, s.sha256, jsonb_build_object('LOADGEN', g::text),"
            "       s.id, 'human' "
            "FROM candidates s, generate_series(1, $2::int) g "
            "WHERE s.campaign_id = $1::bigint AND s.proposer = 'seed'", 2, p, err, errlen) < 0 ||
        kf_db_cmd(db,
            "INSERT INTO jobs (candidate_id, campaign_id, target, max_attempts, purpose) "
            "SELECT id, campaign_id, 'cpu', 3, 'eval' FROM candidates "
            "WHERE campaign_id = $1::bigint AND proposer = 'human' AND defines ? 'LOADGEN' ORDER BY id",
            1, p, err, errlen) < 0 ||
        kf_db_commit(db, err, errlen) < 0) {
        kf_db_rollback(db);
        return -1;
    }
    if (kf_db_cmd(db, "ANALYZE jobs", 0, NULL, err, errlen) < 0 ||
        kf_db_cmd(db, "ANALYZE candidates", 0, NULL, err, errlen) < 0 ||
        (h > 0 && kf_db_cmd(db, "ANALYZE evaluations", 0, NULL, err, errlen) < 0))
        return -1;
    return kf_campaign_start(db, name, err, errlen);
}

/* Enroll n identities "<prefix>-<i>" as `kfarm worker add` does (only the
 * derived key K reaches the database), in one transaction; keys[i] receives
 * worker i's keys. Returns 0 or -1 with reason. */
static int enroll(kf_db *db, const char *prefix, int n, kf_wire_key *keys, char *err,
                  size_t errlen)
{
    if (kf_db_begin(db, err, errlen) < 0) return -1;
    for (int i = 0; i < n; i++) {
        char name[KF_WIRE_ID_MAX + 1], hex[2 * KF_WIRE_SECRET_LEN + 1], khex[2 * KF_WIRE_KEY_LEN + 1];
        uint8_t secret[KF_WIRE_SECRET_LEN];
        snprintf(name, sizeof(name), "%s-%d", prefix, i);
        if (kf_cred_new_secret(secret, hex) < 0) {
            snprintf(err, errlen, "no random source");
            goto fail;
        }
        int rc = kf_cred_derive(name, secret, sizeof(secret), &keys[i], err, errlen);
        OPENSSL_cleanse(secret, sizeof(secret));
        if (rc < 0) goto fail;
        kf_wire_hex(keys[i].k, KF_WIRE_KEY_LEN, khex);
        if (kf_server_cred_store(db, name, khex, 1, err, errlen) < 0) goto fail;
    }
    return kf_db_commit(db, err, errlen);
fail:
    kf_db_rollback(db);
    return -1;
}

/* Final `ok` evaluations stored for our workers (names "<prefix>-*", unique
 * to this run) into *stored. Returns 0, or -1 with reason. */
static int count_stored(kf_db *db, const char *prefix, long *stored, char *err, size_t errlen)
{
    char like[80];
    snprintf(like, sizeof(like), "%s-%%", prefix);
    const char *p[1] = { like };
    PGresult *r = kf_db_exec(db,
        "SELECT count(*) FROM evaluations WHERE is_final AND reported AND verdict = 'ok'"
        "   AND worker_id LIKE $1", 1, p, err, errlen);
    if (!r) return -1;
    *stored = (long)kf_db_i64(r, 0, 0, 0);
    PQclear(r);
    return 0;
}

/* Consistency of what this run's workers touched, into *dup (jobs holding
 * more than one final evaluation) and, for campaign cid (0: skipped),
 * *mismatch (jobs whose state 'done' disagrees with having a final
 * evaluation). Returns 0, or -1 with reason. */
static int count_inconsistent(kf_db *db, const char *prefix, int64_t cid, long *dup, long *mismatch,
                              char *err, size_t errlen)
{
    char like[80], id[32];
    snprintf(like, sizeof(like), "%s-%%", prefix);
    snprintf(id, sizeof(id), "%lld", (long long)cid);
    const char *p[2] = { like, id };
    PGresult *r = kf_db_exec(db,
        "SELECT (SELECT count(*) FROM (SELECT e.job_id FROM evaluations e"
        "          WHERE e.is_final AND e.job_id IN (SELECT job_id FROM evaluations WHERE worker_id LIKE $1)"
        "          GROUP BY e.job_id HAVING count(*) > 1) d),"
        "       (SELECT count(*) FROM jobs j WHERE j.campaign_id = $2::bigint AND"
        "          (j.state = 'done') <> EXISTS (SELECT 1 FROM evaluations f WHERE f.job_id = j.id AND f.is_final))",
        2, p, err, errlen);
    if (!r) return -1;
    *dup = (long)kf_db_i64(r, 0, 0, 0);
    *mismatch = (long)kf_db_i64(r, 0, 1, 0);
    PQclear(r);
    return 0;
}

/* ---- driving processes ---- */

static int write_all(int fd, const void *b, size_t n)
{
    const char *p = b;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *b, size_t n)
{
    char *p = b;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The body of driving process `idx`: workers [first, first+n), their
 * sockets, the loop, then everything measured written to fd: the driver
 * struct (counts, err) and per call its sample count and samples. Returns
 * the process's exit status. */
static int run_proc(lg *g, int idx, int first, int n, int fd)
{
    driver d;
    memset(&d, 0, sizeof(d));
    d.g = g;
    d.idx = idx;
    d.n = n;
    d.sims = calloc((size_t)n, sizeof(sim));
    d.ep = epoll_create1(EPOLL_CLOEXEC);
    if (!d.sims || d.ep < 0) snprintf(d.err, sizeof(d.err), "out of memory or epoll");
    for (int k = 0; k < n && !d.err[0]; k++) {
        sim *s = &d.sims[k];
        char name[KF_WIRE_ID_MAX + 1], err[256] = "";
        snprintf(name, sizeof(name), "%s-%d", g->prefix, first + k);
        int sock = nn_socket(AF_SP, NN_REQ);
        size_t sz = sizeof(int);
        s->has_sock = sock >= 0;
        s->cl.sock = sock;
        /* worker i to coordinator i mod K, or (--connect-all) to every one */
        const char *addr = g->addr[(first + k) % g->naddr];
        int set_ok = sock >= 0 && kf_wire_socket_setup(sock, KF_WIRE_MAX_MSG, -1, -1, err, sizeof(err)) == 0;
        int conn_ok = set_ok;
        for (int a = 0; conn_ok && a < (g->connect_all ? g->naddr : 1); a++) {
            if (g->connect_all) addr = g->addr[a];
            conn_ok = nn_connect(sock, addr) >= 0;
        }
        if (!set_ok || !conn_ok || kf_wire_client_init(&s->cl, sock, name, &g->keys[first + k]) < 0 ||
            nn_getsockopt(sock, NN_SOL_SOCKET, NN_RCVFD, &s->rcvfd, &sz) < 0 ||
            (sz = sizeof(int), nn_getsockopt(sock, NN_SOL_SOCKET, NN_SNDFD, &s->sndfd, &sz)) < 0)
            snprintf(d.err, sizeof(d.err), "socket of %.60s to %.60s: %.100s", name, addr,
                     err[0] ? err : nn_strerror(nn_errno()));
    }
    OPENSSL_cleanse(g->keys, (size_t)g->workers * sizeof(kf_wire_key)); /* this copy */
    if (d.err[0]) atomic_store(&g->phase, PH_STOP);
    else driver_main(&d);
    for (int k = 0; k < n; k++) {
        drop_job(&d.sims[k]);
        if (d.sims[k].has_sock) nn_close(d.sims[k].cl.sock);
    }
    driver hdr = d;
    memset(hdr.lat, 0, sizeof(hdr.lat));
    int rc = write_all(fd, &hdr, sizeof(hdr));
    for (int c = 0; c < C_N && rc == 0; c++) {
        uint64_t cnt = d.lat[c].n;
        rc = write_all(fd, &cnt, sizeof(cnt));
        if (rc == 0 && cnt) rc = write_all(fd, d.lat[c].v, cnt * sizeof(int64_t));
    }
    close(fd);
    return rc == 0 && !d.err[0] ? 0 : 1;
}

/* Read what driving process wrote to fd into d (samples appended to all).
 * Returns 0 or -1 (the process died before reporting). */
static int read_proc(int fd, driver *d, samples all[C_N])
{
    if (read_all(fd, d, sizeof(*d)) < 0) return -1;
    for (int c = 0; c < C_N; c++) {
        uint64_t cnt;
        if (read_all(fd, &cnt, sizeof(cnt)) < 0) return -1;
        for (uint64_t k = 0; k < cnt; k++) {
            int64_t v;
            if (read_all(fd, &v, sizeof(v)) < 0) return -1;
            samples_add(&all[c], v);
        }
    }
    return 0;
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: loadgen --coordinator ADDR [--coordinator ADDR ...] [--connect-all 0|1]\n"
        "               --workers N [--duration S] [--jobs J] [--queue M]\n"
        "               [--heartbeats K] [--piggyback 0|1] [--jobs-per-lease L] [--batch-results 0|1]\n"
        "               [--procs P]\n"
        "               [--poll-ms MS] [--timeout-ms MS] [--eval-ms MS]\n"
        "               [--warmup S|auto] [--warmup-max S] [--min-rounds R] [--drain-s S]\n"
        "               [--prefix NAME]\n"
        "               [--task DIR]\n"
        "  database: $KFARM_DB (the coordinator's). See the header of tools/bench/loadgen.c.\n"
        "  --coordinator ADDR  a coordinator (repeat, at most %d, for several on one database):\n"
        "                   worker i connects to the (i mod K)-th\n"
        "  --connect-all 0|1   every worker connects to every coordinator (default 0)\n"
        "  --duration S     measured window, s (default 15)\n"
        "  --jobs J         stop once J results are acknowledged (default: M)\n"
        "  --queue M        jobs queued before the run (default 20000; 0: none, use what is queued)\n"
        "  --history H      the campaign first gets H finished jobs with their evaluations\n"
        "                   (generate_series; default 0)\n"
        "  --heartbeats K   heartbeats per job between GetJob and Result (default 1)\n"
        "  --piggyback 0|1  each Result carries the next GetJob (default 0)\n"
        "  --jobs-per-lease L  ask for L jobs per GetJob (max_jobs; default 1, at most %d): one\n"
        "                   heartbeat covers them all, one Result each (--heartbeats: per lease)\n"
        "  --batch-results 0|1  the results of a lease's jobs in one message (Result.more)\n"
        "  --procs P        driving processes, one thread each (default: one per %d workers;\n"
        "                   nanomsg allows 512 sockets per process)\n"
        "  --poll-ms MS     wait after NO_JOB (default 500, as kfarm-worker)\n"
        "  --timeout-ms MS  a request unanswered this long is a timeout, sent again (default 15000)\n"
        "  --eval-ms MS     each leased job is \"evaluated\" for 0.5-1.5x MS before its heartbeat or\n"
        "                   result (default 0: the closed loop; N workers offer N/MS jobs per ms)\n"
        "  --stagger 0|1    with --eval-ms: each worker's first GetJob waits a uniform [0, L x MS)\n"
        "                   ms, a fleet out of step (default 0: all at once, results in waves)\n"
        "  --tasks-once 0|1 GetJob.tasks_once with the task held in have_tasks, as kfarm-worker\n"
        "                   (default 1): a task's files travel once per worker, not with every job\n"
        "  --sources-once 0|1 GetJob.sources_once, as kfarm-worker (default 1): a job whose source is\n"
        "                   an earlier job's of the same reply names that job instead\n"
        "  --settle 0|1     after the setup, VACUUM, CHECKPOINT and sync(2) before the workers\n"
        "                   start, so that the setup's autovacuum and writeback do not land in the\n"
        "                   window (default 1)\n"
        "  --slow-ms MS     print each reply of the window slower than MS to stderr: \"slow CALL\n"
        "                   UNIX_TIME LATENCY ms\" (default 0: none), to line spikes up with logs\n"
        "  --warmup S|auto  run this long before the window opens; auto (default): until every\n"
        "                   worker had a Result answered, at most --warmup-max S (default 60)\n"
        "  --min-rounds R   with --warmup auto, the window lasts at least R warm-up lengths\n"
        "                   (default 2)\n"
        "  --drain-s S      after the window, wait at most this long for its last replies (default 60)\n"
        "  --prefix NAME    worker names NAME-0 .. NAME-(N-1) (default lg<time>-<pid>)\n",
        LG_MAX_ADDRS, KF_QUEUE_MAX_LEASES, LG_PER_PROC);
}

static int arg_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    lg *g = mmap(NULL, sizeof(lg), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g == MAP_FAILED) {
        fprintf(stderr, "loadgen: mmap: %s\n", strerror(errno));
        return 1;
    }
    memset(g, 0, sizeof(*g));
    g->duration_s = 15;
    g->drain_s = 60;
    g->heartbeats = 1;
    g->tasks_once = 1;
    g->sources_once = 1;
    g->per_lease = 1;
    g->poll_ms = 500;
    g->timeout_ms = 15000;
    g->job_limit = -1;
    long queue = 20000, history = 0;
    int procs = 0;
    double warmup_s = -1, warmup_max_s = 60, min_rounds = 2;
    int settle = 1;
    snprintf(g->prefix, sizeof(g->prefix), "lg%lx-%d", (unsigned long)time(NULL), (int)getpid());
    char task_buf[4096];
    const char *src = getenv("KFARM_SRC");
    snprintf(task_buf, sizeof(task_buf), "%s/tests/tasks/farm_axpy_f32",
             src && *src ? src : KFARM_SOURCE_DIR);
    const char *task_dir = task_buf;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!v) return usage(stderr), 2;
        i++;
        if (!strcmp(a, "--coordinator")) {
            if (g->naddr == LG_MAX_ADDRS) {
                fprintf(stderr, "loadgen: at most %d --coordinator addresses\n", LG_MAX_ADDRS);
                return 2;
            }
            g->addr[g->naddr++] = v;
        } else if (!strcmp(a, "--connect-all") && arg_num(v, 0, 1, &x) == 0) g->connect_all = (int)x;
        else if (!strcmp(a, "--workers") && arg_num(v, 1, LG_MAX_PROCS * LG_PER_PROC, &x) == 0) g->workers = (int)x;
        else if (!strcmp(a, "--duration") && arg_num(v, 0.1, 86400, &x) == 0) g->duration_s = x;
        else if (!strcmp(a, "--jobs") && arg_num(v, 1, 1e12, &x) == 0) g->job_limit = (long)x;
        else if (!strcmp(a, "--queue") && arg_num(v, 0, 1e8, &x) == 0) queue = (long)x;
        else if (!strcmp(a, "--history") && arg_num(v, 0, 1e8, &x) == 0) history = (long)x;
        else if (!strcmp(a, "--heartbeats") && arg_num(v, 0, 1000, &x) == 0) g->heartbeats = (int)x;
        else if (!strcmp(a, "--piggyback") && arg_num(v, 0, 1, &x) == 0) g->piggyback = (int)x;
        else if (!strcmp(a, "--jobs-per-lease") && arg_num(v, 1, KF_QUEUE_MAX_LEASES, &x) == 0)
            g->per_lease = (int)x;
        else if (!strcmp(a, "--batch-results") && arg_num(v, 0, 1, &x) == 0) g->batch_results = (int)x;
        else if (!strcmp(a, "--procs") && arg_num(v, 1, LG_MAX_PROCS, &x) == 0) procs = (int)x;
        else if (!strcmp(a, "--poll-ms") && arg_num(v, 1, 60000, &x) == 0) g->poll_ms = (int)x;
        else if (!strcmp(a, "--eval-ms") && arg_num(v, 0, 3600000, &x) == 0) g->eval_ms = (int)x;
        else if (!strcmp(a, "--stagger") && arg_num(v, 0, 1, &x) == 0) g->stagger = (int)x;
        else if (!strcmp(a, "--tasks-once") && arg_num(v, 0, 1, &x) == 0) g->tasks_once = (int)x;
        else if (!strcmp(a, "--sources-once") && arg_num(v, 0, 1, &x) == 0) g->sources_once = (int)x;
        else if (!strcmp(a, "--slow-ms") && arg_num(v, 0, 3600000, &x) == 0) g->slow_ms = (int)x;
        else if (!strcmp(a, "--settle") && arg_num(v, 0, 1, &x) == 0) settle = (int)x;
        else if (!strcmp(a, "--timeout-ms") && arg_num(v, 10, 3600000, &x) == 0) g->timeout_ms = (int)x;
        else if (!strcmp(a, "--drain-s") && arg_num(v, 0, 600, &x) == 0) g->drain_s = x;
        else if (!strcmp(a, "--warmup") && !strcmp(v, "auto")) warmup_s = -1;
        else if (!strcmp(a, "--warmup") && arg_num(v, 0, 3600, &x) == 0) warmup_s = x;
        else if (!strcmp(a, "--warmup-max") && arg_num(v, 0, 3600, &x) == 0) warmup_max_s = x;
        else if (!strcmp(a, "--min-rounds") && arg_num(v, 0, 100, &x) == 0) min_rounds = x;
        else if (!strcmp(a, "--prefix") && strlen(v) < 40 && kf_cred_name_ok(v))
            snprintf(g->prefix, sizeof(g->prefix), "%s", v);
        else if (!strcmp(a, "--task")) task_dir = v;
        else {
            fprintf(stderr, "loadgen: bad option or value: %s %s\n", a, v);
            return usage(stderr), 2;
        }
    }
    if (g->naddr < 1 || g->workers < 1) return usage(stderr), 2;
    if (g->job_limit < 0) g->job_limit = queue > 0 ? queue : 0;
    int min_procs = (g->workers + LG_PER_PROC - 1) / LG_PER_PROC;
    if (procs < min_procs) procs = min_procs;
    if (procs > g->workers) procs = g->workers;
    g->procs = procs;
    const char *conninfo = getenv("KFARM_DB");
    if (!conninfo || !*conninfo) {
        fprintf(stderr, "loadgen: set $KFARM_DB to the coordinator's database (libpq conninfo)\n");
        return 2;
    }
    /* one socket per simulated worker (and nanomsg's own descriptors) */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    char err[1024];
    kf_db *db = kf_db_open(conninfo, err, sizeof(err));
    if (!db) {
        fprintf(stderr, "loadgen: %s\n", err);
        return 1;
    }
    if (kf_db_migrate(db, NULL, err, sizeof(err)) < 0) {
        fprintf(stderr, "loadgen: migrate: %s\n", err);
        return 1;
    }
    double t0 = (double)now_ns() / 1e9;
    int64_t cid = 0;
    char cname[128];
    snprintf(cname, sizeof(cname), "loadgen-%s-%lld", g->prefix, (long long)time(NULL));
    if (queue > 0 && setup_queue(db, task_dir, cname, history, queue, &cid, err, sizeof(err)) < 0) {
        fprintf(stderr, "loadgen: queue setup: %s\n", err);
        return 1;
    }
    double t1 = (double)now_ns() / 1e9;
    g->keys = calloc((size_t)g->workers, sizeof(kf_wire_key));
    if (!g->keys) {
        fprintf(stderr, "loadgen: out of memory\n");
        return 1;
    }
    if (enroll(db, g->prefix, g->workers, g->keys, err, sizeof(err)) < 0) {
        fprintf(stderr, "loadgen: enrollment: %s\n", err);
        return 1;
    }
    double t2 = (double)now_ns() / 1e9;
    /* the cluster's postmaster, when it runs on this machine: the parent
     * of this connection's backend (for the window's CPU accounting) */
    long postmaster = -1;
    {
        char e2[256];
        PGresult *r = kf_db_exec(db, "SELECT pg_backend_pid()", 0, NULL, e2, sizeof(e2));
        if (r && PQntuples(r) == 1) {
            char comm[32];
            unsigned long long self, reaped;
            if (proc_stat(PQgetvalue(r, 0, 0), &postmaster, comm, sizeof(comm), &self, &reaped) < 0 ||
                strcmp(comm, "postgres"))
                postmaster = -1;
        }
        if (r) PQclear(r);
    }
    printf("loadgen: %ld finished and %ld queued jobs written in %.2f s (campaign %s), %d workers enrolled in %.2f s\n",
           queue > 0 ? history : 0, queue, t1 - t0, queue > 0 ? cname : "-", g->workers, t2 - t1);
    if (settle) {
        /* The setup dirtied hundreds of MB of pages that the kernel writes
         * back ~30 s later (vm.dirty_expire_centisecs), inside the window: a
         * WAL flush queued behind that writeback took 130-190 ms and every
         * commit waited (docs/benchmarks.md, 2026-12-07). A fleet's steady
         * state has no such burst: write it out before the window opens. */
        /* The same for the autovacuum its 250,000 inserted rows call for
         * (jobs' 7 indexes: ~2 s of a core) that began ~20 s later, inside
         * the window; the fleet's own updates still call for theirs. */
        int vac = kf_db_cmd(db, "VACUUM (ANALYZE) jobs, candidates, workers, worker_credentials", 0, NULL,
                            err, sizeof(err));
        int ck = kf_db_cmd(db, "CHECKPOINT", 0, NULL, err, sizeof(err));
        sync();
        printf("loadgen: setup written out (%s, %s, sync) in %.2f s\n", vac < 0 ? "no VACUUM" : "VACUUM",
               ck < 0 ? "no CHECKPOINT: not allowed" : "CHECKPOINT", (double)now_ns() / 1e9 - t2);
    }
    fflush(stdout);

    /* the driving processes (no nanomsg socket exists before the fork) */
    pid_t pid[LG_MAX_PROCS];
    int rfd[LG_MAX_PROCS];
    int per = g->workers / procs, extra = g->workers % procs, at = 0;
    int64_t reg_start = now_ns();
    for (int p = 0; p < procs; p++) {
        int n = per + (p < extra), fds[2];
        if (pipe(fds) < 0 || (pid[p] = fork()) < 0) {
            fprintf(stderr, "loadgen: pipe/fork: %s\n", strerror(errno));
            atomic_store(&g->phase, PH_STOP);
            procs = p;
            break;
        }
        if (pid[p] == 0) {
            close(fds[0]);
            for (int q = 0; q < p; q++) close(rfd[q]);
            _exit(run_proc(g, p, at, n, fds[1]));
        }
        close(fds[1]);
        rfd[p] = fds[0];
        at += n;
    }
    OPENSSL_cleanse(g->keys, (size_t)g->workers * sizeof(kf_wire_key));

    /* registration (bounded), the warm-up, the window, the drain */
    int64_t reg_deadline = reg_start + (int64_t)(120 * 1e9);
    while (atomic_load(&g->phase) == PH_REGISTER && atomic_load(&g->registered) < g->workers &&
           now_ns() < reg_deadline)
        usleep(1000);
    int ph = PH_REGISTER, fatal = 0;
    int64_t t_warm = now_ns();
    if (atomic_load(&g->registered) < g->workers ||
        !atomic_compare_exchange_strong(&g->phase, &ph, PH_WARMUP)) {
        if (atomic_load(&g->registered) < g->workers)
            fprintf(stderr, "loadgen: only %d of %d workers registered\n",
                    atomic_load(&g->registered), g->workers);
        atomic_store(&g->phase, PH_STOP);
        fatal = 1;
    }
    double reg_s = (double)(t_warm - reg_start) / 1e9;
    /* warm-up: a fixed time, or (auto) until every worker had a Result
     * answered: all N started together, and the first round of a closed
     * loop is a burst, not the steady state */
    int64_t warm_end = t_warm + (int64_t)((warmup_s >= 0 ? warmup_s : warmup_max_s) * 1e9);
    while (!fatal && atomic_load(&g->phase) == PH_WARMUP && now_ns() < warm_end &&
           (warmup_s >= 0 || atomic_load(&g->warmed) < g->workers))
        usleep(1000);
    static const char *const tcp_names[3] = { "RetransSegs", "TCPTimeouts", "ListenDrops" };
    long tcp0[3], tcp1[3];
    tcp_counters(tcp_names, 3, tcp0);
    cpu_snap cpu0, cpu1;
    cpu_snapshot(postmaster, &cpu0);
    int64_t t_start = now_ns();
    double warm_s = (double)(t_start - t_warm) / 1e9;
    int warmed = atomic_load(&g->warmed);
    ph = PH_WARMUP;
    if (!fatal && !atomic_compare_exchange_strong(&g->phase, &ph, PH_MEASURE)) fatal = 1;
    /* the window: --duration, and at least --min-rounds warm-up lengths
     * (auto warm-up), so that it spans whole rounds of the closed loop */
    double win_s = g->duration_s;
    if (warmup_s < 0 && min_rounds * warm_s > win_s) win_s = min_rounds * warm_s;
    int64_t end = t_start + (int64_t)(win_s * 1e9);
    while (!fatal && atomic_load(&g->phase) == PH_MEASURE && now_ns() < end) usleep(1000);
    ph = PH_MEASURE;
    if (atomic_compare_exchange_strong(&g->phase, &ph, PH_DRAIN)) atomic_store(&g->t_end_ns, now_ns());
    cpu_snapshot(postmaster, &cpu1);
    tcp_counters(tcp_names, 3, tcp1);
    /* the drain: until every request of the window is answered (their
     * latencies are not cut short), at most --drain-s */
    int64_t t_drain = now_ns(), drain_end = t_drain + (int64_t)(g->drain_s * 1e9);
    while (!fatal && atomic_load(&g->phase) == PH_DRAIN && atomic_load(&g->pending) > 0 &&
           now_ns() < drain_end)
        usleep(1000);
    double drain_took = (double)(now_ns() - t_drain) / 1e9;
    atomic_store(&g->phase, PH_STOP);

    /* collect */
    samples all[C_N];
    long count[C_N][X_N], ok = 0, pending = 0, acked_all = 0, task_missing = 0, source_missing = 0;
    double lg_cpu = 0;
    memset(all, 0, sizeof(all));
    memset(count, 0, sizeof(count));
    for (int p = 0; p < procs; p++) {
        driver d;
        if (read_proc(rfd[p], &d, all) < 0) {
            fprintf(stderr, "loadgen: driving process %d ended without reporting\n", p);
            fatal = 1;
        } else {
            if (d.err[0]) {
                fprintf(stderr, "loadgen: driving process %d: %s\n", p, d.err);
                fatal = 1;
            }
            ok += d.ok_in_window;
            acked_all += d.acked_jobs;
            task_missing += d.task_missing;
            source_missing += d.source_missing;
            pending += d.pending_at_end;
            lg_cpu += d.cpu_window_s;
            for (int c = 0; c < C_N; c++)
                for (int x = 0; x < X_N; x++) count[c][x] += d.count[c][x];
        }
        close(rfd[p]);
        int st;
        waitpid(pid[p], &st, 0);
    }
    int64_t t_end = atomic_load(&g->t_end_ns);
    double secs = t_end > t_start ? (double)(t_end - t_start) / 1e9 : 0;
    double rate = secs > 0 ? (double)ok / secs : 0;
    double p50[C_N], p99[C_N], mx[C_N];
    for (int c = 0; c < C_N; c++) {
        qsort(all[c].v, all[c].n, sizeof(int64_t), cmp_i64);
        p50[c] = pct_ms(all[c].v, all[c].n, 50);
        p99[c] = pct_ms(all[c].v, all[c].n, 99);
        mx[c] = pct_ms(all[c].v, all[c].n, 100);
    }
    long no_job = count[C_GETJOB][KFARM__STATUS__NO_JOB], timeouts = 0, errors = 0;
    for (int c = 0; c < C_N; c++) {
        timeouts += count[c][X_TIMEOUT];
        for (int x = KFARM__STATUS__STALE; x < X_N; x++)
            if (x != KFARM__STATUS__DUPLICATE && x != X_TIMEOUT) errors += count[c][x];
    }

    /* durable before acknowledged; the campaign stops feeding later runs */
    long stored = 0, acked = acked_all;
    int verified = 0;
    if (queue > 0) {
        char e2[512];
        if (kf_campaign_pause(db, cname, e2, sizeof(e2)) < 0)
            fprintf(stderr, "loadgen: pausing %s: %s\n", cname, e2);
    }
    long dup = -1, mismatch = -1;
    if (count_stored(db, g->prefix, &stored, err, sizeof(err)) < 0 ||
        count_inconsistent(db, g->prefix, cid, &dup, &mismatch, err, sizeof(err)) < 0)
        fprintf(stderr, "loadgen: verification query: %s\n", err);
    else
        verified = stored >= acked && dup == 0 && mismatch == 0 && task_missing == 0 && source_missing == 0;
    kf_db_close(db);
    char addrs[LG_MAX_ADDRS * 64 + 32];
    size_t al = 0;
    for (int a = 0; a < g->naddr && al < sizeof(addrs) - 64; a++)
        al += (size_t)snprintf(addrs + al, sizeof(addrs) - al, "%s%.60s", a ? "," : "", g->addr[a]);
    if (g->naddr > 1)
        snprintf(addrs + al, sizeof(addrs) - al, " (%s)", g->connect_all ? "each worker to all" : "spread");

    printf("loadgen: %d workers in %d processes, %s; registration %.2f s; warm-up %.2f s "
           "(%d of %d workers had a result answered); window %.2f s%s; %ld results "
           "acknowledged OK in the window, %.1f jobs/s; drain %.2f s, %ld requests of the window "
           "unanswered at the end\n",
           g->workers, procs, addrs, reg_s, warm_s, warmed, g->workers, secs,
           atomic_load(&g->ran_dry) ? " (ended early: the queue ran dry)" : "", ok, rate, drain_took,
           pending);
    printf("%-10s %8s %9s %9s %9s", "call", "replies", "p50_ms", "p99_ms", "max_ms");
    for (int x = 0; x < X_N; x++) printf(" %*s", x == X_AUTH ? 9 : 8, X_NAME[x]);
    printf("\n");
    for (int c = 0; c < C_N; c++) {
        printf("%-10s %8zu %9.2f %9.2f %9.2f", CALL_NAME[c], all[c].n, p50[c], p99[c], mx[c]);
        for (int x = 0; x < X_N; x++) printf(" %*ld", x == X_AUTH ? 9 : 8, count[c][x]);
        printf("\n");
    }
    printf("durable: %ld jobs acknowledged OK (warm-up, window and drain), %ld final ok evaluations stored "
           "under this run's workers; %ld jobs with several final evaluations; %ld jobs whose state "
           "disagrees with their final evaluation; %ld jobs without their task's files that the worker "
           "did not hold; %ld jobs without their source: %s\n", acked, stored, dup, mismatch, task_missing,
           source_missing,
           verified ? "verified (none missing, none twice)" : "FAILED");
    printf("RESULT loadgen workers=%d procs=%d secs=%.3f jobs=%ld jobs_per_s=%.1f "
           "register_p50_ms=%.2f register_p99_ms=%.2f getjob_p50_ms=%.2f getjob_p99_ms=%.2f "
           "getjob_max_ms=%.2f hb_p50_ms=%.2f hb_p99_ms=%.2f result_p50_ms=%.2f "
           "result_p99_ms=%.2f result_max_ms=%.2f no_job=%ld errors=%ld timeouts=%ld "
           "loadgen_cpu_s=%.2f warmup_s=%.2f ran_dry=%d verified=%d per_lease=%d batch_results=%d "
           "coords=%d connect_all=%d dup_finals=%ld history=%ld eval_ms=%d stagger=%d "
           "tcp_retrans=%ld tcp_timeouts=%ld listen_drops=%ld tasks_once=%d task_missing=%ld "
           "sources_once=%d source_missing=%ld pg_us_per_job=%.1f coord_us_per_job=%.1f machine_us_per_job=%.1f steal_s=%.2f\n",
           g->workers, procs, secs, ok, rate, p50[C_REGISTER], p99[C_REGISTER], p50[C_GETJOB],
           p99[C_GETJOB], mx[C_GETJOB], p50[C_HEARTBEAT], p99[C_HEARTBEAT], p50[C_RESULT],
           p99[C_RESULT], mx[C_RESULT], no_job, errors, timeouts, lg_cpu, warm_s,
           atomic_load(&g->ran_dry), verified, g->per_lease, g->batch_results, g->naddr, g->connect_all,
           dup, queue > 0 ? history : 0, g->eval_ms, g->stagger, tcp1[0] - tcp0[0], tcp1[1] - tcp0[1],
           tcp1[2] - tcp0[2], g->tasks_once, task_missing, g->sources_once,
           source_missing, per_job(cpu0.pg, cpu1.pg, ok),
           per_job(cpu0.coord, cpu1.coord, ok), per_job(cpu0.busy, cpu1.busy, ok),
           cpu0.steal >= 0 && cpu1.steal >= 0 ? cpu1.steal - cpu0.steal : -1);
    for (int c = 0; c < C_N; c++) free(all[c].v);
    free(g->keys);
    if (fatal || ok == 0 || !verified) return 1;
    return 0;
}
