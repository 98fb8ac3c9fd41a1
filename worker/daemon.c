/*
 * daemon.c -- the networked worker: `kfarm-worker run`.
 *
 * Design. A worker holds no durable state but caches: it connects *out* to
 * the coordinator (workers sit behind NAT) with a nanomsg REQ socket and
 * speaks the request/reply protocol of proto/kfarm.proto:
 *
 *   Register (devices, routing classes) -> GetJob poll -> Job(s)
 *     -> kf_eval_run (compile + sandboxed evaluation), whose tick callback
 *        sends a Heartbeat every lease/3 for every lease held (a STALE reply
 *        abandons the job: the coordinator gave it to someone else)
 *     -> Result, re-sent until the coordinator answers OK or DUPLICATE
 *        (exactly-once storage is the coordinator's job: it dedups by
 *        job id + fencing token), or STALE (our lease was lost); it carries
 *        the next GetJob when no job is held ahead.
 *
 * Batches (--batch): a GetJob may ask for several leases (max_jobs). They
 * are evaluated one after the other and their results go in one Result
 * message (Result.more, one group commit), so a fleet of fast evaluations
 * costs the coordinator one message per batch instead of one per job. With
 * --batch auto (the default on GPUs) a batch holds ~KF_DAEMON_BATCH_S (4 s)
 * of evaluation at the measured per-job wall: one job until one has been
 * timed, one per lease where evaluations take 4 s or more.
 *
 * Tasks once (GetJob.tasks_once): each task the worker is sent in full is
 * written under work_dir/tasks/ and linked by the coordinator's hash
 * (Job.task_sha256, task_cache.c); every GetJob names the last ones still
 * on disk (have_tasks), and a job of one of them comes without its
 * task.json and files. The tasks of a reply are written as it arrives, so
 * its later jobs find the task whatever order they are prepared in.
 * Sources once (GetJob.sources_once): a job whose source is that of an
 * earlier job of its reply (the variants of one tuned kernel) comes with
 * Job.source_job naming that job instead of the bytes again.
 *
 * Compile-ahead (--prefetch, the default on GPUs): while a job evaluates,
 * the next jobs of its batch build into the compile cache in children at
 * nice 19, several at once (the host's cores - 1, at most 8); on the
 * batch's last job the next batch is leased ahead and compiled likewise.
 *
 * Identity: the worker speaks as the name in its credential (issued by
 * `kfarm worker add NAME`); every frame is authenticated with keys derived
 * from it (proto/kf_wire.h). A coordinator answering CONFLICT (another live
 * process holds this identity) stops this process with a clear error.
 *
 * A coordinator that is down or restarting only delays the loop: every call
 * has a receive timeout and is retried with capped exponential backoff, and a
 * finished result is kept in memory until acknowledged. The job's task files
 * are materialized once per task content hash under work_dir/tasks/.
 */
#include "daemon.h"


#include <errno.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <limits.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <openssl/crypto.h>

#include "device.h"
#include "kf_eval.h"
#include "judge.h"
#include "kf_util.h"
#include "kf_wire.h"
#include "sandbox.h"
#include "task_cache.h"

#define KF_DAEMON_MAX_COORD 8

typedef struct {
    const char *coordinator;                  /* the first address (logs) */
    const char *coordinators[KF_DAEMON_MAX_COORD];
    int n_coordinators;
    char worker_id[KF_WIRE_ID_MAX + 1];
    char work_dir[1024];
    char cache_dir[1100];
    int poll_ms;
    int max_jobs;          /* stop after this many jobs (0 = never) */
    int quick;             /* fewer timing repetitions (tests, demos) */
    int gpu;               /* GPU index this worker serves (cuda backend) */
    char arch[32];         /* that GPU's sm_XY, found once at start ("" on cpu) */
    int pending_judge;     /* the last evaluation's judge, still exiting (kf_eval_req) */
    int judge_per_eval;    /* --judge-per-eval: a judge process per evaluation, no serving judge */
    kf_judge_srv *judge_srv; /* the serving judge: device context and task runners kept (kf_eval_req) */
    int cpu_only;          /* serve the cpu backend even where a GPU answers */
    int prefetch;          /* lease the next job and compile it during an evaluation:
                              1 on, 0 off, -1 auto (on for cuda, off for cpu, where
                              a compile would disturb the CPU timings) */
    int batch;             /* --batch: jobs per lease; 0 auto (KF_DAEMON_BATCH_S); -1 the backend's default */
    int compile_jobs;      /* compile-ahead children at once (the host's cores - 1, 1..8) */
    int sock;
    kf_wire_client wc;     /* identity, per-worker keys, instance, counter */
    int exit_code;         /* set when the coordinator refuses this process for good */
    kf_task_cache tasks;   /* tasks held by the coordinator's hash (GetJob.have_tasks) */
    volatile sig_atomic_t *stop;
} daemon_cfg;

#define KF_DAEMON_MAX_BATCH 16 /* leases asked for in one GetJob at most (--batch) */
#define KF_DAEMON_BATCH_S 4.0  /* --batch auto: a batch holds about this much evaluation */

/* A job this worker holds a lease on. */
typedef struct {
    const Kfarm__Job *job; /* NULL: none held */
    int lost;              /* coordinator said STALE or cancel: lease gone */
    pid_t precompile;      /* compile-ahead child still to be reaped, or 0 */
    int compiled_ahead;    /* a compile-ahead child was started for it */
    const uint8_t *src;    /* its candidate source: its own, or that of the job of its reply it
                            * names (Job.source_job, GetJob.sources_once); NULL: that job is not
                            * earlier in the reply */
    size_t src_len;
} held_job;

/* The leases one reply granted (a GetJob's, or a Result's with `next`):
 * Reply.job and Reply.more_jobs, evaluated in order, their results sent
 * together. The reply owns the jobs. */
typedef struct {
    Kfarm__Reply *rep; /* NULL: no batch */
    held_job j[KF_DAEMON_MAX_BATCH];
    int n;
} lease_batch;

/* Heartbeat state for the tick callback: every job held (the one being
 * evaluated first, then the rest of its batch, evaluated or not, then the
 * batch leased ahead), all kept alive by one Heartbeat message. */
typedef struct {
    daemon_cfg *cfg;
    held_job *jobs[2 * KF_DAEMON_MAX_BATCH];
    int n;
    double interval_s, last_s;
} hb_state;

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", gmtime_r(&now, &tm));
    fprintf(stderr, "%s kfarm-worker: ", ts);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* One request/reply exchange; -1 on transport/auth failure (logged). */
static int call(daemon_cfg *c, Kfarm__Request *req, Kfarm__Reply **rep)
{
    char err[512];
    if (kf_wire_call(&c->wc, req, rep, err, sizeof(err)) < 0) {
        logmsg("%s: %s", c->coordinator, err);
        return -1;
    }
    return 0;
}

