/*
 * operator.c -- the operator socket (operator.h): a thread that answers
 * `kfarm campaign status` from a warm connection, and the CLI's side.
 *
 * One request at a time on a REP socket: receive (0.25 s timeout, so a
 * stop is seen), decode OperatorRequest, check build and command, run
 * kf_status_write into a memory stream, reply OperatorReply. The
 * connection is opened when the thread starts and again whenever it is
 * found down, so a database that was away costs no coordinator restart.
 */
#include "operator.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <nanomsg/nn.h>
#include <nanomsg/reqrep.h>

#include "db.h"
#include "kf_wire.h"
#include "log.h"
#include "status.h"

#ifndef KFARM_COMMIT
#define KFARM_COMMIT "unknown"
#endif

#define KF_OPS_PATH_MAX 100          /* sun_path is 108 bytes with "ipc://" off */
#define KF_OPS_REQUEST_MAX 4096      /* an OperatorRequest is a few names */
#define KF_OPS_REPLY_MAX (256 << 20) /* --json of a campaign with many ties */
#define KF_OPS_CONNECT_MS 250        /* the CLI's wait to reach a listener */

struct kf_ops_service {
    pthread_t thread;
    atomic_int stop;
    int sock;
    char *conninfo;
    char path[KF_OPS_PATH_MAX + 1];
    kf_db *db; /* the thread's own; NULL until the database answers */
};

/* Session options of the operator's connection: a short read never waits
 * on an operator's lock for long, and PostgreSQL's JIT (15-35 ms per
 * statement on a 1,000,000-result campaign, cmd_campaign.c) stays off. */
static const char *const OPS_PG_OPTIONS = "-c jit=off -c lock_timeout=2000 -c statement_timeout=15000";

static int ensure_db(kf_ops_service *s, char *err, size_t errlen)
{
    if (!s->db) {
        s->db = kf_db_open_with(s->conninfo, OPS_PG_OPTIONS, err, errlen);
        if (!s->db) return -1;
        kf_db_set_prepare(s->db, 1);
        return 0;
    }
    return kf_db_ensure(s->db, err, errlen);
}

/* Run the status into a memory stream. 0/1/-1 as kf_status_write; *out
 * malloc'ed (also on failure: what was written before it). A connection
 * the database dropped since the last request (a restart) is reopened by
 * kf_db_exec, which runs the statement again once. */
static int run_status(kf_ops_service *s, const Kfarm__OperatorRequest *q, char **out, size_t *len,
                      char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    if (ensure_db(s, err, errlen) < 0) return -1;
    FILE *f = open_memstream(out, len);
    if (!f) {
        snprintf(err, errlen, "open_memstream: %s", strerror(errno));
        return -1;
    }
    int rc = kf_status_write(s->db, q->campaign, q->has_json && q->json, q->has_tty && q->tty, f, err, errlen);
    fclose(f);
    return rc;
}

/* Answer one request (msg, n bytes): fills *r; out holds the bytes r->out
 * points into (caller frees). */
static void answer(kf_ops_service *s, const void *msg, int n, Kfarm__OperatorReply *r, char **out,
                   char *err, size_t errlen)
{
    *out = NULL;
    err[0] = 0;
    Kfarm__OperatorRequest *q = kfarm__operator_request__unpack(NULL, (size_t)n, msg);
    if (!q) {
        snprintf(err, errlen, "malformed operator request (%d bytes)", n);
        r->has_refused = r->refused = 1;
        r->exit_code = 1;
    } else if (strcmp(q->build, KFARM_COMMIT) != 0) {
        snprintf(err, errlen, "the coordinator runs build %s, this kfarm is build %.64s", KFARM_COMMIT,
                 q->build);
        r->has_refused = r->refused = 1;
        r->exit_code = 1;
    } else if (strcmp(q->command, "campaign status") != 0 || !q->campaign) {
        snprintf(err, errlen, "the operator socket answers \"campaign status NAME\", not \"%.64s\"",
                 q->command);
        r->has_refused = r->refused = 1;
        r->exit_code = 1;
    } else {
        size_t len = 0;
        int rc = run_status(s, q, out, &len, err, errlen);
        r->exit_code = rc ? 1 : 0;
        r->has_out = 1;
        r->out.data = (uint8_t *)*out;
        r->out.len = *out ? len : 0;
        if (rc < 0) kf_log("operator: campaign status %s: %s", q->campaign, err);
    }
    if (err[0]) r->error = err;
    if (q) kfarm__operator_request__free_unpacked(q, NULL);
}

