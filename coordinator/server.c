/*
 * server.c -- nanomsg REP endpoint: authenticate, dedupe, dispatch.
 * See server.h for the protocol summary.
 *
 * Robustness rules: every received message gets exactly one reply (a REP
 * socket that skips a reply drops the request and the peer waits for its
 * resend timer), every input is treated as hostile (protobuf-c checks the
 * structure; strings are checked for length and UTF-8 before they reach the
 * database), and nothing a peer sends can end the process.
 */
#include "server.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>
#include <openssl/crypto.h>

#include "kf_util.h"
#include "log.h"

/* Unauthenticated frames answered per second, and refusal log lines per
 * second; beyond them frames are dropped unanswered and counted. */
#define KF_SERVER_UNAUTH_PER_S 200
#define KF_SERVER_LOG_PER_S 5

#define KF_SERVER_MAX_THREADS 64

#define KF_SERVER_KEY_CACHE 4096 /* credentials kept in memory (open addressing) */

/* A worker's key as last read from worker_credentials. The message-counter
 * update checks that the stored key is still this one and not revoked, so a
 * cached key never outlives a rotation or a revocation by one message. */
typedef struct {
    char name[KF_WIRE_ID_MAX + 1];   /* "" = empty slot */
    kf_wire_key key;
    char stored_hex[2 * KF_WIRE_KEY_LEN + 1];
} srv_cred;

/* A result waiting for the group commit (on_result): the serving thread
 * that submitted it sleeps until `done`. */
typedef struct grp_wait {
    kf_queue_item item;
    int done;                /* 1 stored or refused by the group, 0 waiting, -1 never submitted */
    struct grp_wait *next;
} grp_wait;

#define KF_SERVER_GROUP_MAX 256 /* results stored per group transaction at most */
/* Groups stored at the same time at most: a few transactions in flight let
 * one group's statements overlap another's commit flush (a single leader
 * made every result wait for the group ahead of it); beyond them, results
 * gather into larger groups. */
#define KF_SERVER_GROUP_LEADERS 2
#define KF_SERVER_MORE_RESULTS 64 /* Result.more entries at most */

/* A received request waiting for a serving thread. */
typedef struct srv_msg {
    void *body, *control;    /* nanomsg chunks: the frame, its routing header */
    int n;
    double t_recv;           /* when the receiving thread queued it (kf_util_now_s) */
    struct srv_msg *next;
} srv_msg;

/* Where a request's time goes, for the operator (kf_server_stats): each
 * phase's durations in a histogram of 4 buckets per power of two of
 * microseconds (bucket b holds [2^(b/4), 2^((b+1)/4)) us: a percentile is
 * read within 19%), kept with atomics so that serving threads never wait
 * on each other to count. */
enum {
    PH_QUEUE,    /* received -> a serving thread takes it */
    PH_AUTH,     /* frame checks, MAC, the credential's counter UPDATE */
    PH_STORE,    /* results: waiting for and running the group commit */
    PH_GROUP,    /* one group commit's transaction (a leader's statements and commit) */
    PH_LEASE,    /* get-job: the lease statement and building the jobs */
    PH_REPLY,    /* sealing and handing the reply to nanomsg */
    PH_WHOLE,    /* received -> reply handed over */
    PH_N
};
#define KF_SERVER_HIST_BUCKETS 128
typedef struct {
    atomic_long n[PH_N][KF_SERVER_HIST_BUCKETS];
    atomic_long count[PH_N];
    atomic_long max_us[PH_N];
} srv_hist;

/* State every serving thread shares, under mu; the group commit's queue
 * under gmu; the received requests under qmu. */
typedef struct {
    pthread_mutex_t mu;
    srv_cred creds[KF_SERVER_KEY_CACHE];
    kf_replay *replay;
    double rate_window;      /* start of the current one-second window */
    int unauth_in_window, logs_in_window, suppressed;
    uint8_t inflight[KF_SERVER_MAX_THREADS][KF_WIRE_MAC_LEN]; /* header MACs being handled */
    int inflight_used[KF_SERVER_MAX_THREADS];
    pthread_mutex_t gmu;
    pthread_cond_t gcond;
    grp_wait *ghead, *gtail; /* results waiting for the next group */
    int gleaders;            /* threads storing a group now (at most KF_SERVER_GROUP_LEADERS) */
    long groups, grouped;    /* groups committed and results in them (statistics) */
    srv_hist hist;           /* service times since the last kf_server_stats */
    double hist_since;       /* when that window began */
    long groups_at, grouped_at; /* groups and grouped when that window began */
    /* One receiving thread hands requests to the serving threads through
     * this queue: threads blocked in nn_recvmsg on one socket were all woken
     * by every message (16 wake-ups, 15 of them for nothing). */
    pthread_mutex_t qmu;
    pthread_cond_t qready, qspace;
    srv_msg *qhead, *qtail;
    int qlen, qcap;          /* requests queued; at most qcap (2 per serving thread) */
} srv_shared;

/* A task as the coordinator sends it, kept per serving context: tasks never
 * change (their sha256 names their content), so a lease reads only the
 * task's id and hash and the task is read and parsed once per context, not
 * once per reply (task_get). */
#define KF_SERVER_TASKS KF_QUEUE_MAX_LEASES /* a reply never evicts a task it carries */
typedef struct {
    int64_t id;              /* 0: empty slot */
    char sha[80];
    json_t *t;               /* {"name": s, "spec": s (task.json text), "files": {name: content}} */
    size_t bytes;            /* spec and files (names and contents): what a job carries of it */
    uint64_t used;           /* task_tick when last used */
} task_slot;

/* One serving context: the top-level server (single-threaded mode, and the
 * owner of everything) or one pool thread with its own connection. */
struct kf_server {
    int sock;
    int raw;                 /* AF_SP_RAW socket: replies carry the request's routing header */
    const kf_server_config *cfg;
    kf_db *db;
    srv_shared *sh;
    void *control;           /* raw: the routing header of the request being answered (NN_MSG chunk) */
    int slot;                /* this context's in-flight slot */
    kf_queue_floors floors;  /* where this context's leases read each campaign's queue */
    uint64_t cancel_buf[4 * KF_QUEUE_MAX_LEASES]; /* a heartbeat reply's cancel_jobs */
    task_slot tasks[KF_SERVER_TASKS]; /* the tasks this context sent lately (task_get) */
    uint64_t task_tick;
    Kfarm__Status more_status[KF_SERVER_MORE_RESULTS]; /* a result reply's more_status */
    double t_recv, t_start;  /* the request being handled: received, taken by this thread */
    /* top level only */
    struct kf_server *pool;
    pthread_t *tids;
    int nthreads;
    pthread_t rtid;          /* the receiving thread */
    int receiving;           /* rtid was started */
    atomic_int stop;
    atomic_long handled;
};

/* The authenticated sender of the request being handled. */
typedef struct {
    const char *id;          /* the frame's worker name (MAC verified) */
    char instance[2 * KF_WIRE_INSTANCE_LEN + 1];
} peer;

static void *serve_thread(void *arg);
static void *recv_thread(void *arg);

/* Count a duration of phase ph that began at t0 (kf_util_now_s); returns
 * now, the next phase's start. */
static double hist_add(srv_hist *h, int ph, double t0)
{
    double now = kf_util_now_s(), us = (now - t0) * 1e6;
    int b = us < 1.0 ? 0 : (int)(4.0 * log2(us));
    if (b >= KF_SERVER_HIST_BUCKETS) b = KF_SERVER_HIST_BUCKETS - 1;
    atomic_fetch_add(&h->n[ph][b], 1);
    atomic_fetch_add(&h->count[ph], 1);
    long u = (long)us, m = atomic_load(&h->max_us[ph]);
    while (u > m && !atomic_compare_exchange_weak(&h->max_us[ph], &m, u))
        ;
    return now;
}

/* The q-quantile (0..1) of phase ph, in ms: the upper edge of its bucket. */
static double hist_quantile(srv_hist *h, int ph, double q)
{
    long total = atomic_load(&h->count[ph]), seen = 0;
    if (total <= 0) return 0;
    long want = (long)ceil(q * (double)total);
    if (want < 1) want = 1;
    for (int b = 0; b < KF_SERVER_HIST_BUCKETS; b++) {
        seen += atomic_load(&h->n[ph][b]);
        if (seen >= want) { /* the bucket's upper edge, but never above the largest seen */
            double edge = exp2((b + 1) / 4.0), mx = (double)atomic_load(&h->max_us[ph]);
            return (edge < mx ? edge : mx) / 1000.0;
        }
    }
    return (double)atomic_load(&h->max_us[ph]) / 1000.0;
}