/* Another live process holds this identity: stop, saying so. */
static void identity_conflict(daemon_cfg *c, const Kfarm__Reply *rep)
{
    logmsg("error: refused by the coordinator: %s", rep->detail ? rep->detail : "identity conflict");
    logmsg("error: worker %s stops (exit 3): one process per identity", c->worker_id);
    c->exit_code = 3;
    *c->stop = 1;
}

static int do_register(daemon_cfg *c, kf_device *dev, char classes[][128], int n_classes)
{
    Kfarm__Device d = KFARM__DEVICE__INIT;
    kf_device_to_proto(dev, &d);
    Kfarm__Device *devs[1] = {&d};
    char *cls[8];
    for (int i = 0; i < n_classes; i++) cls[i] = classes[i];
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    Kfarm__Register reg = KFARM__REGISTER__INIT;
    reg.worker_id = c->worker_id;
    reg.hostname = host;
    reg.backend = (char *)dev->backend;
    reg.n_devices = 1;
    reg.devices = devs;
    reg.n_classes = (size_t)n_classes;
    reg.classes = cls;
    reg.has_slots = 1;
    reg.slots = 1;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_REGISTER;
    req.register_ = &reg;
    int backoff = 200;
    while (!*c->stop) {
        Kfarm__Reply *rep;
        if (call(c, &req, &rep) == 0) {
            int ok = rep->status == KFARM__STATUS__OK;
            if (rep->status == KFARM__STATUS__CONFLICT) {
                identity_conflict(c, rep);
                kfarm__reply__free_unpacked(rep, NULL);
                return -1;
            }
            if (!ok) logmsg("register refused: %s", rep->detail ? rep->detail : "(no detail)");
            kfarm__reply__free_unpacked(rep, NULL);
            if (ok) return 0;
        }
        sleep_ms(backoff);
        backoff = backoff < 5000 ? backoff * 2 : 5000;
    }
    return -1;
}

/* One Heartbeat for every held job in js (Heartbeat.more for all but the
 * first): marks a job lost when the coordinator says its lease is gone
 * (STALE or cancel for the first, cancel_jobs for the others). */
static void heartbeat_all(daemon_cfg *c, held_job *const *js, int n)
{
    held_job *live[2 * KF_DAEMON_MAX_BATCH];
    int nl = 0;
    for (int i = 0; i < n && nl < 2 * KF_DAEMON_MAX_BATCH; i++)
        if (js[i] && js[i]->job && !js[i]->lost) live[nl++] = js[i];
    if (nl == 0) return;
    Kfarm__LeaseRef refs[2 * KF_DAEMON_MAX_BATCH], *rp[2 * KF_DAEMON_MAX_BATCH];
    for (int k = 1; k < nl; k++) {
        const Kfarm__Job *jb = live[k]->job;
        kfarm__lease_ref__init(&refs[k - 1]);
        refs[k - 1].job_id = jb->job_id;
        refs[k - 1].fencing_token = jb->fencing_token;
        refs[k - 1].has_lease_token = jb->has_lease_token;
        refs[k - 1].lease_token = jb->lease_token;
        rp[k - 1] = &refs[k - 1];
    }
    Kfarm__Heartbeat hb = KFARM__HEARTBEAT__INIT;
    hb.worker_id = c->worker_id;
    hb.job_id = live[0]->job->job_id;
    hb.fencing_token = live[0]->job->fencing_token;
    hb.has_lease_token = live[0]->job->has_lease_token;
    hb.lease_token = live[0]->job->lease_token;
    hb.n_more = (size_t)(nl - 1);
    hb.more = nl > 1 ? rp : NULL;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_HEARTBEAT;
    req.heartbeat = &hb;
    Kfarm__Reply *rep;
    if (call(c, &req, &rep) < 0) return; /* coordinator away: keep going */
    if (rep->status == KFARM__STATUS__CONFLICT) {
        identity_conflict(c, rep);
        for (int k = 0; k < nl; k++) live[k]->lost = 1;
    } else {
        if (rep->status == KFARM__STATUS__STALE || (rep->has_cancel && rep->cancel)) {
            logmsg("job %llu: lease lost (%s); abandoning", (unsigned long long)live[0]->job->job_id,
                   rep->detail ? rep->detail : "stale fencing token");
            live[0]->lost = 1;
        }
        for (size_t x = 0; x < rep->n_cancel_jobs; x++)
            for (int k = 1; k < nl; k++)
                if (live[k]->job->job_id == rep->cancel_jobs[x] && !live[k]->lost) {
                    logmsg("job %llu: lease lost; abandoning", (unsigned long long)rep->cancel_jobs[x]);
                    live[k]->lost = 1;
                }
    }
    kfarm__reply__free_unpacked(rep, NULL);
}

/* kf_eval tick: heartbeat every held job each interval; non-zero (cancel the
 * evaluation) once the job being evaluated (jobs[0]) has lost its lease. */
static int heartbeat_tick(void *arg)
{
    hb_state *h = arg;
    double now = kf_util_now_s();
    if (now - h->last_s >= h->interval_s) {
        h->last_s = now;
        heartbeat_all(h->cfg, h->jobs, h->n);
    }
    return h->n > 0 && h->jobs[0] && h->jobs[0]->lost;
}

/* Does the job name its task only (GetJob.tasks_once: the worker holds it)? */
static int task_abbreviated(const Kfarm__Job *job)
{
    return job->task_sha256 && job->task_sha256[0] && !job->task_json[0] && job->n_task_files == 0;
}