static void *ops_thread(void *arg)
{
    kf_ops_service *s = arg;
    char err[1024];
    if (ensure_db(s, err, sizeof(err)) < 0) /* warm it now; retried per request */
        kf_log("operator socket: %s (retried on the next request)", err);
    while (!atomic_load(&s->stop)) {
        void *msg = NULL;
        int n = nn_recv(s->sock, &msg, NN_MSG, 0);
        if (n < 0) {
            int e = nn_errno();
            if (e == ETIMEDOUT || e == EAGAIN || e == EINTR) continue;
            if (e == EBADF || e == ETERM) break;
            kf_log("operator socket: receive: %s", nn_strerror(e));
            continue;
        }
        Kfarm__OperatorReply r = KFARM__OPERATOR_REPLY__INIT;
        char *out = NULL;
        answer(s, msg, n, &r, &out, err, sizeof(err));
        nn_freemsg(msg);
        size_t len = kfarm__operator_reply__get_packed_size(&r);
        uint8_t *buf = malloc(len ? len : 1);
        if (buf) {
            kfarm__operator_reply__pack(&r, buf);
            /* a CLI that gave up meanwhile: the send times out, nothing waits */
            if (nn_send(s->sock, buf, len, 0) < 0 && nn_errno() != ETIMEDOUT)
                kf_log("operator socket: reply: %s", nn_strerror(nn_errno()));
        }
        free(buf);
        free(out);
    }
    return NULL;
}

kf_ops_service *kf_ops_service_start(const char *conninfo, const char *path, char *err, size_t errlen)
{
    if (!path || !path[0] || strlen(path) > KF_OPS_PATH_MAX) {
        snprintf(err, errlen, "--operator-socket: expected a file name of 1..%d bytes", KF_OPS_PATH_MAX);
        return NULL;
    }
    kf_ops_service *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(s->path, sizeof(s->path), "%s", path);
    s->conninfo = conninfo ? strdup(conninfo) : NULL;
    atomic_init(&s->stop, 0);
    char addr[KF_OPS_PATH_MAX + 8];
    snprintf(addr, sizeof(addr), "ipc://%s", path);
    int recv_ms = 250, send_ms = 1000, maxsz = KF_OPS_REQUEST_MAX;
    s->sock = nn_socket(AF_SP, NN_REP);
    if (s->sock < 0 || nn_setsockopt(s->sock, NN_SOL_SOCKET, NN_RCVTIMEO, &recv_ms, sizeof(int)) < 0 ||
        nn_setsockopt(s->sock, NN_SOL_SOCKET, NN_SNDTIMEO, &send_ms, sizeof(int)) < 0 ||
        nn_setsockopt(s->sock, NN_SOL_SOCKET, NN_RCVMAXSIZE, &maxsz, sizeof(int)) < 0 ||
        nn_bind(s->sock, addr) < 0) {
        snprintf(err, errlen, "operator socket %s: %s", path, nn_strerror(nn_errno()));
        goto fail;
    }
    /* nanomsg binds with the process's umask: only the coordinator's user
     * may ask (operator.h, Trust) */
    if (chmod(path, 0600) < 0) {
        snprintf(err, errlen, "operator socket %s: chmod 0600: %s", path, strerror(errno));
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, ops_thread, s) != 0) {
        snprintf(err, errlen, "operator socket: cannot start its thread");
        goto fail;
    }
    return s;
fail:
    if (s->sock >= 0) nn_close(s->sock);
    free(s->conninfo);
    free(s);
    return NULL;
}

void kf_ops_service_stop(kf_ops_service *s)
{
    if (!s) return;
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
    nn_close(s->sock);
    unlink(s->path);
    kf_db_close(s->db);
    free(s->conninfo);
    free(s);
}