kf_server *kf_server_new(const kf_server_config *cfg, kf_db *db, char *err, size_t errlen)
{
    if (cfg->n_listen <= 0) {
        snprintf(err, errlen, "no listen address");
        return NULL;
    }
    int nthreads = cfg->threads > 1 ? cfg->threads : 0;
    if (nthreads > KF_SERVER_MAX_THREADS) nthreads = KF_SERVER_MAX_THREADS;
    kf_server *s = calloc(1, sizeof(*s));
    srv_shared *sh = calloc(1, sizeof(*sh));
    if (!s || !sh) {
        free(s);
        free(sh);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&sh->mu, NULL);
    pthread_mutex_init(&sh->gmu, NULL);
    pthread_cond_init(&sh->gcond, NULL);
    pthread_mutex_init(&sh->qmu, NULL);
    pthread_cond_init(&sh->qready, NULL);
    pthread_cond_init(&sh->qspace, NULL);
    sh->qcap = 2 * (nthreads > 0 ? nthreads : 1);
    s->sh = sh;
    s->cfg = cfg;
    s->db = db;
    kf_queue_floors_init(&s->floors);
    s->raw = nthreads > 0;
    s->sock = nn_socket(s->raw ? AF_SP_RAW : AF_SP, NN_REP);
    if (s->sock < 0) {
        snprintf(err, errlen, "nn_socket: %s", nn_strerror(nn_errno()));
        goto fail_sock;
    }
    /* pool threads wake every 200 ms to see a stop request */
    if (kf_wire_socket_setup(s->sock, KF_WIRE_MAX_REQ, 5000, s->raw ? 200 : -1, err, errlen) < 0) goto fail;
    for (int i = 0; i < cfg->n_listen; i++) {
        if (nn_bind(s->sock, cfg->listen[i]) < 0) {
            snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen[i],
                     nn_strerror(nn_errno()));
            goto fail;
        }
    }
    sh->replay = kf_replay_new(cfg->replay_capacity ? cfg->replay_capacity : 16384);
    sh->hist_since = kf_util_now_s();
    if (!sh->replay) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (nthreads) {
        s->pool = calloc((size_t)nthreads, sizeof(*s->pool));
        s->tids = calloc((size_t)nthreads, sizeof(*s->tids));
        if (!s->pool || !s->tids) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        for (int i = 0; i < nthreads; i++) {
            kf_server *c = &s->pool[i];
            c->sock = s->sock;
            c->raw = 1;
            c->cfg = cfg;
            c->sh = sh;
            c->slot = i;
            kf_queue_floors_init(&c->floors);
            c->pool = s; /* back pointer: the owner (stop flag, counter) */
            c->db = kf_db_open_with(cfg->conninfo, cfg->pg_options, err, errlen);
            if (!c->db) {
                for (int k = 0; k < i; k++) kf_db_close(s->pool[k].db);
                goto fail;
            }
            kf_db_set_prepare(c->db, 1);
        }
        for (int i = 0; i < nthreads; i++) {
            if (pthread_create(&s->tids[i], NULL, serve_thread, &s->pool[i]) != 0) {
                snprintf(err, errlen, "cannot start serving thread %d", i);
                atomic_store(&s->stop, 1);
                for (int k = 0; k < i; k++) pthread_join(s->tids[k], NULL);
                for (int k = 0; k < nthreads; k++) kf_db_close(s->pool[k].db);
                goto fail;
            }
            s->nthreads = i + 1;
        }
        if (pthread_create(&s->rtid, NULL, recv_thread, s) != 0) {
            snprintf(err, errlen, "cannot start the receiving thread");
            atomic_store(&s->stop, 1);
            for (int k = 0; k < nthreads; k++) pthread_join(s->tids[k], NULL);
            for (int k = 0; k < nthreads; k++) kf_db_close(s->pool[k].db);
            goto fail;
        }
        s->receiving = 1;
    }
    return s;
fail:
    nn_close(s->sock);
fail_sock:
    if (sh->replay) kf_replay_free(sh->replay);
    pthread_mutex_destroy(&sh->mu);
    pthread_mutex_destroy(&sh->gmu);
    pthread_cond_destroy(&sh->gcond);
    pthread_mutex_destroy(&sh->qmu);
    pthread_cond_destroy(&sh->qready);
    pthread_cond_destroy(&sh->qspace);
    free(s->pool);
    free(s->tids);
    free(sh);
    free(s);
    return NULL;
}

void kf_server_stats(kf_server *s)
{
    srv_hist *h = &s->sh->hist;
    double now = kf_util_now_s(), span = now - s->sh->hist_since;
    long n = atomic_load(&h->count[PH_WHOLE]);
    if (n > 0 && span > 0) {
        static const char *const name[PH_N] = { "waiting for a thread", "authentication", "results stored",
                                                 "group transaction", "lease", "reply", "whole" };
        char line[768];
        size_t len = 0;
        for (int ph = 0; ph < PH_N && len < sizeof(line); ph++) {
            if (atomic_load(&h->count[ph]) == 0) continue;
            double v[3] = { hist_quantile(h, ph, 0.5), hist_quantile(h, ph, 0.99),
                            (double)atomic_load(&h->max_us[ph]) / 1000.0 };
            /* three significant digits, but whole ms from 1 s on (not 1.23e+03) */
            char f[3][32];
            for (int i = 0; i < 3; i++)
                snprintf(f[i], sizeof(f[i]), v[i] >= 1000.0 ? "%.0f" : "%.3g", v[i]);
            len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s %s/%s/%s", len ? ", " : "", name[ph],
                                    f[0], f[1], f[2]);
        }
        pthread_mutex_lock(&s->sh->gmu);
        long groups = s->sh->groups - s->sh->groups_at, grouped = s->sh->grouped - s->sh->grouped_at;
        pthread_mutex_unlock(&s->sh->gmu);
        char gl[96] = "";
        if (groups > 0)
            snprintf(gl, sizeof(gl), "; %ld results stored in %ld group transactions (%.1f each)", grouped,
                     groups, (double)grouped / (double)groups);
        kf_log("served %ld requests in %.0f s (%.0f/s); ms p50/p99/max: %s%s", n, span, (double)n / span, line,
               gl);
    }
    pthread_mutex_lock(&s->sh->gmu);
    s->sh->groups_at = s->sh->groups;
    s->sh->grouped_at = s->sh->grouped;
    pthread_mutex_unlock(&s->sh->gmu);
    for (int ph = 0; ph < PH_N; ph++) {
        for (int b = 0; b < KF_SERVER_HIST_BUCKETS; b++) atomic_store(&h->n[ph][b], 0);
        atomic_store(&h->count[ph], 0);
        atomic_store(&h->max_us[ph], 0);
    }
    s->sh->hist_since = now;
}

void kf_server_free(kf_server *s)
{
    if (!s) return;
    atomic_store(&s->stop, 1);
    if (s->receiving) pthread_join(s->rtid, NULL);
    for (int i = 0; i < s->nthreads; i++) pthread_join(s->tids[i], NULL);
    while (s->sh->qhead) { /* received, never served */
        srv_msg *m = s->sh->qhead;
        s->sh->qhead = m->next;
        nn_freemsg(m->body);
        if (m->control) nn_freemsg(m->control);
        free(m);
    }
    kf_server_stats(s);
    if (s->sh->groups)
        kf_log("group commit: %ld results stored in %ld transactions (%.1f per group)",
               s->sh->grouped, s->sh->groups, (double)s->sh->grouped / (double)s->sh->groups);
    for (int i = 0; i < s->nthreads; i++) {
        kf_db_close(s->pool[i].db);
        for (int k = 0; k < KF_SERVER_TASKS; k++) json_decref(s->pool[i].tasks[k].t);
    }
    for (int k = 0; k < KF_SERVER_TASKS; k++) json_decref(s->tasks[k].t);
    nn_close(s->sock);
    kf_replay_free(s->sh->replay);
    pthread_mutex_destroy(&s->sh->mu);
    pthread_mutex_destroy(&s->sh->gmu);
    pthread_cond_destroy(&s->sh->gcond);
    pthread_mutex_destroy(&s->sh->qmu);
    pthread_cond_destroy(&s->sh->qready);
    pthread_cond_destroy(&s->sh->qspace);
    free(s->sh);
    free(s->pool);
    free(s->tids);
    free(s);
}

/* Send len bytes as the answer to the request being handled: on a raw
 * socket with its routing header (the header chunk then belongs to
 * nanomsg). Returns nn_send's result. */
static int answer(kf_server *s, const void *data, size_t len, int flags)
{
    if (!s->raw) return nn_send(s->sock, data, len, flags);
    if (!s->control) return -1;
    void *chunk = nn_allocmsg(len ? len : 1, 0);
    if (!chunk) return -1;
    memcpy(chunk, data, len);
    struct nn_iovec iov = { .iov_base = &chunk, .iov_len = NN_MSG };
    struct nn_msghdr hdr;
    memset(&hdr, 0, sizeof(hdr));
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = &s->control;
    hdr.msg_controllen = NN_MSG;
    int rc = nn_sendmsg(s->sock, &hdr, flags);
    if (rc < 0) {
        nn_freemsg(chunk);
        return rc;
    }
    s->control = NULL;
    return rc;
}

/* A string from the wire is usable as an id / class: 1..maxlen bytes, UTF-8. */
static int ok_str(const char *v, size_t maxlen)
{
    if (!v) return 0;
    size_t n = strlen(v);
    return n > 0 && n <= maxlen && kf_db_utf8_valid(v, n);
}

static int ok_classes(char **c, size_t n)
{
    if (n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!ok_str(c[i], 128)) return 0;
    return 1;
}

static void set_detail(Kfarm__Reply *rep, char *buf, size_t cap, const char *msg)
{
    snprintf(buf, cap, "%s", msg);
    kf_db_utf8_sanitize(buf);
    rep->detail = buf;
}

/* ---- Register ---- */