/* Write the job's task files (sent in full) to work_dir/tasks/<hash>/ (once). */
static int materialize_task_files(daemon_cfg *c, const Kfarm__Job *job, char *dir, size_t dirlen)
{
    char hash[65];
    size_t total = strlen(job->task_json);
    char *cat = malloc(total + 1);
    if (!cat) return -1;
    memcpy(cat, job->task_json, total);
    for (size_t i = 0; i < job->n_task_files; i++) {
        const Kfarm__TaskFile *f = job->task_files[i];
        size_t add = strlen(f->name) + f->content.len + 2;
        char *nc = realloc(cat, total + add + 1);
        if (!nc) {
            free(cat);
            return -1;
        }
        cat = nc;
        memcpy(cat + total, f->name, strlen(f->name) + 1);
        total += strlen(f->name) + 1;
        memcpy(cat + total, f->content.data, f->content.len);
        total += f->content.len;
        cat[total++] = 0;
    }
    kf_util_sha256_hex(cat, total, hash);
    free(cat);
    snprintf(dir, dirlen, "%s/tasks/%.16s", c->work_dir, hash);
    char path[2048], tmp[1600];
    snprintf(path, sizeof(path), "%s/.complete", dir);
    if (access(path, F_OK) == 0) return 0;
    /* written whole in a directory of its own, then renamed into place:
     * another worker sharing the work dir never sees it half written, and
     * never rewrites one it already uses */
    snprintf(tmp, sizeof(tmp), "%s/tasks/.%.16s.%ld.%u", c->work_dir, hash, (long)getpid(), ++c->tasks.seq);
    kf_util_rmtree(tmp);
    int rc = kf_util_mkdirs(tmp);
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/task.json", tmp);
        rc = kf_util_write_file(path, job->task_json, strlen(job->task_json));
    }
    for (size_t i = 0; rc == 0 && i < job->n_task_files; i++) {
        const Kfarm__TaskFile *f = job->task_files[i];
        if (strchr(f->name, '/') || f->name[0] == '.' || !f->name[0]) {
            errno = EINVAL;
            rc = -1;
            break;
        }
        snprintf(path, sizeof(path), "%s/%s", tmp, f->name);
        rc = kf_util_write_file(path, f->content.data, f->content.len);
    }
    if (rc == 0) {
        snprintf(path, sizeof(path), "%s/.complete", tmp);
        rc = kf_util_write_file(path, "", 0);
    }
    if (rc == 0 && rename(tmp, dir) < 0) {
        /* another process put the same task there first: use it (an older
         * half-written one, from before this rule, is replaced) */
        snprintf(path, sizeof(path), "%s/.complete", dir);
        if (access(path, F_OK) == 0) {
            kf_util_rmtree(tmp);
            return 0;
        }
        kf_util_rmtree(dir);
        rc = rename(tmp, dir);
    }
    if (rc < 0) {
        int e = errno;
        kf_util_rmtree(tmp);
        errno = e;
    }
    return rc;
}

/* Write the job's task files to work_dir/tasks/<hash>/ (once), or find them
 * there when the job names a task this worker holds (task_abbreviated). */
static int materialize_task(daemon_cfg *c, const Kfarm__Job *job, char *dir, size_t dirlen)
{
    if (task_abbreviated(job)) {
        if (!kf_task_cache_find(&c->tasks, c->work_dir, job->task_sha256, dir, dirlen)) {
            errno = ENOENT; /* not sent and not held */
            return -1;
        }
        return 0;
    }
    int rc = materialize_task_files(c, job, dir, dirlen);
    if (rc == 0 && job->task_sha256) (void)kf_task_cache_remember(&c->tasks, c->work_dir, job->task_sha256, dir);
    return rc;
}

/* Paths of one job's files on this worker. */
typedef struct {
    char task_dir[1536], job_dir[1536], src[2048];
} job_paths;

/* Write the job's task files and candidate source. 0, or -1 with the reason
 * in res (infra_error). */
static int prepare_job(daemon_cfg *c, const held_job *j, const char *backend, job_paths *p,
                       kf_eval_res *res)
{
    const Kfarm__Job *job = j->job;
    if (!j->src) {
        res->verdict = KF_INFRA_ERROR;
        snprintf(res->detail, sizeof(res->detail),
                 "the job's source is that of job %llu, which is not earlier in its reply",
                 (unsigned long long)job->source_job);
        return -1;
    }
    if (materialize_task(c, job, p->task_dir, sizeof(p->task_dir)) < 0) {
        res->verdict = KF_INFRA_ERROR;
        if (task_abbreviated(job))
            snprintf(res->detail, sizeof(res->detail),
                     "the job names task %.64s without its files, and this worker does not hold it",
                     job->task_sha256);
        else
            snprintf(res->detail, sizeof(res->detail), "cannot write task files under %.900s: %s", c->work_dir,
                     strerror(errno));
        return -1;
    }
    snprintf(p->job_dir, sizeof(p->job_dir), "%s/jobs/%llu", c->work_dir, (unsigned long long)job->job_id);
    snprintf(p->src, sizeof(p->src), "%s/candidate.%s", p->job_dir, strcmp(backend, "cuda") ? "c" : "cu");
    if (kf_util_mkdirs(p->job_dir) < 0 || kf_util_write_file(p->src, j->src, j->src_len) < 0) {
        res->verdict = KF_INFRA_ERROR;
        snprintf(res->detail, sizeof(res->detail), "cannot write %.900s: %s", p->src, strerror(errno));
        return -1;
    }
    return 0;
}

static void fill_req(daemon_cfg *c, const Kfarm__Job *job, const job_paths *p, kf_eval_req *req)
{
    memset(req, 0, sizeof(*req));
    req->task_dir = p->task_dir;
    req->source_path = p->src;
    /* 0: the judge draws a secret seed (never the job id, which a candidate
     * could learn); it is revealed in the metrics once the runners are dead */
    req->seed = 0;
    req->work_dir = p->job_dir;
    req->cache_dir = c->cache_dir;
    req->quick = c->quick;
    req->gpu_index = c->gpu;
    /* the GPU was discovered at start: no discovery child per evaluation */
    req->arch = c->arch[0] ? c->arch : NULL;
    req->n_defines = (int)(job->n_defines < KF_EVAL_MAX_DEFINES ? job->n_defines : KF_EVAL_MAX_DEFINES);
    for (int i = 0; i < req->n_defines; i++) {
        req->define_names[i] = job->defines[i]->name;
        req->define_values[i] = job->defines[i]->value;
    }
}

/* Compile-ahead: build the next job's shared objects into the compile cache
 * in a child process while this process evaluates the current job (on a GPU
 * worker the CPU is otherwise idle). The evaluation of that job later finds
 * its builds in the cache. Failed builds are never cached; but when the
 * candidate itself does not build (compile_error, or unsupported on this
 * GPU's arch; blame "candidate") the child leaves its result in the job's
 * folder (COMPILE_AHEAD_FILE) and the evaluation of this same job reports it
 * instead of running nvcc, and its toolchain canary, again on the GPU's time
 * (~1.8 s on the H200 host). Any other outcome is rebuilt by the evaluation. */
#define COMPILE_AHEAD_FILE "compile-ahead.json"
static void start_precompile(daemon_cfg *c, held_job *j, const char *backend)
{
    job_paths p;
    kf_eval_res res;
    memset(&res, 0, sizeof(res));
    j->compiled_ahead = 1; /* tried once, whatever comes of it */
    if (prepare_job(c, j, backend, &p, &res) < 0) return; /* the evaluation will say why */
    pid_t pid = fork();
    if (pid < 0) return;
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* the lowest CPU priority, for nvcc too (inherited): the judge's
         * doorbells and fences must not wait behind compiles. On the H200
         * host with 14 compiles beside it, the first evaluation's batch CVs
         * were 0.25-0.49 and it took 11.5 s at normal priority, 0.06-0.2 and
         * 5.7 s at nice 19 (tools/bench/bench_gpu_eval, issue 8) */
        if (setpriority(PRIO_PROCESS, 0, 19) != 0) logmsg("compile-ahead: setpriority: %s", strerror(errno));
        kf_eval_req req;
        fill_req(c, j->job, &p, &req);
        req.compile_only = 1;
        kf_eval_run(&req, &res);
        json_t *m = json_loads(res.metrics_json ? res.metrics_json : "{}", 0, NULL);
        const char *blame = json_string_value(json_object_get(m, "blame"));
        if ((res.verdict == KF_COMPILE_ERROR || res.verdict == KF_UNSUPPORTED) && blame && !strcmp(blame, "candidate")) {
            json_t *o = json_pack("{s:s,s:s,s:s,s:O}", "verdict", kf_verdict_name(res.verdict), "detail", res.detail,
                                  "compile_log", res.compile_log ? res.compile_log : "", "metrics", m);
            char path[PATH_MAX], tmp[PATH_MAX + 8];
            snprintf(path, sizeof(path), "%.3000s/" COMPILE_AHEAD_FILE, p.job_dir);
            snprintf(tmp, sizeof(tmp), "%s.tmp", path);
            if (o && json_dump_file(o, tmp, JSON_COMPACT) == 0) rename(tmp, path);
            json_decref(o);
        }
        json_decref(m);
        _exit(0);
    }
    j->precompile = pid;
    logmsg("job %llu: compiling ahead (pid %d)", (unsigned long long)j->job->job_id, (int)pid);
}