int kf_ops_status(const char *path, const char *campaign, int json, int tty, int timeout_ms,
                  kf_ops_answer *ans, char *err, size_t errlen)
{
    memset(ans, 0, sizeof(*ans));
    if (strlen(path) > KF_OPS_PATH_MAX) {
        snprintf(err, errlen, "operator socket %s: name longer than %d bytes", path, KF_OPS_PATH_MAX);
        return -1;
    }
    /* Is anything listening? A REQ socket queues its request until a peer
     * appears, so a socket file left by a coordinator that was killed would
     * cost the whole answer timeout: connect(2) says at once. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path));
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        snprintf(err, errlen, "no coordinator listens at %s (%s)", path, strerror(e));
        return e == ENOENT ? 1 : -1;
    }
    close(fd);
    Kfarm__OperatorRequest q = KFARM__OPERATOR_REQUEST__INIT;
    q.build = (char *)KFARM_COMMIT;
    q.command = (char *)"campaign status";
    q.campaign = (char *)campaign;
    q.has_json = q.has_tty = 1;
    q.json = json != 0;
    q.tty = tty != 0;
    size_t qlen = kfarm__operator_request__get_packed_size(&q);
    uint8_t qbuf[KF_OPS_REQUEST_MAX];
    if (qlen > sizeof(qbuf)) {
        snprintf(err, errlen, "campaign name too long for the operator socket");
        return -1;
    }
    kfarm__operator_request__pack(&q, qbuf);
    char addr[KF_OPS_PATH_MAX + 8];
    snprintf(addr, sizeof(addr), "ipc://%s", path);
    int send_ms = KF_OPS_CONNECT_MS, maxsz = KF_OPS_REPLY_MAX, linger = 0;
    int sock = nn_socket(AF_SP, NN_REQ);
    if (sock < 0) {
        snprintf(err, errlen, "nn_socket: %s", nn_strerror(nn_errno()));
        return -1;
    }
    void *msg = NULL;
    int rc = -1, n = -1;
    if (nn_setsockopt(sock, NN_SOL_SOCKET, NN_SNDTIMEO, &send_ms, sizeof(int)) < 0 ||
        nn_setsockopt(sock, NN_SOL_SOCKET, NN_RCVTIMEO, &timeout_ms, sizeof(int)) < 0 ||
        nn_setsockopt(sock, NN_SOL_SOCKET, NN_RCVMAXSIZE, &maxsz, sizeof(int)) < 0 ||
        nn_setsockopt(sock, NN_SOL_SOCKET, NN_LINGER, &linger, sizeof(int)) < 0 ||
        nn_connect(sock, addr) < 0) {
        snprintf(err, errlen, "operator socket %s: %s", path, nn_strerror(nn_errno()));
        goto done;
    }
    if (nn_send(sock, qbuf, qlen, 0) < 0) {
        snprintf(err, errlen, "operator socket %s: no coordinator answers (%s)", path, nn_strerror(nn_errno()));
        goto done;
    }
    if ((n = nn_recv(sock, &msg, NN_MSG, 0)) < 0) {
        snprintf(err, errlen, "operator socket %s: no answer within %d ms (%s)", path, timeout_ms,
                 nn_strerror(nn_errno()));
        goto done;
    }
    Kfarm__OperatorReply *r = kfarm__operator_reply__unpack(NULL, (size_t)n, msg);
    if (!r) {
        snprintf(err, errlen, "operator socket %s: malformed answer (%d bytes)", path, n);
        goto done;
    }
    if (r->has_refused && r->refused) {
        snprintf(err, errlen, "the coordinator at %s refused: %s", path, r->error ? r->error : "no reason");
    } else if ((ans->out = malloc(r->has_out ? r->out.len + 1 : 1))) {
        ans->out_len = r->has_out ? r->out.len : 0;
        if (ans->out_len) memcpy(ans->out, r->out.data, ans->out_len);
        ans->out[ans->out_len] = 0;
        ans->exit_code = r->exit_code;
        snprintf(ans->error, sizeof(ans->error), "%s", r->error ? r->error : "");
        rc = 0;
    } else {
        snprintf(err, errlen, "out of memory");
    }
    kfarm__operator_reply__free_unpacked(r, NULL);
done:
    if (msg) nn_freemsg(msg);
    nn_close(sock);
    return rc;
}