static char *devices_json(const Kfarm__Register *m)
{
    json_t *a = json_array();
    for (size_t i = 0; i < m->n_devices; i++) {
        const Kfarm__Device *d = m->devices[i];
        json_t *o = json_object();
        if (d->name && kf_db_utf8_valid(d->name, strlen(d->name)))
            json_object_set_new(o, "name", json_string(d->name));
        if (d->arch && kf_db_utf8_valid(d->arch, strlen(d->arch)))
            json_object_set_new(o, "arch", json_string(d->arch));
        if (d->has_sm_count) json_object_set_new(o, "sm_count", json_integer(d->sm_count));
        if (d->has_memory_bytes)
            json_object_set_new(o, "memory_bytes", json_integer((json_int_t)d->memory_bytes));
        if (d->has_bandwidth_gbs) json_object_set_new(o, "bandwidth_gbs", json_real(d->bandwidth_gbs));
        if (d->has_clock_mhz) json_object_set_new(o, "clock_mhz", json_real(d->clock_mhz));
        if (d->has_l2_bytes) json_object_set_new(o, "l2_bytes", json_integer((json_int_t)d->l2_bytes));
        if (d->features && kf_db_utf8_valid(d->features, strlen(d->features)))
            json_object_set_new(o, "features", json_string(d->features));
        if (d->has_peak_gflops_f32)
            json_object_set_new(o, "peak_gflops_f32", json_real(d->peak_gflops_f32));
        if (d->has_peak_gflops_bf16)
            json_object_set_new(o, "peak_gflops_bf16", json_real(d->peak_gflops_bf16));
        json_array_append_new(a, o);
    }
    /* json_real of NaN/Inf yields NULL and is skipped by set_new: the dump
     * is always valid JSON for jsonb. */
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

/* The window in which a process is called live (ms): a second process
 * claiming the same identity inside it is refused. */
static int live_window_ms(const kf_server *s)
{
    return s->cfg->queue.lease_ms > 15000 ? s->cfg->queue.lease_ms : 15000;
}

static void on_register_(kf_server *s, const peer *who, const Kfarm__Register *m, Kfarm__Reply *rep,
                         char *dbuf, size_t dcap);

/* An identity claim is durable before it is answered (a worker told
 * CONFLICT stops), whatever the connection's synchronous_commit default. */
static void on_register(kf_server *s, const peer *who, const Kfarm__Register *m, Kfarm__Reply *rep,
                        char *dbuf, size_t dcap)
{
    char err[256];
    kf_db_cmd(s->db, "SET synchronous_commit = on", 0, NULL, err, sizeof(err));
    on_register_(s, who, m, rep, dbuf, dcap);
    if (s->cfg->pg_options && strstr(s->cfg->pg_options, "synchronous_commit=off"))
        kf_db_cmd(s->db, "SET synchronous_commit = off", 0, NULL, err, sizeof(err));
}

static void on_register_(kf_server *s, const peer *who, const Kfarm__Register *m, Kfarm__Reply *rep,
                         char *dbuf, size_t dcap)
{
    if (!ok_str(m->worker_id, 128) || !ok_classes(m->classes, m->n_classes) ||
        m->n_devices > 256) {
        rep->status = KFARM__STATUS__REJECTED;
        set_detail(rep, dbuf, dcap, "register: bad worker_id, classes or devices");
        return;
    }
    char err[512];
    /* One live process per identity: take the identity over only when the
     * process that held it has been silent for the live window. */
    char win[24];
    snprintf(win, sizeof(win), "%d", live_window_ms(s));
    const char *host = m->hostname && kf_db_utf8_valid(m->hostname, strlen(m->hostname)) ? m->hostname : "?";
    const char *pi[4] = { who->id, who->instance, win, host };
    PGresult *ir = kf_db_exec(s->db,
        "WITH old AS (SELECT instance_id, instance_host,"
        "               extract(epoch FROM now() - instance_seen)::float8 AS age"
        "             FROM worker_credentials WHERE name = $1 FOR UPDATE),"
        " upd AS (UPDATE worker_credentials w SET instance_id = $2, instance_host = left($4, 256),"
        "           instance_seen = now() FROM old"
        "         WHERE w.name = $1 AND (old.instance_id IS NULL OR old.instance_id = $2"
        "               OR old.age * 1000 > $3::float8) RETURNING 1)"
        " SELECT (SELECT count(*) FROM upd), old.instance_id, old.instance_host, old.age FROM old",
        4, pi, err, sizeof(err));
    if (!ir || PQntuples(ir) != 1) {
        if (ir) PQclear(ir);
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, ir ? "register: identity vanished" : err);
        return;
    }
    if (kf_db_i64(ir, 0, 0, 0) == 0) {
        char msg[512];
        snprintf(msg, sizeof(msg),
                 "worker identity %s is already in use by a live process (instance %.8s on host "
                 "%.64s, last message %.1f s ago); a second process with one identity is refused "
                 "(issue each machine its own: kfarm worker add NAME)",
                 who->id, PQgetvalue(ir, 0, 1), PQgetvalue(ir, 0, 2), kf_db_f64(ir, 0, 3, 0));
        PQclear(ir);
        kf_log("register refused: %s; refused instance %.8s on host %.64s", msg, who->instance, host);
        rep->status = KFARM__STATUS__CONFLICT;
        set_detail(rep, dbuf, dcap, msg);
        return;
    }
    PQclear(ir);
    char *dev = devices_json(m);
    int rc = kf_queue_register_worker(s->db, m->worker_id, m->hostname, m->backend, dev,
                                      (const char *const *)m->classes, (int)m->n_classes,
                                      m->driver_version, m->toolkit_version,
                                      m->has_slots ? (int)m->slots : 1, err, sizeof(err));
    free(dev);
    if (rc < 0) {
        kf_log("register %s failed: %s", m->worker_id, err);
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, err);
        return;
    }
    char cls[512] = "";
    for (size_t i = 0; i < m->n_classes; i++)
        snprintf(cls + strlen(cls), sizeof(cls) - strlen(cls), "%s%s", i ? "," : "", m->classes[i]);
    kf_log("worker %s (instance %.8s) registered (%s, %s, %zu devices, classes %s)", m->worker_id,
           who->instance,
           m->hostname ? m->hostname : "?", m->backend ? m->backend : "?", m->n_devices, cls);
    rep->status = KFARM__STATUS__OK;
}

/* ---- GetJob ---- */

/* Everything a Job reply points into, freed after the reply is sealed. */
typedef struct {
    json_t *task, *defines;   /* task: a reference to task_get's object (its "files" are sent) */
    Kfarm__Job job;
    Kfarm__TaskFile *tf;
    Kfarm__TaskFile **tfp;
    Kfarm__Define *df;
    Kfarm__Define **dfp;
    char **dvals;
    size_t n_dvals;
} job_payload;

static void payload_free(job_payload *p)
{
    json_decref(p->task);
    json_decref(p->defines);
    free(p->tf);
    free(p->tfp);
    free(p->df);
    free(p->dfp);
    for (size_t i = 0; i < p->n_dvals; i++) free(p->dvals[i]);
    free(p->dvals);
    memset(p, 0, sizeof(*p));
}

/* Fill p->job for lease l from row `row` of r (the lease statement's
 * payload, KF_QUEUE_PL_*; r outlives p) and its task (task_get's object: a
 * reference is taken) whose hash is sha (Job.task_sha256; r's, outlives p).
 * full = 0: the worker holds the task (GetJob.tasks_once), the job names it
 * only (task_json empty, no task_files). Returns 0 or -1 with reason. */
static int build_payload(kf_server *s, const kf_lease *l, job_payload *p, PGresult *r, int row, json_t *task,
                         const char *sha, int full, char *err, size_t errlen)
{
    json_error_t je;
    p->task = json_incref(task);
    json_t *files = json_object_get(task, "files");
    p->defines = json_loads(PQgetvalue(r, row, KF_QUEUE_PL_DEFINES), 0, &je);
    if (!json_is_object(files) || !json_is_object(p->defines)) {
        snprintf(err, errlen, "job %lld: stored files/defines are not JSON objects", (long long)l->job_id);
        return -1;
    }
    Kfarm__Job init = KFARM__JOB__INIT;
    p->job = init;
    p->job.job_id = (uint64_t)l->job_id;
    p->job.fencing_token = (uint64_t)l->fencing_token;
    p->job.candidate_id = (uint64_t)l->candidate_id;
    p->job.task_name = (char *)json_string_value(json_object_get(task, "name"));
    p->job.task_json = full ? (char *)json_string_value(json_object_get(task, "spec")) : (char *)"";
    p->job.task_sha256 = (char *)sha;
    p->job.source.data = (uint8_t *)PQgetvalue(r, row, KF_QUEUE_PL_SOURCE);
    p->job.source.len = (size_t)PQgetlength(r, row, KF_QUEUE_PL_SOURCE);
    p->job.lease_ms = (uint32_t)s->cfg->queue.lease_ms;
    p->job.target = (char *)l->target;
    p->job.has_seed = 1;
    p->job.seed = (uint64_t)l->seed;
    p->job.has_lease_token = 1;
    p->job.lease_token.data = (uint8_t *)l->lease_token;
    p->job.lease_token.len = KF_QUEUE_TOKEN_LEN;

    size_t nf = json_object_size(files), nd = json_object_size(p->defines);
    p->tf = calloc(nf + 1, sizeof(*p->tf));
    p->tfp = calloc(nf + 1, sizeof(*p->tfp));
    p->df = calloc(nd + 1, sizeof(*p->df));
    p->dfp = calloc(nd + 1, sizeof(*p->dfp));
    p->dvals = calloc(nd + 1, sizeof(*p->dvals));
    if (!p->tf || !p->tfp || !p->df || !p->dfp || !p->dvals) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *key;
    json_t *val;
    size_t i = 0;
    if (full) json_object_foreach(files, key, val) {
        Kfarm__TaskFile f = KFARM__TASK_FILE__INIT;
        p->tf[i] = f;
        p->tf[i].name = (char *)key;
        p->tf[i].content.data = (uint8_t *)json_string_value(val);
        p->tf[i].content.len = json_string_length(val);
        if (!p->tf[i].content.data) p->tf[i].content.data = (uint8_t *)"";
        p->tfp[i] = &p->tf[i];
        i++;
    }
    p->job.n_task_files = i;
    p->job.task_files = p->tfp;
    i = 0;
    json_object_foreach(p->defines, key, val) {
        Kfarm__Define d = KFARM__DEFINE__INIT;
        p->df[i] = d;
        p->df[i].name = (char *)key;
        if (json_is_string(val)) p->dvals[i] = strdup(json_string_value(val));
        else p->dvals[i] = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
        p->n_dvals = i + 1;
        if (!p->dvals[i]) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        p->df[i].value = p->dvals[i];
        p->dfp[i] = &p->df[i];
        i++;
    }
    p->job.n_defines = i;
    p->job.defines = p->dfp;
    return 0;
}

/* The leases of one GetJob reply and everything their Job messages point
 * into (freed after the reply is sealed). */
typedef struct {
    int n;
    kf_lease l[KF_QUEUE_MAX_LEASES];
    job_payload p[KF_QUEUE_MAX_LEASES];
    Kfarm__Job *more[KF_QUEUE_MAX_LEASES];
    PGresult *r;                         /* the lease statement's payload (KF_QUEUE_PL_*) */
} lease_set;

/* The index of the job of ls among carriers[0..n) (jobs that carry their
 * source) whose source is src[0..len), or -1. A lease's jobs mostly share
 * one or two sources (the variants of one tuned kernel); comparing bytes
 * costs less than sending them again. */
static int same_source(const lease_set *ls, const int *carriers, int n, const char *src, size_t len)
{
    if (!len) return -1;
    for (int c = 0; c < n; c++) {
        const ProtobufCBinaryData *d = &ls->p[carriers[c]].job.source;
        if (d->len == len && memcmp(d->data, src, len) == 0) return carriers[c];
    }
    return -1;
}