/* Wait for a compile-ahead child, heartbeating meanwhile. */
static void wait_precompile(held_job *j, hb_state *hb)
{
    kf_sandbox_reap(j->precompile, heartbeat_tick, hb);
    j->precompile = 0;
}

/* The candidate's own build failure found by this job's compile-ahead
 * (start_precompile): fill *res from it and return 1, else 0. */
static int take_compile_ahead(const job_paths *p, kf_eval_res *res)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%.3000s/" COMPILE_AHEAD_FILE, p->job_dir);
    json_t *o = json_load_file(path, 0, NULL);
    const char *vn = json_string_value(json_object_get(o, "verdict"));
    int v = vn ? kf_verdict_parse(vn) : -1;
    json_t *m = json_object_get(o, "metrics");
    if ((v != KF_COMPILE_ERROR && v != KF_UNSUPPORTED) || !json_is_object(m)) {
        json_decref(o);
        return 0;
    }
    res->verdict = (kf_verdict)v;
    snprintf(res->detail, sizeof(res->detail), "%s", json_string_value(json_object_get(o, "detail")) ?: "");
    json_object_set_new(m, "from_compile_ahead", json_true());
    res->metrics_json = json_dumps(m, JSON_COMPACT);
    res->compile_log = strdup(json_string_value(json_object_get(o, "compile_log")) ?: "");
    json_decref(o);
    return 1;
}

/* Evaluate one job into *res (always filled). */
static void run_job(daemon_cfg *c, held_job *j, const char *backend, kf_eval_res *res, hb_state *hb)
{
    memset(res, 0, sizeof(*res));
    double t0 = kf_util_now_s();
    int ahead = j->precompile > 0;
    wait_precompile(j, hb);
    double t1 = kf_util_now_s();
    job_paths p;
    if (prepare_job(c, j, backend, &p, res) < 0) return;
    kf_eval_req req;
    fill_req(c, j->job, &p, &req);
    req.tick = heartbeat_tick;
    req.tick_arg = hb;
    req.pending_judge = &c->pending_judge;
    if (!c->judge_per_eval && !c->judge_srv) {
        char err[512];
        c->judge_srv = kf_judge_srv_new(c->work_dir, err, sizeof(err));
        if (!c->judge_srv) logmsg("no serving judge (%s): one judge process per evaluation", err);
    }
    req.judge_srv = c->judge_srv;
    if (ahead && take_compile_ahead(&p, res)) {
        kf_util_rmtree(p.job_dir);
        logmsg("job %llu: %s, found by its compile-ahead (not rebuilt; waited %.2f s)",
               (unsigned long long)j->job->job_id, kf_verdict_name(res->verdict), t1 - t0);
        return;
    }
    kf_eval_run(&req, res);
    kf_util_rmtree(p.job_dir);
    /* where a GPU worker's time goes: a long wait here is idle GPU time */
    if (ahead)
        logmsg("job %llu: waited %.2f s for its compile-ahead, evaluated in %.2f s",
               (unsigned long long)j->job->job_id, t1 - t0, kf_util_now_s() - t1);
    else
        logmsg("job %llu: evaluated in %.2f s (not compiled ahead)", (unsigned long long)j->job->job_id,
               kf_util_now_s() - t1);
}

/* The leases of reply rep (its job and more_jobs) as batch *out, which
 * then owns rep. The tasks that came in full are written out now, so that
 * the jobs of the same reply that name them only find them whatever order
 * they are prepared in (a failure here is said again by that job's own
 * prepare_job). */
static void batch_adopt(daemon_cfg *c, lease_batch *out, Kfarm__Reply *rep)
{
    memset(out, 0, sizeof(*out));
    out->rep = rep;
    out->j[0].job = rep->job;
    out->n = 1;
    for (size_t k = 0; k < rep->n_more_jobs && out->n < KF_DAEMON_MAX_BATCH; k++)
        out->j[out->n++].job = rep->more_jobs[k];
    /* each job's source: its own, or (Job.source_job) that of the job it
     * names, which must come earlier in the reply and carry its own */
    for (int k = 0; k < out->n; k++) {
        held_job *h = &out->j[k];
        h->src = NULL;
        h->src_len = 0;
        if (!h->job->has_source_job) {
            h->src = h->job->source.data ? h->job->source.data : (const uint8_t *)"";
            h->src_len = h->job->source.len;
            continue;
        }
        for (int e = 0; e < k && !h->src; e++)
            if (out->j[e].job->job_id == h->job->source_job && !out->j[e].job->has_source_job) {
                h->src = out->j[e].src;
                h->src_len = out->j[e].src_len;
            }
    }
    for (int k = 0; k < out->n; k++) {
        char dir[1536];
        if (!task_abbreviated(out->j[k].job) && out->j[k].job->task_sha256 &&
            !kf_task_cache_find(&c->tasks, c->work_dir, out->j[k].job->task_sha256, dir, sizeof(dir)))
            (void)materialize_task(c, out->j[k].job, dir, sizeof(dir));
    }
}

static void batch_free(lease_batch *b)
{
    if (b->rep) kfarm__reply__free_unpacked(b->rep, NULL);
    memset(b, 0, sizeof(*b));
}

static int status_final(Kfarm__Status s)
{
    return s == KFARM__STATUS__OK || s == KFARM__STATUS__DUPLICATE || s == KFARM__STATUS__STALE ||
           s == KFARM__STATUS__REJECTED || s == KFARM__STATUS__CONFLICT;
}

static void say_status(const Kfarm__Job *job, Kfarm__Status s, const char *detail)
{
    if (s != KFARM__STATUS__OK && s != KFARM__STATUS__DUPLICATE)
        logmsg("job %llu: result %s: %s", (unsigned long long)job->job_id,
               s == KFARM__STATUS__STALE ? "refused as stale" : "not stored", detail ? detail : "");
}

/* Send the results res[0..m) of jobs[0..m) in one Result message (the
 * first as the Result, the others as Result.more: one group commit on the
 * coordinator), re-sent until each is stored or refused for good (OK,
 * DUPLICATE, STALE, REJECTED, CONFLICT); results the coordinator did not
 * take (an ERROR status, or a reply without more_status) go again in a
 * message of their own. With ahead (the worker wants more work and holds
 * none ahead) the request carries GetJob gj, and the leases granted in the
 * reply become *ahead. Returns 0, or -1 when stopping while the
 * coordinator is away (those results are lost; their leases expire). */
static int send_results(daemon_cfg *c, const Kfarm__Job *const *jobs, kf_eval_res *const *res, int m,
                        Kfarm__GetJob *gj, lease_batch *ahead)
{
    if (m <= 0) return 0;
    Kfarm__ResultItem items[KF_DAEMON_MAX_BATCH], *ip[KF_DAEMON_MAX_BATCH];
    Kfarm__Result r;
    for (int k = 0; k < m; k++) {
        const Kfarm__Job *job = jobs[k];
        const kf_eval_res *x = res[k];
        Kfarm__ResultItem *it = &items[k];
        kfarm__result_item__init(it);
        it->worker_id = c->worker_id;
        it->job_id = job->job_id;
        it->fencing_token = job->fencing_token;
        it->has_lease_token = job->has_lease_token;
        it->lease_token = job->lease_token;
        it->verdict = (char *)kf_verdict_name(x->verdict);
        it->detail = (char *)x->detail;
        it->metrics_json = x->metrics_json ? x->metrics_json : "{}";
        it->compile_log = x->compile_log ? x->compile_log : "";
        it->has_candidate_us = it->has_baseline_us = it->has_speedup = 1;
        it->candidate_us = x->candidate_us;
        it->baseline_us = x->baseline_us;
        it->speedup = x->speedup;
        ip[k] = it;
    }
    /* the first as the Result itself, the others as its more */
    kf_wire_item_as_result(&items[0], &r);
    r.n_more = (size_t)(m - 1);
    r.more = m > 1 ? ip + 1 : NULL;
    if (ahead && gj) r.next = gj;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_RESULT;
    req.result = &r;
    int backoff = 200;
    for (;;) {
        Kfarm__Reply *rep;
        if (call(c, &req, &rep) == 0) {
            Kfarm__Status s = rep->status;
            if (status_final(s)) {
                say_status(jobs[0], s, rep->detail);
                if (s == KFARM__STATUS__CONFLICT) identity_conflict(c, rep);
                /* the others: each its own status; again what was not taken */
                const Kfarm__Job *again_j[KF_DAEMON_MAX_BATCH];
                kf_eval_res *again_r[KF_DAEMON_MAX_BATCH];
                int again = 0;
                for (int k = 1; k < m && s != KFARM__STATUS__CONFLICT; k++) {
                    if (rep->n_more_status != (size_t)(m - 1) || !status_final(rep->more_status[k - 1])) {
                        again_j[again] = jobs[k];
                        again_r[again++] = res[k];
                    } else {
                        say_status(jobs[k], rep->more_status[k - 1], NULL);
                    }
                }
                if (ahead && r.next && rep->job && s != KFARM__STATUS__CONFLICT) batch_adopt(c, ahead, rep);
                else kfarm__reply__free_unpacked(rep, NULL);
                return again ? send_results(c, again_j, again_r, again, NULL, NULL) : 0;
            }
            kfarm__reply__free_unpacked(rep, NULL);
        }
        if (*c->stop && backoff >= 5000) return -1; /* shutting down and coordinator away */
        sleep_ms(backoff);
        backoff = backoff < 5000 ? backoff * 2 : 5000;
    }
}

/* GetJob asks for up to want leases (max_jobs; absent for one), and for
 * the tasks this worker holds to come by name only (tasks_once). */
static void getjob_want(daemon_cfg *c, Kfarm__GetJob *gj, int want)
{
    size_t n = kf_task_cache_have(&c->tasks, c->work_dir); /* only those still on disk */
    gj->has_tasks_once = gj->tasks_once = 1;
    gj->has_sources_once = gj->sources_once = 1;
    gj->n_have_tasks = n;
    gj->have_tasks = n ? c->tasks.have : NULL;
    gj->has_max_jobs = want > 1;
    gj->max_jobs = (uint32_t)(want > 1 ? want : 0);
}

/* Ask for up to `want` jobs (GetJob.max_jobs). Returns 1 with *out holding
 * the leases granted, 0 when there is none now or the coordinator is away
 * (with backoff != NULL: after sleeping), -1 after a refusal. backoff NULL =
 * one quick try, no sleeping (compile-ahead). */
static int get_jobs(daemon_cfg *c, Kfarm__Request *req, int want, lease_batch *out, kf_device *dev,
                    char classes[][128], int n_classes, int *backoff)
{
    getjob_want(c, req->get_job, want);
    Kfarm__Reply *rep;
    if (call(c, req, &rep) < 0) {
        if (backoff) {
            sleep_ms(*backoff);
            *backoff = *backoff < 5000 ? *backoff * 2 : 5000;
        }
        return 0;
    }
    if (backoff) *backoff = c->poll_ms;
    if (rep->status == KFARM__STATUS__CONFLICT) {
        /* our instance no longer holds the identity: claim it again (refused,
         * and this process stops, while another live process holds it) */
        logmsg("get-job: %s", rep->detail ? rep->detail : "identity conflict");
        kfarm__reply__free_unpacked(rep, NULL);
        do_register(c, dev, classes, n_classes);
        return 0;
    }
    if (rep->status == KFARM__STATUS__REJECTED && rep->detail && strstr(rep->detail, "register")) {
        /* coordinator lost our registration (e.g. a fresh database): register again */
        kfarm__reply__free_unpacked(rep, NULL);
        do_register(c, dev, classes, n_classes);
        return 0;
    }
    /* a quarantine is said in this worker's own log, once per change */
    static int quarantined;
    if (rep->status == KFARM__STATUS__OK && rep->job && quarantined) {
        logmsg("get-job: quarantine lifted");
        quarantined = 0;
    }
    if (rep->status != KFARM__STATUS__OK || !rep->job) {
        int refused = rep->status != KFARM__STATUS__NO_JOB;
        int q = rep->status == KFARM__STATUS__NO_JOB && rep->detail &&
                strstr(rep->detail, "quarantined");
        if (q && !quarantined) logmsg("get-job: %s", rep->detail);
        else if (!q && quarantined && rep->status == KFARM__STATUS__NO_JOB)
            logmsg("get-job: quarantine lifted");
        if (rep->status == KFARM__STATUS__NO_JOB) quarantined = q;
        if (refused) logmsg("get-job: %s", rep->detail ? rep->detail : "refused");
        kfarm__reply__free_unpacked(rep, NULL);
        if (backoff && !refused) sleep_ms(c->poll_ms);
        return refused ? -1 : 0;
    }
    batch_adopt(c, out, rep);
    return 1;
}