/* Bytes of a task's files (the reply budget counts them for each job). */
static size_t files_bytes(json_t *files)
{
    size_t n = 0;
    const char *key;
    json_t *val;
    json_object_foreach(files, key, val) n += strlen(key) + json_string_length(val);
    return n;
}

/* Task `id` whose sha256 is sha, from this context's cache, or read and
 * parsed on a miss (the least recently used slot is replaced). Returns a
 * borrowed reference (valid until the next task_get; build_payload takes
 * its own) and *bytes (task_slot.bytes), or NULL with reason. */
static json_t *task_get(kf_server *s, int64_t id, const char *sha, size_t *bytes, char *err, size_t errlen)
{
    task_slot *v = NULL;
    for (int i = 0; i < KF_SERVER_TASKS; i++) {
        task_slot *c = &s->tasks[i];
        if (c->t && c->id == id && !strcmp(c->sha, sha)) {
            c->used = ++s->task_tick;
            *bytes = c->bytes;
            return c->t;
        }
        if (!v || (v->t && (!c->t || c->used < v->used))) v = c; /* an empty slot, else the oldest */
    }
    char ids[24];
    snprintf(ids, sizeof(ids), "%lld", (long long)id);
    const char *pp[2] = { ids, sha };
    PGresult *r = kf_db_exec(s->db, "SELECT name, spec_text, files::text FROM tasks WHERE id = $1::bigint AND sha256 = $2",
                             2, pp, err, errlen);
    if (!r) return NULL;
    if (PQntuples(r) != 1) {
        PQclear(r);
        snprintf(err, errlen, "task %lld (sha256 %.16s) vanished", (long long)id, sha);
        return NULL;
    }
    json_error_t je;
    json_t *files = json_loads(PQgetvalue(r, 0, 2), 0, &je);
    json_t *t = json_is_object(files) ? json_pack("{s:s,s:s,s:o}", "name", PQgetvalue(r, 0, 0), "spec",
                                                  PQgetvalue(r, 0, 1), "files", files)
                                      : NULL;
    if (!t) {
        if (!json_is_object(files)) json_decref(files);
        PQclear(r);
        snprintf(err, errlen, "task %lld: stored files are not a JSON object of strings", (long long)id);
        return NULL;
    }
    json_decref(v->t);
    v->t = t;
    v->id = id;
    snprintf(v->sha, sizeof(v->sha), "%s", sha);
    v->bytes = (size_t)PQgetlength(r, 0, 1) + files_bytes(files);
    v->used = ++s->task_tick;
    PQclear(r);
    *bytes = v->bytes;
    return t;
}

static void lease_set_free(lease_set *ls)
{
    if (!ls) return;
    for (int i = 0; i < ls->n; i++) payload_free(&ls->p[i]);
    if (ls->r) PQclear(ls->r);
    free(ls);
}

/* A reply of several jobs stays under this many bytes of sources and task
 * files (the wire allows KF_WIRE_MAX_MSG); leases beyond it are released. */
#define KF_SERVER_REPLY_BUDGET (KF_WIRE_MAX_MSG / 2)
#define KF_SERVER_HAVE_TASKS 64 /* GetJob.have_tasks entries read at most */
#define KF_SERVER_SOURCES 8     /* distinct sources a reply's later jobs are compared with */

/* Lease up to m->max_jobs jobs (one when absent) for m's worker into *lsp
 * (allocated here; the caller frees it with lease_set_free after sending)
 * and point rep->job (and rep->more_jobs) at them. */
static void on_get_job(kf_server *s, const Kfarm__GetJob *m, Kfarm__Reply *rep, lease_set **lsp,
                       char *dbuf, size_t dcap)
{
    if (!ok_str(m->worker_id, 128) || !ok_classes(m->classes, m->n_classes)) {
        rep->status = KFARM__STATUS__REJECTED;
        set_detail(rep, dbuf, dcap, "get_job: bad worker_id or classes");
        return;
    }
    char err[512];
    lease_set *ls = calloc(1, sizeof(*ls));
    if (!ls) {
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, "out of memory");
        return;
    }
    *lsp = ls;
    int want = m->has_max_jobs && m->max_jobs > 1
        ? (m->max_jobs > KF_QUEUE_MAX_LEASES ? KF_QUEUE_MAX_LEASES : (int)m->max_jobs) : 1;
    int got = 0;
    double t0 = kf_util_now_s();
    kf_queue_status st = kf_queue_lease_floors(s->db, &s->cfg->queue, &s->floors, m->worker_id,
                                               (const char *const *)m->classes, (int)m->n_classes,
                                               want, ls->l, &got, &ls->r, err, sizeof(err));
    if (st == KF_Q_NO_JOB) {
        hist_add(&s->sh->hist, PH_LEASE, t0);
        rep->status = KFARM__STATUS__NO_JOB;
        set_detail(rep, dbuf, dcap, err);
        return;
    }
    if (st != KF_Q_OK) {
        kf_log("get_job from %s failed: %s", m->worker_id, err);
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, err);
        return;
    }
    /* every job's source and defines came with its lease; its task from
     * this context's cache (task_get: as many slots as a reply has jobs, so
     * jobs that cycle through many tasks miss once per task, not per job) */
    size_t bytes = 0;
    int kept = 0, failed = 0, carriers[KF_SERVER_SOURCES], ncar = 0;
    int64_t row_job[KF_QUEUE_MAX_LEASES]; /* each payload row's job id, parsed once */
    int nrows = PQntuples(ls->r) < KF_QUEUE_MAX_LEASES ? PQntuples(ls->r) : KF_QUEUE_MAX_LEASES;
    for (int k = 0; k < nrows; k++) row_job[k] = kf_db_i64(ls->r, k, KF_QUEUE_PL_JOB, -1);
    for (int i = 0; i < got && !failed; i++) {
        int row = -1;
        for (int k = 0; k < nrows && row < 0; k++)
            if (row_job[k] == ls->l[i].job_id) row = k;
        if (row < 0) {
            snprintf(err, sizeof(err), "job %lld is not in its lease's rows", (long long)ls->l[i].job_id);
            failed = 1;
            break;
        }
        size_t tb = 0;
        const char *sha = PQgetvalue(ls->r, row, KF_QUEUE_PL_TASK_SHA);
        json_t *task = task_get(s, kf_db_i64(ls->r, row, KF_QUEUE_PL_TASK, -1), sha, &tb, err, sizeof(err));
        if (!task) {
            failed = 1;
            break;
        }
        /* the task in full unless the worker holds it or an earlier job of
         * this reply carries it (GetJob.tasks_once) */
        int full = 1;
        if (m->has_tasks_once && m->tasks_once) {
            for (size_t h = 0; h < m->n_have_tasks && h < KF_SERVER_HAVE_TASKS && full; h++)
                full = strcmp(m->have_tasks[h], sha) != 0;
            for (int k = 0; k < i && full; k++) /* a job in full has its task.json */
                full = !ls->p[k].job.task_json[0] || strcmp(ls->p[k].job.task_sha256, sha) != 0;
        }
        /* the source once per reply (GetJob.sources_once): a job whose
         * source is that of an earlier job of this reply names that job */
        int src_of = -1;
        if (m->has_sources_once && m->sources_once)
            src_of = same_source(ls, carriers, ncar, PQgetvalue(ls->r, row, KF_QUEUE_PL_SOURCE),
                                 (size_t)PQgetlength(ls->r, row, KF_QUEUE_PL_SOURCE));
        size_t b = (full ? tb : strlen(sha)) +
                   (src_of >= 0 ? 0 : (size_t)PQgetlength(ls->r, row, KF_QUEUE_PL_SOURCE)) +
                   (size_t)PQgetlength(ls->r, row, KF_QUEUE_PL_DEFINES);
        if (i > 0 && bytes + b > KF_SERVER_REPLY_BUDGET) break; /* the rest go back */
        ls->n = i + 1;
        if (build_payload(s, &ls->l[i], &ls->p[i], ls->r, row, task, sha, full, err, sizeof(err)) < 0) {
            failed = 1;
            break;
        }
        if (src_of >= 0) {
            ls->p[i].job.source.data = (uint8_t *)"";
            ls->p[i].job.source.len = 0;
            ls->p[i].job.has_source_job = 1;
            ls->p[i].job.source_job = ls->p[src_of].job.job_id;
        } else if (ncar < KF_SERVER_SOURCES) {
            carriers[ncar++] = i;
        }
        bytes += b;
        kept = i + 1;
    }
    if (failed) kept = 0;
    /* leases that will not be sent: back to the queue, the attempt not counted */
    for (int i = kept; i < got; i++) {
        char e2[256];
        if (failed)
            kf_log("job %lld: cannot build the job for %s: %s (released)", (long long)ls->l[i].job_id,
                   m->worker_id, err);
        kf_queue_release(s->db, ls->l[i].job_id, ls->l[i].fencing_token, e2, sizeof(e2));
    }
    if (failed) {
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, err);
        return;
    }
    /* one log line per lease, its jobs listed as job/candidate/lease
     * token/attempt (a line per job was a write(2) per job: 4% of the
     * coordinator's CPU at 5,000 jobs/s) */
    char line[KF_QUEUE_MAX_LEASES * 96 + 64];
    size_t ll = 0;
    int same = 1;
    for (int i = 0; i < kept; i++) {
        const kf_lease *l = &ls->l[i];
        if (ll < sizeof(line))
            ll += (size_t)snprintf(line + ll, sizeof(line) - ll, "%s%lld/%lld/%lld/%d%s", i ? " " : "",
                                   (long long)l->job_id, (long long)l->candidate_id, (long long)l->fencing_token,
                                   l->attempt, l->verify ? "/verification" : "");
        same = same && !strcmp(l->target, ls->l[0].target);
        if (i > 0) ls->more[i - 1] = &ls->p[i].job;
    }
    if (kept == 1)
        kf_log("job %lld (candidate %lld, %s%s) leased to %s, lease %lld, attempt %d",
               (long long)ls->l[0].job_id, (long long)ls->l[0].candidate_id, ls->l[0].target,
               ls->l[0].verify ? ", verification" : "", m->worker_id, (long long)ls->l[0].fencing_token,
               ls->l[0].attempt);
    else
        kf_log("%d jobs (%s) leased to %s (job/candidate/lease/attempt): %s", kept,
               same ? ls->l[0].target : "several targets", m->worker_id, line);
    hist_add(&s->sh->hist, PH_LEASE, t0);
    rep->status = KFARM__STATUS__OK;
    rep->job = &ls->p[0].job;
    rep->n_more_jobs = (size_t)(kept - 1);
    rep->more_jobs = kept > 1 ? ls->more : NULL;
}