/* Jobs to ask for in one GetJob: --batch N, or with --batch auto as many as
 * fill about KF_DAEMON_BATCH_S of evaluation at the measured per-job wall
 * (one until a job has been timed), at most KF_DAEMON_MAX_BATCH and the
 * jobs left under --max-jobs. Why 4 s: a fleet then sends each coordinator
 * at most one result message per worker every ~4 s (250/s for 1,000
 * workers), well under what one coordinator serves on 2 cores (~600/s).
 * Measured (docs/benchmarks.md, 2026-12-05, 1,000 simulated workers, one
 * coordinator, 2-core VM): jobs of ~1 s offer 1,000 jobs/s and got 743 one
 * job per lease (result p99 0.77 s), 857 in batches of 2, 979 in batches of
 * 4 (p99 0.07-0.13 s); jobs of ~0.5 s offer 2,000/s and got 587 one per
 * lease, 1,947 in batches of 8. The price: results held up to ~4 s, and a
 * worker that dies loses up to ~4 s of work to re-leases. (A short queue is
 * not taken whole: the coordinator grants at most half of what it sees.) */
static int batch_want(const daemon_cfg *c, double per_job_s, int done)
{
    int w = c->batch > 0 ? c->batch : per_job_s > 0 ? (int)(KF_DAEMON_BATCH_S / per_job_s) : 1;
    if (w < 1) w = 1;
    if (w > KF_DAEMON_MAX_BATCH) w = KF_DAEMON_MAX_BATCH;
    if (c->max_jobs > 0 && w > c->max_jobs - done) w = c->max_jobs - done > 0 ? c->max_jobs - done : 1;
    return w;
}

/* Compile ahead, at most c->compile_jobs children at once: the jobs of b
 * from index from on, then those of the batch leased ahead (the job before
 * `from` is about to be evaluated: its child, if any, is reaped then and
 * does not count). */
static void precompile_window(daemon_cfg *c, lease_batch *b, int from, lease_batch *next, const char *backend)
{
    int running = 0;
    for (int k = from; k < b->n; k++) running += b->j[k].precompile > 0;
    for (int k = 0; k < next->n; k++) running += next->j[k].precompile > 0;
    for (int k = from; k < b->n && running < c->compile_jobs; k++)
        if (!b->j[k].compiled_ahead && !b->j[k].lost) {
            start_precompile(c, &b->j[k], backend);
            running += b->j[k].precompile > 0;
        }
    for (int k = 0; k < next->n && running < c->compile_jobs; k++)
        if (!next->j[k].compiled_ahead && !next->j[k].lost) {
            start_precompile(c, &next->j[k], backend);
            running += next->j[k].precompile > 0;
        }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: kfarm-worker run --coordinator ADDR [options]\n"
            "  --coordinator ADDR  tcp://HOST:PORT or ipc:///PATH of kfarm-coordinator; repeat it\n"
            "                      for several coordinators of one database (requests are\n"
            "                      spread over them; a dead one is skipped)\n"
            "  --credential FILE   this worker's credential, from `kfarm worker add NAME`\n"
            "                      (default: $KFARM_WORKER_CREDENTIAL_FILE)\n"
            "  --id NAME           worker name (default: the credential's; must match it)\n"
            "  --work-dir DIR      scratch and caches (default: ./.kfarm/worker-ID)\n"
            "  --poll-ms N         idle poll interval (default 500)\n"
            "  --max-jobs N        exit after N jobs (default: run until SIGTERM)\n"
            "  --quick             fewer timing repetitions (tests and demos)\n"
            "  --gpu N             serve GPU N (default 0); run one worker per GPU\n"
            "  --cpu               serve the cpu backend even on a GPU host\n"
            "  --prefetch          compile the next job while evaluating (default on GPUs)\n"
            "  --no-prefetch       one job at a time (default on the cpu backend)\n"
            "  --batch N|auto      jobs leased together, evaluated in turn and reported in one\n"
            "                      message (1-16; auto: ~4 s of evaluation at the measured rate;\n"
            "                      default auto on GPUs, 1 on the cpu backend)\n"
            "  --judge-per-eval    a new judge process per evaluation (default: one serving judge\n"
            "                      keeps the device context and the task's reference and\n"
            "                      baseline runners between evaluations)\n"
            "Exit status 3: another live process holds this worker identity.\n");
}

static volatile sig_atomic_t g_stop; /* daemon top level only: set by SIGTERM/SIGINT */
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Candidate code runs in children forked from this process (worker/sandbox.c).
 * The worker's keys must not be readable there, so a fork handler wipes the
 * child's copy before anything else runs in it. */
static kf_wire_client *g_wc; /* daemon top level only */
static void wipe_key_in_child(void)
{
    if (g_wc) OPENSSL_cleanse(&g_wc->key, sizeof(g_wc->key));
}

/* The credential as read by kf_daemon_read_env (from the file named by
 * $KFARM_WORKER_CREDENTIAL_FILE), before main() removes secrets from the
 * environment; kf_daemon_main takes it from here (and wipes this copy). */
static struct {
    int loaded, rc;
    char name[KF_WIRE_ID_MAX + 1];
    kf_wire_key key;
    char err[512];
} g_env_key;

/* Read what `run` needs from the environment into memory, so that main()
 * can scrub those variables before anything else runs. Declared in main.c.
 * 0, or -1 when there is no usable credential there (kf_daemon_main
 * reports it unless --credential names one). */
int kf_daemon_read_env(void);
int kf_daemon_read_env(void)
{
    memset(&g_env_key, 0, sizeof(g_env_key));
    g_env_key.rc = kf_cred_load(NULL, g_env_key.name, &g_env_key.key, g_env_key.err,
                                sizeof(g_env_key.err));
    g_env_key.loaded = 1;
    return g_env_key.rc;
}

int kf_daemon_main(int argc, char **argv)
{
    daemon_cfg c = {0};
    c.poll_ms = 500;
    c.prefetch = -1;
    c.batch = -1;
    c.stop = &g_stop;
    const char *id = NULL, *work = NULL, *cred = NULL;
    int gpu_explicit = 0;
    static const struct option opts[] = {
        {"coordinator", required_argument, 0, 'c'}, {"id", required_argument, 0, 'i'},
        {"work-dir", required_argument, 0, 'w'},    {"poll-ms", required_argument, 0, 'p'},
        {"max-jobs", required_argument, 0, 'm'},    {"quick", no_argument, 0, 'q'},
        {"prefetch", no_argument, 0, 'P'},          {"no-prefetch", no_argument, 0, 'N'},
        {"gpu", required_argument, 0, 'g'},         {"cpu", no_argument, 0, 'C'},
        {"credential", required_argument, 0, 'K'},  {"help", no_argument, 0, 'h'},
        {"judge-per-eval", no_argument, 0, 'J'},  {"batch", required_argument, 0, 'B'},
        {0, 0, 0, 0}};
    int o;
    optind = 1;
    while ((o = getopt_long(argc, argv, "c:i:w:p:m:qg:CPNK:hJB:", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            if (c.n_coordinators == KF_DAEMON_MAX_COORD) {
                fprintf(stderr, "kfarm-worker: at most %d --coordinator addresses\n", KF_DAEMON_MAX_COORD);
                return 2;
            }
            c.coordinators[c.n_coordinators++] = optarg;
            if (!c.coordinator) c.coordinator = optarg;
            break;
        case 'i': id = optarg; break;
        case 'w': work = optarg; break;
        case 'p':
        case 'm':
        case 'g': {
            char *end;
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || v < (o == 'g' ? 0 : 1) || v > INT_MAX) {
                fprintf(stderr, "kfarm-worker: --%s: expected a %s number, not '%s' (see --help)\n",
                        o == 'p' ? "poll-ms" : o == 'm' ? "max-jobs" : "gpu",
                        o == 'g' ? "non-negative" : "positive", optarg);
                return 2;
            }
            if (o == 'p') c.poll_ms = (int)v;
            else if (o == 'm') c.max_jobs = (int)v;
            else c.gpu = (int)v, gpu_explicit = 1;
            break;
        }
        case 'q': c.quick = 1; break;
        case 'K': cred = optarg; break;
        case 'C': c.cpu_only = 1; break;
        case 'P': c.prefetch = 1; break;
        case 'N': c.prefetch = 0; break;
        case 'J': c.judge_per_eval = 1; break;
        case 'B': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!strcmp(optarg, "auto")) c.batch = 0;
            else if (end != optarg && !*end && v >= 1 && v <= KF_DAEMON_MAX_BATCH) c.batch = (int)v;
            else {
                fprintf(stderr, "kfarm-worker: --batch: expected 1-%d or auto, not '%s' (see --help)\n",
                        KF_DAEMON_MAX_BATCH, optarg);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!c.coordinator) {
        fprintf(stderr, "kfarm-worker: --coordinator is required (see --help)\n");
        return 2;
    }
    char err[512];
    char cname[KF_WIRE_ID_MAX + 1];
    kf_wire_key key;
    int krc;
    if (cred) {
        krc = kf_cred_load(cred, cname, &key, err, sizeof(err));
    } else if (g_env_key.loaded) {
        krc = g_env_key.rc;
        key = g_env_key.key;
        snprintf(cname, sizeof(cname), "%s", g_env_key.name);
        snprintf(err, sizeof(err), "%s", g_env_key.err);
    } else {
        krc = kf_cred_load(NULL, cname, &key, err, sizeof(err));
    }
    OPENSSL_cleanse(&g_env_key, sizeof(g_env_key));
    if (krc < 0) {
        fprintf(stderr, "kfarm-worker: %s\n", err);
        return 2;
    }
    if (id && strcmp(id, cname) != 0) {
        OPENSSL_cleanse(&key, sizeof(key));
        fprintf(stderr, "kfarm-worker: --id %s does not match the credential's name %s (each "
                        "credential is one worker identity: kfarm worker add %s)\n", id, cname, id);
        return 2;
    }
    snprintf(c.worker_id, sizeof(c.worker_id), "%s", cname);
    if (work && strlen(work) >= sizeof(c.work_dir) - 100) { /* room for tasks/, jobs/, cache/ below it */
        fprintf(stderr, "kfarm-worker: --work-dir is too long (%zu characters, at most %zu)\n", strlen(work),
                sizeof(c.work_dir) - 101);
        return 2;
    }
    if (work) snprintf(c.work_dir, sizeof(c.work_dir), "%s", work);
    else snprintf(c.work_dir, sizeof(c.work_dir), ".kfarm/worker-%s", c.worker_id);
    snprintf(c.cache_dir, sizeof(c.cache_dir), "%s/cache", c.work_dir);
    if (kf_util_mkdirs(c.cache_dir) < 0) {
        fprintf(stderr, "kfarm-worker: cannot create %s: %s\n", c.cache_dir, strerror(errno));
        return 1;
    }

    kf_device dev;
    char classes[8][128];
    int n_classes = 0;
    if (kf_device_discover(&dev, c.cpu_only ? -1 : c.gpu, classes, 8, &n_classes, err, sizeof(err)) < 0) {
        fprintf(stderr, "kfarm-worker: device discovery failed: %s\n", err);
        return 1;
    }
    if (gpu_explicit && !c.cpu_only && strcmp(dev.backend, "cuda") != 0) {
        fprintf(stderr, "kfarm-worker: --gpu %d: no GPU answers (no CUDA backend in this build, or no "
                        "device); use --cpu to serve the cpu backend\n", c.gpu);
        return 2;
    }
    if (c.prefetch < 0) c.prefetch = !strcmp(dev.backend, "cuda");
    /* several jobs per lease where evaluations are short (GPUs); one on the
     * cpu backend, whose evaluations take seconds */
    if (c.batch < 0) c.batch = !strcmp(dev.backend, "cuda") ? 0 : 1;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    c.compile_jobs = ncpu > 9 ? 8 : ncpu > 2 ? (int)ncpu - 1 : 1;
    if (!strcmp(dev.backend, "cuda")) snprintf(c.arch, sizeof(c.arch), "%s", dev.arch);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    err[0] = 0;
    c.sock = nn_socket(AF_SP, NN_REQ);
    /* Several coordinators (one database): the REQ socket spreads requests
     * over the connected ones and stops sending to one whose connection
     * broke, so a coordinator that dies costs this worker one timed-out
     * request, not its work. */
    int connect_failed = -1;
    if (c.sock >= 0 && kf_wire_socket_setup(c.sock, KF_WIRE_MAX_MSG, 10000, 15000, err, sizeof(err)) == 0)
        for (int i = 0; i < c.n_coordinators && connect_failed < 0; i++)
            if (nn_connect(c.sock, c.coordinators[i]) < 0) connect_failed = i;
    if (c.sock < 0 || err[0] || connect_failed >= 0) {
        OPENSSL_cleanse(&key, sizeof(key));
        fprintf(stderr, "kfarm-worker: cannot connect to %s: %s\n",
                connect_failed >= 0 ? c.coordinators[connect_failed] : c.coordinator,
                err[0] ? err : nn_strerror(nn_errno()));
        return 1;
    }
    int wrc = kf_wire_client_init(&c.wc, c.sock, c.worker_id, &key);
    OPENSSL_cleanse(&key, sizeof(key));
    if (wrc < 0) {
        fprintf(stderr, "kfarm-worker: cannot set up the wire client (random source)\n");
        return 1;
    }
    g_wc = &c.wc;
    pthread_atfork(NULL, NULL, wipe_key_in_child);
    logmsg("worker %s (%s, %s) connecting to %s", c.worker_id, dev.backend, dev.name, c.coordinator);
    if (do_register(&c, &dev, classes, n_classes) < 0) {
        nn_close(c.sock);
        return c.exit_code ? c.exit_code : 1;
    }
    logmsg("registered; classes:%s%s%s", n_classes > 0 ? " " : "", n_classes > 0 ? classes[0] : "",
           n_classes > 1 ? " ..." : "");

    Kfarm__GetJob gj = KFARM__GET_JOB__INIT;
    char *cls[8];
    for (int i = 0; i < n_classes; i++) cls[i] = classes[i];
    gj.worker_id = c.worker_id;
    gj.n_classes = (size_t)n_classes;
    gj.classes = cls;
    Kfarm__Request req = KFARM__REQUEST__INIT;
    req.msg_case = KFARM__REQUEST__MSG_GET_JOB;
    req.get_job = &gj;
    int done = 0, idle_backoff = c.poll_ms;
    double per_job_s = 0; /* evaluation wall per job, moving average (0: none yet) */
    lease_batch cur = {0}, ahead = {0};
    /* when every held lease was last extended (granted or heartbeat), at the
     * latest: heartbeats keep their lease/3 rhythm across the jobs of a batch */
    double last_hb = 0;
    while (!g_stop && (c.max_jobs == 0 || done < c.max_jobs)) {
        if (ahead.rep) {
            cur = ahead;
            memset(&ahead, 0, sizeof(ahead));
        } else {
            int got = get_jobs(&c, &req, batch_want(&c, per_job_s, done), &cur, &dev, classes, n_classes,
                               &idle_backoff);
            if (got <= 0) {
                if (got < 0) sleep_ms(c.poll_ms);
                continue;
            }
            last_hb = kf_util_now_s();
        }
        int base = done;
        if (cur.n > 1)
            logmsg("%d jobs leased together (jobs %llu..%llu): evaluated in turn, reported in one message",
                   cur.n, (unsigned long long)cur.j[0].job->job_id, (unsigned long long)cur.j[cur.n - 1].job->job_id);
        kf_eval_res res[KF_DAEMON_MAX_BATCH];
        int evaluated[KF_DAEMON_MAX_BATCH] = {0};
        memset(res, 0, sizeof(res));
        for (int i = 0; i < cur.n && !g_stop; i++) {
            held_job *j = &cur.j[i];
            if (j->lost) continue; /* its lease went elsewhere while earlier jobs ran */
            const Kfarm__Job *job = j->job;
            logmsg("job %llu: candidate %llu of task %s (token %llu)", (unsigned long long)job->job_id,
                   (unsigned long long)job->candidate_id, job->task_name, (unsigned long long)job->fencing_token);
            hb_state hb = {&c, {0}, 0, (job->lease_ms ? job->lease_ms : 30000) / 3000.0, last_hb};
            hb.jobs[hb.n++] = j;
            for (int k = 0; k < cur.n; k++)
                if (k != i) hb.jobs[hb.n++] = &cur.j[k];
            /* compile ahead: the next jobs of this batch; on its last job,
             * lease the next batch ahead and compile that */
            if (c.prefetch) {
                if (i == cur.n - 1 && !g_stop && (c.max_jobs == 0 || base + cur.n < c.max_jobs) &&
                    get_jobs(&c, &req, batch_want(&c, per_job_s, base + cur.n), &ahead, &dev, classes,
                             n_classes, NULL) > 0)
                    for (int k = 0; k < ahead.n; k++) hb.jobs[hb.n++] = &ahead.j[k];
                precompile_window(&c, &cur, i + 1, &ahead, dev.backend);
            }
            double t0 = kf_util_now_s();
            run_job(&c, j, dev.backend, &res[i], &hb);
            last_hb = hb.last_s;
            double wall = kf_util_now_s() - t0;
            per_job_s = per_job_s > 0 ? 0.7 * per_job_s + 0.3 * wall : wall;
            evaluated[i] = 1;
            done++;
            if (!j->lost)
                logmsg("job %llu: %s%s%s (speedup %.3f)", (unsigned long long)job->job_id,
                       kf_verdict_name(res[i].verdict), res[i].detail[0] ? ": " : "", res[i].detail, res[i].speedup);
        }
        /* the batch's results in one message; it asks for the next batch when
         * none is held ahead */
        const Kfarm__Job *rj[KF_DAEMON_MAX_BATCH];
        kf_eval_res *rr[KF_DAEMON_MAX_BATCH];
        int m = 0;
        for (int i = 0; i < cur.n; i++)
            if (evaluated[i] && !cur.j[i].lost) {
                rj[m] = cur.j[i].job;
                rr[m++] = &res[i];
            }
        int more = !g_stop && !ahead.rep && (c.max_jobs == 0 || done < c.max_jobs);
        if (more) getjob_want(&c, &gj, batch_want(&c, per_job_s, done));
        send_results(&c, rj, rr, m, more ? &gj : NULL, more ? &ahead : NULL);
        if (more && ahead.rep) last_hb = kf_util_now_s(); /* granted now; nothing else held */
        for (int i = 0; i < cur.n; i++) {
            kf_eval_res_free(&res[i]);
            if (cur.j[i].precompile) { /* not evaluated (stopping, or lost): reap its compile */
                hb_state none = {&c, {0}, 0, 1e9, 0};
                wait_precompile(&cur.j[i], &none);
            }
        }
        batch_free(&cur);
        /* leases ahead that went elsewhere while this batch ran are skipped
         * when their turn comes (held_job.lost) */
    }
    if (ahead.rep) {
        /* stopping with jobs leased ahead: their leases expire and they are re-queued */
        hb_state none = {&c, {0}, 0, 1e9, 0};
        for (int k = 0; k < ahead.n; k++) {
            if (ahead.j[k].precompile) wait_precompile(&ahead.j[k], &none);
            logmsg("job %llu: leased ahead but not evaluated (stopping); its lease will expire",
                   (unsigned long long)ahead.j[k].job->job_id);
        }
        batch_free(&ahead);
    }
    kf_eval_reap(&c.pending_judge);
    kf_judge_srv_free(c.judge_srv);
    logmsg("worker %s stopping after %d job(s)", c.worker_id, done);
    if (!c.exit_code) { /* give the identity back (best effort, one try) */
        Kfarm__Goodbye bye = KFARM__GOODBYE__INIT;
        bye.worker_id = c.worker_id;
        Kfarm__Request breq = KFARM__REQUEST__INIT;
        breq.msg_case = KFARM__REQUEST__MSG_GOODBYE;
        breq.goodbye = &bye;
        Kfarm__Reply *brep;
        if (call(&c, &breq, &brep) == 0) kfarm__reply__free_unpacked(brep, NULL);
    }
    nn_close(c.sock);
    OPENSSL_cleanse(&c.wc.key, sizeof(c.wc.key));
    return c.exit_code;
}