/* ---- Heartbeat ---- */

static void on_heartbeat(kf_server *s, const Kfarm__Heartbeat *m, Kfarm__Reply *rep, char *dbuf,
                         size_t dcap)
{
    if (!ok_str(m->worker_id, 128) || m->job_id > INT64_MAX || m->fencing_token > INT64_MAX) {
        rep->status = KFARM__STATUS__REJECTED;
        set_detail(rep, dbuf, dcap, "heartbeat: bad worker_id, job or token");
        return;
    }
    char err[512];
    kf_queue_status st = KF_Q_ERROR;
    if (m->n_more > 0) {
        /* every lease the worker holds, in one statement; job_id's own
         * refusal is then asked again alone, for its exact reason */
        size_t n = m->n_more + 1;
        if (n > 4 * KF_QUEUE_MAX_LEASES) {
            rep->status = KFARM__STATUS__REJECTED;
            set_detail(rep, dbuf, dcap, "heartbeat: too many leases in one heartbeat");
            return;
        }
        kf_queue_hb hb[4 * KF_QUEUE_MAX_LEASES];
        for (size_t i = 0; i < n; i++) {
            const Kfarm__LeaseRef *r = i ? m->more[i - 1] : NULL;
            uint64_t job = r ? r->job_id : m->job_id, tok = r ? r->fencing_token : m->fencing_token;
            int has = r ? r->has_lease_token : m->has_lease_token;
            const ProtobufCBinaryData *lt = r ? &r->lease_token : &m->lease_token;
            hb[i].job_id = job > INT64_MAX ? -1 : (int64_t)job;
            hb[i].token = tok > INT64_MAX ? -1 : (int64_t)tok;
            hb[i].lease_token = has ? lt->data : NULL;
            hb[i].lease_token_len = has ? lt->len : 0;
        }
        int ext = kf_queue_heartbeat_many(s->db, &s->cfg->queue, m->worker_id, hb, (int)n, err,
                                          sizeof(err));
        if (ext < 0) {
            rep->status = KFARM__STATUS__ERROR;
            set_detail(rep, dbuf, dcap, err);
            return;
        }
        rep->cancel_jobs = s->cancel_buf;
        for (size_t i = 1; i < n; i++)
            if (!hb[i].alive) {
                s->cancel_buf[rep->n_cancel_jobs++] = m->more[i - 1]->job_id;
                kf_log("heartbeat from %s: lease %llu of job %llu is not current or not its own "
                       "(told to cancel)", m->worker_id, (unsigned long long)m->more[i - 1]->fencing_token,
                       (unsigned long long)m->more[i - 1]->job_id);
            }
        if (hb[0].alive) st = KF_Q_OK;
    }
    if (st != KF_Q_OK)
        st = kf_queue_heartbeat(s->db, &s->cfg->queue, m->worker_id,
                                (int64_t)m->job_id, (int64_t)m->fencing_token,
                                m->has_lease_token ? m->lease_token.data : NULL,
                                m->has_lease_token ? m->lease_token.len : 0,
                                err, sizeof(err));
    if (st == KF_Q_OK) {
        rep->status = KFARM__STATUS__OK;
        rep->has_lease_ms = 1;
        rep->lease_ms = (uint32_t)s->cfg->queue.lease_ms;
    } else if (st == KF_Q_STALE) {
        kf_log("heartbeat from %s: %s (told to cancel)", m->worker_id, err);
        rep->status = KFARM__STATUS__STALE;
        rep->has_cancel = 1;
        rep->cancel = 1;
        set_detail(rep, dbuf, dcap, err);
    } else if (st == KF_Q_REJECTED) {
        kf_log("heartbeat from %s refused: %s", m->worker_id, err);
        rep->status = KFARM__STATUS__REJECTED;
        set_detail(rep, dbuf, dcap, err);
    } else {
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, err);
    }
}

/* ---- Result ---- */

/* Group commit, leader/follower: the results w[0..nw) join the queue of
 * results waiting; while fewer than KF_SERVER_GROUP_LEADERS serving threads
 * are storing a group, this one becomes a leader, takes every result
 * waiting (up to KF_SERVER_GROUP_MAX) and stores them in one transaction on
 * its own connection (kf_queue_result_group), then wakes the others. A
 * thread returns only when its own results' transactions have committed (or
 * failed), so every reply is sent after the commit that stored it. While
 * the leaders store, the results of the other threads gather for the next
 * groups. */
static void group_submit(kf_server *s, grp_wait *w, int nw)
{
    srv_shared *sh = s->sh;
    int pending = 0;
    pthread_mutex_lock(&sh->gmu);
    for (int i = 0; i < nw; i++) {
        if (w[i].done < 0) continue; /* refused before: not stored */
        w[i].done = 0;
        w[i].next = NULL;
        if (sh->gtail) sh->gtail->next = &w[i];
        else sh->ghead = &w[i];
        sh->gtail = &w[i];
        pending++;
    }
    while (pending > 0) {
        pending = 0;
        for (int i = 0; i < nw; i++) pending += w[i].done == 0;
        if (!pending) break;
        if (sh->gleaders >= KF_SERVER_GROUP_LEADERS || !sh->ghead) {
            pthread_cond_wait(&sh->gcond, &sh->gmu);
            continue;
        }
        sh->gleaders++;
        grp_wait *batch[KF_SERVER_GROUP_MAX];
        kf_queue_item items[KF_SERVER_GROUP_MAX];
        int n = 0;
        while (sh->ghead && n < KF_SERVER_GROUP_MAX) {
            batch[n] = sh->ghead;
            items[n] = sh->ghead->item;
            n++;
            sh->ghead = sh->ghead->next;
        }
        if (!sh->ghead) sh->gtail = NULL;
        pthread_mutex_unlock(&sh->gmu);
        double t0 = kf_util_now_s();
        kf_queue_result_group(s->db, &s->cfg->queue, items, n);
        hist_add(&sh->hist, PH_GROUP, t0);
        pthread_mutex_lock(&sh->gmu);
        for (int i = 0; i < n; i++) {
            batch[i]->item = items[i];
            batch[i]->done = 1;
        }
        sh->groups++;
        sh->grouped += n;
        sh->gleaders--;
        pthread_cond_broadcast(&sh->gcond);
    }
    pthread_mutex_unlock(&sh->gmu);
}

/* Log the outcome of result m (stored, duplicate, refused) and return its
 * wire status (the reason, for anything but OK, is in it->err). With
 * quiet, a stored result is not logged: the caller writes one line for
 * all the stored results of a message (result_line). */
static Kfarm__Status result_outcome(const Kfarm__Result *m, const kf_result *r, const kf_queue_item *it,
                                    int quiet)
{
    switch (it->st) {
    case KF_Q_OK:
        if (quiet) return KFARM__STATUS__OK;
        if (r->speedup > 0)
            kf_log("job %llu: %s from %s, speedup %.3fx (%.2f us vs %.2f us)",
                   (unsigned long long)m->job_id, m->verdict, m->worker_id, r->speedup,
                   r->candidate_us, r->baseline_us);
        else
            kf_log("job %llu: %s from %s%s%.*s%s", (unsigned long long)m->job_id, m->verdict,
                   m->worker_id, m->detail && *m->detail ? " (" : "", 160,
                   m->detail ? m->detail : "", m->detail && *m->detail ? ")" : "");
        if (it->requeued) kf_log("job %llu: requeued after infra_error", (unsigned long long)m->job_id);
        return KFARM__STATUS__OK;
    case KF_Q_DUPLICATE:
        kf_log("job %llu: duplicate result from %s acknowledged", (unsigned long long)m->job_id,
               m->worker_id);
        return KFARM__STATUS__DUPLICATE;
    case KF_Q_STALE:
        kf_log("job %llu: stale result from %s refused: %s", (unsigned long long)m->job_id,
               m->worker_id, it->err);
        return KFARM__STATUS__STALE;
    case KF_Q_REJECTED:
        kf_log("job %llu: result from %s rejected: %s", (unsigned long long)m->job_id,
               m->worker_id, it->err);
        return KFARM__STATUS__REJECTED;
    default:
        kf_log("job %llu: result from %s not stored: %s", (unsigned long long)m->job_id,
               m->worker_id, it->err);
        return KFARM__STATUS__ERROR;
    }
}

/* One log line for the stored results of a message of n: "N results from
 * W stored: JOB VERDICT[ SPEEDUPx], ..." (a detail is in the database:
 * kfarm candidate show). The line is cut, with "...", at kf_log's length. */
static void result_line(const char *worker, const grp_wait *w, const kf_result *r,
                        const Kfarm__Result *mr, const Kfarm__Result *m, size_t n)
{
    char line[1800];
    size_t len = 0;
    int stored = 0, cut = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i].done < 0 || w[i].item.st != KF_Q_OK) continue;
        const Kfarm__Result *x = i ? &mr[i] : m;
        char one[96];
        /* %.4g: a worker's speedup is any finite double (1e300 as %.3f
         * would be 300 digits) */
        int k = r[i].speedup > 0
                    ? snprintf(one, sizeof(one), "%s%llu %.24s %.4gx", stored ? ", " : "",
                               (unsigned long long)x->job_id, x->verdict, r[i].speedup)
                    : snprintf(one, sizeof(one), "%s%llu %.24s", stored ? ", " : "",
                               (unsigned long long)x->job_id, x->verdict);
        stored++;
        if (k < 0 || (size_t)k >= sizeof(one)) k = -1; /* cannot happen with these widths: cut */
        if (cut || k < 0 || len + (size_t)k + 4 >= sizeof(line)) {
            cut = 1;
            continue;
        }
        memcpy(line + len, one, (size_t)k);
        len += (size_t)k;
    }
    if (!stored) return;
    line[len] = 0;
    kf_log("%d results from %s stored: %s%s", stored, worker, line, cut ? ", ..." : "");
    for (size_t i = 0; i < n; i++)
        if (w[i].done >= 0 && w[i].item.st == KF_Q_OK && w[i].item.requeued)
            kf_log("job %llu: requeued after infra_error",
                   (unsigned long long)(i ? mr[i].job_id : m->job_id));
}

/* Store result m, and the results of m->more with it (one group commit),
 * each checked as if sent alone; rep->status is m's, rep->more_status
 * each of m->more's. */
static void on_result(kf_server *s, const Kfarm__Result *m, Kfarm__Reply *rep, char *dbuf,
                      size_t dcap)
{
    if (!ok_str(m->worker_id, 128) || m->job_id > INT64_MAX || m->fencing_token > INT64_MAX) {
        rep->status = KFARM__STATUS__REJECTED;
        set_detail(rep, dbuf, dcap, "result: bad worker_id, job or token");
        return;
    }
    if (m->n_more > KF_SERVER_MORE_RESULTS) {
        rep->status = KFARM__STATUS__REJECTED;
        set_detail(rep, dbuf, dcap, "result: more than 64 results in one message");
        return;
    }
    size_t n = 1 + m->n_more;
    grp_wait *w = calloc(n, sizeof(*w));
    kf_result *r = calloc(n, sizeof(*r));
    Kfarm__Result *mr = calloc(n, sizeof(*mr)); /* mr[i]: m->more[i - 1] as a Result */
    if (!w || !r || !mr) {
        free(w);
        free(r);
        free(mr);
        rep->status = KFARM__STATUS__ERROR;
        set_detail(rep, dbuf, dcap, "out of memory");
        return;
    }
    for (size_t i = 1; i < n; i++) kf_wire_item_as_result(m->more[i - 1], &mr[i]);
    for (size_t i = 0; i < n; i++) {
        const Kfarm__Result *x = i ? &mr[i] : m;
        /* an entry for another worker, or with an out-of-range id, is
         * refused alone (the request as a whole is m's worker's) */
        if (i && (!x->worker_id || strcmp(x->worker_id, m->worker_id) != 0 || x->job_id > INT64_MAX ||
                  x->fencing_token > INT64_MAX)) {
            w[i].item.st = KF_Q_REJECTED;
            snprintf(w[i].item.err, sizeof(w[i].item.err), "result: bad worker_id, job or token");
            w[i].done = -1;
            continue;
        }
        kf_result rr = {
            .verdict = x->verdict,
            .detail = x->detail,
            .metrics_json = x->metrics_json,
            .compile_log = x->compile_log,
            .candidate_us = x->has_candidate_us ? x->candidate_us : 0,
            .baseline_us = x->has_baseline_us ? x->baseline_us : 0,
            .speedup = x->has_speedup ? x->speedup : 0,
        };
        r[i] = rr;
        w[i].item.worker_id = x->worker_id;
        w[i].item.job_id = (int64_t)x->job_id;
        w[i].item.token = (int64_t)x->fencing_token;
        w[i].item.lease_token = x->has_lease_token ? x->lease_token.data : NULL;
        w[i].item.lease_token_len = x->has_lease_token ? x->lease_token.len : 0;
        w[i].item.res = &r[i];
    }
    double t0 = kf_util_now_s();
    group_submit(s, w, (int)n);
    hist_add(&s->sh->hist, PH_STORE, t0);
    /* Several results in one message: the stored ones in one log line
     * (a line per result was a write(2) per job and ~3 GB of log an hour
     * at 5,000 jobs/s; the rate did not move measurably); refusals stay
     * one line each. */
    if (n > 1) result_line(m->worker_id, w, r, mr, m, n);
    for (size_t i = 0; i < n; i++) {
        const Kfarm__Result *x = i ? &mr[i] : m;
        Kfarm__Status st = w[i].done < 0 ? KFARM__STATUS__REJECTED
                                         : result_outcome(x, &r[i], &w[i].item, n > 1);
        if (i == 0) {
            rep->status = st;
            if (st != KFARM__STATUS__OK) set_detail(rep, dbuf, dcap, w[0].item.err);
        } else {
            s->more_status[i - 1] = st;
        }
    }
    if (n > 1) {
        rep->n_more_status = n - 1;
        rep->more_status = s->more_status;
    }
    free(w);
    free(r);
    free(mr);
}

/* ---- the request cycle ---- */

/* Roll the one-second rate window; say how much was suppressed in it.
 * Called with sh->mu held. */
static void rate_tick(srv_shared *sh)
{
    double now = kf_util_now_s();
    if (now - sh->rate_window < 1.0) return;
    if (sh->suppressed)
        kf_log("%d more refused frames in the last second (not logged, unanswered beyond %d/s)",
               sh->suppressed, KF_SERVER_UNAUTH_PER_S);
    sh->rate_window = now;
    sh->unauth_in_window = sh->logs_in_window = sh->suppressed = 0;
}

/* A frame refused before (or without) authentication: one log line and a
 * notice while under the per-second limits (shared by every serving
 * thread), else dropped and counted. */
static void refuse(kf_server *s, const char *why, size_t len, const char *who)
{
    srv_shared *sh = s->sh;
    pthread_mutex_lock(&sh->mu);
    rate_tick(sh);
    int log_it = sh->logs_in_window < KF_SERVER_LOG_PER_S, answer_it = sh->unauth_in_window < KF_SERVER_UNAUTH_PER_S;
    if (log_it) sh->logs_in_window++;
    else sh->suppressed++;
    if (answer_it) sh->unauth_in_window++;
    pthread_mutex_unlock(&sh->mu);
    if (log_it)
        kf_log("refused frame (%zu bytes%s%.64s): %s", len, who ? ", claims worker " : "",
               who ? who : "", why);
    if (!answer_it) return; /* REP: the next recv drops it; raw: its header is freed */
    uint8_t *out;
    size_t olen;
    if (kf_frame_notice(why, &out, &olen) == 0) {
        if (answer(s, out, olen, NN_DONTWAIT) < 0 && log_it) kf_log("send failed: %s", nn_strerror(nn_errno()));
        free(out);
    }
}

/* Seal rep for the authenticated peer f and send it; remember it under the
 * request's header MAC for nanomsg resends. */
static void send_reply(kf_server *s, const kf_wire_key *k, const kf_frame *f, Kfarm__Reply *rep)
{
    char err[256];
    size_t n = kfarm__reply__get_packed_size(rep);
    uint8_t *body = malloc(n ? n : 1);
    uint8_t *sealed = NULL;
    size_t slen = 0;
    if (!body) return;
    kfarm__reply__pack(rep, body);
    int rc = kf_frame_seal(KF_FRAME_REPLY, k->down, f->id, f->instance, f->counter, body, n,
                           &sealed, &slen, err, sizeof(err));
    free(body);
    if (rc < 0) {
        /* Too large (a job whose task outgrew the wire limit): say so. */
        Kfarm__Reply small = KFARM__REPLY__INIT;
        small.status = KFARM__STATUS__ERROR;
        small.detail = err;
        kf_log("reply not sendable: %s", err);
        n = kfarm__reply__get_packed_size(&small);
        body = malloc(n ? n : 1);
        if (!body) return;
        kfarm__reply__pack(&small, body);
        rc = kf_frame_seal(KF_FRAME_REPLY, k->down, f->id, f->instance, f->counter, body, n,
                           &sealed, &slen, err, sizeof(err));
        free(body);
        if (rc < 0) return;
    }
    pthread_mutex_lock(&s->sh->mu);
    kf_replay_put(s->sh->replay, f->hdr_mac, sealed, slen);
    pthread_mutex_unlock(&s->sh->mu);
    if (answer(s, sealed, slen, 0) < 0)
        kf_log("send failed: %s", nn_strerror(nn_errno()));
    free(sealed);
}

static unsigned cred_slot(const char *id)
{
    uint32_t h = 2166136261u;
    for (const char *c = id; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
    return h % KF_SERVER_KEY_CACHE;
}

/* The cached key of id: 1 (k and stored_hex filled) or 0. */
static int cred_get(kf_server *s, const char *id, kf_wire_key *k, char *stored_hex)
{
    int found = 0;
    unsigned i = cred_slot(id);
    pthread_mutex_lock(&s->sh->mu);
    for (int n = 0; n < 8 && s->sh->creds[i].name[0]; n++, i = (i + 1) % KF_SERVER_KEY_CACHE)
        if (!strcmp(s->sh->creds[i].name, id)) {
            *k = s->sh->creds[i].key;
            memcpy(stored_hex, s->sh->creds[i].stored_hex, sizeof(s->sh->creds[i].stored_hex));
            found = 1;
            break;
        }
    pthread_mutex_unlock(&s->sh->mu);
    return found;
}

/* Remember (k, stored_hex) for id, or forget id (k NULL: the slot becomes a
 * tombstone, "\001", which no valid name equals and lookups probe past).
 * Probes are bounded (8): a full sequence overwrites its first slot, and a
 * lookup that misses just reads the database. */
static void cred_put(kf_server *s, const char *id, const kf_wire_key *k, const char *stored_hex)
{
    unsigned i = cred_slot(id), pick = KF_SERVER_KEY_CACHE;
    pthread_mutex_lock(&s->sh->mu);
    for (int n = 0; n < 8; n++, i = (i + 1) % KF_SERVER_KEY_CACHE) {
        srv_cred *c = &s->sh->creds[i];
        if (!strcmp(c->name, id)) {
            pick = i;
            break;
        }
        if (pick == KF_SERVER_KEY_CACHE && (c->name[0] == 0 || c->name[0] == 1)) pick = i;
        if (c->name[0] == 0) break;
    }
    if (pick == KF_SERVER_KEY_CACHE) pick = cred_slot(id);
    srv_cred *c = &s->sh->creds[pick];
    if (k) {
        snprintf(c->name, sizeof(c->name), "%s", id);
        c->key = *k;
        snprintf(c->stored_hex, sizeof(c->stored_hex), "%s", stored_hex);
    } else if (!strcmp(c->name, id)) {
        OPENSSL_cleanse(c, sizeof(*c));
        c->name[0] = 1;
    }
    pthread_mutex_unlock(&s->sh->mu);
}

/* The worker's credential row. 1 found (key filled, *revoked, stored counter
 * and instance, and the stored key's hex in stored_hex[65]), 0 unknown, -1
 * database error (err). */
static int lookup_worker(kf_server *s, const char *id, kf_wire_key *k, int *revoked,
                         uint64_t *counter, char *instance, size_t icap, char *stored_hex, char *err,
                         size_t errlen)
{
    const char *p[1] = { id };
    PGresult *r = kf_db_exec(s->db,
        "SELECT encode(mac_key, 'hex'), revoked_at IS NOT NULL, msg_counter, instance_id"
        " FROM worker_credentials WHERE name = $1", 1, p, err, errlen);
    if (!r) return -1;
    int found = PQntuples(r) == 1;
    if (found) {
        uint8_t raw[KF_WIRE_KEY_LEN];
        if (kf_wire_unhex(PQgetvalue(r, 0, 0), raw, sizeof(raw)) < 0 ||
            kf_cred_from_stored(k, raw, sizeof(raw), err, errlen) < 0) {
            PQclear(r);
            return -1;
        }
        *revoked = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
        *counter = (uint64_t)kf_db_i64(r, 0, 2, 0);
        snprintf(stored_hex, 2 * KF_WIRE_KEY_LEN + 1, "%s", PQgetvalue(r, 0, 0));
        snprintf(instance, icap, "%s", PQgetisnull(r, 0, 3) ? "" : PQgetvalue(r, 0, 3));
    }
    PQclear(r);
    return found;
}

static void handle(kf_server *s, const uint8_t *msg, size_t len)
{
    char err[512], dbuf[1024];
    Kfarm__Reply rep = KFARM__REPLY__INIT;
    kf_frame f;
    /* 1. structure only: no cryptography, no protobuf */
    if (kf_frame_parse(msg, len, KF_WIRE_MAX_REQ, &f, err, sizeof(err)) < 0) {
        refuse(s, err, len, NULL);
        return;
    }
    if (f.kind != KF_FRAME_REQUEST) {
        refuse(s, "not a request frame", len, NULL);
        return;
    }
    char derr[256];
    if (kf_db_ensure(s->db, derr, sizeof(derr)) < 0) {
        refuse(s, derr, len, f.id); /* cannot authenticate without the database: retry later */
        return;
    }
    /* 2. the claimed identity's key; the header MAC (~100 bytes, whatever
     *    the frame's size); the clock window */
    kf_wire_key key;
    int revoked = 0, from_cache = 0, found = 0;
    uint64_t stored_counter = 0;
    char stored_instance[2 * KF_WIRE_INSTANCE_LEN + 1] = "";
    char stored_hex[2 * KF_WIRE_KEY_LEN + 1] = "";
    /* the key from memory when it is there (the counter update below checks
     * it is still the stored one and not revoked), else from the database */
    if (kf_cred_name_ok(f.id)) {
        from_cache = cred_get(s, f.id, &key, stored_hex);
        if (from_cache && kf_frame_check_header(&f, key.up) < 0) {
            cred_put(s, f.id, NULL, NULL); /* rotated? read it again */
            from_cache = 0;
        }
        found = from_cache ? 1
                           : lookup_worker(s, f.id, &key, &revoked, &stored_counter, stored_instance,
                                           sizeof(stored_instance), stored_hex, err, sizeof(err));
    }
    if (found < 0) {
        refuse(s, "coordinator cannot read credentials now (database); retry later", len, f.id);
        return;
    }
    if (!found || kf_frame_check_header(&f, key.up) < 0) {
        refuse(s, "authentication failed: unknown worker or wrong credential", len, f.id);
        OPENSSL_cleanse(&key, sizeof(key));
        return;
    }
    if (revoked) {
        refuse(s, "this worker's credential has been revoked (kfarm worker revoke)", len, f.id);
        return;
    }
    if (!from_cache) cred_put(s, f.id, &key, stored_hex);
    if (!kf_frame_fresh(&f, kf_wire_now_ms())) {
        refuse(s, "timestamp outside the accepted window: replay or clock drift", len, f.id);
        return;
    }
    /* 3. a nanomsg resend of bytes already answered: the same reply */
    const uint8_t *cached;
    size_t clen;
    uint8_t *copy = NULL;
    int busy = 0;
    pthread_mutex_lock(&s->sh->mu);
    if (kf_replay_get(s->sh->replay, f.hdr_mac, &cached, &clen) && cached && (copy = malloc(clen ? clen : 1)))
        memcpy(copy, cached, clen);
    if (!copy && s->raw) {
        /* a resend of a request another thread is still handling: its
         * answer (same routing header) will serve the requester */
        for (int i = 0; i < KF_SERVER_MAX_THREADS && !busy; i++)
            busy = s->sh->inflight_used[i] && !memcmp(s->sh->inflight[i], f.hdr_mac, KF_WIRE_MAC_LEN);
        if (!busy) {
            memcpy(s->sh->inflight[s->slot], f.hdr_mac, KF_WIRE_MAC_LEN);
            s->sh->inflight_used[s->slot] = 1;
        }
    }
    pthread_mutex_unlock(&s->sh->mu);
    if (copy) {
        if (answer(s, copy, clen, 0) < 0) kf_log("send failed: %s", nn_strerror(nn_errno()));
        free(copy);
        return;
    }
    if (busy) return;
    /* 4. the body MAC, then the persistent counter (replays refused after
     *    restarts and any number of newer messages) */
    if (kf_frame_check_body(&f, key.up) < 0) {
        refuse(s, "authentication failed: body does not match its MAC", len, f.id);
        return;
    }
    if (f.counter > (uint64_t)INT64_MAX || (!from_cache && f.counter <= stored_counter)) {
        refuse(s, "replayed message refused (counter not above the last accepted)", len, f.id);
        return;
    }
    peer who = { .id = f.id };
    kf_wire_hex(f.instance, KF_WIRE_INSTANCE_LEN, who.instance);
    char ctr[24];
    snprintf(ctr, sizeof(ctr), "%llu", (unsigned long long)f.counter);
    /* One statement: the counter advances only while the key that verified
     * the frame is still the stored one and not revoked; it also returns the
     * instance that holds the identity. */
    const char *pc[4] = { f.id, ctr, who.instance, stored_hex };
    PGresult *cr = kf_db_exec(s->db,
        "UPDATE worker_credentials SET msg_counter = $2::bigint,"
        " instance_seen = CASE WHEN instance_id = $3 THEN now() ELSE instance_seen END"
        " WHERE name = $1 AND msg_counter < $2::bigint AND revoked_at IS NULL"
        "   AND mac_key = decode($4, 'hex') RETURNING COALESCE(instance_id, '')", 4, pc, err, sizeof(err));
    int fresh = cr && PQntuples(cr) == 1;
    if (fresh) snprintf(stored_instance, sizeof(stored_instance), "%s", PQgetvalue(cr, 0, 0));
    if (cr) PQclear(cr);
    if (!fresh) {
        const char *why = "coordinator cannot record the message now (database); retry later";
        if (cr) {
            /* say why: rotated, revoked or replayed (the cache forgets it) */
            kf_wire_key k2;
            int rv = 0;
            uint64_t sc = 0;
            char si[2 * KF_WIRE_INSTANCE_LEN + 1], h2[2 * KF_WIRE_KEY_LEN + 1] = "";
            cred_put(s, f.id, NULL, NULL);
            int f2 = lookup_worker(s, f.id, &k2, &rv, &sc, si, sizeof(si), h2, err, sizeof(err));
            OPENSSL_cleanse(&k2, sizeof(k2));
            why = f2 < 0 ? why
                : f2 == 0 || strcmp(h2, stored_hex) ? "authentication failed: unknown worker or wrong credential"
                : rv ? "this worker's credential has been revoked (kfarm worker revoke)"
                     : "replayed message refused (counter not above the last accepted)";
        }
        refuse(s, why, len, f.id);
        OPENSSL_cleanse(&key, sizeof(key));
        return;
    }
    /* 5. only now: decode */
    hist_add(&s->sh->hist, PH_AUTH, s->t_start);
    Kfarm__Request *req = kfarm__request__unpack(NULL, f.body_len, f.body);
    lease_set *leases = NULL;
    const char *claimed = !req ? NULL
        : req->msg_case == KFARM__REQUEST__MSG_REGISTER ? req->register_->worker_id
        : req->msg_case == KFARM__REQUEST__MSG_GET_JOB ? req->get_job->worker_id
        : req->msg_case == KFARM__REQUEST__MSG_HEARTBEAT ? req->heartbeat->worker_id
        : req->msg_case == KFARM__REQUEST__MSG_RESULT ? req->result->worker_id
        : req->msg_case == KFARM__REQUEST__MSG_GOODBYE ? req->goodbye->worker_id : NULL;
    if (!req) {
        kf_log("rejected request from %s: malformed body (%zu bytes)", f.id, f.body_len);
        rep.status = KFARM__STATUS__REJECTED;
        set_detail(&rep, dbuf, sizeof(dbuf), "malformed request");
    } else if (!claimed || strcmp(claimed, f.id) != 0) {
        kf_log("rejected request from %s: it names worker '%.64s'", f.id, claimed ? claimed : "");
        rep.status = KFARM__STATUS__REJECTED;
        set_detail(&rep, dbuf, sizeof(dbuf), "the request names another worker than its credential");
    } else if (req->msg_case != KFARM__REQUEST__MSG_REGISTER &&
               strcmp(stored_instance, who.instance) != 0) {
        kf_log("refused %s from instance %.8s: identity %s is held by instance %.8s",
               req->msg_case == KFARM__REQUEST__MSG_GET_JOB ? "get_job" : "request", who.instance,
               f.id, stored_instance[0] ? stored_instance : "(none: register first)");
        rep.status = KFARM__STATUS__CONFLICT;
        set_detail(&rep, dbuf, sizeof(dbuf), stored_instance[0]
                   ? "this worker identity is now held by another process (instance mismatch): "
                     "a second process with one identity is refused; register again"
                   : "register first");
    } else {
        switch (req->msg_case) {
        case KFARM__REQUEST__MSG_REGISTER:
            on_register(s, &who, req->register_, &rep, dbuf, sizeof(dbuf));
            break;
        case KFARM__REQUEST__MSG_GET_JOB:
            on_get_job(s, req->get_job, &rep, &leases, dbuf, sizeof(dbuf));
            break;
        case KFARM__REQUEST__MSG_HEARTBEAT:
            on_heartbeat(s, req->heartbeat, &rep, dbuf, sizeof(dbuf));
            break;
        case KFARM__REQUEST__MSG_RESULT:
            on_result(s, req->result, &rep, dbuf, sizeof(dbuf));
            /* the result may carry the worker's next GetJob: answered in the
             * same reply (one round trip less per job); the reply's status
             * stays the result's, `job` is the next lease when one was granted */
            if (req->result->next && req->result->next->worker_id &&
                strcmp(req->result->next->worker_id, f.id) == 0 &&
                (rep.status == KFARM__STATUS__OK || rep.status == KFARM__STATUS__DUPLICATE ||
                 rep.status == KFARM__STATUS__STALE)) {
                Kfarm__Reply nrep = KFARM__REPLY__INIT;
                char nbuf[512];
                on_get_job(s, req->result->next, &nrep, &leases, nbuf, sizeof(nbuf));
                if (nrep.status == KFARM__STATUS__OK && nrep.job) {
                    rep.job = nrep.job;
                    rep.n_more_jobs = nrep.n_more_jobs;
                    rep.more_jobs = nrep.more_jobs;
                }
            }
            break;
        case KFARM__REQUEST__MSG_GOODBYE: {
            const char *pg[2] = { f.id, who.instance };
            if (kf_db_cmd(s->db, "UPDATE worker_credentials SET instance_id = NULL"
                                 " WHERE name = $1 AND instance_id = $2", 2, pg, err, sizeof(err)) < 0) {
                rep.status = KFARM__STATUS__ERROR;
                set_detail(&rep, dbuf, sizeof(dbuf), err);
            } else {
                kf_log("worker %s (instance %.8s) stopped and gave its identity back", f.id, who.instance);
                rep.status = KFARM__STATUS__OK;
            }
            break;
        }
        default:
            rep.status = KFARM__STATUS__REJECTED;
            set_detail(&rep, dbuf, sizeof(dbuf), "empty or unknown request");
        }
    }
    double t_phase = kf_util_now_s();
    send_reply(s, &key, &f, &rep);
    hist_add(&s->sh->hist, PH_REPLY, t_phase);
    hist_add(&s->sh->hist, PH_WHOLE, s->t_recv);
    OPENSSL_cleanse(&key, sizeof(key));
    /* the worker's clock, from its authenticated timestamp (after the reply:
     * never delays it) */
    if (req && rep.status != KFARM__STATUS__REJECTED &&
        (req->msg_case == KFARM__REQUEST__MSG_REGISTER || req->msg_case == KFARM__REQUEST__MSG_GET_JOB))
        kf_queue_note_clock(s->db, f.id, (int64_t)f.ts_ms - kf_wire_now_ms(), derr, sizeof(derr));
    lease_set_free(leases);
    if (req) kfarm__request__free_unpacked(req, NULL);
}

/* An absolute time ms from now (CLOCK_REALTIME, for pthread_cond_timedwait). */
static struct timespec in_ms(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    return ts;
}

/* The receiving thread: receive on the raw socket (with the routing
 * header) and queue each request for one serving thread (woken alone); at
 * most qcap requests wait, beyond them nanomsg holds the rest. */
static void *recv_thread(void *arg)
{
    kf_server *owner = arg;
    srv_shared *sh = owner->sh;
    while (!atomic_load(&owner->stop)) {
        pthread_mutex_lock(&sh->qmu);
        while (sh->qlen >= sh->qcap && !atomic_load(&owner->stop)) {
            struct timespec t = in_ms(200);
            pthread_cond_timedwait(&sh->qspace, &sh->qmu, &t);
        }
        pthread_mutex_unlock(&sh->qmu);
        if (atomic_load(&owner->stop)) break;
        void *body = NULL, *control = NULL;
        struct nn_iovec iov = { .iov_base = &body, .iov_len = NN_MSG };
        struct nn_msghdr hdr;
        memset(&hdr, 0, sizeof(hdr));
        hdr.msg_iov = &iov;
        hdr.msg_iovlen = 1;
        hdr.msg_control = &control;
        hdr.msg_controllen = NN_MSG;
        int n = nn_recvmsg(owner->sock, &hdr, 0);  /* wakes every 200 ms (socket timeout) */
        if (n < 0) {
            int e = nn_errno();
            if (e == EAGAIN || e == EINTR || e == ETIMEDOUT) continue;
            if (e == EBADF || e == ETERM) break;
            kf_log("receiving thread: nn_recvmsg: %s", nn_strerror(e));
            struct timespec ts = { 0, 100000000L };
            nanosleep(&ts, NULL);
            continue;
        }
        srv_msg *m = malloc(sizeof(*m));
        if (!m) { /* dropped: the worker's REQ socket sends it again */
            nn_freemsg(body);
            if (control) nn_freemsg(control);
            continue;
        }
        m->body = body;
        m->control = control;
        m->n = n;
        m->t_recv = kf_util_now_s();
        m->next = NULL;
        pthread_mutex_lock(&sh->qmu);
        if (sh->qtail) sh->qtail->next = m;
        else sh->qhead = m;
        sh->qtail = m;
        sh->qlen++;
        pthread_cond_signal(&sh->qready);
        pthread_mutex_unlock(&sh->qmu);
    }
    return NULL;
}

/* A pool thread: take the next request the receiving thread queued,
 * handle it with this thread's own database connection, answer. */
static void *serve_thread(void *arg)
{
    kf_server *c = arg, *owner = c->pool;
    srv_shared *sh = c->sh;
    while (!atomic_load(&owner->stop)) {
        pthread_mutex_lock(&sh->qmu);
        while (!sh->qhead && !atomic_load(&owner->stop)) {
            struct timespec t = in_ms(200);
            pthread_cond_timedwait(&sh->qready, &sh->qmu, &t);
        }
        srv_msg *m = sh->qhead;
        if (m) {
            sh->qhead = m->next;
            if (!sh->qhead) sh->qtail = NULL;
            sh->qlen--;
            pthread_cond_signal(&sh->qspace);
        }
        pthread_mutex_unlock(&sh->qmu);
        if (!m) continue;
        c->control = m->control;
        c->t_recv = m->t_recv;
        c->t_start = hist_add(&sh->hist, PH_QUEUE, m->t_recv);
        handle(c, m->body, (size_t)m->n);
        pthread_mutex_lock(&c->sh->mu);
        c->sh->inflight_used[c->slot] = 0;
        pthread_mutex_unlock(&c->sh->mu);
        if (c->control) nn_freemsg(c->control); /* not answered (rate-limited refusal) */
        c->control = NULL;
        nn_freemsg(m->body);
        free(m);
        atomic_fetch_add(&owner->handled, 1);
    }
    return NULL;
}

int kf_server_poll(kf_server *s, int timeout_ms, char *err, size_t errlen)
{
    if (s->raw) {
        /* the pool serves; the caller's loop only waits (a signal ends the wait) */
        struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
        return (int)atomic_exchange(&s->handled, 0);
    }
    double deadline = kf_util_now_s() + timeout_ms / 1000.0;
    int handled = 0;
    for (;;) {
        int left = (int)((deadline - kf_util_now_s()) * 1000.0);
        if (left < 0) left = 0;
        struct nn_pollfd pfd = { .fd = s->sock, .events = NN_POLLIN, .revents = 0 };
        int rc = nn_poll(&pfd, 1, left);
        if (rc < 0) {
            if (nn_errno() == EINTR) return handled;
            snprintf(err, errlen, "nn_poll: %s", nn_strerror(nn_errno()));
            return -1;
        }
        if (rc == 0) return handled;
        void *buf = NULL;
        int n = nn_recv(s->sock, &buf, NN_MSG, NN_DONTWAIT);
        if (n < 0) {
            int e = nn_errno();
            if (e == EAGAIN || e == EINTR) {
                if (left == 0) return handled;
                continue;
            }
            snprintf(err, errlen, "nn_recv: %s", nn_strerror(e));
            return -1;
        }
        s->t_recv = s->t_start = kf_util_now_s();
        handle(s, buf, (size_t)n);
        nn_freemsg(buf);
        handled++;
        if (left == 0) return handled;
    }
}

/* ---- worker credentials: the operator's writes (server.h) ---- */

int kf_server_cred_store(kf_db *db, const char *name, const char *key_hex, int rotate, char *err,
                         size_t errlen)
{
    const char *p[2] = { name, key_hex };
    PGresult *r = kf_db_exec(db, rotate
        ? "INSERT INTO worker_credentials (name, mac_key) VALUES ($1, decode($2, 'hex'))"
          " ON CONFLICT (name) DO UPDATE SET mac_key = EXCLUDED.mac_key, revoked_at = NULL,"
          " created_at = now() RETURNING name"
        : "INSERT INTO worker_credentials (name, mac_key) VALUES ($1, decode($2, 'hex'))"
          " ON CONFLICT (name) DO NOTHING RETURNING name", 2, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    PQclear(r);
    return n > 0;
}

int kf_server_cred_forget(kf_db *db, const char *name, char *err, size_t errlen)
{
    const char *p[1] = { name };
    return kf_db_cmd(db, "DELETE FROM worker_credentials WHERE name = $1 AND instance_id IS NULL", 1, p, err,
                     errlen);
}

int kf_server_cred_revoke(kf_db *db, const char *name, char *err, size_t errlen)
{
    const char *p[1] = { name };
    PGresult *r = kf_db_exec(db, "UPDATE worker_credentials SET revoked_at = now() WHERE name = $1 RETURNING name",
                             1, p, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    PQclear(r);
    return n > 0;
}
